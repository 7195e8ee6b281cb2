"""Reading a run or sweep folder never runs code the folder names: a run folder received from someone else (a shared
result, an archive) holds a record whose project's ``conf/plugins.yaml`` lists modules that sit beside it. Every
reader reads it as data; the project's modules are imported only from the project the user names now
(``--config-dir``) or with ``--import-plugins``."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_python
from vase.cli.project import runs_main
from vase.reports import search_confirm, sweep_summary, verdict
from vase.runs import describe

PROBE = "vase_archive_probe"


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A received archive: a project's conf (its plugins.yaml lists a module that writes a mark file when imported,
    next to it), one run and one sweep of it, their records pointing at that conf; the mark's path in ``mark``."""
    root = tmp_path / "archive"
    conf = root / "conf"
    conf.mkdir(parents=True)
    mark = tmp_path / "imported.txt"
    (root / f"{PROBE}.py").write_text(f"from pathlib import Path\nPath({str(mark)!r}).write_text('ran')\n")
    (conf / "plugins.yaml").write_text(f"modules: [{PROBE}]\n")
    # its record names folders to make too: a resolver of vase's that makes and claims the folder it names
    made = tmp_path / "made"
    hydra = {"job": {"name": "train"}, "runtime": {"cwd": f"${{vase.run_dir:{made},never}}", "config_sources": [
        {"path": str(conf), "schema": "file", "provider": "main"}]}, "overrides": {"task": ["seed=1,2"]}}
    run = root / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    (run / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    (run / ".vase-run.json").write_text(json.dumps({"status": "finished", "overrides": ["seed=1"], "started": 1.0}))
    sweep = root / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    (sweep / ".vase-run.json").write_text(json.dumps({"status": "finished", "overrides": ["seed=1,2"]}))
    for n, seed in enumerate((1, 2)):
        job = sweep / str(n)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n")
        (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "hypothesis": {
            "compare": "seed", "baseline": 1, "moves": ["loss"], "replicates": [], "report": "probe_kind"}}))
        (job / ".vase-run.json").write_text(json.dumps({"status": "finished", "overrides": [f"seed={seed}"]}))
    monkeypatch.chdir(tmp_path)  # the user's own folder: not the archive's
    monkeypatch.setattr(sys, "path", list(sys.path))
    return {"root": root, "conf": conf, "run": run, "sweep": sweep, "mark": mark, "made": made}


def _quiet(fn, *args) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = fn(*args)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue() + err.getvalue()


def test_no_reader_imports_what_a_received_folder_names(archive: dict[str, Path]) -> None:
    """vase runs (one run, one sweep, the folder of them), vase verdict, python -m vase.runs, python -m
    vase.reports.sweep_summary and search_confirm: each reads the archive, none imports its module or makes a folder
    it names."""
    run, sweep = str(archive["run"]), str(archive["sweep"])
    rc, said = _quiet(runs_main, [run])
    assert rc == 0 and f"  plugins:   {PROBE} (listed by {archive['conf'] / 'plugins.yaml'}): not imported" in said, said
    assert "--import-plugins" in said and "--config-dir conf" in said
    for reader, args in ((runs_main, [sweep]), (runs_main, [str(archive["root"])]), (describe.main, [run]),
                         (verdict.main, [sweep]), (sweep_summary._main, [sweep]), (search_confirm.main, [sweep])):
        rc, said = _quiet(reader, args)
        assert not archive["mark"].exists() and not archive["made"].exists(), (reader, said)
        assert PROBE not in sys.modules, reader
    rc, said = _quiet(verdict.main, [sweep])
    # the hypothesis's report kind is the project's: one line naming it, and how to import the project's modules
    assert rc == 2 and "'probe_kind' is no report kind" in said and f"lists {PROBE}" in said, said
    assert said.count("\n") == 1 and "--import-plugins" in said
    for job in archive["sweep"].glob("[0-9]"):  # a field of the hypothesis names a folder to make: refused, not made
        config = yaml.safe_load((job / ".hydra" / "config.yaml").read_text())
        config["hypothesis"]["label"] = f"${{vase.run_dir:{archive['made']},never}}"
        (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    rc, said = _quiet(verdict.main, [sweep])
    assert rc == 2 and said.count("\n") == 1 and "reading a run makes none" in said and not archive["made"].exists()


def test_the_cli_readers_import_nothing_and_import_plugins_says_so(archive: dict[str, Path]) -> None:
    """The installed command (``vase runs``, ``vase verdict``, ``python -m vase.reports.verdict``, the old ``vase
    question``) in a process of its own; then ``--import-plugins``, the user's explicit word, imports the record's project's module."""
    env = {**os.environ}
    env.pop("VASE_CHECK_CONFIG", None)
    for args in (["-m", "vase.cli", "runs", str(archive["run"])], ["-m", "vase.cli", "verdict", str(archive["sweep"])],
                 ["-m", "vase.reports.verdict", str(archive["sweep"])], ["-m", "vase.cli", "question", str(archive["sweep"])]):
        p = run_python([*args], cwd=archive["root"].parent, env=env, timeout=300)
        assert p.returncode in (0, 2) and "Traceback" not in p.stderr, p.stderr[-2000:]
        assert not archive["mark"].exists(), args
    p = run_python(["-m", "vase.cli", "runs", "--import-plugins", str(archive["run"])], cwd=archive["root"].parent,
                   env=env, timeout=300)
    assert p.returncode == 0 and f"  plugins:   {PROBE}: each imports now (from " in p.stdout, p.stdout + p.stderr
    assert archive["mark"].read_text() == "ran"


def test_the_project_named_now_is_the_one_imported(archive: dict[str, Path], tmp_path: Path) -> None:
    """``--config-dir`` names the user's own project: its plugins.yaml is the one imported (from the folder run in),
    and the run's listed module, which it does not list, is said and left alone."""
    mine = tmp_path / "mine"
    (mine / "conf").mkdir(parents=True)
    (mine / "mine_ext.py").write_text("LOADED = True\n")
    (mine / "conf" / "plugins.yaml").write_text("modules: [mine_ext]\n")
    os.chdir(mine)
    rc, said = _quiet(runs_main, ["--config-dir", "conf", str(archive["run"])])
    assert rc == 0 and "  plugins:   mine_ext: each imports now (from " in said, said
    assert f"its project listed {PROBE}, which " in said and not archive["mark"].exists()
    sys.modules.pop("mine_ext", None)
