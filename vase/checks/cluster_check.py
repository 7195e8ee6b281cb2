"""vase on a real SLURM cluster (``make cluster-check``): one node, then two, on the loopback, PASS/FAIL per part.

    python -m vase.checks.cluster_check

Starts Debian's ``slurmctld``, ``slurmd`` and ``munged`` on this machine (`LocalSlurm`,
a CPU partition ``debug``) and runs what users run through ``cluster=slurm`` (Hydra's submitit launcher). Each node
offers twice the machine's cores, so several parts' jobs share a node, as on a busy cluster; the parts run in lanes
side by side (a part's line names the parts that ran beside it where that matters):

1. ``sweep``: two jobs (``stage.module.lora.r=4,8``) on the CPU partition (``cluster.gpus_per_node=0``): both
   adapters land, one ``summary.md`` whose overrides column shows what differs, submitit's sacct warning once.
2. ``preemption``: ``scancel --signal=USR2`` to the running job: vase saves its checkpoint, submitit requeues the job,
   the requeued job resumes; its loss history equals an uninterrupted run's (1e-5).
3. ``time-limit``: a job whose training time (``trainer.max_time``) outlasts its SLURM limit gets the warning signal
   before the limit, saves, is requeued (as many times as it takes) and finishes with its whole history, whatever
   the machine's speed. It starts first and runs beside the others (their jobs share its node and the cores, as on
   a busy cluster): its line names the parts that ran beside it.
4. ``ddp``: two tasks on the node (``cluster.tasks_per_node=2``, gloo): Lightning takes its ranks from SLURM, both
   ranks train, one adapter and one history (rank 0's losses) are written, and only rank 0 writes the report.
5. ``grpo-ddp``: a GRPO job the same way (group statistics gathered across the two ranks).

And, at the same time, a second cluster of two nodes (two ``slurmd`` on this machine, ``vase-n1`` and ``vase-n2``):

6. ``two-node`` / ``grpo-two-node``: the ``ddp`` / ``grpo-ddp`` job with ``cluster.nodes=2``, one task per node:
   world size 2, node ranks 0 and 1, and the same history as the one-node two-task run (1e-5).
7. ``preemption-two-node``: USR2 to a two-node job: one save (rank 0), requeue, resume on both nodes, the history
   equal to the same run uninterrupted. It starts first and runs beside parts 6, 8 and 9.
8. ``sweep-two-node``: two jobs, each on both nodes, and the sweep's summary.
9. ``too-many-nodes``: ``cluster.nodes=3`` is refused by vase before submitting, in one line.

Writes ``cluster_check.json`` / ``.md`` under ``logs/cluster_check/<time>/`` with each part's folder; the slurmctld
and slurmd logs are kept there when a part fails. Each cluster's watchdog resumes a node SLURM drained because a job
step's processes outlived their kill timeout ("Kill task failed", as a loaded 2-core machine once gave: every job after
it waited until the test's timeout) and says so in a line of the log and the report (``node_events``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.checks.parts import Parts
from vase.checks.slurm import LocalSlurm, missing_tools
from vase.io import atomic_write_json, atomic_write_text
from vase.provenance import machine_stamp
from vase.runs import log_root, run_dir

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ["cluster=slurm", "cluster.partition=debug", "cluster.gpus_per_node=0", "cluster.cpus_per_task=1",
           "cluster.mem_gb=3", "logger=none", "val.after=false", "render.resolution=64"]
# long enough to be signalled mid-run on 2 cores (240 SFT steps), checkpoints every 20 steps
LONG = ["data.synthetic.num_vases=16", "stage.batch_size=2", "stage.grad_accum=1", "stage.epochs=40",
        "stage.module.lora.dropout=0.1", "stage.module.optimizer.lr=5e-3", "report=false",
        "callbacks.checkpoint.every_n_train_steps=20"]


def _train(args: list[str], log_dir: Path, cache: Path, env: dict[str, str]) -> subprocess.Popen:
    log_dir.mkdir(parents=True, exist_ok=True)
    out = open(log_dir / "console.log", "w")  # noqa: SIM115 - closed by the caller through _wait
    return subprocess.Popen([sys.executable, "train.py", *args, f"paths.log_dir={log_dir}", f"paths.cache_dir={cache}"],
                            cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "disabled"}, stdout=out,
                            stderr=subprocess.STDOUT, text=True)


def _wait(p: subprocess.Popen, timeout: float = 1500) -> int:
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return 124
    finally:
        if p.stdout is not None:
            p.stdout.close()


def _sweep_dir(log_dir: Path) -> Path | None:
    found = sorted((log_dir / "train" / "multiruns").glob("*/")) if (log_dir / "train" / "multiruns").is_dir() else []
    return found[-1] if found else None


def _job_logs(sweep: Path | None) -> str:
    """Every task's submitit log of a sweep (stdout and stderr), concatenated."""
    if sweep is None:
        return ""
    return "\n".join(p.read_text(errors="replace") for p in sorted((sweep / ".submitit").rglob("*_log.*")))


NOISE = ("Bypassing sacct error", "(vase) this cluster has no SLURM accounting", "Warning:", "warnings.warn(",
         "is deprecated", "Loading weights")


def failure_tail(out: dict[str, Any], lines: int = 25) -> dict[str, Any]:
    """A failed part's result with the end of its jobs' logs (`_job_logs`, less the lines every job prints) as
    ``job_log_tail``: the cause is in the check's output, and so in a CI log, where the part's folder is gone."""
    if not out.get("passed") and out.get("sweep") not in (None, "None"):
        sweep = Path(out["sweep"])
        text = _job_logs(sweep)
        kept = [ln for ln in text.splitlines() if ln.strip() and not any(n in ln for n in NOISE)]
        out["job_log_tail"] = kept[-lines:]
        # how each job and the sweep ended by their records, and the sweep's own last lines: a job whose log ends
        # with submitit's "completed successfully" failed inside vase (time-limit, 2026-12-03: rc 1, no history)
        out["records"] = {d.name: {k: v for k, v in json.loads((d / ".vase-run.json").read_text()).items()
                                   if k in ("status", "reason", "resumed_from")}
                          for d in [sweep, *sorted(sweep.glob("[0-9]*"))] if (d / ".vase-run.json").is_file()}
        console = sweep.parents[2] / "console.log"
        if console.is_file():
            out["sweep_log_tail"] = [ln for ln in console.read_text(errors="replace").splitlines()
                                     if ln.strip() and not any(n in ln for n in NOISE)][-12:]
    return out


def _history(job: Path) -> list[dict[str, Any]]:
    path = job / "train_history.json"
    return json.loads(path.read_text()) if path.is_file() else []


def _same_losses(a: list[dict[str, Any]], b: list[dict[str, Any]], tol: float = 1e-5) -> bool:
    return _first_difference(a, b, tol) is None


def _first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]], tol: float = 1e-5) -> dict[str, Any] | None:
    """Where history ``a`` first parts from the reference ``b``: a row whose step differs or whose loss differs by
    more than ``tol`` (relative, absolute below 1), with the row's step and both losses; the two lengths when they
    differ or are empty; None when they agree."""
    for x, y in zip(a, b):
        if x.get("step") != y.get("step") or abs(x["loss"] - y["loss"]) > tol * max(1.0, abs(y["loss"])):
            return {"step": x.get("step"), "reference_step": y.get("step"), "loss": x["loss"],
                    "reference_loss": y["loss"]}
    return None if len(a) == len(b) > 0 else {"rows": len(a), "reference_rows": len(b)}


def _inputs(job: Path, resumed: bool = False) -> dict[str, dict[str, Any]]:
    """What each rank of a job read as its first step started (`vase.training.callbacks.InputsRecord`), by file; with
    ``resumed``, what it read as a resumed start began (``rank<r>-from<step>.json``)."""
    want = re.compile(r"rank\d+-from\d+\.json" if resumed else r"rank\d+\.json")
    return {p.name: json.loads(p.read_text()) for p in sorted(job.glob("inputs/rank*.json")) if want.fullmatch(p.name)}


START_STATE = ("threads", "cpus", "rng_digest", "trainable_digest")
"""What `vase.training.callbacks.start_state` records beside the inputs: a step's other dependencies."""


def _inputs_difference(job: Path, reference: Path) -> list[str]:
    """Where two jobs that should agree read or started differently: per rank, the model (folder, digest), the data
    (root, digest), torch's threads, the CPUs, the random state, the trainable weights in memory, or a tensor of the
    first batch; [] when all agree (the difference is then in the training itself), or a line saying a record is
    missing."""
    mine, theirs = _inputs(job), _inputs(reference)
    if not mine or not theirs:
        return [f"no inputs record in {job if not mine else reference}/inputs"]
    out = []
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name, {}), theirs.get(name, {})
        for key in ("step", "model", "model_digest", "data", "data_digest", *START_STATE):
            if a.get(key) != b.get(key):
                out.append(f"{name} {key}: {a.get(key)} against {b.get(key)}")
        for key in sorted(set(a.get("first_batch", {})) | set(b.get("first_batch", {}))):
            if a.get("first_batch", {}).get(key) != b.get("first_batch", {}).get(key):
                out.append(f"{name} first batch's {key}: {a.get('first_batch', {}).get(key)} against "
                           f"{b.get('first_batch', {}).get(key)}")
    return out


def history_ranks(job: Path, tol: float = 1e-5) -> list[str]:
    """Whose losses a job's ``train_history.json`` holds: the ranks whose first step's loss (their inputs record's
    ``loss``) equals the history's loss at that step (rank 0's alone, since only rank 0 writes it)."""
    history = {float(h["step"]): float(h["loss"]) for h in _history(job) if "step" in h and "loss" in h}
    out = []
    for name, rec in _inputs(job).items():
        step, loss = rec.get("loss_step"), rec.get("loss")
        if loss is not None and step in history and abs(history[step] - float(loss)) <= tol * max(1.0, abs(loss)):
            out.append(name.removesuffix(".json"))
    return out


def _lora_sweep(sweep: Path | None) -> tuple[dict[str, int | None], str]:
    """A ``stage.module.lora.r=4,8`` sweep's outcome: each job's adapter rank, and its summary.md."""
    ranks = {}
    for job in ("0", "1"):
        cfg = sweep / job / "adapter" / "adapter_config.json" if sweep else None
        ranks[job] = json.loads(cfg.read_text())["r"] if cfg is not None and cfg.is_file() else None
    md = (sweep / "summary.md").read_text() if sweep and (sweep / "summary.md").is_file() else ""
    return ranks, md


def check_sweep(work: Path, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    logs = work / "sweep"
    rc = _wait(_train(["-m", *CLUSTER, "stage.module.lora.r=4,8", "debug=fast"], logs, cache, env))
    sweep = _sweep_dir(logs)
    ranks, md = _lora_sweep(sweep)
    console = (logs / "console.log").read_text(errors="replace")
    shows_difference = "| 0 | stage.module.lora.r=4 |" in md and "| 1 | stage.module.lora.r=8 |" in md
    # one warning (submitit prints each record through three handlers) and no sacct output at every poll
    sacct = len(set(re.findall(r"Call #(\d+) - Bypassing sacct error", console)))
    sacct += console.count("accounting storage is disabled")
    ok = rc == 0 and ranks == {"0": 4, "1": 8} and shows_difference and sacct <= 1
    return {"passed": ok, "rc": rc, "adapter_r": ranks, "summary_shows_what_differs": shows_difference,
            "sacct_warnings_in_console": sacct, "sweep": str(sweep)}


def _job_id(slurm: LocalSlurm, sweep: Path | None) -> str | None:
    """The running SLURM job of this sweep (submitit names its folders under ``.submitit/`` by job id): another
    part's job may be running beside it on the same cluster."""
    ours = {d.name for d in (sweep / ".submitit").iterdir() if d.is_dir()} if sweep and (sweep / ".submitit").is_dir() \
        else set()
    for line in slurm.run("squeue", "-h", "-o", "%i %T").stdout.splitlines():
        job, _, state = line.strip().partition(" ")
        if job in ours and state.strip() == "RUNNING":
            return job
    return None


def _reference(work: Path, cache: Path, extra: list[str]) -> list[dict[str, Any]]:
    """The same training run uninterrupted, without SLURM: the history a resumed job must reproduce."""
    logs = work / "reference"
    rc = _wait(_train([*LONG, *extra, "logger=none", "val.after=false", "render.resolution=64"], logs, cache,
                      {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}))
    runs = sorted((logs / "train" / "runs").glob("*/")) if rc == 0 else []
    return _history(runs[-1]) if runs else []


def _preempt_once(p: subprocess.Popen, logs: Path, slurm: LocalSlurm) -> tuple[Any, int, Path | None, str, list]:
    """Once the running sweep's first job has a checkpoint, ``scancel --signal=USR2`` it (as SLURM's preemption
    does); then wait for the sweep to end. The job id signalled (or None), the sweep's exit code, its folder, its
    tasks' logs and the first job's history."""
    signalled, deadline = None, time.time() + 900
    while p.poll() is None and time.time() < deadline and signalled is None:
        sweep = _sweep_dir(logs)
        ckpt = sweep / "0" / "checkpoints" / "last.ckpt" if sweep else None
        job = _job_id(slurm, sweep)
        if ckpt is not None and ckpt.is_file() and job:
            signalled = slurm.run("scancel", "--signal=USR2", job).returncode == 0 and job
        time.sleep(1)
    rc = _wait(p)
    sweep = _sweep_dir(logs)
    return signalled or None, rc, sweep, _job_logs(sweep), _history(sweep / "0") if sweep else []


def check_preemption(work: Path, cache: Path, slurm: LocalSlurm, reference: list[dict[str, Any]]) -> dict[str, Any]:
    logs = work / "preemption"
    p = _train(["-m", *CLUSTER, *LONG], logs, cache, slurm.env)
    signalled, rc, sweep, text, history = _preempt_once(p, logs, slurm)
    resumed = "resuming sft from" in text
    same = _same_losses(history, reference)
    ok = rc == 0 and bool(signalled) and resumed and same
    return {"passed": ok, "rc": rc, "signalled_job": signalled, "resumed": resumed, "steps": len(history),
            "reference_steps": len(reference), "history_equals_uninterrupted": same,
            "first_difference": _first_difference(history, reference), "sweep": str(sweep)}


# parts that start first and run beside the others of their cluster (their jobs share the nodes, as on a busy
# cluster, and their minutes overlap): the time-limit part's length is its training time, so it must hold on a loaded
# machine, and the other parts' jobs and training runs are its load; the two-node preemption's runs are the longest
# of the two-node parts
BESIDE = ("time-limit", "preemption-two-node")
# the order of the other parts in their lane: the one-node DDP parts first (the two-node parts compare with them)
LANE_ORDER = ("time-limit", "ddp", "grpo-ddp", "sweep", "preemption",
              "preemption-two-node", "too-many-nodes", "sweep-two-node", "two-node", "grpo-two-node")
# where each cluster's job ids start: Lightning's DDP port is 15000 + the job id's last four digits, and both clusters
# run at once on this one machine, so their ids must never share those digits (a job of one joined the other's
# rendezvous in CI and both hung for 25 minutes)
FIRST_JOB_ID = {1: 1001, 2: 5001}
TIME_LIMIT_MIN = 3  # the job's SLURM limit; the warning comes 60 s before it
TRAIN_BUDGET = "00:00:02:30"  # trainer.max_time: more training than one start can hold, whatever the machine's speed


def _contiguous(history: list[dict[str, Any]]) -> bool:
    steps = [h.get("step") for h in history]
    if not steps or not all(isinstance(s, (int, float)) and s == int(s) for s in steps):
        return False
    first = int(steps[0])
    return [int(s) for s in steps] == list(range(first, first + len(steps)))


def check_time_limit(work: Path, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    """A job whose length is set by time, not by steps: SLURM's limit is 3 minutes with the warning 60 s before it,
    which slurmctld sends at its first limit test (every ~30 s) with under 90 s left, so 90 to 120 s into each start;
    the run trains for ``trainer.max_time`` = 150 s (Lightning's timer, kept in the checkpoint across restarts) on
    a step budget no machine finishes (``stage.epochs`` 100,000). One start can never hold 150 s of training, on a
    fast machine or a loaded one, so the warning always comes mid-run: vase saves the checkpoint, submitit requeues
    the job as a timeout, the next start resumes from it (as often as it takes), and the run ends when its training
    time is spent, with one contiguous history. (A limit whose warning can come at launch, before submitit's handler
    exists, is refused: config.check_slurm_signal.)"""
    logs = work / "time-limit"
    rc = _wait(_train(["-m", *CLUSTER, *LONG, "stage.epochs=100000", f"trainer.max_time={TRAIN_BUDGET}",
                       f"cluster.timeout_min={TIME_LIMIT_MIN}", "hydra.launcher.signal_delay_s=60",
                       "hydra.launcher.max_num_timeout=8"], logs, cache, env),
               timeout=1200)  # a job that dies leaves no result file, and without sacct submitit would wait for it
    sweep = _sweep_dir(logs)
    text = _job_logs(sweep)
    history = _history(sweep / "0") if sweep else []
    resumed = len(set(re.findall(r"\n(resuming sft from .*)", text)))
    requeued = len(set(re.findall(r"\(([^)]+)\) - Caught signal SIGUSR2 on \S+: this job is timed-out", text)))
    saved = sorted({int(s) for s in re.findall(r"saved step (\d+) to \S*last\.ckpt", text)})
    timer = "Time limit reached" in text
    # the history holds every step up to the last save (and any after it: a last start may find its training time
    # already spent and end at once, adding none, on a loaded machine)
    ok = (rc == 0 and requeued >= 1 and bool(saved) and resumed >= 1 and timer and _contiguous(history)
          and len(history) >= saved[-1])
    return {"passed": ok, "rc": rc, "warned_and_saved_at_steps": saved, "requeued_as_timeout": requeued,
            "resumed_times": resumed, "ended_by_training_time": timer, "steps": len(history),
            "history_contiguous": _contiguous(history), "sweep": str(sweep)}


ONE_NODE_TWO_TASKS = ["cluster.tasks_per_node=2"]
TWO_NODES = ["cluster.nodes=2", "cluster.tasks_per_node=1"]  # one task on each node


def _ddp(work: Path, cache: Path, env: dict[str, str], name: str, extra: list[str],
         layout: list[str] = ONE_NODE_TWO_TASKS) -> dict[str, Any]:
    logs = work / name
    rc = _wait(_train(["-m", *CLUSTER, *layout, "cluster.cpus_per_task=1", "trainer=ddp", "trainer.accelerator=cpu",
                       "debug=fast", "trainer.max_steps=4", "val.after=true", *extra], logs, cache, env))
    sweep = _sweep_dir(logs)
    text = _job_logs(sweep)
    job = sweep / "0" if sweep else Path("/nonexistent")
    ranks = sorted(set(re.findall(r"GLOBAL_RANK: (\d), MEMBER: \d/2", text)))
    reports = sorted(str(p.relative_to(job)) for p in job.rglob("report.md")) if job.is_dir() else []
    adapters = sorted(str(p.parent.relative_to(job)) for p in job.rglob("adapter_config.json")) if job.is_dir() else []
    history = _history(job)
    of_ranks = history_ranks(job) if job.is_dir() else []  # the history is rank 0's (its losses, not rank 1's)
    ok = (rc == 0 and ranks == ["0", "1"] and len(adapters) == 1 and len(reports) == 1 and len(history) > 0
          and "rank0" in of_ranks)
    return {"passed": ok, "rc": rc, "ranks_seen": ranks, "adapters": adapters, "reports": reports,
            "steps": len(history), "history_of_ranks": of_ranks, "sweep": str(sweep), "node_ranks": _node_ranks(text),
            "world_size": sorted(set(re.findall(r"MEMBER: \d/(\d+)", text)))}


def _node_ranks(text: str) -> list[str]:
    """The node ranks the job's tasks ran with (vase prints each task's SLURM placement at start)."""
    return sorted(set(re.findall(r"SLURM task: node rank (\d+)", text)))


def _two_node(work: Path, cache: Path, env: dict[str, str], name: str, extra: list[str],
              one_node: dict[str, Any] | None) -> dict[str, Any]:
    """The same job as a one-node two-task part, on two nodes with one task each: world size 2, node ranks 0 and 1,
    and (the same global batch, the same global ranks) the same history as the one-node run to 1e-5."""
    out = _ddp(work, cache, env, name, extra, layout=TWO_NODES)
    history = _history(Path(out["sweep"]) / "0") if out.get("sweep") else []
    reference = _history(Path(one_node["sweep"]) / "0") if one_node and one_node.get("sweep") else []
    out["history_equals_one_node_two_tasks"] = _same_losses(history, reference)
    out["first_difference"] = _first_difference(history, reference)
    if out["first_difference"] is not None and out.get("sweep") and one_node and one_node.get("sweep"):
        # what each run read as its first step started: the model, the data, each rank's first batch; and whose
        # losses each history holds (rank 0's: until 2026-12-06 every rank wrote it, the last one's stayed)
        mine, theirs = Path(out["sweep"]) / "0", Path(one_node["sweep"]) / "0"
        out["inputs_differ"] = _inputs_difference(mine, theirs)
        out["one_node_history_of_ranks"] = history_ranks(theirs)
    out["passed"] = (out["passed"] and out["node_ranks"] == ["0", "1"] and out["world_size"] == ["2"]
                     and out["history_equals_one_node_two_tasks"])
    return out


def check_two_node_sweep(work: Path, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    """Two jobs (lora.r 4 and 8), each on both nodes: both adapters, one summary."""
    logs = work / "sweep-two-node"
    rc = _wait(_train(["-m", *CLUSTER, *TWO_NODES, "trainer=ddp", "trainer.accelerator=cpu", "debug=fast",
                       "stage.module.lora.r=4,8"], logs, cache, env))
    sweep = _sweep_dir(logs)
    ranks, md = _lora_sweep(sweep)
    nodes = _node_ranks(_job_logs(sweep))
    ok = rc == 0 and ranks == {"0": 4, "1": 8} and "| 1 | stage.module.lora.r=8 |" in md and nodes == ["0", "1"]
    return {"passed": ok, "rc": rc, "adapter_r": ranks, "summary": bool(md), "node_ranks": nodes, "sweep": str(sweep)}


def check_two_node_preemption(work: Path, cache: Path, slurm: LocalSlurm) -> dict[str, Any]:
    """USR2 to a two-node job: the checkpoint written once (rank 0), the job requeued and resumed on both nodes, and
    its history equal to the same two-node run uninterrupted."""
    args = [*TWO_NODES, "trainer=ddp", "trainer.accelerator=cpu", *LONG, "stage.epochs=20"]
    ref_logs = work / "preemption-two-node-reference"
    ref_rc = _wait(_train(["-m", *CLUSTER, *args], ref_logs, cache, slurm.env))
    ref_sweep = _sweep_dir(ref_logs)
    reference = _history(ref_sweep / "0") if ref_rc == 0 and ref_sweep else []
    logs = work / "preemption-two-node"
    p = _train(["-m", *CLUSTER, *args], logs, cache, slurm.env)
    signalled, rc, sweep, text, history = _preempt_once(p, logs, slurm)
    saves = re.findall(r"saved step (\d+) to \S*last\.ckpt", text)
    resumed = sorted(set(re.findall(r"resuming sft from .* \(node rank (\d)\)", text)))
    same = _same_losses(history, reference)
    ok = rc == 0 and bool(signalled) and len(saves) == 1 and resumed == ["0", "1"] and same
    return {"passed": ok, "rc": rc, "signalled_job": signalled, "saved_messages": len(saves),
            "saved_at_steps": saves, "resumed_on_node_ranks": resumed, "steps": len(history),
            "reference_steps": len(reference), "history_equals_uninterrupted": same,
            "first_difference": _first_difference(history, reference), "sweep": str(sweep),
            "reference_sweep": str(ref_sweep), **_read_apart(sweep, ref_sweep, same)}


def _read_apart(sweep: Path | None, ref_sweep: Path | None, same: bool) -> dict[str, Any]:
    """For a preempted job whose history parts from its uninterrupted reference: what its first start read against
    the reference's (the model, the data, each rank's first batch), and what its resumed start read (the model and
    the data: its first batch is a later step's); {} when they agree."""
    if same or sweep is None or ref_sweep is None:
        return {}
    job, ref = sweep / "0", ref_sweep / "0"
    first, later = _inputs(ref), _inputs(job, resumed=True)
    resumed = []
    for name, rec in later.items():
        theirs = first.get(name.split("-")[0] + ".json", {})  # rank<r>-from<step>.json against rank<r>.json
        resumed += [f"{name} {key}: {rec.get(key)} against {theirs.get(key)}" for key in ("model_digest", "data_digest")
                    if rec.get(key) != theirs.get(key)]
    return {"inputs_differ": _inputs_difference(job, ref), "resumed_inputs_differ": resumed,
            "resumed_records": sorted(later)}


def check_too_many_nodes(work: Path, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    """A job asking for more nodes than the partition has is refused by vase before submitting, in one line."""
    logs = work / "too-many-nodes"
    p = _train(["-m", *CLUSTER, "cluster.nodes=3", "debug=fast"], logs, cache, env)
    rc = _wait(p, timeout=300)
    console = (logs / "console.log").read_text(errors="replace")
    errors = [ln for ln in console.splitlines() if ln.startswith(("error:", "config error:"))]
    submitted = bool(list(logs.rglob(".submitit")))
    ok = rc == 2 and len(errors) == 1 and "cluster.nodes=3" in errors[0] and not submitted
    return {"passed": ok, "rc": rc, "error": errors[0] if errors else None, "submitted": submitted}


def check_ddp(work: Path, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    return _ddp(work, cache, env, "ddp", [])


GRPO_SMALL = ["stage=grpo", "stage.module.num_generations=2", "stage.module.max_completion_length=8"]


def check_grpo_ddp(work: Path, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    out = _ddp(work, cache, env, "grpo-ddp", GRPO_SMALL)
    history = _history(Path(out["sweep"]) / "0") if out.get("sweep") else []
    out["reward_logged"] = bool(history) and all("reward" in h for h in history)
    out["passed"] = out["passed"] and out["reward_logged"]
    return out


def node_lines(events: list[dict[str, Any]]) -> list[str]:
    """One line per node a cluster's watchdog found drained or down (`LocalSlurm.check_nodes`), and what it did."""
    return [f"node {e['node']} {e['state']} at {e['at']} ({e['reason']}): "
            + ("resumed, its jobs went on" if e["resumed"] else "left as it was; jobs on it wait") for e in events]


def report(results: dict[str, dict[str, Any]], seconds: float, spinning: int = 0,
           events: list[dict[str, Any]] | None = None) -> str:
    load = f" ({spinning} busy processes beside it)" if spinning else ""
    lines = ["# SLURM cluster check (one node, then two, on the loopback)", "",
             f"{machine_stamp()['date']}, {os.cpu_count()} CPU cores{load}, {seconds / 60:.1f} minutes", "",
             *md.table(["part", "result", "seconds", "details"], align="llrl")]
    for name, r in results.items():
        details = ", ".join(f"{k}={v}" for k, v in r.items() if k not in ("passed", "seconds", "sweep"))
        lines.append(f"| {name} | {'PASS' if r['passed'] else 'FAIL'} | {r.get('seconds', '')} | {details} |")
    if events:
        lines += ["", *(f"- {line}" for line in node_lines(events))]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _spinning(n: int) -> Iterator[None]:
    """``n`` processes that keep the cores busy for the duration (--load)."""
    procs: list[subprocess.Popen] = []
    try:
        procs += [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.checks.cluster_check", description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / ".cache"))
    ap.add_argument("--only", nargs="+", help="run only these parts")
    ap.add_argument("--load", type=int, default=0, metavar="N",
                    help="keep N busy processes spinning on the cores throughout (the parts must pass on a loaded machine)")
    ap.add_argument("--load-parts", nargs="+", metavar="PART",
                    help="with --load: spin only while these parts run (the others on a quiet machine)")
    a = ap.parse_args(argv)
    if missing_tools():
        print(f"error: SLURM is not installed ({', '.join(missing_tools())} missing); make cluster-check installs "
              f"Debian's slurm-wlm and munge", file=sys.stderr)
        return 2
    # a kill (SIGTERM, SIGHUP) unwinds like an error, so the cluster's daemons and jobs are stopped all the same
    # (a second kill, as `timeout` forwards one beside the user's, must not cut that cleanup short)
    def unwind(signum: int, frame: Any) -> None:
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        sys.exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, unwind)
    started, cache = time.time(), Path(a.cache_dir)
    work = Path(run_dir(str(log_root(ROOT) / "cluster_check"), "never"))
    parts = Parts()  # the two-node parts compare with the one-node parts' results
    one_node: dict[str, Callable[[LocalSlurm], dict[str, Any]]] = {
        "sweep": lambda slurm: check_sweep(work, cache, slurm.env),
        "preemption": lambda slurm: check_preemption(work, cache, slurm, _reference(work, cache, [])),
        "time-limit": lambda slurm: check_time_limit(work, cache, slurm.env),
        "ddp": lambda slurm: check_ddp(work, cache, slurm.env),
        "grpo-ddp": lambda slurm: check_grpo_ddp(work, cache, slurm.env),
    }
    two_nodes: dict[str, Callable[[LocalSlurm], dict[str, Any]]] = {
        "two-node": lambda slurm: _two_node(work, cache, slurm.env, "two-node", [], parts.result_of("ddp")),
        "grpo-two-node": lambda slurm: _two_node(work, cache, slurm.env, "grpo-two-node", GRPO_SMALL,
                                                 parts.result_of("grpo-ddp")),
        "preemption-two-node": lambda slurm: check_two_node_preemption(work, cache, slurm),
        "sweep-two-node": lambda slurm: check_two_node_sweep(work, cache, slurm.env),
        "too-many-nodes": lambda slurm: check_too_many_nodes(work, cache, slurm.env),
    }
    wanted = set(a.only or [*one_node, *two_nodes])
    wanted |= {"ddp" for w in wanted if w == "two-node"} | {"grpo-ddp" for w in wanted if w == "grpo-two-node"}
    loaded = set(a.load_parts or [*one_node, *two_nodes]) if a.load else set()
    parts.order = [n for n in [*one_node, *two_nodes] if n in wanted]

    def step(name: str, part: Callable[[LocalSlurm], dict[str, Any]], slurm: LocalSlurm) -> Callable[[], Any]:
        def run() -> dict[str, Any]:
            with _spinning(a.load if name in loaded else 0):
                # a part that fails says why from its jobs' logs, whichever of its conditions failed
                return failure_tail({**part(slurm), **({"busy_processes": a.load} if name in loaded else {})})
        return lambda: parts.run(name, run, f"{a.load} busy processes beside it" if name in loaded else "",
                                 say_beside=name in BESIDE)

    # Both clusters at once, each node offering twice the machine's cores (jobs of different parts share them, as on
    # a busy cluster): on each, the parts in BESIDE start first in a lane of their own and the rest run one after
    # another in another lane (LANE_ORDER: the one-node DDP parts first, which the two-node parts compare with)
    clusters: list[LocalSlurm] = []
    with contextlib.ExitStack() as stack:
        lanes = []
        for nodes, group in ((1, one_node), (2, two_nodes)):
            chosen = {n: group[n] for n in LANE_ORDER if n in group and n in wanted}
            if not chosen:
                continue
            # job ids numbered apart (1001.., 5001..): DDP's rendezvous port comes from the job id
            slurm = stack.enter_context(LocalSlurm(cpus=2 * (os.cpu_count() or 1) * nodes, nodes=nodes,
                                                   keep_logs_to=work / "slurm-logs" / f"{nodes}-node",
                                                   first_job_id=FIRST_JOB_ID[nodes]))
            clusters.append(slurm)
            lanes += [[step(n, p, slurm)] for n, p in chosen.items() if n in BESIDE]
            lanes.append([step(n, p, slurm) for n, p in chosen.items() if n not in BESIDE])
        parts.lanes(*lanes)
    return _finish(work, parts.ordered(), [e for c in clusters for e in c.events], started, a.load,
                   0 if a.load_parts else a.load)


def _finish(work: Path, results: dict[str, dict[str, Any]], events: list[dict[str, Any]], started: float, load: int,
            spinning: int) -> int:
    """The check's end: the drained nodes' lines, cluster_check.json and .md, the PASS/FAIL line; its exit code."""
    for line in node_lines(events):
        print(line)
    ok = bool(results) and all(r["passed"] for r in results.values())
    if ok and not events:  # the daemons' logs are kept for failures and drained nodes only
        shutil.rmtree(work / "slurm-logs", ignore_errors=True)  # this check's own folder under its run directory
    atomic_write_json(work / "cluster_check.json", {"machine": machine_stamp(), "load": load, "results": results,
                                                    "node_events": events})
    atomic_write_text(work / "cluster_check.md", report(results, time.time() - started, spinning, events))
    print(f"{'PASS' if ok else 'FAIL'}: cluster check, {len(results)} parts, {(time.time() - started) / 60:.1f} min "
          f"({work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
