"""What CI runs and what git keeps: .ci/run's parts and their times, and caches and venvs left out of git."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT


def test_ci_runs_lint_the_default_suite_and_the_slow_suite_and_says_what_each_took(tmp_path: Path) -> None:
    """A README command that rots is caught by make test; what only the slow suite exercises (the curation end to end,
    sweeps, the learning check) is caught because CI runs it too, stopping at the first failure. .ci/run is run here
    with a stand-in ``make`` first on PATH: the parts in order, each one's seconds printed, and on a failure the parts
    so far and a non-zero exit."""
    calls = tmp_path / "calls"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "make").write_text(f'#!/bin/sh\necho "$1" >> {calls}\n[ "$1" = "$FAIL_AT" ] && exit 3\nexit 0\n')
    (fake / "make").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    ok = subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True, timeout=60,
                        env={**env, "FAIL_AT": ""})
    assert ok.returncode == 0, ok.stderr
    assert calls.read_text().split() == ["setup", "lint", "docs", "test", "test-slow"]
    for part in ("setup", "lint", "docs", "test", "test-slow"):
        assert re.search(rf"^=== CI part: {part} took \d+ s$", ok.stdout, re.M), ok.stdout
    assert re.search(r"^CI parts: setup=\d+s lint=\d+s docs=\d+s test=\d+s test-slow=\d+s; total \d+ s \(exit 0\)$",
                     ok.stdout, re.M), ok.stdout
    calls.unlink()
    bad = subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True, timeout=60,
                         env={**env, "FAIL_AT": "test"})
    assert bad.returncode == 3 and calls.read_text().split() == ["setup", "lint", "docs", "test"]
    assert re.search(r"^CI parts: setup=\d+s lint=\d+s docs=\d+s; total \d+ s \(exit 3\)$", bad.stdout, re.M)
    make = (ROOT / "Makefile").read_text()
    assert '-m pytest -m "not slow"' in make and "-m pytest -m slow" in make  # pytest exits 5 when nothing ran


def test_a_venv_or_cache_that_is_a_symlink_stays_out_of_git(tmp_path: Path) -> None:
    """.gitignore's /.venv/ matched only a folder: a .venv symlink (to a shared environment) showed as a new file."""
    import shutil

    repo = tmp_path / "clone"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    target = tmp_path / "elsewhere"
    target.mkdir()
    for name in (".venv", ".cache", "logs"):
        (repo / name).symlink_to(target, target_is_directory=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout.split()
    assert status == ["??", ".gitignore"], status


def test_setup_on_a_full_disk_says_so_before_pip_starts(tmp_path: Path) -> None:
    """CI once failed 106 s into setup with pip's "OSError: [Errno 28] No space left on device": a new venv needs about
    7 GB. make setup now measures the checkout's and the temporary folder's free space first and names both the folder
    and the remedy; nothing is created when it refuses."""
    import shutil

    for name in ("Makefile", "setup.cfg", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    run = subprocess.run(["make", ".venv/.vase-installed", "NEED_GB=1000000", "PYTHON=false"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert f"setup needs about 1000000 GB free for the venv and pip's unpacking; {tmp_path} has" in run.stderr
    assert "pip cache purge" in run.stderr and not (tmp_path / ".venv").exists()
