"""A reward-weight ablation's verdict: does a weight move what it rewards, on vases the model never saw?

For a sweep over one ``reward.weights.<dim>`` (and seeds, and data draws ``data.synthetic.seed``), ``ablation.md``,
``ablation.json`` and ``ablation.png``, decided on each job's **held-out reward** (``evaluate.heldout``: the task the
stage trained, answered on the held-out vases and scored by the run's own terms) against its starting point (the
same model with its adapter off, on the same answers' ids):

(i)  on every draw and seed, the share of held-out answers that get ``<dim>`` right at the largest weight is above
     that at weight 0 and above the start: both paired 95 % bootstrap intervals exclude 0;
(ii) at the paper's weights (``<dim>`` 0.15), no dimension's held-out rate lies below the start beyond its paired
     interval.

Multiple choice by option likelihood (``evaluate.vqa=ll``), where the jobs ran it, is reported beside it as
**transfer to QA**, with its own intervals: never the verdict. A sweep without held-out reward (older runs) is
decided on its VQA as before, and says so. The dose-response on the training prompts (the dimension's own training
reward over the last steps, largest weight against weight 0) is reported per draw and seed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vase.annotate.vocab import DIMENSIONS
from vase.choices import PROTOCOL_LABELS
from vase.eval.stats import heldout_difference, paired_difference
from vase.io import atomic_write_json, read_json, save_figure, write_markdown
from vase.metrics.paired import held as paired_held
from vase.reports.jobs import (
    LAST_STEPS,
    code_lines,
    code_of_jobs,
    heldout_of,
    job_dirs,
    job_row,
    machines_of_jobs,
    overrides_of,
    sft_vqa_of,
)
from vase.reports.question import joined_answer, write_question_report
from vase.runs import machine_stamp

PAPER_WEIGHT = 0.15  # the paper's weight of shape and dating; the others are then the paper's too
PAPER_TAU = 0.7  # the paper's threshold
TAU_KEY = "reward.tau"
DRAW_KEY = "data.synthetic.seed"


def write_ablation_answer(sweep_dir: Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """The ``ablation`` report kind (`vase.reports.question.REPORT_KINDS`): question.md pools the weight's effect over
    the replicates (a weight; tau is part of the scorer, so its jobs are only set against their own starts), and
    ablation.md/json/png decide the targets per draw and seed, the pooled verdict at their top."""
    pooled = write_question_report(sweep_dir, q) if q["compare"][0] != TAU_KEY else None
    verdict = write_ablation_report(sweep_dir, q, pooled=(pooled or {}).get("lines"))
    if verdict is None:
        return joined_answer(sweep_dir, pooled)
    return joined_answer(sweep_dir, pooled, [f"**ablation {target}**: {result} ({asks})"
                                             for target, asks, result in verdict_rows(verdict)], "ablation.md")


def write_ablation_report(sweep_dir: str | Path, q: dict[str, Any],
                          pooled: list[str] | None = None) -> dict[str, Any] | None:
    """Write ``ablation.md``, ``ablation.json`` and ``ablation.png`` for a sweep over one reward weight or tau (the
    question ``q`` of the ``ablation`` kind) and return the verdicts; None when the sweep's jobs do not vary its key
    (or have nothing held-out to decide on). ``pooled``: question.md's verdict lines, set at the report's top.
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
        lines[1:1] = ["", "**Pooled over the replicates** (question.md: every held-out vase of every "
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
        return verdict, lines, lambda path: _plot_tau(path, xs, groups, held)
    if all(h[0] is not None and h[1] is not None for h in held.values()):
        verdict["basis"] = "held-out reward"
        lines += _heldout_verdict(verdict, dim, xs, groups, held, draws, ov)
        transfer = _vqa_verdict(dim, xs, groups, jobs, ov, others, targets=False)
        if transfer is not None:
            verdict["transfer"] = transfer["verdict"]
            lines += ["", "**Transfer to QA**, reported beside the verdict, never as it: GRPO trained on the stage's "
                          "task; these are questions it did not train on.", *transfer["lines"]]
    else:
        got = _vqa_verdict(dim, xs, groups, jobs, ov, others, targets=True)
        if got is None:
            return None
        verdict["basis"] = "held-out VQA (no held-out reward in these jobs: evaluate.heldout=true adds it)"
        verdict.update(got["verdict"])
        lines += got["lines"]
    captions = _caption_verdict(xs, groups, held, PAPER_WEIGHT, "weight")
    if captions is not None:
        verdict["captions"] = captions["verdict"]
        lines += captions["lines"]
    dose = _dose_response(dim, xs, groups) if len(xs) > 1 else {}
    if dose:
        verdict["dose_response"] = all(v["at_max"] > v["at_0"] for v in dose.values())
        verdict["dose_response_per_seed"] = dose
        lines.append(f"\n**Dose-response** on the training prompts, {dim} reward over the last {LAST_STEPS} steps at "
                     f"weight {max(xs):g} above weight {min(xs):g} on every seed: "
                     f"**{'held' if verdict['dose_response'] else 'not held'}** ("
                     + "; ".join(f"{_who(g)}: {v['at_max']:.3f} vs {v['at_0']:.3f}" for g, v in dose.items()) + ").")
    if verdict.get("basis") == "held-out reward":
        lines[1:1] = _nothing_to_move(verdict, held)
    return verdict, lines, lambda path: _plot(path, dim, xs, groups, held, jobs, ov)


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
           "all jobs.", "", "| target | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for target, got in rows.items():
        out.append(f"| {target} | " + " | ".join(f"**{got[n]}**" if got.get(n) == "held" else got.get(n, "–")
                                                  for n in names) + " |")
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
            diff = {d: heldout_difference(hb, ha, _pass_key(hb, d)) for d in DIMENSIONS
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
            f"| {keys} | draw, seed | {dim} weight | {dim} right | other dimensions |", "|---|---|---|---|---|"]
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
        rows.append(["-", "any dimension right anywhere (job or start)", "no: nothing to decide on"])
    key = str(verdict.get("swept", ""))
    if key == TAU_KEY:
        moved = "; ".join(f"tau {k}: {', '.join(v)}" for k, v in (verdict.get("moved") or {}).items() if v)
        rows.append(["moved", "dimensions whose change from the start excludes 0", moved or "none"])
    elif "i" in verdict:
        dim, xs = key.rsplit(".", 1)[-1], verdict.get("weights") or [0.0]
        asks = (f"{dim} right at weight {max(xs):g} above weight {min(xs):g} and above the start, every draw and seed "
                f"({verdict.get('i_rule', '')})" if verdict["i"] is not None
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
    lines = ["", f"## Held-out {any_h['task']}s: each dimension's change from the start, points", "",
             f"{any_h['n']} answers on {any_h['vases']} held-out vases, greedy. Tau is part of the scorer (a dimension "
             f"is right when its similarity reaches tau), so each job is set against its own start (the SFT, its "
             f"adapter off) scored at the same tau: read a row against 0, not rows against each other. Paired 95 % "
             f"intervals; bold where the interval excludes 0.", "",
             "| tau (draw, seed) | " + " | ".join(d.capitalize() for d in dims) + " | reward change |",
             "|---|" + "---|" * (len(dims) + 1)]
    for g, at in groups.items():
        for x in sorted(at):
            h, start = held[at[x]]
            row = {d: heldout_difference(h, start, _pass_key(h, d)) for d in dims if d in start["pass"]}
            total = heldout_difference(h, start, "total")
            changes[f"{x:g} ({_who(g)})"] = {**row, "total": total}
            lines.append(f"| {x:g} ({_who(g)}) | " + " | ".join(_change(row.get(d)) for d in dims)
                         + f" | {_change(total, points=False)} |")
    verdict["changes"] = changes
    moved = {k: sorted(d for d, c in v.items() if d != "total" and (c["lo"] > 0 or c["hi"] < 0))
             for k, v in changes.items()}
    verdict["moved"] = moved
    summary = "; ".join(f"tau {k}: {', '.join(v)}" for k, v in moved.items() if v) or "none"
    lines.append(f"\n**What tau moved**: dimensions whose change from the start excludes 0: {summary}.")
    if PAPER_TAU in xs:
        fell = sorted({f"{d} ({_who(g)})" for g, at in groups.items() if PAPER_TAU in at
                       for d, c in changes[f"{PAPER_TAU:g} ({_who(g)})"].items() if d != "total" and c["hi"] < 0})
        verdict["ii"] = not fell
        verdict["ii_rule"] = "no dimension's paired 95 % interval lies wholly below the start (SFT)"
        verdict["ii_fell"] = fell
        lines.append(f"\n**Target (ii)**, at the paper's tau ({PAPER_TAU:g}): {verdict['ii_rule']}: "
                     f"**{'held' if verdict['ii'] else 'not held'}**" + (f" (below: {', '.join(fell)})" if fell else "")
                     + ".")
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
    lines = ["", f"**The paper's claim on vase's held-out captions**: GRPO at the paper's {what} ({paper:g}) "
                 f"against its own SFT start, paired over the held-out vases (R@k in points; FID lower is better; "
                 f"bold: the interval excludes 0 in GRPO's favour). Target: above the start on "
                 f"{' and '.join(CAPTION_TARGETS)} on every draw and seed: "
                 f"**{'held' if all(ok.values()) else 'not held'}**.", "",
             "| draw, seed | n | " + " | ".join(metrics) + " |", "|---|---|" + "---|" * len(metrics)]
    for g, c in comps.items():
        lines.append(f"| {_values(_who(g))} | {c[metrics[0]]['n']} | " + " | ".join(caption_cell(m, c[m]) for m in metrics)
                     + " |")
    lines.append("\nThe smallest difference each set can detect: `python -m vase.reports.power <sweep folder>`.")
    return {"verdict": {"target": list(CAPTION_TARGETS), "held": all(ok.values()), "per_group": ok,
                        "differences": comps}, "lines": lines}


def caption_cell(m: str, c: dict[str, float]) -> str:
    """A caption metric's paired difference with its interval (R@k in points), bold where GRPO is above its start."""
    f = 100.0 if m.startswith("r_at") else 1.0
    star = "**" if paired_held(c, m) else ""
    return f"{star}{f * c['diff']:+.3f} [{f * c['lo']:+.3f}, {f * c['hi']:+.3f}]{star}"


def _who(group: str) -> str:
    return f"seed {group}" if "draw" not in group else group


def _values(label: str) -> str:
    """A group's label with what else the sweep varied as its values only, for a table's narrow first column.

    >>> _values("draw 0, seed 1, stage.module.multi_objective_aggregation=normalize_then_sum")
    'draw 0, seed 1, normalize_then_sum'
    """
    return ", ".join(part.split("=", 1)[-1] for part in label.split(", "))


def _rate(result: dict[str, Any], d: str) -> float | None:
    s = result["pass"].get(d)
    return None if s is None else s["mean"]


def _pass_key(result: dict[str, Any], d: str) -> str:
    return f"{result['term_of_dimension'][d]}_pass"


def _heldout_verdict(verdict: dict[str, Any], dim: str, xs: list[float], groups: dict[str, dict[float, Path]],
                     held: dict[Path, tuple[Any, Any]], draws: list[str], ov: dict[Path, dict[str, str]]) -> list[str]:
    """Targets (i) and (ii) on the held-out reward, per draw and seed; the tables per draw."""
    lo_w, hi_w = min(xs), max(xs)
    per_group = {}
    for g, at in groups.items():
        if hi_w not in at or lo_w not in at or hi_w == lo_w:  # one weight: nothing to set against it
            continue
        (hmax, start), (h0, _) = held[at[hi_w]], held[at[lo_w]]
        key = _pass_key(hmax, dim)
        per_group[g] = {"at_max": _rate(hmax, dim), "at_0": _rate(h0, dim), "sft": _rate(start, dim),
                        "max_minus_0": heldout_difference(hmax, h0, key),
                        "max_minus_sft": heldout_difference(hmax, start, key)}
    verdict["i"] = bool(per_group) and all(v["max_minus_0"]["lo"] > 0 and v["max_minus_sft"]["lo"] > 0
                                           for v in per_group.values())
    verdict["i_rule"] = "paired 95 % bootstrap intervals exclude 0"
    verdict["i_per_seed"] = per_group
    verdict["protocol"] = "heldout"
    if PAPER_WEIGHT in xs:
        worst: dict[str, float] = {}
        fell: dict[str, bool] = {}
        for at in groups.values():
            if PAPER_WEIGHT not in at:
                continue
            h, start = held[at[PAPER_WEIGHT]]
            for d in DIMENSIONS:
                if d in h["pass"] and d in start["pass"]:
                    c = heldout_difference(h, start, _pass_key(h, d))
                    worst[d] = min(worst.get(d, 1.0), c["diff"])
                    fell[d] = fell.get(d, False) or c["hi"] < 0
        verdict["ii"] = not any(fell.values())
        verdict["ii_rule"] = "no dimension's paired 95 % interval lies wholly below the start (SFT)"
        verdict["ii_worst_drop"] = worst
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
        lines += ["", f"## Held-out {any_h['task']}s, each dimension right (similarity >= tau), %{title}", "",
                  f"{any_h['n']} answers on {any_h['vases']} held-out vases, greedy, scored by each run's own "
                  f"terms; the start is the SFT (each job's adapter off), on the same vases.", "",
                  "| run | " + " | ".join(d.capitalize() for d in dims) + " | reward |",
                  "|---|" + "---|" * (len(dims) + 1)]
        start = held[next(iter(members[0][1].values()))][1]
        lines.append("| SFT (start) | " + " | ".join(percent_points(_rate(start, d)) for d in dims) + " | – |")
        for g, at in members:
            for x in sorted(at):
                h = held[at[x]][0]
                lines.append(f"| GRPO, {dim} weight {x:g} ({_who(g)}) | " + " | ".join(percent_points(_rate(h, d)) for d in dims)
                             + f" | {h['total']['mean']:.3f} |")
    if hi_w == lo_w:
        verdict["i"] = None
        lines.append(f"\n**Target (i)** needs two values of the swept weight; this sweep ran {dim} weight {hi_w:g} "
                     f"only: not decided.")
    else:
        lines.append(f"\n**Target (i)**, held-out {any_h['task']}s: {dim} right at weight {hi_w:g} above weight {lo_w:g} "
                     f"and above SFT on every draw and seed, decided on {verdict['i_rule']}: "
                     f"**{'held' if verdict['i'] else 'not held'}** ("
                     + "; ".join(f"{_who(g)}: {percent_points(v['at_max'])} vs {percent_points(v['at_0'])} and SFT {percent_points(v['sft'])}"
                                 + _diffs(v) for g, v in per_group.items()) + ").")
    if verdict.get("ii") is None:
        lines.append(f"\n**Target (ii)**, at the paper's weights: {verdict['ii_rule']}.")
    else:
        drops = ", ".join(f"{d} {100 * v:+.1f}" for d, v in verdict["ii_worst_drop"].items())
        lines.append(f"\n**Target (ii)**, at the paper's weights: {verdict['ii_rule']}: "
                     f"**{'held' if verdict['ii'] else 'not held'}** (worst change per dimension, points: {drops}"
                     + (f"; below: {', '.join(verdict['ii_fell'])}" if verdict["ii_fell"] else "") + ").")
    return lines


def _vqa_verdict(dim: str, xs: list[float], groups: dict[str, dict[float, Path]], jobs: list[Path],
                 ov: dict[Path, dict[str, str]], others: list[str], targets: bool) -> dict[str, Any] | None:
    """Targets (i) and (ii) on held-out VQA (option likelihood where the jobs have it, else open answers), and its
    table: the verdict of sweeps without held-out reward, and the transfer-to-QA report of those with it."""
    jobs = [j for j in jobs if sorted(j.glob("vqa_*.json"))]
    if not jobs:
        return None
    vqa = {j: read_json(sorted(j.glob("vqa_*.json"))[-1])["vqa"] for j in jobs}
    sft_of = {j: sft_vqa_of(j) for j in jobs}  # each job's own SFT (one shared by all, or one per seed or draw)
    sft = _mean_sft_vqa([sft_of[j] for j in jobs])
    protocols = [p for p in ("ll", "open", "mc") if any(p in v for v in vqa.values())]
    decide = "ll" if "ll" in protocols else "open"

    def acc(j: Path | None, protocol: str, d: str) -> float | None:
        return None if j is None or j not in vqa else vqa[j].get(protocol, {}).get("accuracy", {}).get(d)

    def items(v: dict[str, Any] | None, d: str) -> dict[str, float] | None:
        return ((v or {}).get(decide) or {}).get("items", {}).get(d)

    n_items = max((v.get(decide, {}).get("n", 0) for v in vqa.values()), default=0) // max(1, len(DIMENSIONS))
    verdict: dict[str, Any] = {"protocol": decide}
    # a table per draw of the data, each with its own SFT (a mean over draws hid a drop on one of them), and per
    # value of anything else the sweep varied (an aggregation, a bonus): never a mean over two settings
    draws = sorted({ov[j].get(DRAW_KEY, "-") for j in jobs})
    tables: dict[str, list[Path]] = {}
    for j in jobs:
        parts = ([f"data draw {ov[j].get(DRAW_KEY, '-')}"] if len(draws) > 1 else []) \
            + [f"{k}={ov[j].get(k, '-')}" for k in others]
        tables.setdefault(", " + ", ".join(parts) if parts else "", []).append(j)
    lines = []
    for title, mine in sorted(tables.items()):
        lines += _vqa_table(dim, xs, protocols, _mean_sft_vqa([sft_of[j] for j in mine]),
                            {j: {p: {d: acc(j, p, d) for d in DIMENSIONS} for p in protocols} for j in mine}, ov,
                            title)
    if sft and decide in sft and len(xs) < 2:  # one weight: nothing to set it against
        verdict["i"] = None
        name = "Target (i)" if targets else f"Transfer: {dim} accuracy"
        lines.append(f"\n**{name}**, {PROTOCOL_LABELS[decide]}, needs two values of the swept weight; this sweep ran "
                     f"{dim} weight {xs[0]:g} only: not decided.")
    elif sft and decide in sft:
        per_group = {}
        for g, at in groups.items():
            jmax, j0 = at.get(max(xs)), at.get(min(xs))
            own = next((sft_of[j] for j in at.values() if sft_of.get(j)), sft)
            row = {"at_max": acc(jmax, decide, dim), "at_0": acc(j0, decide, dim), "sft": own[decide]["accuracy"].get(dim)}
            a, b, c = (items(vqa.get(jmax), dim), items(vqa.get(j0), dim), items(own, dim))
            if a and b and c:  # item-level answers: decide on paired intervals, not on points
                row["max_minus_0"] = paired_difference(a, b)
                row["max_minus_sft"] = paired_difference(a, c)
            per_group[g] = row

        def held(v: dict[str, Any]) -> bool:
            if "max_minus_0" in v:
                return v["max_minus_0"]["lo"] > 0 and v["max_minus_sft"]["lo"] > 0
            return (v["at_max"] is not None and v["at_0"] is not None and v["at_max"] > v["at_0"]
                    and v["at_max"] > v["sft"])

        verdict["i"] = all(held(v) for v in per_group.values())
        verdict["i_rule"] = ("paired 95 % bootstrap intervals exclude 0" if all("max_minus_0" in v for v in
                             per_group.values()) else "point estimates (no item-level answers to pair)")
        verdict["i_per_seed"] = per_group
        name = "Target (i)" if targets else f"Transfer: {dim} accuracy"
        lines.append(f"\n**{name}**, {PROTOCOL_LABELS[decide]}: {dim} accuracy at weight {max(xs):g} above weight "
                     f"{min(xs):g} and above SFT on every seed, on {verdict['i_rule']}: "
                     f"**{'held' if verdict['i'] else 'not held'}** ("
                     + "; ".join(f"{_who(g)}: {percent_points(v['at_max'])} vs {percent_points(v['at_0'])} and SFT {percent_points(v['sft'])}"
                                 + _diffs(v) for g, v in per_group.items()) + ").")
        if PAPER_WEIGHT in xs and n_items:
            ii, line = _vqa_at_paper_weights(groups, vqa, {j: sft_of[j] or sft for j in jobs}, decide, n_items,
                                             targets, items)
            verdict.update(ii)
            lines.append(line)
    return {"verdict": verdict, "lines": lines}


def _vqa_at_paper_weights(groups: dict[str, dict[float, Path]], vqa: dict[Path, Any], base_of: dict[Path, Any],
                          decide: str, n_items: int, targets: bool,
                          items: Callable[[dict[str, Any] | None, str], dict[str, float] | None]
                          ) -> tuple[dict[str, Any], str]:
    """Target (ii) on VQA, or the transfer at the paper's weights: no dimension below each job's own SFT beyond its
    paired interval (where the answers have items; else by more than one item). The verdict's keys and its line."""
    worst: dict[str, float] = {}
    fell: dict[str, bool] = {}
    fell_where: list[str] = []
    for g, at in groups.items():
        j = at.get(PAPER_WEIGHT)
        if j is None or j not in vqa:
            continue
        base = base_of[j]
        for d in DIMENSIONS:
            a, b = vqa[j].get(decide, {}).get("accuracy", {}).get(d), base[decide]["accuracy"].get(d)
            if a is not None and b is not None:
                worst[d] = min(worst.get(d, 1.0), a - b)
            ia, ib = items(vqa[j], d), items(base, d)
            if ia and ib:  # fell below SFT by more than its interval: the whole interval under 0
                diff = paired_difference(ia, ib)
                fell[d] = fell.get(d, False) or diff["hi"] < 0
                if diff["hi"] < 0:
                    fell_where.append(f"{d} on {_who(g)}: {100 * diff['diff']:+.1f} "
                                      f"[{100 * diff['lo']:+.1f}, {100 * diff['hi']:+.1f}]")
    held = not any(fell.values()) if fell else all(v >= -1.0 / n_items - 1e-9 for v in worst.values())
    rule = ("no dimension's paired 95 % interval lies wholly below SFT" if fell
            else "no dimension below SFT by more than one held-out item")
    drops = ", ".join(f"{d} {100 * v:+.1f}" for d, v in worst.items())
    if fell_where:
        drops += "; below SFT beyond the interval: " + "; ".join(fell_where)
    name = "Target (ii)**, at the paper's weights" if targets else "Transfer at the paper's weights**"
    line = (f"\n**{name}: {rule} ({100 / n_items:.1f} points an item): **{'held' if held else 'not held'}** "
            f"(worst change per dimension, points: {drops}).")
    return {"ii": held, "ii_rule": rule, "ii_worst_drop": worst, "ii_fell": fell_where}, line


def _vqa_table(dim: str, xs: list[float], protocols: list[str], sft: dict[str, Any] | None,
               acc: dict[Path, dict[str, dict[str, float | None]]], ov: dict[Path, dict[str, str]],
               title: str = "") -> list[str]:
    """A table per protocol: SFT's accuracy per dimension, then GRPO's at each weight (mean over the seeds given)."""
    weight = {j: float(next(v for k, v in ov[j].items() if k.startswith("reward.weights."))) for j in acc}
    lines = []
    for protocol in protocols:
        lines += ["", f"## {PROTOCOL_LABELS[protocol]}{title}", "",
                  "| run | " + " | ".join(d.capitalize() for d in DIMENSIONS) + " | Mean |",
                  "|---|" + "---|" * (len(DIMENSIONS) + 1)]
        if sft and protocol in sft:
            a = sft[protocol]["accuracy"]
            lines.append("| SFT | " + " | ".join(f"{100 * a[d]:.1f} %" for d in DIMENSIONS if d in a)
                         + f" | {100 * sft[protocol]['mean']:.1f} % |")
        for x in xs:
            vals = []
            for d in DIMENSIONS:
                got = [v for j in acc if weight[j] == x and (v := acc[j][protocol][d]) is not None]
                vals.append(sum(got) / len(got) if got else None)
            ok = [v for v in vals if v is not None]
            lines.append(f"| GRPO, {dim} weight {x:g} | " + " | ".join(percent_points(v) for v in vals)
                         + f" | {100 * sum(ok) / max(1, len(ok)):.1f} % |")
    return lines


def _dose_response(dim: str, xs: list[float], groups: dict[str, dict[float, Path]]) -> dict[str, dict[str, float]]:
    """Per draw and seed: the dimension's own training reward over the last steps at the largest weight and at 0."""
    dose = {}
    for g, at in groups.items():
        got = {x: job_row(j).get(f"reward/{dim}") for x, j in at.items()}
        if got.get(max(xs)) is not None and got.get(min(xs)) is not None:
            dose[g] = {"at_max": got[max(xs)], "at_0": got[min(xs)]}
    return dose


def _mean_sft_vqa(sfts: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The mean of the distinct SFT baselines among ``sfts`` (jobs sharing one SFT count it once); None if none."""
    distinct = [v for k, v in enumerate(sfts) if v and v not in sfts[:k]]
    return _mean_vqa(distinct) if distinct else None


def _mean_vqa(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of several VQA score dicts (several SFT baselines, one per seed), per protocol and dimension."""
    out: dict[str, Any] = {}
    for protocol in {p for s in scores for p in s}:
        sel = [s[protocol] for s in scores if protocol in s]
        dims = {d for s in sel for d in s["accuracy"]}
        acc = {d: sum(s["accuracy"][d] for s in sel if d in s["accuracy"]) / sum(d in s["accuracy"] for s in sel)
               for d in dims}
        out[protocol] = {"accuracy": acc, "mean": sum(acc.values()) / max(1, len(acc))}
    return out


def _diffs(v: dict[str, Any]) -> str:
    if "max_minus_0" not in v:
        return ""
    a, b = v["max_minus_0"], v["max_minus_sft"]
    return (f" (differences, points, 95 % CI: {100 * a['diff']:+.1f} [{100 * a['lo']:+.1f}, {100 * a['hi']:+.1f}] "
            f"and {100 * b['diff']:+.1f} [{100 * b['lo']:+.1f}, {100 * b['hi']:+.1f}], {a['n']} items)")


def percent_points(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f} %"


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
    return lambda path: _plot(path, key.rsplit(".", 1)[-1], xs, {}, held, jobs, ov, rows=dict(sorted(rows.items())))


MARKERS = "os^v"  # the 1st, 2nd, ... draw and seed's points, in the plots and their legends alike
START_STYLES = ("--", ":", "-.", (0, (5, 1)))  # the start (SFT) of the 1st, 2nd, ... draw and seed


def _group_handles(names: list[str], starts: bool) -> list[Any]:
    """Legend entries that say which marker is which draw and seed (and, with ``starts``, which line its start)."""
    # lazy: matplotlib: slow to import, and only the plots need it
    from matplotlib.lines import Line2D

    out = []
    for n, name in enumerate(sorted(names)):
        label = f"seed {name}" if name[:1].isdigit() else name
        out.append(Line2D([], [], color="black", marker=MARKERS[n % len(MARKERS)], linewidth=1.0, label=label))
        if starts:
            out.append(Line2D([], [], color="black", linestyle=START_STYLES[n % 4], linewidth=0.8,
                              label=f"{label}: its start (SFT)"))
    return out


def _plot(path: Path, dim: str, xs: list[float], groups: dict[str, dict[float, Path]],
          held: dict[Path, tuple[Any, Any]], jobs: list[Path], ov: dict[Path, dict[str, str]],
          rows: dict[str, dict[str, dict[float, Path]]] | None = None) -> None:
    """Held-out rate per dimension against the weight (one line per draw and seed; dashed: the start), and, where
    the jobs ran it, the VQA transfer (mean over seeds and draws); ``rows``: a row of such panels per setting."""
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    rows = rows or {"": groups}
    has_held = all(h[0] is not None for h in held.values())
    vqa = {j: read_json(sorted(j.glob("vqa_*.json"))[-1])["vqa"] for j in jobs if sorted(j.glob("vqa_*.json"))}
    proto = next((p for p in ("ll", "open", "mc") if any(p in v for v in vqa.values())), None)
    panels = (["heldout"] if has_held else []) + ([proto] if proto else [])
    fig, axes = plt.subplots(len(rows), len(panels), figsize=(6.2 * len(panels), 4.2 * len(rows)), dpi=110,
                             squeeze=False)
    for r, (setting, groups) in enumerate(rows.items()):
        for ax, panel in zip(axes[r], panels):
            for k, d in enumerate(DIMENSIONS):
                color = f"C{k}"
                for n, (_, at) in enumerate(sorted(groups.items())):
                    if panel == "heldout":
                        ys = [_rate(held[at[x]][0], d) if x in at else None for x in xs]
                        start = held[next(iter(at.values()))][1]
                        base = _rate(start, d)
                    else:
                        ys = [vqa.get(at.get(x), {}).get(panel, {}).get("accuracy", {}).get(d) for x in xs]
                        sft = sft_vqa_of(next(iter(at.values())))
                        base = (sft or {}).get(panel, {}).get("accuracy", {}).get(d)
                    ax.plot(xs, [100 * y if y is not None else float("nan") for y in ys], "-", color=color,
                            linewidth=2.5 if d == dim else 1.0, alpha=1.0 if d == dim else 0.6,
                            label=d if n == 0 else None, marker=MARKERS[n % len(MARKERS)])
                    if base is not None:  # each draw's own start: the draws' SFTs differ
                        ax.axhline(100 * base, color=color, linestyle=START_STYLES[n % 4], linewidth=0.8)
            ax.set_xlabel(f"{dim} weight (others rescaled)")
            ax.set_ylabel("held-out answers right (%)" if panel == "heldout" else "held-out accuracy (%)")
            ax.set_ylim(0, 100)
            title = "held-out reward (the verdict)" if panel == "heldout" else f"transfer: {PROTOCOL_LABELS[panel]}"
            ax.set_title(f"{setting}\n{title}" if setting else title, fontsize=10)
            ax.grid(alpha=0.3)
    # the legend where no line runs: below the transfer panel's curves (accuracies sit above 50 %), else the best spot
    handles, labels = axes[0][0].get_legend_handles_labels()
    marks = _group_handles(list(next(iter(rows.values()))), starts=True)
    where = axes[0][-1] if len(axes[0]) > 1 else axes[0][0]
    where.legend(handles + marks, labels + [h.get_label() for h in marks], fontsize=7, title="colour: dimension",
                 title_fontsize=7, loc="lower center" if where is not axes[0][0] else "best",
                 ncol=3 if where is not axes[0][0] else 1)
    fig.tight_layout()
    save_figure(fig, path)


def _plot_tau(path: Path, xs: list[float], groups: dict[str, dict[float, Path]],
              held: dict[Path, tuple[Any, Any]]) -> None:
    """Each dimension's held-out change from the start against tau (one line per draw and seed, bars: the paired 95 %
    interval; 0: the start), the paper's tau marked."""
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.4), dpi=110)
    width = (max(xs) - min(xs) or 1.0) / 60
    for k, d in enumerate(DIMENSIONS):
        for n, (_, at) in enumerate(sorted(groups.items())):
            pts = []
            for x in xs:
                if x in at and d in held[at[x]][0]["pass"] and d in held[at[x]][1]["pass"]:
                    h, start = held[at[x]]
                    pts.append((x, heldout_difference(h, start, _pass_key(h, d))))
            if not pts:
                continue
            px = [x + (k - 2.5) * width for x, _ in pts]
            py = [100 * c["diff"] for _, c in pts]
            err = [[100 * (c["diff"] - c["lo"]) for _, c in pts], [100 * (c["hi"] - c["diff"]) for _, c in pts]]
            ax.errorbar(px, py, yerr=err, color=f"C{k}", marker=MARKERS[n % len(MARKERS)], capsize=2, linewidth=1.2,
                        label=d if n == 0 else None)
    ax.axhline(0, color="black", linewidth=0.8)
    if PAPER_TAU in xs:
        ax.axvline(PAPER_TAU, color="grey", linestyle=":", linewidth=1.0, label=f"paper's tau {PAPER_TAU:g}")
    ax.set_xlabel("tau (a dimension is right when its similarity reaches tau)")
    ax.set_ylabel("held-out answers right: change\nfrom the start, points (95 % CI)", fontsize=9)
    ax.set_title("what each tau moved, against the job's own start")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    marks = _group_handles(sorted(groups), starts=False)
    ax.legend(handles + marks, labels + [h.get_label() for h in marks], fontsize=7, ncol=2, title="colour: dimension",
              title_fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
