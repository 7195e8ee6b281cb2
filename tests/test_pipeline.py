"""End to end on the tiny model: train with evaluation and report, W&B offline, evaluate.py on the adapter."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from tests.conftest import ROOT, run_python
from vase.eval.generate import generate_captions
from vase.io import read_jsonl
from vase.loggers import finish_wandb


def test_train_evaluates_and_reports(train_cfg) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(
        [
            "val.before=true",
            "val.after=true",
            "val.max_new_tokens=6",
            "report=true",
            "logger=wandb",
            "trainer.max_steps=3",
        ]
    )
    try:
        out = run_training(cfg)
    finally:
        finish_wandb()  # as train.py does: closes the run and waits until W&B has written its record
    d = Path(cfg.paths.output_dir)
    results = json.loads((d / "results.json").read_text())
    assert list(results) == ["tiny-qwen2.5-vl (untrained)", "tiny-qwen2.5-vl (sft)"]
    for row in results.values():
        assert {
            "clip_score",
            "fid_score",
            "r_at_1",
            "r_at_5",
            "r_at_10",
            "lexical_similarity",
            "overall_score",
            "image_clip_score",
            "n_pairs",
        } <= set(row)
        assert row["n_pairs"] == 2
    report = (d / "report.md").read_text()
    assert "| Model | FID ↓ | CLIP | R@10 | R@5 | R@1 | Lexical | Overall | CLIP-I | N |" in report
    assert Image.open(d / "loss.png").size[0] > 100
    assert Image.open(d / "contact_sheet.png").size[0] > 100
    assert len(read_jsonl(d / "generations_sft.jsonl")) == 2
    assert len(json.loads((d / "train_history.json").read_text())) == 3
    # the W&B offline run recorded config and metrics
    runs = list((d / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert list((runs[0] / "files" / "media" / "table" / "val").glob("table_*.table.json"))
    table = json.loads(next((runs[0] / "files" / "media" / "table" / "val").glob("table_*.table.json")).read_text())
    assert [row[0] for row in table["data"]] == list(results)
    log = next(runs[0].glob("run-*.wandb")).read_bytes()  # config and metrics live in the run's record log
    # the metrics, and the full resolved config as a file of the run (its parameters are what a comparison needs)
    assert b"val/sft/overall_score" in log and b"vase_config.yaml" in log
    assert "freeze_vision" in (runs[0] / "files" / "vase_config.yaml").read_text()
    assert out["results"] == results


def test_generation_resumes_after_a_kill(tiny_model_dir: Path, synthetic_root: Path, tmp_path: Path) -> None:
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor

    model, proc = load_model(str(tiny_model_dir)), load_processor(str(tiny_model_dir))
    ds = VaseDataset(synthetic_root, "train")
    path = tmp_path / "gen.jsonl"
    full = generate_captions(model, proc, ds, path, batch_size=2, max_new_tokens=4, progress=False)
    lines = path.read_text().splitlines()
    assert len(lines) == len(ds)
    # simulate a kill: two whole lines survive, the third is torn mid-write
    path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][: len(lines[2]) // 2])
    again = generate_captions(model, proc, ds, path, batch_size=2, max_new_tokens=4, progress=False)
    rows = read_jsonl(path)
    assert [r["id"] for r in again] == [r.id for r in ds.records]
    assert sorted(r["id"] for r in rows) == sorted(r.id for r in ds.records)  # nothing lost, nothing twice
    assert again == full  # deterministic decoding gives the same captions


def test_evaluate_entry_point_on_trained_adapter(train_cfg, tmp_path: Path) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg([])
    run_training(cfg)
    adapter = Path(cfg.paths.output_dir) / "adapter"
    out = tmp_path / "eval" / "results.json"
    p = run_python(["evaluate.py", f"adapter={adapter}", "logger=none", "data.synthetic.num_vases=8",
                    "render.resolution=64", "generation.max_new_tokens=6", f"output={out}",
                    f"paths.cache_dir={cfg.paths.cache_dir}", f"paths.data_dir={cfg.paths.data_dir}",
                    f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["n_pairs"] == 2 and res["adapter"] == str(adapter)
    assert sorted(p.name for p in out.parent.glob("results*.json")) == ["results.json"]  # one results file
    assert out.with_suffix(".md").read_text().startswith("| Model |")
    assert "| tiny-qwen2.5-vl |" in p.stdout


def test_orbit_video_through_sft_grpo_and_evaluation(train_cfg, tmp_path: Path) -> None:
    """data.modality=orbit: the 360-degree frames go in as one video, through SFT, a GRPO follow-up and evaluation."""
    from omegaconf import open_dict

    from vase.pipeline import run_training

    cfg = train_cfg(["data.modality=orbit", "render.orbit_frames=8", "+stage@followup=grpo", "followup.epochs=1",
                     "followup.batch_size=2", "followup.grad_accum=1", "followup.module.max_completion_length=6",
                     "val.after=true", "val.max_new_tokens=6"])
    with open_dict(cfg):
        cfg.paths.data_dir = str(tmp_path / "data")  # its own renders: orbit frames as well as views
        cfg.data.root = str(tmp_path / "data" / "synthetic-n8-s0")
    out = run_training(cfg)
    frames = sorted((tmp_path / "data" / "synthetic-n8-s0" / "images" / "orbit").glob("*/*.png"))
    assert len(frames) == 8 * 8
    assert set(out["histories"]) == {"sft", "grpo"} and len(out["histories"]["sft"]) == 2
    assert list(out["results"]) == ["tiny-qwen2.5-vl (sft)", "tiny-qwen2.5-vl (grpo)"]
    run = Path(out["output_dir"])
    for perf, history in ((run / "perf", out["histories"]["sft"]), (run / "grpo" / "perf", out["histories"]["grpo"])):
        speed = json.loads((perf / "throughput.json").read_text())  # each stage's own, the first step left out
        assert speed["optimizer_steps_timed"] == len(history) - 1 and speed["device"] == "cpu"
        assert speed["s_per_step"] > 0 and speed["tokens_per_s"] > 0 and speed["parameters"] > 1e5
        assert "mfu" not in speed and "peak_memory_gib" not in speed  # GPU-only numbers are absent, never 0.0
    # where a GRPO step's time goes: its parts per timed step, together most of the step (SFT does not time parts)
    phases = json.loads((run / "grpo" / "perf" / "throughput.json").read_text())["phases_s_per_step"]
    assert set(phases) == {"vision", "decode", "reward", "reference", "policy", "optimizer"}
    step = json.loads((run / "grpo" / "perf" / "throughput.json").read_text())["s_per_step"]
    assert all(v >= 0 for v in phases.values()) and 0.5 * step < sum(phases.values()) <= step * 1.05
    assert "phases_s_per_step" not in json.loads((run / "perf" / "throughput.json").read_text())
    from vase.data.datamodule import PromptCollator, samples_for
    from vase.data.dataset import VaseDataset, VideoFrames

    ds = VaseDataset(Path(cfg.data.root), "val", modality="orbit")
    assert isinstance(ds[0].images, VideoFrames) and len(ds[0].images) == 8
    enc = PromptCollator(out["module"].processor)([samples_for(ds[0], "caption")[0]])
    assert "pixel_values_videos" in enc and "pixel_values" not in enc


def test_wandb_mode_disabled_writes_no_run(train_cfg, monkeypatch) -> None:
    from vase.pipeline import run_training

    monkeypatch.setenv("WANDB_MODE", "disabled")
    cfg = train_cfg(["logger=wandb", "trainer.max_steps=1"])
    run_training(cfg)
    assert not list(Path(cfg.paths.output_dir).rglob("offline-run-*"))
    assert not (Path(cfg.paths.output_dir) / "wandb").exists()


def test_debug_fast_caps_every_stage(train_cfg) -> None:
    """trainer.max_steps (what debug=fast sets) stops a GRPO follow-up too, whatever its own epochs."""
    from vase.pipeline import run_training

    cfg = train_cfg(["trainer.max_steps=1", "+stage@followup=grpo", "followup.epochs=5", "followup.batch_size=2",
                     "followup.grad_accum=1", "followup.module.max_completion_length=4"])
    out = run_training(cfg)
    assert len(out["histories"]["sft"]) == 1 and len(out["histories"]["grpo"]) == 1


def test_export_writes_a_merged_checkpoint_that_loads_without_peft(train_cfg, tmp_path: Path, session_dirs: dict,
                                                                   tiny_model_dir: Path, synthetic_root: Path) -> None:
    import torch

    from tests.conftest import compose_cfg
    from vase.data.datamodule import SFTCollator, samples_for
    from vase.data.dataset import VaseDataset
    from vase.models.loading import apply_adapter, load_model, load_processor
    from vase.pipeline import run_training
    from vase.pipeline.evaluate import run_evaluation

    cfg = train_cfg(["stage.module.optimizer.lr=1e-2", "stage.module.warmup_ratio=0.0"])
    run_training(cfg)
    adapter = Path(cfg.paths.output_dir) / "adapter"
    out = tmp_path / "merged"
    ecfg = compose_cfg("evaluate", ["action=export", f"adapter={adapter}", f"output={out}", "logger=none"],
                       tmp_path / "e", session_dirs)
    run_evaluation(ecfg)
    from transformers import Qwen2_5_VLForConditionalGeneration

    merged = Qwen2_5_VLForConditionalGeneration.from_pretrained(out).eval()  # plain transformers, no peft
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    peft_model = apply_adapter(load_model(str(tiny_model_dir)), str(adapter)).eval()
    proc = load_processor(str(out))
    batch = SFTCollator(proc)([samples_for(VaseDataset(synthetic_root, "val")[0], "caption")[0]])
    batch.pop("labels")
    with torch.no_grad():
        a, b = merged(**batch).logits, peft_model(**batch).logits
        base = load_model(str(tiny_model_dir)).eval()(**batch).logits
    assert torch.allclose(a, b, atol=1e-4) and not torch.allclose(a, base, atol=1e-3)
    # GRPO starts from the exported checkpoint as from any real one
    gcfg = train_cfg(["stage=grpo", "model.build_tiny=false", f"model.name_or_path={out}", "trainer.max_steps=1",
                      "stage.batch_size=2", "stage.grad_accum=1", "stage.module.max_completion_length=4"])
    assert len(run_training(gcfg)["history"]) == 1
    # an existing directory is never replaced
    import pytest

    from vase.errors import DataError

    with pytest.raises(DataError, match="already exists"):
        run_evaluation(ecfg)


def test_optimized_metric_reads_caption_vqa_or_reward_values() -> None:
    import pytest

    from vase.errors import ConfigError
    from vase.pipeline import objective

    out = {"results": {"m (untrained)": {"overall_score": 0.1, "r_at_1": 0.0}, "m (grpo)": {"overall_score": 0.4,
                                                                                           "r_at_1": 0.25}},
           "vqa": {"grpo": {"open": {"accuracy": {"shape": 0.5}, "mean": 0.3}}},
           "history": [{"step": float(i), "reward": float(i)} for i in range(30)]}
    assert objective(out, "overall_score") == 0.4 and objective(out, "r_at_1") == 0.25  # the last stage's row
    assert objective(out, "vqa/open/shape") == 0.5 and objective(out, "vqa/open/mean") == 0.3
    assert objective(out, "train/reward") == pytest.approx(sum(range(10, 30)) / 20)
    with pytest.raises(ConfigError, match="vqa/mc/shape"):
        objective(out, "vqa/mc/shape")


def test_a_stage_whose_output_is_a_file_prints_a_plain_progress_line(train_cfg, capsys) -> None:
    """Where no progress bar can be seen (the output is captured here, as in a SLURM job's or a sweep job's log), each
    stage prints plain lines: its name, step k/K, loss (and reward, for GRPO), s/step and ETA, and a last one when it
    ends."""
    from vase.pipeline import run_training

    cfg = train_cfg(["trainer.max_steps=3", "callbacks.progress.every_n_steps=1", "callbacks.progress.every_s=3600",
                     "+stage@followup=grpo", "followup.batch_size=2", "followup.grad_accum=1",
                     "followup.module.max_completion_length=4"])
    run_training(cfg)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("sft: ", "grpo: "))]
    sft = [ln for ln in lines if ln.startswith("sft: ")]
    assert sft[0].startswith("sft: step 1/3, loss ") and " s/step, ETA " in sft[0], lines
    assert sft[-1].startswith("sft: step 3/3, loss ") and sft[-1].endswith(" spent) - done"), lines
    grpo = [ln for ln in lines if ln.startswith("grpo: ")]
    assert grpo and "reward " in grpo[0] and grpo[-1].endswith("- done"), lines


def test_a_short_run_in_a_log_says_it_started_why_it_stopped_and_draws_no_bars(train_cfg, capsys) -> None:
    """A run shorter than the 30 s between lines printed only its last line; one stopped by the epoch cap printed
    `step 8/40 ... - done` with an ETA; the log carried transformers' \\r bars and Lightning's Rich frames."""
    from vase.pipeline import run_training
    from vase.progress import quiet_bars_in_logs

    quiet_bars_in_logs()  # as every entry point does where its output is a file
    cfg = train_cfg(["trainer.max_steps=40", "data.limit_train=4", "stage.epochs=1", "stage.grad_accum=1",
                     "callbacks.progress.every_s=3600", "callbacks.progress.every_n_steps=0"])
    run_training(cfg)
    captured = capsys.readouterr()
    sft = [ln for ln in captured.out.splitlines() if ln.startswith("sft: ")]
    assert len(sft) == 2 and sft[0].startswith("sft: step 1/40, loss "), sft
    assert "ETA" not in sft[-1] and "stopped by the epoch cap (1 epoch(s), trainer.max_epochs=1) before step 40" \
        in sft[-1] and sft[-1].endswith(" spent) - done"), sft
    text = captured.out + captured.err
    assert "\r" not in text and not any(c in text for c in "━┏┃│"), text[-2000:]
