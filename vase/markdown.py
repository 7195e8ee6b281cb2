"""Markdown written one way: every report, results file and docs page vase writes builds its tables here, and puts a
user's own words (a hypothesis's label) into a page through `text`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_MARKUP = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def text(words: Any) -> str:
    """A user's words (a label from a sweep file) as Markdown that shows them as written: every character Markdown
    reads as markup is escaped, so a link, an image or emphasis in them is shown, never followed; the words on one
    line. (A tag's ``<`` is `vase.io.inert_markdown`'s, which every page vase writes goes through.)

    >>> print(text("retrieval [click](https://x.y/a_b) *bold*"))
    retrieval \\[click\\]\\(https://x.y/a\\_b\\) \\*bold\\*
    """
    return _MARKUP.sub(r"\\\1", " ".join(str(words).split()))


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]] = (), align: str = "") -> list[str]:
    """The lines of a Markdown table: the header, its rule, a line per row (each cell as ``str`` gives it).

    ``align``: a letter per column, ``l`` (left, also for columns past its end) or ``r`` (right: numbers). A row with
    fewer cells than the header is not padded: what is given is written.

    >>> table(["model", "n"], [["a", 3]], align="lr")
    ['| model | n |', '|---|---:|', '| a | 3 |']
    """
    rule = "".join("---:|" if align[i:i + 1] == "r" else "---|" for i in range(len(header)))
    return [row(header), "|" + rule, *(row(r) for r in rows)]


def row(cells: Sequence[Any]) -> str:
    """One table line: ``| a | b |`` (an empty cell as ``| |``).

    >>> row(["a", 1.5, ""])
    '| a | 1.5 | |'
    """
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def table_text(header: Sequence[Any], rows: Iterable[Sequence[Any]] = (), align: str = "") -> str:
    """`table` as text, each line ended by a newline."""
    return "\n".join(table(header, rows, align)) + "\n"
