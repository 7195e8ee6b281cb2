"""The debug presets beside debug=fast do what their names say, run as a user types them: overfit drives the loss down
on a few vases (and a learner that cannot learn does not pass it), limit runs a share of every epoch's batches,
profiler leaves Lightning's profile in the run folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

SMALL = ["logger=none", "render.resolution=64"]


def _history(run: Path) -> list[dict]:
    return json.loads((run / "train_history.json").read_text())


@pytest.mark.slow  # two runs of 48 steps: make test-slow
def test_debug_overfit_drives_the_loss_down_and_a_learner_that_cannot_learn_stays_flat(tmp_path: Path,
                                                                                      session_dirs: dict) -> None:
    falls = {}
    for name, extra in (("overfit", []), ("frozen", ["stage.module.optimizer.lr=1e-12"])):
        p = run_cli(["train.py", "debug=overfit", *SMALL, *extra, f"hydra.run.dir={tmp_path / name}"], tmp_path,
                    session_dirs)
        assert p.returncode == 0, p.stderr[-3000:]
        loss = [h["loss"] for h in _history(tmp_path / name)]
        assert len(loss) == 4 * 12  # 4 vases, one a batch, 12 epochs
        falls[name] = sum(loss[:8]) / 8 - sum(loss[-8:]) / 8  # the first epochs' mean loss less the last ones'
    assert falls["overfit"] > 0.5, falls
    assert abs(falls["frozen"]) < 0.1, falls


def test_debug_limit_runs_a_quarter_of_every_epoch_s_batches(tmp_path: Path, session_dirs: dict) -> None:
    p = run_cli(["train.py", "debug=limit", *SMALL, "data.limit_train=8", "stage.epochs=2", "stage.batch_size=1",
                 "stage.grad_accum=1", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, session_dirs)
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(_history(tmp_path / "run")) == 2 * 2  # 8 batches an epoch, a quarter of them, two epochs
    assert "sft: step 4/4" in p.stdout + p.stderr  # the progress line knows the shorter length


def test_debug_profiler_writes_lightning_s_profile_into_the_run_folder(tmp_path: Path, session_dirs: dict) -> None:
    p = run_cli(["train.py", "debug=profiler", *SMALL, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, session_dirs)
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "run" / "fit-profile.txt").read_text()
    assert report.startswith("FIT Profiler Report")
    step = re.search(r"\|\s*\[Strategy\]\w+\.training_step\s*\|\s*[\d.]+\s*\|\s*(\d+)\s*\|", report)
    assert step and int(step.group(1)) == 2, report[:2000]  # debug=fast's two steps, each timed
