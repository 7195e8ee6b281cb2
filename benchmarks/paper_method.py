"""The paper's caption scoring, re-implemented from its description as a plain per-metric loop (the peer).

Written from ../shared/PAPER.md's account of the paper's eval/compare.py, not from its code: each metric encodes
what it needs on its own (CLIP score, the "semantic" score and R@k each run the CLIP text tower: three separate
encodings; FID runs the sentence encoder), R@k ranks
with one argsort per generated caption, lexical similarity loops over pairs. Unlike the original it raises on
failure instead of reporting 0.0. Used by ``benchmarks/score_speed.py`` as the baseline and by the tests as an
independent reference for ``vase.metrics``.
"""

from __future__ import annotations

import numpy as np


def _clip_text(encoder, texts: list[str]) -> np.ndarray:
    return encoder.encode(texts).double().numpy()


def clip_score(encoder, gen: list[str], ref: list[str]) -> float:
    g, r = _clip_text(encoder, gen), _clip_text(encoder, ref)
    sims = []
    for a, b in zip(g, r):
        sims.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    return float(np.mean(sims))


def recall_at_k(encoder, gen: list[str], ref: list[str], ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    g, r = _clip_text(encoder, gen), _clip_text(encoder, ref)
    g = g / np.linalg.norm(g, axis=1, keepdims=True)
    r = r / np.linalg.norm(r, axis=1, keepdims=True)
    hits = {k: 0 for k in ks}
    for i in range(len(g)):
        sims = r @ g[i]
        order = np.argsort(-sims, kind="stable")
        for k in ks:
            if i in order[:k]:
                hits[k] += 1
    return {f"r_at_{k}": hits[k] / len(g) for k in ks}


def fid(sentence_encoder, gen: list[str], ref: list[str], eps: float = 1e-6) -> float:
    from scipy import linalg

    x = sentence_encoder.encode(gen).double().numpy()
    y = sentence_encoder.encode(ref).double().numpy()
    mu1, mu2 = x.mean(axis=0), y.mean(axis=0)
    s1 = np.cov(x, rowvar=False) + np.eye(x.shape[1]) * eps
    s2 = np.cov(y, rowvar=False) + np.eye(y.shape[1]) * eps
    covmean = linalg.sqrtm(s1.dot(s2))
    if np.iscomplexobj(covmean):
        covmean = covmean.real
    diff = mu1 - mu2
    return float(diff.dot(diff) + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def lexical(gen: list[str], ref: list[str]) -> float:
    total = 0.0
    for a, b in zip(gen, ref):
        sa, sb = set(a.lower().split()), set(b.lower().split())
        union = sa | sb
        total += len(sa & sb) / len(union) if union else 1.0
    return total / len(gen)


def score(clip_encoder, sentence_encoder, gen: list[str], ref: list[str]) -> dict[str, float]:
    out = {"clip_score": clip_score(clip_encoder, gen, ref)}
    out["semantic_score"] = clip_score(clip_encoder, gen, ref)  # the paper computes it again, the same way
    out.update(recall_at_k(clip_encoder, gen, ref))
    out["fid_score"] = fid(sentence_encoder, gen, ref)
    out["lexical_similarity"] = lexical(gen, ref)
    out["overall_score"] = (0.25 * out["clip_score"] + 0.25 * out["semantic_score"] + 0.20 * out["r_at_10"]
                            + 0.15 * out["lexical_similarity"] + 0.10 * out["r_at_5"] + 0.05 * out["r_at_1"])
    out["n_pairs"] = len(gen)
    return out
