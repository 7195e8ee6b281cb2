"""benchmarks/grpo_batch.py's section: a prompt's cost at each batch size against the smallest (no job is run here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import grpo_batch  # noqa: E402


def _row(batch: int, s_per_step: float, machine: str = "Intel Xeon, native kernels; 2 torch threads") -> dict:
    return {"batch": batch, "timed_steps": 192 // batch, "s_per_step": s_per_step, "machine": machine,
            "phases": {"decode": s_per_step / 3, "policy": s_per_step / 2, "reference": s_per_step / 6}}


def test_the_section_gives_each_sizes_prompt_cost_against_the_smallest_and_the_quick_sweeps_grpo_time():
    text = grpo_batch.section([_row(4, 0.5), _row(16, 1.4)], "abc")
    lines = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    # 0.5 s for 4 prompts: 0.125 s a prompt, 2 x 1,200 prompts 300 s; 1.4 s for 16: 0.0875 s, 0.70x, 210 s
    assert lines["| 4"].endswith("| 0.1250 | 1.00x | 300 s |"), lines["| 4"]
    assert lines["| 16"].endswith("| 0.0875 | 0.70x | 210 s |"), lines["| 16"]
    assert "| 16 | 12 | 1.400 | 0.467 | 0.233 | 0.700 | 0.000 | 0.000 |" in text
    assert "Machine (the runs' own records): Intel Xeon, native kernels; 2 torch threads." in text


def test_runs_on_two_machines_are_both_named():
    text = grpo_batch.section([_row(4, 0.5, "A; 2 torch threads"), _row(8, 0.8, "A; 1 torch thread")], "abc")
    assert "A; 1 torch thread; A; 2 torch threads." in text


def test_prompts_that_a_batch_size_does_not_divide_are_refused_before_any_job_runs(capsys):
    with pytest.raises(SystemExit) as e:
        grpo_batch.main(["--batches", "4,7", "--prompts", "192", "--no-write"])
    assert e.value.code == 2 and "not a multiple of the batch size(s) [7]" in capsys.readouterr().err
