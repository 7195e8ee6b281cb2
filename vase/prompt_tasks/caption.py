"""The caption task: describe the vase (its record's own instruction where the dataset gives one)."""

from __future__ import annotations

from typing import Any

from vase.prompt_tasks.base import ChatSample, fields_of
from vase.prompts import CAPTION_PROMPT


def samples(example: Any, ctx: str) -> list[ChatSample]:
    """One sample: the caption, rewarded against all six dimensions."""
    rec = example.record
    return [ChatSample(rec.id, example.images, ctx + (rec.prompt or CAPTION_PROMPT), rec.caption, target=fields_of(rec))]
