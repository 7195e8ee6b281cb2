"""Which code made a result: every run record, results file and sweep report names it (vase.runs.code_stamp), a
report over jobs made by different code says so at its top, and python -m vase.runs <run> gives the command that
makes a run again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_code_stamp_names_this_checkout_s_commit_and_whether_it_has_changes() -> None:
    from vase.runs import code_stamp

    code = code_stamp()
    assert code["commit"] == _git("rev-parse", "HEAD")
    changed = bool(_git("status", "--porcelain"))
    assert code["dirty"] is changed and (code["diff"] is not None) is changed
    import torch
    import transformers

    assert code["torch"] == torch.__version__.split("+")[0] or code["torch"] == torch.__version__
    assert code["transformers"] == transformers.__version__ and code["vase"] and code["cpu_kernels"] in ("native",
                                                                                                         "portable")


def test_a_run_record_and_a_results_file_carry_the_code(tmp_path: Path) -> None:
    from vase.eval.scoring import write_results
    from vase.runs import RUN_FILE, claim, code_stamp, release

    run = claim(tmp_path / "run", overrides=["seed=1"])
    try:
        assert json.loads((run / RUN_FILE).read_text())["code"] == code_stamp()
    finally:
        release(run)
    out = write_results(tmp_path / "results.json", "x", {"clip_score": 0.5})
    assert json.loads(out.read_text())["code"]["commit"] == code_stamp()["commit"]


def _job(sweep: Path, num: int, overrides: list[str], code: dict) -> Path:
    job = sweep / str(num)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (job / ".hydra" / "hydra.yaml").write_text("hydra:\n  job:\n    name: train\n")
    (job / ".vase-run.json").write_text(json.dumps({"status": "finished", "overrides": overrides, "started": 1.0,
                                                    "ended": 2.0, "code": code}))
    (job / "train_history.json").write_text(json.dumps([{"step": 1.0, "loss": 1.0}, {"step": 2.0, "loss": 0.5}]))
    return job


A = {"commit": "a" * 40, "dirty": False, "diff": None, "vase": "0.1.0", "torch": "2.14.1"}
B = {"commit": "b" * 40, "dirty": True, "diff": "123456abcdef", "vase": "0.1.0", "torch": "2.14.1"}


def test_a_sweep_report_over_jobs_made_by_two_commits_names_the_mismatch_at_its_top(tmp_path: Path) -> None:
    from vase.reports.sweep_summary import write_sweep_summary

    sweep = tmp_path / "sweep"
    _job(sweep, 0, ["stage.module.lora.r=4"], A)
    _job(sweep, 1, ["stage.module.lora.r=8"], B)
    md = write_sweep_summary(sweep)["md"].read_text().splitlines()
    assert md[0] == ("**Made by different code**: jobs #0 by aaaaaaaaaa; jobs #1 by bbbbbbbbbb (changes 123456abcdef). "
                     "A difference between these jobs may be the code's, not the settings'; rerun them on one commit "
                     "to compare."), md[:2]
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["code"] == {"aaaaaaaaaa": ["0"], "bbbbbbbbbb (changes 123456abcdef)": ["1"]}
    same = tmp_path / "same"
    _job(same, 0, ["stage.module.lora.r=4"], A)
    _job(same, 1, ["stage.module.lora.r=8"], A)
    text = write_sweep_summary(same)["md"].read_text().splitlines()
    assert text[-1] == "Code: every job by aaaaaaaaaa." and "different code" not in "\n".join(text)  # last, not first


def test_vase_runs_on_one_run_shows_its_code_and_the_command_that_makes_it_again(tmp_path: Path) -> None:
    job = _job(tmp_path / "sweep", 0, ["seed=1", "logger=[csv,mlflow]"], B)
    p = subprocess.run([sys.executable, "-m", "vase.runs", str(job)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "  status:    finished" in p.stdout and "  code:      bbbbbbbbbb (changes 123456abcdef)" in p.stdout
    assert "  again:     git checkout bbbbbbbbbb && python train.py seed=1 'logger=[csv,mlflow]'" in p.stdout
    assert "its tree had changes not in that commit, hash 123456abcdef" in p.stdout
