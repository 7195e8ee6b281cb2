"""Caption metrics (torchmetrics): CLIP text score, sentence-embedding FID, R@k, lexical Jaccard, overall score.

The names below load ``vase.metrics.caption_metrics`` (and torchmetrics) on first use, so that the reward's sentence encoder
(``vase.metrics.encoders``) imports where torchmetrics is not installed (ms-swift's virtualenv).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "PAPER_OVERALL_WEIGHTS",
    "TABLE_COLUMNS",
    "CLIPTextScore",
    "CaptionScorer",
    "LexicalJaccard",
    "RecallAtK",
    "SentenceFID",
    "frechet_distance",
    "jaccard",
    "overall_score",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("vase.metrics.caption_metrics"), name)
    raise AttributeError(f"module 'vase.metrics' has no attribute {name!r}")
