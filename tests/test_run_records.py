"""Each run's record (.vase-run.json) says how it ended: finished, failed with its reason, or killed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _record(run: Path) -> dict:
    return json.loads((run / ".vase-run.json").read_text())


@pytest.mark.parametrize("argv,reason", [
    (["train.py", "retrieval.k=abc", "logger=none"], "retrieval.k='abc' must be a whole number"),
    (["evaluate.py", "task=score", "generated=/nonexistent/g.json", "ground_truth=/nonexistent/t.json",
      "logger=none"], "file not found"),
    (["-m", "vase.filter", "filter.min_side=abc", "filter.input=."], "filter.min_side"),
    (["-m", "vase.reconstruct", "reconstruct.generator.rows=abc", "input=."], "reconstruct.generator.rows='abc'"),
    (["-m", "vase.retrieval", "retrieval.k=abc"], "retrieval.k='abc'"),
])
def test_every_entry_point_records_its_failure_with_the_reason(argv: list[str], reason: str, tmp_path: Path) -> None:
    """Before, each of these left its run "running" (a traceback, or the wrong key named)."""
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, *argv, f"hydra.run.dir={run}", f"paths.cache_dir={tmp_path / 'cache'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    rec = _record(run)
    assert rec["status"] == "failed" and reason in rec["reason"], rec


def test_a_finished_evaluation_says_so_and_a_killed_run_is_reported_killed(tmp_path: Path) -> None:
    from vase.runs import list_runs, main

    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps([{"images": ["u_1_ac001001.jpg"], "caption": "An Attic amphora."},
                              {"images": ["u_2_ac001001.jpg"], "caption": "A Corinthian aryballos."}]))
    run = tmp_path / "logs" / "score"
    p = subprocess.run([sys.executable, "evaluate.py", "task=score", f"generated={gt}", f"ground_truth={gt}",
                        "metrics=hf_tiny", "logger=none", f"output={tmp_path / 'out.json'}", f"hydra.run.dir={run}",
                        f"paths.cache_dir={tmp_path / 'cache'}"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert _record(run)["status"] == "finished"  # evaluate.py's runs stayed "running" for ever
    # a process that holds its run and is killed outright: its record still says running, readers say killed
    held = tmp_path / "logs" / "held"
    code = (f"from vase.runs import claim; claim({str(held)!r}, 'auto', overrides=[]); "
            "import sys, time; print('held', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    assert {r["run"]: r["status"] for r in list_runs(tmp_path / "logs")}[str(held)] == "running"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert _record(held)["status"] == "running"
    assert {r["run"]: r["status"] for r in list_runs(tmp_path / "logs")} == {str(run): "finished", str(held): "killed"}
    assert main([str(tmp_path / "logs")]) == 0


def test_run_entry_marks_an_unexpected_exception_and_an_interruption(tmp_path: Path, monkeypatch) -> None:
    import vase.config.entry as config
    from vase import runs
    from vase.errors import Interrupted

    run = runs.claim(tmp_path / "r", "auto", overrides=[])
    monkeypatch.setattr(config, "job_dir", lambda: run)
    try:
        def boom(cfg):
            raise RuntimeError("disk full\nmore lines")

        with pytest.raises(RuntimeError):
            config.run_entry(boom, None)
        assert (_record(run)["status"], _record(run)["reason"]) == ("failed", "RuntimeError: disk full\nmore lines")

        def stop(cfg):
            raise Interrupted("saved step 3", signal.SIGTERM)

        with pytest.raises(Interrupted):
            config.run_entry(stop, None)
        assert _record(run)["status"] == "interrupted" and "reason" not in _record(run)
    finally:
        runs.release(run)
