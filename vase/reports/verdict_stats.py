"""A sweep's verdict in numbers: each job's measure (per held-out vase, or one number from its training history), and
one setting against its baseline on it, per replicate and pooled, with paired 95 % intervals. Per replicate, a
bootstrap over the held-out vases of that one training run. Pooled over replicates (`runs_and_vases`), an interval
whose variance is the runs' spread plus the held-out vases' (a t interval on the runs): another seed, another CPU's
last bits or another thread count gives another trained model, and the interval covers that, not only another test
set. One training run per setting decides nothing (`ONE_RUN`). `vase.reports.verdict` tells how the numbers are made;
this module makes them."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from vase.eval.stats import bootstrap_ci
from vase.metrics.paired import minimal_detectable
from vase.metrics.registry import is_percent
from vase.reports.jobs import (
    LAST_STEPS,
    heldout_of,
    last_history,
)

N_BOOT = 2000


MIN_REPLICATES = 3
"""A training measure (one number a job) gets an interval from this many replicates up (a bootstrap over them)."""


def value_of(job: Path, move: str) -> tuple[dict[str, float] | None, float | None]:
    """A job's measure: per held-out vase (``heldout/...``), or one number (training's last steps)."""
    if move.startswith("heldout/"):
        held, _ = heldout_of(job)
        if not held:
            return None, None
        name = move.split("/", 1)[1]
        if name == "mean_right":  # per answer, the mean over the dimensions it was scored on of whether they passed
            per = {i: float(np.mean(p)) for i, v in held.get("items", {}).items()
                   if (p := [x for k, x in v.items() if k.endswith("_pass")])}
            return (per or None), None
        dim = name[:-6]  # a dimension's term may have its own name (the paper's terms: reward.terms.<name>.dimension)
        field = f"{held.get('term_of_dimension', {}).get(dim, dim)}_pass" if name.endswith("_right") else name
        per = {i: float(v[field]) for i, v in held.get("items", {}).items() if field in v}
        if not per:  # a caption metric: each held-out caption's term (`vase.metrics.paired.caption_terms`)
            per = {i: float(x) for i, x in (held.get("caption_terms") or {}).get(name, {}).items()}
        return (per or None), None
    _, rows = last_history(job)
    vals = [float(r[move]) for r in rows[-LAST_STEPS:] if isinstance(r.get(move), (int, float))]
    return None, (float(np.mean(vals)) if vals else None)


def within_runs_bootstrap(diffs: list[list[float]], seed: int = 0) -> tuple[float, float]:
    """The 95 % interval of the mean of every difference, resampling the vases within each replicate: what one run's
    interval is, and what vase 0.2.0 pooled several runs with (it covers another test set, not another run:
    benchmarks/verdict_calibration.py counts how often it decides an A/A comparison)."""
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(d, dtype=float) for d in diffs if d]
    n = sum(len(a) for a in arrays)
    if n < 2:
        return float("nan"), float("nan")
    means = np.empty(N_BOOT)
    for b in range(N_BOOT):
        means[b] = sum(rng.choice(a, size=len(a), replace=True).sum() for a in arrays) / n
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


RUNS_AND_VASES = ("t interval over training runs and held-out vases: its variance the spread of the runs' mean "
                  "differences over the runs plus that of the vases' differences (averaged over the runs) over the "
                  "vases; runs - 1 degrees of freedom where the runs' part is a fifth of it or more, else "
                  "Welch-Satterthwaite's")
"""How a held-out measure pooled over two or more runs gets its interval (`runs_and_vases`): the method's name in
verdict.md and verdict.json."""
ONE_RUN = "not decided (one run)"
"""The direction of a held-out measure with one training run per setting: its interval covers the held-out vases, not
another run, so it decides nothing."""
ONE_RUN_METHOD = ("one training run per setting: this interval (a bootstrap over the held-out vases of that run) "
                  "covers the held-out vases, not another run")
MIN_RUNS = MIN_REPLICATES
"""A held-out measure pooled over runs decides from this many runs up, as a training measure gets an interval: with two,
the runs' spread rests on one degree of freedom, and its interval decided 8 % of simulated A/A comparisons where 5 %
is owed (tests/test_verdict_intervals.py)."""


def undecided(runs: int) -> str | None:
    """The direction a pooled held-out measure has when its runs are too few to decide (`MIN_RUNS`), else None.

    >>> undecided(1), undecided(2), undecided(3)
    ('not decided (one run)', 'not decided (2 runs, 3 needed)', None)
    """
    if runs == 1:
        return ONE_RUN
    return f"not decided ({runs} runs, {MIN_RUNS} needed)" if runs < MIN_RUNS else None


def runs_and_vases(per_run: list[dict[str, float]]) -> dict[str, Any]:
    """The pooled difference of two or more training runs (``per_run``: each run's difference per held-out vase) and
    its 95 % interval, `RUNS_AND_VASES`: mean +- t(0.975, df) x sqrt(s_runs^2 / runs + s_vases^2 / vases), where
    s_runs is the standard deviation of the runs' mean differences (what another seed or machine moves) and s_vases
    that of each vase's difference averaged over the runs (what another test set moves; the vases every run scored).
    With the same vases in every run, the first holds no test-set noise and the second no training noise, so both are
    counted; where the runs scored other vases (data draws), the sum errs wide. df is runs - 1 (two runs: t = 12.7)
    where the runs' part of the variance is a fifth or more, else Welch-Satterthwaite's (about vases - 1 where the
    runs agree). On simulated A/A comparisons that decides 2-7 % (tests/test_verdict_intervals.py). Returns ``diff``, ``lo``, ``hi``,
    ``runs``, ``vases`` (the vases every run scored), ``n``, ``between_sd``, ``vase_sd``, ``se`` and ``detectable``
    (the smallest difference it finds 80 % of the time: what a "no clear change" could have missed).

    >>> runs_and_vases([{"a": 0.1, "b": 0.3}, {"a": 0.1, "b": 0.3}])["lo"] < 0.2  # the same runs: the vases' spread
    True
    >>> far = runs_and_vases([{v: 0.0 for v in "abcdefgh"}, {v: 0.4 for v in "abcdefgh"}])
    >>> round(far["diff"], 3), far["lo"] < 0 < far["hi"], round(far["between_sd"], 3), far["vase_sd"]
    (0.2, True, 0.283, 0.0)
    """
    runs = [np.asarray(list(d.values()), dtype=float) for d in per_run if d]
    means = np.array([r.mean() for r in runs])
    common = sorted(set.intersection(*(set(d) for d in per_run if d)))
    by_vase = np.array([np.mean([d[v] for d in per_run if d]) for v in common])
    between = float(means.std(ddof=1))
    vase_sd = float(by_vase.std(ddof=1)) if len(by_vase) > 1 else float(np.mean([r.std(ddof=1) for r in runs]))
    vases = len(common) if len(common) > 1 else int(np.mean([len(r) for r in runs]))
    a, b = between ** 2 / len(runs), vase_sd ** 2 / vases
    se = math.sqrt(a + b)
    # runs - 1 degrees of freedom once the runs' spread is a fifth of the variance or more: Welch-Satterthwaite's df
    # there rests on an estimate with runs - 1 df of its own and decided 10-12 % of simulated A/A comparisons of two
    # runs (tests/test_verdict_intervals.py); where the runs agree, Welch-Satterthwaite's (about vases - 1)
    df = (len(runs) - 1 if a >= (a + b) / 5 or a + b == 0
          else (a + b) ** 2 / (a ** 2 / (len(runs) - 1) + b ** 2 / max(1, vases - 1)))
    half = float(stats.t.ppf(0.975, df)) * se
    diff = float(means.mean())
    # the smallest difference such an interval excludes 0 for 80 % of the time: what "no clear change" could miss
    detectable = float(stats.t.ppf(0.975, df) + stats.t.ppf(0.80, df)) * se
    return {"diff": diff, "lo": diff - half, "hi": diff + half, "runs": len(runs), "vases": vases,
            "n": int(sum(len(r) for r in runs)), "between_sd": between, "vase_sd": vase_sd, "se": se,
            "detectable": detectable}


def pooled_over_runs(pairs: list[tuple[dict[str, Any], dict[str, Any]]], key: str) -> dict[str, Any]:
    """``a - b`` on one key of held-out answers (``total``, ``<term>_pass``) pooled over training runs: ``pairs`` holds
    each run's two held-out results (a job's and the job or start it is set against, on the same vases). Two runs
    and more: `runs_and_vases` and its direction, from `MIN_RUNS` runs (fewer: ``undecided`` and why); one: its
    vases' mean difference, ``one_run`` and `ONE_RUN`, which decides nothing.

    >>> run = lambda x: ({"items": {v: {"t": x + 0.01 * k} for k, v in enumerate("abcdefgh")}},
    ...                  {"items": {v: {"t": 0.0} for v in "abcdefgh"}})
    >>> pooled_over_runs([run(0.1)], "t")["direction"], pooled_over_runs([run(0.1), run(0.1), run(0.12)], "t")["direction"]
    ('not decided (one run)', 'up')
    """
    per_run = [{i: float(v[key]) - float(b["items"][i][key]) for i, v in a["items"].items()
                if key in v and key in b["items"].get(i, {})} for a, b in pairs]
    per_run = [d for d in per_run if d]
    if not per_run:
        return {"diff": None, "lo": None, "hi": None, "runs": 0, "direction": "not measured"}
    if len(per_run) == 1:
        d = per_run[0]
        return {"diff": float(np.mean(list(d.values()))), "lo": None, "hi": None, "runs": 1, "vases": len(d),
                "one_run": True, "undecided": True, "direction": ONE_RUN}
    got = runs_and_vases(per_run)
    too_few = undecided(len(per_run))
    return {**got, **({"undecided": True} if too_few else {}), "direction": too_few or _direction(got)}


def within_sd(diffs: list[list[float]]) -> float | None:
    """The standard deviation of per-vase differences around their own replicate's mean (pooled over replicates, one
    degree of freedom per replicate); None with no more differences than replicates.

    >>> within_sd([[1.0, 3.0], [10.0, 12.0]])  # each replicate's spread, not the 9 between their means
    1.4142135623730951
    """
    arrays = [np.asarray(d, dtype=float) for d in diffs if len(d)]
    dof = sum(len(a) for a in arrays) - len(arrays)
    if dof < 1:
        return None
    return float(math.sqrt(sum(float(((a - a.mean()) ** 2).sum()) for a in arrays) / dof))


def _direction(d: dict[str, Any]) -> str:
    """
    >>> _direction({"lo": 0.1, "hi": 0.3}), _direction({"lo": -0.1, "hi": 0.3}), _direction({"lo": None, "hi": None, "diff": -1})
    ('up', 'no clear change', 'down, with no interval to tell it from noise')
    """
    lo, hi = d.get("lo"), d.get("hi")
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        diff = d.get("diff")
        if diff is None or diff == 0:
            return "no change"
        return f"{'up' if diff > 0 else 'down'}, with no interval to tell it from noise"
    return "up" if lo > 0 else "down" if hi < 0 else "no clear change"


def compare_move(move: str, base: dict[str, Path], other: dict[str, Path],
             value: Callable[[Path, str], tuple[dict[str, float] | None, float | None]] = value_of) -> dict[str, Any]:
    """``other`` against ``base`` on one measure, per replicate (the jobs sharing replicate values) and pooled;
    ``value`` reads a job's measure (`value_of`, or a report's cached copy of it)."""
    per: dict[str, Any] = {}
    diffs: list[list[float]] = []
    by_vase: list[dict[str, float]] = []  # each run's difference per held-out vase
    singles: list[float] = []
    for rep in sorted(set(base) & set(other)):
        a_items, a_val = value(other[rep], move)
        b_items, b_val = value(base[rep], move)
        if a_items is not None and b_items is not None:
            common = sorted(set(a_items) & set(b_items))
            d = [a_items[i] - b_items[i] for i in common]
            if not d:
                continue
            lo, hi = bootstrap_ci(d, N_BOOT, 0)
            per[rep] = {"diff": float(np.mean(d)), "lo": lo, "hi": hi, "n": len(d),
                        "base": float(np.mean([b_items[i] for i in common])),
                        "value": float(np.mean([a_items[i] for i in common]))}
            diffs.append(d)
            by_vase.append(dict(zip(common, d)))
        elif a_val is not None and b_val is not None:
            per[rep] = {"diff": a_val - b_val, "lo": None, "hi": None, "n": 1, "base": b_val, "value": a_val}
            singles.append(a_val - b_val)
    pooled: dict[str, Any] = {"diff": None, "lo": None, "hi": None, "n": 0, "replicates": len(per)}
    if len(diffs) > 1:  # several training runs: an interval that covers another run
        pooled.update(runs_and_vases(by_vase), replicates=len(per), method=RUNS_AND_VASES)
        if undecided(len(diffs)):
            pooled["undecided"] = True
    elif diffs:  # one run: its vases' interval, which decides nothing
        lo, hi = within_runs_bootstrap(diffs)
        pooled.update(diff=float(np.mean(diffs[0])), lo=lo, hi=hi, n=len(diffs[0]), runs=1, vases=len(diffs[0]),
                      one_run=True, undecided=True, method=ONE_RUN_METHOD)
        if (sd := within_sd(diffs)) is not None:
            pooled.update(sd=sd, detectable=minimal_detectable(sd, len(diffs[0])))
    elif singles:
        pooled.update(diff=float(np.mean(singles)), n=len(singles), method="mean over replicates")
        if len(singles) >= MIN_REPLICATES:
            lo, hi = bootstrap_ci(singles, N_BOOT, 0)
            pooled.update(lo=lo, hi=hi, method="bootstrap over replicates")
    pooled["direction"] = (undecided(pooled["runs"]) if pooled.get("undecided") else _direction(pooled)) \
        if pooled["diff"] is not None else "not measured (the jobs' results hold no such value)"
    return {"per_replicate": per, "pooled": pooled}


def is_share(move: str) -> bool:
    """A share, said in points: a dimension right, or a caption metric shown in percent (R@k)."""
    return move.endswith("_right") or (move.startswith("heldout/") and is_percent(move.split("/", 1)[1]))


def same_setting(a: str, b: str) -> bool:
    """Whether two ``k=v, ...`` settings name the same values (``0`` and ``0.0`` are one number).

    >>> same_setting("stage.module.beta=0", "stage.module.beta=0.0"), same_setting("a=x", "a=y")
    (True, False)
    """
    def parts(s: str) -> list[tuple[str, Any]]:
        out = []
        for p in s.split(", "):
            k, _, v = p.partition("=")
            try:
                out.append((k, float(v)))
            except ValueError:
                out.append((k, v.lower()))
        return out

    return parts(a) == parts(b)
