"""A sweep's end is a transaction (vase.reports.sweep_end): its record says finished only once the summary, the verdict
and every dashboard are written; a fault at the end (Ctrl-C at any part, a full disk, a read-only folder, a dashboard
that breaks) is one line naming what was not written and a non-zero exit, and the same command run again finishes
only the end. Each fault is provoked in a real sweep by `tests.end_faults.EndFault` (2026-12-03: a full disk during
the end left no verdict, exit 0 and a record saying finished; the rerun trained every job again)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, one_line, run_python

FAULT = "+hydra.callbacks.end_fault._target_=tests.end_faults.EndFault"


def _sweep(logs: Path, cache: Path) -> list[str]:
    """A small sweep with a hypothesis (two LoRA ranks, SFT for two steps each, no evaluation): about 12 s to train,
    about 7 s to take up again with nothing to train."""
    return [sys.executable, "train.py", "-m", "stage.module.lora.r=4,8", "+hypothesis.compare=stage.module.lora.r",
            "+hypothesis.baseline=4", "+hypothesis.moves=[loss]", "debug=fast", "val.after=false", "report=false",
            "logger=tensorboard", f"paths.log_dir={logs}", f"paths.cache_dir={cache}", FAULT]


def _record(folder: Path) -> dict:
    return json.loads((folder / ".vase-run.json").read_text())


def _lines(err: str, start: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith(start)]


@pytest.mark.slow  # 27-46 s of subprocesses: make test stays under its 15 minutes (a fresh clone's 1,015 s, 2026-12-07)
def test_ctrl_c_at_every_part_of_the_end_interrupts_and_the_same_command_finishes_only_the_end(
        tmp_path: Path, session_dirs: dict) -> None:
    """SIGINT as each part of the end starts (summary, verdict, W&B, TensorBoard; at MLflow with the KeyboardInterrupt
    swallowed inside the part, as a library's thread join may): exit 130 every time, one line, the record
    ``interrupted`` naming what was written; then a dashboard that breaks: exit 1, one line, ``failed``; then the
    same command, clean: ``finished``, every part written, and across every rerun no job trained again and no new
    sweep folder."""
    logs = tmp_path / "logs"
    cmd = _sweep(logs, session_dirs["cache"])
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    sweep = None
    order = ["summary", "verdict", "wandb", "tensorboard", "mlflow"]
    for n, fault in enumerate(["ctrl-c:summary", "ctrl-c:verdict", "ctrl-c:wandb", "ctrl-c:tensorboard",
                               "swallowed:mlflow", "fails:mlflow", ""]):
        # Ctrl-C as in a terminal: a suite started as a shell's background job (`make test &`, `CI=true bash .ci/run
        # &`) hands its children SIGINT ignored, which the sweep keeps ignored as a shell's background job should; the
        # first run then ended rc 0 (the flake of 2026-12-03/04's fresh-clone runs, started in the background). A
        # forked job (run_python) takes SIGINT as a new Python process does, whatever the suite was started with
        p = run_python(cmd, cwd=ROOT, env={**env, "VASE_TEST_END_FAULT": fault}, timeout=600)
        said = f"{fault}: rc {p.returncode}\n{p.stderr[-2500:]}"
        (sweep,) = (logs / "train" / "multiruns").iterdir()  # every rerun takes up the same sweep
        record = _record(sweep)
        assert "Traceback" not in p.stderr, said
        trained = p.stdout.count("sft: step")
        assert trained == (4 if n == 0 else 0), said  # two jobs of two steps, the first time only
        if n:
            assert f"finishing the end of the sweep {sweep}: its jobs all finished" in p.stdout, p.stdout[-1500:]
            assert p.stdout.count("keeping the finished sweep job") == 2
        if fault.startswith(("ctrl-c", "swallowed")):
            part = fault.split(":")[1]
            assert p.returncode == 130, said
            (line,) = _lines(p.stderr, "interrupted (Ctrl-C)")
            assert record["status"] == "interrupted" and record["end"]["state"] == "interrupted", record
            # the files are written again by every end, each dashboard once: here, every part before this one
            written = order[:order.index(part)]
            assert f"(written: {', '.join(written) or 'nothing'})" in line, line
            assert part not in record["end"]["done"], record["end"]
        elif fault:
            assert p.returncode == 1, said
            (line,) = _lines(p.stderr, "error: the sweep's end did not finish")
            assert "mlflow: RuntimeError: mlflow broke" in line and "Not written: the MLflow parent run." in line
            assert record["status"] == "failed" and record["reason"] == line.removeprefix("error: ")
        else:
            assert p.returncode == 0, said
            assert record["status"] == "finished" and record["end"]["state"] == "written"
            assert all(record["end"]["done"].get(part) is True for part in order), record["end"]
    assert sweep is not None and (sweep / "verdict.md").is_file() and (sweep / "summary.md").is_file()
    assert not (sweep / "sweep_end_error.txt").exists()  # the broken part's traceback, gone once it was written


def _in_namespace(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare for a mount namespace")
    p = subprocess.run(["unshare", "--mount", "bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                       timeout=900, env={**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"})
    if "unshare failed" in p.stderr or "mount: " in p.stderr:
        pytest.skip(f"this machine refuses a mount namespace: {p.stderr.strip()[-200:]}")
    return p


def _on_tmpfs(tmp_path: Path, cache: Path, size: str, steps: str) -> dict[str, str]:
    """``steps`` (a shell script: ``$CMD`` the sweep, ``$OUT`` a folder it leaves its files in, ``$LOGS`` the logs,
    ``$PY`` this Python)
    run in a mount namespace with the sweep's logs on a tmpfs of ``size``; returns what it left in ``$OUT``, by name
    (the tmpfs goes with the namespace)."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    script = (f"set -u\nmkdir -p {logs} {out} && mount -t tmpfs -o size={size} tmpfs {logs} || exit 97\n"
              f"CMD='{' '.join(_sweep(logs, cache))}'; OUT={out}; LOGS={logs}; PY={sys.executable}\n{steps}")
    p = _in_namespace(script, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    return {f.name: f.read_text() for f in out.iterdir()}


@pytest.mark.slow  # 41 s of make test's 15 minutes (2026-12-07): two mount namespaces and three sweeps' ends
def test_a_full_disk_then_a_read_only_folder_at_the_end_fail_it_in_one_line_and_the_rerun_finishes_it(
        tmp_path: Path, session_dirs: dict) -> None:
    """The sweep's logs on a 40 MiB tmpfs that fills as the summary is written: exit 1, one line naming summary.json
    and every part not written, the record (which the full disk kept from saying more) read as ``failed`` with the
    end not finished; the space freed, the folder made read-only as the verdict is written: exit 1, one line naming
    verdict.md; the mount gone, the same command: ``finished``, verdict.md, no job trained again."""
    read = _on_tmpfs(tmp_path, session_dirs["cache"], "40m", """
VASE_TEST_END_FAULT=full:summary $CMD > $OUT/o1 2> $OUT/e1; echo $? > $OUT/rc1
S=$(ls -d $LOGS/train/multiruns/2*)
$PY -m vase.runs $S > $OUT/runs1 2>&1
rm -f $LOGS/train/multiruns/filler.bin
VASE_TEST_END_FAULT=readonly:verdict $CMD > $OUT/o2 2> $OUT/e2; echo $? > $OUT/rc2
$PY -m vase.runs $S > $OUT/runs2 2>&1
umount $S
$CMD > $OUT/o3 2> $OUT/e3; echo $? > $OUT/rc3
cp $S/.vase-run.json $OUT/record.json; ls $S > $OUT/files; echo $S > $OUT/sweep
""")
    sweep = read["sweep"].strip()
    assert read["rc1"].strip() == "1", read["e1"][-2000:]
    (line,) = _lines(read["e1"], "error: ")
    assert line.startswith(f"error: the sweep's end did not finish in {sweep}: summary: no space left on the device "
                           f"writing {sweep}/summary.json")
    assert "Not written: the summary (summary.md, .json, .csv, sweep.png), the verdict" in line
    assert "the same command writes the rest of the end and trains nothing again" in line
    assert "Traceback" not in read["e1"] and "Logging error" not in read["e1"]
    assert "  status:    failed (its end (summary, verdict, dashboards) did not finish" in read["runs1"], read["runs1"]
    assert read["rc2"].strip() == "1", read["e2"][-2000:]
    (line,) = _lines(read["e2"], "error: ")
    assert f"verdict: the file system is read-only writing {sweep}/verdict.md" in line, line
    assert "  status:    failed (its end" in read["runs2"], read["runs2"]  # a read-only run folder is read as it is
    assert read["rc3"].strip() == "0", read["e3"][-2000:]
    assert "sft: step" not in read["o2"] + read["o3"]
    record = json.loads(read["record.json"])
    assert record["status"] == "finished" and "verdict.md" in read["files"].split()


def test_one_jobs_read_only_tensorboard_folder_costs_that_jobs_columns_only(tmp_path: Path,
                                                                              session_dirs: dict) -> None:
    """Job 1's TensorBoard run folder read-only at the end: job 0's columns are written, one line names job 1's
    folder (no thread's traceback), exit 1; the mount gone, the same command writes job 1's columns alone (job 0's
    run gets no second events file)."""
    read = _on_tmpfs(tmp_path, session_dirs["cache"], "60m", """
VASE_TEST_END_FAULT=readonly-job1:tensorboard $CMD > $OUT/o1 2> $OUT/e1; echo $? > $OUT/rc1
S=$(ls -d $LOGS/train/multiruns/2*)
ls $S/0/tensorboard/*/ > $OUT/job0_before; umount $S/1/tensorboard/*/
$CMD > $OUT/o2 2> $OUT/e2; echo $? > $OUT/rc2
ls $S/0/tensorboard/*/ > $OUT/job0_after; ls $S/1/tensorboard/*/ > $OUT/job1_after
cp $S/.vase-run.json $OUT/record.json; echo $S > $OUT/sweep
""")
    sweep = read["sweep"].strip()
    assert read["rc1"].strip() == "1", read["e1"][-2000:]
    (line,) = _lines(read["e1"], "error: ")
    assert f"tensorboard: job 1's columns not written ({sweep}/1/tensorboard/sft-lora_r=8: Read-only file system)" \
        in line and "Not written: TensorBoard's view of the jobs." in line, line
    assert "Traceback" not in read["e1"] and "Exception in thread" not in read["e1"]
    assert read["rc2"].strip() == "0", read["e2"][-2000:]
    assert read["job0_after"] == read["job0_before"]  # written once, at the first end
    assert sum(n.startswith("events.out") for n in read["job1_after"].split()) == 3  # its two stages' and the end's
    assert json.loads(read["record.json"])["status"] == "finished"


@pytest.mark.parametrize("value", ["../", "a b", "x|y", "Κεραμεικός", "..", "a/../../b", "=/=", "v" * 300])
def test_dashboard_names_made_from_any_swept_value_are_valid_for_mlflow_and_distinct(value: str) -> None:
    """A swept value holding ``../`` made MLflow refuse the verdict's metric names (the parent got no verdict), and
    every non-ASCII value read ``_``. Checked with MLflow's own validators; readable where the value can be kept."""
    from mlflow.utils.validation import _validate_metric_name, _validate_param_name

    from vase.loggers import dashboard_key, dashboard_keys

    names = [f"verdict/data.note={value}/heldout/total/effect", "vs_baseline/heldout/total", f"sweep/{value}"]
    for name in names:
        _validate_metric_name(dashboard_key(name))
        _validate_param_name(dashboard_key(name))
    other = f"verdict/data.note={value}x/heldout/total/effect"
    keys = dashboard_keys({names[0]: 1.0, other: 2.0, names[0].replace("=", "_"): 3.0})
    assert len(keys) == 3 and sorted(keys.values()) == [1.0, 2.0, 3.0]
    if value == "Κεραμεικός":
        assert dashboard_key(names[0]) == "verdict/data.note_Κεραμεικός/heldout/total/effect"


def test_tensorboard_names_each_job_by_its_swept_values_as_written(tmp_path: Path) -> None:
    """Two jobs swept over non-ASCII values: the board's links are named by the values (their TensorBoard folders,
    made safe for a file system, both read ``note=_``)."""
    from torch.utils.tensorboard import SummaryWriter

    from vase.reports.sweep_dashboards import board_runs

    sweep = tmp_path / "sweep"
    for n, value in enumerate(["Κεραμεικός", "Αθήνα/../x"]):
        job = sweep / str(n)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(f"- data.note={value}\n- seed=1\n")
        w = SummaryWriter(str(job / "tensorboard" / "sft-note=_"))
        w.add_scalar("train/loss", 1.0, 0)
        w.close()
    assert [name for name, _ in board_runs(sweep)] == ["note=Κεραμεικός", "note=Αθήνα_.._x"]


def test_mlflow_gone_at_the_end_keeps_the_parent_and_comparisons_and_the_journal_command_sends_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep's MLflow part at an address where no server answers: kept in mlflow_sweep_unsent.json with a line
    naming that address and the command; the command sends it once a store answers (here a SQLite store given with
    --tracking-uri, holding the jobs' runs): the parent run with the verdict's metrics, each job its child with its
    comparison. Sent twice, it finds its parent again. (The same against a real server whose process is killed:
    make dashboards-check.)"""
    from mlflow.tracking import MlflowClient

    from vase.mlflow_journal import SWEEP_JOURNAL, SWEEP_SENT, main, send_sweep

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "summary.md").write_text("# summary\n")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(store)
    exp = client.create_experiment("vase", artifact_location=str(tmp_path / "artifacts"))
    for job in ("0", "1"):
        client.create_run(exp, tags={"sweep_group": "kl-t", "vase.run_dir": str(sweep / job)})
    plan = {"tracking_uri": "http://127.0.0.1:9", "experiment_name": "vase", "artifact_location": None,
            "group": "kl-t", "run_name": "kl-t-summary", "tags": {"sweep_group": "kl-t", "job_type": "sweep"},
            "tables": {"tables/sweep_summary.json": {"columns": ["job"], "data": [["0"], ["1"]]}},
            "params": {"sweep": "kl"}, "metrics": {"verdict/beta_0.04/heldout/total/effect": 0.5},
            "files": ["summary.md"], "children": {"1": {"vs_baseline/heldout/total": 0.5}, "0": {}},
            "view": {"key": "vase-kl-t", "state": "{}"}}
    (sweep / SWEEP_JOURNAL).write_text(json.dumps(plan))
    assert main([str(sweep)]) == 2  # nothing answers at the plan's address: one line in seconds, the file stays
    assert "MLflow at http://127.0.0.1:9: no server answers (" in capsys.readouterr().err
    assert (sweep / SWEEP_JOURNAL).is_file()
    assert main([str(sweep), "--tracking-uri", store]) == 0
    assert (sweep / SWEEP_SENT).is_file() and not (sweep / SWEEP_JOURNAL).exists()
    runs = {r.data.tags.get("job_type", r.data.tags.get("vase.run_dir", "")[-1:]): r
            for r in client.search_runs([exp], max_results=10)}
    parent = runs["sweep"]
    assert parent.data.metrics == {"verdict/beta_0.04/heldout/total/effect": 0.5}
    assert runs["1"].data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert runs["1"].data.metrics == {"vs_baseline/heldout/total": 0.5}
    assert send_sweep(plan, sweep, store)["parent"] == parent.info.run_id  # sent again: the same parent
    # a job whose run the server does not have (deleted since) is named, not silently left out of the parent's
    assert send_sweep({**plan, "children": {**plan["children"], "2": {}}}, sweep, store)["missing"] == ["2"]
    assert len(client.search_runs([exp], max_results=10)) == 3


def test_a_sweep_into_a_folder_the_user_chose_has_its_record_its_end_recovers_and_a_second_is_refused(
        tmp_path: Path, session_dirs: dict) -> None:
    """``hydra.sweep.dir=<mine>`` had no sweep record (2026-12-07): a fault at its end was not recovered by the printed
    command (``already holds files vase did not write``), and a second identical sweep into the folder while the
    first ran was accepted and exited 0 with a failed job. Now: the record, a broken dashboard at the end (exit 1,
    ``failed``), the same command finishing only the end (``finished``, no job trained again); a second sweep started
    while one holds the folder: one line, exit 2, the first untouched."""
    mine = tmp_path / "mine"
    cmd = [*_sweep(tmp_path / "logs", session_dirs["cache"]), f"hydra.sweep.dir={mine}"]
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    p = run_python(cmd, cwd=ROOT, env={**env, "VASE_TEST_END_FAULT": "fails:tensorboard"}, timeout=600)
    assert p.returncode == 1 and _record(mine)["status"] == "failed", p.stderr[-2000:]
    assert p.stdout.count("sft: step") == 4 and not (tmp_path / "logs" / "train" / "multiruns").exists()
    first = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for _ in range(600):  # until the first holds the folder (its record says running, under its pid)
            if _record(mine).get("pid") == first.pid and _record(mine)["status"] == "running":
                break
            assert first.poll() is None, first.communicate()
            time.sleep(0.1)
        second = run_python(cmd, cwd=ROOT, env=env, timeout=600)
        out, err = first.communicate(timeout=600)
    finally:
        first.kill()
    assert one_line(second) == (f"config error: run directory {mine} is in use by another running process (pid "
                                f"{first.pid}); wait for it, or choose another folder (hydra.sweep.dir=...)")
    assert first.returncode == 0 and out.count("sft: step") == 0, err[-2000:]
    assert f"finishing the end of the sweep {mine}" in out or "keeping the finished sweep job" in out, out[-1500:]
    record = _record(mine)
    assert record["status"] == "finished" and record["end"]["done"].get("tensorboard") is True, record


def test_a_jobs_tensorboard_events_gone_before_the_end_are_named_and_the_record_says_without(
        tmp_path: Path, session_dirs: dict) -> None:
    """Job 0's (the baseline's) TensorBoard events file deleted before the end: rc 0, ``finished``, and the baseline
    silently missing from the board (2026-12-07). Now one line names the job and its folder, and the record says
    ``finished`` with the reason ``without: ...``, which vase runs shows."""
    logs = tmp_path / "logs"
    p = run_python(_sweep(logs, session_dirs["cache"]), cwd=ROOT, env={**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1",
                            "VASE_TEST_END_FAULT": "gone-job0:tensorboard"}, timeout=600)
    (sweep,) = (logs / "train" / "multiruns").iterdir()
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    said = f"job 0's TensorBoard run (no events file in {sweep / '0' / 'tensorboard'})"
    assert _lines(p.stderr, "note: ") == [f"note: the sweep's end was written without {said}: the dashboards show the "
                                          f"other jobs"], p.stderr[-2000:]
    record = _record(sweep)
    assert record["status"] == "finished" and record["reason"] == f"without: {said}", record
    shown = run_python(["-m", "vase.runs", str(sweep)], timeout=300)
    assert f"status:    finished (without: {said})" in shown.stdout, shown.stdout
