"""Multiple-choice questions about a vase: the answer and distractors drawn deterministically from each dimension's
vocabulary (as CiQi-Bench does), and the prompt that lists them. Evaluation asks them (``vase.eval.vqa``) and SFT can
teach the format (``data.mix=all``); both build them here, so they can never disagree.
"""

from __future__ import annotations

import zlib

import numpy as np

from vase.annotate.records import VaseRecord
from vase.annotate.vocab import canonical, format_dating, terms

LETTERS = "ABCDEFGH"


def _rng(vase_id: str, dim: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"{vase_id}|{dim}".encode()))


def mc_options(rec: VaseRecord, dim: str, n: int = 4) -> tuple[list[str], int]:
    """``n`` options for one question (the answer and n-1 distractors) and the answer's index; the same every run."""
    if not 2 <= n <= len(LETTERS):
        raise ValueError(f"vqa.num_choices={n} must lie in [2, {len(LETTERS)}]")
    rng = _rng(rec.id, dim)
    answer = rec.dimension_text(dim)
    if dim == "dating":
        start, end = rec.dating
        shifts = [s for s in range(-200, 201, 25) if s != 0 and end + s < 0]
        picks = rng.choice(len(shifts), size=n - 1, replace=False)
        distractors = [format_dating(start + shifts[i], end + shifts[i]) for i in picks]
    else:
        pool = [t for t in terms(dim) if t != canonical(dim, answer)]
        picks = rng.choice(len(pool), size=min(n - 1, len(pool)), replace=False)
        distractors = [pool[i] for i in picks]
    options = [answer, *distractors]
    order = rng.permutation(len(options))
    options = [options[i] for i in order]
    return options, int(np.where(order == 0)[0][0])


def mc_prompt(question: str, options: list[str]) -> str:
    lines = [question, "Options:"] + [f"{LETTERS[i]}. {o}" for i, o in enumerate(options)]
    return "\n".join(lines + ["Answer with the letter of the correct option."])
