"""README tables are rebuilt from results files (make readme-tables), never copied by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vase.readme_tables import main

MACHINE = {"date": "2026-11-26", "cpus": 2, "system": "Linux 6", "torch": "2.14.1"}


def _sanity(logs: Path, name: str, rises: dict[str, float], control: str | None,
            overrides: list[str] | None = None) -> None:
    d = logs / "grpo_sanity" / name
    d.mkdir(parents=True)
    seeds = {s: {"steps": 600, "first": 0.4, "last": 0.4 + r, "rise": r, "passed": r >= 0.3,
                 "frac_reward_zero_std": 0.5} for s, r in rises.items()}
    (d / "sanity.json").write_text(json.dumps({"window": 20, "min_rise": 0.3, "passed": all(r >= 0.3 for r in
                                                                                            rises.values()),
                                               "seeds": seeds, "overrides": overrides or [],
                                               "negative_control": control,
                                               "machine": MACHINE}))


def _sweep(d: Path, overrides: list[str], results: str, table: str) -> None:
    """A finished sweep as Hydra and vase leave it: its command's overrides and a results file with a table."""
    d.mkdir(parents=True)
    (d / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n" + "".join(f"    - {o}\n" for o in overrides))
    (d / results).write_text(json.dumps({"table": table, "machine": MACHINE}))


def test_tables_are_rebuilt_from_the_newest_results_and_check_says_when_stale(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _sanity(logs, "2026-11-25_10-00-00", {"1": 0.1, "2": 0.1}, None)      # older: not used
    _sanity(logs, "2026-11-26_10-00-00", {"1": 0.42, "2": 0.33}, None)
    _sanity(logs, "2026-11-26_11-00-00", {"1": -0.2}, "flip_advantages")
    gdpo = "stage.module.multi_objective_aggregation=normalize_then_sum"  # newer, other settings: its own row
    _sanity(logs, "2026-11-26_12-00-00", {"1": 0.45}, None, [gdpo])
    for name, overrides, shape in (("2026-11-26_12-00-00", ["experiment=ablation_demo"], "72.1"),
                                   # newer, but a probe with its own settings: never the README's table
                                   ("2026-11-26_13-00-00", ["experiment=ablation_demo", "stage.module.beta=0.2"], "99.9")):
        _sweep(logs / "ablation_demo" / "multiruns" / name, overrides, "ablation.json",
               f"| run | Shape |\n|---|---|\n| SFT | {shape} % |")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- vase:table sanity -->\nold numbers\n<!-- vase:end -->\nmiddle\n"
                      "<!-- vase:table ablation -->\n<!-- vase:end -->\nend\n")
    assert main(["--readme", str(readme), "--logs", str(logs), "--check"]) == 1  # stale
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    text = readme.read_text()
    assert "old numbers" not in text and text.startswith("intro\n") and text.endswith("end\n")
    assert "| seed 1 | 0.400 | 0.820 | +0.420 | 50 % | – | – | PASS |" in text  # no held-out reward recorded
    assert "| seed 2 | 0.400 | 0.730 | +0.330 | 50 % | – | – | PASS |" in text and "+0.100" not in text
    assert "| seed 1, `flip_advantages` | 0.400 | 0.200 | -0.200 | 50 % | – | – | FAIL |" in text
    assert f"| seed 1, `{gdpo}` | 0.400 | 0.850 | +0.450 | 50 % | – | – | PASS |" in text
    assert "| SFT | 72.1 % |" in text and "99.9" not in text and "2 CPU cores, Linux 6, torch 2.14.1, 2026-11-26" in text
    assert main(["--readme", str(readme), "--logs", str(logs), "--check"]) == 0  # up to date now
    # a table with no results is left as it is
    readme.write_text("<!-- vase:table sanity -->\nkeep\n<!-- vase:end -->\n")
    assert main(["--readme", str(readme), "--logs", str(tmp_path / "none")]) == 0
    assert readme.read_text() == "<!-- vase:table sanity -->\nkeep\n<!-- vase:end -->\n"


@pytest.mark.parametrize("block, task, results, shipped, probe, row, also", [
    ("beyond", "beyond_retrieval", "compare.json", ["experiment=beyond_retrieval"],
     ["experiment=beyond_retrieval", "retrieval.k=0,5"], "| attribution | draw 0, seed 1 | {} |",
     "`python train.py -m experiment=beyond_retrieval`"),
    # the findings page's search-then-confirm block: the search as it ships, never its quick form
    ("search", "search_claim", "search_confirm.json", ["sweep=search_claim"], ["sweep=search_claim", "debug=fast"],
     "**Search, then confirm: {}** - ...", "search_claim/multiruns/2026-11-27_12-00-00"),
])
def test_a_sweeps_block_comes_from_its_newest_run_as_it_ships(tmp_path: Path, block: str, task: str, results: str,
                                                               shipped: list[str], probe: list[str], row: str,
                                                               also: str) -> None:
    """The newest run of the command as it ships, never a newer probe of it with other settings."""
    logs = tmp_path / "logs"
    for name, overrides, value in (("2026-11-27_12-00-00", shipped, "+12.5"), ("2026-11-27_13-00-00", probe, "+99.0")):
        _sweep(logs / task / "multiruns" / name, overrides, results, row.format(value))
    readme = tmp_path / "README.md"
    readme.write_text(f"<!-- vase:table {block} -->\nnot run yet\n<!-- vase:end -->\n")
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    text = readme.read_text()
    assert row.format("+12.5") in text and "+99.0" not in text and "not run yet" not in text
    assert also in text


def test_rows_whose_results_are_on_another_machine_are_kept_not_dropped(tmp_path: Path) -> None:
    """The learning check's negative controls ran on an earlier machine: a rebuild here, with only the plain check's
    results, leaves the table as it is (and says which rows it lacks) instead of dropping their rows."""
    logs = tmp_path / "logs"
    _sanity(logs, "2026-11-26_10-00-00", {"1": 0.42}, None)
    readme = tmp_path / "README.md"
    block = ("<!-- vase:table sanity -->\n| run | x |\n|---|---|\n| seed 1 | old |\n"
             "| seed 1, `flip_advantages` | -0.2 |\n<!-- vase:end -->\n")
    readme.write_text(block)
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    assert readme.read_text() == block
    _sanity(logs, "2026-11-26_11-00-00", {"1": -0.2}, "flip_advantages")  # now they are here: rebuilt
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    assert "| seed 1 | old |" not in readme.read_text() and "`flip_advantages`" in readme.read_text()

