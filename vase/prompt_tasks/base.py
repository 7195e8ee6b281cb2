"""What every prompt task shares: the chat sample, the targets an answer is rewarded against, and the way a task asks
and judges a held-out question (`EvalProtocol`). This package's base; ``vase.reconstruct.base`` is the reconstruction
generators'."""

from __future__ import annotations

from collections.abc import Callable
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
    system: str = ""  # the dataset's system prompt ("": the chat template's default)


def fields_of(rec: Any) -> dict[str, Any]:
    """A record's six dimensions as reward targets (dating as [start, end])."""
    return {d: (list(rec.dating) if d == "dating" and rec.dating is not None else getattr(rec, d)) for d in DIMENSIONS}


def only(fields: dict[str, Any], dim: str) -> dict[str, Any]:
    """The reward target of an answer that states one dimension: the others are not expected of it."""
    return {d: (v if d == dim else None) for d, v in fields.items()}


def asked_context(example: Any, ctx: str, dim: str) -> str:
    """The retrieved context of a question about ``dim``: only that dimension's neighbour values with
    ``retrieval.format=asked`` (the example's ``asked``), else the vase's whole ``ctx``."""
    asked = getattr(example, "asked", None) or {}
    return asked.get(dim, ctx)


def none_of(fields: dict[str, Any]) -> dict[str, Any]:
    """A target that expects no dimension (an answer that is a letter, a tool call, parameters)."""
    return {d: None for d in fields}


Similarity = Callable[[str, str, str], float]
"""``(dimension, answer, reference) -> similarity in [0, 1]`` (the reward's ``dimension_similarity``)."""


@dataclass(frozen=True)
class EvalProtocol:
    """How a task asks a held-out question about one dimension and judges the answer.

    ``question(record, dimension, num_choices)`` gives the prompt (after the vase's context), the reference answer and
    what judging needs (options, the answer's index). An open protocol has ``judge(row, similarity, tau)``; a choice
    protocol has ``pick(row)``, the option an answered row chose (``None``: it named none).
    """

    name: str
    question: Callable[[Any, str, int], tuple[str, str, dict[str, Any]]]
    judge: Callable[[dict[str, Any], Similarity, float], bool] | None = None
    pick: Callable[[dict[str, Any]], int | None] | None = None

    @property
    def choice(self) -> bool:
        """Whether answers pick one of a question's options (so chance and unparsed answers apply)."""
        return self.pick is not None

    def correct(self, row: dict[str, Any], similarity: Similarity, tau: float) -> tuple[bool, bool]:
        """Whether an answered row is right, and whether it named no option (always ``False`` for open answers)."""
        if self.pick is not None:
            chosen = self.pick(row)
            return chosen == row["answer_index"], chosen is None
        assert self.judge is not None, f"protocol {self.name!r} has neither judge nor pick"
        return bool(self.judge(row, similarity, tau)), False
