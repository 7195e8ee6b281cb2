"""vase in the stack its users run (issue 25): exports ms-swift reads from anywhere, ms-swift data read faithfully, the
tiny model at the public Qwen2.5-VL ids, vase's reward as an ms-swift plugin and as TRL reward functions. The real
ms-swift and TRL runs are ``make stack-check`` (the slow test at the end)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_python
from tests.test_user_paths import tree_hash
from vase.annotate.vocab import DIMENSIONS
from vase.data.layouts import read_records
from vase.errors import ConfigError, DataError
from vase.views import VIEWS

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "vase" / "integrations" / "swift_plugin.py"


def _export(src: Path, out: Path, form: str, cache: Path, *extra: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return run_python(["-m", "vase.data.export", str(src), str(out), "--to", form, "--cache-dir", str(cache),
                       "--resolution", "32", *extra], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)


@pytest.fixture
def fresh(synthetic_root: Path, tmp_path: Path) -> Path:
    """A dataset as it comes: annotations and GLB models, no views."""
    dest = tmp_path / "fresh"
    shutil.copytree(synthetic_root, dest, ignore=shutil.ignore_patterns("images", "synthetic.json", ".vase-built"))
    return dest


# ------------------------------------------------------------------------------------------------ export


def test_export_of_a_fresh_dataset_renders_views_into_the_cache_and_writes_absolute_paths(fresh: Path,
                                                                                         tmp_path: Path) -> None:
    before = tree_hash(fresh)
    out, cache = tmp_path / "swift", tmp_path / "cache"
    p = _export(fresh, out, "swift", cache)
    assert p.returncode == 0, p.stderr[-2000:]
    assert tree_hash(fresh) == before  # rendered into the cache, never into the dataset
    assert list((cache / "renders").glob("*/renders/r32-fov35/images/front/*.png"))  # keyed by its settings
    lines = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    paths = [p for line in lines for p in line["images"]]
    assert paths and all(Path(p).is_absolute() and Path(p).is_file() and Path(p).is_relative_to(out) for p in paths)
    assert all(len(line["images"]) == len(VIEWS) for line in lines)


def test_export_reads_views_the_render_command_put_in_the_cache(fresh: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    r = run_python(["-m", "vase.data.render", "--root", str(fresh), "--cache-dir", str(cache), "--resolution", "32"],
                   cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    stamps = {p: p.stat().st_mtime_ns for p in (cache / "renders").rglob("*.png")}
    p = _export(fresh, tmp_path / "out", "swift", cache)  # at the settings they were rendered at (32 pixels)
    assert p.returncode == 0, p.stderr[-2000:]
    assert {p: p.stat().st_mtime_ns for p in (cache / "renders").rglob("*.png")} == stamps  # read, not re-rendered


def test_relative_export_names_paths_inside_the_folder(fresh: Path, tmp_path: Path) -> None:
    p = _export(fresh, tmp_path / "rel", "swift", tmp_path / "cache", "--relative")
    assert p.returncode == 0, p.stderr[-2000:]
    line = json.loads((tmp_path / "rel" / "train.jsonl").read_text().splitlines()[0])
    assert all(not Path(x).is_absolute() and (tmp_path / "rel" / x).is_file() for x in line["images"])


def test_swift_grpo_export_has_the_user_turn_a_solution_and_the_six_dimensions(fresh: Path, tmp_path: Path) -> None:
    p = _export(fresh, tmp_path / "grpo", "swift-grpo", tmp_path / "cache")
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [json.loads(x) for x in (tmp_path / "grpo" / "train.jsonl").read_text().splitlines()]
    recs = {r.id: r for r in read_records(fresh)["train"]}
    captions = [x for x in lines if x["task"] == "caption"]
    assert len(captions) == len(recs)
    for line in lines:
        assert [m["role"] for m in line["messages"]] == ["user"] and line["messages"][0]["content"].startswith(
            "<image>" * len(VIEWS))
        rec = recs[line["id"]]
        if line["task"] == "caption":
            assert line["solution"] == rec.caption and line["dating"] == list(rec.dating)
            assert all(line[d] is not None for d in DIMENSIONS)
        else:  # a QA line states its own dimension only
            assert [d for d in DIMENSIONS if line[d] is not None] == [line["task"]]
    # read back by vase: the same vases with their six dimensions
    back = {r.id: r for r in read_records(tmp_path / "grpo")["train"]}
    assert set(back) == set(recs) and all(back[i].dating == recs[i].dating and back[i].shape == recs[i].shape
                                          for i in recs)


def test_swift_grpo_export_refuses_vases_without_dimensions(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (32, 32)).save(tmp_path / "a.png")
    line = {"messages": [{"role": "user", "content": "<image>Describe."}, {"role": "assistant", "content": "A vase."}],
            "images": ["a.png"]}
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.jsonl").write_text(json.dumps(line) + "\n")
    shutil.copy(tmp_path / "a.png", tmp_path / "src" / "a.png")
    p = _export(tmp_path / "src", tmp_path / "out", "swift-grpo", tmp_path / "cache")
    assert p.returncode == 2 and "lack some of the six dimensions" in p.stderr and "'a'" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ reading ms-swift


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    return path


CHAT = {"messages": [{"role": "system", "content": "You are a museum curator."},
                     {"role": "user", "content": "<image>Describe this vase."},
                     {"role": "assistant", "content": "An Attic red-figure kylix."},
                     {"role": "user", "content": "What is the shape of the vase?"},
                     {"role": "assistant", "content": "Kylix."},
                     {"role": "user", "content": "Who painted it?"},
                     {"role": "assistant", "content": "Douris."}], "images": ["a.png"]}


def test_a_multi_turn_chat_becomes_one_sample_per_pair_with_its_system_prompt(tmp_path: Path) -> None:
    (rec,) = read_records(_write(tmp_path / "d.jsonl", [CHAT]))["all"]
    assert rec.caption == "An Attic red-figure kylix." and rec.prompt == "Describe this vase."
    assert rec.qa == [{"dimension": "shape", "question": "What is the shape of the vase?", "answer": "Kylix."},
                      {"dimension": "other", "question": "Who painted it?", "answer": "Douris."}]
    assert rec.system == "You are a museum curator."
    from vase.data.datamodule import samples_for
    from vase.data.dataset import VaseExample

    samples = samples_for(VaseExample(rec, []), "both")
    assert [(s.prompt, s.answer) for s in samples] == [("Describe this vase.", "An Attic red-figure kylix."),
                                                        ("What is the shape of the vase?", "Kylix."),
                                                        ("Who painted it?", "Douris.")]
    assert {s.system for s in samples} == {"You are a museum curator."} and len({s.id for s in samples}) == 3


def test_the_system_prompt_reaches_the_model_input(tiny_model_dir: Path) -> None:
    from vase.data.datamodule import prompt_text
    from vase.models.loading import load_processor

    proc = load_processor(str(tiny_model_dir))
    text = prompt_text(proc, 6, "Describe this vase.", "You are a museum curator.")
    assert text.startswith("<|im_start|>system\nYou are a museum curator.<|im_end|>") and "helpful" not in text
    assert "You are a helpful assistant." in prompt_text(proc, 6, "Describe this vase.")


def test_grpo_lines_are_read_and_a_broken_chat_is_an_error_naming_its_line(tmp_path: Path) -> None:
    grpo = {"messages": [{"role": "user", "content": "<image>Describe this vase."}], "solution": "A kylix.",
            "images": ["b.png"]}
    (rec,) = read_records(_write(tmp_path / "g.jsonl", [grpo]))["all"]
    assert rec.caption == "A kylix."
    twice = {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                          {"role": "assistant", "content": "c"}], "images": ["c.png"]}
    with pytest.raises(DataError, match=r"bad\.jsonl:2: messages 0 and 1 are two user turns"):
        read_records(_write(tmp_path / "bad.jsonl", [CHAT, twice]))
    unanswered = {"messages": [{"role": "user", "content": "a"}], "images": ["d.png"]}
    with pytest.raises(DataError, match=r"u\.jsonl:1: the last user turn has no answer"):
        read_records(_write(tmp_path / "u.jsonl", [unanswered]))


def test_check_accepts_caption_only_swift_data_with_a_note_and_grpo_asks_for_dimensions(tmp_path: Path) -> None:
    from PIL import Image

    from vase.data.check import check_dataset

    Image.new("RGB", (32, 32), (90, 40, 20)).save(tmp_path / "a.png")
    path = _write(tmp_path / "d.jsonl", [CHAT])
    rep = check_dataset(path, progress=False)
    assert rep["ok"] and any("train captions" in x and "GRPO" in x for x in rep["info"]), rep
    grpo = check_dataset(path, progress=False, stage="grpo")
    assert not grpo["ok"] and grpo["counts"] == {"missing_dimension": 1}


# ------------------------------------------------------------------------------------------------ tiny model ids


def test_the_tiny_model_can_sit_at_the_public_qwen_ids_and_the_default_keeps_its_cache_key(tmp_path: Path) -> None:
    import torch
    from PIL import Image
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

    from vase.models.tiny import TinySpec, build_tiny

    # the default's cache key is the one it had before the option (caches and README runs keep their models)
    assert TinySpec().fingerprint() == "99e4806802c2"
    path = build_tiny(tmp_path / "pub", TinySpec(public_token_ids=True))
    proc = AutoProcessor.from_pretrained(path)
    tok = proc.tokenizer
    public = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<|vision_start|>": 151652,
              "<|vision_end|>": 151653, "<|vision_pad|>": 151654, "<|image_pad|>": 151655, "<|video_pad|>": 151656}
    assert {t: tok.convert_tokens_to_ids(t) for t in public} == public
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path)
    assert (model.config.image_token_id, model.config.video_token_id) == (151655, 151656)
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]}]
    text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    enc = proc(text=[text], images=[Image.new("RGB", (112, 112))], return_tensors="pt")
    assert int((enc["input_ids"] == 151655).sum()) == 16  # one view, 16 visual tokens: expanded, not collapsed
    with torch.no_grad():
        assert model(**enc).logits.shape[-1] == len(tok)


# ------------------------------------------------------------------------------------------------ reward: ms-swift


def _load_plugin():
    spec = importlib.util.spec_from_file_location("vase_swift_plugin_test", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TARGET = {"fabric": "Athenian", "technique": "red-figure", "shape": "kylix", "dating": [-480, -470],
          "decoration": "a symposium scene", "attribution": "Douris"}
GOOD = "Attic red-figure kylix, c. 480–470 BCE, depicting a symposium scene; attributed to Douris."
COMPLETIONS = [GOOD, "A black-figure amphora.", "Kylix kylix kylix kylix kylix kylix."]


def _columns(n: int = 3) -> dict[str, list]:
    cols = {d: [TARGET[d]] * n for d in DIMENSIONS}
    return {**cols, "solution": [GOOD] * n, "id": ["v"] * n, "task": ["caption"] * n,
            "messages": [[{"role": "user", "content": "<image>Describe."}]] * n}


def test_the_plugin_registers_the_papers_name_and_one_orm_per_term_and_scores_as_vase_does(monkeypatch) -> None:
    from vase.rewards import reward_from_config

    monkeypatch.delenv("VASE_REWARD", raising=False)
    plugin = _load_plugin()
    names = set(plugin.orms)
    assert {"external_vase_acc", "vase_fabric", "vase_decoration", "vase_penalty", "vase_bonus"} <= names
    assert "vase_invrender" not in names  # weight 0: not a term that counts
    total = plugin.orms["external_vase_acc"](args=None)(COMPLETIONS, **_columns())
    want = reward_from_config("vase6d")(COMPLETIONS, targets=[TARGET] * 3, reference=[GOOD] * 3)
    assert total == pytest.approx(want, abs=1e-9) and total[0] > 1.0 > total[1]
    weights = plugin.shared_reward().terms
    summed = [sum(w * plugin.orms[f"vase_{n}"]()(COMPLETIONS, **_columns())[k] for n, w in weights.items())
              for k in range(3)]
    assert summed == pytest.approx(total, abs=1e-9)
    assert plugin.swift_args()[:2] == ["--reward_funcs", "vase_fabric"]


def test_the_plugin_reward_follows_vase_reward_and_its_overrides(tmp_path: Path, monkeypatch) -> None:
    from vase.integrations.columns import ColumnReward, load_reward

    run_config = tmp_path / "run" / "config.yaml"  # a run's saved config: its reward section is taken
    run_config.parent.mkdir()
    from omegaconf import OmegaConf

    from vase.config import load_option

    OmegaConf.save(OmegaConf.create({"seed": 0, "reward": load_option("reward", "vase6d")}), run_config)
    monkeypatch.setenv("VASE_REWARD", str(run_config))
    monkeypatch.setenv("VASE_REWARD_OVERRIDES", "weights.shape=0.6 tau=0.5")
    r = ColumnReward()
    assert r.reward.weights["shape"] == 0.6 and r.reward.tau == 0.5
    assert r.total(COMPLETIONS, _columns()) != ColumnReward(load_reward("vase6d", [])).total(COMPLETIONS, _columns())
    with pytest.raises(ConfigError, match="nope.yaml': no such file"):
        load_reward(str(tmp_path / "nope.yaml"), [])
    with pytest.raises(ConfigError, match="'vase7d' is not a known option"):
        load_reward("vase7d", [])


def test_columns_without_targets_are_an_error_naming_what_is_needed() -> None:
    from vase.integrations.columns import ColumnReward, load_reward

    r = ColumnReward(load_reward("vase6d", []))
    with pytest.raises(DataError, match="six dimension columns .* 'metadata' column .* 'solution' column"):
        r.total(COMPLETIONS, {"messages": [[]] * 3})
    with pytest.raises(DataError, match="column 'solution' has 2 values for 3 completions"):
        r.total(COMPLETIONS, {"solution": [GOOD] * 2})
    # the released dataset's raw metadata line serves as targets too, the same as the six columns
    from vase.annotate.records import VaseRecord, raw_metadata

    meta = raw_metadata(VaseRecord("v", **{**TARGET, "dating": tuple(TARGET["dating"])}))
    by_meta = r.total(COMPLETIONS, {"metadata": [meta] * 3, "solution": [GOOD] * 3})
    assert by_meta == pytest.approx(r.total(COMPLETIONS, _columns()), abs=1e-9)


def test_the_reward_imports_without_the_training_stack() -> None:
    code = ("import sys, importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('p', {str(PLUGIN)!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "import vase.integrations.trl\n"
            "heavy = {'pytorch_lightning', 'lightning', 'moderngl', 'trimesh', 'torchmetrics', 'wandb', 'open_clip',"
            " 'transformers', 'peft', 'qdrant_client', 'submitit'}\n"
            "print(sorted(heavy & {k.split('.')[0] for k in sys.modules}))\n")
    p = run_python(["-c", code], cwd=ROOT, timeout=120, fresh=True)  # a new process: what it loads is the question
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr[-2000:]


# ------------------------------------------------------------------------------------------------ reward: TRL


def test_trl_reward_functions_are_named_by_term_and_weighted_to_the_total() -> None:
    from vase.integrations.trl import reward_functions, total_function
    from vase.rewards import reward_from_config

    funcs, weights = reward_functions("vase6d", [])
    assert [f.__name__ for f in funcs] == ["fabric", "technique", "decoration", "shape", "dating", "attribution",
                                           "penalty", "bonus"]
    extra = {"prompts": [[]] * 3, "completion_ids": [[1]] * 3, "trainer_state": None}  # what TRL adds
    values = [f(COMPLETIONS, **_columns(), **extra) for f in funcs]
    summed = [sum(w * v[k] for w, v in zip(weights, values)) for k in range(3)]
    want = reward_from_config("vase6d")(COMPLETIONS, targets=[TARGET] * 3, reference=[GOOD] * 3)
    assert summed == pytest.approx(want, abs=1e-9)
    assert total_function("vase6d", [])(COMPLETIONS, **_columns(), **extra) == pytest.approx(want, abs=1e-9)


def test_trl_dataset_from_a_grpo_export(fresh: Path, tmp_path: Path) -> None:
    from vase.integrations.trl import grpo_dataset, grpo_rows

    p = _export(fresh, tmp_path / "grpo", "swift-grpo", tmp_path / "cache")
    assert p.returncode == 0, p.stderr[-2000:]
    rows = grpo_rows(tmp_path / "grpo" / "train.jsonl")
    assert rows[0]["prompt"][0]["content"].startswith("These are views")  # TRL adds the image parts itself
    data = grpo_dataset(tmp_path / "grpo" / "train.jsonl")
    first = data[0]
    assert len(first["images"]) == len(VIEWS) and first["images"][0].size == (32, 32)
    assert set(DIMENSIONS) <= set(data.column_names) and "solution" in data.column_names
    _write(tmp_path / "sft.jsonl", [CHAT])
    with pytest.raises(DataError, match=r"sft\.jsonl:1: not a GRPO line"):
        grpo_rows(tmp_path / "sft.jsonl")


# ------------------------------------------------------------------------------------------------ the real stack


@pytest.mark.slow
def test_make_stack_check_passes_with_the_real_ms_swift_and_trl() -> None:
    p = run_python(["-m", "vase.checks.stack_check"], cwd=ROOT, timeout=3600)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    for part in ("export", "swift-sft", "swift-grpo", "plugin-parity", "trl-grpo", "swift-read"):
        assert f"PASS  {part}" in p.stdout, p.stdout[-4000:]
