"""The multiple-choice task: each question with four options (the answer and three distractors drawn from the
dimension's vocabulary, the same every run), answered with the option's letter (``data.task=all`` teaches it)."""

from __future__ import annotations

from typing import Any

from vase.annotate.choices import LETTERS, mc_options, mc_prompt
from vase.tasks.base import ChatSample, fields_of, none_of


def samples(example: Any, ctx: str) -> list[ChatSample]:
    rec = example.record
    out = []
    for q in rec.qa:
        options, answer = mc_options(rec, q["dimension"])
        out.append(ChatSample(f"{rec.id}#mc#{q['dimension']}", example.images, ctx + mc_prompt(q["question"], options),
                              LETTERS[answer], q["dimension"], target=none_of(fields_of(rec))))
    return out
