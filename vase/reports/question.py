"""``vase.reports.question`` is `vase.reports.verdict` since vase 0.2 (a sweep's ``question:`` block is its
``hypothesis:``, its ``question.md`` is ``verdict.md``), whose names now live in the modules of its jobs
(`vase.reports.hypothesis`, `vase.reports.verdict_stats`, `vase.reports.verdict_view`, `vase.reports.verdict`): this
module, its old names (`vase.config.renames.RENAMED_API`) and ``python -m vase.reports.question`` work until vase 0.3,
with a FutureWarning naming each new one where it lives."""

from __future__ import annotations

import sys
import warnings

from vase.config.renames import MOVED_MODULES, deprecation, old_name
from vase.reports import hypothesis, verdict, verdict_stats, verdict_view

warnings.warn(deprecation(__name__, MOVED_MODULES[__name__]), FutureWarning, stacklevel=2)


def __getattr__(name: str) -> object:
    return old_name(__name__, {**vars(verdict_stats), **vars(hypothesis), **vars(verdict_view), **vars(verdict)}, name)


if __name__ == "__main__":
    sys.exit(verdict.main())
