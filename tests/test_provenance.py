"""Which code made a result: every run record, results file and sweep report names it (vase.provenance.code_stamp), a
report over jobs made by different code says so at its top, and python -m vase.runs <run> gives the command that
makes a run again."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_code_stamp_names_this_checkout_s_commit_and_whether_it_has_changes() -> None:
    from vase.provenance import code_stamp

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
    from vase.provenance import code_stamp
    from vase.runs import RUN_FILE, claim, release

    run = claim(tmp_path / "run", overrides=["seed=1"])
    try:
        code = json.loads((run / RUN_FILE).read_text())["code"]
        assert {k: v for k, v in code.items() if k != "patch"} == code_stamp()
        assert (code.get("patch") == "code.patch") is bool(code_stamp()["dirty"]) is (run / "code.patch").is_file()
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
    p = run_python(["-m", "vase.runs", str(job)], cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "  status:    finished" in p.stdout and "  code:      bbbbbbbbbb (changes 123456abcdef)" in p.stdout
    assert "  again:     git checkout bbbbbbbbbb && python train.py seed=1 'logger=[csv,mlflow]'" in p.stdout
    assert "its tree had changes not in that commit, hash 123456abcdef" in p.stdout


def test_a_run_of_a_wheel_built_from_changes_says_so_once_and_never_hash_none(tmp_path: Path) -> None:
    """An installed wheel's stamp has no hash of its changes and carries no patch: the record says the wheel was built
    from changes, not ``hash None, not kept (made before runs kept their patch)`` under every run."""
    from vase.runs.describe import describe_run

    wheel = {"commit": "c" * 40, "dirty": True, "diff": None, "installed": True, "vase": "0.2.0", "torch": "2.14.1"}
    text = describe_run(_job(tmp_path / "sweep", 0, ["seed=1"], wheel))
    assert "hash None" not in text and "made before runs kept" not in text, text
    assert text.count("the installed wheel was built from a tree with changes not in that commit") == 1, text
    clean = describe_run(_job(tmp_path / "clean", 0, ["seed=1"], {**wheel, "dirty": False}))
    assert "not in that commit" not in clean, clean


def _runs(*args: str) -> subprocess.CompletedProcess:
    return run_python(["-m", "vase.runs", *args], cwd=ROOT, timeout=120)


def test_vase_runs_refuses_what_is_not_a_run_in_one_line_and_never_shows_a_broken_record(tmp_path: Path) -> None:
    """It exited 0 for /nonexistent, a file and a folder of no runs, and showed a record that is not JSON as a plausible
    run (blank status, code unrecorded) with a command to make it again."""
    (tmp_path / "empty").mkdir()
    broken = tmp_path / "runs" / "broken"
    broken.mkdir(parents=True)
    (broken / ".vase-run.json").write_text("{not json")
    listless = tmp_path / "listless"
    listless.mkdir()
    (listless / ".vase-run.json").write_text("[]")
    cases = [([str(tmp_path / "nowhere")], 2, f"error: {tmp_path / 'nowhere'}: no such folder"),
             ([str(ROOT / "README.md")], 2, f"error: {ROOT / 'README.md'}: a file, not a run's folder"),
             ([str(tmp_path / "empty")], 1, f"error: no vase runs under {tmp_path / 'empty'} (no .vase-run.json"),
             ([str(broken)], 2, f"error: {broken / '.vase-run.json'}: not a readable run record (Expecting"),
             ([str(listless)], 2, f"error: {listless / '.vase-run.json'}: not a vase run record (no status in it)"),
             ([str(tmp_path / "runs")], 1, "error: 1 run record(s) unreadable; the first: ")]
    for args, rc, line in cases:
        p = _runs(*args)
        assert (p.returncode, len(p.stderr.splitlines())) == (rc, 1) and p.stderr.startswith(line), (args, p.stderr)
        assert "again:" not in p.stdout and "Traceback" not in p.stderr
    assert "unreadable   its .vase-run.json is broken" in _runs(str(tmp_path / "runs")).stdout


@pytest.fixture
def dirty_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A git checkout with a commit, a changed file and a file git does not track, as vase's code (`vase.provenance`
    reads the checkout it is imported from)."""
    from vase import provenance

    src = tmp_path / "src"
    src.mkdir()
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    (src / "model.py").write_text("WIDTH = 1\n")
    (src / "data.bin").write_bytes(bytes(range(256)))
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (src / "model.py").write_text("WIDTH = 2\n")
    (src / "reward.py").write_text("def reward():\n    return 1.0\n")
    monkeypatch.setattr(provenance, "SOURCE", src)
    provenance._changes.cache_clear()
    provenance._code.cache_clear()
    provenance.code_patch.cache_clear()
    yield src
    provenance._changes.cache_clear()
    provenance._code.cache_clear()
    provenance.code_patch.cache_clear()


def test_a_dirty_run_keeps_its_patch_and_the_record_makes_its_code_again(tmp_path: Path, dirty_checkout: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A dirty run kept a hash of its changes, not the changes: after a revert it could not be made again, and
    vase.runs never said that the code checked out differs from the run's."""
    from vase import provenance, runs
    from vase.runs import describe

    run = runs.claim(tmp_path / "run", overrides=["seed=1"])
    runs.release(run)
    record = json.loads((run / runs.RUN_FILE).read_text())
    assert record["code"]["dirty"] and record["code"]["patch"] == "code.patch"
    (run / ".hydra").mkdir()
    (run / ".hydra" / "hydra.yaml").write_text("hydra:\n  job:\n    name: train\n")
    (run / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    # the user reverts their change: the record says the code differs, and the command makes the run's code again
    subprocess.run(["git", "-C", str(dirty_checkout), "checkout", "--", "model.py"], check=True)
    (dirty_checkout / "reward.py").unlink()
    provenance._changes.cache_clear()
    provenance._code.cache_clear()
    monkeypatch.chdir(dirty_checkout)  # from the checkout, as its commands are typed there
    text = describe.describe_run(run)
    assert f"  now:       the code here is {record['code']['commit'][:10]}, not the run's" in text
    again = text.split("  again:     ")[1].splitlines()[0]
    assert again == (f"git checkout {record['code']['commit'][:10]} && git apply {run.resolve() / 'code.patch'} && "
                     f"python train.py seed=1")
    monkeypatch.chdir(tmp_path)  # from anywhere else: the checkout named, its entry point by its path
    again = describe.describe_run(run).split("  again:     ")[1].splitlines()[0]
    assert again == (f"git -C {dirty_checkout} checkout {record['code']['commit'][:10]} && git -C {dirty_checkout} "
                     f"apply {run.resolve() / 'code.patch'} && python {dirty_checkout / 'train.py'} seed=1")
    subprocess.run(again.split(" && python ")[0].split(" && ")[1], shell=True, check=True)  # its git apply, as given
    assert (dirty_checkout / "model.py").read_text() == "WIDTH = 2\n"
    assert (dirty_checkout / "reward.py").read_text() == "def reward():\n    return 1.0\n"
    # over the cap: no patch kept, and the record says how large the changes were
    provenance._changes.cache_clear()
    provenance._code.cache_clear()
    provenance.code_patch.cache_clear()
    monkeypatch.setattr(provenance, "PATCH_CAP", 10)
    big = runs.claim(tmp_path / "big", overrides=[])
    runs.release(big)
    code = json.loads((big / runs.RUN_FILE).read_text())["code"]
    assert code["patch"] is None and code["patch_bytes"] > 10 and not (big / "code.patch").exists()


def test_a_run_of_a_users_project_records_the_projects_code_and_gives_it_back(tmp_path: Path,
                                                                             session_dirs: dict) -> None:
    """A run composed from a user's project (--config-dir) kept vase's code but not the project's: no commit, no
    changes, and `vase runs` could not make it again once the project moved on (2026-12-03). Now the record holds the
    project's folder, commit, changes (project.patch), the command checks it out first, and says so when it moved."""
    project = tmp_path / "mylab"
    (project / "conf" / "experiment").mkdir(parents=True)
    (project / "conf" / "experiment" / "mine.yaml").write_text("# @package _global_\nseed: 7\n")
    (project / ".gitignore").write_text("logs/\n.cache/\n")  # what runs write is no code
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (project / "conf" / "experiment" / "mine.yaml").write_text("# @package _global_\nseed: 8\n")  # not committed
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    p = run_python(["-m", "vase.cli", "train", "--config-dir", "conf", "experiment=mine", "debug=fast", "logger=none",
                    "val.after=false", "report=false", "paths.log_dir=logs",
                    f"paths.cache_dir={session_dirs['cache']}"], cwd=project, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    (run,) = (project / "logs" / "train" / "runs").iterdir()
    record = json.loads((run / ".vase-run.json").read_text())["project"]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert record["folder"] == str(project) and record["commit"] == commit and record["dirty"] is True
    assert record["patch"] == "project.patch" and "seed: 8" in (run / "project.patch").read_text()
    said = run_python(["-m", "vase.cli", "runs", str(run)], cwd=project, env=env, timeout=300).stdout
    assert f"  project:   {project} at {commit[:10]} (changes {record['diff']})" in said, said
    again = said.split("  again:     ")[1].splitlines()[0]
    assert again.startswith(f"git -C {project} checkout {commit[:10]} && git -C {project} apply {run / 'project.patch'}")
    assert "now:       your project" not in said
    subprocess.run([*git, "commit", "-qam", "second"], check=True)  # the project moves on
    said = run_python(["-m", "vase.cli", "runs", str(run)], cwd=project, env=env, timeout=300).stdout
    assert "  now:       your project is at " in said and "not the run's" in said, said
