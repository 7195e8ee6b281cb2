"""``--version``: vase's version (from ``vase.__version__``, the one place it is set) with the code that runs; ``vase
changelog``: what changed in each version."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import vase
from vase.errors import VaseError
from vase.provenance import code_label, code_stamp


def version_line() -> str:
    """``vase 0.2.0 (commit 3f2a9c1d0e, /path/to/vase)`` from a checkout; an installed wheel names the commit it was
    built from: ``(installed, built from commit 3f2a9c1d0e, ...)`` (``(installed, ...)`` where no build stamp is).

    >>> version_line().startswith(f"vase {vase.__version__} (")
    True
    """
    code = code_stamp()
    where = Path(vase.__file__).resolve().parent
    if code.get("installed"):
        changes = " with uncommitted changes" if code.get("dirty") else ""
        return f"vase {vase.__version__} (installed, built from commit {code['commit'][:10]}{changes}, {where})"
    return (f"vase {vase.__version__} ({'commit ' + code_label(code) if code.get('commit') else 'installed'}, "
            f"{where})")


def changelog_text(version: str | None = None) -> str:
    """The CHANGELOG: the installed package's copy (setup.py puts it beside the package), else the checkout's; with
    ``version``, that version's section alone.

    Raises:
        VaseError: no CHANGELOG where vase is installed (a package built without it), or no section for ``version``.
    """
    here = Path(vase.__file__).resolve().parent
    found = next((p for p in (here / "CHANGELOG.md", here.parent / "CHANGELOG.md") if p.is_file()), None)
    if found is None:
        raise VaseError(f"no CHANGELOG.md beside {here}: this vase was built without it; read it at "
                        f"https://github.com/vase-project/vase/blob/main/CHANGELOG.md")
    text = found.read_text()
    if version is None:
        return text
    sections = re.split(r"(?m)^(?=## \[)", text)
    chosen = [s for s in sections if s.startswith((f"## [{version}]", f"## [{version.lstrip('v')}]"))]
    if not chosen:
        listed = re.findall(r"(?m)^## \[([^\]]+)\]", text)
        raise VaseError(f"the CHANGELOG has no version {version}; it has {', '.join(listed)}")
    return chosen[0]


def changelog_main() -> int:
    """``vase changelog [VERSION]``: what changed in each version (or in one), and the rule for what bumps what."""
    ap = argparse.ArgumentParser(prog="vase changelog", description=changelog_main.__doc__.splitlines()[0])
    ap.add_argument("version", nargs="?", help="one version's section (e.g. 0.2.0)")
    a = ap.parse_args(sys.argv[1:])
    try:
        print(changelog_text(a.version), end="")
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
