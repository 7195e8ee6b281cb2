"""``vase.reports.question`` is `vase.reports.verdict` since vase 0.2 (a sweep's ``question:`` block is its
``hypothesis:``, its ``question.md`` is ``verdict.md``): this module, its old names and ``python -m
vase.reports.question`` work until vase 0.3, with a FutureWarning naming the new ones."""

from __future__ import annotations

import sys
import warnings

from vase.config.renames import deprecation
from vase.reports import verdict

RENAMED_NAMES = {"question_of": "hypothesis_of", "question": "hypothesis", "check_question": "check_hypothesis",
                 "sweep_question": "sweep_hypothesis", "write_question_answer": "write_verdict",
                 "write_question_report": "write_verdict_report", "question_columns": "hypothesis_columns",
                 "answer_sweep": "decide_sweep", "answer_metrics": "verdict_metrics", "answer_text": "verdict_text",
                 "short_answer": "short_verdict", "joined_answer": "joined_verdict"}
"""Old name -> its name in `vase.reports.verdict`; every other name is the same there."""

warnings.warn(deprecation("vase.reports.question", "vase.reports.verdict"), FutureWarning, stacklevel=2)


def __getattr__(name: str) -> object:
    new = RENAMED_NAMES.get(name, name)
    if new != name:
        warnings.warn(deprecation(f"vase.reports.question.{name}", f"vase.reports.verdict.{new}"), FutureWarning,
                      stacklevel=2)
    try:
        return getattr(verdict, new)
    except AttributeError:
        raise AttributeError(f"module 'vase.reports.question' has no attribute {name!r}") from None


if __name__ == "__main__":
    sys.exit(verdict.main())
