"""The evaluation suite: scoring files, agreement with the paper's method, image CLIPScore, VQA, leaderboards, DDP."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, run_python

sys.path.insert(0, str(ROOT))
from benchmarks import paper_method  # noqa: E402

CAPS = [
    "Athenian red-figure kylix, c. 480–470 BCE, depicting a symposium scene; attributed to Douris.",
    "Corinthian black-figure alabastron, c. 600–575 BCE, depicting an animal frieze.",
    "Athenian white-ground lekythos, c. 450–425 BCE, depicting a woman at a grave stele.",
    "Apulian red-figure krater, c. 350–325 BCE, depicting Dionysos with satyrs and maenads.",
    "Athenian black-figure amphora, c. 540–530 BCE, depicting Achilles and Ajax playing dice; attributed to Exekias.",
    "Laconian black-figure kylix, c. 560–550 BCE, depicting a chariot race.",
]
GENS = [
    "Athenian red-figure cup, c. 480 BCE, a symposium.",
    "Corinthian alabastron with an animal frieze.",
    "Athenian white-ground lekythos, c. 450–425 BCE, depicting a woman at a grave stele.",
    "Apulian red-figure krater with Dionysos.",
    "Athenian black-figure amphora by Exekias, Achilles and Ajax.",
    "A kylix.",
]


@pytest.fixture(scope="module")
def encoders(tiny_clip_dir):
    from vase.metrics.encoders import HFCLIPEncoder, SentenceEncoder

    return HFCLIPEncoder(str(tiny_clip_dir)), SentenceEncoder("packaged:all-MiniLM-L6-v2")


def test_agrees_with_the_papers_method(encoders) -> None:
    from vase.metrics import CaptionScorer

    clip, sent = encoders
    ours = CaptionScorer(clip, sent).score(GENS, CAPS)
    ref = paper_method.score(clip, sent, GENS, CAPS)
    for k in ("clip_score", "fid_score", "lexical_similarity", "overall_score"):
        assert ours[k] == pytest.approx(ref[k], abs=1e-4), k
    for k in ("r_at_1", "r_at_5", "r_at_10"):
        assert abs(ours[k] - ref[k]) <= 1 / len(CAPS) + 1e-9, k


def _write_paper_json(path: Path, captions: list[str], ids: list[str]) -> None:
    path.write_text(json.dumps([{"images": [f"{i}_ac001001.jpg"], "caption": c} for i, c in zip(ids, captions)]))


def test_score_task_on_paper_format_and_jsonl(tmp_path: Path, session_dirs: dict) -> None:
    ids = [f"{'%08x' % (i + 1)}-aaaa-bbbb-cccc-0123456789ab_{i}" for i in range(len(CAPS))]
    gt = tmp_path / "gt.json"
    _write_paper_json(gt, CAPS, ids)
    gen = tmp_path / "gen.jsonl"  # our JSONL, one item missing and one extra
    gen.write_text("".join(json.dumps({"id": i, "caption": c}) + "\n" for i, c in zip(ids[1:], GENS[1:]))
                   + json.dumps({"id": "ffffffff-0000-0000-0000-000000000000_9", "caption": "extra"}) + "\n")
    out = tmp_path / "out" / "OUT.json"
    p = run_python(["evaluate.py", "action=score", f"generated={gen}", f"ground_truth={gt}", f"output={out}",
                    "logger=none", f"paths.cache_dir={session_dirs['cache']}", f"hydra.run.dir={tmp_path / 'run'}"],
                   cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(out.read_text())
    for k in ("clip_score", "fid_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity", "overall_score", "n_pairs"):
        assert k in res
    assert (res["n_pairs"], res["matched"], res["unmatched_generated"], res["unmatched_reference"]) == (5, 5, 1, 1)
    expected_lex = paper_method.lexical(GENS[1:], CAPS[1:])
    assert res["lexical_similarity"] == pytest.approx(expected_lex, abs=1e-6)
    assert out.with_suffix(".md").read_text().startswith("| Model |")
    assert "matched 5 pairs; unmatched: 1 generated" in p.stdout and "1 ground truth" in p.stdout


def test_a_model_that_fails_to_load_raises_naming_it(tmp_path: Path) -> None:
    gt = tmp_path / "gt.json"
    _write_paper_json(gt, CAPS[:2], ["abc_0", "abc_1"])
    p = run_python(["evaluate.py", "action=score", f"generated={gt}", f"ground_truth={gt}",
                    f"output={tmp_path / 'o.json'}", "logger=none", "metrics.clip.backend=hf",
                    "metrics.clip.build_tiny=false", "metrics.clip.model=/nowhere/clip",
                    f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, timeout=300)
    assert p.returncode != 0
    assert "/nowhere/clip" in p.stderr and "metrics.clip.model" in p.stderr
    assert not (tmp_path / "o.json").exists()


def test_open_clip_backend_text_and_images(session_dirs: dict) -> None:
    from PIL import Image

    from vase.errors import MetricError
    from vase.metrics.encoders import OpenCLIPEncoder

    w = session_dirs["cache"] / "models" / "tiny-open-clip" / "open_clip_model.pt"
    enc = OpenCLIPEncoder("vase-tiny-clip", str(w), build_tiny=True)
    t = enc.encode(["a red-figure kylix", "a black-figure amphora", "a red-figure kylix"])
    assert t.shape == (3, 64) and torch.allclose(t[0], t[2]) and not torch.allclose(t[0], t[1])
    im = enc.encode_images([Image.new("RGB", (64, 64), (200, 90, 40)), Image.new("RGB", (64, 64), (20, 20, 20))])
    assert im.shape == (2, 64)
    with pytest.raises(MetricError, match="missing.pt"):
        OpenCLIPEncoder("vase-tiny-clip", str(w.parent / "missing.pt"))


def test_image_clip_score_by_hand() -> None:
    from vase.metrics.caption_metrics import ImageCaptionCLIPScore

    views = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [-1.0, 0.0]]])  # 2 items x 2 views
    caps = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    m = ImageCaptionCLIPScore()
    m.update(views, caps)
    # item 0: views cos 1 and 0 -> (100 + 0) / 2; item 1: cos 1 and -0.707 -> (100 + 0) / 2
    assert float(m.compute()) == pytest.approx(50.0)


def _record(vid: str = "abc_0"):
    from vase.annotate import VaseRecord, annotate

    return annotate(VaseRecord(id=vid, fabric="Athenian", technique="red-figure", shape="kylix", dating=(-480, -470),
                               decoration="a symposium scene", attribution="the Berlin Painter"))


def test_multiple_choice_options_are_deterministic_and_valid() -> None:
    from vase.annotate.multiple_choice import mc_options
    from vase.annotate.vocab import DIMENSIONS, canonical, terms

    rec = _record()
    for dim in DIMENSIONS:
        opts, ans = mc_options(rec, dim, 4)
        assert (opts, ans) == mc_options(rec, dim, 4)  # same every run
        assert len(opts) == len(set(opts)) == 4
        assert opts[ans] == rec.dimension_text(dim)
        if dim != "dating":
            assert all(canonical(dim, o) in terms(dim) for o in opts)
    assert mc_options(_record("xyz_1"), "shape", 4) != mc_options(rec, "shape", 4)


@pytest.mark.parametrize("answer, expected", [("B", 1), ("(C) something", 2), ("D. Laconian", 3), ("  a", None),
                                              ("Athenian", 0), ("no idea at all", None), ("", None)])
def test_parse_choice(answer: str, expected) -> None:
    from vase.prompt_tasks.mc import parse_choice

    assert parse_choice(answer, ["Athenian", "Corinthian", "Boeotian", "Laconian"]) == expected


def test_score_vqa_by_hand() -> None:
    from vase.eval.vqa import score_vqa
    from vase.rewards import reward_from_config

    rows = [
        {"protocol": "open", "dimension": "fabric", "caption": "Attic.", "reference": "Athenian."},
        {"protocol": "open", "dimension": "fabric", "caption": "Corinthian.", "reference": "Athenian."},
        {"protocol": "open", "dimension": "dating", "caption": "c. 480–470 BCE", "reference": "C. 480–470 BCE."},
        {"protocol": "mc", "dimension": "shape", "caption": "A", "options": ["kylix", "amphora"], "answer_index": 0},
        {"protocol": "mc", "dimension": "shape", "caption": "B", "options": ["kylix", "amphora"], "answer_index": 0},
        {"protocol": "mc", "dimension": "shape", "caption": "zzq 17", "options": ["kylix", "amphora"],
         "answer_index": 0},
        {"protocol": "mc", "dimension": "fabric", "caption": "", "options": ["Attic", "Corinthian", "Laconian"],
         "answer_index": 1},
    ]
    s = score_vqa(rows, reward_from_config(), tau=0.7)
    assert s["open"]["accuracy"] == {"fabric": 0.5, "dating": 1.0}
    assert s["open"]["mean"] == pytest.approx(0.75)
    assert s["mc"]["accuracy"] == {"fabric": 0.0, "shape": pytest.approx(1 / 3)} and s["mc"]["n"] == 4
    assert s["mc"]["unparsed"] == {"fabric": 1, "shape": 1}
    assert s["mc"]["chance"] == {"fabric": pytest.approx(1 / 3), "shape": 0.5}
    from vase.eval.vqa import vqa_table

    table = vqa_table(s, "m")
    assert "0.0 % (1 unparsed)" in table and "| chance | multiple choice (letter) |" in table


def test_vqa_task_end_to_end(tmp_path: Path, session_dirs: dict, synthetic_root: Path) -> None:
    from tests.conftest import compose_cfg
    from vase.pipeline.evaluate import run_evaluation

    cfg = compose_cfg("evaluate", ["action=vqa", "logger=none", "data.synthetic.num_vases=8", "render.resolution=64",
                                   "vqa.max_new_tokens=4", f"output={tmp_path / 'vqa.json'}"], tmp_path, session_dirs)
    out = run_evaluation(cfg)
    saved = json.loads((tmp_path / "vqa.json").read_text())
    assert set(saved["vqa"]) == {"open", "mc"}
    assert saved["vqa"]["mc"]["n"] == 2 * 6 and len(saved["vqa"]["mc"]["accuracy"]) == 6
    assert "multiple choice" in (tmp_path / "vqa.md").read_text()
    assert len((tmp_path / "answers_vqa.jsonl").read_text().splitlines()) == 2 * 6 * 2
    assert out["scores"]["vqa/mc/mean"] == saved["vqa"]["mc"]["mean"]


def test_multiple_choice_by_option_likelihood_is_the_answers_log_probability(tmp_path: Path, tiny_model_dir: Path,
                                                                            synthetic_root: Path) -> None:
    """Each option's score is the summed log-probability of its tokens (and the closing token) after the prompt,
    computed here by hand one option at a time; the pick is the best; the rows resume from their JSONL."""
    import torch
    from omegaconf import OmegaConf

    from vase.data.dataset import VaseDataset
    from vase.eval.generate import option_loglik_rows
    from vase.eval.vqa import score_vqa, vqa_items
    from vase.models.loading import load_model_and_processor
    from vase.rewards import reward_from_config

    model, processor = load_model_and_processor(OmegaConf.create({
        "name_or_path": str(tiny_model_dir), "dtype": "float32", "processor": {"min_pixels": 3136, "max_pixels": 12544}}))
    ds = VaseDataset(synthetic_root, "val")
    items = vqa_items(ds, "ll")[:6]
    assert all(it.prompt.endswith("of the vase?") and it.reference.endswith(".") for it in items)
    out = tmp_path / "ll.jsonl"
    rows = option_loglik_rows(model, processor, items, out, batch_size=2, progress=False)
    it, row = items[2], rows[2]
    tok = processor.tokenizer
    end = tok("<|im_end|>\n", add_special_tokens=False)["input_ids"]
    by_hand = []
    for option in it.extra["options"]:
        from vase.data.datamodule import encode_prompts

        enc = encode_prompts(processor, [it.prompt], [it.images()], "right")
        ans = tok(option, add_special_tokens=False)["input_ids"] + end
        ids = torch.cat([enc["input_ids"], torch.tensor([ans])], dim=1)
        mm = torch.cat([enc["mm_token_type_ids"], torch.zeros((1, len(ans)), dtype=enc["mm_token_type_ids"].dtype)], 1)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), mm_token_type_ids=mm,
                           pixel_values=enc["pixel_values"], image_grid_thw=enc["image_grid_thw"]).logits[0]
        logp = torch.log_softmax(logits[-len(ans) - 1:-1].float(), -1)
        by_hand.append(float(logp[torch.arange(len(ans)), torch.tensor(ans)].sum()))
    assert row["loglik"] == pytest.approx(by_hand, abs=1e-3)
    assert row["pick"] == max(range(len(by_hand)), key=by_hand.__getitem__)
    scores = score_vqa(rows, reward_from_config(), 0.7)["ll"]
    assert scores["n"] == 6 and scores["chance"]["fabric"] == 0.25
    assert scores["accuracy"][it.extra["dimension"]] == float(row["pick"] == it.extra["answer_index"])
    again = option_loglik_rows(model, processor, items, out, batch_size=2, progress=False)  # resumed: nothing new
    assert again == rows and len(out.read_text().splitlines()) == 6


def test_leaderboard_from_files_and_wandb_runs(tmp_path: Path, session_dirs: dict) -> None:
    from vase.reports.leaderboard import PAPER_TABLE3, build_leaderboard, write_leaderboard

    a = tmp_path / "a.json"
    a.write_text(json.dumps({"name": "mine", "clip_score": 0.8, "fid_score": 0.3, "r_at_1": 0.1, "r_at_5": 0.2,
                             "r_at_10": 0.3, "lexical_similarity": 0.25, "overall_score": 0.5, "n_pairs": 10}))
    run = tmp_path / "run" / "wandb" / "offline-run-x" / "files" / "media" / "table" / "val"
    run.mkdir(parents=True)
    (run / "table_3_abc.table.json").write_text(json.dumps({
        "columns": ["model", "fid_score", "clip_score", "r_at_10", "r_at_5", "r_at_1", "lexical_similarity",
                    "overall_score", "image_clip_score", "n_pairs"],
        "data": [["tiny (sft)", 0.4, 0.85, 0.7, 0.5, 0.2, 0.4, 0.7, 12.0, 24]]}))
    rows = build_leaderboard([str(a), str(tmp_path / "run")])
    assert len(PAPER_TABLE3) == 19  # every row of the paper's Table 3, in its groups
    assert list(rows)[: len(PAPER_TABLE3)] == [f"{k} (paper, {v['group']})" for k, v in PAPER_TABLE3.items()]
    assert rows["mine"]["clip_score"] == 0.8 and rows["tiny (sft)"]["r_at_1"] == 0.2
    paths = write_leaderboard(rows, tmp_path / "lb")
    md = paths["md"].read_text()
    # overall = 0.25 * 0.792 * 2 + 0.20 * 0.2124 + 0.15 * 0.276 + 0.10 * 0.1112 + 0.05 * 0.0352 = 0.4928
    assert "| VaseVLM-7B-RL (paper, VaseVLM) | 0.328 | 0.792 | 21.24 % | 11.12 % | 3.52 % | 0.276 | 0.493 |" in md
    assert "| GPT-4o (paper, closed VLMs) | 0.582 | 0.520 | 13.54 % | 6.25 % | 2.08 % | 0.104 |" in md
    assert "| tiny (sft) |" in md
    from PIL import Image

    w, h = Image.open(paths["png"]).size
    assert w > 300 and h >= 0.26 * len(rows) * 110  # a row of its own per model, however many there are
    from vase.errors import DataError

    with pytest.raises(DataError, match="nothing-here"):
        build_leaderboard([str(tmp_path / "nothing-here")])


def _ddp_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    import os

    import torch.distributed as dist

    from tests.test_metrics import _BagOfWords
    from vase.metrics import CaptionScorer

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    enc = _BagOfWords(["red", "black", "white", "kylix", "amphora", "krater", "athenian", "corinthian"])
    sc = CaptionScorer(enc, enc, sync=True)  # every rank scores its share: the states gather across them
    shard = slice(rank, None, world)  # uneven shards: 6 items over 4 processes would be 2,2,1,1
    sc.update(GENS[shard], CAPS[shard])
    res = sc.compute()
    if rank == 0:
        Path(out_dir, "ddp.json").write_text(json.dumps(res))
    dist.destroy_process_group()


def test_metrics_sync_across_two_processes(tmp_path: Path) -> None:
    import socket

    import torch.multiprocessing as mp

    from tests.test_metrics import _BagOfWords
    from vase.metrics import CaptionScorer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_ddp_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True)
    ddp = json.loads((tmp_path / "ddp.json").read_text())
    enc = _BagOfWords(["red", "black", "white", "kylix", "amphora", "krater", "athenian", "corinthian"])
    # one process on the same pairs, in the order the gather produces (rank 0's shard, then rank 1's)
    order = list(range(0, 6, 2)) + list(range(1, 6, 2))
    single = CaptionScorer(enc, enc).score([GENS[i] for i in order], [CAPS[i] for i in order])
    for k, v in single.items():
        assert ddp[k] == pytest.approx(v, abs=1e-6), k
    assert ddp["n_pairs"] == 6


def test_paper_keying_rule_and_counts(tmp_path: Path) -> None:
    """Any name is keyed by the paper scorer's positional rule; unmatched, repeated and keyless items are counted
    and named; a repeated ground-truth key keeps its last caption; pairs follow the generated file's order."""
    from vase.data.layouts import paper_key
    from vase.errors import DataError
    from vase.eval.scoring import load_captions, match

    assert paper_key("3f2a_7_ac001001.jpg") == "3f2a_7"
    assert paper_key("vase12_front.jpg") == "vase12_front"  # fewer than three parts: the name without .jpg
    assert paper_key("a_b_c_d.png") == "a_b"
    assert paper_key("plain.jpg") == "plain"
    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps([
        {"images": ["u1_0_ac001001.jpg"], "caption": "first"},
        {"images": ["vase12_front.jpg"], "caption": "front view"},
        {"images": ["u1_0_ac001002.jpg"], "caption": "second"},  # same key u1_0: the last caption wins
        {"images": [], "caption": "no image"},
        {"images": ["only_gt_x.jpg"], "caption": "never generated"},
    ]))
    gen = tmp_path / "gen.json"
    gen.write_text(json.dumps([
        {"images": ["vase12_front.jpg"], "caption": "g-front"},
        {"images": ["u1_0_zz.jpg"], "caption": "g-u1"},
        {"images": ["nomatch_1_a.jpg"], "caption": "g-x"},
        {"images": ["u1_0_again.jpg"], "caption": "g-u1-again"},
    ]))
    ids, preds, refs, c = match(load_captions(gen), load_captions(gt))
    assert ids == ["vase12_front", "u1_0", "u1_0"] and preds == ["g-front", "g-u1", "g-u1-again"]
    assert refs == ["front view", "second", "second"]
    assert (c["matched"], c["unmatched_generated"], c["unmatched_reference"]) == (3, 1, 1)
    assert (c["repeated_generated"], c["repeated_reference"], c["no_key_reference"]) == (1, 1, 1)
    assert c["examples"]["unmatched_generated"] == ["nomatch_1"] and c["examples"]["unmatched_reference"] == ["only_gt"]
    with pytest.raises(DataError, match=r"gen\.json: 1 key\(s\) appear more than once, e\.g\. \[.u1_0.\]"):
        match(load_captions(gen), load_captions(gt), duplicates="error")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"images": ["a_1_b.jpg"]}]))
    with pytest.raises(DataError, match=r"bad\.json: item 0 \(key 'a_1'\) has no caption"):
        load_captions(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"images": ["a_1_b.jpg"], "caption": "x"}')
    with pytest.raises(DataError, match=r"broken\.json: malformed JSON at line 1"):
        load_captions(broken)


def test_score_several_files_in_one_run_equals_each_alone(tmp_path: Path, session_dirs: dict,
                                                          tiny_clip_dir: Path) -> None:
    from tests.conftest import compose_cfg
    from vase.pipeline.evaluate import run_evaluation

    ids = [f"v{i}_{i}" for i in range(len(CAPS))]
    gt = tmp_path / "gt.json"
    _write_paper_json(gt, CAPS, ids)
    files = []
    for k in range(2):
        files.append(tmp_path / f"model{k}.json")
        _write_paper_json(files[-1], GENS[k:] + GENS[:k], ids)
    common = ["action=score", "logger=none", "metrics=hf_tiny", "metrics.clip.build_tiny=false",
              f"metrics.clip.model={tiny_clip_dir}", f"metrics.embedding_cache={tmp_path / 'emb'}",
              f"ground_truth={gt}"]
    alone = []
    for k, f in enumerate(files):
        cfg = compose_cfg("evaluate", [*common, f"generated={f}", f"output={tmp_path / f'alone{k}.json'}"],
                          tmp_path / f"a{k}", session_dirs)
        alone.append(run_evaluation(cfg)["scores"])
    out = tmp_path / "table.json"
    cfg = compose_cfg("evaluate", [*common, f"generated=[{files[0]},{files[1]}]", f"output={out}"], tmp_path / "b",
                      session_dirs)
    run_evaluation(cfg)
    table = json.loads(out.read_text())["results"]
    assert list(table) == ["model0", "model1"]
    for k, name in enumerate(table):
        for m in ("clip_score", "fid_score", "r_at_1", "r_at_10", "lexical_similarity", "overall_score"):
            assert table[name][m] == pytest.approx(alone[k][m], abs=1e-6), (name, m)
    assert table["model0"]["matched"] == len(CAPS)
    assert "| model1 |" in out.with_suffix(".md").read_text()
    # writing the results over a file it scores is refused
    from vase.errors import DataError

    cfg = compose_cfg("evaluate", [*common, f"generated={files[0]}", f"output={files[0]}"], tmp_path / "c",
                      session_dirs)
    with pytest.raises(DataError, match="would overwrite"):
        run_evaluation(cfg)


def test_leaderboard_names_each_runs_encoders_and_warns_where_they_are_not_the_papers(tmp_path: Path) -> None:
    """A run scored with the tiny random encoders must not read as beating GPT-4o: each run's row names the encoders
    it was scored with, and where they are not the paper's the plot and the table say the paper rows do not compare."""
    from omegaconf import OmegaConf

    from vase.eval.scoring import encoders_label
    from vase.reports.leaderboard import PAPER_ENCODERS, build_leaderboard, write_leaderboard

    metrics = {n: OmegaConf.merge(OmegaConf.load(ROOT / "conf" / "metrics" / "default.yaml"),
                                  OmegaConf.load(ROOT / "conf" / "metrics" / f"{n}.yaml"))
               for n in ("paper", "hf_tiny")}
    assert encoders_label(metrics["paper"]) == PAPER_ENCODERS
    # a local copy of the paper's encoders is still the paper's encoders
    local = OmegaConf.merge(metrics["paper"], {"clip": {"model": "/models/clip-vit-base-patch32/"},
                                               "text_encoder": {"model": "/m/all-mpnet-base-v2"}})
    assert encoders_label(local) == PAPER_ENCODERS
    tiny = OmegaConf.merge(metrics["hf_tiny"], {"paths": {"cache_dir": "/c"}})
    assert encoders_label(tiny) == "tiny-clip + all-MiniLM-L6-v2"
    base = {"clip_score": 0.8, "fid_score": 0.3, "r_at_1": 0.1, "r_at_5": 0.2, "r_at_10": 0.3,
            "lexical_similarity": 0.25, "overall_score": 0.5, "n_pairs": 10}
    for name, enc in (("tiny", "tiny-clip + all-MiniLM-L6-v2"), ("real", PAPER_ENCODERS)):
        (tmp_path / f"{name}.json").write_text(json.dumps({**base, "name": name, "encoders": enc}))
    md = write_leaderboard(build_leaderboard([str(tmp_path / "tiny.json"), str(tmp_path / "real.json")]),
                           tmp_path / "lb")["md"].read_text()
    assert "- tiny: tiny-clip + all-MiniLM-L6-v2 (not comparable with the paper rows)" in md
    assert f"- real: {PAPER_ENCODERS}\n" in md
