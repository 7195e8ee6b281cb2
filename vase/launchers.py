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

import logging
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import submitit
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.experimental.callback import Callback
from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
from omegaconf import DictConfig, OmegaConf
from submitit.core.utils import FailedJobError

from vase.config import check_cluster, check_only, check_slurm_nodes, check_slurm_signal, validate
from vase.errors import ConfigError, config_exit, first_line
from vase.reports.sweep_summary import failed_line
from vase.runs import record_lost

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
