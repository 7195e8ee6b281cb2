"""Run folders: a folder given on the command line is never a user's, a live one is held by one run, a refused
one keeps the files of the run that made it, and a killed build leaves nothing behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, one_line, run_cli, run_python
from tests.test_user_paths import tree_hash


def _record(run: Path) -> dict:
    return json.loads((run / ".vase-run.json").read_text())


def test_a_run_directory_given_on_the_command_line_must_not_be_a_users_folder(tmp_path: Path,
                                                                                session_dirs: dict) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    p = run_cli(["train.py", "logger=none", f"hydra.run.dir={mine}"], tmp_path, session_dirs)
    assert "hydra.run.dir=" in one_line(p) and "vase did not write" in p.stderr
    assert sorted(x.name for x in mine.iterdir()) == ["thesis.tex"]


def test_a_live_run_directory_cannot_be_claimed_twice(tmp_path: Path) -> None:
    from vase import runs

    d = tmp_path / "run"
    runs.claim(d)
    code = ("import sys; from vase import runs; from vase.errors import ConfigError\n"
            "try: runs.claim(sys.argv[1])\nexcept ConfigError as e: print(e); sys.exit(3)\n")
    p = run_python(["-c", code, str(d)], cwd=ROOT, timeout=60)
    assert p.returncode == 3 and "in use by another running process" in p.stdout
    runs.release(d)
    p = run_python(["-c", code, str(d)], cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stdout  # its holder gone (as a killed process is), an unfinished run may be taken up


def test_a_refused_run_directory_keeps_the_files_of_the_run_that_made_it(tmp_path: Path,
                                                                         session_dirs: dict) -> None:
    done = tmp_path / "finished"
    (done / ".hydra").mkdir(parents=True)
    for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
        (done / ".hydra" / name).write_text(f"the finished run's {name}\n")
    (done / "train.log").write_text("the finished run's log\n")
    (done / ".vase-run.json").write_text(json.dumps({"status": "finished", "key": "abc", "overrides": ["seed=1"]}))
    before = tree_hash(done)
    line = one_line(run_cli(["train.py", "logger=none", f"hydra.run.dir={done}"], tmp_path, session_dirs))
    assert "holds an earlier finished run" in line
    after = tree_hash(done)
    assert {k: v for k, v in after.items() if not k.endswith(".vase-run.lock")} == before


def test_a_given_run_folder_is_held_before_hydra_writes_there(tmp_path: Path) -> None:
    """Run B started while run A was still importing wrote its .hydra files into A's folder (A's .hydra then said
    r=8 while its adapter said r=4). Now the folder is held from the overrides' check, before Hydra writes."""
    from vase import runs
    from vase.config import CONF_DIR, preflight_overrides

    folder = tmp_path / "run"
    preflight_overrides([f"hydra.run.dir={folder}", "stage.module.lora.r=4"], CONF_DIR, "train")
    try:
        assert folder.resolve() in runs._held and _record(folder)["status"] == "running"
        assert not (folder / ".hydra").exists()
        p = run_python(["train.py", f"hydra.run.dir={folder}", "stage.module.lora.r=8", "logger=none"], cwd=ROOT,
                       timeout=300)
        assert p.returncode == 2 and "in use by another running process" in p.stderr, p.stderr[-2000:]
        assert not (folder / ".hydra").exists() and not (folder / "train.log").exists()
        assert _record(folder)["overrides"] == [f"hydra.run.dir={folder}", "stage.module.lora.r=4"]
    finally:
        runs.release(folder)


def test_a_killed_build_leaves_no_folder_for_ever(tmp_path: Path) -> None:
    from vase.io import _builder_tag, atomic_directory

    out = tmp_path / "models" / "tiny-x"
    code = ("import os, sys, time; from vase.io import atomic_directory\n"
            f"with atomic_directory({str(out)!r}) as tmp:\n    print(tmp, flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    stale = Path(child.stdout.readline().strip())
    live = tmp_path / "models" / f".tiny-x.{_builder_tag()}.live"  # a build in progress (this process): kept
    live.mkdir()
    foreign = tmp_path / "models" / ".tiny-x.b1-mine"  # not named by vase: never touched
    foreign.mkdir()
    assert stale.name.startswith(".tiny-x.b")
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert stale.is_dir()
    with atomic_directory(out) as tmp:
        (tmp / "a").write_text("x")
    assert not stale.exists() and live.is_dir() and foreign.is_dir()
    assert sorted(p.name for p in out.iterdir()) == [".vase-built", "a"]
