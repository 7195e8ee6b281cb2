"""The SLURM checks: GPUs and tasks per node for submitit (``${vase.slurm_gpus:...}``, ``${vase.slurm_tasks:...}``), a
time limit long enough for the warning signal, and no more nodes than the partition has (``cluster.*``)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from vase.errors import ConfigError


def slurm_gpus(gpus_per_node: Any) -> int | None:
    """``${vase.slurm_gpus:${cluster.gpus_per_node}}``: the GPUs sbatch asks for; none on a CPU partition (0), where
    submitit would otherwise request ``--gpus-per-node=0`` and sbatch refuses it.

    >>> slurm_gpus(8), slurm_gpus(0), slurm_gpus(None)
    (8, None, None)
    """
    return int(gpus_per_node) if gpus_per_node else None


def slurm_tasks(tasks_per_node: Any, gpus_per_node: Any) -> int:
    """``${vase.slurm_tasks:${cluster.tasks_per_node},${cluster.gpus_per_node}}``: processes (Lightning ranks) per node:
    ``cluster.tasks_per_node`` when set, else one per GPU, and one on a CPU partition.

    >>> slurm_tasks(None, 8), slurm_tasks(None, 0), slurm_tasks(2, 0)
    (8, 1, 2)
    """
    if tasks_per_node not in (None, "", "null"):
        if int(tasks_per_node) < 1:
            raise ConfigError(f"cluster.tasks_per_node={tasks_per_node} must be at least 1 (or null: one per GPU)")
        return int(tasks_per_node)
    return max(int(gpus_per_node or 0), 1)


SLURM_LIMIT_CHECK_S = 30  # slurmctld tests time limits (and sends --signal's warning) about every 30 s
SLURM_STARTUP_S = 20  # what a job needs to start Python and install submitit's signal handler


def check_slurm_signal(timeout_min: Any, signal_delay_s: Any) -> None:
    """Refuse a time limit too short for the warning signal that submitit asks for (``--signal=USR2@delay``).

    slurmctld sends it at its first limit test (every ~30 s) at which the time left is under ``delay + 30`` s, so a
    job whose limit is not well above that gets USR2 at launch, before submitit's handler exists, and dies (exit 140)
    on every restart instead of checkpointing and requeueing.

    >>> check_slurm_signal(1440, 90)
    >>> check_slurm_signal(2, 90)
    Traceback (most recent call last):
    ...
    vase.errors.ConfigError: cluster.timeout_min=2 (120 s) leaves 0 s before SLURM may send the warning signal (hydra.launcher.signal_delay_s=90, plus up to 30 s between SLURM's limit tests); a job needs about 20 s to start and catch it. Raise cluster.timeout_min or lower hydra.launcher.signal_delay_s
    """
    if timeout_min in (None, "") or signal_delay_s in (None, ""):
        return
    limit = int(float(timeout_min) * 60)
    left = limit - int(signal_delay_s) - SLURM_LIMIT_CHECK_S
    if left < SLURM_STARTUP_S:
        raise ConfigError(f"cluster.timeout_min={timeout_min} ({limit} s) leaves {max(left, 0)} s before SLURM may "
                          f"send the warning signal (hydra.launcher.signal_delay_s={signal_delay_s}, plus up to "
                          f"{SLURM_LIMIT_CHECK_S} s between SLURM's limit tests); a job needs about {SLURM_STARTUP_S} s "
                          f"to start and catch it. Raise cluster.timeout_min or lower hydra.launcher.signal_delay_s")


def slurm_partition_nodes(partition: str | None, run: Any = None) -> tuple[str, int] | None:
    """The partition's name and how many nodes it has (``sinfo``), the default partition when none is named; None
    where SLURM's tools are not here or the cluster does not answer (nothing to check against)."""
    if run is None:
        if shutil.which("sinfo") is None:
            return None
        run = lambda args: subprocess.run(args, capture_output=True, text=True, timeout=30)  # noqa: E731
    try:
        p = run(["sinfo", "-h", "-o", "%P %D"])
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    counts: dict[str, int] = {}
    default = None
    for line in p.stdout.splitlines():
        name, _, n = line.strip().partition(" ")
        if not n.strip().isdigit():
            continue
        if name.endswith("*"):
            name = default = name[:-1]
        counts[name] = counts.get(name, 0) + int(n)
    name = partition or default
    return (name, counts[name]) if name in counts else None


def check_slurm_nodes(nodes: Any, partition: Any, run: Any = None) -> None:
    r"""Refuse a job that asks for more nodes than its partition has: sbatch accepts it and it pends for ever.

    >>> ok = lambda args: type("P", (), {"returncode": 0, "stdout": "debug* 2\ngpu 8\n"})()
    >>> check_slurm_nodes(2, None, run=ok)
    >>> check_slurm_nodes(3, None, run=ok)
    Traceback (most recent call last):
    ...
    vase.errors.ConfigError: cluster.nodes=3 asks for more nodes than partition debug has (2); a job that asks for more pends for ever. Lower cluster.nodes or choose a larger partition with cluster.partition
    """
    if nodes in (None, ""):
        return
    found = slurm_partition_nodes(None if partition in (None, "") else str(partition), run)
    if found is not None and int(nodes) > found[1]:
        raise ConfigError(f"cluster.nodes={nodes} asks for more nodes than partition {found[0]} has ({found[1]}); a job "
                          f"that asks for more pends for ever. Lower cluster.nodes or choose a larger partition with "
                          f"cluster.partition")


def check_cluster(node: Any) -> None:
    """``cluster.*`` (``cluster=slurm``): whole numbers in range, each named in one line, before anything is submitted
    (``cluster.nodes=0`` passed the config check and failed in Hydra's launcher once the model had loaded).

    >>> check_cluster({"nodes": 2, "gpus_per_node": 0, "tasks_per_node": None, "timeout_min": 60})
    >>> check_cluster({"nodes": 0})
    Traceback (most recent call last):
    ...
    vase.errors.ConfigError: cluster.nodes=0 must be a whole number of at least 1 (nodes per job)
    """
    rules = {"nodes": (1, "nodes per job"), "gpus_per_node": (0, "0 for a CPU partition"),
             "tasks_per_node": (1, "or null: one per GPU"), "cpus_per_task": (1, "CPU cores per task"),
             "mem_gb": (1, "memory per node in GB"), "timeout_min": (1, "minutes")}
    for key, (low, what) in rules.items():
        if key not in node or (node[key] is None and key != "nodes"):  # null: the launcher's default
            continue
        v = node[key]
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= low
        if not ok:
            raise ConfigError(f"cluster.{key}={v!r} must be a whole number of at least {low} ({what})")
