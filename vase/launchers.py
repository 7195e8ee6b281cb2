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

import copy
import logging
import multiprocessing
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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
from vase.config.schemas import PROCESS_SETTINGS, check_process_settings
from vase.errors import ConfigError, Interrupted, config_exit, first_line
from vase.kernels import apply_portable_threads
from vase.parallel_jobs import (
    WIND_DOWN_S,
    cap_jobs,
    exit_said,
    job_config,
    on_cpu,
    parallel_job,
    parallel_plan,
    sigterm_as_interrupt,
    threads_in_children,
)
from vase.reports.sweep_summary import failed_line
from vase.runs import record_lost
from vase.workers import callers_script_hidden

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


class SweepPreflight(Callback):
    """Hydra callback (``conf/hydra/default.yaml``, the first): before a sweep makes its folder, every process setting
    each of its jobs would take (`vase.config.schemas.PROCESS_SETTINGS`, each value a sweep gives one
    too) and the parallel launcher's
    ``jobs`` and ``threads_per_job`` are checked; a bad value is one line and exit 2, and leaves no folder behind.
    ``jobs`` above this process's usable cores is capped there, with a line."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        params = config.hydra.sweeper.get("params")
        swept = sweep_values_of(config.hydra.overrides.task, params)
        try:
            for key in PROCESS_SETTINGS:  # each value a job would take: given, or one of those swept
                for value in swept.get(key) or [OmegaConf.select(config, key, default=None)]:
                    check_process_settings({key: value})
            launcher = config.hydra.launcher
            if str(launcher.get("_target_", "")).endswith("ParallelLocalLauncher"):
                at_once = cap_jobs(launcher.get("jobs", "auto"), launcher.get("threads_per_job", "auto"))
                if at_once is not None:
                    with read_write(launcher), open_dict(launcher):
                        launcher.jobs = at_once
        except (ConfigError, ValueError) as e:
            config_exit(ConfigError(str(e)))


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
                        proc = ctx.Process(target=parallel_job, args=(state, ovr, num, threads, str(out)),
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


