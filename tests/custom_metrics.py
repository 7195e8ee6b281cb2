"""A caption metric as a user would write it in their own module (tests that vase takes it by name alone)."""

from __future__ import annotations

import numpy as np

from vase.metrics.registry import CaptionMetric


def _word_recall(preds: list[str], refs: list[str]) -> np.ndarray:
    """Each caption's share of its reference's distinct words."""
    return np.array([len(set(p.split()) & set(r.split())) / max(len(set(r.split())), 1) for p, r in zip(preds, refs)],
                    dtype=float)


RECALL = CaptionMetric("word_recall", "Recall", "the share of the reference's words the caption has", 66,
                       terms=_word_recall, default=False)
NOT_A_METRIC = 3
