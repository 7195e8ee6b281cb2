"""The question-answering task: the six "What is the <dimension> of the vase?" pairs, each answered with a short
phrase ("Kylix."), each rewarded on its own dimension alone."""

from __future__ import annotations

from typing import Any

from vase.tasks.base import ChatSample, fields_of, only


def samples(example: Any, ctx: str) -> list[ChatSample]:
    rec = example.record
    fields = fields_of(rec)
    return [ChatSample(f"{rec.id}#{q['dimension']}", example.images, ctx + q["question"], q["answer"], q["dimension"],
                       target=only(fields, q["dimension"])) for q in rec.qa]
