"""The demo learns, DDP over gloo trains, and a command-line sweep runs: the product's main promises, end to end."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg


def assert_the_demo_learns(run: Path) -> None:
    """What must hold of a demo run whatever the seed, read from its folder: SFT's loss falls by more than half and
    its captions share far more words with the references than the untrained model's (which emits random tokens) and
    sit closer in embedding distribution; GRPO keeps that, one history row per GRPO step. (Whether GRPO raises the
    demo's six-term reward in its 216 steps is not asserted here: the learning check, make grpo-sanity, is the test
    that GRPO learns.)"""
    from omegaconf import OmegaConf

    untrained, sft, grpo = json.loads((run / "results.json").read_text()).values()
    assert sft["lexical_similarity"] > untrained["lexical_similarity"] + 0.2
    assert sft["r_at_10"] > untrained["r_at_10"]
    assert sft["fid_score"] < untrained["fid_score"]
    assert grpo["lexical_similarity"] > untrained["lexical_similarity"] + 0.2
    loss = [h["loss"] for h in json.loads((run / "train_history.json").read_text())]
    assert sum(loss[-10:]) / 10 < 0.5 * sum(loss[:10]) / 10
    reward = [h["reward"] for h in json.loads((run / "train_history_grpo.json").read_text())]
    cfg = OmegaConf.load(run / "config.yaml")
    synth = cfg.data.synthetic
    n_train = synth.num_vases - max(1, round(synth.num_vases * synth.val_fraction))
    steps = cfg.followup.epochs * math.ceil(n_train / cfg.followup.batch_size)  # one history row per GRPO step
    assert len(reward) == steps and all(-1.0 <= r <= 1.2 for r in reward)
    assert grpo["fid_score"] < untrained["fid_score"]
    report = (run / "report.md").read_text()
    for part in ("(untrained)", "(sft)", "(grpo)", "loss.png", "contact_sheet.png", "grpo: mean reward"):
        assert part in report


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])  # seed 42, the README's: tests/test_cpu_kernels.py's two demo runs
def test_demo_experiment_learns(seed: int, tmp_path: Path, session_dirs: dict) -> None:
    """The README's demo on two more seeds (`assert_the_demo_learns`)."""
    from vase.pipeline import run_training

    cfg = compose_cfg("train", ["experiment=demo", "logger=none", f"seed={seed}"], tmp_path, session_dirs)
    run_training(cfg)
    assert_the_demo_learns(tmp_path)


def _train(args: list[str], tmp_path: Path, session_dirs: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    common = [f"paths.cache_dir={session_dirs['cache']}", f"paths.data_dir={session_dirs['data']}",
              f"paths.log_dir={tmp_path / 'logs'}", "logger=none", "render.resolution=64", "debug=fast",
              "evaluate.after=false"]
    return subprocess.run([sys.executable, "train.py", *args, *common], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_ddp_over_gloo_runs_two_processes(tmp_path: Path, session_dirs: dict) -> None:
    p = _train(["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", f"hydra.run.dir={tmp_path / 'run'}"],
               tmp_path, session_dirs)
    assert p.returncode == 0, p.stderr[-3000:]
    log = p.stdout + p.stderr
    assert "distributed_backend=gloo" in log and "Starting with 2 processes" in log
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
    assert len(json.loads((tmp_path / "run" / "train_history.json").read_text())) == 2
