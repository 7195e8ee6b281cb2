"""The paper's caption metrics per vase, two sets of captions of the same vases compared on paired intervals, and the
smallest difference a held-out set of a given size can detect.

Every metric but FID is a mean over vases of a per-vase term: the CLIP text similarity of a caption and its reference,
the Jaccard similarity of their word sets, a hit when the caption retrieves its own reference among the top k of the
whole reference set (R@k), and the overall score, a weighted sum of those (the paper's weights; its "semantic" term is
the CLIP score again). A difference between two runs on the same vases is then the mean of per-vase differences, with
a bootstrap interval over vases. FID is a statistic of the whole set: its interval comes from resampling vases and
recomputing both runs' FID on each resample.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

PER_VASE = ("clip_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity", "overall_score")
METRICS = ("fid_score", *PER_VASE)
LOWER_IS_BETTER = {"fid_score"}


def per_vase_scores(scorer: Any, preds: list[str], refs: list[str], ks: tuple[int, ...] = (1, 5, 10),
                    weights: dict[str, float] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Each vase's term of every per-vase metric (their means are the set's metrics, as :class:`CaptionScorer`
    computes them), and the sentence embeddings of the captions and the references (for FID)."""
    # lazy: torch: the reports that read held() and the power figures (every run's Hydra callback) must not load it
    import torch

    # lazy: torch, torchmetrics (the caption metrics' module), for the same reason
    from vase.metrics.caption import PAPER_OVERALL_WEIGHTS, encode_once, jaccard

    clip = encode_once(scorer.clip_encoder, list(preds) + list(refs)).double()
    clip = clip / clip.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    g, r = clip[: len(preds)], clip[len(preds):]
    sim = g @ r.T
    own = sim.diagonal().unsqueeze(1)
    n = sim.shape[0]
    earlier = torch.arange(n).unsqueeze(0) < torch.arange(n).unsqueeze(1)  # ties broken as a stable argsort
    rank = ((sim > own).sum(dim=1) + ((sim == own) & earlier).sum(dim=1)).numpy()
    out = {"clip_score": sim.diagonal().numpy().astype(float),
           "lexical_similarity": np.array([jaccard(p, t) for p, t in zip(preds, refs)], dtype=float)}
    out.update({f"r_at_{k}": (rank < k).astype(float) for k in ks})
    w = dict(weights or PAPER_OVERALL_WEIGHTS)
    terms = {**out, "semantic_score": out["clip_score"]}
    out["overall_score"] = sum(float(wk) * terms[k] for k, wk in w.items())
    sent = encode_once(scorer.sentence_encoder, list(preds) + list(refs)).double().numpy()
    return out, sent[: len(preds)], sent[len(preds):]


def fid_by_eigenvalues(x: np.ndarray, y: np.ndarray, eps: float = 1e-6) -> float:
    """:func:`~vase.metrics.caption.frechet_distance` by the eigenvalues of the covariances' product (the trace of
    the square root of a product of two positive definite matrices is the sum of the roots of its eigenvalues): the
    same number, many times faster than a matrix square root, for the bootstrap's hundreds of resamples.

    >>> from vase.metrics.caption import frechet_distance
    >>> rng = np.random.default_rng(0); x, y = rng.normal(size=(30, 8)), rng.normal(1, 2, size=(30, 8))
    >>> abs(fid_by_eigenvalues(x, y) - frechet_distance(x, y)) < 1e-6
    True
    """
    s1 = np.cov(x, rowvar=False) + eps * np.eye(x.shape[1])
    s2 = np.cov(y, rowvar=False) + eps * np.eye(y.shape[1])
    roots = np.sqrt(np.clip(np.linalg.eigvals(s1 @ s2).real, 0.0, None)).sum()
    diff = x.mean(0) - y.mean(0)
    return float(diff @ diff + np.trace(s1) + np.trace(s2) - 2 * roots)


def _interval(x: np.ndarray, level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    return float(np.quantile(x, a)), float(np.quantile(x, 1 - a))


def compare_captions(scorer: Any, run: dict[str, str], start: dict[str, str], refs: dict[str, str],
                     n_boot: int = 2000, n_boot_fid: int = 200, seed: int = 0, level: float = 0.95,
                     weights: dict[str, float] | None = None) -> dict[str, Any]:
    """``run`` - ``start`` on every caption metric over the vases both captioned (id -> caption; ``refs``: id ->
    reference), each with its paired bootstrap interval over vases, the standard deviation of the per-vase
    differences (FID: the bootstrap's standard error times sqrt(n)) and ``n``."""
    # lazy: torch, torchmetrics (see per_vase_scores)
    from vase.metrics.caption import frechet_distance

    ids = [i for i in run if i in start and i in refs]
    if len(ids) < 2:
        raise ValueError(f"a paired comparison needs at least 2 vases captioned by both, got {len(ids)}")
    reference = [refs[i] for i in ids]
    a, sa, sr = per_vase_scores(scorer, [run[i] for i in ids], reference, weights=weights)
    b, sb, _ = per_vase_scores(scorer, [start[i] for i in ids], reference, weights=weights)
    n = len(ids)
    rng = np.random.default_rng(seed)
    boot = rng.integers(0, n, size=(n_boot, n))
    out: dict[str, Any] = {}
    for m in PER_VASE:
        d = a[m] - b[m]
        lo, hi = _interval(d[boot].mean(axis=1), level)
        out[m] = {"run": float(a[m].mean()), "start": float(b[m].mean()), "diff": float(d.mean()), "lo": lo,
                  "hi": hi, "sd": float(d.std(ddof=1)), "n": n}
    fid_a, fid_b = frechet_distance(sa, sr), frechet_distance(sb, sr)
    diffs = np.array([fid_by_eigenvalues(sa[idx], sr[idx]) - fid_by_eigenvalues(sb[idx], sr[idx])
                      for idx in boot[:n_boot_fid]])
    lo, hi = _interval(diffs, level)
    out["fid_score"] = {"run": fid_a, "start": fid_b, "diff": fid_a - fid_b, "lo": lo, "hi": hi,
                        "sd": float(diffs.std(ddof=1) * np.sqrt(n)), "n": n}
    return {m: out[m] for m in METRICS}


def minimal_detectable(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest paired difference a two-sided test at ``alpha`` detects with probability ``power`` on ``n`` vases
    whose per-vase differences have standard deviation ``sd``: (z_{1-alpha/2} + z_{power}) * sd / sqrt(n).

    >>> round(minimal_detectable(1.0, 100), 4)  # 1.96 + 0.8416, over 10
    0.2802
    """
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * sd / float(np.sqrt(n))


def held(c: dict[str, float], metric: str) -> bool:
    """Whether the run is above its start on ``metric`` on the paired interval (below, for FID)."""
    return c["hi"] < 0 if metric in LOWER_IS_BETTER else c["lo"] > 0


def format_comparison(comp: dict[str, Any], run: str = "run", start: str = "start", n_paper: int = 96) -> str:
    """A markdown table: each metric for the start and the run, the paired difference with its interval, and the
    smallest difference this set (and a set of the paper's size) can detect at 80 % power."""
    def f(m: str, v: float) -> str:
        return f"{100 * v:.1f} %" if m.startswith("r_at") else f"{v:.3f}"

    def d(m: str, v: float) -> str:
        return f"{100 * v:+.1f}" if m.startswith("r_at") else f"{v:+.3f}"

    lines = [f"| metric | {start} | {run} | paired difference [95 % interval] | detectable at n={comp[METRICS[0]]['n']} "
             f"| at n={n_paper} |", "|---|---|---|---|---|---|"]
    for m, c in comp.items():
        sign = " ↓" if m in LOWER_IS_BETTER else ""
        mark = " **held**" if held(c, m) else ""
        lines.append(f"| {m}{sign} | {f(m, c['start'])} | {f(m, c['run'])} | {d(m, c['diff'])} "
                     f"[{d(m, c['lo'])}, {d(m, c['hi'])}]{mark} | {d(m, minimal_detectable(c['sd'], c['n']))[1:]} | "
                     f"{d(m, minimal_detectable(c['sd'], n_paper))[1:]} |")
    return "\n".join(lines) + "\n"
