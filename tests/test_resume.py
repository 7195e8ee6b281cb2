"""A run killed with SIGKILL mid-training resumes from its last checkpoint and follows the loss curve of an
uninterrupted run: same weights, optimizer, scheduler, random states (LoRA dropout is on), data position and history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT


def _train(run_dir: Path, cache: Path, extra: list[str]) -> subprocess.Popen:
    args = [sys.executable, "train.py", "logger=none", "data.synthetic.num_vases=16", "render.resolution=64",
            "stage.batch_size=2", "stage.grad_accum=1", "stage.epochs=3", "stage.module.lora.dropout=0.1",
            "stage.module.optimizer.lr=5e-3", "evaluate.after=false", "report=false",
            "callbacks.checkpoint.every_n_train_steps=1", f"paths.cache_dir={cache}", f"hydra.run.dir={run_dir}",
            *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(p: subprocess.Popen) -> str:
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out[-3000:]
    return out


def _ckpt_step(path: Path) -> int:
    try:
        return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])
    except Exception:  # noqa: BLE001 - not written yet (atomic rename: never a torn file)
        return -1


def test_sigkill_mid_training_then_resume_gives_the_uninterrupted_curve(tmp_path: Path, session_dirs: dict) -> None:
    cache = session_dirs["cache"]
    _finish(_train(tmp_path / "full", cache, []))
    full = json.loads((tmp_path / "full" / "train_history.json").read_text())
    total = len(full)
    assert total == 18  # 12 training vases / batch 2 = 6 steps an epoch, 3 epochs

    killed = _train(tmp_path / "killed", cache, [])
    ckpt = tmp_path / "killed" / "checkpoints" / "last.ckpt"
    deadline = time.time() + 300
    while time.time() < deadline and killed.poll() is None and _ckpt_step(ckpt) < 4:
        time.sleep(0.05)
    assert killed.poll() is None, "the run ended before it could be killed"
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "killed" / "train_history.json").exists()  # it really died mid-training
    step = _ckpt_step(ckpt)
    assert 4 <= step < total

    _finish(_train(tmp_path / "resumed", cache, [f"ckpt_path={ckpt}"]))
    resumed = json.loads((tmp_path / "resumed" / "train_history.json").read_text())
    assert [h["step"] for h in resumed] == [h["step"] for h in full]  # complete: the killed run's steps too
    for a, b in zip(resumed, full):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6), (a, b)


def test_checkpoint_holds_what_a_resume_needs(train_cfg) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(["callbacks.checkpoint.every_n_train_steps=1"])
    run_training(cfg)
    ckpt = torch.load(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 2
    assert ckpt["optimizer_states"] and ckpt["lr_schedulers"]
    assert set(ckpt["vase_rng"]) >= {"torch", "numpy", "python"}
    assert [h["step"] for h in ckpt["vase_history"]] == [0.0, 1.0]
    assert ckpt["VaseDataModule"]["batches_done"] == 2
    assert all("lora_" in k for k in ckpt["state_dict"])
    leftovers = [p.name for p in (Path(cfg.paths.output_dir) / "checkpoints").iterdir() if p.name != "last.ckpt"]
    assert leftovers == []  # atomic writes leave no temporary file behind
