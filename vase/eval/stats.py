"""Intervals for held-out results: how sure a difference between two runs is, on the items both answered; and the held-out
reward's table (light: the sweep summary, loaded by every run's Hydra callback, imports it)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from vase import markdown as md
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


def wilson_interval(k: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion k / n (``(nan, nan)`` for n = 0).

    >>> [round(x, 4) for x in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


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
    return md.table_text(["run", "answers", *(f"{d.capitalize()} right, %" for d in dims), "reward"],
                         [[label, r.get("n", ""), *(cell(r["pass"].get(d), True) for d in dims),
                           cell(r.get("total"), False)] for label, r in results.items()], align="lr")


def heldout_metrics(held: dict[str, Any], start: dict[str, Any] | None = None) -> dict[str, float]:
    """A run's held-out result as flat end metrics for the dashboards (``hp/heldout/...``): per dimension the share
    right, the start's, the paired change with its 95 % interval and the verdict (+1 above the start, -1 below, 0 when
    the interval holds 0); the weighted reward; and the paper's caption metrics against the start
    (``hp/heldout_captions/<metric>``, ``..._start``, ``..._vs_start``, ``..._lo``, ``..._hi``) where they were scored.

    >>> run = {"n": 2, "total": {"mean": 0.5}, "pass": {"shape": {"mean": 1.0}}, "term_of_dimension": {"shape": "s"},
    ...        "items": {"a": {"s_pass": 1.0}, "b": {"s_pass": 1.0}}}
    >>> start = {"pass": {"shape": {"mean": 0.0}}, "items": {"a": {"s_pass": 0.0}, "b": {"s_pass": 0.0}}}
    >>> m = heldout_metrics(run, start); m["hp/heldout/shape_vs_start"], m["hp/heldout/shape_verdict"]
    (1.0, 1.0)
    """
    out = {"hp/heldout/reward": float(held["total"]["mean"]), "hp/heldout/n": float(held["n"])}
    for d, s in held["pass"].items():
        out[f"hp/heldout/{d}_right"] = float(s["mean"])
        if start and d in start.get("pass", {}):
            c = heldout_difference(held, start, f"{held['term_of_dimension'][d]}_pass")
            out.update({f"hp/heldout/{d}_start": float(start["pass"][d]["mean"]),
                        f"hp/heldout/{d}_vs_start": c["diff"], f"hp/heldout/{d}_vs_start_lo": c["lo"],
                        f"hp/heldout/{d}_vs_start_hi": c["hi"],
                        f"hp/heldout/{d}_verdict": 1.0 if c["lo"] > 0 else -1.0 if c["hi"] < 0 else 0.0})
    for m, c in (held.get("captions_vs_start") or {}).items():
        out.update({f"hp/heldout_captions/{m}": c["run"], f"hp/heldout_captions/{m}_start": c["start"],
                    f"hp/heldout_captions/{m}_vs_start": c["diff"], f"hp/heldout_captions/{m}_lo": c["lo"],
                    f"hp/heldout_captions/{m}_hi": c["hi"]})
    return out


def dashboard_columns(metrics: dict[str, float], first: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The end metrics a comparison table shows, most telling first: ``first`` (what the sweep's hypothesis asks
    about), the held-out change from the start per dimension, the held-out reward, the paper's lexical and overall
    scores against the start, then the last model's caption scores and the training reward (the rest are logged, not
    columns).

    >>> dashboard_columns({"hp/train_reward_last20": 0.1, "hp/heldout/shape_vs_start": 0.2, "hp/heldout/n": 8})
    ['hp/heldout/shape_vs_start', 'hp/train_reward_last20']
    >>> dashboard_columns({"hp/heldout/fabric_vs_start": 0.1, "hp/heldout/shape_vs_start": 0.2},
    ...                   first=["hp/heldout/shape_vs_start"])
    ['hp/heldout/shape_vs_start', 'hp/heldout/fabric_vs_start']
    """
    held = [*first] + [f"hp/heldout/{d}_vs_start" for d in DIMENSIONS] + ["hp/heldout/reward"]
    held += [f"hp/heldout_captions/{m}_vs_start" for m in ("lexical_similarity", "overall_score")]
    ends = ["hp/overall_score", "hp/lexical_similarity", "hp/clip_score", "hp/r_at_5", "hp/fid_score",
            "hp/train_reward_last20", "hp/train_loss_last20"]
    return list(dict.fromkeys(k for k in held + ends if k in metrics))


def mix_of(result: dict[str, Any]) -> str:
    """The training mix a held-out result answered (``mix``; ``task`` in files written before 0.2).

    >>> mix_of({"mix": "both"}), mix_of({"task": "caption"})
    ('both', 'caption')
    """
    return str(result.get("mix", result.get("task")))
