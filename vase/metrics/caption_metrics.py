"""Caption metrics as the paper's scorer defines them, as torchmetrics ``Metric`` classes (states sync under DDP).

- CLIP score: mean cosine similarity of CLIP *text* embeddings of each generated caption and its reference.
- FID: Frechet distance between the sets of sentence embeddings (covariances with rowvar=False, eps 1e-6 on both
  diagonals, matrix square root of the product, real part).
- R@k: for generated caption i, rank every reference by cosine similarity of CLIP text embeddings; a hit when
  reference i is among the top k. Ties are broken by reference order, as a stable argsort does (the paper's
  default argsort leaves their order to the sort algorithm, so R@k can differ by tied items).
- Lexical similarity: Jaccard similarity of lower-cased, whitespace-split word sets, averaged.
- Overall: 0.25 CLIP + 0.25 semantic (= CLIP) + 0.20 R@10 + 0.15 lexical + 0.10 R@5 + 0.05 R@1.
- Any metric of `vase.metrics.registry` a run adds (``metrics.extra``, e.g. ROUGE-L): the mean of its per-vase terms.

The embedding metrics take embeddings, not strings, so that `CaptionScorer` encodes each caption once however
many metrics use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from vase.choices import MIN_EVAL_VASES
from vase.errors import MetricError
from vase.markdown import table_text
from vase.metrics.registry import CaptionMetric, is_percent, table_columns

PAPER_OVERALL_WEIGHTS: dict[str, float] = {
    "clip_score": 0.25,
    "semantic_score": 0.25,
    "r_at_10": 0.20,
    "lexical_similarity": 0.15,
    "r_at_5": 0.10,
    "r_at_1": 0.05,
}
TABLE_COLUMNS: tuple[tuple[str, str], ...] = table_columns(())
"""The paper's Table 3 column order, then ours: the overall score and the image CLIPScore (views vs caption); a run's
extra metrics (`vase.metrics.registry`) join where its rows have them (`markdown_table`)."""


class _PairedEmbeddings(Metric):
    """Stores aligned (generated, reference) embeddings; DDP concatenates them across processes."""

    full_state_update = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("gen", default=[], dist_reduce_fx="cat")
        self.add_state("ref", default=[], dist_reduce_fx="cat")

    def update(self, gen: torch.Tensor, ref: torch.Tensor) -> None:
        if gen.shape != ref.shape or gen.ndim != 2:
            raise MetricError(
                f"{type(self).__name__}: generated {tuple(gen.shape)} and reference "
                f"{tuple(ref.shape)} embeddings must both be (N, D)"
            )
        self.gen.append(gen.float())
        self.ref.append(ref.float())

    def _pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        # after a DDP sync the list states arrive as one concatenated tensor
        empty = (isinstance(self.gen, list) and not self.gen) or (torch.is_tensor(self.gen) and self.gen.numel() == 0)
        if empty:
            raise MetricError(f"{type(self).__name__}: no caption pairs to score (was any generation matched?)")
        return dim_zero_cat(self.gen), dim_zero_cat(self.ref)


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


class CLIPTextScore(_PairedEmbeddings):
    """Mean cosine similarity between paired text embeddings."""

    higher_is_better = True

    def compute(self) -> torch.Tensor:
        g, r = self._pairs()
        return (_normalise(g) * _normalise(r)).sum(-1).mean()


class RecallAtK(_PairedEmbeddings):
    """Text-to-text retrieval recall at each k: does generated caption i retrieve its own reference in the top k?"""

    higher_is_better = True

    def __init__(self, ks: tuple[int, ...] = (1, 5, 10), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not ks or any(k < 1 for k in ks):
            raise MetricError(f"RecallAtK: ks must be positive integers, got {ks}")
        self.ks = tuple(int(k) for k in ks)

    def compute(self) -> dict[str, torch.Tensor]:
        g, r = self._pairs()
        sim = _normalise(g.double()) @ _normalise(r.double()).T  # (N gen, N ref), float64 as the paper's numpy
        own = sim.diagonal().unsqueeze(1)
        n = sim.shape[0]
        # rank of reference i for caption i, ties broken by reference order as a stable argsort would:
        # references strictly more similar, plus equally similar ones that come earlier
        earlier = torch.arange(n).unsqueeze(0) < torch.arange(n).unsqueeze(1)
        rank = (sim > own).sum(dim=1) + ((sim == own) & earlier).sum(dim=1)
        return {f"r_at_{k}": (rank < k).float().mean() for k in self.ks}


def frechet_distance(x: np.ndarray, y: np.ndarray, eps: float = 1e-6) -> float:
    """Frechet distance between two embedding sets, as the paper computes it (float64, scipy's sqrtm)."""
    # lazy: scipy
    from scipy import linalg

    if len(x) < 2 or len(y) < 2:
        raise MetricError(f"FID needs at least {MIN_EVAL_VASES} captions per set, got {len(x)} and {len(y)}")
    mu1, mu2 = x.mean(0), y.mean(0)
    s1 = np.cov(x, rowvar=False) + eps * np.eye(x.shape[1])
    s2 = np.cov(y, rowvar=False) + eps * np.eye(y.shape[1])
    covmean = linalg.sqrtm(s1 @ s2)
    if np.iscomplexobj(covmean):
        covmean = covmean.real
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


class SentenceFID(_PairedEmbeddings):
    """FID between the generated and reference sentence-embedding sets (lower is better)."""

    higher_is_better = False

    def __init__(self, eps: float = 1e-6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.eps = eps

    def compute(self) -> torch.Tensor:
        g, r = self._pairs()
        return torch.tensor(frechet_distance(g.double().numpy(), r.double().numpy(), self.eps))


class _MeanOverItems(Metric):
    """A mean of per-item scores: a float64 sum and a count, both summed across processes."""

    full_state_update = False
    higher_is_better = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def compute(self) -> torch.Tensor:
        if int(self.count) == 0:
            raise MetricError(f"{type(self).__name__}: no items to score")
        return (self.total / self.count).float()


class ImageCaptionCLIPScore(_MeanOverItems):
    """CLIPScore of a caption against the rendered views it describes (not in the paper).

    Per item: the mean over its views of max(100 * cos(view, caption), 0), torchmetrics' CLIPScore definition;
    then the mean over items. Update with view embeddings (N, V, D) and caption embeddings (N, D).
    """

    def update(self, views: torch.Tensor, captions: torch.Tensor) -> None:
        if views.ndim != 3 or captions.ndim != 2 or views.shape[0] != captions.shape[0]:
            raise MetricError(f"ImageCaptionCLIPScore: views {tuple(views.shape)} must be (N, V, D) and captions "
                              f"{tuple(captions.shape)} (N, D)")
        cos = (_normalise(views.float()) * _normalise(captions.float()).unsqueeze(1)).sum(-1)
        self.total += (100 * cos).clamp_min(0).mean(1).sum().double()
        self.count += views.shape[0]


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of lower-cased whitespace-split word sets; two empty strings count as identical.

    >>> jaccard("A red vase", "a RED cup")
    0.5
    """
    sa, sb = set(a.lower().split()), set(b.lower().split())
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


class LexicalJaccard(_MeanOverItems):
    """Mean word-set Jaccard similarity between generated and reference captions."""

    def update(self, preds: list[str], targets: list[str]) -> None:
        if len(preds) != len(targets):
            raise MetricError(f"LexicalJaccard: {len(preds)} generated captions but {len(targets)} references")
        self.total += sum(jaccard(p, t) for p, t in zip(preds, targets))
        self.count += len(preds)


class TermMean(_MeanOverItems):
    """The mean of a registry metric's per-vase terms (`vase.metrics.registry.CaptionMetric.terms`)."""

    def __init__(self, entry: CaptionMetric, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if entry.terms is None:
            raise MetricError(f"{entry.key}: one of the paper's metrics, computed by CaptionScorer itself")
        self.entry = entry  # its direction is the entry's (higher_is_better), which torchmetrics keeps per class

    def update(self, preds: list[str], targets: list[str]) -> None:
        if len(preds) != len(targets):
            raise MetricError(f"{self.entry.key}: {len(preds)} generated captions but {len(targets)} references")
        self.total += float(np.sum(self.entry.terms(list(preds), list(targets))))
        self.count += len(preds)


def encode_once(encoder: Any, texts: list[str]) -> torch.Tensor:
    """Embeddings of ``texts`` with each distinct text encoded once, in length order (batches pad less)."""
    unique = sorted(set(texts), key=lambda t: (len(t), t))
    if not unique:
        return encoder.encode([])
    emb = encoder.encode(unique)
    index = {t: i for i, t in enumerate(unique)}
    return emb[torch.tensor([index[t] for t in texts], dtype=torch.long)]


def _synced_count(metric: Metric) -> int:
    """A metric's ``count`` state summed over processes when it gathers across them (``sync_on_compute``; outside
    compute the states are each process's own), else its own."""
    if not metric.sync_on_compute:
        return int(metric.count)
    with metric.sync_context(should_unsync=True):
        return int(metric.count)


def overall_score(scores: dict[str, float], weights: dict[str, float] | None = None) -> float:
    """Weighted sum of the paper's components; ``semantic_score`` is the CLIP score, as in the paper."""
    weights = dict(weights or PAPER_OVERALL_WEIGHTS)
    values = dict(scores)
    values.setdefault("semantic_score", values["clip_score"])
    missing = [k for k in weights if k not in values]
    if missing:
        raise MetricError(f"overall score needs {missing}; have {sorted(values)}")
    return float(sum(w * values[k] for k, w in weights.items()))


class CaptionScorer:
    """Scores caption pairs with every metric, encoding each caption once per encoder.

    Args:
        clip_encoder: object with ``encode(list[str]) -> (N, D) tensor`` (CLIP text tower) and, for the image score,
            ``encode_images(list[PIL]) -> (N, D)``.
        sentence_encoder: same text interface (a sentence-transformers model), for FID.
        weights: overall-score weights (paper's by default).
        sync: gather the metric states across processes at compute (every rank scoring its share); off by
            default, as vase evaluates on rank 0 alone.
        extra: metrics beyond the paper's (`vase.metrics.registry.extra_metrics`), each the mean of its terms.
    """

    def __init__(self, clip_encoder: Any, sentence_encoder: Any, weights: dict[str, float] | None = None,
                 ks: tuple[int, ...] = (1, 5, 10), sync: bool = False, extra: Iterable[CaptionMetric] = ()) -> None:
        self.clip_encoder = clip_encoder
        self.sentence_encoder = sentence_encoder
        self.weights = dict(weights) if weights else dict(PAPER_OVERALL_WEIGHTS)
        self.encoders: str | None = None  # what they are, for the results files (vase.eval.scoring.build_scorer)
        # the scorer holds one process's captions (rank 0 evaluates alone, after training): no gathering across
        # processes, which would wait on ranks that have finished (a DDP run's evaluation once died on it)
        local = {"sync_on_compute": sync}
        self.clip = CLIPTextScore(**local)
        self.recall = RecallAtK(ks, **local)
        self.fid = SentenceFID(**local)
        self.lexical = LexicalJaccard(**local)
        self.image = ImageCaptionCLIPScore(**local)
        self.extra = {m.key: TermMean(m, **local) for m in extra}
        self._metrics = (self.clip, self.recall, self.fid, self.lexical, self.image, *self.extra.values())

    @property
    def extra_metrics(self) -> tuple[CaptionMetric, ...]:
        """The registry entries scored beyond the paper's metrics."""
        return tuple(m.entry for m in self.extra.values())

    def update(self, preds: list[str], targets: list[str], images: list[list[Any]] | None = None) -> None:
        """Add caption pairs; with ``images`` (each item's rendered views) the image CLIPScore is scored too."""
        if len(preds) != len(targets):
            raise MetricError(f"{len(preds)} generated captions but {len(targets)} references")
        if images is not None and len(images) != len(preds):
            raise MetricError(f"{len(preds)} generated captions but views for {len(images)} items")
        if not preds:
            return
        clip = encode_once(self.clip_encoder, list(preds) + list(targets))  # one pass serves CLIP score and R@k
        cg, cr = clip[: len(preds)], clip[len(preds):]
        self.clip.update(cg, cr)
        self.recall.update(cg, cr)
        sent = encode_once(self.sentence_encoder, list(preds) + list(targets))
        self.fid.update(sent[: len(preds)], sent[len(preds):])
        self.lexical.update(list(preds), list(targets))
        for m in self.extra.values():
            m.update(list(preds), list(targets))
        if images is not None:
            n_views = {len(v) for v in images}
            if len(n_views) != 1:
                raise MetricError(f"every item needs the same number of views for the image score, got {n_views}")
            flat = [im for views in images for im in views]
            emb = self.clip_encoder.encode_images(flat).reshape(len(images), n_views.pop(), -1)
            self.image.update(emb, cg)

    def compute(self) -> dict[str, float]:
        out: dict[str, float] = {"clip_score": float(self.clip.compute())}
        out.update({k: float(v) for k, v in self.recall.compute().items()})
        out["fid_score"] = float(self.fid.compute())
        out["lexical_similarity"] = float(self.lexical.compute())
        out.update({k: float(m.compute()) for k, m in self.extra.items()})
        out["overall_score"] = overall_score(out, self.weights)
        if _synced_count(self.image) > 0:
            out["image_clip_score"] = float(self.image.compute())
        out["n_pairs"] = _synced_count(self.lexical)  # over every process, as the metrics are
        return out

    def score(self, preds: list[str], targets: list[str], images: list[list[Any]] | None = None) -> dict[str, float]:
        """Score one set of pairs from scratch."""
        self.reset()
        self.update(preds, targets, images)
        return self.compute()

    def reset(self) -> None:
        for m in self._metrics:
            m.reset()


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "–"
    if is_percent(key):
        return f"{100 * float(v):.2f} %"
    return f"{float(v):.3f}"


def markdown_table(rows: dict[str, dict[str, Any]]) -> str:
    """One row per model, columns in the paper's order (FID, CLIP, R@10, R@5, R@1, Lexical) plus Overall and N (and a
    metric beyond the paper's where a row has it)."""
    columns = table_columns({k for m in rows.values() for k in m})
    lines = []
    for name, m in rows.items():
        ci = m.get("ci") or {}  # 95 % intervals where the results carry per-vase terms (the leaderboard adds them)
        cells = [_fmt(k, m.get(k)) + (f" [{_fmt(k, ci[k][0])}, {_fmt(k, ci[k][1])}]" if k in ci else "")
                 for k, _ in columns]
        lines.append([name, *cells, m.get("n_pairs", "–")])
    return table_text(["Model", *(title for _, title in columns), "N"], lines)
