"""``cpu_allocator`` (`vase.allocator`): freed memory kept mapped, the same numbers, the setting recorded and checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vase.allocator import _mallopt

ROOT = Path(__file__).resolve().parents[1]
GLIBC = _mallopt() is not None

FAULTS = """
import resource, sys
from vase.allocator import set_cpu_allocator
import torch
print(set_cpu_allocator(sys.argv[1]), flush=True)
def step():  # a step's buffers: twelve of 8 MiB taken and written, then all freed
    held = [torch.empty(2 << 20).fill_(1.0) for _ in range(12)]
    del held
for _ in range(3):  # glibc's own thresholds move after the first frees: measure after them
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[str, int]:
    p = subprocess.run([sys.executable, "-c", FAULTS, mode], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    said, faults = p.stdout.split()[-2:] if mode == "keep" else (p.stdout.splitlines()[0], p.stdout.split()[-1])
    return said, int(faults)


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's: elsewhere keep does nothing and says so")
def test_keep_stops_freed_buffers_faulting_in_again() -> None:
    """Twelve buffers of 8 MiB taken and freed together, 20 times: with glibc's defaults the freed 96 MiB goes back to
    the system each time and the next step faults it in again (24,576 faults of 4 KiB), with ``keep`` it stays."""
    said, kept = _faults("keep")
    _, system = _faults("system")
    assert said == "keep"
    assert system >= 20 * 20000, system  # the defaults: about 24,576 faults a step
    assert kept * 20 < system, (kept, system)


def test_keep_is_said_to_do_nothing_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    import vase.allocator as allocator

    monkeypatch.setattr(allocator, "_mallopt", lambda: None)
    monkeypatch.setattr(allocator, "_applied", None)
    assert allocator.set_cpu_allocator("keep") == "system (the C library is not glibc)"
    assert allocator.cpu_allocator_held() == "system"


def test_a_bad_allocator_setting_is_one_line() -> None:
    p = subprocess.run([sys.executable, "train.py", "cpu_allocator=fast"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "VASE_CHECK_CONFIG": "1"})
    assert p.returncode == 2 and p.stderr.strip() == "config error: cpu_allocator='fast' must be one of " \
                                                      "['keep', 'system']", p.stderr[-2000:]


def test_a_grpo_run_computes_the_same_numbers_either_way_and_records_which(tmp_path: Path,
                                                                          session_dirs: dict[str, Path]) -> None:
    """Three GRPO steps of the tiny model, once with ``keep`` (the default) and once with ``system``, side by side on a
    thread each: the same history to the bit; each run's record names its allocator."""
    runs = {mode: tmp_path / mode for mode in ("keep", "system")}
    procs = [subprocess.Popen(
        [sys.executable, "train.py", "stage=grpo", "trainer.max_steps=3", "stage.module.max_completion_length=16",
         "logger=none", "val.before=false", "val.after=false", "report=false", f"cpu_allocator={mode}",
         f"hydra.run.dir={run}", f"paths.cache_dir={session_dirs['cache']}", f"paths.log_dir={tmp_path / 'logs'}"],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for mode, run in runs.items()]
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out[-3000:]
    history = {mode: (run / "train_history.json").read_bytes() for mode, run in runs.items()}
    assert len(json.loads(history["keep"])) == 3
    assert history["keep"] == history["system"]
    held = {mode: json.loads((run / ".vase-run.json").read_text())["machine"]["cpu_allocator"]
            for mode, run in runs.items()}
    assert held == {"keep": "keep" if GLIBC else "system", "system": "system"}
