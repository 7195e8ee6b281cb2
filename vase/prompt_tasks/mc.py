"""The multiple-choice task: each question with four options (the answer and three distractors drawn from the
dimension's vocabulary, the same every run), answered with the option's letter (``data.mix=all`` teaches it).

Evaluation asks it two ways: `LETTER` (the model writes the letter) and `LIKELIHOOD` (the open question;
each option scored by its likelihood as the answer, so no generation and no answer-format luck)."""

from __future__ import annotations

import re
from typing import Any

from vase.annotate.multiple_choice import LETTERS, mc_options, mc_prompt
from vase.annotate.records import answer_phrase
from vase.annotate.vocab import DIMENSIONS, QUESTIONS, sequence_ratio
from vase.prompt_tasks.base import ChatSample, EvalProtocol, asked_context, fields_of, none_of


def question(rec: Any, dim: str, text: str, n: int = 4) -> tuple[str, list[str], int]:
    """The question ``text`` about ``dim`` as multiple choice: its prompt (options listed with letters), the options
    and the answer's index."""
    options, answer = mc_options(rec, dim, n)
    return mc_prompt(text, options), options, answer


def as_answers(options: list[str]) -> list[str]:
    """The options in the form an open answer takes ("Kylix."), for scoring each by its likelihood as the answer."""
    return [answer_phrase(o) for o in options]


def parse_choice(answer: str, options: list[str]) -> int | None:
    """The option an answer picks: a leading letter ("B", "(B)", "B. Athenian"), else the option it best spells."""
    m = re.match(r"^\s*\(?([A-H])\)?(?:[.):\s]|$)", answer)
    if m and LETTERS.index(m.group(1)) < len(options):
        return LETTERS.index(m.group(1))
    text = answer.strip().lower()
    if not text:
        return None
    scores = [sequence_ratio(text, o) for o in options]
    best = max(range(len(scores)), key=scores.__getitem__)
    return best if scores[best] >= 0.6 else None


def samples(example: Any, ctx: str) -> list[ChatSample]:
    rec = example.record
    out = []
    for q in rec.qa:
        if q["dimension"] not in DIMENSIONS:
            continue  # a free-form question (an ms-swift chat's): no options to draw for it
        prompt, _, answer = question(rec, q["dimension"], q["question"])
        out.append(ChatSample(f"{rec.id}#mc#{q['dimension']}", example.images,
                              asked_context(example, ctx, q["dimension"]) + prompt, LETTERS[answer],
                              q["dimension"], target=none_of(fields_of(rec))))
    return out


def letter_question(rec: Any, dim: str, num_choices: int = 4) -> tuple[str, str, dict[str, Any]]:
    """The question with lettered options; the reference is the answer's letter."""
    prompt, options, answer = question(rec, dim, QUESTIONS[dim], num_choices)
    return prompt, LETTERS[answer], {"options": options, "answer_index": answer}


def likelihood_question(rec: Any, dim: str, num_choices: int = 4) -> tuple[str, str, dict[str, Any]]:
    """The open question; the options in the form SFT teaches ("Kylix."), each to be scored as the answer."""
    _, options, answer = question(rec, dim, QUESTIONS[dim], num_choices)
    answers = as_answers(options)
    return QUESTIONS[dim], answers[answer], {"options": answers, "answer_index": answer}


LETTER = EvalProtocol("mc", letter_question, pick=lambda row: parse_choice(row["caption"], row["options"]))
LIKELIHOOD = EvalProtocol("ll", likelihood_question, pick=lambda row: row["pick"])
