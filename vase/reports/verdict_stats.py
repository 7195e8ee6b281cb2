"""A sweep's verdict in numbers: each job's measure (per held-out vase, or one number from its training history), and
one setting against its baseline on it, per replicate and pooled, with paired 95 % intervals (a bootstrap over the
held-out vases within each replicate; over replicates for a training measure). `vase.reports.verdict` tells how the
numbers are made; this module makes them."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

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


def _stratified(diffs: list[list[float]], seed: int = 0) -> tuple[float, float]:
    """The 95 % interval of the mean of every difference, resampling within each replicate."""
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(d, dtype=float) for d in diffs if d]
    n = sum(len(a) for a in arrays)
    if n < 2:
        return float("nan"), float("nan")
    means = np.empty(N_BOOT)
    for b in range(N_BOOT):
        means[b] = sum(rng.choice(a, size=len(a), replace=True).sum() for a in arrays) / n
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


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
        elif a_val is not None and b_val is not None:
            per[rep] = {"diff": a_val - b_val, "lo": None, "hi": None, "n": 1, "base": b_val, "value": a_val}
            singles.append(a_val - b_val)
    pooled: dict[str, Any] = {"diff": None, "lo": None, "hi": None, "n": 0, "replicates": len(per)}
    if diffs:
        flat = [x for d in diffs for x in d]
        lo, hi = _stratified(diffs)
        pooled.update(diff=float(np.mean(flat)), lo=lo, hi=hi, n=len(flat),
                      method="stratified bootstrap over held-out vases within each replicate")
        if (sd := within_sd(diffs)) is not None:  # what a "no clear change" could have missed (80 % power)
            pooled.update(sd=sd, detectable=minimal_detectable(sd, len(flat)))
    elif singles:
        pooled.update(diff=float(np.mean(singles)), n=len(singles), method="mean over replicates")
        if len(singles) >= MIN_REPLICATES:
            lo, hi = bootstrap_ci(singles, N_BOOT, 0)
            pooled.update(lo=lo, hi=hi, method="bootstrap over replicates")
    pooled["direction"] = _direction(pooled) if pooled["diff"] is not None else \
        "not measured (the jobs' results hold no such value)"
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
