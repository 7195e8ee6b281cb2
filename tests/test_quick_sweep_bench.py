"""benchmarks/quick_sweep.py's comparison of two sweeps' verdicts and its section (no sweep is run here)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import quick_sweep  # noqa: E402


def _verdict(direction: str, diff: float, lo: float, hi: float) -> dict:
    return {"blocks": {"all": {"reward.weights.shape=0.6": {
        "heldout/shape_right": {"pooled": {"diff": diff, "lo": lo, "hi": hi, "direction": direction}},
        "heldout/fabric_right": {"pooled": {"diff": None, "direction": "not measured"}}}}}}


def test_a_verdict_is_read_as_each_setting_and_measure_s_decision_in_points():
    got = quick_sweep.decided(_verdict("up", 0.171, 0.125, 0.217))
    assert got == {"all reward.weights.shape=0.6 heldout/shape_right": {"direction": "up",
                                                                        "said": "up +17.1 [+12.5, +21.7]"},
                   "all reward.weights.shape=0.6 heldout/fabric_right": {"direction": "not measured",
                                                                         "said": "not measured"}}


def test_an_interval_that_moves_is_the_same_decision_a_direction_that_changes_is_not():
    a = quick_sweep.decided(_verdict("up", 0.171, 0.125, 0.217))
    assert quick_sweep.same_decision(a, quick_sweep.decided(_verdict("up", 0.175, 0.129, 0.225))) == []
    flipped = quick_sweep.decided(_verdict("unclear", 0.02, -0.01, 0.05))
    assert quick_sweep.same_decision(a, flipped) == ["all reward.weights.shape=0.6 heldout/shape_right"]
    # "no clear change" and "no clear rise" share a first word and are different decisions
    unclear = quick_sweep.decided(_verdict("no clear change", 0.0, -0.01, 0.01))
    assert quick_sweep.same_decision(unclear, quick_sweep.decided(_verdict("no clear rise", 0.0, -0.01, 0.01)))


def test_an_ablation_json_is_read_as_its_targets():
    got = quick_sweep.targets({"swept": "reward.weights.shape", "weights": [0.0, 0.6], "i": True, "ii": None,
                               "ii_rule": "not decided: the paper's weight 0.15 is not in this sweep's grid (0, 0.6)",
                               "dose_response": False, "table": "..."})
    assert got == {"(i)": "held", "(ii)": "not decided", "dose": "not held"}
    assert quick_sweep.targets({}) == {}


def test_the_section_gives_the_ratio_and_says_when_a_target_or_a_decision_changed():
    held = {"(i)": "held", "(ii)": "not decided", "dose": "held"}
    then = {"rc": 0, "wall": 440.0, "decided": quick_sweep.decided(_verdict("up", 0.171, 0.125, 0.217)),
            "targets": dict(held)}
    now = {"rc": 0, "wall": 154.0, "decided": quick_sweep.decided(_verdict("up", 0.171, 0.125, 0.217)),
           "targets": dict(held)}
    text = quick_sweep.section(then, now, "2b860c6", "abc", "ablation_quick", [])
    assert "| 2b860c6 | 0 | 7 min 20 s | (i) held, (ii) not decided, dose held |" in text
    assert "| abc | 0 | 2 min 34 s |" in text
    assert "**0.35x** | the same targets | the same decisions |" in text
    # a measure that is not a target moved: listed, while the targets stay the same
    now["decided"] = quick_sweep.decided(_verdict("unclear", 0.02, -0.01, 0.05))
    text = quick_sweep.section(then, now, "2b860c6", "abc", "ablation_quick", [])
    assert "| the same targets | 1 decisions differ |" in text
    assert "up +17.1 [+12.5, +21.7] then, unclear +2.0 [-1.0, +5.0] now" in text
    now["targets"]["(i)"] = "not held"
    text = quick_sweep.section(then, now, "2b860c6", "abc", "ablation_quick", [])
    assert "1 targets differ" in text and "Targets that differ: (i): held then, not held now" in text
