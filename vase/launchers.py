"""A sweep that outlives a failed or killed job: the other jobs finish, the report covers them and names the failed one.

Hydra's grid sweeper raises the first failed job's error once its batch is done, before the multirun's end, so the
sweep's summary and ablation report were never written; and submitit's launchers raise ``UncompletedJobError`` for a
job whose process was killed (SIGKILL, an out-of-memory kill, a lost node) while collecting results, so the other
jobs' results were dropped too. Here:

- `KeepGoingBasicSweeper` (``hydra/sweeper: keep_going``, the default of train.py) runs every job and remembers the
  failures; `vase.reports.sweep_summary.SweepSummary` writes the report over the finished jobs, names each failed one
  and exits 1;
- `SubmititLocalLauncher` / `SubmititSlurmLauncher` (``cluster=local`` / ``cluster=slurm``) collect each job on its
  own: a job that ended without a result is a failed job, its run record says why, and its line is printed at once.

Rerunning the same command (``resume=auto``) takes the sweep up again: finished jobs are kept, only the failed ones
run (from their last checkpoint where they saved one).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import multiprocessing
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import cloudpickle
import submitit
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.experimental.callback import Callback
from hydra.plugins.launcher import Launcher
from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from submitit.core.utils import FailedJobError

from vase.choices import CPU_ALLOCATORS, CPU_KERNELS
from vase.config import (
    check_cluster,
    check_only,
    check_slurm_nodes,
    check_slurm_signal,
    process_settings,
    sweep_values_of,
    validate,
)
from vase.config.entry import interrupted_exit
from vase.errors import ConfigError, Interrupted, config_exit, first_line
from vase.io import atomic_write_bytes
from vase.kernels import apply_portable_threads
from vase.progress import LabelledLines
from vase.reports.sweep_summary import failed_line
from vase.runs import record_lost
from vase.workers import callers_script_hidden, is_auto, positive_count, usable_cores

log = logging.getLogger("vase")


class JobLost(RuntimeError):
    """A sweep job whose process ended without a result (killed, or its node lost)."""


class _Settling:
    """The sweeper's view of its launcher: a failed job's return is kept aside and handed on as settled, so the grid
    goes on to its end (Hydra's sweeper raises at the first failed return)."""

    def __init__(self, launcher: Any, failed: list[JobReturn]) -> None:
        self.launcher, self.failed = launcher, failed

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        out = []
        for ret in self.launcher.launch(job_overrides, initial_job_idx=initial_job_idx):
            if ret.status == JobStatus.FAILED:
                note_failed(ret, self.failed)
                ret = JobReturn(overrides=ret.overrides, cfg=ret.cfg, hydra_cfg=ret.hydra_cfg,
                                working_dir=ret.working_dir, task_name=ret.task_name, status=JobStatus.COMPLETED)
            out.append(ret)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.launcher, name)


def note_failed(ret: JobReturn, failed: list[JobReturn]) -> None:
    """A sweep's failed job kept aside for its report; one that failed before its run began gets a record (failed)."""
    failed.append(ret)
    folder = OmegaConf.select(ret.hydra_cfg, "hydra.runtime.output_dir", default=None) \
        if ret.hydra_cfg is not None else None  # the job's folder (working_dir is the sweep's cwd)
    if folder:
        err = ret._return_value
        record_lost(folder, f"{type(err).__name__}: {first_line(err, 300)}")


class KeepGoingBasicSweeper(BasicSweeper):
    """Hydra's grid sweeper, except that a failed job does not stop the sweep before its report: every job runs, and
    the multirun's end (`SweepSummary`) names the failed ones and exits 1."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)
        self.failed: list[JobReturn] = []

    def sweep(self, arguments: list[str]) -> Any:
        inner = self.launcher
        self.launcher = _Settling(inner, self.failed)
        try:
            return super().sweep(arguments)
        finally:
            self.launcher = inner


# Hydra builds the sweeper's sampler (optuna.samplers.TPESampler) right after importing this module, and Optuna's
# storage imports alembic, which says each of its plugins at INFO: seven lines in every optuna sweep's log
logging.getLogger("alembic").setLevel(logging.WARNING)


class CheckingOptunaSweeper(OptunaSweeper):
    """Optuna's sweeper (``sweep=optuna``). Under ``VASE_CHECK_CONFIG`` each trial it proposes is checked (its own
    ``config ok`` line) and the search ends as every sweep's check does, with status 0: a check trains nothing, so no
    trial has a value to rank, which Optuna would end in a ``No trials are completed yet`` traceback."""

    def sweep(self, arguments: list[str]) -> Any:
        if check_only() is None:
            return super().sweep(arguments)
        quiet = logging.getLogger("hydra_plugins.hydra_optuna_sweeper._impl")  # "Failed experiment" per unranked trial
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            super().sweep(arguments)
        except ValueError as e:
            if "No trials are completed" not in str(e):
                raise
        finally:
            quiet.setLevel(level)
        return None  # the multirun's end says "config ok" for the sweep (`SweepSummary`)


class _CollectEach:
    """submitit's launch, collecting each job on its own: one that ended without a result is a failed return (with its
    run record marked), not an exception that drops the other jobs' results."""

    _EXECUTOR: str
    params: dict[str, Any]
    config: Any

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        kind = self._EXECUTOR
        queue_keys = set(OmegaConf.structured(BaseQueueConf).keys())
        executor = submitit.AutoExecutor(cluster=kind, folder=self.params["submitit_folder"],
                                         **({f"{kind}_max_num_timeout": self.params["max_num_timeout"]}
                                            if "max_num_timeout" in self.params else {}))
        executor.update_parameters(**{k if k in queue_keys else f"{kind}_{k}": v for k, v in self.params.items()
                                      if k not in ("submitit_folder", "max_num_timeout")})
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info("submitit '%s' sweep: %s", kind, sweep_dir)
        nums = [initial_job_idx + i for i in range(len(job_overrides))]
        for n, overrides in zip(nums, job_overrides):
            log.info("\t#%d : %s", n, " ".join(filter_overrides(overrides)))
        state = Singleton.get_state()
        try:
            jobs = executor.map_array(self, [list(o) for o in job_overrides], ["hydra.sweep.dir"] * len(nums), nums,
                                      [f"job_id_for_{n}" for n in nums], [state] * len(nums))
        except (subprocess.CalledProcessError, FailedJobError) as e:
            if kind != "slurm":
                raise
            # sbatch refused (no controller, a partition that does not exist): one line with its reason
            print(f"error: {submission_refused(e)}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        return [self._collect(job, n, list(o), sweep_dir) for job, n, o in zip(jobs, nums, job_overrides)]

    def _collect(self, job: Any, num: int, overrides: list[str], sweep_dir: Path) -> JobReturn:
        try:
            return job.results()[0]
        except Exception as e:  # noqa: BLE001 - submitit's UncompletedJobError and FailedJobError: the job is lost
            folder = sweep_dir / str(num)  # hydra.sweep.subdir is the job's number (conf/hydra/default.yaml)
            first = first_line(e) or type(e).__name__
            err = JobLost(f"its process ended without a result (killed: SIGKILL, out of memory or a lost node; "
                          f"submitit: {first[:300]})")
            record_lost(folder, str(err))
            print(failed_line(num, overrides, err, folder), file=sys.stderr, flush=True)
            return JobReturn(overrides=overrides, working_dir=str(folder), status=JobStatus.FAILED,
                             _return_value=err)


def submission_refused(e: Exception) -> str:
    """sbatch's refusal of a sweep's jobs (submitit's FailedJobError, or the CalledProcessError under it) as one line:
    sbatch's own last line and where to look.

    >>> said = "sbatch: error: fetch_config: DNS SRV lookup failed" + chr(10) + "sbatch: fatal: Could not establish"
    >>> print(submission_refused(RuntimeError(said + " a configuration source"))[:91])
    sbatch refused the sweep's jobs (sbatch: fatal: Could not establish a configuration source)
    """
    parts = [getattr(e, "stderr", None), getattr(e, "output", None)] if hasattr(e, "stderr") else [str(e)]
    text = "\n".join(x.decode(errors="replace") if isinstance(x, bytes) else str(x or "") for x in parts)
    said = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("sbatch:")]
    return (f"sbatch refused the sweep's jobs ({said[-1] if said else first_line(e) or type(e).__name__}); nothing "
            f"was submitted. Check that this machine reaches the SLURM controller (sinfo answers; SLURM_CONF or "
            f"/etc/slurm/slurm.conf names it) and that cluster.partition and cluster.account exist (sinfo, sacctmgr); "
            f"or use cluster=local to run the same jobs here")


class SubmititLocalLauncher(_CollectEach, LocalLauncher):
    """``cluster=local``: submitit's local executor, each job collected on its own."""


class SubmititSlurmLauncher(_CollectEach, SlurmLauncher):
    """``cluster=slurm``: submitit's SLURM executor, each job collected on its own."""


class SlurmPreflight(Callback):
    """Hydra callback (``conf/hydra/default.yaml``, before the sweep's summary): a sweep on SLURM (submitit's SLURM
    launcher) is checked before anything is submitted: the cluster section, the signal and node settings, and that
    ``sbatch`` is on PATH; each refusal is one line and exit 2. With ``VASE_CHECK_CONFIG=1`` the sweep's own config is
    validated here and nothing is submitted (the jobs would check theirs only once SLURM ran them)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launcher = config.hydra.launcher
        if "timeout_min" not in launcher or "signal_delay_s" not in launcher:
            return  # not submitit's SLURM launcher
        try:
            if isinstance(config.get("cluster"), DictConfig):
                check_cluster(config.cluster)  # cluster.nodes=abc: one line here, not submitit's traceback
            check_slurm_signal(launcher.timeout_min, launcher.signal_delay_s)
            check_slurm_nodes(launcher.get("nodes"), launcher.get("partition"))
        except ConfigError as e:  # Hydra turns a callback's exception into a warning and submits anyway
            config_exit(e)
        if check_only():
            sweep_cfg = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
            OmegaConf.update(sweep_cfg, "paths.output_dir", "<sweep>/<job>", force_add=True)  # Hydra sets it per job
            try:
                validate(sweep_cfg)
            except ConfigError as e:
                config_exit(e)
            print(f"config ok: {' '.join(config.hydra.overrides.task)} (SLURM sweep: checked, not submitted)")
            raise SystemExit(0)
        # submitit needs both of SLURM's clients: without either, its raw traceback (Could not detect "srun")
        for tool, role in (("sbatch", "submits the jobs through"), ("srun", "runs each job through")):
            if shutil.which(tool) is None:
                print(f"error: cluster=slurm {role} SLURM's {tool}, which this machine does not have (not on PATH): "
                      "run the command on the cluster's login node, or use cluster=local to run the same jobs here "
                      "through submitit", file=sys.stderr, flush=True)
                raise SystemExit(2)


PROCESS_SETTINGS = {"cpu_kernels": CPU_KERNELS, "cpu_allocator": CPU_ALLOCATORS, "resume": ("auto", "never")}
"""The keys each job's process takes before it computes (`vase.config.process_settings`), and the values each may have:
checked for the whole sweep at its start, swept or not, so that a bad one is one line before any folder is made."""


class SweepPreflight(Callback):
    """Hydra callback (``conf/hydra/default.yaml``, the first): before a sweep makes its folder, every process setting
    each of its jobs would take (`PROCESS_SETTINGS`, each value a sweep gives one too) and the parallel launcher's
    ``jobs`` and ``threads_per_job`` are checked; a bad value is one line and exit 2, and leaves no folder behind.
    ``jobs`` above this process's usable cores is capped there, with a line."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        params = config.hydra.sweeper.get("params")
        swept = sweep_values_of(config.hydra.overrides.task, params)
        try:
            for key, allowed in PROCESS_SETTINGS.items():
                values = swept.get(key) or [OmegaConf.select(config, key, default=None)]
                for value in values:
                    if value is not None and str(value) not in allowed:
                        raise ConfigError(f"{key}={value!r} must be one of {list(allowed)}")
            launcher = config.hydra.launcher
            if str(launcher.get("_target_", "")).endswith("ParallelLocalLauncher"):
                at_once = cap_jobs(launcher.get("jobs", "auto"), launcher.get("threads_per_job", "auto"))
                if at_once is not None:
                    with read_write(launcher), open_dict(launcher):
                        launcher.jobs = at_once
        except (ConfigError, ValueError) as e:
            config_exit(ConfigError(str(e)))


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


class ParallelLocalLauncher(Launcher):
    """``hydra/launcher=parallel``: a sweep's jobs on this machine, several at once, each in its own spawned process.
    Small CPU jobs (the tiny model's GRPO) are mostly Python and dispatch between small products, so a second job
    gains more than a second thread: on 2 cores, two GRPO jobs side by side took 0.47 s a step each against 0.38 s for
    one alone (benchmarks/RESULTS.md, "Time to a verdict").

    Each job keeps the threads it would use alone (``threads_per_job: auto``), so its numbers are the ones a sweep
    run one job at a time prints, to the last bit (MKL splits a product's sums by thread: another count, other bits);
    the jobs run in waves of ``jobs``, and in a wave of several their OpenMP threads sleep at a barrier instead of
    spinning (``OMP_WAIT_POLICY=PASSIVE``, which changes no arithmetic), so jobs side by side share the cores instead
    of each spinning on the other's time; a wave of one (an odd sweep's last job) spins as a job alone does. A number
    instead sets each job's threads (``OMP_NUM_THREADS``; its run record names them).

    Before the jobs fan out, what they share is built here once, one sweep job's config at a time, with every core:
    the shared SFT adapter (``sft_init``; its model and data with it), so no job waits on another's lock with its
    core idle. A job whose preparation fails is left to fail on its own, with its own error, like any other. Each job
    prints its lines with its number in front (``[#1] grpo: step ...``), and its log file is its own as before; one
    whose process dies without a result (killed, out of memory) is a failed job whose record says so, and the others
    go on. ``jobs=1`` runs them one after the other in this process, as Hydra's basic launcher does.
    """

    def __init__(self, jobs: Any = "auto", threads_per_job: Any = "auto", prepare: bool = True) -> None:
        super().__init__()
        self.jobs, self.threads_per_job, self.prepare = jobs, threads_per_job, bool(prepare)
        self.config: DictConfig | None = None
        self.task_function: Any = None
        self.hydra_context: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None and self.hydra_context is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        try:
            at_once, threads = parallel_plan(self.jobs, self.threads_per_job, len(job_overrides),
                                             on_cpu=on_cpu(self.config))
        except ValueError as e:
            config_exit(ConfigError(str(e)))
        sweep_dir = Path(str(self.config.hydra.sweep.dir))  # resolved (and cached in the config) before any pickling
        sweep_dir.mkdir(parents=True, exist_ok=True)
        nums = [initial_job_idx + i for i in range(len(job_overrides))]
        log.info("Launching %d jobs on this machine, %d at a time, %s", len(nums), at_once,
                 "each with the threads it would use alone" if threads is None else
                 f"{threads} thread{'' if threads == 1 else 's'} each")
        for n, overrides in zip(nums, job_overrides):
            log.info("\t#%d : %s", n, " ".join(filter_overrides(overrides)))
        if at_once == 1 or check_only() is not None:  # a config check trains nothing: no processes to start
            return [self._in_process(list(o), n) for n, o in zip(nums, job_overrides)]
        if self.prepare:
            t0 = time.monotonic()
            for n, overrides in zip(nums, job_overrides):
                self._prepare(list(overrides), n)
            log.info("the jobs' shared inputs ready in %.0f s; starting the jobs", time.monotonic() - t0)
        return self._fan_out([list(o) for o in job_overrides], nums, at_once, threads, sweep_dir)

    def _in_process(self, overrides: list[str], num: int) -> JobReturn:
        ret = run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                      config=job_config(self.hydra_context, self.config, overrides, num), job_dir_key="hydra.sweep.dir",
                      job_subdir_key="hydra.sweep.subdir")
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return ret

    def _prepare(self, overrides: list[str], num: int) -> None:
        """What job ``num`` shares with others (`vase.pipeline.train.prepare_shared`), built here with every core."""
        cfg = job_config(self.hydra_context, self.config, overrides, num, with_output_dir=True)
        HydraConfig.instance().set_config(cfg)
        task_cfg = copy.deepcopy(cfg)
        with read_write(task_cfg), open_dict(task_cfg):
            del task_cfg["hydra"]
        # lazy: the pipeline loads torch and Lightning, which a sweep that fails its check never needs
        from vase.pipeline.train import prepare_shared

        try:
            unpinned = process_settings(task_cfg)  # the kernels and allocator its job would take (validated)
            if unpinned:  # torch loaded here before the pins: the job, which pins first, builds them with its kernels
                log.warning("#%d: its shared inputs are left to the job: %s", num, unpinned)
                return
            apply_portable_threads()
            prepare_shared(task_cfg)
        except Interrupted as e:  # a signal stopped it (its line said): the sweep stops, as the job building it would
            exit_as = getattr(e, "exit", None)
            if exit_as is not None:
                exit_as()
            raise SystemExit(128 + e.signum) from None
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the job meets the same error and fails with its own record
            log.warning("#%d: its shared inputs were not prepared before the fan-out (%s); the job builds them",
                        num, first_line(e, 300) or type(e).__name__)
        finally:
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)

    def _fan_out(self, overrides: list[list[str]], nums: list[int], at_once: int, threads: int | None,
                 sweep_dir: Path) -> list[JobReturn]:
        """The jobs in waves of ``at_once``, each wave started together and waited for whole. OpenMP's threads sleep
        when idle only in a wave of several: a job alone (an odd sweep's last) spins as usual, which on 2 cores is
        0.34 against 0.51 s a GRPO step (benchmarks/RESULTS.md, "Time to a verdict"). Ctrl-C (or SIGTERM) stops the
        sweep as it stops a run: each job saves at the end of its step (`_wind_down`), one line says so, and the
        sweep's record says ``interrupted``; no job outlives its sweep."""
        ctx = multiprocessing.get_context("spawn")
        state = cloudpickle.dumps((Singleton.get_state(), self.hydra_context, self.task_function, self.config))
        results: dict[int, JobReturn] = {}
        jobs = list(zip(nums, overrides))
        with tempfile.TemporaryDirectory(prefix="vase-sweep-") as tmp, sigterm_as_interrupt():
            for first in range(0, len(jobs), at_once):
                wave = jobs[first:first + at_once]
                running: dict[int, tuple[Any, list[str], Path]] = {}
                try:
                    for num, ovr in wave:
                        out = Path(tmp) / f"{num}.pkl"
                        proc = ctx.Process(target=_parallel_job, args=(state, ovr, num, threads, str(out)),
                                           name=f"vase-sweep-job-{num}")
                        with threads_in_children(threads, passive=len(wave) > 1), callers_script_hidden():
                            proc.start()
                        running[num] = (proc, ovr, out)
                    for num, (proc, ovr, out) in list(running.items()):
                        proc.join()
                        results[num] = self._collect(proc, num, ovr, out, sweep_dir)
                        del running[num]
                except KeyboardInterrupt as e:  # Ctrl-C, or a SIGTERM (`sigterm_as_interrupt`)
                    by = getattr(e, "by", "Ctrl-C")
                    self._wind_down(running, sweep_dir, by)
                    interrupted_exit("the sweep", by)
                finally:
                    for proc, _, _ in running.values():  # a second Ctrl-C while they saved: nothing outlives the sweep
                        if proc.is_alive():
                            proc.kill()
                            proc.join(10)
        return [results[n] for n in nums]

    def _wind_down(self, running: dict[int, tuple[Any, list[str], Path]], sweep_dir: Path, by: str) -> None:
        """After Ctrl-C (``by``): the jobs heard it too (one process group) and save at the end of their step; one
        that has not ended within `WIND_DOWN_S` (the Ctrl-C was the sweep's alone: ``kill -INT``), or every job
        after a SIGTERM, which only the sweep heard, is sent SIGTERM, which it takes as the same request (its line is
        said once). Each job's record then says how it ended; a second Ctrl-C stops them at once."""
        deadline = time.monotonic() + (0 if by == "SIGTERM" else WIND_DOWN_S)
        for proc, _, _ in running.values():
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc, _, _ in running.values():
            if proc.is_alive():
                proc.terminate()
        for num, (proc, ovr, out) in list(running.items()):
            proc.join()
            self._collect(proc, num, ovr, out, sweep_dir, stopped_by=by)

    def _collect(self, proc: Any, num: int, overrides: list[str], out: Path, sweep_dir: Path,
                 stopped_by: str | None = None) -> JobReturn:
        """Job ``num``'s return, from what its process left in ``out``; one that left none (killed, or ``stopped_by``
        the sweep's Ctrl-C or SIGTERM before it could say) gets a record saying how it ended. A failed job's line is
        said here, not a stopped one's: its own lines said where it saved."""
        if out.is_file():
            end = pickle.loads(out.read_bytes())
            cfg = job_config(self.hydra_context, self.config, overrides, num, with_output_dir=True)
            task_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
            ret = JobReturn(overrides=overrides, cfg=task_cfg, hydra_cfg=OmegaConf.masked_copy(cfg, "hydra"),
                            working_dir=end["working_dir"], task_name=end["task_name"],
                            status=JobStatus[end["status"]], _return_value=end["value"])
            if ret.status == JobStatus.FAILED and stopped_by is None:
                print(failed_line(num, overrides, ret._return_value, sweep_dir / str(num)), file=sys.stderr, flush=True)
            return ret
        folder = sweep_dir / str(num)  # hydra.sweep.subdir is the job's number (conf/hydra/default.yaml)
        if stopped_by is not None:
            err = JobLost(f"stopped by the sweep's {stopped_by} ({exit_said(proc.exitcode, num)}) before it saved")
            record_lost(folder, str(err), status="interrupted")
        else:
            err = JobLost(f"its process ended without a result ({exit_said(proc.exitcode, num)})")
            record_lost(folder, str(err))
            print(failed_line(num, overrides, err, folder), file=sys.stderr, flush=True)
        return JobReturn(overrides=overrides, working_dir=str(folder), status=JobStatus.FAILED, _return_value=err)


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


def _parallel_job(state: bytes, overrides: list[str], num: int, threads: int | None, out: str) -> None:
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
