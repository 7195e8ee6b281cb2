"""Intervals for held-out results: how sure a difference between two runs is, on the items both answered; and the held-out
reward's table (light: the sweep summary, loaded by every run's Hydra callback, imports it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from vase.annotate.vocab import DIMENSIONS


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


def heldout_difference(a: dict[str, Any], b: dict[str, Any], key: str) -> dict[str, float]:
    """``a - b`` on one key of the answers both scored (``total``, a term, or ``<term>_pass``), with its paired
    bootstrap interval."""
    return paired_difference({i: v[key] for i, v in a["items"].items() if key in v},
                             {i: v[key] for i, v in b["items"].items() if key in v})


def format_heldout(results: dict[str, dict[str, Any]]) -> str:
    """A markdown table: per run, each dimension's held-out pass rate and the weighted total, with 95 % intervals."""
    def cell(s: dict[str, float] | None, pct: bool) -> str:
        if not s:
            return "–"
        f = 100.0 if pct else 1.0
        return f"{f * s['mean']:.1f} [{f * s['lo']:.1f}, {f * s['hi']:.1f}]" if pct else \
            f"{s['mean']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}]"

    dims = [d for d in DIMENSIONS if any(d in r.get("pass", {}) for r in results.values())]
    lines = ["| run | answers | " + " | ".join(f"{d.capitalize()} right, %" for d in dims) + " | reward |",
             "|---|---:|" + "---|" * (len(dims) + 1)]
    for label, r in results.items():
        lines.append(f"| {label} | {r.get('n', '')} | " + " | ".join(cell(r["pass"].get(d), True) for d in dims)
                     + f" | {cell(r.get('total'), False)} |")
    return "\n".join(lines) + "\n"
