"""The parallel launcher's plan and its jobs' processes (`vase.launchers.ParallelLocalLauncher` uses them): how many
jobs run at once and with how many threads (`parallel_plan`, `cap_jobs`), what a job's process reads before torch
loads (`threads_in_children`), one job in its own process (`parallel_job`), its exit in words (`exit_said`), and a
SIGTERM to the sweep taken as its Ctrl-C (`sigterm_as_interrupt`)."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
from hydra.core.singleton import Singleton
from hydra.core.utils import JobStatus, run_job, setup_globals
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from vase.errors import first_line
from vase.io import atomic_write_bytes
from vase.progress import LabelledLines
from vase.workers import is_auto, positive_count, usable_cores


def cap_jobs(jobs: Any, threads_per_job: Any, cores: int | None = None) -> int | None:
    """Check the parallel launcher's ``jobs`` and ``threads_per_job`` (ValueError naming the key); returns the number
    of jobs at once to use where ``jobs`` asks for more than the usable ``cores`` (a line says so), else None.

    >>> cap_jobs(999, "auto", cores=2)
    hydra.launcher.jobs=999 asks for more jobs at once than the 2 usable cores: 2 at a time
    2
    >>> cap_jobs("auto", 1, cores=2) is None, cap_jobs(2, "auto", cores=2) is None
    (True, True)
    """
    cores = cores if cores is not None else usable_cores()
    if not is_auto(threads_per_job):
        positive_count(threads_per_job, "hydra.launcher.threads_per_job", "threads")
    if is_auto(jobs) or positive_count(jobs, "hydra.launcher.jobs", "jobs at once") <= cores:
        return None
    print(f"hydra.launcher.jobs={jobs} asks for more jobs at once than the {cores} usable cores: {cores} at a time",
          flush=True)
    return cores


WIND_DOWN_S = 30.0
"""After Ctrl-C, how long the sweep waits for its jobs to save at the end of their step before it sends them SIGTERM
(a job that never heard the Ctrl-C: it was sent to the sweep's process alone)."""


class SweepStopped(KeyboardInterrupt):
    """A SIGTERM to the sweep's process while its jobs run, taken as its Ctrl-C is (``by``: what stopped it)."""

    by = "SIGTERM"


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a sweep's jobs run in their processes: SIGTERM raises `SweepStopped` in the sweep's process (by default
    it ended the process at once, its jobs running on unwatched, its record ``running``)."""
    def stop(signum: int, frame: Any) -> None:
        raise SweepStopped()

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: signals stay with whoever has them
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def job_config(hydra_context: Any, config: DictConfig, overrides: list[str], num: int,
               with_output_dir: bool = False) -> DictConfig:
    """Sweep job ``num``'s config, composed as Hydra's basic launcher composes it (its id and number set);
    ``with_output_dir``: its ``hydra.runtime.output_dir`` too, which Hydra sets only when the job runs (what the
    parent needs to prepare a job's shared inputs, or to report on it, without running it)."""
    cfg = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(cfg):
        cfg.hydra.job.id = num
        cfg.hydra.job.num = num
    if with_output_dir:
        with read_write(cfg.hydra.runtime):
            cfg.hydra.runtime.output_dir = str(Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir))
    return cfg


def exit_said(code: int | None, num: int = 0) -> str:
    """Job ``num``'s process's exit code in words.

    >>> exit_said(-9), exit_said(143)
    ('killed by SIGKILL: by hand, or out of memory', 'stopped by SIGTERM (exit code 143)')
    >>> exit_said(2, 1)
    'exit code 2: its [#1] lines above say why'
    """
    if code is None:
        return "still running"
    if code < 0 or code > 128:
        try:
            name = signal.Signals(-code if code < 0 else code - 128).name
        except ValueError:
            name = f"signal {-code if code < 0 else code - 128}"
        return f"killed by {name}: by hand, or out of memory" if code == -signal.SIGKILL else \
            f"{'killed' if code < 0 else 'stopped'} by {name}" + ("" if code < 0 else f" (exit code {code})")
    return f"exit code {code}: its [#{num}] lines above say why"


def on_cpu(config: DictConfig) -> bool:
    """Whether a sweep's jobs train on the CPU (``trainer.accelerator`` cpu, or auto on a machine without CUDA)."""
    accelerator = str(OmegaConf.select(config, "trainer.accelerator", default="cpu"))
    if accelerator == "auto":
        import torch  # lazy: only an auto accelerator asks

        return not torch.cuda.is_available()
    return accelerator == "cpu"


def parallel_plan(jobs: Any, threads_per_job: Any, n_jobs: int, cores: int | None = None,
                  on_cpu: bool = True) -> tuple[int, int | None]:
    """How many of ``n_jobs`` run at once on ``cores`` (this process's usable ones), and each one's threads (None:
    those it would use alone). ``auto`` jobs: one per core, no more than the jobs, on the CPU; one at a time on a GPU
    (jobs side by side would share its memory: a number asks for that knowingly).

    >>> parallel_plan("auto", "auto", 2, cores=2), parallel_plan("auto", 1, 6, cores=2), parallel_plan(1, "auto", 3)
    ((2, None), (2, 1), (1, None))
    >>> parallel_plan("auto", "auto", 4, cores=16, on_cpu=False), parallel_plan(2, "auto", 4, cores=16, on_cpu=False)
    ((1, None), (2, None))
    >>> parallel_plan(0, "auto", 3, cores=2)
    Traceback (most recent call last):
    ...
    ValueError: hydra.launcher.jobs=0 must be 'auto' or a positive number of jobs at once
    """
    cores = cores if cores is not None else usable_cores()
    if is_auto(jobs):
        at_once = min(cores, n_jobs) if on_cpu else 1
    else:
        at_once = positive_count(jobs, "hydra.launcher.jobs", "jobs at once")
    at_once = max(1, min(at_once, n_jobs))
    threads = None if is_auto(threads_per_job) else \
        positive_count(threads_per_job, "hydra.launcher.threads_per_job", "threads")
    return at_once, threads


@contextlib.contextmanager
def threads_in_children(threads: int | None, passive: bool = True) -> Iterator[None]:
    """While a job's process starts, what it reads before torch loads: with ``passive``, OpenMP's threads asleep at a
    barrier rather than spinning (``OMP_WAIT_POLICY=PASSIVE``, unless the user set a policy; it changes no
    arithmetic) and, where ``threads`` is a number, ``OMP_NUM_THREADS`` and MKL's; this process's own are put back
    after."""
    keys = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    saved = {k: os.environ.get(k) for k in keys}
    if passive:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if threads is not None:
        os.environ.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def parallel_job(state: bytes, overrides: list[str], num: int, threads: int | None, out: str) -> None:
    """One sweep job in its own process (`ParallelLocalLauncher`): Hydra's state as the sweep had it, its lines
    numbered, its threads set, its return pickled to ``out`` (an error that does not pickle: its type and words)."""
    sys.stdout = LabelledLines(sys.stdout, f"[#{num}] ")
    sys.stderr = LabelledLines(sys.stderr, f"[#{num}] ")
    if threads is not None:
        import torch  # lazy: only a job's process needs it here

        torch.set_num_threads(threads)
    singleton, hydra_context, task_function, config = cloudpickle.loads(state)
    Singleton.set_state(singleton)
    setup_globals()
    ret = run_job(hydra_context=hydra_context, task_function=task_function,
                  config=job_config(hydra_context, config, overrides, num),
                  job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    # what comes back: the job's end, not its configs (Hydra's structured config classes do not pickle across
    # processes); the sweep recomposes those from the overrides
    value = ret._return_value
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - a return value or an error that does not pickle: its type and words
        value = RuntimeError(f"{type(value).__name__}: {first_line(value, 300)}") \
            if ret.status == JobStatus.FAILED else None
    data = pickle.dumps({"status": ret.status.name, "value": value, "working_dir": ret.working_dir,
                         "task_name": ret.task_name})
    atomic_write_bytes(Path(out), data)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()

