"""Loggers for every entry point: building them from config (W&B honours WANDB_MODE=disabled), logging evaluation
rows and tables, and closing W&B even when a job fails."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig
from submitit.core import core as submitit_core
from submitit.core import logger as submitit_logger

log = logging.getLogger("vase")


def finish_wandb() -> None:
    """Close the W&B run even when the job failed, or its offline directory is left half written."""
    wandb = sys.modules.get("wandb")  # imported only when a W&B logger was built
    if wandb is not None and wandb.run is not None:
        wandb.finish()


def build_loggers(cfg: DictConfig) -> list[Any]:
    """The run's loggers. ``WANDB_MODE=disabled`` drops the W&B logger altogether: no run, online or offline."""
    nodes = cfg.get("logger")
    if not nodes:
        return []
    disabled = os.environ.get("WANDB_MODE", "").strip().lower() == "disabled"
    out = []
    for node in nodes.values():
        if not (isinstance(node, DictConfig) and "_target_" in node):
            continue
        if disabled and "wandb" in str(node._target_).lower():
            log.info("WANDB_MODE=disabled: no W&B run is written")
            continue
        out.append(instantiate(node))
    return out


def log_eval_rows(loggers: list[Any], name: str, scores: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    for lg in loggers:
        lg.log_metrics({f"val/{name}/{k}": float(v) for k, v in scores.items() if isinstance(v, (int, float))})
        if hasattr(lg, "log_table"):
            lg.log_table(
                key=f"val/{name}/captions",
                columns=["id", "generated", "reference"],
                data=[[r["id"], r["caption"], r["reference"]] for r in rows[:64]],
            )


def log_results_table(loggers: list[Any], results: dict[str, dict[str, Any]]) -> None:
    """The evaluation table (paper's column order) as a W&B table, so runs compare side by side in the UI."""
    # lazy: torch, torchmetrics: slow to import, and only this path needs them
    from vase.metrics.caption import TABLE_COLUMNS

    keys = [k for k, _ in TABLE_COLUMNS] + ["n_pairs"]
    for lg in loggers:
        if hasattr(lg, "log_table"):
            lg.log_table(
                key="val/table",
                columns=["model", *keys],
                data=[[name, *[row.get(k) for k in keys]] for name, row in results.items()],
            )


class _SacctOnce(logging.Filter):
    """submitit's "Bypassing sacct error" (a cluster without SLURM accounting), which it repeats at every poll: shown
    once, with what it means, then dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "Bypassing sacct error" not in message:
            return True
        if self.seen:
            return False
        self.seen = True
        record.msg, record.args = (f"{message}\n  (vase) this cluster has no SLURM accounting (sacct), so submitit "
                                   f"cannot read job states and waits for each job's result file instead; the jobs "
                                   f"run as usual (shown once, not at every poll)"), ()
        return True


class _QuietCheckOutput:
    """``subprocess`` as submitit's status poll uses it, with the polled command's stderr dropped: without accounting,
    ``sacct`` prints "Slurm accounting storage is disabled" at every poll; the failure itself still reaches
    :class:`_SacctOnce` as the exception submitit logs."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def check_output(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        return subprocess.check_output(*args, **kwargs)


def quiet_sacct_warnings() -> None:
    """Install :class:`_SacctOnce` on submitit's logger (after submitit configured it) and keep its status poll's
    stderr off the console."""
    log = submitit_logger.get_logger()
    if not any(isinstance(f, _SacctOnce) for f in log.filters):
        log.addFilter(_SacctOnce())
    if getattr(submitit_core, "subprocess", None) is subprocess:  # the module submitit's poll calls check_output on
        submitit_core.subprocess = _QuietCheckOutput()
