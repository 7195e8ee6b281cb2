"""Where a run cannot write, the user gets one line naming the path and what to do, and nothing half-written: a
read-only log folder (105 lines once, opening with Hydra's "An error occurred during Hydra's exception formatting")
and a full disk (70 lines of Errno 28 naming no path, and a 0-byte generations file left behind). Each runs in a
mount namespace: a read-only bind mount, a 20 KiB tmpfs (refused before Hydra writes), a 1.2 MiB one that fills
mid-run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _in_namespace(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare for a mount namespace")
    p = subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WANDB_MODE": "disabled"})
    if "unshare failed" in p.stderr or "mount: " in p.stderr:
        pytest.skip(f"this machine refuses a mount namespace: {p.stderr.strip()[-200:]}")
    return p


def test_a_read_only_log_folder_is_one_line_before_anything_runs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    p = _in_namespace(f"mount --bind -o ro {logs} {logs} && {sys.executable} train.py paths.log_dir={logs} "
                      f"logger=none", tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip() == (f"config error: paths.log_dir={logs}: vase cannot write there (Read-only file system);"
                                f" choose a folder you can write (paths.log_dir=...)")


def test_a_full_disk_is_one_line_before_hydra_writes_there(tmp_path: Path, session_dirs: dict) -> None:
    """A log folder on a disk with 20 KiB free: refused before Hydra writes its config files there (Hydra's own
    failure to write them is a multi-line report), naming the folder and what is free."""
    full = tmp_path / "full"
    full.mkdir()
    p = _in_namespace(f"mount -t tmpfs -o size=20k tmpfs {full} && {sys.executable} evaluate.py logger=none "
                      f"paths.log_dir={full}/logs paths.cache_dir={session_dirs['cache']}; rc=$?; "
                      f"find {full} -type f -name '*.json*' -size -1; exit $rc", tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    assert p.stderr.strip().splitlines() == [
        f"error: no space left on the device writing {full}/logs: 20 KiB free, a run needs at least 1 MiB; free space "
        f"there, or write elsewhere (paths.log_dir=..., paths.cache_dir=...)"], p.stderr[-2000:]
    assert not p.stdout.strip(), p.stdout  # no empty results file, no run folder


def test_a_disk_that_fills_mid_run_is_one_line_naming_the_file_and_leaves_no_empty_results(tmp_path: Path) -> None:
    """Room enough to start (1.2 MiB), not to build the cache there: the write that fails is named in one line."""
    full = tmp_path / "full"
    full.mkdir()
    p = _in_namespace(f"mount -t tmpfs -o size=1200k tmpfs {full} && {sys.executable} evaluate.py logger=none "
                      f"paths.log_dir={full}/logs paths.cache_dir={full}/cache data.synthetic.num_vases=8 "
                      f"render.resolution=64 model=tiny; rc=$?; "
                      f"find {full} -type f -name '*.json*' -size -1; exit $rc", tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: no space left on the device writing {full}/"), p.stderr[-2000:]
    assert last.endswith(": free space there, or write elsewhere (paths.log_dir=..., paths.cache_dir=...)")
    assert "Errno 28" not in p.stderr and "Traceback" not in p.stderr
    assert not [ln for ln in p.stdout.splitlines() if ln.startswith(str(full))], p.stdout  # no empty results file
