"""Six-dimension vocabulary, dating parser, captions and QA pairs."""

from vase.annotate.records import (
    VaseRecord,
    annotate,
    make_caption,
    make_qa,
    parse_raw_metadata,
    raw_metadata,
)
from vase.annotate.vocab import DIMENSIONS, QUESTIONS, VOCABULARY, canonical, dating_iou, format_dating, parse_dating

__all__ = [
    "DIMENSIONS",
    "QUESTIONS",
    "VOCABULARY",
    "VaseRecord",
    "annotate",
    "canonical",
    "dating_iou",
    "format_dating",
    "make_caption",
    "make_qa",
    "parse_dating",
    "parse_raw_metadata",
    "raw_metadata",
]
