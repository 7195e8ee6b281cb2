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

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from statistics import NormalDist
from typing import Any

import numpy as np

from vase.markdown import table_text
from vase.metrics.registry import LOWER_IS_BETTER, PER_VASE, is_percent, paired_keys

METRICS = ("fid_score", *PER_VASE)
"""The paper's metrics in comparison order; a comparison adds a run's extra per-vase metrics (`paired_keys`)."""
log = logging.getLogger("vase")


def per_vase_scores(scorer: Any, preds: list[str], refs: list[str], ks: tuple[int, ...] = (1, 5, 10),
                    weights: dict[str, float] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Each vase's term of every per-vase metric (their means are the set's metrics, as `CaptionScorer`
    computes them; the scorer's extra metrics too), and the sentence embeddings of the captions and the references
    (for FID)."""
    # lazy: torch: the reports that read held() and the power figures (every run's Hydra callback) must not load it
    import torch

    # lazy: torch, torchmetrics (the caption metrics' module), for the same reason
    from vase.metrics.caption_metrics import PAPER_OVERALL_WEIGHTS, encode_once, jaccard

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
    out.update({m.key: np.asarray(m.terms(list(preds), list(refs)), dtype=float)
                for m in getattr(scorer, "extra_metrics", ())})
    w = dict(weights or PAPER_OVERALL_WEIGHTS)
    terms = {**out, "semantic_score": out["clip_score"]}
    out["overall_score"] = sum(float(wk) * terms[k] for k, wk in w.items())
    sent = encode_once(scorer.sentence_encoder, list(preds) + list(refs)).double().numpy()
    return out, sent[: len(preds)], sent[len(preds):]


def fid_by_eigenvalues(x: np.ndarray, y: np.ndarray, eps: float = 1e-6) -> float:
    """`frechet_distance` by the eigenvalues of the covariances' product (the trace of
    the square root of a product of two positive definite matrices is the sum of the roots of its eigenvalues): the
    same number, many times faster than a matrix square root, for the bootstrap's hundreds of resamples.

    >>> from vase.metrics.caption_metrics import frechet_distance
    >>> rng = np.random.default_rng(0); x, y = rng.normal(size=(30, 8)), rng.normal(1, 2, size=(30, 8))
    >>> abs(fid_by_eigenvalues(x, y) - frechet_distance(x, y)) < 1e-6
    True
    """
    s1 = np.cov(x, rowvar=False) + eps * np.eye(x.shape[1])
    s2 = np.cov(y, rowvar=False) + eps * np.eye(y.shape[1])
    roots = np.sqrt(np.clip(np.linalg.eigvals(s1 @ s2).real, 0.0, None)).sum()
    diff = x.mean(0) - y.mean(0)
    return float(diff @ diff + np.trace(s1) + np.trace(s2) - 2 * roots)


def fid_resamples(x: np.ndarray, y: np.ndarray, boot: np.ndarray, chunk: int = 25) -> np.ndarray:
    """The FID of ``x[idx]`` against ``y[idx]`` for every resample ``idx`` (a row of ``boot``, indices into the paired
    rows of both sets), computed from the sets' Gram matrices, so a resample costs O(m^3) in the m distinct vases it
    drew (about 0.63 n), whatever the embedding's width d; the resamples go through numpy stacked.

    A resample that drew vase i c_i times has the weighted covariance S = A^T A / (n - 1), A's rows sqrt(c_i) times
    the centred embeddings; then tr S = tr(A A^T) / (n - 1), and tr((Sx Sy)^(1/2)) = ||Ax Ay^T||_* / (n - 1) (the
    nonzero eigenvalues of Sx Sy are the squared singular values of Ax Ay^T), all read off the Grams. The paper's eps
    (1e-6 on both covariances' diagonals) is left out of the resamples only: it moves a FID by about 1e-3 and a
    difference of two FIDs on one reference set by about 1e-4, against intervals some hundred times wider; the FID
    itself is computed exactly.

    >>> rng = np.random.default_rng(0); x, y = rng.normal(size=(30, 8)), rng.normal(1, 2, size=(30, 8))
    >>> boot = rng.integers(0, 30, size=(3, 30))
    >>> bool(np.allclose(fid_resamples(x, y, boot), [fid_by_eigenvalues(x[i], y[i], eps=0.0) for i in boot]))
    True
    """
    n = x.shape[0]
    kxx, kyy, kxy = x @ x.T, y @ y.T, x @ y.T
    dist = kxx - kxy - kxy.T + kyy  # (x_i - y_i) . (x_j - y_j): the means' squared distance
    out = np.empty(len(boot))
    for start in range(0, len(boot), chunk):
        counts = np.stack([np.bincount(idx, minlength=n) for idx in boot[start:start + chunk]])
        m = int((counts > 0).sum(1).max())
        # each resample's distinct vases first (padded with vase 0 at weight 0: zero rows and columns change nothing)
        order = np.argsort(counts == 0, axis=1, kind="stable")[:, :m]
        c = np.take_along_axis(counts, order, axis=1).astype(float)
        w = c / n
        rows, cols = order[:, :, None], order[:, None, :]
        g, gxx, gd = kxy[rows, cols], kxx[rows, cols], dist[rows, cols]
        gc = (g - (g @ w[:, :, None]) - (w[:, None, :] @ g) + np.einsum("bi,bij,bj->b", w, g, w)[:, None, None])
        a = np.sqrt(c)
        mat = a[:, :, None] * gc * a[:, None, :]
        nuclear = np.sqrt(np.clip(np.linalg.eigvalsh(mat @ np.swapaxes(mat, 1, 2)), 0.0, None)).sum(1)

        # sum_i c_i |v_i - mean|^2, for each set
        tx = (c * np.take(np.diag(kxx), order)).sum(1) - n * np.einsum("bi,bij,bj->b", w, gxx, w)
        ty = (c * np.take(np.diag(kyy), order)).sum(1) - n * np.einsum("bi,bij,bj->b", w, kyy[rows, cols], w)
        out[start:start + chunk] = np.einsum("bi,bij,bj->b", w, gd, w) + (tx + ty - 2 * nuclear) / (n - 1)
    return out


def _interval(x: np.ndarray, level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    return float(np.quantile(x, a)), float(np.quantile(x, 1 - a))


def caption_terms(scorer: Any, captions: dict[str, str], refs: dict[str, str],
                  weights: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    """Each caption's term of every per-vase metric (the paper's and the scorer's extra ones; `paired_keys`), by
    metric then caption id: what two runs' captions of the same vases pair on, one run scored alone (FID, a
    statistic of the whole set, has none)."""
    ids = [i for i in sorted(captions) if i in refs]
    if not ids:
        return {}
    terms, _, _ = per_vase_scores(scorer, [captions[i] for i in ids], [refs[i] for i in ids], weights=weights)
    return {m: {i: float(x) for i, x in zip(ids, terms[m])} for m in paired_keys(terms)}


def compare_captions(scorer: Any, run: dict[str, str], start: dict[str, str], refs: dict[str, str],
                     n_boot: int = 2000, n_boot_fid: int = 200, seed: int = 0, level: float = 0.95,
                     weights: dict[str, float] | None = None) -> dict[str, Any]:
    """``run`` - ``start`` on every caption metric over the vases both captioned (id -> caption; ``refs``: id ->
    reference), each with its paired bootstrap interval over vases, the standard deviation of the per-vase
    differences (FID: the bootstrap's standard error times sqrt(n)) and ``n``."""
    # lazy: torch, torchmetrics (see per_vase_scores)
    from vase.metrics.caption_metrics import frechet_distance

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
    paired = paired_keys(a)
    for m in paired:
        d = a[m] - b[m]
        lo, hi = _interval(d[boot].mean(axis=1), level)
        out[m] = {"run": float(a[m].mean()), "start": float(b[m].mean()), "diff": float(d.mean()), "lo": lo,
                  "hi": hi, "sd": float(d.std(ddof=1)), "n": n}
    fid_a, fid_b = frechet_distance(sa, sr), frechet_distance(sb, sr)
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:  # numpy's eigensolver lets go of the GIL: the two sets on two cores
        runs = [pool.submit(fid_resamples, e, sr, boot[:n_boot_fid]) for e in (sa, sb)]
        diffs = runs[0].result() - runs[1].result()
    log.info("paired intervals over %d vases: %d resamples (FID: %d) in %.2f s", n, n_boot, n_boot_fid,
             time.perf_counter() - started)
    lo, hi = _interval(diffs, level)
    out["fid_score"] = {"run": fid_a, "start": fid_b, "diff": fid_a - fid_b, "lo": lo, "hi": hi,
                        "sd": float(diffs.std(ddof=1) * np.sqrt(n)), "n": n}
    return {m: out[m] for m in ("fid_score", *paired)}


def minimal_detectable(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest paired difference a two-sided test at ``alpha`` detects with probability ``power`` on ``n`` vases
    whose per-vase differences have standard deviation ``sd``: ``(z_{1-alpha/2} + z_{power}) * sd / sqrt(n)``.

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
        return f"{100 * v:.1f} %" if is_percent(m) else f"{v:.3f}"

    def d(m: str, v: float) -> str:
        return f"{100 * v:+.1f}" if is_percent(m) else f"{v:+.3f}"

    rows = [[f"{m}{' ↓' if m in LOWER_IS_BETTER else ''}", f(m, c["start"]), f(m, c["run"]),
             f"{d(m, c['diff'])} [{d(m, c['lo'])}, {d(m, c['hi'])}]{' **held**' if held(c, m) else ''}",
             d(m, minimal_detectable(c["sd"], c["n"]))[1:], d(m, minimal_detectable(c["sd"], n_paper))[1:]]
            for m, c in comp.items()]
    return table_text(["metric", start, run, "paired difference [95 % interval]",
                       f"detectable at n={comp[METRICS[0]]['n']}", f"at n={n_paper}"], rows)
