"""The ablation workflow from the command line, launched as the README shows it (no hydra.sweep.dir override):
reward sweeps train GRPO from one shared SFT adapter, each job is its own W&B run in the sweep's group, and the
multirun ends with a summary that the leaderboard reads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from multiprocessing import get_context
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _wandb_record(job: Path) -> bytes:
    return next((job / "wandb").glob("offline-run-*/run-*.wandb")).read_bytes()


def test_tau_sweep_runs_grpo_jobs_from_one_shared_sft_adapter(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    p = subprocess.run([sys.executable, "train.py", "-m", "sweep=tau", "reward.tau=0.5,0.9", "debug=fast",
                        "logger=wandb", "evaluate.vqa=open", "evaluate.max_new_tokens=4", "render.resolution=64",
                        f"paths.log_dir={tmp_path / 'logs'}", f"paths.cache_dir={cache}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    sweep = next((tmp_path / "logs" / "train" / "multiruns").iterdir())
    jobs = sorted(d for d in sweep.iterdir() if (d / ".hydra").is_dir())
    assert [j.name for j in jobs] == ["0", "1"]
    # GRPO ran in each job, both from the same SFT adapter, trained once
    assert len([d for d in (cache / "sft").iterdir() if d.is_dir()]) == 1
    for j in jobs:
        assert "reward" in json.loads((j / "train_history.json").read_text())[0]
        assert str(cache / "sft") in json.loads((j / "adapter" / "vase_lineage.json").read_text())["merged_adapters"][0]
    # one W&B run per job: different names and config hashes, one group for the sweep
    records = [_wandb_record(j) for j in jobs]
    assert b"grpo-tau=0.5" in records[0] and b"grpo-tau=0.9" in records[1]
    group = f"tau-{sweep.name}".encode()
    assert all(group in r for r in records)
    import re

    hashes = [re.search(rb"cfg:[0-9a-f]{8}", r).group(0) for r in records]
    assert hashes[0] != hashes[1]
    # the summary: one row per job with its overrides, reward per dimension, VQA per dimension, caption metrics
    summary = json.loads((sweep / "summary.json").read_text())
    assert [r["job"] for r in summary["jobs"]] == ["0", "1"]
    assert "reward.tau=0.5" in summary["jobs"][0]["overrides"] and "reward.tau=0.9" in summary["jobs"][1]["overrides"]
    for r in summary["jobs"]:
        assert {"reward", "reward/shape", "vqa/open/shape", "vqa/open/mean", "overall_score"} <= set(r)
    assert (sweep / "summary.csv").read_text().startswith("job,overrides,status")
    # the leaderboard reads the multirun directory: the paper's 19 rows and one row per job
    from vase.eval.leaderboard import build_leaderboard

    rows = build_leaderboard([str(sweep)])
    assert sum("(paper," in k for k in rows) == 19 and sum("reward.tau=" in k for k in rows) == 2


def test_a_reward_setting_on_an_sft_only_run_is_refused(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "train.py", "-m", "reward.tau=0.5,0.7", "logger=none",
                        f"paths.log_dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "config error: reward.tau is set, but stage=sft never uses the reward" in p.stderr


def _hold_lock(path: str, out: str, k: int) -> None:
    from vase.training.sft_cache import file_lock

    with file_lock(Path(path)):
        start = time.time()
        time.sleep(0.3)
        Path(out, f"{k}.json").write_text(json.dumps([start, time.time()]))


def test_the_sft_cache_lock_serialises_concurrent_jobs(tmp_path: Path) -> None:
    ctx = get_context("spawn")
    procs = [ctx.Process(target=_hold_lock, args=(str(tmp_path / "k.lock"), str(tmp_path), k)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    (a0, a1), (b0, b1) = (json.loads((tmp_path / f"{k}.json").read_text()) for k in range(2))
    assert a1 <= b0 or b1 <= a0  # never inside the lock at the same time


@pytest.mark.parametrize("fixed, shape, expect_fabric", [(["shape"], 0.6, 0.2 * 0.4 / 0.85), (["shape"], 0.0, 0.2 / 0.85),
                                                         (None, 0.6, 0.2)])
def test_normalize_weights_rescales_the_others(fixed, shape, expect_fabric) -> None:
    from vase.rewards import reward_from_config

    r = reward_from_config(weights={"shape": shape}, normalize_weights=fixed)
    assert r.weights["shape"] == shape and r.weights["fabric"] == pytest.approx(expect_fabric)
    if fixed:
        assert sum(r.weights.values()) == pytest.approx(1.0)
