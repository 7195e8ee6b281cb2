"""benchmarks/grpo_phases.py's report: what its section says from measured rows, and the `--against` tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import grpo_phases  # noqa: E402


def _result(tokens: int, seconds: dict[str, float], flops: dict[str, float], wall: float) -> dict:
    """A child's result with one timed step: each phase's seconds and GFLOP (bytes 0), floors 100 GFLOP/s."""
    return {"tokens": tokens, "torch": "x", "floors": {"peak_gflops": 100.0, "bandwidth_gbs": 10.0, "op_s": 0.0,
                                                       "threads": 2},
            "model": {"params": 1, "hidden": 64, "layers": 2, "vocab": 151936},
            "timed": [{"wall": wall, **{p: seconds.get(p, 0.0) for p in grpo_phases.PHASES}}],
            "counts": {p: {"flops": flops.get(p, 0.0) * 1e9, "ops": 0, "bytes": 0} for p in grpo_phases.PHASES}}


def test_the_section_names_the_phase_furthest_above_its_floors():
    res = _result(256, {"decode": 1.0, "policy": 2.0}, {"decode": 90.0, "policy": 100.0}, wall=3.0)
    text = grpo_phases.section([res], "abc")
    assert "Largest gap to its floors: **policy**" in text  # 2.0 s against 1.0 s of FLOPs; decode 1.0 against 0.9


def test_a_step_at_its_floors_says_so_and_names_its_largest_phase_and_bound():
    res = _result(256, {"decode": 2.0, "policy": 1.0}, {"decode": 198.0, "policy": 99.0}, wall=3.0)
    text = grpo_phases.section([res], "abc")
    assert "Largest gap" not in text
    assert "Every phase is within 0.02 s of its floors" in text
    assert "The largest is **decode** (67 % of the step" in text and "2.00 s against 1.98 s of FLOPs" in text


def test_before_and_after_give_each_phase_s_ratio():
    now = _result(256, {"decode": 1.0, "policy": 1.0}, {}, wall=2.0)
    then = _result(256, {"decode": 1.0, "policy": 4.0}, {}, wall=5.0)
    text = grpo_phases.section([now], "new", [then], "old")
    assert "ran with vase's code at old and with new" in text
    assert "| 256 | policy | 4.00 | 1.00 | 0.25x |" in text
    assert "| 256 | **step** | 5.00 | 2.00 | 0.40x |" in text
    assert "| 256 | vision | 0.00 | 0.00 | - |" in text  # no ratio of nothing


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="a git checkout")
def test_against_checks_out_the_commit_and_removes_it_afterwards():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    with grpo_phases.worktree(head) as tree:
        assert (tree / "vase" / "__init__.py").is_file()
        got = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        assert got == head
    assert not tree.exists()
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert str(tree) not in listed
