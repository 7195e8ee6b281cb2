"""A beyond-the-paper idea against the same pipeline without it, on held-out vases: the verdict of a sweep over one
switch (``retrieval.k=0,3``, ...) across data draws and seeds.

Each job scored its held-out answers with its own reward terms (``val.heldout=true``: ``heldout_reward.json``,
each answer's values by id). Within one draw and seed, the job with the idea and the job without it answered the same
held-out questions, so their difference on each target dimension is paired by answer id, with a 95 % bootstrap
interval (`vase.eval.stats.heldout_difference`). The idea helps a dimension when that interval lies above 0 on
every draw and seed; it hurts when it lies below 0 on any. Writes ``compare.md`` and ``compare.json`` beside the
sweep's summary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.annotate.vocab import DIMENSIONS
from vase.choices import DRAW_KEY
from vase.eval.stats import heldout_difference, paired_difference
from vase.io import atomic_write_json, read_json, write_markdown
from vase.provenance import machine_stamp
from vase.reports.ablation_vqa import percent_points, target_word
from vase.reports.hypothesis import START
from vase.reports.jobs import code_lines, code_of_jobs, heldout_of, job_dirs, machines_of_jobs, overrides_of
from vase.reports.verdict import joined_verdict, write_verdict_report

MEAN = "mean"  # the target "the mean over dimensions", per held-out vase
SHOWN = {"invrender": "silhouette IoU (x 100)", "invrender_shape": "shape named in the answer"}  # item-key targets


@dataclass(frozen=True)
class Idea:
    """One idea's switch (the swept key, its value without and with the idea) and what it is meant to help."""

    key: str
    off: str | None  # None: the baseline is each job's own start (``heldout_reward_start.json``, the SFT it began from)
    on: str
    targets: tuple[str, ...]
    label: str
    within: str | None = None  # a second held-out result the idea's own jobs write (the same model without its part)


def vase_means(result: dict[str, Any]) -> dict[str, float]:
    """Per held-out vase, the mean over the dimensions its answers were scored on of whether they passed (an answer
    id is ``<vase>#...``; a caption is scored on all six, a question on its own)."""
    per: dict[str, list[float]] = {}
    for i, v in result["items"].items():
        vals = [v[f"{t}_pass"] for t in result["term_of_dimension"].values() if f"{t}_pass" in v]
        if vals:
            per.setdefault(i.split("#")[0], []).extend(vals)
    return {k: sum(v) / len(v) for k, v in per.items()}


def idea_of(q: dict[str, Any]) -> Idea:
    """The idea a hypothesis of the ``idea`` kind names (`vase.reports.verdict`): its switch (``compare``), the value
    without it (``baseline``; ``start``: each job's own start), the target dimensions (``moves``:
    ``heldout/<dim>_right``, ``heldout/mean_right`` for the mean over dimensions per held-out vase, ``heldout/<x>``
    for an answer's own value such as an IoU), its ``label`` and ``within`` result. Its ``on`` value is chosen from
    the jobs (`write_comparison`: the largest value other than the baseline)."""
    targets = []
    for m in q["moves"]:
        name = m.split("/", 1)[1]
        targets.append(MEAN if name == "mean_right" else name[:-6] if name.endswith("_right") else name)
    key = q["compare"][0]
    return Idea(key, None if q["baseline"] in (None, START) else str(q["baseline"]).lower(), "", tuple(targets),
                str(q.get("label") or key), within=q.get("within"))


def write_idea_verdict(sweep_dir: Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """The ``idea`` report kind: compare.md (per draw and seed, the idea helps where it helps on every one) and
    verdict.md (its targets pooled over the replicates, where its baseline is a swept value)."""
    pooled = write_verdict_report(sweep_dir, q)
    verdict = write_comparison(sweep_dir, q)
    if verdict is None:
        return joined_verdict(sweep_dir, pooled)
    return joined_verdict(sweep_dir, pooled, [
        f"**{verdict['idea']}, every draw and seed**: {target_word(verdict['held'])} ({verdict['rule']}; "
        f"targets {', '.join(SHOWN.get(t, t) for t in verdict['targets'])})"], "compare.md")


def _value_order(v: str) -> tuple[int, float, str]:
    """
    >>> sorted(["true", "false", "10", "3"], key=_value_order)
    ['3', '10', 'false', 'true']
    """
    try:
        return 0, float(v), ""
    except ValueError:
        return 1, 0.0, v


def _judged(groups: dict[str, dict[str, float]], n_pairs: int) -> dict[str, bool]:
    """``helped``: the paired interval above 0 on every draw and seed (all of them present, two runs or more);
    ``hurt``: below 0 on some; ``one_run``: one training run, which decides neither."""
    if n_pairs < 2:  # one run's interval covers its vases, not another run: nothing is decided
        return {"helped": False, "hurt": False, "one_run": True}
    return {"helped": len(groups) == n_pairs and all(v["lo"] > 0 for v in groups.values()),
            "hurt": any(v["hi"] < 0 for v in groups.values())}


def comparison_verdict(pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]],
                       targets: tuple[str, ...]) -> dict[str, Any]:
    """``pairs``: per draw and seed, (held-out result without the idea, with it). Per dimension the answers state
    and group: both rates and the paired difference with its interval; ``helped``: above 0 on every group; ``hurt``:
    below 0 on some group. The verdict (``held``) is on the target dimensions (``mean``: per held-out vase, the mean
    over its dimensions, `vase_means`); the others are reported beside it."""
    per_dim: dict[str, dict[str, Any]] = {}
    for d in DIMENSIONS:
        groups = {}
        for g, (off, on) in pairs.items():
            if not off.get("pass", {}).get(d, {}).get("n") or not on.get("pass", {}).get(d, {}).get("n"):
                continue  # no answer was asked for this dimension (a parameter answer states none)
            key = f"{on['term_of_dimension'][d]}_pass"
            groups[g] = {"off": off["pass"][d]["mean"], "on": on["pass"][d]["mean"],
                         **heldout_difference(on, off, key)}
        if groups:
            per_dim[d] = {"target": d in targets, "groups": groups, **_judged(groups, len(pairs))}
    for t in (t for t in targets if t not in DIMENSIONS and t != MEAN):  # a term's own value (an IoU)
        groups = {}
        for g, (off, on) in pairs.items():
            a, b = ([v[t] for v in r["items"].values() if t in v] for r in (on, off))
            if a and b:
                groups[g] = {"off": sum(b) / len(b), "on": sum(a) / len(a), **heldout_difference(on, off, t)}
        if groups:
            per_dim[t] = {"target": True, "groups": groups, **_judged(groups, len(pairs))}
    if MEAN in targets:
        groups = {}
        for g, (off, on) in pairs.items():
            a, b = vase_means(on), vase_means(off)
            groups[g] = {"off": sum(b.values()) / max(1, len(b)), "on": sum(a.values()) / max(1, len(a)),
                         **paired_difference(a, b)}
        per_dim[MEAN] = {"target": True, "groups": groups, **_judged(groups, len(pairs))}
    aimed = [v for d, v in per_dim.items() if v["target"]]
    return {"dimensions": per_dim, "groups": sorted(pairs), "targets": list(targets),
            "held": None if len(pairs) < 2 else bool(aimed) and len(aimed) == len(targets)
            and all(v["helped"] for v in aimed),
            "rule": "paired 95 % bootstrap interval of (with - without) above 0 on every draw and seed"}


def comparison_lines(idea: Idea, on: str, verdict: dict[str, Any]) -> list[str]:
    against = f"`{idea.key}={idea.off}`" if idea.off is not None else "each job's own start (the SFT it began from)"
    lines = [f"## {md.text(idea.label)}: `{idea.key}={on}` against {against}", "",
             *md.table(["dimension", "draw, seed", "without", "with", "with - without, points [95 % CI]"],
                       align="llrrl")]
    ordered = sorted(verdict["dimensions"].items(), key=lambda kv: not kv[1]["target"])
    for d, v in ordered:
        d = SHOWN.get(d, d)
        name = f"**{d}** (target)" if v["target"] else d
        for g, s in v["groups"].items():
            lines.append(md.row([name, g, percent_points(s["off"]), percent_points(s["on"]),
                                 f"{100 * s['diff']:+.1f} [{100 * s['lo']:+.1f}, {100 * s['hi']:+.1f}]"]))
    lines.append("")
    for d, v in ordered:
        d = SHOWN.get(d, d)
        state = ("**not decided (one run)**" if v.get("one_run") else "**helped**" if v["helped"] else "**hurt**"
                 if v["hurt"] else "**not shown to help**")
        lines.append(f"- {d}{' (target)' if v['target'] else ''}: {state}")
    lines.append(f"\nVerdict on the targets ({', '.join(SHOWN.get(t, t) for t in verdict['targets'])}; {verdict['rule']}): "
                 f"**{target_word(verdict['held'])}**.")
    return lines


def _group(overrides: dict[str, str]) -> str:
    """A job's draw and seed, the pair its with and without are matched in."""
    return f"draw {overrides.get(DRAW_KEY, '-')}, seed {overrides.get('seed', '-')}"


def _within(idea: Idea, jobs: list[Path], ov: dict[Path, dict[str, str]]) -> dict[str, Any] | None:
    """The verdict of each ``idea.on`` job against its own ``idea.within`` result (None when there is none)."""
    if idea.within is None:
        return None
    pairs = {}
    for j in jobs:
        if ov[j].get(idea.key) == idea.on and (j / f"{idea.within}.json").is_file():
            pairs[_group(ov[j])] = (
                read_json(j / f"{idea.within}.json"), heldout_of(j)[0])
    return comparison_verdict(pairs, idea.targets) if pairs else None


def _found(idea: Idea, jobs: list[Path], ov: dict[Path, dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Per value of the idea's key other than ``off``, the verdict against ``off`` in the same draw and seed (or,
    for an idea without an ``off``, against each job's own start)."""
    if idea.off is None:
        inner = _within(idea, jobs, ov)
        return {idea.on: inner} if inner is not None else {}
    pairs: dict[str, dict[str, dict[str, Any]]] = {}
    for j in jobs:
        pairs.setdefault(_group(ov[j]), {})[ov[j].get(idea.key)] = heldout_of(j)[0]
    found = {}
    for v in sorted({v for p in pairs.values() for v in p} - {idea.off, None}):
        complete = {g: (p[idea.off], p[v]) for g, p in pairs.items() if idea.off in p and v in p}
        if complete:
            found[v] = comparison_verdict(complete, idea.targets)
    return found


def _job_overrides(jobs: list[Path]) -> dict[Path, dict[str, str]]:
    # Hydra's sweeper writes a swept boolean as True/False, whatever was typed
    return {j: {k: v.lower() if v.lower() in ("true", "false") else v for k, v in overrides_of(j).items()} for j in jobs}


def probe_against(shipped: Path, probe: Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """A probe sweep that ran only the idea's side (``<key>=<value>`` with other settings, say
    ``retrieval.k=3 retrieval.format=lines``) against the shipped sweep's jobs without the idea, draw by draw and seed
    by seed: the same held-out vases, answered by the pipeline without the idea as it ships (what the probe's own
    baseline jobs would have been, when its settings do not touch them). The verdict as `comparison_verdict` gives it,
    with the probe's ``key``, ``off`` and ``on``; None unless the probe answered every draw and seed the shipped sweep
    did, with one value of the key."""
    idea = idea_of(q)
    if idea.off is None:
        return None
    base: dict[str, dict[str, Any]] = {}
    for j, ov in _job_overrides(job_dirs(shipped)).items():
        result = heldout_of(j)[0]
        if ov.get(idea.key) == idea.off and result is not None:
            base[_group(ov)] = result
    pairs, values = {}, set()
    for j, ov in _job_overrides(job_dirs(probe)).items():
        result = heldout_of(j)[0]
        if result is None or ov.get(idea.key) in (None, idea.off) or _group(ov) not in base:
            continue
        values.add(ov[idea.key])
        pairs[_group(ov)] = (base[_group(ov)], result)
    if not base or set(pairs) != set(base) or len(values) != 1:
        return None
    return {"key": idea.key, "off": idea.off, "on": values.pop(), **comparison_verdict(pairs, idea.targets)}


def write_comparison(sweep_dir: str | Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """``compare.md`` / ``compare.json`` for a sweep over one idea's switch (the hypothesis ``q`` of the ``idea`` kind):
    each value other than the baseline against it; the largest is the verdict, the others are probes. None when the
    sweep's jobs do not vary its switch (or have no held-out results)."""
    sweep_dir = Path(sweep_dir)
    jobs = [j for j in job_dirs(sweep_dir) if heldout_of(j)[0] is not None]
    ov = _job_overrides(jobs)
    idea = idea_of(q)
    values = sorted({o[idea.key] for o in ov.values() if idea.key in o} - {idea.off}, key=_value_order)
    if not values:
        return None
    idea = replace(idea, on=values[-1])
    found = _found(idea, jobs, ov)
    if not found:
        return None
    on = idea.on if idea.on in found else sorted(found, key=_value_order)[-1]
    verdict = {"idea": idea.label, "key": idea.key, "off": idea.off, "on": on, "within_file": idea.within, **found[on],
               "probes": {v: r for v, r in found.items() if v != on}, "machine": machine_stamp()}
    lines = [f"# {md.text(idea.label)} against the same pipeline without it", ""]
    code = code_of_jobs(jobs)
    head, tail = code_lines(code, machines_of_jobs(jobs))
    lines += head
    verdict["code"] = code
    for v in [on, *verdict["probes"]]:
        lines += comparison_lines(idea, v, found[v]) + [""]
    inner = _within(idea, jobs, ov) if idea.off is not None else None
    if inner is not None:  # the idea's own jobs, with its part and without it (the same adapter)
        verdict["within"] = inner
        verdict["within_table"] = "\n".join(comparison_lines(idea, on, inner)[2:])
        lines += [f"## The same adapters, with - without ({idea.within}.json): what the {idea.key}={on} jobs gain "
                  f"from the part used at answer time", ""] + comparison_lines(idea, on, inner)[2:] + [""]
    write_markdown(sweep_dir / "compare.md", "\n".join([*lines, *tail, ""]))
    verdict["table"] = "\n".join(comparison_lines(idea, on, found[on])[2:])
    atomic_write_json(sweep_dir / "compare.json", verdict)
    return verdict
