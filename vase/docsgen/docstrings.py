"""How the API pages render docstrings: a Griffe extension (mkdocs.yml loads it) that fences every doctest block
outside an ``Examples:`` section as Python console code, so ``>>>`` lines show as code, not as nested quotes."""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

_SECTION = re.compile(r"^(\s*)(Examples?|Args|Arguments|Returns|Raises|Yields|Attributes|Note|Notes|Warning|Warns):\s*$")


def fence_doctests(text: str) -> str:
    """Wrap each run of doctest lines (``>>>``, ``...`` and the output below them, up to a blank line) in a
    ``pycon`` fence, except inside an ``Examples:`` section, which the Google style parser renders as code already.

    >>> fence_doctests("Adds.\\n\\n>>> 1 + 1\\n2\\n\\nDone.").splitlines()
    ['Adds.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'Done.']
    """
    out: list[str] = []
    lines = text.split("\n")
    examples_at: int | None = None  # the indentation of an open Examples: section
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        head = _SECTION.match(line)
        if head:
            examples_at = indent if head.group(2).startswith("Example") else None
        elif examples_at is not None and line.strip() and indent <= examples_at:
            examples_at = None
        if examples_at is None and line.lstrip().startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            pad = " " * indent
            out += [f"{pad}```pycon", *[pad + b for b in block], f"{pad}```"]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DoctestBlocks(Extension):
    """Fences the doctest blocks of every docstring Griffe collects (`fence_doctests`)."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
