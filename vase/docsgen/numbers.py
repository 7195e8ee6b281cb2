"""A number the docs state on more than one page is one number: each such statement is marked with the id of what it
measures, the machine in the id (``<!-- vase:number dashboards-check-shape@amd-epyc-2-threads -->+19.6 [+14.2,
+25.0]<!-- /vase:number -->``; the comments do not render), and every statement of one id must say the same value.
Two runs that differ (another CPU, other threads, another commit) are two ids, and the pages say what differs.

    python -m vase.docsgen.numbers          # README.md and docs/: each id stated with different values, one line each

`make docs` runs it (and `make test`, through tests/test_docs.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"<!-- vase:number ([\w.@-]+) -->(.*?)<!-- /vase:number -->", re.S)


def pages(root: Path = ROOT) -> dict[str, str]:
    """README.md and every page under docs/, by path relative to ``root``."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return {str(p.relative_to(root)): p.read_text() for p in found if p.is_file()}


def stated(texts: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Each marked number's id -> (page, value) for every statement of it, the value's whitespace folded.

    >>> stated({"a.md": "x <!-- vase:number n@m -->+1.0 [+0.5,\\n +1.5]<!-- /vase:number --> y"})
    {'n@m': [('a.md', '+1.0 [+0.5, +1.5]')]}
    """
    out: dict[str, list[tuple[str, str]]] = {}
    for page, text in texts.items():
        for m in NUMBER.finditer(text):
            out.setdefault(m.group(1), []).append((page, " ".join(m.group(2).split())))
    return out


def conflicts(texts: dict[str, str]) -> list[str]:
    """One line for each id stated with different values, naming every page and value.

    >>> conflicts({"a.md": "<!-- vase:number n@m -->+1.0<!-- /vase:number -->",
    ...            "b.md": "<!-- vase:number n@m -->+1.2<!-- /vase:number -->"})
    ['n@m is stated as +1.0 (a.md) and +1.2 (b.md): one measurement is one number; a different run is another id, and the pages say what differs (machine, threads, commit)']
    """
    lines = []
    for number, where in sorted(stated(texts).items()):
        values = list(dict.fromkeys(v for _, v in where))
        if len(values) > 1:
            said = " and ".join(f"{v} ({', '.join(p for p, w in where if w == v)})" for v in values)
            lines.append(f"{number} is stated as {said}: one measurement is one number; a different run is another "
                         f"id, and the pages say what differs (machine, threads, commit)")
    return lines


def main() -> int:
    found = conflicts(pages())
    for line in found:
        print(f"error: {line}", file=sys.stderr)
    if not found:
        print(f"numbers: {len(stated(pages()))} marked numbers, each one value on every page")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
