"""Markdown tables, written one way: every report, results file and docs page vase writes builds its tables here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


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
