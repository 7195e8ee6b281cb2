"""Caption metrics (torchmetrics): CLIP text score, sentence-embedding FID, R@k, lexical Jaccard, overall score."""

from vase.metrics.caption import (
    PAPER_OVERALL_WEIGHTS,
    TABLE_COLUMNS,
    CaptionScorer,
    CLIPTextScore,
    LexicalJaccard,
    RecallAtK,
    SentenceFID,
    frechet_distance,
    jaccard,
    overall_score,
)

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
