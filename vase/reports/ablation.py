"""A reward-weight ablation's verdict: does a weight move what it rewards, on vases the model never saw?

For a sweep over one ``reward.weights.<dim>`` (and seeds, and data draws ``data.synthetic.seed``), ``ablation.md``,
``ablation.json`` and ``ablation.png``, decided on each job's **held-out reward** (``val.heldout``: the task the
stage trained, answered on the held-out vases and scored by the run's own terms) against its starting point (the
same model with its adapter off, on the same answers' ids):

(i)  on every draw and seed, the share of held-out answers that get ``<dim>`` right at the largest weight is above
     that at weight 0 and above the start: both paired 95 % bootstrap intervals exclude 0;
(ii) at the paper's weights (``<dim>`` 0.15), no dimension's held-out rate lies below the start beyond its paired
     interval.

Multiple choice by option likelihood (``val.vqa=ll``), where the jobs ran it, is reported beside it as
**transfer to QA**, with its own intervals: never the verdict. A sweep without held-out reward (older runs) is
decided on its VQA as before, and says so. The dose-response on the training prompts (the dimension's own training
reward over the last steps, largest weight against weight 0) is reported per draw and seed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.annotate.vocab import DIMENSIONS
from vase.choices import DRAW_KEY, PAPER_TAU, PAPER_WEIGHT
from vase.eval.stats import heldout_difference, mix_of
from vase.io import atomic_write_json, write_markdown
from vase.metrics.paired import held as paired_held
from vase.metrics.registry import is_percent
from vase.provenance import machine_stamp
from vase.reports.ablation_plots import plot_tau, plot_weight
from vase.reports.ablation_vqa import diff_points, percent_points, target_word, vqa_verdict, who
from vase.reports.jobs import (
    LAST_STEPS,
    code_lines,
    code_of_jobs,
    heldout_of,
    job_dirs,
    job_row,
    machines_of_jobs,
    overrides_of,
    pass_field,
    rate_right,
)
from vase.reports.verdict import joined_verdict, write_verdict_report
from vase.reports.verdict_stats import ONE_RUN, RUNS_AND_VASES, pooled_over_runs

TAU_KEY = "reward.tau"


def write_ablation_verdict(sweep_dir: Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """The ``ablation`` report kind (`vase.reports.hypothesis.REPORT_KINDS`): verdict.md pools the weight's effect over
    the replicates (a weight; tau is part of the scorer, so its jobs are only set against their own starts), and
    ablation.md/json/png decide the targets per draw and seed, the pooled verdict at their top."""
    pooled = write_verdict_report(sweep_dir, q) if q["compare"][0] != TAU_KEY else None
    verdict = write_ablation_report(sweep_dir, q, pooled=(pooled or {}).get("lines"))
    if verdict is None:
        return joined_verdict(sweep_dir, pooled)
    return joined_verdict(sweep_dir, pooled, [f"**ablation {target}**: {result} ({asks})"
                                             for target, asks, result in verdict_rows(verdict)], "ablation.md")


def write_ablation_report(sweep_dir: str | Path, q: dict[str, Any],
                          pooled: list[str] | None = None) -> dict[str, Any] | None:
    """Write ``ablation.md``, ``ablation.json`` and ``ablation.png`` for a sweep over one reward weight or tau (the
    hypothesis ``q`` of the ``ablation`` kind) and return the verdicts; None when the sweep's jobs do not vary its key
    (or have nothing held-out to decide on). ``pooled``: verdict.md's verdict lines, set at the report's top.
    A sweep that also varies another setting (``stage.module.multi_objective_aggregation``,
    ``reward.terms.bonus.weight``) keeps its jobs apart and decides every target once per setting too
    (``verdict["settings"]``), side by side at the top."""
    sweep_dir = Path(sweep_dir)
    jobs = [j for j in job_dirs(sweep_dir) if heldout_of(j)[0] or sorted(j.glob("vqa_*.json"))]
    if not jobs:
        return None
    ov = {j: overrides_of(j) for j in jobs}
    key, replicates = q["compare"][0], q["replicates"]
    jobs = [j for j in jobs if key in ov[j]]
    if not jobs:
        return None
    decided = _decide(key, jobs, ov, replicates)
    if decided is None:
        return None
    verdict, lines, plot = decided
    others = verdict.get("apart") or []
    if others:
        settings: dict[str, list[Path]] = {}
        for j in jobs:
            settings.setdefault(", ".join(f"{k}={ov[j].get(k, '-')}" for k in others), []).append(j)
        per = {name: got[0] for name, members in sorted(settings.items())
               if (got := _decide(key, members, ov, replicates)) is not None}
        verdict["settings"] = per
        compared = _settings_compared(key, jobs, ov, others)
        if compared is not None:
            verdict["settings_compared"] = compared["rows"]
        lines[1:1] = _settings_table(per) + (compared["lines"] if compared else [])
        if key != TAU_KEY:
            plot = _plot_settings(key, jobs, ov, others)
    if pooled:
        lines[1:1] = ["", "**Pooled over the replicates** (verdict.md: every held-out vase of every "
                          f"{' and '.join(replicates)}, paired within each; the sections below are per draw and seed):",
                      "", *(f"- {line}" for line in pooled)]
    return _write(sweep_dir, verdict, lines, plot)


def _other_swept(jobs: list[Path], ov: dict[Path, dict[str, str]], key: str, replicates: list[str]) -> list[str]:
    """The keys besides ``key`` and the replicates (seeds, data draws) that take more than one value across ``jobs``."""
    return [k for k in sorted({k for j in jobs for k in ov[j]} - {key, *replicates})
            if len({ov[j].get(k) for j in jobs}) > 1]


def _decide(key: str, jobs: list[Path], ov: dict[Path, dict[str, str]], replicates: list[str]
            ) -> tuple[dict[str, Any], list[str], Callable[[Path], None]] | None:
    """The verdict, the report's lines and its plot for ``jobs`` of a sweep over ``key``; None when they have nothing
    held-out to decide on."""
    dim = key.rsplit(".", 1)[-1]
    xs = sorted({float(ov[j][key]) for j in jobs})
    draws = sorted({ov[j].get(DRAW_KEY, "-") for j in jobs})

    # anything else the sweep varies (reward.terms.bonus.weight=0.3,0.6) tells its jobs apart too: never merged
    others = _other_swept(jobs, ov, key, replicates)

    def group(j: Path) -> str:  # one seed on one draw of the data (and one value of anything else swept)
        seed = ov[j].get("seed", "-")
        label = seed if len(draws) == 1 else f"draw {ov[j].get(DRAW_KEY, '-')}, seed {seed}"
        return ", ".join([label, *(f"{k}={ov[j].get(k, '-')}" for k in others)])

    groups: dict[str, dict[float, Path]] = {}
    for j in jobs:
        groups.setdefault(group(j), {})[float(ov[j][key])] = j
    verdict: dict[str, Any] = {"swept": key, "weights": xs, "draws": draws, "groups": sorted(groups),
                               "seeds": sorted({ov[j].get("seed", "-") for j in jobs}), "apart": others}
    held = {j: heldout_of(j) for j in jobs}
    lines = [f"# Reward ablation: `{key}` on held-out vases\n"]
    if key == TAU_KEY:
        if not all(h[0] is not None and h[1] is not None for h in held.values()):
            return None  # tau changes the scorer itself: only a job against its own start says what it moved
        verdict["basis"] = "held-out reward, each job against its own start"
        lines += _tau_verdict(verdict, xs, groups, held)
        captions = _caption_verdict(xs, groups, held, PAPER_TAU, "tau")
        if captions is not None:
            verdict["captions"] = captions["verdict"]
            lines += captions["lines"]
        lines[1:1] = _nothing_to_move(verdict, held)
        return verdict, lines, lambda path: plot_tau(path, xs, groups, held)
    if all(h[0] is not None and h[1] is not None for h in held.values()):
        verdict["basis"] = "held-out reward"
        lines += _heldout_verdict(verdict, dim, xs, groups, held, draws, ov)
        transfer = vqa_verdict(dim, xs, groups, jobs, ov, others, targets=False)
        if transfer is not None:
            verdict["transfer"] = transfer["verdict"]
            lines += ["", "**Transfer to QA**, reported beside the verdict, never as it: GRPO trained on the stage's "
                          "task; these are questions it did not train on.", *transfer["lines"]]
    else:
        got = vqa_verdict(dim, xs, groups, jobs, ov, others, targets=True)
        if got is None:
            return None
        verdict["basis"] = "held-out VQA (no held-out reward in these jobs: val.heldout=true adds it)"
        verdict.update(got["verdict"])
        lines += got["lines"]
    captions = _caption_verdict(xs, groups, held, PAPER_WEIGHT, "weight")
    if captions is not None:
        verdict["captions"] = captions["verdict"]
        lines += captions["lines"]
    dose = _dose_response(dim, xs, groups) if len(xs) > 1 else {}
    if dose:
        # one number a run: a decision needs more than one run (and then every run's), as every target does
        verdict["dose_response"] = all(v["at_max"] > v["at_0"] for v in dose.values()) if len(dose) > 1 else None
        verdict["dose_response_per_seed"] = dose
        lines.append(f"\n**Dose-response** on the training prompts, {dim} reward over the last {LAST_STEPS} steps at "
                     f"weight {max(xs):g} above weight {min(xs):g} on every run: "
                     f"**{target_word(verdict['dose_response'])}** ("
                     + "; ".join(f"{who(g)}: {v['at_max']:.3f} vs {v['at_0']:.3f}" for g, v in dose.items()) + ").")
    if verdict.get("basis") == "held-out reward":
        lines[1:1] = _nothing_to_move(verdict, held)
    return verdict, lines, lambda path: plot_weight(path, dim, xs, groups, held, jobs, ov)


def _settings_table(per: dict[str, dict[str, Any]]) -> list[str]:
    """Every target decided once per setting of what else the sweep varied, side by side: the answer to "which
    setting holds what" before the tables behind it.

    >>> print("\\n".join(_settings_table({"a=x": {"swept": "reward.weights.shape", "weights": [0.0, 0.6], "i": True},
    ...                                    "a=y": {"swept": "reward.weights.shape", "weights": [0.0, 0.6], "i": False}})))
    <BLANKLINE>
    ## The verdict per setting
    <BLANKLINE>
    Each target decided on the jobs of one setting only (every draw and seed of it); the sections below hold all jobs.
    <BLANKLINE>
    | target | a=x | a=y |
    |---|---|---|
    | (i) shape right at weight 0.6 above weight 0 and above the start | **held** | not held |
    """
    names = list(per)
    rows: dict[str, dict[str, str]] = {}
    for name, v in per.items():
        for target, asks, result in verdict_rows(v):
            rows.setdefault(f"{target} {asks.split(',')[0]}", {})[name] = result
    out = ["", "## The verdict per setting", "",
           "Each target decided on the jobs of one setting only (every draw and seed of it); the sections below hold "
           "all jobs.", "", *md.table(["target", *names])]
    for target, got in rows.items():
        out.append(md.row([target, *(f"**{got[n]}**" if got.get(n) == "held" else got.get(n, "–") for n in names)]))
    return out


def _settings_compared(key: str, jobs: list[Path], ov: dict[Path, dict[str, str]], others: list[str]
                       ) -> dict[str, Any] | None:
    """Each setting of what else the sweep varied against the first it ran (job 0's: the first value given on the
    command line, `sum_then_normalize` in `...aggregation=sum_then_normalize,normalize_then_sum`), job by job: the same draw, seed
    and weight, the same held-out vases, paired. Per pair, the swept dimension's change and every other dimension whose
    95 % interval excludes 0 (a setting that buys the swept dimension with another shows it here). None when no two
    jobs pair up or their held-out answers are missing."""
    dim = key.rsplit(".", 1)[-1]

    def setting(j: Path) -> str:  # the values only: the header names the keys
        return ", ".join(ov[j].get(k, "-") for k in others)

    def rest(j: Path) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in ov[j].items() if k not in others))

    names = list(dict.fromkeys(setting(j) for j in jobs))  # job_dirs' order: job 0's setting first
    base = {rest(j): j for j in jobs if setting(j) == names[0]}
    rows, lines = [], []
    for name in names[1:]:
        for j in sorted((j for j in jobs if setting(j) == name),
                        key=lambda j: (ov[j].get(DRAW_KEY, "-"), ov[j].get("seed", "-"), float(ov[j][key]))):
            a = base.get(rest(j))
            ha, hb = (heldout_of(a)[0] if a else None), heldout_of(j)[0]
            if ha is None or hb is None or dim not in hb["pass"]:
                continue
            diff = {d: heldout_difference(hb, ha, pass_field(hb, d)) for d in DIMENSIONS
                    if d in hb["pass"] and d in ha["pass"]}
            moved = [f"{d} {_change(c)}" for d, c in diff.items() if d != dim and (c["lo"] > 0 or c["hi"] < 0)]
            rows.append({"setting": name, "against": names[0], "draw": ov[j].get(DRAW_KEY, "-"),
                         "seed": ov[j].get("seed", "-"), "weight": float(ov[j][key]), "differences": diff})
            draw = f"draw {ov[j][DRAW_KEY]}, " if DRAW_KEY in ov[j] else ""
            where = f"{draw}seed {ov[j].get('seed', '-')}"
            lines.append(f"| {name} | {where} | "
                         f"{float(ov[j][key]):g} | {_change(diff[dim])} | {', '.join(moved) or 'none'} |")
    if not rows:
        return None
    keys = ", ".join(f"`{k}`" for k in others)
    head = ["", f"## Each setting against {names[0]}", "",
            f"{keys}: each other value against {names[0]}, the same draw, seed and {dim} weight, the same held-out "
            f"vases, paired: points, 95 % interval (bold: it excludes 0); the other dimensions listed where their "
            f"interval excludes 0.", "",
            *md.table([keys, "draw, seed", f"{dim} weight", f"{dim} right", "other dimensions"])]
    return {"rows": rows, "lines": head + lines}


def _write(sweep_dir: Path, verdict: dict[str, Any], lines: list[str], plot: Callable[[Path], None]) -> dict[str, Any]:
    """ablation.md (the lines and the plot), ablation.json (the verdict, the machine, the table the README takes) and
    ablation.png."""
    lines = [*lines, "\n![ablation](ablation.png)\n"]
    jobs = job_dirs(sweep_dir)
    code = code_of_jobs(jobs)
    head, tail = code_lines(code, machines_of_jobs(jobs))
    write_markdown(sweep_dir / "ablation.md", "\n".join([lines[0], *head, *lines[1:], *tail]) + "\n")
    verdict["machine"] = machine_stamp()
    verdict["code"] = code
    verdict["machines"] = machines_of_jobs(jobs)
    # what make readme-tables puts into the README (its headings in bold: the README has its own)
    verdict["table"] = "\n".join(f"**{line[3:].strip()}**" if line.startswith("## ") else line
                                 for line in "\n".join(lines[1:-1]).splitlines()).strip()
    atomic_write_json(sweep_dir / "ablation.json", verdict)
    plot(sweep_dir / "ablation.png")
    return verdict


def verdict_rows(verdict: dict[str, Any]) -> list[list[str]]:
    """The verdict as a table a dashboard shows beside the sweep (target, what it asks, result): MLflow's parent run
    and W&B's summary run hold it, with ablation.png.

    >>> target, asks, result = verdict_rows({"swept": "reward.weights.shape", "weights": [0.0, 0.6], "i": True})[0]
    >>> target, asks.split(",")[0], result
    ('(i)', 'shape right at weight 0.6 above weight 0 and above the start', 'held')
    """
    def result(v: Any) -> str:
        return "not decided" if v is None else "held" if v else "not held"

    if verdict.get("settings"):  # a row per target and setting of what else the sweep varied
        return [[f"{target} · {name}", asks, got] for name, v in verdict["settings"].items()
                for target, asks, got in verdict_rows({**v, "settings": None})]
    rows = []
    if verdict.get("nothing_learned"):
        rows.append(["nothing learned", "no job and no start answered any dimension right", "nothing to decide on"])
    key = str(verdict.get("swept", ""))
    if key == TAU_KEY:
        moved = "; ".join(f"tau {k}: {', '.join(v)}" for k, v in (verdict.get("moved") or {}).items() if v)
        rows.append(["moved", "dimensions whose change from the start excludes 0", moved or "none"])
    elif "i" in verdict:
        dim, xs = key.rsplit(".", 1)[-1], verdict.get("weights") or [0.0]
        rule = f" ({verdict['i_rule']})" if verdict.get("i_rule") else ""
        asks = (f"{dim} right at weight {max(xs):g} above weight {min(xs):g} and above the start{rule}" if len(xs) > 1
                else f"{dim} right at the largest weight above the smallest: needs two values of the swept weight")
        rows.append(["(i)", asks, result(verdict["i"])])
    if "ii" in verdict and verdict["ii"] is None:  # the rule says why not
        rows.append(["(ii)", "at the paper's setting", str(verdict.get("ii_rule", "not decided"))])
    elif "ii" in verdict:
        rows.append(["(ii)", f"at the paper's setting, {verdict.get('ii_rule', '')}", result(verdict["ii"])])
    if "captions" in verdict:
        rows.append(["(iii)", "captions above the start on " + " and ".join(verdict["captions"]["target"]),
                     result(verdict["captions"]["held"])])
    if "dose_response" in verdict:
        rows.append(["dose", "the dimension's training reward at the largest weight above weight 0",
                     result(verdict["dose_response"])])
    return rows


def _nothing_to_move(verdict: dict[str, Any], held: dict[Path, tuple[Any, Any]]) -> list[str]:
    """Where no job and no start gets any dimension right on the held-out vases, no weight or threshold had anything
    to move: said in the report (and ``verdict["nothing_learned"]``) instead of a bare "not held"."""
    rates = [s["mean"] for h in held.values() for r in h if r for s in r["pass"].values()]
    verdict["nothing_learned"] = bool(rates) and max(rates) == 0.0
    if not verdict["nothing_learned"]:
        return []
    any_h = next(iter(held.values()))[0]
    return [f"**Nothing to decide on**: no job, and no start, gets any dimension right on the {any_h['vases']} "
            f"held-out vases (0 % everywhere), so no setting had anything to move and every \"not held\" below says "
            f"only that. The model and its SFT start learned too little here (on the tiny CPU model with the default "
            f"data this sweep is a check that the pipeline runs end to end). For a verdict, sweep a model that "
            f"learns the task (model=qwen2_5_vl_3b or init_adapter=<your SFT adapter>), or run the CPU ablation, "
            f"which does: python train.py -m experiment=ablation_demo (make ablation-demo: 30 minutes on 2 cores, 2026-11-30)."]


def _tau_verdict(verdict: dict[str, Any], xs: list[float], groups: dict[str, dict[float, Path]],
                 held: dict[Path, tuple[Any, Any]]) -> list[str]:
    """A tau sweep on the held-out reward. Tau is part of the scorer (a dimension is right when its similarity
    reaches tau), so rows at different tau are not comparable with each other: each job is set against its own
    start scored at its own tau. The table: each dimension's change from the start at each tau (paired 95 %
    intervals; bold where the interval excludes 0); target (ii) at the paper's tau (0.7): no dimension below the
    start."""
    any_h = next(iter(held.values()))[0]
    dims = [d for d in DIMENSIONS if d in any_h["pass"]]
    changes: dict[str, dict[str, dict[str, float]]] = {}
    lines = ["", f"## Held-out {mix_of(any_h)}s: each dimension's change from the start, points", "",
             f"{any_h['n']} answers on {any_h['vases']} held-out vases, greedy. Tau is part of the scorer (a dimension "
             f"is right when its similarity reaches tau), so each job is set against its own start (the SFT, its "
             f"adapter off) scored at the same tau: read a row against 0, not rows against each other. Paired 95 % "
             f"intervals; bold where the interval excludes 0.", "",
             *md.table(["tau (draw, seed)", *(d.capitalize() for d in dims), "reward change"])]
    for g, at in groups.items():
        for x in sorted(at):
            h, start = held[at[x]]
            row = {d: heldout_difference(h, start, pass_field(h, d)) for d in dims if d in start["pass"]}
            total = heldout_difference(h, start, "total")
            changes[f"{x:g} ({who(g)})"] = {**row, "total": total}
            lines.append(md.row([f"{x:g} ({who(g)})", *(_change(row.get(d)) for d in dims),
                                 _change(total, points=False)]))
    verdict["changes"] = changes
    # each tau's change from the start pooled over its runs (seeds, draws): what moved is decided on those
    pooled = {x: {d: pooled_over_runs([held[at[x]] for at in groups.values() if x in at], pass_field(any_h, d))
                  for d in dims} for x in xs}
    verdict["pooled"] = {f"{x:g}": v for x, v in pooled.items()}
    moved = {f"{x:g}": sorted(d for d, c in v.items() if c["direction"] in ("up", "down")) for x, v in pooled.items()}
    verdict["moved"] = moved
    first = next(iter(pooled[xs[0]].values()))
    summary = "; ".join(f"tau {k}: {', '.join(v)}" for k, v in moved.items() if v) or "none"
    lines.append(f"\n**What tau moved**: dimensions whose change from the start excludes 0, {runs_rule(first)}: "
                 f"{summary if not first.get('undecided') else 'not decided'}.")
    if PAPER_TAU in xs:
        at_paper = pooled[PAPER_TAU]
        fell = sorted(d for d, c in at_paper.items() if c.get("hi") is not None and c["hi"] < 0)
        undecided_ii = any(c.get("undecided") for c in at_paper.values())
        verdict["ii"] = None if undecided_ii else not fell
        verdict["ii_rule"] = f"no dimension's 95 % interval lies wholly below the start (SFT), {runs_rule(first)}"
        verdict["ii_fell"] = fell
        lines.append(f"\n**Target (ii)**, at the paper's tau ({PAPER_TAU:g}): {verdict['ii_rule']}: "
                     f"**{target_word(verdict['ii'])}**" + (f" (below: {', '.join(fell)})" if fell else "") + ".")
    else:
        verdict["ii"] = None
        verdict["ii_rule"] = (f"not decided: the paper's tau {PAPER_TAU:g} is not in this sweep's grid "
                              f"({', '.join(f'{x:g}' for x in xs)}); add it to decide (ii)")
        lines.append(f"\n**Target (ii)**, at the paper's tau: {verdict['ii_rule']}.")
    return lines


def _change(c: dict[str, float] | None, points: bool = True) -> str:
    if not c:
        return "–"
    f, fmt = (100.0, "+.1f") if points else (1.0, "+.3f")
    star = "**" if c["lo"] > 0 or c["hi"] < 0 else ""
    return f"{star}{f * c['diff']:{fmt}} [{f * c['lo']:{fmt}}, {f * c['hi']:{fmt}}]{star}"


CAPTION_TARGETS = ("lexical_similarity", "overall_score")
"""The paper's claim read on vase's held-out captions: GRPO at the paper's weights above its SFT start on these."""


def _caption_verdict(xs: list[float], groups: dict[str, dict[float, Path]],
                     held: dict[Path, tuple[dict[str, Any] | None, dict[str, Any] | None]], paper: float,
                     what: str) -> dict[str, Any] | None:
    """The paper's caption metrics of each job at the paper's value (``paper``, of the swept ``what``) against its SFT
    start (``captions_vs_start`` of its held-out reward), and the target: above the start on lexical similarity and
    the overall score, on every draw and seed, on paired intervals."""
    if paper not in xs:
        return None
    comps = {g: (held[jobs[paper]][0] or {}).get("captions_vs_start") for g, jobs in groups.items() if paper in jobs}
    comps = {g: c for g, c in comps.items() if c}
    if not comps:
        return None
    metrics = list(next(iter(comps.values())))

    ok = {g: all(paired_held(c[m], m) for m in CAPTION_TARGETS) for g, c in comps.items()}
    held = all(ok.values()) if len(ok) > 1 else None  # one run's intervals cover its vases, not another run
    lines = ["", f"**The paper's claim on vase's held-out captions**: GRPO at the paper's {what} ({paper:g}) "
                 f"against its own SFT start, paired over the held-out vases (R@k in points; FID lower is better; "
                 f"bold: the interval excludes 0 in GRPO's favour). Target: above the start on "
                 f"{' and '.join(CAPTION_TARGETS)} on every draw and seed (two runs or more): "
                 f"**{target_word(held)}**.", "",
             *md.table(["draw, seed", "n", *metrics])]
    for g, c in comps.items():
        lines.append(md.row([_values(who(g)), c[metrics[0]]["n"], *(caption_cell(m, c[m]) for m in metrics)]))
    lines.append("\nThe smallest difference each set can detect: `python -m vase.reports.power <sweep folder>`.")
    return {"verdict": {"target": list(CAPTION_TARGETS), "held": held, "per_group": ok,
                        "differences": comps}, "lines": lines}


def caption_cell(m: str, c: dict[str, float]) -> str:
    """A caption metric's paired difference with its interval (R@k in points), bold where GRPO is above its start."""
    f = 100.0 if is_percent(m) else 1.0
    star = "**" if paired_held(c, m) else ""
    return f"{star}{f * c['diff']:+.3f} [{f * c['lo']:+.3f}, {f * c['hi']:+.3f}]{star}"


def _values(label: str) -> str:
    """A group's label with what else the sweep varied as its values only, for a table's narrow first column.

    >>> _values("draw 0, seed 1, stage.module.multi_objective_aggregation=normalize_then_sum")
    'draw 0, seed 1, normalize_then_sum'
    """
    return ", ".join(part.split("=", 1)[-1] for part in label.split(", "))


def decided(*changes: dict[str, Any]) -> bool | None:
    """A target that asks each change to lie above 0: held when every pooled interval (`pooled_over_runs`) does, not
    held when one does not, None (not decided) where a change rests on one training run."""
    if any(c.get("undecided") or c.get("lo") is None for c in changes):
        return None
    return all(c["lo"] > 0 for c in changes)


def runs_rule(c: dict[str, Any]) -> str:
    """How a pooled target was decided, as its line says it."""
    if c.get("one_run"):
        return f"{ONE_RUN}: one training run per setting, whose interval covers its held-out vases, not another run"
    if c.get("undecided"):
        return f"{c['direction']}: the runs' spread rests on {c.get('runs')} runs"
    return f"95 % intervals over {c.get('runs')} training runs x {c.get('vases')} vases exclude 0 ({RUNS_AND_VASES})"


def pooled_points(c: dict[str, Any]) -> str:
    """A pooled change in points with its interval, or its mean alone where it rests on one run."""
    if c.get("lo") is None:
        return f"{100 * c['diff']:+.1f} (one run)" if c.get("diff") is not None else "–"
    return f"{100 * c['diff']:+.1f} [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]"


def _heldout_verdict(verdict: dict[str, Any], dim: str, xs: list[float], groups: dict[str, dict[float, Path]],
                     held: dict[Path, tuple[Any, Any]], draws: list[str], ov: dict[Path, dict[str, str]]) -> list[str]:
    """Targets (i) and (ii) on the held-out reward, per draw and seed; the tables per draw."""
    lo_w, hi_w = min(xs), max(xs)
    per_group = {}
    for g, at in groups.items():
        if hi_w not in at or lo_w not in at or hi_w == lo_w:  # one weight: nothing to set against it
            continue
        (hmax, start), (h0, _) = held[at[hi_w]], held[at[lo_w]]
        key = pass_field(hmax, dim)
        per_group[g] = {"at_max": rate_right(hmax, dim), "at_0": rate_right(h0, dim), "sft": rate_right(start, dim),
                        "max_minus_0": heldout_difference(hmax, h0, key),
                        "max_minus_sft": heldout_difference(hmax, start, key)}
    pairs = [(held[at[hi_w]], held[at[lo_w]]) for at in groups.values() if hi_w in at and lo_w in at]
    key = pass_field(pairs[0][0][0], dim) if pairs else ""
    over_0 = pooled_over_runs([(a[0], b[0]) for a, b in pairs], key)  # each run's weight max against weight 0
    over_sft = pooled_over_runs([(a[0], a[1]) for a, _ in pairs], key)  # each run against its own start
    verdict["i_pooled"] = {"max_minus_0": over_0, "max_minus_sft": over_sft}
    verdict["i"] = decided(over_0, over_sft)
    verdict["i_rule"] = runs_rule(over_0)
    verdict["i_per_seed"] = per_group
    verdict["protocol"] = "heldout"
    if PAPER_WEIGHT in xs:
        at_paper = [held[at[PAPER_WEIGHT]] for at in groups.values() if PAPER_WEIGHT in at]
        h0 = at_paper[0][0]
        change = {d: pooled_over_runs(at_paper, pass_field(h0, d)) for d in DIMENSIONS
                  if d in h0["pass"] and d in at_paper[0][1]["pass"]}
        fell = {d: c.get("hi") is not None and c["hi"] < 0 for d, c in change.items()}
        first = next(iter(change.values()))
        verdict["ii"] = None if first.get("undecided") else not any(fell.values())
        verdict["ii_rule"] = (f"no dimension's 95 % interval lies wholly below the start (SFT), {runs_rule(first)}"
                              if not first.get("undecided") else f"{runs_rule(first)}: its changes from the start are "
                              f"in the table, and another run could differ")
        verdict["ii_worst_drop"] = {d: c["diff"] for d, c in change.items()}
        verdict["ii_pooled"] = change
        verdict["ii_fell"] = sorted(d for d, f in fell.items() if f)
    else:
        verdict["ii"] = None
        verdict["ii_rule"] = (f"not decided: the paper's weight {PAPER_WEIGHT:g} is not in this sweep's grid "
                              f"({', '.join(f'{x:g}' for x in xs)}); add it to decide (ii): "
                              f"reward.weights.{dim}={','.join(f'{x:g}' for x in sorted({*xs, PAPER_WEIGHT}))}")
    # tables: one per draw (its own SFT start), a row per job
    lines = []
    any_h = next(iter(held.values()))[0]
    dims = [d for d in DIMENSIONS if d in any_h["pass"]]
    for draw in draws:
        members = [(g, at) for g, at in groups.items() if all(ov[j].get(DRAW_KEY, "-") == draw for j in at.values())]
        if not members:
            continue
        title = "" if len(draws) == 1 else f", data draw {draw}"
        lines += ["", f"## Held-out {mix_of(any_h)}s, each dimension right (similarity >= tau), %{title}", "",
                  f"{any_h['n']} answers on {any_h['vases']} held-out vases, greedy, scored by each run's own "
                  f"terms; the start is the SFT (each job's adapter off), on the same vases.", "",
                  *md.table(["run", *(d.capitalize() for d in dims), "reward"])]
        start = held[next(iter(members[0][1].values()))][1]
        lines.append(md.row(["SFT (start)", *(percent_points(rate_right(start, d)) for d in dims), "–"]))
        for g, at in members:
            for x in sorted(at):
                h = held[at[x]][0]
                lines.append(md.row([f"GRPO, {dim} weight {x:g} ({who(g)})",
                                     *(percent_points(rate_right(h, d)) for d in dims), f"{h['total']['mean']:.3f}"]))
    if hi_w == lo_w:
        verdict["i"] = None
        lines.append(f"\n**Target (i)** needs two values of the swept weight; this sweep ran {dim} weight {hi_w:g} "
                     f"only: not decided.")
    else:
        pooled = (f"pooled: {pooled_points(over_0)} over weight {lo_w:g} and {pooled_points(over_sft)} over the start; "
                  if not over_0.get("undecided") else "")
        lines.append(f"\n**Target (i)**, held-out {mix_of(any_h)}s: {dim} right at weight {hi_w:g} above weight {lo_w:g} "
                     f"and above SFT, decided on {verdict['i_rule']}: **{target_word(verdict['i'])}** ({pooled}"
                     + "; ".join(f"{who(g)}: {percent_points(v['at_max'])} vs {percent_points(v['at_0'])} and SFT {percent_points(v['sft'])}"
                                 + diff_points(v) for g, v in per_group.items()) + ").")
    if verdict.get("ii") is None:
        lines.append(f"\n**Target (ii)**, at the paper's weights: {verdict['ii_rule']}.")
    else:
        drops = ", ".join(f"{d} {pooled_points(v)}" for d, v in verdict["ii_pooled"].items())
        lines.append(f"\n**Target (ii)**, at the paper's weights: {verdict['ii_rule']}: "
                     f"**{target_word(verdict['ii'])}** (change per dimension, points: {drops}"
                     + (f"; below: {', '.join(verdict['ii_fell'])}" if verdict["ii_fell"] else "") + ").")
    return lines


def _dose_response(dim: str, xs: list[float], groups: dict[str, dict[float, Path]]) -> dict[str, dict[str, float]]:
    """Per draw and seed: the dimension's own training reward over the last steps at the largest weight and at 0."""
    dose = {}
    for g, at in groups.items():
        got = {x: job_row(j).get(f"reward/{dim}") for x, j in at.items()}
        if got.get(max(xs)) is not None and got.get(min(xs)) is not None:
            dose[g] = {"at_max": got[max(xs)], "at_0": got[min(xs)]}
    return dose


def _plot_settings(key: str, jobs: list[Path], ov: dict[Path, dict[str, str]], others: list[str]
                   ) -> Callable[[Path], None]:
    """`_plot` with a row of panels per setting of what else the sweep varied (each its own draws and seeds)."""
    rows: dict[str, dict[str, dict[float, Path]]] = {}
    for j in jobs:
        name = ", ".join(f"{k.rsplit('.', 1)[-1]}={ov[j].get(k, '-')}" for k in others)
        group = f"draw {ov[j].get(DRAW_KEY, '-')}, seed {ov[j].get('seed', '-')}"
        rows.setdefault(name, {}).setdefault(group, {})[float(ov[j][key])] = j
    xs = sorted({float(ov[j][key]) for j in jobs})
    held = {j: heldout_of(j) for j in jobs}
    return lambda path: plot_weight(path, key.rsplit(".", 1)[-1], xs, {}, held, jobs, ov, rows=dict(sorted(rows.items())))
