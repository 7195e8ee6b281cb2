"""The build of vase's wheel and sdist. Metadata lives in setup.cfg; this file adds what a build knows and an
installed package cannot learn again: the git commit it was built from (``vase/BUILD.json``, read by
``vase.provenance.code_stamp``, so ``vase --version`` and every run record name it) and the CHANGELOG (``vase/CHANGELOG.md``,
printed by ``vase changelog``); and the README as the package's description with its links made absolute (on PyPI a
relative ``docs/...`` link leads nowhere)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
REPO = "https://github.com/vase-project/vase"  # mkdocs.yml's repo_url
STAMP = "BUILD.json"


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def build_stamp() -> dict | None:
    """The commit this source is (a git checkout: its HEAD and whether its tree has changes), or the stamp a copy of
    the source carries (an sdist, or the copy vase's own wheel check builds from); None when neither is there."""
    top = _git("rev-parse", "--show-toplevel")
    if top and Path(top).resolve() == HERE:
        status = _git("status", "--porcelain", "--untracked-files=normal") or ""
        return {"commit": _git("rev-parse", "HEAD"), "dirty": bool(status.strip()), "built_from": "checkout"}
    carried = HERE / "vase" / STAMP
    return json.loads(carried.read_text()) if carried.is_file() else None


class BuildPy(build_py):
    """The package, and beside it the build stamp and the CHANGELOG."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "vase"
        stamp = build_stamp()
        if stamp is not None:
            (target / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        if (HERE / "CHANGELOG.md").is_file():
            shutil.copyfile(HERE / "CHANGELOG.md", target / "CHANGELOG.md")


class Sdist(sdist):
    """The source archive carries the build stamp, so a wheel built from it names the commit too."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        stamp = build_stamp()  # before the release tree is made: in the checkout, git counted it as a change
        super().make_release_tree(base_dir, files)
        if stamp is not None:
            (Path(base_dir) / "vase" / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")


def description() -> str:
    """README.md with every relative link pointing at the repository (``docs/x.md`` -> ``<repo>/blob/main/docs/x.md``)."""
    text = (HERE / "README.md").read_text()
    return re.sub(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)", lambda m: f"]({REPO}/blob/main/{m.group(1)})", text)


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist}, long_description=description(),
      long_description_content_type="text/markdown")
