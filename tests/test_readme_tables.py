"""README tables are rebuilt from results files (make readme-tables), never copied by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vase.readme_tables import GDPO_COMMAND, main

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
    # the GDPO page's block: the ablation demo under both aggregations, never the ablation demo alone or one of them
    ("gdpo", "ablation_demo", "ablation.json", GDPO_COMMAND, ["experiment=ablation_demo"],
     "| stage.module.multi_objective_aggregation=normalize_then_sum | draw 0, seed 1 | 0.6 | {} | none |",
     "ablation_demo/multiruns/2026-11-27_12-00-00"),
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



def _quick(logs: Path, name: str, overrides: list[str], shape: tuple[int, int, int]) -> None:
    """A finished quick sweep's ablation.json: shape right at weight 0.6, at 0 and at the SFT start, of 240."""
    def diff(a: int, b: int) -> dict:
        return {"diff": (a - b) / 240, "lo": (a - b - 20) / 240, "hi": (a - b + 20) / 240, "n": 240}

    d = logs / "ablation_quick" / "multiruns" / name
    d.mkdir(parents=True)
    (d / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n" + "".join(f"    - {o}\n" for o in overrides))
    at_max, at_0, sft = shape
    (d / "ablation.json").write_text(json.dumps({
        "weights": [0.0, 0.6], "machine": MACHINE, "i_per_seed": {"1": {
            "at_max": at_max / 240, "at_0": at_0 / 240, "sft": sft / 240,
            "max_minus_0": diff(at_max, at_0), "max_minus_sft": diff(at_max, sft)}}}))


def test_the_first_sweeps_table_has_a_row_per_draw_from_each_draws_newest_run(tmp_path: Path) -> None:
    """The Sweeps page's first table (target (i) of make ablation-quick on draws 0 and 5) is written from the two
    sweeps' ablation.json: each draw's newest run as it ships, the default draw with or without the draw named, and
    never a probe with other settings; with one draw missing the table is left as it is."""
    logs = tmp_path / "logs"
    _quick(logs, "2026-11-29_10-00-00", ["experiment=ablation_quick"], (148, 107, 118))
    _quick(logs, "2026-11-29_11-00-00", ["experiment=ablation_quick", "data.synthetic.seed=5"], (153, 137, 121))
    _quick(logs, "2026-11-29_12-00-00", ["experiment=ablation_quick", "data.synthetic.seed=5", "seed=2"], (0, 240, 0))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- vase:table quick -->\nnot run yet\n<!-- vase:end -->\n")
    assert main(["--readme", str(readme), "--logs", str(tmp_path / "none")]) == 0
    assert "not run yet" in readme.read_text()
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    text = readme.read_text()
    assert "| 0 (the default), GRPO seed 1 | +17.1 [+8.8, +25.4] (61.7 % vs 44.6 %) | +12.5 [+4.2, +20.8] " \
           "(SFT 49.2 %) | **held** |" in text, text
    assert "| 5, GRPO seed 1 | +6.7 [-1.7, +15.0] (63.7 % vs 57.1 %) | +13.3 [+5.0, +21.7] (SFT 50.4 %) | " \
           "not held |" in text, text
    assert "shape right: weight 0.6 against 0" in text and "2026-11-29_11-00-00" in text and "12-00-00" not in text


def _claim_sweep(logs: Path, name: str, overrides: list[str], groups: dict[str, tuple[float, float]]) -> None:
    """An ablation demo's ablation.json with its caption differences (lexical, overall) per group."""
    def c(x: float) -> dict:
        return {"diff": x, "lo": x - 0.01, "hi": x + 0.01, "n": 240}

    d = logs / "ablation_demo" / "multiruns" / name
    d.mkdir(parents=True)
    (d / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n" + "".join(f"    - {o}\n" for o in overrides))
    diffs = {g: {"lexical_similarity": c(lex), "overall_score": c(ov)} for g, (lex, ov) in groups.items()}
    (d / "ablation.json").write_text(json.dumps({"table": "t", "machine": MACHINE,
                                                 "captions": {"held": False, "differences": diffs}}))


def test_the_claims_search_has_a_row_for_the_demo_and_for_each_setting_tried(tmp_path: Path) -> None:
    """The Sweeps page's search for the paper's claim: the demo's row from the shipped ablation demo, then a row per
    setting tried at the paper's weights (a sweep of two bonus weights gives two rows, the newest run of a setting
    wins), each draw's lexical and overall difference against the start, bold where it clears 0, and where both did."""
    logs = tmp_path / "logs"
    _claim_sweep(logs, "2026-11-28_09-00-00", ["experiment=ablation_demo"],
                 {"draw 0, seed 1": (0.007, -0.004), "draw 5, seed 1": (0.006, 0.003)})
    paper = "reward.weights.shape=0.15"
    _claim_sweep(logs, "2026-11-28_10-00-00", ["experiment=ablation_demo", paper, "reward.terms.bonus.weight=0.3,0.6"],
                 {"draw 0, seed 1, reward.terms.bonus.weight=0.3": (-0.0, 0.003),
                  "draw 5, seed 1, reward.terms.bonus.weight=0.3": (0.017, 0.029),
                  "draw 0, seed 1, reward.terms.bonus.weight=0.6": (0.5, 0.5),  # older than the run below: replaced
                  "draw 5, seed 1, reward.terms.bonus.weight=0.6": (0.5, 0.5)})
    _claim_sweep(logs, "2026-11-28_11-00-00", ["experiment=ablation_demo", paper, "reward.terms.bonus.weight=0.6"],
                 {"draw 0, seed 1": (0.012, 0.008), "draw 5, seed 1": (-0.002, 0.017)})
    _claim_sweep(logs, "2026-11-28_12-00-00", ["experiment=ablation_demo", "reward.terms.bonus.weight=0.9"],
                 {"draw 0, seed 1": (0.9, 0.9)})  # not at the paper's weights: not a row
    readme = tmp_path / "README.md"
    readme.write_text("<!-- vase:table claim -->\nnot run\n<!-- vase:end -->\n")
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    rows = [line for line in readme.read_text().splitlines() if line.startswith("| ")]
    assert rows[0] == ("| setting at the paper's weights | draw 0: lexical | draw 0: overall | draw 5: lexical | "
                       "draw 5: overall | held on |")
    assert rows[1:] == [
        "| the demo (`make ablation-demo`) | +0.007 [-0.003, +0.017] | -0.004 [-0.014, +0.006] | "
        "+0.006 [-0.004, +0.016] | +0.003 [-0.007, +0.013] | neither |",
        "| `reward.terms.bonus.weight=0.3` | -0.000 [-0.010, +0.010] | +0.003 [-0.007, +0.013] | "
        "**+0.017 [+0.007, +0.027]** | **+0.029 [+0.019, +0.039]** | draw 5 |",
        "| `reward.terms.bonus.weight=0.6` | **+0.012 [+0.002, +0.022]** | +0.008 [-0.002, +0.018] | "
        "-0.002 [-0.012, +0.008] | **+0.017 [+0.007, +0.027]** | neither |"], rows
    assert "0.900" not in readme.read_text() and "2026-11-28_11-00-00" in readme.read_text()


def _probe(path: Path, width: float, seed: int, overrides: list[str], crop: float) -> None:
    path.mkdir(parents=True)
    acc = {"majority": {"accuracy": 0.238, "ci": [0.177, 0.298]}, "view": {"accuracy": 0.249, "ci": [0.188, 0.315]},
           "crop": {"accuracy": crop, "ci": [crop - 0.07, crop + 0.07]}}
    (path / "zoom_probe.json").write_text(json.dumps({"train": 190, "heldout": 185, "scenes": 9, "width": width, **acc,
                                                      "data_seed": seed, "overrides": overrides, "machine": MACHINE}))


def test_the_zoom_probes_table_has_a_row_per_draw_and_crop_from_the_newest_probe_run_as_documented(
        tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    runs = logs / "beyond_zoom" / "runs"
    _probe(runs / "2026-11-27_10-00-00", 0.5, 0, ["experiment=beyond_zoom"], 0.30)
    _probe(runs / "2026-11-27_11-00-00", 0.5, 0, ["experiment=beyond_zoom"], 0.354)  # newer: wins
    _probe(runs / "2026-11-27_12-00-00", 1.0, 0, ["experiment=beyond_zoom", "data.zoom_width=1.0"], 0.331)
    _probe(runs / "2026-11-27_13-00-00", 0.5, 5, ["experiment=beyond_zoom", "data.synthetic.seed=5"], 0.31)
    # a probe with other settings (another model) is not a row of this table
    _probe(runs / "2026-11-27_14-00-00", 0.5, 0, ["experiment=beyond_zoom", "model=qwen3b"], 0.99)
    readme = tmp_path / "page.md"
    readme.write_text("<!-- vase:table zoom_probe -->\nold\n<!-- vase:end -->\n")
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    text = readme.read_text()
    rows = [r for r in text.splitlines() if r.startswith("| draw ")]
    assert rows == [
        "| draw 0, side A's scene (`data.zoom_width=0.5`) | 190 / 185 | 23.8 % [17.7, 29.8] | 24.9 % [18.8, 31.5] | "
        "35.4 % [28.4, 42.4] | +10.5 |",
        "| draw 0, the whole frieze (`data.zoom_width=1`) | 190 / 185 | 23.8 % [17.7, 29.8] | 24.9 % [18.8, 31.5] | "
        "33.1 % [26.1, 40.1] | +8.2 |",
        "| draw 5, side A's scene (`data.zoom_width=0.5`) | 190 / 185 | 23.8 % [17.7, 29.8] | 24.9 % [18.8, 31.5] | "
        "31.0 % [24.0, 38.0] | +6.1 |"]
    assert "99.0" not in text and "2026-11-27_11-00-00" in text and "2026-11-27_10-00-00" not in text


def _compare(d: Path, overrides: list[str], key: str, on: str, att: float, held: bool) -> None:
    """A beyond sweep's compare.json: attribution the target, shape another dimension."""
    d.mkdir(parents=True)
    (d / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n" + "".join(f"    - {o}\n" for o in overrides))
    group = {"off": 0.5, "on": 0.5 + att, "diff": att, "lo": att - 0.04, "hi": att + 0.04}
    (d / "compare.json").write_text(json.dumps({
        "key": key, "off": "0", "on": on, "groups": ["draw 0, seed 1", "draw 5, seed 1"], "held": held,
        "dimensions": {"attribution": {"target": True, "groups": {"draw 0, seed 1": group, "draw 5, seed 1": group}},
                       "shape": {"target": False, "groups": {"draw 0, seed 1": {**group, "lo": -0.3, "hi": -0.1}}}},
        "table": "| shipped table |", "machine": MACHINE}))


def test_an_ideas_probes_are_set_beside_its_comparison_as_it_ships_each_from_its_newest_run(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    multi = logs / "beyond_retrieval" / "multiruns"
    readme = tmp_path / "page.md"
    readme.write_text("<!-- vase:table retrieval_format -->\nold\n<!-- vase:end -->\n")
    _compare(multi / "2026-11-27_09-00-00", ["experiment=beyond_retrieval"], "retrieval.k", "3", 0.108, True)
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    assert "old" in readme.read_text()  # the shipped comparison alone is no table of probes: left as it is
    _compare(multi / "2026-11-27_10-00-00", ["experiment=beyond_retrieval", "retrieval.format=lines"], "retrieval.k",
             "3", -0.3, False)
    _compare(multi / "2026-11-27_11-00-00", ["experiment=beyond_retrieval", "retrieval.format=lines"], "retrieval.k",
             "3", -0.404, False)  # newer: wins
    _compare(multi / "2026-11-27_12-00-00", ["experiment=beyond_zoom"], "retrieval.k", "3", 0.9, True)  # not this idea
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    text = readme.read_text()
    shipped, probe = text.split("**as it ships**")[1].split("**`retrieval.format=lines`**")
    assert "| draw 0, seed 1 | 50.0 -> 60.8: +10.8 [+6.8, +14.8] | none / shape |" in shipped
    assert "Verdict on the targets: **held**" in shipped
    assert "| draw 5, seed 1 | 50.0 -> 9.6: -40.4 [-44.4, -36.4] | none / none |" in probe
    assert "Verdict on the targets: **not held**" in probe
    assert "-30.0" not in text and "+90.0" not in text and "2026-11-27_11-00-00" in text


def _heldout_job(job: Path, overrides: list[str], right: int) -> None:
    """A finished sweep job as vase leaves it: its overrides, its run record, its held-out answers (``right`` of ten
    held-out vases' attribution and dating answers pass)."""
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (job / ".vase-run.json").write_text(json.dumps({"status": "finished", "ended": 1796039760.0,
                                                    "code": {"commit": "c0ffee1234abcd", "torch": "2.14.1"}}))
    items = {f"v{i}#q": {"attribution_pass": float(i < right), "dating_pass": 0.0} for i in range(10)}
    passes = {d: {"n": 10, "mean": sum(v[f"{d}_pass"] for v in items.values()) / 10} for d in ("attribution", "dating")}
    (job / "heldout_reward.json").write_text(json.dumps({"items": items, "pass": passes, "term_of_dimension": {
        "attribution": "attribution", "dating": "dating"}}))


def test_a_probe_that_ran_only_the_ideas_side_is_paired_with_the_shipped_sweeps_jobs_without_it(tmp_path: Path) -> None:
    """``retrieval.k=3 retrieval.format=lines`` runs no k=0 jobs of its own: each of its jobs is set against the
    shipped sweep's k=0 job of the same draw and seed (the same held-out vases); a probe that has not answered every
    draw and seed yet (killed, running) is no row."""
    logs = tmp_path / "logs"
    multi = logs / "beyond_retrieval" / "multiruns"
    shipped = multi / "2026-11-30_09-00-00"
    _compare(shipped, ["experiment=beyond_retrieval"], "retrieval.k", "3", 0.108, True)
    groups = [("0", "1"), ("5", "1")]
    for n, (draw, seed) in enumerate(groups):
        for k, right in (("0", 5), ("3", 7)):
            _heldout_job(shipped / f"{2 * n + int(k == '3')}", [f"data.synthetic.seed={draw}", f"seed={seed}",
                                                                  f"retrieval.k={k}", "experiment=beyond_retrieval"], right)
    probe = ["experiment=beyond_retrieval", "retrieval.k=3", "retrieval.format=lines"]
    for name, done in (("2026-11-30_10-00-00", groups), ("2026-11-30_11-00-00", groups[:1])):  # the newer is unfinished
        sweep = multi / name
        sweep.mkdir(parents=True)
        (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n" + "".join(f"    - {o}\n" for o in probe))
        for n, (draw, seed) in enumerate(done):
            _heldout_job(sweep / str(n), [f"data.synthetic.seed={draw}", f"seed={seed}", "retrieval.k=3",
                                          "retrieval.format=lines", "experiment=beyond_retrieval"], 2)
    readme = tmp_path / "page.md"
    readme.write_text("<!-- vase:table retrieval_format -->\nold\n<!-- vase:end -->\n")
    assert main(["--readme", str(readme), "--logs", str(logs)]) == 0
    text = readme.read_text()
    probe_part = text.split("**`retrieval.k=3` `retrieval.format=lines`**")[1]
    assert "against the shipped sweep's `retrieval.k=0` jobs (2026-11-30_09-00-00" in probe_part
    rows = [r for r in probe_part.splitlines() if r.startswith("| draw ")]
    assert [r.split(" | ")[0] for r in rows] == ["| draw 0, seed 1", "| draw 5, seed 1"]
    assert all(" | 50.0 -> 20.0: -30.0 [-60.0, +0.0] | " in r for r in rows)  # attribution: 5 of 10 -> 2 of 10
    assert "2026-11-30_10-00-00" in text and "2026-11-30_11-00-00" not in text
    assert "code c0ffee1234" in probe_part and "Verdict on the targets: **not held**" in probe_part


def test_the_first_sweeps_table_decides_on_the_runs_pooled_and_never_on_one_run(tmp_path: Path) -> None:
    """Since verdict format 2 an ablation.json carries target (i) pooled over its runs (``i_pooled``): each seed's row
    shows its own numbers and decides nothing, the draw's pooled row carries the decision; with one run it is "not
    decided (one run)", never "held"."""
    from vase.readme_tables import quick_table

    logs = tmp_path / "logs"
    for name, overrides, seeds, decided in (("2026-12-07_10-00-00", ["experiment=ablation_quick"], 3, True),
                                            ("2026-12-07_11-00-00", ["experiment=ablation_quick",
                                                                     "data.synthetic.seed=5"], 1, None)):
        _quick(logs, name, overrides, (148, 107, 118))
        path = logs / "ablation_quick" / "multiruns" / name / "ablation.json"
        v = json.loads(path.read_text())
        one = {"diff": 41 / 240, "lo": None, "hi": None, "runs": 1, "vases": 240, "one_run": True, "undecided": True,
               "direction": "not decided (one run)"}
        runs = {"diff": 41 / 240, "lo": 25 / 240, "hi": 57 / 240, "runs": 3, "vases": 240, "direction": "up"}
        v.update(i=decided, i_pooled={"max_minus_0": runs if seeds > 1 else one,
                                      "max_minus_sft": {**runs, "diff": 30 / 240} if seeds > 1 else one})
        path.write_text(json.dumps(v))
    text = quick_table(logs)
    assert "| 0 (the default), GRPO seed 1 | +17.1 [+8.8, +25.4] (61.7 % vs 44.6 %) | +12.5 [+4.2, +20.8] (SFT " \
           "49.2 %) | one run: its vases only |" in text, text
    assert "| 0 (the default), **pooled over 3 run(s)** | +17.1 [+10.4, +23.8] | +12.5 [+10.4, +23.8] | " \
           "**held** |" in text, text
    assert "| 5, **pooled over 1 run(s)** | +17.1 (one run) | +17.1 (one run) | **not decided** (not decided (one " \
           "run)) |" in text, text
