"""A run killed with SIGKILL mid-training resumes from its last checkpoint and follows the loss curve of an
uninterrupted run: same weights, optimizer, scheduler, random states (LoRA dropout is on), data position and history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT

ARGS = ["logger=none", "data.synthetic.num_vases=16", "render.resolution=64", "stage.batch_size=2",
        "stage.grad_accum=1", "stage.epochs=3", "stage.module.lora.dropout=0.1", "stage.module.optimizer.lr=5e-3",
        "val.after=false", "report=false"]


def _train(log_dir: Path, cache: Path, extra: list[str], signal_at: str = "") -> subprocess.Popen:
    """The command a user types (no run directory given: vase picks it under paths.log_dir); ``signal_at``
    (``<step>:<signal>``) makes the run signal itself there, as a user's kill would."""
    args = [sys.executable, "train.py", *ARGS, f"paths.cache_dir={cache}", f"paths.log_dir={log_dir}", *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "VASE_TEST_SIGNAL_AT": signal_at}
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(p: subprocess.Popen) -> str:
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out[-3000:]
    return out


def _ckpt_step(path: Path) -> int:
    try:
        return int(torch.load(path, map_location="cpu", weights_only=False)["global_step"])
    except Exception:  # noqa: BLE001 - not written yet (atomic rename: never a torn file)
        return -1


def _runs(log_dir: Path) -> list[Path]:
    where = log_dir / "train" / "runs"
    return sorted(p for p in where.iterdir() if p.is_dir()) if where.is_dir() else []


def _history(run: Path) -> list[dict]:
    return json.loads((run / "train_history.json").read_text())


def _stopped_by_sigterm_at_step_2(logs: Path, cache: Path, cmd: list[str]) -> tuple[Path, Path]:
    """The command, SIGTERMed (a kill, SLURM's preemption) as step 2 ends: it exits 143 after the step in progress
    (3) ended and was saved, and says where. Its run folder and checkpoint."""
    p = _train(logs, cache, cmd, signal_at=f"2:{int(signal.SIGTERM)}")
    text, _ = p.communicate(timeout=600)
    assert p.returncode == 128 + signal.SIGTERM, text[-2000:]
    (run,) = _runs(logs)
    ckpt = run / "checkpoints" / "last.ckpt"
    assert _ckpt_step(ckpt) == 3 and f"saved step 3 to {ckpt}; rerun the same command to resume" in text
    return run, ckpt


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_sigterm_then_sigkill_then_the_same_command_gives_the_uninterrupted_curve(tmp_path: Path,
                                                                                 session_dirs: dict) -> None:
    cache = session_dirs["cache"]
    cmd = ["callbacks.checkpoint.every_n_train_steps=5", "+callbacks.signal._target_=tests.signals.SignalAt"]
    _finish(_train(tmp_path / "full", cache, cmd))
    full = _history(_runs(tmp_path / "full")[0])
    total = len(full)
    assert total == 18  # 12 training vases / batch 2 = 6 steps an epoch, 3 epochs

    # SIGTERM (kill, SLURM preemption) before the first periodic checkpoint: the step in progress ends, is saved,
    # and the command says where
    logs = tmp_path / "logs"
    run, ckpt = _stopped_by_sigterm_at_step_2(logs, cache, cmd)
    assert not (run / "train_history.json").exists()

    # the same command resumes that run in its own folder; SIGKILL it after a later periodic checkpoint
    p = _train(logs, cache, cmd, signal_at=f"11:{int(signal.SIGKILL)}")
    p.wait(timeout=600)
    assert p.returncode == -signal.SIGKILL
    assert _runs(logs) == [run] and _ckpt_step(ckpt) == 10
    # its record still says running; the listing (and resume=auto) see that its process is gone
    from vase.runs import list_runs

    assert [(r["run"], r["status"]) for r in list_runs(logs)] == [(str(run), "killed")]

    text = _finish(_train(logs, cache, cmd))
    assert _runs(logs) == [run], "the rerun must resume the interrupted run, not start a new one"
    assert f"resuming the killed run {run}" in text
    assert "not resumable" not in text  # Lightning's warning is wrong here: vase restores the data position
    resumed = _history(run)
    assert [h["step"] for h in resumed] == [h["step"] for h in full]  # complete: the interrupted steps too
    for a, b in zip(resumed, full):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6), (a, b)
    assert json.loads((run / ".vase-run.json").read_text())["status"] == "finished"

    # a finished run is never taken up again: the same command starts a new one (stopped at once by Ctrl-C)
    p = _train(logs, cache, cmd, signal_at=f"1:{int(signal.SIGINT)}")
    text, _ = p.communicate(timeout=600)
    assert p.returncode == 128 + signal.SIGINT, text[-2000:]
    assert len(_runs(logs)) == 2


@pytest.mark.slow  # heavy (whole runs in subprocesses, or a 30 s fixture): make test-slow keeps the default suite short
def test_two_runs_started_together_keep_their_own_folders(tmp_path: Path, session_dirs: dict) -> None:
    """`for r in 4 8; do python train.py stage.module.lora.r=$r ... & done`: each ends with its own adapter."""
    procs = {r: _train(tmp_path, session_dirs["cache"], [f"stage.module.lora.r={r}", "debug=fast"]) for r in (4, 8)}
    for p in procs.values():
        _finish(p)
    runs = _runs(tmp_path)
    assert len(runs) == 2
    got = sorted(json.loads((r / "adapter" / "adapter_config.json").read_text())["r"] for r in runs)
    assert got == [4, 8]
    for r in runs:
        want = json.loads((r / "adapter" / "adapter_config.json").read_text())["r"]
        assert f"stage.module.lora.r={want}" in (r / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.slow  # heavy (whole runs in subprocesses, or a 30 s fixture): make test-slow keeps the default suite short
def test_continuing_a_finished_run_with_more_steps_trains_them(tmp_path: Path, session_dirs: dict) -> None:
    cache = session_dirs["cache"]
    _finish(_train(tmp_path / "a", cache, ["stage.epochs=1"]))
    (run,) = _runs(tmp_path / "a")
    ckpt = run / "checkpoints" / "last.ckpt"
    assert _ckpt_step(ckpt) == 6
    text = _finish(_train(tmp_path / "b", cache, ["stage.epochs=1", "trainer.max_steps=9", f"ckpt_path={ckpt}"]))
    (cont,) = _runs(tmp_path / "b")
    assert [h["step"] for h in _history(cont)] == list(range(9))
    assert "training on to trainer.max_steps=9" in text
    assert _ckpt_step(ckpt) == 6  # the earlier run's checkpoint is only read


def test_checkpoint_holds_what_a_resume_needs(train_cfg) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(["callbacks.checkpoint.every_n_train_steps=1"])
    run_training(cfg)
    ckpt = torch.load(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 2
    assert ckpt["optimizer_states"] and ckpt["lr_schedulers"]
    assert set(ckpt["vase_rng"]) >= {"torch", "numpy", "python"}
    assert [h["step"] for h in ckpt["vase_history"]] == [0.0, 1.0]
    assert ckpt["VaseDataModule"]["batches_done"] == 2
    assert all("lora_" in k for k in ckpt["state_dict"])
    leftovers = [p.name for p in (Path(cfg.paths.output_dir) / "checkpoints").iterdir() if p.name != "last.ckpt"]
    assert leftovers == []  # atomic writes leave no temporary file behind


def test_slurm_requeue_signal_saves_before_submitit_requeues(train_cfg, monkeypatch) -> None:
    """Under cluster=slurm, submitit listens for SIGUSR2 to requeue the job: vase saves first, then hands over."""
    from vase.pipeline import run_training
    from vase.training.callbacks import TrainingInterrupted

    seen: list[int] = []
    cfg = train_cfg(["trainer.max_steps=6", "callbacks.checkpoint.every_n_train_steps=100",
                     "+callbacks.signal._target_=tests.signals.SignalAt"])
    ckpt = Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt"

    def requeue(signum: int, frame: object) -> None:  # what submitit's handler does first: read the checkpoint
        seen.append(_ckpt_step(ckpt))

    monkeypatch.setenv("VASE_TEST_SIGNAL_AT", f"1:{int(signal.SIGUSR2)}")
    sigint = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN in a shell's background job
    previous = signal.signal(signal.SIGUSR2, requeue)
    try:
        with pytest.raises(TrainingInterrupted, match="saved step 2 to .*rerun the same command") as stopped:
            run_training(cfg)
    finally:
        signal.signal(signal.SIGUSR2, previous)
    # submitit's handler runs once training has unwound (under DDP every rank's teardown is done by then), not inside
    # the step: its requeue lets SLURM kill the other ranks
    assert seen == []
    with pytest.raises(SystemExit) as code:
        stopped.value.exit()  # what train.py does with it
    assert seen == [2] and code.value.code == 128 + signal.SIGUSR2
    assert signal.getsignal(signal.SIGINT) is sigint  # handlers are given back


def test_a_requeue_the_busy_controller_times_out_is_tried_again(monkeypatch, capsys) -> None:
    """submitit's requeue calls ``scontrol requeue``, which a busy controller can time out: the hand-over is tried
    again with a wait, each failure said in one line; after the last try the failure stands, with what to do."""
    import subprocess

    import vase.training.callbacks as cb

    monkeypatch.setattr(cb, "REQUEUE_WAIT_S", 0.01)
    calls: list[int] = []

    def flaky(fails: int):
        def requeue(signum: int, frame: object) -> None:
            calls.append(signum)
            if len(calls) <= fails:
                raise subprocess.CalledProcessError(1, ["scontrol", "requeue", "1001"])
        return requeue

    with pytest.raises(SystemExit) as code:
        cb.TrainingInterrupted("saved", int(signal.SIGUSR2), flaky(2)).exit()
    assert len(calls) == 3 and code.value.code == 128 + signal.SIGUSR2
    err = capsys.readouterr().err
    assert err.count("requeue try") == 2 and "try 1 of 4 failed" in err and "scontrol" in err
    calls.clear()
    with pytest.raises(subprocess.CalledProcessError):
        cb.TrainingInterrupted("saved", int(signal.SIGUSR2), flaky(99)).exit()
    assert len(calls) == cb.REQUEUE_TRIES
    assert "did not requeue the job after 4 tries" in capsys.readouterr().err


def test_a_config_edited_since_the_kill_starts_a_new_run_not_a_mixed_one(tmp_path: Path, monkeypatch) -> None:
    """The same command after a config file changed (an experiment's learning rate) is another run: resuming the
    killed one would continue its checkpoint under the new settings and mix two configs in one history. The key of a
    run is its overrides and its composed config's digest (``${vase.config_digest:}`` in hydra.run.dir); unchanged,
    the same command still resumes (the resume test above resolves that digest through Hydra)."""
    from omegaconf import OmegaConf

    import vase.runs as runs

    def composed(lr: float):
        return OmegaConf.create({"stage": {"module": {"optimizer": {"lr": lr}}}, "seed": 1, "resume": "auto",
                                 "out": "${hydra:runtime.output_dir}", "hydra": {"run": {"dir": "x"}}})

    base = tmp_path / "runs"
    killed = base / "2026-01-01_00-00-00"
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "checkpoints" / "last.ckpt").write_bytes(b"x")
    overrides = runs.job_overrides()  # [] outside a Hydra job (an earlier test may have left one set)
    key = runs.run_key(overrides, runs.config_digest(composed(5e-3)))
    (killed / runs.RUN_FILE).write_text(json.dumps({"status": "running", "key": key, "overrides": overrides,
                                                    "pid": 0}))
    monkeypatch.setattr(runs, "_memo", {})
    edited = runs.run_dir(str(base), "auto", "run", runs.config_digest(composed(1e-3)))
    assert Path(edited) != killed and Path(edited).parent == base  # a new folder: the edited config starts afresh
    runs.release(edited)
    monkeypatch.setattr(runs, "_memo", {})
    again = runs.run_dir(str(base), "auto", "run", runs.config_digest(composed(5e-3)))
    assert Path(again) == killed.resolve()  # the config it ran: taken up again
    runs.release(again)
    # what the digest reads: the config as written, without Hydra's node and how to resume
    other = OmegaConf.merge(composed(5e-3), {"resume": "never", "hydra": {"run": {"dir": "y"}}})
    assert runs.config_digest(other) == runs.config_digest(composed(5e-3)) != runs.config_digest(composed(1e-3))


GRPO = ["stage=grpo", "stage.epochs=1", "stage.module.num_generations=2", "stage.module.max_completion_length=8",
        "callbacks.checkpoint.every_n_train_steps=5", "+callbacks.signal._target_=tests.signals.SignalAt"]


@pytest.mark.slow  # 27-46 s of subprocesses: make test stays under its 15 minutes (a fresh clone's 1,015 s, 2026-12-07)
def test_sigterm_mid_grpo_saves_records_and_the_same_command_resumes_to_the_uninterrupted_curve(
        tmp_path: Path, session_dirs: dict) -> None:
    """GRPO stopped by SIGTERM (a kill, SLURM's preemption) mid-run: the step in progress ends and is saved, the
    command says where and exits 143, the run's record says it was interrupted; the same command resumes that run in
    its folder and ends with the uninterrupted run's steps, losses and rewards (sampling's random state resumes too)."""
    cache = session_dirs["cache"]
    _finish(_train(tmp_path / "full", cache, GRPO))
    full = _history(_runs(tmp_path / "full")[0])
    assert [h["step"] for h in full] == [float(s) for s in range(1, 7)]  # 12 vases / batch 2, one epoch

    logs = tmp_path / "logs"
    run, _ = _stopped_by_sigterm_at_step_2(logs, cache, GRPO)
    assert json.loads((run / ".vase-run.json").read_text())["status"] == "interrupted"

    text = _finish(_train(logs, cache, GRPO))
    assert _runs(logs) == [run] and "resuming" in text
    resumed = _history(run)
    assert [h["step"] for h in resumed] == [h["step"] for h in full]
    for a, b in zip(resumed, full):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6), (a, b)
        assert a["reward"] == pytest.approx(b["reward"], rel=1e-5, abs=1e-6), (a, b)
    assert json.loads((run / ".vase-run.json").read_text())["status"] == "finished"


def test_a_broken_checkpoint_the_rerun_would_resume_is_named_with_the_way_to_start_afresh(
        tmp_path: Path, session_dirs: dict) -> None:
    """The run's own last.ckpt cut short (a disk that filled as it was written by something else, a copy that
    stopped): the rerun's line named ``ckpt_path=``, which the user never gave, and not how to start afresh. Now it
    names the file, says resume=auto found it, and that resume=never starts afresh; the folder is kept as it is."""
    logs = tmp_path / "logs"
    cmd = ["callbacks.checkpoint.every_n_train_steps=5", "+callbacks.signal._target_=tests.signals.SignalAt",
           "stage.epochs=1"]
    run, ckpt = _stopped_by_sigterm_at_step_2(logs, session_dirs["cache"], cmd)
    ckpt.write_bytes(ckpt.read_bytes()[:4096])
    p = _train(logs, session_dirs["cache"], cmd)
    out, _ = p.communicate(timeout=600)
    lines = [ln for ln in out.splitlines() if ln.startswith(("config error:", "error:"))]
    assert p.returncode == 2 and "Traceback" not in out, out[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"config error: {ckpt}: the checkpoint this run would resume from "
                                                   f"(resume=auto found it in the run's folder) is unusable: "), lines
    assert "ckpt_path=" not in lines[0] and lines[0].endswith("resume=never starts afresh in a new folder, and this "
                                                               "one is kept as it is"), lines[0]
    assert len(ckpt.read_bytes()) == 4096 and _runs(logs) == [run]
