"""The similarities a reward term compares a generated dimension with its target by, each in [0, 1].

``embedding`` (cosine of sentence embeddings, all-MiniLM-L6-v2 by default), ``sequence`` (difflib's ratio),
``vocabulary`` (1 when both name the same vocabulary term, synonyms included, 0 when they name different terms, the
sequence ratio when either is outside the vocabulary) and ``year_iou`` (intersection over union of the year ranges).
The sentence encoder is loaded once per (model, device) per process, lazily, and target embeddings are cached, so
the six dimension terms and the learned term share one encoder and nothing heavy is pickled with a term.
"""

from __future__ import annotations

from typing import Any

from vase.annotate.vocab import dating_iou, parse_dating, sequence_ratio
from vase.choices import SIMILARITIES
from vase.rewards.extract import canonical_or_none

# each dimension's similarity in the paper's reward (conf/reward/vase6d.yaml states the same per term)
PAPER_SIMILARITY = {"fabric": "vocabulary", "technique": "vocabulary", "shape": "vocabulary", "dating": "year_iou",
                    "decoration": "embedding", "attribution": "vocabulary"}


def vocabulary_similarity(dim: str, a: str, b: str) -> float:
    """1 for the same vocabulary term (synonyms count: Attic = Athenian), 0 for different terms, else sequence ratio.

    >>> vocabulary_similarity("fabric", "Attic", "Athenian")
    1.0
    >>> vocabulary_similarity("fabric", "Corinthian", "Athenian")
    0.0
    """
    ca, cb = canonical_or_none(dim, a), canonical_or_none(dim, b)
    if ca is not None and cb is not None:
        return float(ca == cb)
    return sequence_ratio(a, b)


def year_iou(a: str, b: str) -> float:
    """IoU of the year ranges the two datings parse to (0 when either does not parse).

    >>> year_iou("-450 to -400", "c. 475–425 BCE")
    0.3333333333333333
    """
    ra, rb = parse_dating(a), parse_dating(b)
    if ra is None or rb is None:
        return 0.0
    return dating_iou(ra, rb)


class _Embedder:
    """A sentence encoder with a bounded cache of normalised embeddings (targets repeat across steps)."""

    def __init__(self, model: str, device: str) -> None:
        # lazy: torch, torchmetrics
        from vase.metrics.encoders import cached_sentence_encoder

        self.encoder = cached_sentence_encoder(model, device)
        self.cache: dict[str, Any] = {}

    def __call__(self, texts: list[str]) -> dict[str, Any]:
        # lazy: torch
        import torch

        todo = sorted({t for t in texts if t not in self.cache})
        if todo:
            emb = torch.nn.functional.normalize(self.encoder.encode(todo), dim=-1)
            for t, e in zip(todo, emb):
                self.cache[t] = e
            if len(self.cache) > 50_000:  # completions are rarely seen twice: keep the cache bounded
                self.cache = dict(list(self.cache.items())[-25_000:])
        return {t: self.cache[t] for t in texts}


_EMBEDDERS: dict[tuple[str, str], _Embedder] = {}


def embedder(model: str, device: str = "cpu") -> _Embedder:
    """This process's embedder for (model, device), loaded on first use."""
    key = (str(model), str(device))
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = _Embedder(*key)
    return _EMBEDDERS[key]


def check_kind(kind: str, where: str) -> str:
    if kind not in SIMILARITIES:
        raise ValueError(f"{where}={kind!r} is not a known similarity; use one of {list(SIMILARITIES)}")
    return kind


def similarities(dim: str, kind: str, pairs: list[tuple[str | None, str | None]],
                 embedding_model: str = "packaged:all-MiniLM-L6-v2", embedding_device: str = "cpu") -> list[float]:
    """The ``kind`` similarity of each (generated, target) pair of dimension ``dim``, clipped to [0, 1]; 0 where
    either side is missing or empty. Embeddings are computed in one batch.

    >>> similarities("fabric", "vocabulary", [("Attic", "Athenian"), (None, "Athenian"), ("Corinthian", "Athenian")])
    [1.0, 0.0, 0.0]
    """
    present = [g is not None and t is not None and bool(g.strip()) for g, t in pairs]
    emb = {}
    if kind == "embedding" and any(present):
        emb = embedder(embedding_model, embedding_device)([x for (g, t), ok in zip(pairs, present) if ok for x in (g, t)])
    out = []
    for (g, t), ok in zip(pairs, present):
        if not ok:
            out.append(0.0)
            continue
        if kind == "embedding":
            s = float((emb[g] * emb[t]).sum())
        elif kind == "sequence":
            s = sequence_ratio(g, t)
        elif kind == "vocabulary":
            s = vocabulary_similarity(dim, g, t)
        elif kind == "year_iou":
            s = year_iou(g, t)
        else:
            raise ValueError(f"unknown similarity {kind!r}; use one of {list(SIMILARITIES)}")
        out.append(max(0.0, min(1.0, s)))
    return out
