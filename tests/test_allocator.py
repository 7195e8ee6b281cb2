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

HELD = """
import ctypes, sys
from vase.allocator import set_cpu_allocator
import torch

class MallInfo(ctypes.Structure):  # glibc's struct mallinfo2 (malloc.h)
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                                "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo
print(set_cpu_allocator(sys.argv[1]))
before = libc.mallinfo2().hblkhd
buffer = torch.empty(6 << 20).fill_(1.0)  # 24 MiB, as a step's activations
print(libc.mallinfo2().hblkhd - before)   # bytes of it in a mapping of its own
del buffer
print(libc.mallinfo2().fordblks)          # free bytes the process still holds
"""


def _held(mode: str) -> tuple[str, int, int]:
    p = subprocess.run([sys.executable, "-c", HELD, mode], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    said, mapped, free = p.stdout.splitlines()[-3:]
    return said, int(mapped), int(free)


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's: elsewhere keep does nothing and says so")
def test_keep_keeps_a_freed_buffer_for_the_next_step() -> None:
    """A 24 MiB buffer, taken and freed: with glibc's defaults it is a mapping of its own, given back to the system
    when freed (the next step's buffer is fresh pages, faulted in again); with ``keep`` it comes from the heap and
    stays there for the next step."""
    said, mapped, free = _held("keep")
    assert said == "keep" and mapped == 0 and free >= 24 << 20, (said, mapped, free)
    said, mapped, free = _held("system")
    assert said == "system" and mapped >= 24 << 20 and free < 24 << 20, (said, mapped, free)


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


@pytest.mark.slow  # two processes of about 10 s beside the other worker: 23 s of make test, which is over its budget
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


def test_a_results_file_s_machine_names_the_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    import vase.allocator as allocator
    from vase.kernels import cpu_record

    monkeypatch.setattr(allocator, "_applied", "keep")
    assert cpu_record()["cpu_allocator"] == "keep"
    monkeypatch.setattr(allocator, "_applied", None)
    assert cpu_record()["cpu_allocator"] == "system"
