"""A written verdict as people and dashboards read it: verdict.json read back, a measure's name and its interval as
verdict.md says them, the verdict as a dashboard's metrics, its title line and its table, and each job's own
comparison with its baseline job (at the job's end, or from verdict.json at the sweep's)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.io import read_json
from vase.reports.hypothesis import RENAMED_BLOCK, START
from vase.reports.jobs import (
    LAST_STEPS,
    job_dirs,
    overrides_of,
)
from vase.reports.verdict_stats import MIN_REPLICATES, MIN_RUNS, compare_move, is_share, same_setting
from vase.runs import status_of


def read_verdict(sweep_dir: str | Path) -> dict[str, Any]:
    """A sweep's ``verdict.json`` ({} when it has none), its hypothesis under ``hypothesis``; a sweep folder made before
    vase 0.2 has ``question.json``, its hypothesis under ``question``."""
    for name, block in (("verdict.json", "hypothesis"), ("question.json", RENAMED_BLOCK)):
        path = Path(sweep_dir) / name
        if path.is_file():
            found = read_json(path)
            found.setdefault("hypothesis", found.pop(block, None))
            return found
    return {}


def _fmt(x: float | None, pct: bool) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:+.1f}" if pct else f"{x:+.3g}"  # 3 significant digits, as people read them


def interval_cell(d: dict[str, Any], pct: bool) -> str:
    if d.get("diff") is None:
        return "–"
    if d.get("lo") is None or (isinstance(d["lo"], float) and math.isnan(d["lo"])):
        reps = d.get("replicates")
        return f"{_fmt(d['diff'], pct)}" + (f" (no interval: {reps} replicate{'s' * (reps != 1)}, {MIN_REPLICATES} "
                                            f"needed)"
                                           if reps is not None else "")
    return f"{_fmt(d['diff'], pct)} [{_fmt(d['lo'], pct)}, {_fmt(d['hi'], pct)}]"


def said_cell(d: dict[str, Any], pct: bool) -> str:
    """A measure as the verdict's line says it: its direction and interval, and where it holds 0, the smallest change
    the held-out vases could have shown (``detectable``: 80 % power, `vase.metrics.paired.minimal_detectable`).

    >>> said_cell({"direction": "no clear change", "diff": 0.004, "lo": -0.01, "hi": 0.02, "detectable": 0.021}, True)
    'no clear change, +0.4 [-1.0, +2.0] (could detect ±2.1)'
    >>> said_cell({"direction": "up", "diff": 0.15, "lo": 0.1, "hi": 0.2, "runs": 3, "vases": 240}, True)
    'up, +15.0 [+10.0, +20.0] (3 runs x 240 vases)'
    >>> said_cell({"direction": "no clear change", "diff": 0.0, "lo": 0.0, "hi": 0.0, "detectable": 0.0}, True)
    'no clear change, +0.0 [+0.0, +0.0] (no held-out answer differs)'
    """
    said = f"{d['direction']}, {interval_cell(d, pct)}{coverage(d)}"
    found = d.get("detectable")
    if d.get("direction") != "no clear change" or found is None:
        return said
    if found == 0:
        return f"{said} (no held-out answer differs)"
    return f"{said} (could detect ±{_fmt(found, pct)[1:]})"


def coverage(d: dict[str, Any]) -> str:
    """What a pooled interval covers, as every surface says it beside the interval: `` (3 runs x 240 vases)``; with
    one training run, that it covers the vases and not another run; '' where it says nothing of runs (a training
    measure).

    >>> coverage({"runs": 3, "vases": 240}), coverage({"runs": 1, "vases": 240, "one_run": True}), coverage({})
    (' (3 runs x 240 vases)', ' (1 run x 240 vases: another run is not covered)', '')
    >>> coverage({"runs": 2, "vases": 240, "undecided": True})
    ' (2 runs x 240 vases: 3 runs needed to decide)'

    """
    if not d.get("runs") or not d.get("vases"):
        return ""
    runs = f"{d['runs']} run{'s' * (d['runs'] != 1)} x {d['vases']} vases"
    if d.get("one_run"):
        return f" ({runs}: another run is not covered)"
    return f" ({runs}: {MIN_RUNS} runs needed to decide)" if d.get("undecided") else f" ({runs})"


def move_label(move: str) -> str:
    """
    >>> move_label("heldout/shape_right"), move_label("kl"), move_label("heldout/total")
    ('held-out shape right, points', 'KL (last 20 steps)', 'held-out total reward')
    """
    if move.startswith("heldout/"):
        name = move.split("/", 1)[1]
        if name.endswith("_right"):
            return f"held-out {name[:-6]} right, points"
        return "held-out total reward" if name == "total" else f"held-out {name}"
    return {"kl": "KL", "reward": "training reward", "loss": "training loss"}.get(move, move) + \
        f" (last {LAST_STEPS} steps)"


def verdict_metrics(verdict: dict[str, Any]) -> dict[str, float]:
    """verdict.json's pooled verdict as a dashboard's metrics: ``verdict/[<within>/]<setting>/<move>/effect``, ``low``
    and ``high`` (a share's in points, as verdict.md says them, to 3 significant digits); a value not measured is
    left out, never 0.0.

    >>> v = {"blocks": {"all": {"reward.weights.shape=0.6": {"heldout/shape_right": {"pooled": {
    ...     "diff": 0.171, "lo": 0.125, "hi": 0.217}}, "kl": {"pooled": {"diff": 0.01, "lo": None, "hi": None}}}}}}
    >>> {k: round(x, 2) for k, x in verdict_metrics(v).items()}  # doctest: +NORMALIZE_WHITESPACE
    {'verdict/reward.weights.shape=0.6/heldout/shape_right/effect': 17.1,
     'verdict/reward.weights.shape=0.6/heldout/shape_right/low': 12.5,
     'verdict/reward.weights.shape=0.6/heldout/shape_right/high': 21.7, 'verdict/reward.weights.shape=0.6/kl/effect': 0.01}
    """
    out: dict[str, float] = {}
    for within, settings in (verdict.get("blocks") or {}).items():
        for setting, moves in settings.items():
            head = "verdict/" + ("" if within == "all" else f"{within}/") + setting
            for move, found in moves.items():
                pooled, scale = found.get("pooled") or {}, 100.0 if is_share(move) else 1.0
                for name, key in (("effect", "diff"), ("low", "lo"), ("high", "hi")):
                    x = pooled.get(key)
                    if isinstance(x, (int, float)) and not math.isnan(x):  # 3 significant digits, as the title
                        out[f"{head}/{move}/{name}"] = float(f"{scale * float(x):.3g}")
    return out


def job_comparison(verdict: dict[str, Any], job: str) -> dict[str, float]:
    """One job's own comparison with the baseline job of its replicate, as metrics its dashboard run can show:
    ``vs_baseline/<move>`` with ``_low`` and ``_high`` (a share's in points, as the title says it), to 3 significant
    digits, as people read them (MLflow shows a metric's every digit; verdict.json keeps them all); {} for a baseline
    job or a job the verdict does not hold.

    >>> v = {"jobs": {"1": {"block": "all", "setting": "w=0.6", "replicate": "seed=1"}}, "blocks": {"all": {"w=0.6": {
    ...     "heldout/shape_right": {"per_replicate": {"seed=1": {"diff": 0.2, "lo": 0.1, "hi": 0.3}}}}}}}
    >>> job_comparison(v, "1")
    {'vs_baseline/heldout/shape_right': 20.0, 'vs_baseline/heldout/shape_right_low': 10.0, 'vs_baseline/heldout/shape_right_high': 30.0}
    """
    where = (verdict.get("jobs") or {}).get(job)
    if not where:
        return {}
    found = ((verdict.get("blocks") or {}).get(where["block"]) or {}).get(where["setting"]) or {}
    return _comparison_metrics({m: (r.get("per_replicate") or {}).get(where["replicate"]) or {}
                                for m, r in found.items()})


def baseline_row(verdict: dict[str, Any], job: str, keys: Iterable[str]) -> dict[str, float]:
    """A baseline job's own row beside the jobs compared with it, for a view that draws every job on the same axes
    (TensorBoard's parallel coordinates leave out a run without the metric): each of ``keys`` (the others'
    ``vs_baseline/...``) at 0, the baseline's difference from itself. {} for any other job.

    >>> v = {"baseline": "w=0", "jobs": {"0": {"setting": "w=0.0"}, "1": {"setting": "w=0.6"}}}
    >>> baseline_row(v, "0", ["vs_baseline/shape", "vs_baseline/shape_low"]), baseline_row(v, "1", ["vs_baseline/shape"])
    ({'vs_baseline/shape': 0.0, 'vs_baseline/shape_low': 0.0}, {})
    """
    where = (verdict.get("jobs") or {}).get(job)
    baseline = verdict.get("baseline")
    if not where or not baseline or not same_setting(str(where.get("setting", "")), str(baseline)):
        return {}
    return dict.fromkeys(keys, 0.0)


def job_comparisons(verdict: dict[str, Any], jobs: list[str]) -> list[dict[str, float]]:
    """Each of ``jobs``' comparison with the baseline (`job_comparison`), the baseline jobs' at 0 on the same keys
    (`baseline_row`): every job on a dashboard's axes, the baseline's value of the swept key with them.

    >>> v = {"baseline": "w=0", "jobs": {"0": {"block": "all", "setting": "w=0", "replicate": "-"},
    ...      "1": {"block": "all", "setting": "w=0.6", "replicate": "-"}},
    ...      "blocks": {"all": {"w=0.6": {"heldout/total": {"per_replicate": {"-": {"diff": 0.2}}}}}}}
    >>> job_comparisons(v, ["0", "1"])
    [{'vs_baseline/heldout/total': 0.0}, {'vs_baseline/heldout/total': 0.2}]
    """
    found = [job_comparison(verdict, j) for j in jobs]
    keys = list(dict.fromkeys(k for c in found for k in c))
    return [c or baseline_row(verdict, j, keys) for c, j in zip(found, jobs)]


def cell_title(move: str) -> str:
    """The title of a runs table's column that holds each job's comparison with the baseline on ``move`` as people read
    it (`job_cells`): the difference and its unit, short enough for a laptop's first screen (a tag key: letters of any
    script, digits, ``_ - . /`` and spaces, as MLflow takes them on every system).

    >>> cell_title("heldout/shape_right"), cell_title("heldout/total"), cell_title("kl")
    ('Δ shape_right in points', 'Δ total', 'Δ kl')
    """
    return f"Δ {move.removeprefix('heldout/')}" + (" in points" if is_share(move) else "")


BASELINE_CELL = "0 (baseline)"


def job_cells(verdict: dict[str, Any], jobs: list[str], moves: Iterable[str]) -> list[dict[str, str]]:
    """Each of ``jobs``' comparison with the baseline job of its replicate on each of ``moves``, one text per move:
    the difference with its interval's bounds in the measure's unit (``+20.0 [+12.5, +27.5]``, a share's in points),
    under `cell_title`; a baseline job's reads `BASELINE_CELL`, a measure its results lack ``not measured`` (never
    0.0). One column of a runs table then holds the comparison and both bounds, where three numeric columns did not
    fit a laptop's first screen. {} for a job the verdict does not hold.

    >>> v = {"baseline": "w=0", "jobs": {"0": {"block": "all", "setting": "w=0", "replicate": "-"},
    ...      "1": {"block": "all", "setting": "w=0.6", "replicate": "-"}}, "blocks": {"all": {"w=0.6": {
    ...      "heldout/shape_right": {"per_replicate": {"-": {"diff": 0.2, "lo": 0.125, "hi": 0.275}}}}}}}
    >>> job_cells(v, ["0", "1", "2"], ["heldout/shape_right", "kl"])  # doctest: +NORMALIZE_WHITESPACE
    [{'Δ shape_right in points': '0 (baseline)', 'Δ kl': '0 (baseline)'},
     {'Δ shape_right in points': '+20.0 [+12.5, +27.5]', 'Δ kl': 'not measured'}, {}]
    """
    moves = list(moves)
    out = []
    for job in jobs:
        where = (verdict.get("jobs") or {}).get(job)
        if not where or not moves:
            out.append({})
        elif verdict.get("baseline") and same_setting(str(where.get("setting", "")), str(verdict["baseline"])):
            out.append(dict.fromkeys(map(cell_title, moves), BASELINE_CELL))
        else:
            found = ((verdict.get("blocks") or {}).get(where.get("block")) or {}).get(where.get("setting")) or {}
            cells = {}
            for m in moves:
                d = ((found.get(m) or {}).get("per_replicate") or {}).get(where.get("replicate")) or {}
                cells[cell_title(m)] = interval_cell(d, is_share(m)) if d.get("diff") is not None else "not measured"
            out.append(cells)
    return out


def _comparison_metrics(per_move: dict[str, dict[str, Any]]) -> dict[str, float]:
    """``vs_baseline/<move>``, ``_low``, ``_high`` from each move's difference (``diff``, ``lo``, ``hi``), a share's in
    points, to 3 significant digits; a value not measured is left out, never 0.0."""
    out: dict[str, float] = {}
    for move, d in per_move.items():
        scale = 100.0 if is_share(move) else 1.0
        for suffix, key in (("", "diff"), ("_low", "lo"), ("_high", "hi")):
            x = d.get(key)
            if isinstance(x, (int, float)) and not math.isnan(x):
                out[f"vs_baseline/{move}{suffix}"] = float(f"{scale * float(x):.3g}")
    return out


def comparison_at_job_end(sweep_dir: str | Path, job: str | Path, q: dict[str, Any] | None,
                          swept: Iterable[str]) -> dict[str, float]:
    """A sweep's job against the baseline job of its replicate, as it ends (the same numbers `job_comparison` reads
    from verdict.json at the sweep's end): found when the baseline job, the one whose every other swept value
    (``swept``: the keys the sweep varies) is this job's and whose compared value is the hypothesis's baseline, has
    finished before it, as in a sweep run one job after another with the baseline first in its grid. {} for a
    baseline job, a hypothesis without a swept baseline, or a baseline not finished yet (jobs run side by side): the
    sweep's end then adds it to the dashboards that can take it late (MLflow, TensorBoard). W&B can take it only here:
    an offline W&B run cannot be resumed to add it later."""
    job, sweep_dir = Path(job), Path(sweep_dir)
    if not q or q.get("baseline") in (None, START) or not (job / ".hydra" / "overrides.yaml").is_file():
        return {}  # no swept baseline, or a folder that is no job of a sweep (Hydra writes every job's overrides)
    mine = overrides_of(job)
    compared = list(q["compare"])
    others = [k for k in swept if k not in compared]
    baseline = ", ".join(f"{k}={q['baseline']}" for k in compared)
    if same_setting(", ".join(f"{k}={mine.get(k, '-')}" for k in compared), baseline):
        return {}
    base = None
    for other in job_dirs(sweep_dir):
        if other.resolve() == job.resolve() or status_of(other) != "finished":
            continue
        theirs = overrides_of(other)
        if all(theirs.get(k) == mine.get(k) for k in others) and same_setting(
                ", ".join(f"{k}={theirs.get(k, '-')}" for k in compared), baseline):
            base = other
            break
    if base is None:
        return {}
    return _comparison_metrics({m: (compare_move(m, {"-": base}, {"-": job})["per_replicate"].get("-") or {})
                                for m in q["moves"]})


def short_verdict(verdict: dict[str, Any]) -> str:
    """The verdict in one short line, for a run's name: each setting against the baseline on the hypothesis's first
    measure (its change, interval and direction), after "too short to decide (debug=<preset>)" for a sweep run under
    a debug preset; "" when nothing was decided.

    >>> short_verdict({"hypothesis": {"moves": ["heldout/shape_right"]}, "baseline": "reward.weights.shape=0",
    ...   "blocks": {"all": {"reward.weights.shape=0.6": {"heldout/shape_right": {"pooled": {"diff": 0.171,
    ...   "lo": 0.125, "hi": 0.217, "direction": "up"}}}}}})
    'reward.weights.shape=0.6 vs 0: held-out shape right, points +17.1 [+12.5, +21.7] up'
    """
    moves = (verdict.get("hypothesis") or {}).get("moves") or []
    baseline = str(verdict.get("baseline") or "")
    said = []
    for within, settings in (verdict.get("blocks") or {}).items():
        for setting, found in settings.items():
            first = next((m for m in moves if m in found and (found[m].get("pooled") or {}).get("diff") is not None),
                         None)
            if first is None:
                continue
            p = found[first]["pooled"]
            base = baseline.partition("=")[2] if baseline.partition("=")[0] == setting.partition("=")[0] else baseline
            where = "" if within == "all" else f" ({within})"
            said.append(f"{setting}{where} vs {base or 'start'}: {move_label(first)} {interval_cell(p, is_share(first))} "
                        f"{p.get('direction', '')}".strip() + coverage(p) + _the_rest(found, moves, first))
    if said and verdict.get("debug"):  # a debug preset's numbers: the title says they decide nothing
        return f"too short to decide (debug={verdict['debug']}): " + "; ".join(said)
    return "; ".join(said)


def _the_rest(found: dict[str, Any], moves: list[str], first: str) -> str:
    """`` and N more: k up, m down, j unclear`` for the measures after the first, so a title holds the whole verdict.

    >>> found = {m: {"pooled": {"diff": 1, "direction": d}} for m, d in (("a", "up"), ("b", "up"), ("c", "down"),
    ...                                                                     ("d", "no clear change"))}
    >>> _the_rest(found, ["a", "b", "c", "d"], "a"), _the_rest(found, ["a"], "a")
    (' and 3 more: 1 up, 1 down, 1 unclear', '')
    """
    rest = [str(found[m]["pooled"].get("direction", "")) for m in moves
            if m != first and m in found and (found[m].get("pooled") or {}).get("diff") is not None]
    if not rest:
        return ""
    up = sum(d == "up" for d in rest)
    down = sum(d == "down" for d in rest)
    counts = [f"{n} {w}" for n, w in ((up, "up"), (down, "down"), (len(rest) - up - down, "unclear")) if n]
    return f" and {len(rest)} more: {', '.join(counts)}"


def verdict_table(verdict: dict[str, Any]) -> list[str]:
    """The verdict as a Markdown table, each setting against the baseline on each measure (its change, interval and
    direction): what a dashboard's description opens with. [] when nothing was decided."""
    moves = (verdict.get("hypothesis") or {}).get("moves") or []
    rows = []
    for within, settings in (verdict.get("blocks") or {}).items():
        for setting, found in settings.items():
            where = "" if within == "all" else f" ({within})"
            for m in moves:
                p = (found.get(m) or {}).get("pooled") or {}
                if p.get("diff") is not None:
                    rows.append([f"{setting}{where}", move_label(m), interval_cell(p, is_share(m)),
                                 coverage(p).strip(" ()") or "–", p.get("direction")])
    if not rows:
        return []
    base = verdict.get("baseline") or "each job's start"
    return md.table([f"against {base}", "measure", "change [95 % interval]", "covers", "verdict"], rows)


def job_metric(move: str) -> str | None:
    """The end metric (``hp/...``) in which each job's dashboard run holds ``move``, where one does.

    >>> job_metric("heldout/shape_right"), job_metric("heldout/total"), job_metric("reward"), job_metric("kl")
    ('hp/heldout/shape_right', 'hp/heldout/reward', 'hp/train_reward_last20', None)
    """
    if move.startswith("heldout/"):
        name = move.split("/", 1)[1]
        return "hp/heldout/reward" if name == "total" else f"hp/heldout/{name}"
    return {"reward": "hp/train_reward_last20"}.get(move)


def hypothesis_columns(q: dict[str, Any] | None) -> list[str]:
    """The jobs' end metrics a hypothesis asks about, for a dashboard's first columns: the key's own reward dimension
    first (``reward.weights.shape`` asks about shape), then each measure of ``moves``, a held-out share's change from
    the start (``hp/heldout/<dim>_vs_start``) beside the share itself.

    >>> hypothesis_columns({"compare": ["reward.weights.shape"], "moves": ["heldout/fabric_right", "heldout/total"]})
    ['hp/heldout/shape_vs_start', 'hp/heldout/shape_right', 'hp/heldout/fabric_vs_start', 'hp/heldout/fabric_right', 'hp/heldout/reward']
    """
    if not q:
        return []
    own = [k.rsplit(".", 1)[-1] for k in q.get("compare") or [] if k.startswith("reward.weights.")]
    moves = [*(f"heldout/{d}_right" for d in own), *(q.get("moves") or [])]
    out: list[str] = []
    for m in moves:
        if m.startswith("heldout/") and m.endswith("_right"):
            out.append(f"hp/heldout/{m[8:-6]}_vs_start")
        if job_metric(m):
            out.append(job_metric(m))
    return list(dict.fromkeys(out))


def verdict_text(answer: dict[str, Any]) -> str:
    """What a sweep's end prints: its verdict lines (no markup), then where each file it wrote lies."""
    return "\n".join([*(line.replace("**", "") for line in answer["lines"]),
                      *(f"{Path(f).stem}: {f}" for f in answer["files"])])
