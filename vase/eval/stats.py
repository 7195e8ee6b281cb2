"""Intervals for held-out accuracies: how sure a difference between two runs is, on the items both answered."""

from __future__ import annotations

import numpy as np


def bootstrap_ci(values: list[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (seeded: the same items give the same interval).

    >>> lo, hi = bootstrap_ci([1.0] * 30 + [0.0] * 30); lo < 0.5 < hi and hi - lo < 0.3
    True
    >>> bootstrap_ci([])
    (nan, nan)
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def paired_difference(a: dict[str, float], b: dict[str, float], n_boot: int = 2000, seed: int = 0,
                      level: float = 0.95) -> dict[str, float]:
    """Mean of ``a - b`` over the items both scored (matched by id) with its bootstrap interval: the difference
    between two runs on the same held-out questions, and whether it could be noise (an interval holding 0).

    >>> d = paired_difference({"q1": 1, "q2": 1, "q3": 0, "q4": 1}, {"q1": 0, "q2": 1, "q3": 0, "q4": 0})
    >>> d["diff"], d["n"]
    (0.5, 4)
    """
    common = sorted(set(a) & set(b))
    diffs = [float(a[k]) - float(b[k]) for k in common]
    lo, hi = bootstrap_ci(diffs, n_boot, seed, level)
    return {"diff": float(np.mean(diffs)) if diffs else float("nan"), "lo": lo, "hi": hi, "n": len(common)}
