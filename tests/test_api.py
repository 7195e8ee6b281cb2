"""vase's public API (vase.api) is kept: a snapshot of every public name's signature (tests/api_snapshot.json) and a
test that fails when a name disappears or its signature changes without a CHANGELOG line naming it under
``## [Unreleased]`` (then the snapshot is written again: ``python -m vase.api > tests/api_snapshot.json``)."""

from __future__ import annotations

import json
import re

from tests.conftest import ROOT, run_python

SNAPSHOT = ROOT / "tests" / "api_snapshot.json"


def _unreleased() -> str:
    text = (ROOT / "CHANGELOG.md").read_text()
    return re.split(r"(?m)^## \[", text.split("## [Unreleased]", 1)[1])[0]


def changed_without_a_line(kept: dict, now: dict, unreleased: str) -> list[str]:
    """Each public name kept in the snapshot that is gone or other now, and that the CHANGELOG's unreleased section
    does not name (in backticks)."""
    out = []
    for name, was in sorted(kept.items()):
        if name not in now:
            why = "gone"
        elif now[name] != was:
            why = "changed"
        else:
            continue
        if f"`{name}`" not in unreleased and f".{name}`" not in unreleased:
            out.append(f"{name} {why}")
    return out


def test_every_public_name_is_kept_or_its_change_is_in_the_changelog() -> None:
    from vase.api import snapshot

    kept, now = json.loads(SNAPSHOT.read_text()), snapshot()
    unexplained = changed_without_a_line(kept, now, _unreleased())
    assert not unexplained, (f"{unexplained}: a public name changed (vase.api); say it in CHANGELOG.md under "
                             f"[Unreleased] (with the version that drops the old form) and run python -m vase.api > "
                             f"tests/api_snapshot.json")
    assert set(now) == set(kept), f"new public names {sorted(set(now) - set(kept))}: python -m vase.api > {SNAPSHOT}"


def test_the_check_finds_a_change_and_a_changelog_line_allows_it() -> None:
    kept = {"RewardTerm": {"kind": "class", "signature": "(weight: float = 1.0)"}, "validate": {"kind": "function"}}
    now = {"RewardTerm": {"kind": "class", "signature": "(weight: float = 1.0, name: str = '')"}}
    assert changed_without_a_line(kept, now, "") == ["RewardTerm changed", "validate gone"]
    assert changed_without_a_line(kept, now, "- `RewardTerm` takes `name`; `vase.api.validate` moved") == []


def test_the_public_page_lists_every_public_name() -> None:
    from vase.api import TESTING, __all__

    page = (ROOT / "docs" / "api" / "public.md").read_text()
    missing = [name for name in [*__all__, *TESTING] if f"`{name}" not in page]
    assert not missing, missing
    p = run_python(["-m", "vase.api"], cwd=ROOT, timeout=300)
    assert p.returncode == 0 and json.loads(p.stdout) == json.loads(SNAPSHOT.read_text())
