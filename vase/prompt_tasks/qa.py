"""The question-answering task: the six "What is the <dimension> of the vase?" pairs, each answered with a short
phrase ("Kylix."), each rewarded on its own dimension alone, and judged in evaluation (`OPEN`) by the reward's
similarity on that dimension at the threshold tau."""

from __future__ import annotations

from typing import Any

from vase.annotate.vocab import DIMENSIONS, QUESTIONS
from vase.prompt_tasks.base import ChatSample, EvalProtocol, Similarity, asked_context, fields_of, only


def samples(example: Any, ctx: str) -> list[ChatSample]:
    rec = example.record
    fields = fields_of(rec)
    # a free-form question (dimension "other", from an ms-swift chat or a release's QA file) is numbered: a vase
    # may have several
    return [ChatSample(f"{rec.id}#{q['dimension']}" + ("" if q["dimension"] in DIMENSIONS else str(k)),
                       example.images, asked_context(example, ctx, q["dimension"]) + q["question"], q["answer"],
                       q["dimension"],
                       target=only(fields, q["dimension"])) for k, q in enumerate(rec.qa)]


def open_question(rec: Any, dim: str, num_choices: int = 4) -> tuple[str, str, dict[str, Any]]:
    """The open question about ``dim`` and the record's own answer (``num_choices`` is unused: no options)."""
    return QUESTIONS[dim], rec.dimension_text(dim), {}


def open_correct(row: dict[str, Any], similarity: Similarity, tau: float) -> bool:
    """An open answer is right when its similarity to the reference on the question's dimension reaches ``tau``."""
    return similarity(row["dimension"], row["caption"].strip().rstrip("."), row["reference"].rstrip(".")) >= tau


OPEN = EvalProtocol("open", open_question, judge=open_correct)
