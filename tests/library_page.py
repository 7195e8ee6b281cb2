"""docs/library.md's example project as a reader copies it: each code block under a line naming its file
(```conf/sweep/my_lr.yaml`:``), the block's text taken as it stands (the page once opened each block with a
``# <path>`` line, which put ``# @package _global_`` on line 2, where Hydra does not read it: a copy failed), and the
page's commands, each one line of a ``bash`` block."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "library.md"


def project_files() -> dict[str, str]:
    """The example's files by their path in the project, each its block's text."""
    return dict(re.findall(r"^`([\w./]+\.(?:py|yaml|jsonl))`:\n\n```(?:python|yaml|json)\n(.*?)```", PAGE.read_text(),
                           flags=re.S | re.M))


def build_project(project: Path) -> Path:
    """The example's files written into ``project`` (an empty folder, made here)."""
    for name, text in project_files().items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    return project


def page_command(start: str) -> list[str]:
    """The page's command line that starts with ``start``, split as a shell splits it (no comment)."""
    line = next(ln for ln in PAGE.read_text().splitlines() if ln.startswith(start))
    return line.split("#")[0].split()
