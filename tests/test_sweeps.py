"""The ablation workflow from the command line, launched as the README shows it (no hydra.sweep.dir override):
reward sweeps train GRPO from one shared SFT adapter, each job is its own W&B run in the sweep's group, and the
multirun ends with a summary that the leaderboard reads."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path

import pytest

from tests.conftest import ROOT, one_line, run_python, shipped_hypothesis
from tests.test_user_paths import tree_hash


def _wandb_record(job: Path) -> bytes:
    return next((job / "wandb").glob("offline-run-*/run-*.wandb")).read_bytes()


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_tau_sweep_runs_grpo_jobs_from_one_shared_sft_adapter(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # a grid without the preset's baseline (0.7) names one of its own: a baseline not in the grid is refused at the start
    p = run_python(["train.py", "-m", "sweep=tau", "reward.tau=0.5,0.9", "hypothesis.baseline=0.5", "debug=fast",
                    "logger=wandb", "val.vqa=open", "val.max_new_tokens=4", "render.resolution=64",
                    f"paths.log_dir={tmp_path / 'logs'}", f"paths.cache_dir={cache}"], cwd=ROOT, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    sweep = next((tmp_path / "logs" / "train" / "multiruns").iterdir())
    jobs = sorted(d for d in sweep.iterdir() if (d / ".hydra").is_dir())
    assert [j.name for j in jobs] == ["0", "1"]
    # GRPO ran in each job, both from the same SFT adapter, trained once
    assert len([d for d in (cache / "sft").iterdir() if d.is_dir()]) == 1
    for j in jobs:
        assert "reward" in json.loads((j / "train_history.json").read_text())[0]
        assert str(cache / "sft") in json.loads((j / "adapter" / "vase_lineage.json").read_text())["merged_adapters"][0]
    # one W&B run per job: different names and config hashes, one group for the sweep
    records = [_wandb_record(j) for j in jobs]
    assert b"grpo-tau=0.5" in records[0] and b"grpo-tau=0.9" in records[1]
    group = f"tau-{sweep.name}".encode()
    assert all(group in r for r in records)
    import re

    hashes = [re.search(rb"cfg:[0-9a-f]{8}", r).group(0) for r in records]
    assert hashes[0] != hashes[1]
    # the summary: one row per job with its overrides, reward per dimension, VQA per dimension, caption metrics
    summary = json.loads((sweep / "summary.json").read_text())
    assert [r["job"] for r in summary["jobs"]] == ["0", "1"]
    assert "reward.tau=0.5" in summary["jobs"][0]["overrides"] and "reward.tau=0.9" in summary["jobs"][1]["overrides"]
    for r in summary["jobs"]:
        assert {"reward", "reward/shape", "vqa/open/shape", "vqa/open/mean", "overall_score"} <= set(r)
    assert (sweep / "summary.csv").read_text().startswith("job,overrides,status")
    # the leaderboard reads the multirun directory: the paper's 19 rows and one row per job
    from vase.reports.leaderboard import build_leaderboard

    rows = build_leaderboard([str(sweep)])
    assert sum("(paper," in k for k in rows) == 19 and sum("reward.tau=" in k for k in rows) == 2


def test_a_reward_setting_on_an_sft_only_run_is_refused(tmp_path: Path) -> None:
    p = run_python(["train.py", "-m", "reward.tau=0.5,0.7", "logger=none", f"paths.log_dir={tmp_path}"], cwd=ROOT,
                   timeout=120)
    assert p.returncode == 2
    assert "config error: reward.tau is set, but stage=sft never uses the reward" in p.stderr
    # out of range on the default stage: the stage is said first (the range's fix alone would only lead to it)
    q = run_python(["train.py", "reward.tau=1.7", "logger=none", f"paths.log_dir={tmp_path}"], cwd=ROOT,
                   env={**os.environ, "VASE_CHECK_CONFIG": "1"}, timeout=120)
    assert q.returncode == 2 and q.stderr.strip().splitlines()[-1].startswith(
        "config error: reward.tau is set, but stage=sft never uses the reward"), q.stderr[-1000:]


def _hold_lock(path: str, out: str, k: int) -> None:
    from vase.io import file_lock

    with file_lock(Path(path)):
        start = time.time()
        time.sleep(0.3)
        Path(out, f"{k}.json").write_text(json.dumps([start, time.time()]))


def test_the_sft_cache_lock_serialises_concurrent_jobs(tmp_path: Path) -> None:
    ctx = get_context("spawn")
    procs = [ctx.Process(target=_hold_lock, args=(str(tmp_path / "k.lock"), str(tmp_path), k)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    (a0, a1), (b0, b1) = (json.loads((tmp_path / f"{k}.json").read_text()) for k in range(2))
    assert a1 <= b0 or b1 <= a0  # never inside the lock at the same time


@pytest.mark.parametrize("fixed, shape, expect_fabric", [(["shape"], 0.6, 0.2 * 0.4 / 0.85), (["shape"], 0.0, 0.2 / 0.85),
                                                         (None, 0.6, 0.2)])
def test_normalize_weights_rescales_the_others(fixed, shape, expect_fabric) -> None:
    from vase.rewards import reward_from_config

    r = reward_from_config(weights={"shape": shape}, normalize_weights=fixed)
    assert r.weights["shape"] == shape and r.weights["fabric"] == pytest.approx(expect_fabric)
    if fixed:
        assert sum(r.weights.values()) == pytest.approx(1.0)


def _fake_job(sweep: Path, n: int, shape_w: float, seed: int, shape_acc: float, others: float, sft: Path) -> None:
    from vase.annotate.vocab import DIMENSIONS

    job = sweep / str(n)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(f"- reward.weights.shape={shape_w}\n- seed={seed}\n")
    acc = {d: (shape_acc if d == "shape" else others) for d in DIMENSIONS}
    (job / "vqa_grpo.json").write_text(json.dumps({"vqa": {"open": {"accuracy": acc, "mean": 0.5, "n": 24 * 6}}}))
    (job / "adapter").mkdir()
    (job / "adapter" / "vase_lineage.json").write_text(json.dumps({"merged_adapters": [str(sft / "adapter")]}))
    (job / "train_history.json").write_text(json.dumps([{"step": 1.0, "reward": 0.3, "reward/shape": shape_w}]))


def test_ablation_report_states_whether_the_targets_held(tmp_path: Path) -> None:
    from vase.annotate.vocab import DIMENSIONS
    from vase.reports.ablation import write_ablation_report
    from vase.reports.sweep_summary import write_sweep_summary

    sft = tmp_path / "sft"
    sft.mkdir()
    (sft / "vqa_sft.json").write_text(json.dumps({"vqa": {"open": {"accuracy": {d: 0.5 for d in DIMENSIONS},
                                                                  "mean": 0.5, "n": 144}}}))
    good = tmp_path / "good"
    for n, (w, seed, shape) in enumerate([(0.0, 1, 0.4), (0.15, 1, 0.5), (0.6, 1, 0.7), (0.0, 2, 0.45),
                                          (0.15, 2, 0.5), (0.6, 2, 0.6)]):
        _fake_job(good, n, w, seed, shape, 0.5 - 1 / 24, sft)  # others one item below SFT: allowed
    v = write_ablation_report(good, shipped_hypothesis('sweeps/reward_weights.yaml'))
    assert v["i"] is True and v["ii"] is True
    # the fake jobs' training shape reward equals their weight: 0.6 > 0 on both seeds
    assert v["dose_response"] is True and v["dose_response_per_seed"]["1"] == {"at_max": 0.6, "at_0": 0.0}
    assert "**Dose-response**" in (good / "ablation.md").read_text()
    md = (good / "ablation.md").read_text()
    assert "**Target (i)**" in md and "**held**" in md and (good / "ablation.png").stat().st_size > 1000
    assert "| GRPO, shape weight 0.6 | 50.0 %" not in md and "65.0 %" in md  # mean over seeds: (0.7 + 0.6) / 2
    bad = tmp_path / "bad"
    for n, (w, seed, shape) in enumerate([(0.0, 1, 0.4), (0.15, 1, 0.5), (0.6, 1, 0.45), (0.0, 2, 0.45),
                                          (0.15, 2, 0.5), (0.6, 2, 0.6)]):
        _fake_job(bad, n, w, seed, shape, 0.5 - 2 / 24, sft)  # seed 1 below SFT; others two items below
    (bad / "2" / "train_history.json").write_text(json.dumps([{"step": 1.0, "reward": 0.3, "reward/shape": 0.0}]))
    (bad / "0" / "train_history.json").write_text(json.dumps([{"step": 1.0, "reward": 0.3, "reward/shape": 0.1}]))
    v = write_ablation_report(bad, shipped_hypothesis('sweeps/reward_weights.yaml'))
    assert v["i"] is False and v["ii"] is False
    assert v["dose_response"] is False  # seed 1: shape reward 0.0 at weight 0.6 against 0.1 at weight 0
    assert "**not held**" in (bad / "ablation.md").read_text()
    rows = json.loads(write_sweep_summary(bad)["json"].read_text())["jobs"]
    assert [r["overrides"] for r in rows][:2] == ["reward.weights.shape=0.0 seed=1", "reward.weights.shape=0.15 seed=1"]


def _sweep_cmd(logs: Path, cache: Path, *extra: str) -> list[str]:
    return [sys.executable, "train.py", "-m", *extra, "stage.module.lora.r=4,8", "debug=fast", "logger=none",
            "val.after=false", "render.resolution=64", "trainer.max_steps=3",
            "callbacks.checkpoint.every_n_train_steps=1", f"paths.log_dir={logs}", f"paths.cache_dir={cache}"]


def _failed_then_rerun(cmd: list[str], fail_env: dict[str, str], logs: Path) -> tuple[Path, str]:
    """Run a two-job sweep whose job 1 fails, check what the user gets, rerun the same command; the sweep folder and
    the rerun's stdout."""
    env = {**os.environ, "WANDB_MODE": "disabled"}
    first = run_python(cmd, cwd=ROOT, env={**env, **fail_env}, timeout=900)
    assert first.returncode == 1, first.stderr[-3000:]
    assert "Traceback" not in first.stderr, first.stderr[-3000:]
    assert "error: sweep job #1 (" in first.stderr and "stage.module.lora.r=8" in first.stderr
    assert "error: 1 sweep job(s) failed (#1 failed: " in first.stderr and "the same command runs" in first.stderr
    (sweep,) = list((logs / "train" / "multiruns").iterdir())
    assert json.loads((sweep / "0" / "adapter" / "adapter_config.json").read_text())["r"] == 4  # the other job went on
    record = json.loads((sweep / "1" / ".vase-run.json").read_text())
    assert record["status"] == "failed" and record["reason"], record
    jobs = {r["job"]: r for r in json.loads((sweep / "summary.json").read_text())["jobs"]}
    assert jobs["0"]["status"] == "done" and jobs["1"]["status"].startswith("failed: ")
    assert "**Job 1 did not finish** (failed: " in (sweep / "summary.md").read_text()
    second = run_python(cmd, cwd=ROOT, env=env, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    assert list((logs / "train" / "multiruns").iterdir()) == [sweep]
    assert json.loads((sweep / "1" / "adapter" / "adapter_config.json").read_text())["r"] == 8
    assert [int(h["step"]) for h in json.loads((sweep / "1" / "train_history.json").read_text())] == [0, 1, 2]
    assert json.loads((sweep / ".vase-run.json").read_text())["status"] == "finished"
    assert [r["status"] for r in json.loads((sweep / "summary.json").read_text())["jobs"]] == ["done", "done"]
    return sweep, second.stdout


@pytest.mark.slow
def test_a_killed_submitit_job_fails_alone_and_the_same_command_completes_the_sweep(tmp_path: Path) -> None:
    """cluster=local (the submitit path that cluster=slurm takes, with submitit's local executor), job 1's process
    SIGKILLed at its second step (as an out-of-memory kill ends a cluster job): job 0 finishes, the report covers it
    and names job 1, whose record says it was lost; the same command runs only job 1 (from its checkpoint, each step
    once) and completes the report. Once a 40-line UncompletedJobError with no summary at all."""
    logs = tmp_path / "logs"
    cmd = _sweep_cmd(logs, tmp_path / "cache", "cluster=local", "+callbacks.signal._target_=tests.signals.SignalAt")
    sweep, _ = _failed_then_rerun(cmd, {"VASE_TEST_SIGNAL_AT": "1:9", "VASE_TEST_SIGNAL_JOB": "1"}, logs)
    assert (sweep / ".submitit").is_dir()
    assert json.loads((sweep / "1" / ".vase-run.json").read_text())["resumed_from"] == "failed"


@pytest.mark.slow  # 27-46 s of subprocesses: make test stays under its 15 minutes (a fresh clone's 1,015 s, 2026-12-07)
def test_a_parallel_sweep_runs_its_jobs_side_by_side_a_killed_one_fails_alone_and_the_same_command_completes_it(
        tmp_path: Path) -> None:
    """hydra/launcher=parallel on this machine's cores: the two jobs run at once, each in its own process with the
    threads it would use alone and its lines numbered; job 1's process SIGKILLed at its second step (an out-of-memory
    kill): job 0 finishes, the report names job 1 as lost, and the same command runs only job 1 and completes it."""
    logs = tmp_path / "logs"
    cmd = _sweep_cmd(logs, tmp_path / "cache", "hydra/launcher=parallel", "hydra.launcher.jobs=2",
                     "+callbacks.signal._target_=tests.signals.SignalAt")
    env = {**os.environ, "WANDB_MODE": "disabled"}
    first = run_python(cmd, cwd=ROOT, env={**env, "VASE_TEST_SIGNAL_AT": "1:9", "VASE_TEST_SIGNAL_JOB": "1"},
                       timeout=900)
    said = first.stdout + first.stderr
    assert first.returncode == 1, said[-3000:]
    assert "Launching 2 jobs on this machine, 2 at a time, each with the threads it would use alone" in said
    assert "[#0] sft: step 3/3" in said and "[#1] sft: step 1/3" in said, said[-3000:]  # whose each line is
    assert "error: sweep job #1 (" in first.stderr and "ended without a result (killed by SIGKILL" in first.stderr
    (sweep,) = list((logs / "train" / "multiruns").iterdir())
    assert json.loads((sweep / "0" / "adapter" / "adapter_config.json").read_text())["r"] == 4  # the other job went on
    record = json.loads((sweep / "1" / ".vase-run.json").read_text())
    assert record["status"] == "failed" and "without a result" in record["reason"], record
    # each job's record names the threads that made its numbers: those a job alone takes (torch's default here)
    alone = run_python(["-c", "import torch; print(torch.get_num_threads())"],
                       env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}, timeout=120)
    assert json.loads((sweep / "0" / ".vase-run.json").read_text())["machine"]["threads"] == int(alone.stdout)
    assert "Job 1 did not finish" in (sweep / "summary.md").read_text()
    second = run_python(cmd, cwd=ROOT, env=env, timeout=900)
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    assert list((logs / "train" / "multiruns").iterdir()) == [sweep]
    assert "keeping the finished sweep job" in second.stdout
    assert json.loads((sweep / "1" / "adapter" / "adapter_config.json").read_text())["r"] == 8
    assert [r["status"] for r in json.loads((sweep / "summary.json").read_text())["jobs"]] == ["done", "done"]


@pytest.mark.slow  # heavy (two sweeps of two jobs each): make test-slow keeps the default suite under 15 minutes
def test_a_parallel_sweep_prints_the_numbers_of_one_run_one_job_at_a_time(tmp_path: Path, session_dirs: dict) -> None:
    """The parallel launcher's jobs keep the threads they would use alone (threads asleep when idle): their losses
    are those of the same sweep on the basic launcher, to the last bit, with no thread count given anywhere. At the
    quick sweep's width (128) and a batch of 8 the thread count shows in the last bits, so the check can fail: on an
    Intel Xeon with 2 cores (2026-12-06) one thread a job (hydra.launcher.threads_per_job=1) made job 1's third loss
    6.947877407 against 6.947876930. Not asserted here: whether one thread changes a bit depends on the CPU's MKL."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")}
    wide = ["+model.tiny.hidden_size=128", "+model.tiny.intermediate_size=256", "stage.batch_size=8",
            "data.limit_train=24"]
    losses = {}
    for name, launcher in (("basic", ["hydra/launcher=basic"]), ("parallel", ["hydra/launcher=parallel"])):
        logs = tmp_path / name
        p = run_python([*_sweep_cmd(logs, session_dirs["cache"], *launcher), *wide], cwd=ROOT,
                       env={**env, "WANDB_MODE": "disabled"}, timeout=900)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
        (sweep,) = list((logs / "train" / "multiruns").iterdir())
        losses[name] = [[h["loss"] for h in json.loads((sweep / j / "train_history.json").read_text())]
                        for j in ("0", "1")]
    assert losses["parallel"] == losses["basic"] and len(losses["basic"][1]) == 3, losses


@pytest.mark.parametrize("setting", ["hydra.launcher.jobs=0", "hydra.launcher.threads_per_job=two"])
def test_a_bad_parallel_launcher_setting_is_one_line_naming_its_key(tmp_path: Path, setting: str) -> None:
    p = run_python(["train.py", "-m", "hydra/launcher=parallel", "stage.module.lora.r=4,8", "debug=fast", "logger=none",
                    setting, f"paths.log_dir={tmp_path}"], cwd=ROOT, env={**os.environ, "WANDB_MODE": "disabled"},
                   timeout=300)
    assert p.returncode == 2, (p.stdout + p.stderr)[-2000:]
    assert "Traceback" not in p.stderr and f"config error: {setting.split('=')[0]}=" in p.stderr, p.stderr[-2000:]
    assert "must be 'auto' or a positive number" in p.stderr
    assert not list(tmp_path.glob("*/multiruns/*/0")), "no job ran"


@pytest.mark.slow  # heavy (a sweep's SFT and GRPO jobs in subprocesses, twice): make test-slow
def test_a_parallel_sweep_stopped_while_its_shared_sft_trains_starts_no_job_and_the_same_command_completes_it(
        tmp_path: Path) -> None:
    """hydra/launcher=parallel trains the shared SFT in the sweep's process before any job starts: a SIGTERM there
    (a Ctrl-C, a scheduler's stop) ends the sweep as a job would end (exit 143, no traceback), with no job process
    started; the same command then trains it, runs both GRPO jobs side by side from it, and ends with its report."""
    cache, logs = tmp_path / "cache", tmp_path / "logs"
    cmd = [sys.executable, "train.py", "-m", "sweep=tau", "reward.tau=0.5,0.9", "hypothesis.baseline=0.5", "debug=fast",
           "hydra/launcher=parallel", "logger=none", "render.resolution=64", "+callbacks.signal._target_=tests.signals.SignalAt",
           f"paths.log_dir={logs}", f"paths.cache_dir={cache}"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    first = run_python(cmd, cwd=ROOT, env={**env, "VASE_TEST_SIGNAL_AT": "1:15", "VASE_TEST_SIGNAL_JOB": "0"},
                       timeout=900)
    said = first.stdout + first.stderr
    assert first.returncode == 143, said[-3000:]
    assert "Traceback" not in said and "[#0]" not in said and "[#1]" not in said, said[-3000:]
    assert not list(logs.glob("train/multiruns/*/*/train_history.json"))
    assert not [d for d in (cache / "sft").iterdir() if d.is_dir() and not d.name.startswith(".")]  # none half-made
    second = run_python(cmd, cwd=ROOT, env=env, timeout=900)
    said = second.stdout + second.stderr
    assert second.returncode == 0, said[-3000:]
    assert "training the shared SFT adapter" in said and "[#0] grpo: step" in said and "[#1] grpo: step" in said
    assert len([d for d in (cache / "sft").iterdir() if d.is_dir()]) == 1
    (sweep,) = [d for d in (logs / "train" / "multiruns").iterdir() if (d / "summary.json").is_file()]
    assert [r["status"] for r in json.loads((sweep / "summary.json").read_text())["jobs"]] == ["done", "done"]


def test_a_job_that_fails_in_the_sweep_s_process_is_named_and_the_others_finish(tmp_path: Path,
                                                                                session_dirs: dict) -> None:
    """The basic launcher: job 1 raises; job 0 still ends with its adapter, the summary names job 1, rc 1; the same
    command runs only job 1 and completes the sweep."""
    logs = tmp_path / "logs"
    cmd = _sweep_cmd(logs, session_dirs["cache"], "+callbacks.fail._target_=tests.signals.RaiseAt")
    _, rerun = _failed_then_rerun(cmd, {"VASE_TEST_RAISE_JOB": "1"}, logs)
    assert "keeping the finished sweep job" in rerun


def test_the_slurm_cluster_config_sets_launcher_and_trainer(tmp_path: Path, session_dirs: dict) -> None:
    cfg = _compose_slurm("cluster.partition=gpu", "cluster.nodes=2", "trainer=deepspeed_zero3")
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.nodes, launcher.gpus_per_node, launcher.tasks_per_node) == ("gpu", 2, 8, 8)
    assert (cfg.trainer.devices, cfg.trainer.num_nodes) == (8, 2)


def _compose_slurm(*overrides: str):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tests.conftest import CONF
    from vase.config import register_resolvers

    register_resolvers()  # conf/cluster/slurm.yaml's ${vase.slurm_*} (train.py registers them on import)

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", ["cluster=slurm", *overrides], return_hydra_config=True)
    GlobalHydra.instance().clear()
    return cfg


def test_a_cpu_partition_asks_for_no_gpu_and_one_task_per_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cluster.gpus_per_node=0 once gave sbatch --gpus-per-node=0 --ntasks-per-node=0 ("Invalid numeric value").
    The sbatch text is read without a cluster: submitit refuses to build its SLURM executor where ``srun`` is not on
    PATH (a user's machine, a fresh CI machine), and writing the script needs nothing of SLURM."""
    cfg = _compose_slurm("cluster.partition=debug", "cluster.gpus_per_node=0")
    launcher = cfg.hydra.launcher
    assert (launcher.gpus_per_node, launcher.tasks_per_node, cfg.trainer.devices) == (None, 1, 1)
    two = _compose_slurm("cluster.gpus_per_node=0", "cluster.tasks_per_node=2", "trainer=ddp",
                         "trainer.accelerator=cpu")
    assert (two.hydra.launcher.gpus_per_node, two.hydra.launcher.tasks_per_node, two.trainer.devices) == (None, 2, 2)
    gpu = _compose_slurm("cluster.gpus_per_node=4")
    assert (gpu.hydra.launcher.gpus_per_node, gpu.hydra.launcher.tasks_per_node, gpu.trainer.devices) == (4, 4, 4)
    # the sbatch script submitit writes from it, with the parameters passed as hydra's submitit launcher passes them
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf
    from submitit.slurm.slurm import SlurmExecutor

    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    monkeypatch.setattr(SlurmExecutor, "affinity", classmethod(lambda cls: 2))  # "srun is here": only its lookup
    executor = submitit.AutoExecutor(cluster="slurm", folder=tmp_path / "sbatch")
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()
                                  if k not in ("submitit_folder", "max_num_timeout", "_target_")})
    script = executor._executor._make_submission_file_text("true", "uid")
    assert "--ntasks-per-node=1" in script and "gpu" not in script.lower(), script


def test_the_sweep_summary_shows_what_differs_between_jobs(tmp_path: Path) -> None:
    from vase.reports.sweep_summary import write_sweep_summary

    shared = ["cluster=slurm", "cluster.partition=debug", "trainer.max_steps=4", "debug=fast"]
    for n, r in enumerate((4, 8)):
        job = tmp_path / str(n)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in [*shared[:2],
                                                                                     f"stage.module.lora.r={r}",
                                                                                     *shared[2:]]))
    paths = write_sweep_summary(tmp_path)
    md = paths["md"].read_text()
    assert md.startswith(f"All jobs: `{' '.join(shared)}`")
    rows = [line for line in md.splitlines() if line.startswith("| 0 ") or line.startswith("| 1 ")]
    assert [line.split("|")[2].strip() for line in rows] == ["stage.module.lora.r=4", "stage.module.lora.r=8"]
    jobs = json.loads(paths["json"].read_text())["jobs"]
    assert jobs[0]["overrides"] == "stage.module.lora.r=4" and "cluster=slurm" in jobs[0]["all_overrides"]


@pytest.mark.slow
def test_reward_weights_sweep_as_the_readme_shows_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """python train.py -m sweep=reward_weights (made fast): six GRPO jobs, one shared SFT, one W&B group, a summary
    row per job, and the shape weight reaching each job's reward rescaled as documented."""
    p = run_python(["train.py", "-m", "sweep=reward_weights", "debug=fast", "logger=wandb", "render.resolution=64",
                    "stage.module.max_completion_length=8", f"paths.log_dir={tmp_path / 'logs'}",
                    f"paths.cache_dir={tmp_path / 'cache'}"], cwd=ROOT, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    sweep = next((tmp_path / "logs" / "train" / "multiruns").iterdir())
    rows = json.loads((sweep / "summary.json").read_text())["jobs"]
    assert len(rows) == 6 and all("reward" in r for r in rows)
    assert len([d for d in (tmp_path / "cache" / "sft").iterdir() if d.is_dir()]) == 1
    group = f"reward_weights-{sweep.name}".encode()
    names = set()
    for job in (d for d in sweep.iterdir() if (d / ".hydra").is_dir()):
        record = _wandb_record(job)
        assert group in record
        names.add(record.split(b"grpo-w_shape=")[1][:12])
        cfg = (job / "config.yaml").read_text()
        assert "normalize_weights:\n  - shape" in cfg or "normalize_weights:\n    - shape" in cfg
    assert len(names) == 6
    # the sweep's own folder: the command that makes the whole sweep again, not a placeholder
    from vase.runs.describe import main as runs_main

    assert runs_main([str(sweep)]) == 0
    again = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  again:"))
    assert again.endswith("python train.py -m sweep=reward_weights debug=fast logger=wandb render.resolution=64 "
                          f"stage.module.max_completion_length=8 paths.log_dir={tmp_path / 'logs'} "
                          f"paths.cache_dir={tmp_path / 'cache'}"), again


def test_every_sweep_plots_its_swept_key_against_reward_and_accuracy(tmp_path: Path) -> None:
    from PIL import Image

    from vase.eval.stats import wilson_interval
    from vase.reports.sweep_summary import sweep_plot, write_sweep_summary

    sft = tmp_path / "sft"
    sft.mkdir()
    sweep = tmp_path / "sweep"
    for n, (w, seed, shape) in enumerate([(0.0, 1, 0.4), (0.6, 1, 0.7), (0.0, 2, 0.45), (0.6, 2, 0.6)]):
        _fake_job(sweep, n, w, seed, shape, 0.5, sft)
    paths = write_sweep_summary(sweep)
    assert paths["png"] == sweep / "sweep.png" and "![" in paths["md"].read_text()
    w, h = Image.open(paths["png"]).size
    assert w > 600 and h > 300
    rows = json.loads(paths["json"].read_text())["jobs"]
    assert rows[0]["vqa/open/n_per_dimension"] == 24
    # the accuracy bars pool the items of the jobs at one value: 0.4 and 0.45 of 24 each -> 21 of 48
    lo, hi = wilson_interval(0.4 * 24 + 0.45 * 24, 48)
    assert lo < 21 / 48 < hi and hi - lo < 0.3
    # nothing swept (one job, or seeds only): no plot, nothing claimed
    assert sweep_plot(tmp_path / "x.png", rows[:1], {"0": {"seed": "1"}}) is None and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("protocol", ["open", "ll"])
def test_the_ablation_targets_are_decided_on_paired_intervals_when_answers_are_kept(tmp_path: Path,
                                                                                   protocol: str) -> None:
    """One item more at the larger weight beats weight 0 on points, but not on a paired interval; 20 of 24 against
    8 of 24 does on both. Where the jobs also scored by option likelihood (ll), the decision is on those (the open
    answers then say the opposite, and must be ignored)."""
    from vase.annotate.vocab import DIMENSIONS
    from vase.reports.ablation import write_ablation_report

    def block(shape_right: int, p: str) -> dict:
        items = {d: {f"v{i}#{p}#{d}": float(i < (shape_right if d == "shape" else 12)) for i in range(24)}
                 for d in DIMENSIONS}
        acc = {d: sum(v.values()) / 24 for d, v in items.items()}
        return {"accuracy": acc, "mean": sum(acc.values()) / 6, "n": 144, "items": items}

    def vqa(shape_right: int) -> dict:
        if protocol == "open":
            return {"open": block(shape_right, "open")}
        return {"ll": block(shape_right, "ll"), "open": block(32 - shape_right, "open")}

    for name, (low, high) in {"clear": (8, 20), "noise": (12, 13)}.items():
        sft = tmp_path / name / "sft"
        sft.mkdir(parents=True)
        (sft / "vqa_sft.json").write_text(json.dumps({"vqa": vqa(low)}))
        sweep = tmp_path / name / "sweep"
        for n, (w, seed, right) in enumerate([(0.0, 1, low), (0.6, 1, high), (0.0, 2, low), (0.6, 2, high)]):
            _fake_job(sweep, n, w, seed, right / 24, 0.5, sft)
            (sweep / str(n) / "vqa_grpo.json").write_text(json.dumps({"vqa": vqa(right)}))
        v = write_ablation_report(sweep, shipped_hypothesis('sweeps/reward_weights.yaml'))
        assert v["i_rule"].startswith("paired") and v["protocol"] == protocol
        assert "\n## " not in v["table"] and "**Target (i)**" in v["table"] and v["machine"]["cpus"]
        d = v["i_per_seed"]["1"]["max_minus_0"]
        assert d["n"] == 24 and d["diff"] == pytest.approx((high - low) / 24)
        assert v["i"] is (name == "clear"), (name, d)
        assert "95 % CI" in (sweep / "ablation.md").read_text()


def test_the_sfts_own_subset_keeps_one_shared_adapter_whatever_grpos_subset(tmp_path: Path, session_dirs: dict) -> None:
    from tests.conftest import compose_cfg
    from vase.pipeline.sft_cache import sft_key

    def key(*extra: str) -> str:
        return sft_key(compose_cfg("train", ["experiment=grpo_sanity", *extra], tmp_path, session_dirs))[0]

    assert key("data.limit_train=8") == key("data.limit_train=16") == key()  # sft.limit_train=null: all vases
    assert key("data.pixel_cache_mb=0") == key()  # views kept in memory or not: the same tensors, the same adapter
    assert key("sft.limit_train=8") != key()
    plain = ["stage=grpo", "sft_init=true", "+stage@sft=sft"]
    k8 = sft_key(compose_cfg("train", [*plain, "data.limit_train=8"], tmp_path, session_dirs))[0]
    k16 = sft_key(compose_cfg("train", [*plain, "data.limit_train=16"], tmp_path, session_dirs))[0]
    assert k8 != k16  # without sft.limit_train the SFT trains on the run's subset, as before
    # zoom samples with retrieval are asked with format=asked since 2026-11-27: an adapter trained before is not reused
    _, spec = sft_key(compose_cfg("train", ["experiment=grpo_sanity", "data.zoom=true", "retrieval.k=3"], tmp_path,
                                  session_dirs))
    assert spec["zoom_context"] == "asked" and "zoom_context" not in sft_key(
        compose_cfg("train", ["experiment=grpo_sanity", "data.zoom=true"], tmp_path, session_dirs))[1]


def test_a_failed_sweep_job_is_reported_when_it_fails(capsys) -> None:
    """Hydra keeps a job's exception until every job has run: the summary callback says it at once."""
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    from vase.reports.sweep_summary import SweepSummary

    cfg = OmegaConf.create({"hydra": {"job": {"num": 3}, "runtime": {"output_dir": "/runs/x/3"}, "mode": "MULTIRUN",
                                      "overrides": {"task": ["reward.weights.shape=0.6", "seed=2"]}}})
    SweepSummary().on_job_end(cfg, JobReturn(status=JobStatus.COMPLETED, _return_value=1.0))
    assert capsys.readouterr().err == ""
    single = OmegaConf.merge(cfg, {"hydra": {"mode": "RUN"}})  # a single run's error is its own, not a sweep job's
    SweepSummary().on_job_end(single, JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("boom")))
    assert capsys.readouterr().err == ""
    SweepSummary().on_job_end(cfg, JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("boom")))
    err = capsys.readouterr().err
    assert "sweep job #3 (reward.weights.shape=0.6 seed=2) failed: RuntimeError: boom" in err and "/runs/x/3" in err


def test_submitits_repeated_sacct_warning_is_shown_once_with_its_meaning() -> None:
    code = ("from vase.sacct import quiet_sacct_warnings\n"
            "quiet_sacct_warnings(); quiet_sacct_warnings()\n"
            "from submitit.core.logger import get_logger\n"
            "for i in range(20): get_logger().warning(f'Call #{i} - Bypassing sacct error X, status may be inaccurate.')\n"
            "get_logger().warning('another warning')\n")
    p = run_python(["-c", code], cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("Bypassing sacct error") == 1 and "no SLURM accounting" in p.stderr
    assert "another warning" in p.stderr


def cluster_failure(stdout: str) -> str:
    r"""What failed in a cluster check, first in a failing test's message (its output's tail, all the message held
    before, began inside a failing part's job logs and cut off the part's name and its conditions, 2026-12-04): each
    FAIL line, and each failing part's findings from the check's cluster_check.json, its long logs left out.

    >>> cluster_failure("PASS  ddp  (1 s)\nFAIL  two-node  (2 s)\nFAIL: cluster check, 2 parts, 0.1 min (/nowhere)")
    'FAIL  two-node  (2 s)\nFAIL: cluster check, 2 parts, 0.1 min (/nowhere)\n'
    """
    lines = [ln for ln in stdout.splitlines() if ln.startswith("FAIL")]
    where = re.search(r"\((/[^()]+)\)\s*$", stdout)
    found = Path(where.group(1)) / "cluster_check.json" if where else None
    detail = ""
    if found is not None and found.is_file():
        results = json.loads(found.read_text()).get("results") or {}
        detail = json.dumps({name: {k: v for k, v in r.items() if not isinstance(v, (list, dict)) or len(str(v)) < 300}
                             for name, r in results.items() if not r.get("passed")}, indent=1, default=str)
    return "\n".join(lines) + "\n" + (detail + "\n" if detail else "")


def _run_unwinding(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``cmd`` run as `subprocess.run` would, but past ``timeout`` (under pytest-timeout's 30 minutes) it gets SIGTERM,
    on which the cluster check stops its SLURM daemons and jobs, rather than SIGKILL, which left them running (a hung
    check's daemons outlived the test's timeout once, 2026-12-06)."""
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            out, err = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        err = f"{err}\n(stopped after {timeout:.0f} s)"
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


@pytest.mark.slow
def test_a_node_drained_by_a_slow_kill_is_resumed_and_said_and_any_other_is_only_said() -> None:
    """SLURM drains a node when a job step's processes outlive its kill timeout ("Kill task failed"); on 2 loaded
    cores it once did, and every later job of the cluster check waited until the test's timeout (2026-12-06). On the
    real loopback cluster: such a node is resumed by the cluster's watchdog and recorded; a node drained for another
    reason is recorded and left as it is."""
    from vase.checks.cluster_check import node_lines
    from vase.checks.slurm import LocalSlurm

    deps = subprocess.run(["make", "--no-print-directory", "slurm-deps"], cwd=ROOT, capture_output=True, text=True,
                          timeout=1200)
    assert deps.returncode == 0, deps.stdout[-2000:] + deps.stderr[-2000:]
    with LocalSlurm(first_job_id=7001) as slurm:
        assert "UnkillableStepTimeout=300" in slurm.conf.read_text()
        (node,) = slurm.node_names
        drain = slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=Kill task failed",
                          timeout=30)
        assert drain.returncode == 0, drain.stderr
        for _ in range(60):  # the watchdog looks every 5 s
            if slurm.events and slurm.node_states()[0][1] in ("idle", "mixed", "allocated"):
                break
            time.sleep(1)
        assert [(e["node"], e["reason"], e["resumed"]) for e in slurm.events] == [(node, "Kill task failed", True)]
        assert slurm.node_states()[0][1] == "idle", slurm.node_states()
        slurm.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=disk check", timeout=30)
        for _ in range(60):
            if len(slurm.events) > 1:
                break
            time.sleep(1)
        assert slurm.events[1]["reason"] == "disk check" and not slurm.events[1]["resumed"], slurm.events
        assert "drain" in slurm.node_states()[0][1]  # left as it was
        time.sleep(6)
        assert len(slurm.events) == 2  # said once
    lines = node_lines(slurm.events)
    assert lines[0].startswith(f"node {node} ") and lines[0].endswith("(Kill task failed): resumed, its jobs went on")
    assert lines[1].endswith("(disk check): left as it was; jobs on it wait"), lines


@pytest.mark.slow
def test_the_cluster_check_passes_on_a_real_slurm_cluster_its_time_limit_part_on_a_loaded_machine() -> None:
    """make cluster-check's ten parts on a one-node, then a two-node SLURM cluster on the loopback (Debian's slurm-wlm,
    installed by make when missing): a sweep on a CPU partition, preemption, a time limit, two ranks per node, GRPO on
    two ranks; then SFT and GRPO across two nodes, preemption across them, a two-node sweep, and a job asking for more
    nodes than there are refused; both clusters at once. The time-limit part runs beside parts that train (the
    sweep's, preemption's and the others'), whose jobs and training share its node and both cores: its length is its training time (trainer.max_time), not a step count, so
    it is still warned, saved, requeued and resumed on a loaded machine (a step count that a fast machine finished
    before the warning failed CI). The preemption part signals its own job, not the one running beside it."""
    deps = subprocess.run(["make", "--no-print-directory", "slurm-deps"], cwd=ROOT, capture_output=True, text=True,
                          timeout=1200)
    assert deps.returncode == 0, deps.stdout[-2000:] + deps.stderr[-2000:]
    before = set(Path(tempfile.gettempdir()).glob("vase-slurm-*"))  # an earlier killed run's, not this check's
    p = _run_unwinding([sys.executable, "-m", "vase.checks.cluster_check"], timeout=1500)
    assert p.returncode == 0, cluster_failure(p.stdout) + p.stdout[-3000:] + p.stderr[-2000:]
    for part in ("sweep", "preemption", "time-limit", "ddp", "grpo-ddp", "two-node", "grpo-two-node",
                 "preemption-two-node", "sweep-two-node", "too-many-nodes"):
        assert f"PASS  {part}" in p.stdout, p.stdout[-4000:]
    beside = re.search(r"PASS  time-limit  \([0-9.]+ s, beside ([^)]*)\)", p.stdout)
    # beside at least two parts that train (which ones overlap it depends on the machine's load: under a loaded run
    # the preemption part once finished before it began), so it ran on a loaded machine
    training = {"sweep", "preemption", "ddp", "grpo-ddp", "two-node", "grpo-two-node", "preemption-two-node"}
    assert beside and len(training & set(beside.group(1).split(", "))) >= 2, p.stdout[-4000:]
    # nothing left behind: no daemon of the check's clusters, no cluster folder
    made = set(Path(tempfile.gettempdir()).glob("vase-slurm-*")) - before
    assert not made, made
    left = [line for line in subprocess.run(["pgrep", "-af", "vase-slurm-"], capture_output=True,
                                            text=True).stdout.splitlines()
            if not any(str(old) in line for old in before)]
    assert not left, left


def test_sweep_plot_leaves_out_terms_weighted_zero_in_every_job(tmp_path: Path) -> None:
    """sweep.png's reward panel: a term at weight 0 in every job (invrender, learned by default) is not drawn; a
    swept dimension at 0 in some jobs is; the weights come from each job's config.yaml, not from the values."""
    from vase.reports.jobs import job_row
    from vase.reports.sweep_summary import plotted_terms

    rows = []
    for n, shape_w in enumerate((0.0, 0.6)):
        job = tmp_path / str(n)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(f"- reward.weights.shape={shape_w}\n")
        (job / "config.yaml").write_text(
            "reward:\n  effective_weights: {fabric: 0.5, shape: " + str(shape_w) + "}\n  terms:\n"
            "    fabric: {weight: 0.2}\n    shape: {weight: 0.2}\n    penalty: {weight: 1.0}\n"
            "    invrender: {weight: 0.0}\n    learned: {weight: 0.0}\n")
        hist = {"step": 1.0, "reward": 0.3, "reward/fabric": 0.5, "reward/shape": 0.1, "reward/penalty": 0.0,
                "reward/invrender": 0.0, "reward/learned": 0.0, "reward/weighted": 0.3}
        (job / "train_history.json").write_text(json.dumps([hist]))
        rows.append(job_row(job))
    assert rows[0]["term_weights"]["shape"] == 0.0 and rows[1]["term_weights"]["shape"] == 0.6
    assert plotted_terms(rows) == ["reward/fabric", "reward/penalty", "reward/shape"]
    # a job without its config: nothing is known to be unweighted, so nothing is left out
    del rows[1]["term_weights"]
    assert "reward/invrender" in plotted_terms(rows)


def test_a_slurm_limit_too_short_for_the_warning_signal_is_refused_before_submitting(tmp_path: Path) -> None:
    """slurmctld sends --signal's warning at its first limit test (every ~30 s) with under delay + 30 s left: a 2-minute
    limit with submitit's 90 s delay gets USR2 at launch and dies on every restart (seen on Slurm 22.05), so the sweep
    is refused, naming both keys, before anything reaches sbatch."""
    p = run_python(["train.py", "-m", "cluster=slurm", "cluster.gpus_per_node=0", "cluster.timeout_min=2",
                    "hydra.launcher.signal_delay_s=90", "debug=fast", f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT,
                   timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "cluster.timeout_min=2" in p.stderr and "hydra.launcher.signal_delay_s=90" in p.stderr
    assert "Traceback" not in p.stderr and not list((tmp_path / "logs").rglob(".submitit"))


SLURM_BINARIES = ("srun", "sbatch", "squeue", "scancel", "sinfo", "sacct", "scontrol", "salloc", "munged", "slurmctld",
                  "slurmd")


@pytest.mark.slow  # heavy (whole runs in subprocesses, or a 30 s fixture): make test-slow keeps the default suite short
def test_the_slurm_facing_tests_pass_on_a_machine_without_slurm(tmp_path: Path) -> None:
    """A machine that once ran `make cluster-check` has SLURM and munge; a user's has not, and `make test` must pass
    there. The default suite's SLURM-facing tests run here in a mount namespace where an empty, non-executable file is
    bound over every SLURM binary on PATH (a stand-in ``srun`` put first on PATH is hidden the same way, so the hiding
    itself is checked even on a machine without SLURM)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare to hide SLURM's binaries")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\nexit 0\n")
    (fake / "srun").chmod(0o755)
    empty = tmp_path / "empty"
    empty.write_text("")
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    # every copy on PATH, not only the first: the stand-in shadows a real srun where SLURM is installed
    found = sorted({str(Path(p).resolve()) for b in SLURM_BINARIES for d in env["PATH"].split(os.pathsep)
                    for p in [shutil.which(b, path=d)] if p})
    binds = "".join(f"mount --bind {empty} {p} && " for p in found)
    check = f"{sys.executable} -c \"import shutil,sys; sys.exit(any(shutil.which(b) for b in {SLURM_BINARIES!r}))\""
    tests = ["tests/test_sweeps.py::test_a_cpu_partition_asks_for_no_gpu_and_one_task_per_node",
             "tests/test_sweeps.py::test_the_slurm_cluster_config_sets_launcher_and_trainer",
             "tests/test_sweeps.py::test_a_slurm_limit_too_short_for_the_warning_signal_is_refused_before_submitting",
             "tests/test_resume.py::test_slurm_requeue_signal_saves_before_submitit_requeues"]
    cmd = (f"{binds}{check} && {sys.executable} -m pytest -q -p no:cacheprovider --basetemp={tmp_path / 'inner'} "
           + " ".join(tests))
    p = subprocess.run(["unshare", "--mount", "sh", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0 and "unshare failed" in p.stderr:
        pytest.skip(f"this machine refuses a mount namespace: {p.stderr.strip()[-200:]}")
    assert str(fake / "srun") in found
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-2000:])
    assert "4 passed" in p.stdout, p.stdout[-2000:]


def test_a_multi_node_job_takes_its_master_address_from_the_allocation_when_node_names_do_not_resolve() -> None:
    from vase.pipeline.build import slurm_master_address

    calls = []

    def scontrol(args: list[str]):
        calls.append(args)
        out = {"hostnames": "vase-n1\nvase-n2\n", "node": "NodeName=vase-n1 Arch=x86_64 NodeAddr=10.1.2.3 Port=1"}
        return type("P", (), {"returncode": 0, "stdout": out[args[2]]})()

    env = {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "vase-n[1-2]"}
    if shutil.which("scontrol") is None:
        pytest.skip("no scontrol on PATH (the function asks SLURM only where its tools are)")
    assert slurm_master_address(env, run=scontrol) == "10.1.2.3" and env["MASTER_ADDR"] == "10.1.2.3"
    assert calls[0] == ["scontrol", "show", "hostnames", "vase-n[1-2]"]
    # one node, or an address already given: nothing asked, nothing set
    assert slurm_master_address({"SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "a"}, run=scontrol) is None
    given = {**env, "MASTER_ADDR": "head"}
    assert slurm_master_address(given, run=scontrol) is None and given["MASTER_ADDR"] == "head"
    # a first node whose name resolves is left to Lightning
    assert slurm_master_address({"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "localhost"},
                                run=lambda a: type("P", (), {"stdout": "localhost\n"})()) is None


def test_a_resumed_ddp_epoch_continues_each_ranks_own_shard() -> None:
    """Lightning's sampler wrapper sharded a resumed (shortened) epoch against the full length and failed; vase's
    sampler shards itself, as DistributedSampler does, and skips each rank's own consumed items."""
    from vase.data.loader import ResumableSampler

    for n in (7, 8):
        full = [list(ResumableSampler(n, seed=5, rank=r, world=2)) for r in (0, 1)]
        assert set(full[0]) | set(full[1]) == set(range(n)) and len(full[0]) == len(full[1]) == -(-n // 2)
        for r in (0, 1):
            s = ResumableSampler(n, seed=5, rank=r, world=2)
            s.resume(epoch=0, skip=2)
            assert list(s) == full[r][2:] and len(s) == len(full[r])


@pytest.mark.slow  # heavy (whole runs in subprocesses, or a 30 s fixture): make test-slow keeps the default suite short
@pytest.mark.parametrize(("args", "expect"), [
    (["sweep=reward_weights"], "hypothesis: this sweep compares reward.weights.shape against 0.0 on heldout/shape_right, "
                               "heldout/fabric_right, heldout/technique_right, heldout/dating_right, "
                               "heldout/decoration_right, heldout/attribution_right (replicates: seed); at its end "
                               "ablation.md/json/png"),
    (["sweep=tau", "val.heldout=false"], "hypothesis: this sweep compares reward.tau against 0.7 on heldout/total "
                                              "(replicates: seed); at its end ablation.md"),
    (["stage=grpo", "reward.terms.bonus.weight=0.1,0.3"], "report: this sweep varies reward.terms.bonus.weight and has "
                                                          "no hypothesis, so its end writes summary.md only"),
    (["stage=grpo", "stage.module.beta=0.0,0.04"], "report: this sweep varies stage.module.beta and has no hypothesis"),
])
def test_a_reward_sweep_says_at_its_start_whether_an_ablation_report_will_come(tmp_path: Path, args: list[str],
                                                                             expect: str) -> None:
    """The first sweep the docs show wrote summary.md and silently no ablation.md (held-out scoring was off): now its
    sweep file turns it on and names its hypothesis, and any sweep says in one line at its start what its end will
    bring (with held-out scoring off: that there will be nothing held-out to decide on)."""
    p = run_python(["train.py", "-m", *args, f"paths.log_dir={tmp_path}"], cwd=ROOT,
                   env={**os.environ, "VASE_CHECK_CONFIG": "1", "WANDB_MODE": "disabled"}, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [line for line in p.stdout.splitlines() if line.startswith(("hypothesis:", "report:", "ablation:"))]
    assert len(lines) == 1 and lines[0].startswith(expect), lines
    assert ("but val.heldout is off" in lines[0]) is ("val.heldout=false" in args)
    assert ("hypothesis.report=ablation" in lines[0]) is ("reward.terms.bonus.weight=0.1,0.3" in args)
    # only checked: no summary, and no folder (someone globbing for the last sweep finds none of a check's)
    assert not list(tmp_path.rglob("multiruns")) and "is not complete" not in p.stderr
    assert "config ok: the sweep's" in p.stdout


def test_hydra_finds_vase_s_sweeper_and_launchers_from_any_working_folder(tmp_path: Path) -> None:
    """Hydra looks for plugins only under hydra_plugins: vase's must be found where a user runs a tool from their own
    folder (python -m vase.filter ... from their data), not only from the checkout."""
    code = ("from hydra.core.plugins import Plugins\n"
            "print(sorted(k for k in Plugins.instance().class_name_to_class if 'vase_launchers' in k))")
    p = run_python(["-c", code], cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str([f"hydra_plugins.vase_launchers.{c}" for c in
                                    ("CheckingOptunaSweeper", "KeepGoingBasicSweeper", "ParallelLocalLauncher", "SearchConfirmSweeper",
                                     "SubmititLocalLauncher",
                                     "SubmititSlurmLauncher", "VaseConfigs")])


def test_a_job_that_failed_before_its_run_began_is_recorded_failed_and_fails_the_sweep(tmp_path: Path) -> None:
    """A sweep job that failed before its run had a record (an import error before the run began: once seen when a
    broken install failed every job) gets one, ``failed`` with its reason, so the sweep names it and exits 1; a
    finished job's record is never touched."""
    from vase.reports.sweep_summary import failed_jobs
    from vase.runs import RUN_FILE, record_lost, status_of

    done = tmp_path / "0"
    done.mkdir()
    (done / RUN_FILE).write_text(json.dumps({"status": "finished"}))
    assert not record_lost(done, "ImportError: no") and status_of(done) == "finished"
    assert record_lost(tmp_path / "1", "ImportError: cannot import name 'x' from 'vase.loggers'")
    assert status_of(tmp_path / "1") == "failed"
    assert failed_jobs(tmp_path) == ["#1 failed: ImportError: cannot import name 'x' from 'vase.loggers'"]


def test_the_cluster_checks_two_clusters_number_their_jobs_apart_so_ddp_ports_never_meet() -> None:
    """Both clusters run at once on one machine; Lightning's DDP port is 15000 + the job id's last four digits.
    Written configs (no daemons started) must number the jobs of each cluster in blocks that cannot meet."""
    from vase.checks.cluster_check import FIRST_JOB_ID
    from vase.checks.slurm import LocalSlurm

    firsts = []
    for nodes, first in FIRST_JOB_ID.items():
        slurm = LocalSlurm(nodes=nodes, first_job_id=first)
        try:
            slurm._write_conf()
            found = re.search(r"^FirstJobId=(\d+)$", slurm.conf.read_text(), re.M)
            assert found, slurm.conf.read_text()
            firsts.append(int(found.group(1)))
        finally:
            shutil.rmtree(slurm.root)
    ports = [set(15000 + int(str(f + i)[-4:]) for i in range(1000)) for f in firsts]  # 1000 jobs each
    assert len(firsts) == 2 and not ports[0] & ports[1], firsts
    with pytest.raises(ValueError, match="first_job_id=0"):
        LocalSlurm(first_job_id=0)


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_a_killed_sweep_resumes_by_rerunning_it(tmp_path: Path, session_dirs: dict) -> None:
    """A grid sweep killed (SIGKILL) in its second job, rerun as it was: the same sweep folder, the finished job kept
    byte for byte and not retrained, the killed one resumed from its checkpoint, the summary over both."""
    logs = tmp_path / "logs"
    cmd = [sys.executable, "train.py", "-m", "stage.module.lora.r=4,8", "debug=fast", "trainer.max_steps=4",
           "callbacks.checkpoint.every_n_train_steps=2", "logger=none", "val.before=false",
           "val.after=false", "report=false", "render.resolution=64", "+callbacks.signal._target_=tests.signals.SignalAt",
           f"paths.log_dir={logs}", f"paths.cache_dir={session_dirs['cache']}"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    first = run_python(cmd, cwd=ROOT, env={**env, "VASE_TEST_SIGNAL_AT": "3:9", "VASE_TEST_SIGNAL_JOB": "1"},
                       timeout=900)
    assert first.returncode == -9, first.stderr[-2000:]
    (sweep,) = list((logs / "train" / "multiruns").iterdir())
    status = {j: json.loads((sweep / j / ".vase-run.json").read_text())["status"] for j in ("0", "1")}
    assert status == {"0": "finished", "1": "running"} and (sweep / "1" / "checkpoints" / "last.ckpt").is_file()
    kept = {k: v for k, v in tree_hash(sweep / "0").items() if not k.endswith((".lock", ".vase-run.json"))}

    second = run_python(cmd, cwd=ROOT, env=env, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    assert list((logs / "train" / "multiruns").iterdir()) == [sweep]
    assert f"keeping the finished sweep job {sweep / '0'}" in second.stdout
    assert "resuming sft from" in second.stdout and second.stdout.count("resuming sft from") == 1
    assert {k: v for k, v in tree_hash(sweep / "0").items() if not k.endswith((".lock", ".vase-run.json"))} == kept
    history = json.loads((sweep / "1" / "train_history.json").read_text())
    assert [int(h["step"]) for h in history] == [0, 1, 2, 3]  # each step once: none lost, none repeated
    assert json.loads((sweep / "1" / ".vase-run.json").read_text())["status"] == "finished"
    assert json.loads((sweep / ".vase-run.json").read_text())["status"] == "finished"
    assert len(json.loads((sweep / "summary.json").read_text())["jobs"]) == 2


@pytest.mark.parametrize(("tools", "said"), [
    ((), "error: cluster=slurm submits the jobs through SLURM's sbatch, which this machine does not have"),
    (("sbatch",), "error: cluster=slurm runs each job through SLURM's srun, which this machine does not have")])
def test_a_slurm_sweep_on_a_machine_without_slurm_is_one_line(tmp_path: Path, tools: tuple[str, ...],
                                                              said: str) -> None:
    """cluster=slurm where SLURM's tools are not installed (or only sbatch is: submitit looks for srun first) ended in
    submitit's raw traceback (Could not detect "srun"); now one line before anything runs. PATH holds no SLURM tool
    here but ``tools``, whatever the machine has."""
    import os

    path = tmp_path / "bin"
    path.mkdir()
    for tool in tools:
        (path / tool).write_text("#!/bin/sh\nexit 1\n")
        (path / tool).chmod(0o755)
    p = run_python(["train.py", "-m", "cluster=slurm", "stage.module.lora.r=4,8", f"paths.log_dir={tmp_path / 'logs'}"],
                   cwd=ROOT, env={**os.environ, "PATH": str(path), "WANDB_MODE": "disabled"}, timeout=300)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and err[-1].startswith(said), p.stderr[-2000:]
    assert "Traceback" not in p.stderr and not list(tmp_path.rglob(".submitit"))


def test_a_failed_cluster_part_shows_the_end_of_its_job_logs(tmp_path: Path) -> None:
    """A cluster-check part that fails carries the end of its jobs' logs (less what every job prints), so a CI log
    says why, though the part's folder is gone; a passed part carries none."""
    from vase.checks.cluster_check import failure_tail

    logs = tmp_path / ".submitit" / "1001"
    logs.mkdir(parents=True)
    (logs / "1001_0_log.err").write_text(
        "submitit WARNING - Call #1 - Bypassing sacct error ..., status may be inaccurate.\n"
        "saved step 48 to last.ckpt\nsubprocess.CalledProcessError: Command '['scontrol', 'requeue', '1001']'\n")
    failed = failure_tail({"passed": False, "sweep": str(tmp_path)})
    assert failed["job_log_tail"] == ["saved step 48 to last.ckpt",
                                      "subprocess.CalledProcessError: Command '['scontrol', 'requeue', '1001']'"]
    assert "job_log_tail" not in failure_tail({"passed": True, "sweep": str(tmp_path)})
    # how the job and the sweep ended by their records, and the sweep's own last lines
    sweep = tmp_path / "logs" / "train" / "multiruns" / "t"
    (sweep / "0").mkdir(parents=True)
    (sweep / ".vase-run.json").write_text(json.dumps({"status": "interrupted", "pid": 1}))
    (sweep / "0" / ".vase-run.json").write_text(json.dumps({"status": "failed", "reason": "KeyError: 'x'"}))
    (tmp_path / "logs" / "console.log").write_text("error: 1 sweep job(s) failed (#0 failed: KeyError: 'x')\n")
    failed = failure_tail({"passed": False, "sweep": str(sweep)})
    assert failed["records"] == {"t": {"status": "interrupted"}, "0": {"status": "failed", "reason": "KeyError: 'x'"}}
    assert failed["sweep_log_tail"] == ["error: 1 sweep job(s) failed (#0 failed: KeyError: 'x')"]


def test_a_config_check_of_an_optuna_search_checks_each_trial_ends_ok_and_leaves_no_folder(tmp_path: Path) -> None:
    """`VASE_CHECK_CONFIG=1 train.py -m sweep=optuna experiment=demo` said "config ok" per trial, then ended in Optuna's
    `No trials are completed yet` traceback (rc 1), and every sweep's check left a multiruns/<time> folder."""
    p = run_python(["train.py", "-m", "sweep=optuna", "experiment=demo", "hydra.sweeper.n_trials=2", "logger=none",
                    f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env={**os.environ, "VASE_CHECK_CONFIG": "1"},
                   timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stdout.count("config ok: stage.module.optimizer.lr=") == 2  # each trial Optuna proposed, checked
    assert p.stdout.strip().splitlines()[-1] == "config ok: the sweep's 2 job(s) checked, nothing trained, no folder kept"
    assert not list((tmp_path / "logs").rglob("multiruns")) and not list((tmp_path / "logs").rglob(".hydra"))
    assert "alembic" not in p.stdout + p.stderr  # Optuna's storage imports it: its 7 "setup plugin" lines, once


def test_the_cluster_check_names_what_two_runs_read_differently(tmp_path: Path) -> None:
    """The two-node part failed twice in CI at step 0 with nothing to say why (2026-12-03): each run now records what
    it read (`InputsRecord`), and the part names the first field that differs."""
    import torch

    from vase.checks.cluster_check import _inputs_difference
    from vase.training.callbacks import batch_digest, files_digest

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * (3 << 20))
    digest = files_digest(model)
    (model / "model.safetensors").write_bytes(b"\0" * ((3 << 20) - 1) + b"\1")  # its last byte, the same size
    assert files_digest(model) != digest and files_digest("Qwen/Qwen2.5-VL-3B-Instruct") != digest
    batch = {"input_ids": torch.tensor([[1, 2, 3]]), "labels": torch.tensor([[1, 2, 3]]), "ids": ["a#caption"]}
    for job, first in (("one", batch), ("two", {**batch, "input_ids": torch.tensor([[1, 2, 4]])})):
        (tmp_path / job / "inputs").mkdir(parents=True)
        (tmp_path / job / "inputs" / "rank0.json").write_text(json.dumps(
            {"step": 0, "model": str(model), "model_digest": digest, "data": "d", "data_digest": "x",
             "first_batch": batch_digest(first)}))
    assert _inputs_difference(tmp_path / "one", tmp_path / "one") == []
    (said,) = _inputs_difference(tmp_path / "two", tmp_path / "one")
    assert said.startswith("rank0.json first batch's input_ids: [1, 3] ") and " against [1, 3] " in said
    assert _inputs_difference(tmp_path / "two", tmp_path / "none") == [f"no inputs record in {tmp_path / 'none'}/inputs"]


def test_the_cluster_check_names_a_start_that_differs_with_the_same_inputs(tmp_path: Path) -> None:
    """The two-node part parted from the one-node run at step 0 again (2026-12-05, a fresh-clone CI run) with every
    input the same (model, data, each rank's first batch): each rank now also records what else its first step
    depends on (`start_state`: threads, CPUs, random state, the trainable weights in memory), and the part names it."""
    from types import SimpleNamespace

    import torch

    from vase.checks.cluster_check import _inputs_difference
    from vase.training.callbacks import InputsRecord, start_state

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    batch = {"input_ids": torch.tensor([[1, 2, 3]]), "ids": ["a#caption"]}
    net = torch.nn.Linear(2, 2)
    net.bias.requires_grad_(False)
    state = start_state(net)
    assert state["threads"] == torch.get_num_threads() and state["cpus"] >= 1
    assert start_state(net) == state  # reading the state leaves it as it was
    with torch.no_grad():
        net.bias.add_(1.0)  # a frozen weight: not the adapter's
    assert start_state(net)["trainable_digest"] == state["trainable_digest"]
    with torch.no_grad():
        net.weight.add_(1.0)  # another initialisation of a trainable weight
    assert start_state(net)["trainable_digest"] != state["trainable_digest"]
    torch.rand(1)  # the random state moved on
    assert start_state(net)["rng_digest"] != state["rng_digest"]
    for job, threads in (("one", torch.get_num_threads()), ("two", torch.get_num_threads() + 1)):
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            torch.manual_seed(0)
            InputsRecord(str(tmp_path / job / "inputs"), str(model)).on_train_batch_start(
                SimpleNamespace(global_rank=0, global_step=0), net, batch, 0)
        finally:
            torch.set_num_threads(previous)
    assert _inputs_difference(tmp_path / "one", tmp_path / "one") == []
    (said,) = _inputs_difference(tmp_path / "two", tmp_path / "one")
    assert said == f"rank0.json threads: {previous + 1} against {previous}"


def test_a_resumed_start_records_what_it_read_beside_the_first_start_s_record(tmp_path: Path) -> None:
    """The preempted two-node part's history parted from its reference once (CI, 2026-12-04) with no record of its
    first start left: the resumed start had written over it. A resumed start now writes rank<r>-from<step>.json, and
    the part compares the first start with the reference's and the resumed start's model and data with it."""
    from types import SimpleNamespace

    import torch

    from vase.checks.cluster_check import _read_apart
    from vase.training.callbacks import InputsRecord

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    batch = {"input_ids": torch.tensor([[1, 2, 3]]), "ids": ["a#caption"]}
    for job, starts in (("ref", [0]), ("preempted", [0, 12])):
        for step in starts:  # each start of the job is a new process, with a new callback
            InputsRecord(str(tmp_path / job / "0" / "inputs"), str(model)).on_train_batch_start(
                SimpleNamespace(global_rank=1, global_step=step), None, batch, 0)
    written = sorted(p.name for p in (tmp_path / "preempted" / "0" / "inputs").iterdir())
    assert written == ["rank1-from12.json", "rank1.json"]
    assert json.loads((tmp_path / "preempted" / "0" / "inputs" / "rank1.json").read_text())["step"] == 0
    assert _read_apart(tmp_path / "preempted", tmp_path / "ref", same=True) == {}
    assert _read_apart(tmp_path / "preempted", tmp_path / "ref", same=False) == {
        "inputs_differ": [], "resumed_inputs_differ": [], "resumed_records": ["rank1-from12.json"]}
    (model / "model.safetensors").write_bytes(b"\1" * 64)  # the model changed before the resumed start read it
    InputsRecord(str(tmp_path / "preempted" / "0" / "inputs"), str(model)).on_train_batch_start(
        SimpleNamespace(global_rank=1, global_step=12), None, batch, 0)
    (said,) = _read_apart(tmp_path / "preempted", tmp_path / "ref", same=False)["resumed_inputs_differ"]
    assert said.startswith("rank1-from12.json model_digest: ")


def test_the_sweep_summary_shows_a_users_terms_swept_weight(tmp_path: Path) -> None:
    """A sweep over a user's own term's weight (``reward.terms.amphora.weight=0,0.5``) had no ``w/amphora`` column:
    the summary showed the paper's six weights, identical in every job, and not the one swept."""
    from vase.reports.sweep_summary import write_sweep_summary

    for n, w in enumerate((0.0, 0.5)):
        job = tmp_path / str(n)
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "overrides.yaml").write_text(f"- reward.terms.amphora.weight={w}\n")
        (job / "config.yaml").write_text(
            "reward:\n  effective_weights: {shape: 0.15}\n  terms:\n    shape: {dimension: shape, weight: 0.15}\n"
            f"    penalty: {{weight: 1.0}}\n    amphora: {{weight: {w}}}\n")
    paths = write_sweep_summary(tmp_path)
    jobs = json.loads(paths["json"].read_text())["jobs"]
    assert [j.get("w/amphora") for j in jobs] == [0.0, 0.5] and "w/penalty" not in jobs[0]
    assert "w/amphora" in paths["md"].read_text()


def test_only_rank_zero_writes_the_history_and_the_cluster_check_says_whose_it_is(tmp_path: Path) -> None:
    """The cause of the two-node part's step-0 difference (2026-12-05): every rank wrote ``train_history.json``, each
    its own batches' losses, so the file held whichever rank finished last: rank 0's in one run, rank 1's in the
    next. Rank 0 alone writes it now; each rank's inputs record keeps its first step's loss, so the check reads whose
    losses a history holds."""
    from types import SimpleNamespace

    import torch

    from vase.checks.cluster_check import history_ranks
    from vase.pipeline.train import keep_history
    from vase.training.callbacks import InputsRecord

    job = tmp_path / "job"
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * 8)
    losses = {0: [{"step": 0.0, "loss": 6.9197}, {"step": 1.0, "loss": 6.5}],
              1: [{"step": 0.0, "loss": 6.9487}, {"step": 1.0, "loss": 6.6}]}
    for rank in (1, 0):  # rank 1 ends first here; the old code's last writer would have been rank 0, then 1
        module = SimpleNamespace(history=[], named_parameters=lambda: [])
        record = InputsRecord(str(job / "inputs"), str(model))
        trainer = SimpleNamespace(global_rank=rank, global_step=0, is_global_zero=rank == 0)
        record.on_train_batch_start(trainer, module, {"input_ids": torch.tensor([[rank]])}, 0)
        record.on_train_batch_end(trainer, module, None, {}, 0)  # no step in the history yet: no loss
        assert "loss" not in json.loads((job / "inputs" / f"rank{rank}.json").read_text())
        module.history = list(losses[rank])
        record.on_train_batch_end(trainer, module, None, {}, 0)
        assert json.loads((job / "inputs" / f"rank{rank}.json").read_text())["loss"] == losses[rank][0]["loss"]
        wrote = keep_history(trainer, job / "train_history.json", module.history)
        assert wrote == (rank == 0)
    assert json.loads((job / "train_history.json").read_text()) == losses[0]
    assert history_ranks(job) == ["rank0"]
    # what every rank writing the file did: the last one to finish left its own losses, and the check names it
    (job / "train_history.json").write_text(json.dumps(losses[1]))
    assert history_ranks(job) == ["rank1"]
    # a GRPO step is kept under the step count after its optimizer step, and a resumed start's history already holds
    # the steps before it: the record takes the first entry its own start added
    resumed = SimpleNamespace(history=[{"step": 1.0, "loss": 0.5}], named_parameters=lambda: [])
    record = InputsRecord(str(tmp_path / "grpo" / "inputs"), str(model))
    trainer = SimpleNamespace(global_rank=0, global_step=1, is_global_zero=True)
    record.on_train_batch_start(trainer, resumed, {"input_ids": torch.tensor([[0]])}, 0)
    record.on_train_batch_end(trainer, resumed, None, {}, 0)  # a GRPO step buffers its rollouts: nothing new yet
    assert "loss" not in json.loads((tmp_path / "grpo" / "inputs" / "rank0-from1.json").read_text())
    resumed.history.append({"step": 2.0, "loss": 0.25})
    record.on_train_batch_end(trainer, resumed, None, {}, 0)
    kept = json.loads((tmp_path / "grpo" / "inputs" / "rank0-from1.json").read_text())
    assert (kept["step"], kept["loss"], kept["loss_step"]) == (1, 0.25, 2.0)


@pytest.mark.slow  # a sweep's SFT and two GRPO jobs in subprocesses (30 s): make test-slow
def test_a_parallel_sweep_trains_its_shared_sft_with_the_kernels_and_allocator_its_config_asks_for(
        tmp_path: Path) -> None:
    """hydra/launcher=parallel trains the shared SFT in the sweep's process, not in a job: it takes the config's
    ``cpu_kernels`` and ``cpu_allocator`` there as a job does (`vase.config.process_settings`). Before, a
    ``cpu_kernels=portable`` sweep's SFT trained on the machine's widest kernels under the portable cache key."""
    cache = tmp_path / "cache"
    cmd = [sys.executable, "train.py", "-m", "sweep=tau", "reward.tau=0.5,0.9", "hypothesis.baseline=0.5", "debug=fast",
           "hydra/launcher=parallel", "logger=none", "render.resolution=64", "cpu_kernels=portable",
           f"paths.log_dir={tmp_path / 'logs'}", f"paths.cache_dir={cache}"]
    p = run_python(cmd, cwd=ROOT, env={**os.environ, "WANDB_MODE": "disabled"}, timeout=900)
    said = p.stdout + p.stderr
    assert p.returncode == 0, said[-3000:]
    assert "training the shared SFT adapter" in said and "[#" not in said.split("training the shared SFT adapter")[0]
    (record,) = (cache / "sft").glob("*/.vase-run.json")
    machine = json.loads(record.read_text())["machine"]
    assert machine["cpu_kernels"] == "portable" and machine["cpu_capability"] == "AVX2", machine
    assert machine["mkl_branch"] in (None, "COMPATIBLE,STRICT"), machine  # as MKL itself reports it
    assert machine["cpu_allocator"] == ("keep" if platform.libc_ver()[0] == "glibc" else "system"), machine


def _stop_when_both_train(cmd: list[str], logs: Path, signum: int, group: bool) -> tuple[int, str, Path]:
    """Start the parallel sweep ``cmd`` in a session of its own, send ``signum`` to its process group (Ctrl-C in its
    terminal) or, without ``group``, to the sweep's process alone, once both jobs have trained a step; its exit
    status, all it printed, and its folder."""
    # SIGINT as a terminal's foreground job has it: a suite started in the background (`make test &`, CI's nohup)
    # hands its children SIGINT ignored, which Python keeps ignored (tests/test_sweep_end.py says the same)
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, env={**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"},
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    said, seen = [], set()
    try:
        for line in p.stdout:
            said.append(line)
            seen |= {j for j in ("[#0] sft: step", "[#1] sft: step") if line.startswith(j)}
            if len(seen) == 2:
                (os.killpg if group else os.kill)(p.pid, signum)
                break
        said.append(p.stdout.read())
        p.wait(timeout=600)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    (sweep,) = list((logs / "train" / "multiruns").iterdir())
    return p.returncode, "".join(said), sweep


@pytest.mark.slow  # 27-46 s of subprocesses: make test stays under its 15 minutes (a fresh clone's 1,015 s, 2026-12-07)
def test_ctrl_c_on_a_parallel_sweep_is_one_line_each_job_saves_once_and_every_record_says_interrupted(
        tmp_path: Path) -> None:
    """Ctrl-C in the terminal of a parallel sweep (SIGINT to its process group) printed a 44-line KeyboardInterrupt
    traceback, left the sweep's record ``running``, and each job said ``SIGTERM:`` after its ``SIGINT:`` (the sweep
    terminated them as they saved). Now: exit 130, one ``interrupted`` line, each job's one ``SIGINT:`` line and where
    it saved, the sweep's record and each job's ``interrupted`` with its reason."""
    logs = tmp_path / "logs"
    cmd = [*_sweep_cmd(logs, tmp_path / "cache", "hydra/launcher=parallel", "hydra.launcher.jobs=2"),
           "trainer.max_steps=400", "stage.epochs=100", "callbacks.checkpoint.every_n_train_steps=1000"]
    rc, said, sweep = _stop_when_both_train(cmd, logs, signal.SIGINT, group=True)
    assert rc == 130 and "Traceback" not in said and "SIGTERM" not in said, said[-3000:]
    assert [ln for ln in said.splitlines() if ln.startswith("interrupted")] == [
        "interrupted (Ctrl-C): the sweep stopped; its record says interrupted, and the same command takes it up again "
        "(resume=auto: what was saved is kept)"], said[-3000:]
    for job in ("0", "1"):
        assert said.count(f"[#{job}] SIGINT: saving a checkpoint") == 1 and f"[#{job}] saved step " in said
        record = json.loads((sweep / job / ".vase-run.json").read_text())
        assert record["status"] == "interrupted" and record["reason"].startswith("saved step "), record
    assert "[#0] \n" not in said and not [ln for ln in said.splitlines() if ln.startswith("error: sweep job")]
    record = json.loads((sweep / ".vase-run.json").read_text())
    assert record["status"] == "interrupted" and record["reason"] == "stopped by Ctrl-C", record


@pytest.mark.slow  # two more sweeps of two jobs: make test-slow
def test_a_sigterm_to_a_parallel_sweep_alone_stops_its_jobs_and_the_same_command_finishes_them(
        tmp_path: Path) -> None:
    """SIGTERM to the sweep's process alone (a scheduler's stop; its jobs never hear it) ended the sweep at once and left
    its jobs training unwatched. Now the sweep hands it on: each job saves once, exit 143, one line; the same command
    resumes both jobs from their checkpoints and finishes the sweep."""
    logs = tmp_path / "logs"
    cmd = [*_sweep_cmd(logs, tmp_path / "cache", "hydra/launcher=parallel", "hydra.launcher.jobs=2"),
           "trainer.max_steps=60", "stage.epochs=10", "callbacks.checkpoint.every_n_train_steps=1000"]
    rc, said, sweep = _stop_when_both_train(cmd, logs, signal.SIGTERM, group=False)
    assert rc == 143 and "Traceback" not in said and said.count("SIGTERM: saving a checkpoint") == 2, said[-3000:]
    assert "interrupted (SIGTERM): the sweep stopped" in said
    assert json.loads((sweep / ".vase-run.json").read_text())["reason"] == "stopped by SIGTERM"
    saved = {j: json.loads((sweep / j / ".vase-run.json").read_text())["reason"] for j in ("0", "1")}
    assert all(r.startswith("saved step ") for r in saved.values()), saved
    p = run_python(cmd, cwd=ROOT, env={**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}, timeout=900)
    assert p.returncode == 0 and list((logs / "train" / "multiruns").iterdir()) == [sweep], p.stderr[-3000:]
    for job in ("0", "1"):
        steps = [int(h["step"]) for h in json.loads((sweep / job / "train_history.json").read_text())]
        assert steps == list(range(60)), steps  # each step once: the first run's, then the rest from the checkpoint
    assert json.loads((sweep / ".vase-run.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("setting", ["hydra.launcher.jobs=-1", "hydra.launcher.threads_per_job=0", "cpu_allocator=bogus",
                                     "cpu_allocator=keep,bogus", "cpu_kernels=widest"])
def test_a_bad_launcher_or_process_value_is_one_line_before_the_sweep_makes_its_folder(tmp_path: Path,
                                                                                       setting: str) -> None:
    """``jobs=-1`` or ``threads_per_job=0`` left a ``multiruns/<time>/`` whose record said ``running``; a bad
    ``cpu_allocator`` (given or swept) was checked only by each job, after the folder was made (rc 1 after 7 lines).
    Each is one line at the sweep's start, exit 2, and no folder."""
    p = run_python(["train.py", "-m", "hydra/launcher=parallel", "stage.module.lora.r=4,8", "debug=fast", "logger=none",
                    setting, f"paths.log_dir={tmp_path}"], env={**os.environ, "WANDB_MODE": "disabled"})
    key = setting.split("=")[0]
    assert one_line(p).startswith(f"config error: {key}="), p.stderr[-2000:]
    assert not (tmp_path / "train" / "multiruns").exists()


def test_more_jobs_at_once_than_cores_runs_as_many_as_the_cores_and_says_so(tmp_path: Path) -> None:
    """``hydra.launcher.jobs=999`` ran without a word: the sweep now runs as many at once as there are usable cores,
    and one line at its start says so (`vase.parallel_jobs.cap_jobs`)."""
    from vase.workers import usable_cores

    p = run_python(["train.py", "-m", "hydra/launcher=parallel", "hydra.launcher.jobs=999", "stage.module.lora.r=4,8",
                    "debug=fast", "logger=none", f"paths.log_dir={tmp_path}"],
                   env={**os.environ, "WANDB_MODE": "disabled", "VASE_CHECK_CONFIG": "config"})
    cores = usable_cores()
    assert p.returncode == 0 and (f"hydra.launcher.jobs=999 asks for more jobs at once than the {cores} usable cores: "
                                  f"{cores} at a time") in p.stdout.splitlines(), p.stdout[-2000:] + p.stderr[-2000:]
