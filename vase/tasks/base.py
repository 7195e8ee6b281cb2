"""What every task's samples share: the chat sample, and the targets an answer is rewarded against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vase.annotate.vocab import DIMENSIONS


@dataclass
class ChatSample:
    """One conversation turn: the images, the user's question and (for training) the answer."""

    id: str
    images: list[Any]
    prompt: str
    answer: str
    dimension: str = "caption"
    target: dict[str, Any] | None = None  # the six dimensions the answer should state (for rewards)


def fields_of(rec: Any) -> dict[str, Any]:
    """A record's six dimensions as reward targets (dating as [start, end])."""
    return {d: (list(rec.dating) if d == "dating" and rec.dating is not None else getattr(rec, d)) for d in DIMENSIONS}


def only(fields: dict[str, Any], dim: str) -> dict[str, Any]:
    """The reward target of an answer that states one dimension: the others are not expected of it."""
    return {d: (v if d == dim else None) for d, v in fields.items()}


def none_of(fields: dict[str, Any]) -> dict[str, Any]:
    """A target that expects no dimension (an answer that is a letter, a tool call, parameters)."""
    return {d: None for d in fields}
