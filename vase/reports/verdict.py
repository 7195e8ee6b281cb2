"""Any sweep's hypothesis, answered: a sweep names what it compares in a ``hypothesis:`` block (in its sweep file, or
``+hypothesis.compare=...`` on the command line) and its end writes ``verdict.md`` / ``verdict.json``: a verdict line
first, then, for each thing the hypothesis says the key should move, the difference from the baseline per replicate
and pooled over replicates, with paired 95 % intervals.

    hypothesis:
      compare: stage.module.beta      # the swept key (or a list of keys) whose values are compared
      baseline: 0.0                   # the value the others are compared with
      moves: [heldout/total, kl, heldout/shape_right]   # what it should move (MOVES); the first decides
      replicates: [seed]              # swept keys whose values are repeats of one comparison, not settings

How the numbers are made:

- a held-out measure (``heldout/...``, each job's ``heldout_reward.json``: ``val.heldout=true``) is paired over
  the same held-out vases: a job at a compared value against the job at the baseline with the same replicate values;
  pooled over replicates, every vase's difference of every replicate is resampled within its replicate (a stratified
  bootstrap over vases, 2,000 draws), so a seed is one more draw of the same comparison and never a setting;
- a training measure (``kl``, ``reward``, ``loss``, ``reward/<term>``: the mean of a job's last 20 steps) has one
  number per job: its difference is paired over replicates, and its interval is a bootstrap over replicates when there
  are at least three (with fewer, the report says there is none);
- any other swept key (neither compared nor a replicate) keeps its jobs apart: each of its settings gets its own
  verdict, and no verdict pools jobs of different settings.

A verdict says ``up`` or ``down`` where the interval excludes 0, and ``no clear change`` where it holds 0.

A hypothesis may also name a ``report:`` kind (`REPORT_KINDS`) that writes more beside verdict.md: ``ablation`` (a
reward weight's or tau's targets (i)-(iii), its dose-response and plot: ablation.md) and ``idea`` (a beyond-the-paper
idea with against without it on its target dimensions: compare.md, where ``label`` names the idea and ``within`` a
second held-out result its own jobs write). `decide_sweep` is the one path a sweep's end takes to all of them.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.config.entry_actions import (
    IMPORT_PLUGINS_FLAG,
    PROJECT_PLUGINS,
    listed_project_plugins,
    load_reader_plugins,
    take_config_dir,
)
from vase.errors import ConfigError
from vase.io import atomic_write_json, write_markdown
from vase.provenance import SOURCE, machine_stamp
from vase.reports.hypothesis import REPORT_KINDS, START, sweep_hypothesis
from vase.reports.jobs import (
    code_lines,
    code_of_jobs,
    debug_preset_of,
    job_dirs,
    machines_of_jobs,
    overrides_of,
)
from vase.reports.verdict_stats import MIN_RUNS, RUNS_AND_VASES, compare_move, is_share, same_setting, value_of
from vase.reports.verdict_view import interval_cell, move_label, said_cell, verdict_text
from vase.runs import reading_records
from vase.runs.describe import project_conf_of

VERDICT_FORMAT = 2
"""verdict.json's format: 2 since the pooled interval covers the training runs (``runs``, ``vases``, ``between_sd``,
``vase_sd``, ``se``; ``one_run`` and the direction ``not decided (one run)``); 1 (no ``format`` key) pooled a bootstrap
over the vases within each run."""


def decide_sweep(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The one path from a finished sweep to its answer: the hypothesis its jobs ran with, answered by its report kind.
    Returns ``{"report", "lines", "files"}`` (the verdict lines to print first, the files written), or None when the
    sweep has no hypothesis or nothing to decide on."""
    q = sweep_hypothesis(sweep_dir)
    if q is None:
        return None
    kind = REPORT_KINDS[q["report"]]
    pooled = write_verdict_report(sweep_dir, q) if kind.verdict_first else None
    module, _, name = kind.write.partition(":")
    got = getattr(importlib.import_module(module), name)(Path(sweep_dir), q)
    if kind.verdict_first and pooled is not None:  # verdict.md's lines and file first, then the kind's own
        got = {"lines": [*said_lines(pooled), *((got or {}).get("lines") or [])],
               "files": [Path(sweep_dir) / "verdict.md", *((got or {}).get("files") or [])]}
    return None if got is None else {"report": q["report"], **got}


def write_verdict(sweep_dir: Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """The ``verdict`` kind: verdict.md alone."""
    return joined_verdict(sweep_dir, write_verdict_report(sweep_dir, q))


def joined_verdict(sweep_dir: Path, pooled: dict[str, Any] | None, lines: list[str] | None = None,
                  page: str | None = None) -> dict[str, Any] | None:
    """A report kind's answer: verdict.md's verdict lines (``pooled``, when it was written), then the kind's own
    ``lines`` and its ``page`` (a file beside it); None when neither was written."""
    if pooled is None and page is None:
        return None
    return {"lines": [*said_lines(pooled), *(lines or [])],
            "files": [*([sweep_dir / "verdict.md"] if pooled is not None else []),
                      *([sweep_dir / page] if page is not None else [])]}


def said_lines(pooled: dict[str, Any] | None) -> list[str]:
    """The lines a sweep's end prints for its verdict: "too short to decide" first for a sweep run under a debug
    preset, then the verdict's own (``lines``, which a report kind reads as the verdict)."""
    pooled = pooled or {}
    return [*([pooled["too_short"]] if pooled.get("too_short") else []), *(pooled.get("lines") or [])]


def write_verdict_report(sweep_dir: str | Path, q: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``verdict.md`` and ``verdict.json`` for a sweep over ``q`` (by default the hypothesis in its jobs' config);
    None when it has none (or no job finished). A baseline of ``start`` (each job against its own start) is no
    swept value: there is nothing to write here, the report kind compares each job with its start."""
    sweep_dir = Path(sweep_dir)
    jobs = job_dirs(sweep_dir)  # every folder with its .hydra/overrides.yaml
    if not jobs:
        return None
    q = q if q is not None else sweep_hypothesis(sweep_dir)
    if q is None or q["baseline"] == START:
        return None
    ov = {j: overrides_of(j) for j in jobs}
    swept = [k for k in sorted({k for o in ov.values() for k in o}) if len({o.get(k) for o in ov.values()}) > 1]
    apart = [k for k in swept if k not in q["compare"] and k not in q["replicates"]]

    def values(j: Path, keys: list[str]) -> str:
        return ", ".join(f"{k}={ov[j].get(k, '-')}" for k in keys)

    settings = sorted({values(j, q["compare"]) for j in jobs}, key=_sort_key)
    baseline = (", ".join(f"{k}={q['baseline']}" for k in q["compare"]) if q["baseline"] is not None
                else settings[0])
    found_base = [s for s in settings if same_setting(s, baseline)]
    verdict: dict[str, Any] = {"format": VERDICT_FORMAT, "interval": RUNS_AND_VASES, "hypothesis": q, "apart": apart,
                               "baseline": baseline, "blocks": {}, "jobs": {},
                               "machine": machine_stamp(), "code": code_of_jobs(jobs),
                               "machines": machines_of_jobs(jobs), "debug": debug_preset_of(jobs)}
    value = functools.cache(value_of)  # each job's files read once for this report, whatever it is compared with
    title = f"# Does `{', '.join(q['compare'])}` move {', '.join(move_label(m) for m in q['moves'])}?"
    lines = [title, ""]
    head_code, tail_code = code_lines(verdict["code"], verdict["machines"])
    lines += head_code
    head: list[str] = []
    body: list[str] = []
    if not found_base:
        head.append(f"**No verdict**: no job ran the baseline {baseline} (the sweep ran {'; '.join(settings)}); "
                    f"set hypothesis.baseline to one of them.")
    blocks: dict[str, list[Path]] = {}
    for j in jobs:
        blocks.setdefault(values(j, apart) if apart else "", []).append(j)
    for block, members in sorted(blocks.items()):
        by_setting: dict[str, dict[str, Path]] = {}
        for j in members:
            by_setting.setdefault(values(j, q["compare"]), {})[values(j, q["replicates"]) or "-"] = j
        base = next((by_setting[s] for s in by_setting if same_setting(s, baseline)), None)
        if base is None:
            continue
        where = f" ({block})" if block else ""
        for setting, runs in sorted(by_setting.items(), key=lambda kv: _sort_key(kv[0])):
            for rep, j in runs.items():  # where each job sits in the verdict: its own run shows its comparison
                verdict["jobs"][j.name] = {"block": block or "all", "setting": setting, "replicate": rep}
            if same_setting(setting, baseline):
                continue
            found = {m: compare_move(m, base, runs, value) for m in q["moves"]}
            verdict["blocks"].setdefault(block or "all", {})[setting] = found
            said = "; ".join(f"{move_label(m)}: {said_cell(r['pooled'], is_share(m))}" for m, r in found.items())
            head.append(f"**{setting}{where} against {baseline}**: {said}.")
            body += [f"## {setting}{where} against {baseline}", "", *_measure_tables(found)]
    if not verdict["blocks"] and found_base:
        head.append("**No verdict**: no job at another value shares replicate values with a baseline job.")
    head += too_few_runs(verdict, q)
    if verdict["debug"]:  # said before the verdict on every surface, kept apart from the verdict's own lines
        verdict["too_short"] = too_short(verdict["debug"], q, train_program(sweep_dir))
    lines += [*([verdict["too_short"]] if verdict["debug"] else []), *head, ""]
    if apart:
        lines += [f"Kept apart (never pooled): {', '.join(apart)}.", ""]
    lines += body
    lines += [how_line(q), "", *tail_code]
    verdict["lines"] = head
    write_markdown(sweep_dir / "verdict.md", "\n".join(lines) + "\n")
    atomic_write_json(sweep_dir / "verdict.json", verdict)
    return verdict


def too_few_runs(verdict: dict[str, Any], q: dict[str, Any]) -> list[str]:
    """verdict.md's line where a pooled measure rests on too few training runs to decide (`MIN_RUNS`): why, and what
    to give the sweep; [] where every one has enough."""
    runs = {r["pooled"].get("runs") for b in verdict["blocks"].values() for found in b.values() for r in found.values()
            if r["pooled"].get("undecided")}
    if not runs:
        return []
    why = ("One training run per setting**: each interval above covers the held-out vases, not another training run "
           "(another seed, another CPU's last bits)" if runs == {1} else
           f"Too few training runs per setting**: the runs' spread rests on fewer than {MIN_RUNS} runs")
    return [f"**{why}, so nothing is decided; give every setting {MIN_RUNS} runs or more "
            f"({' or '.join(q['replicates'])}: {MIN_RUNS} values)."]


def how_line(q: dict[str, Any]) -> str:
    """verdict.md's paragraph on how its numbers are made."""
    return ("How: a held-out measure is paired over the same held-out vases, per replicate (each a training run: "
            f"{', '.join(q['replicates'])}), with a bootstrap over those vases. Pooled over the runs, its interval is a "
            "t interval whose variance is the spread of the runs' mean differences plus that of the vases' "
            "differences averaged over the runs: another seed or another machine gives another trained model, and "
            "the interval covers it, not only another test set (docs/ablation.md, \"How the numbers are made\"). "
            f"It decides from {MIN_RUNS} runs a setting. A training measure has one number per job (its last 20 "
            "steps); its interval needs at least three replicates. \"Could detect ±x\" beside a change the interval "
            "does not tell from 0: the smallest difference such an interval finds 80 % of the time, (t(0.975) + "
            "t(0.80)) x its standard error.")


DECIDING_FORMS = {
    "reward.weights.": "python train.py -m experiment=ablation_quick (240 held-out vases, three runs a weight; its time: "
                       "docs/getting-started.md)",
    "stage.module.beta": "python train.py -m sweep=kl_quick (240 held-out vases, three runs a beta; its time: "
                         "docs/getting-started.md)",
    "stage.module.multi_objective_aggregation": "python train.py -m sweep=aggregation_quick (240 held-out vases, three "
                                                "runs an aggregation; its time: docs/getting-started.md)",
    "reward.tau": "python train.py -m sweep=tau_quick (240 held-out vases, three runs a tau; its time: "
                  "docs/getting-started.md)",
    "stage.module.optimizer.lr": "python train.py -m sweep=lr_quick (240 held-out vases, three runs a rate; its time: "
                                 "docs/getting-started.md)",
    "stage.module.lora.": "python train.py -m sweep=lora_rank_quick (240 held-out vases, three runs a rank; its time: "
                          "docs/getting-started.md)",
}
"""The form of a sweep that decides, by the prefix of the key it compares (the quick forms, three runs a setting)."""


def train_program(sweep_dir: Path) -> str:
    """How the user who ran the sweep starts a training run: ``python train.py`` in vase's checkout, ``vase train``
    from an installed vase, ``vase train --config-dir <conf>`` for a sweep of a user's project (its conf folder from
    the sweep's record, by name: the command is typed in the project's folder)."""
    try:
        conf = project_conf_of(sweep_dir)
    except (ConfigError, OSError):
        conf = None
    if conf:
        return f"vase train --config-dir {Path(conf).name}"
    return "python train.py" if (SOURCE / "train.py").is_file() else "vase train"


def too_short(preset: str, q: dict[str, Any], program: str = "python train.py") -> str:
    """verdict.md's first line for a sweep run under a debug preset: its numbers show that the report works, not
    whether the setting helps; the form that decides (as ``program`` starts a run: `train_program`), and its measured
    time where one is.

    >>> too_short("fast", {"compare": ["data.zoom_width"]}).split("; ")[-1]
    'the form that decides: the same sweep without debug=fast (its time is not measured yet).'
    >>> too_short("fast", {"compare": ["stage.module.beta"]}).split("decides: ")[1][:36]
    'python train.py -m sweep=kl_quick (2'
    >>> too_short("fast", {"compare": ["reward.weights.shape"]}).split("decides: ")[1][:45]
    'python train.py -m experiment=ablation_quick '
    >>> too_short("fast", {"compare": ["stage.module.beta"]}, "vase train --config-dir conf").split("decides: ")[1][:48]
    'vase train --config-dir conf -m sweep=kl_quick ('
    """
    form = next((f for prefix, f in DECIDING_FORMS.items() if any(k.startswith(prefix) for k in q.get("compare") or [])),
                f"the same sweep without debug={preset} (its time is not measured yet)").replace("python train.py", program)
    return (f"**Too short to decide** (debug={preset}): a debug preset's few steps and held-out vases show that the "
            f"sweep and its report work, not whether the setting helps; the form that decides: {form}.")


def _measure_tables(found: dict[str, Any]) -> list[str]:
    """verdict.md's tables for one setting: per measure, each replicate's difference from the baseline, then the
    pooled one."""
    body: list[str] = []
    for m, r in found.items():
        pct = is_share(m)
        scale = 100 if pct else 1
        p = r["pooled"]
        rows = [[rep, f"{scale * d['base']:.4g}", f"{scale * d['value']:.4g}", interval_cell(d, pct), d["n"]]
                for rep, d in r["per_replicate"].items()]
        rows.append([f"**pooled over {p['replicates']} replicate(s)**", "", "", f"**{interval_cell(p, pct)}**", p["n"]])
        body += [f"**{move_label(m)}** ({r['pooled'].get('method', 'not measured')})", "",
                 *md.table(["replicate", "baseline", "this setting", "difference [95 % interval]", "n"], rows,
                           align="lrrlr"), ""]
    return body


def _sort_key(setting: str) -> tuple[Any, ...]:
    out = []
    for p in setting.split(", "):
        v = p.partition("=")[2]
        try:
            out.append((0, float(v), ""))
        except ValueError:
            out.append((1, 0.0, v))
    return tuple(out)


def main(argv: list[str] | None = None) -> int:
    """``python -m vase.reports.verdict <sweep folder>``: (re)write a finished sweep's answer (verdict.md, and what
    its hypothesis's report kind writes beside it) from the hypothesis its jobs ran with, and print its verdict lines.
    A report kind of the user's project is imported from the project the user names now (``--config-dir conf``, run
    from the project's folder as ``vase train`` is) or, with ``--import-plugins``, from the one the sweep's record
    names: reading a sweep folder never imports what the folder itself names."""
    prog = sys.argv[0] if sys.argv[0].startswith("vase ") else "python -m vase.reports.verdict"  # as typed
    ap = argparse.ArgumentParser(prog=prog, description=main.__doc__.splitlines()[0])
    ap.add_argument("sweep", help="a sweep's folder (logs/train/multiruns/<time>)")
    ap.add_argument("--config-dir", "-cd", metavar="CONF",
                    help="your project's conf folder: the modules its plugins.yaml lists are imported (a report kind "
                         "of yours), from the folder you run in")
    ap.add_argument(IMPORT_PLUGINS_FLAG, action="store_true",
                    help="import the modules the sweep's own project lists (its record names the folder): only for a "
                         "sweep whose code you trust")
    args = ap.parse_args(argv)
    recorded = project_conf_of(args.sweep)
    try:
        conf = take_config_dir(["--config-dir", args.config_dir])[1] if args.config_dir else None
        load_reader_plugins(conf, recorded, args.import_plugins)
        with reading_records():
            answer = decide_sweep(args.sweep)
    except (ConfigError, OSError) as e:
        print(f"error: {e}{project_hint(recorded, args.config_dir or args.import_plugins)}", file=sys.stderr)
        return 2
    if answer is None:
        print(f"error: {args.sweep}: no job there has a hypothesis: block, or none finished with something to decide "
              f"on", file=sys.stderr)
        return 1
    print(verdict_text(answer))
    return 0


def project_hint(recorded: str | None, named: Any) -> str:
    """After an error of `main` with no project named (``named``): the modules the sweep's project lists, not imported,
    and how to import them ('' where it lists none)."""
    try:
        listed = [] if named else listed_project_plugins(recorded)
    except ConfigError:
        listed = []
    return (f" (the sweep's project lists {', '.join(listed)} in {Path(str(recorded)) / PROJECT_PLUGINS}, which a "
            f"reader does not import: run from that project with --config-dir conf, or add {IMPORT_PLUGINS_FLAG})"
            if listed else "")


if __name__ == "__main__":
    # the module vase and a plugin import (python -m runs a second copy, whose registries a plugin never reaches)
    from vase.reports import verdict

    sys.exit(verdict.main())
