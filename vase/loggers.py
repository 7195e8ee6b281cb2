"""Loggers for every entry point: building them from config (W&B honours WANDB_MODE=disabled), logging evaluation
rows and tables, and closing W&B even when a job fails."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from PIL import Image
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


def kind(lg: Any) -> str:
    """wandb | tensorboard | mlflow | csv | other: which dashboard a Lightning logger writes to."""
    name = type(lg).__name__.lower()
    return next((k for k in ("wandb", "tensorboard", "mlflow", "csv") if k in name), "other")


def _markdown(columns: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return (f"{v:.4g}" if isinstance(v, float) else str(v)).replace("|", "\\|").replace("\n", " ")

    return "\n".join(["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
                      *["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]])


def log_table(loggers: list[Any], key: str, columns: list[str], rows: list[list[Any]], step: int | None = None) -> None:
    """A table in every dashboard: a W&B table, a TensorBoard text panel (markdown), an MLflow artifact
    ``tables/<key>.json`` (columns and rows; the MLflow UI shows it)."""
    for lg in loggers:
        k = kind(lg)
        if k == "wandb":
            lg.log_table(key=key, columns=columns, data=rows)
        elif k == "tensorboard":
            lg.experiment.add_text(key, _markdown(columns, rows), global_step=step or 0)
        elif k == "mlflow":
            data = {"columns": columns, "data": [[v if isinstance(v, (int, float, str, type(None))) else str(v)
                                                  for v in r] for r in rows]}
            lg.experiment.log_dict(lg.run_id, data, f"tables/{key.replace('/', '_')}.json")


def log_images(loggers: list[Any], key: str, paths: list[Any], step: int | None = None) -> None:
    """Image files in every dashboard: W&B images, TensorBoard images (``<key>/<file name>``), MLflow artifacts under
    ``<key>/``."""
    paths = [Path(p) for p in paths if Path(p).is_file()]
    if not paths:
        return
    for lg in loggers:
        k = kind(lg)
        if k == "wandb":
            lg.log_image(key=key, images=[str(p) for p in paths])
        elif k == "tensorboard":
            for p in paths:
                with Image.open(p) as im:
                    lg.experiment.add_image(f"{key}/{p.stem}", np.asarray(im.convert("RGB")), global_step=step or 0,
                                            dataformats="HWC")
        elif k == "mlflow":
            for p in paths:
                lg.experiment.log_artifact(lg.run_id, str(p), artifact_path=key)


def log_config(loggers: list[Any], cfg: DictConfig) -> None:
    """The run's resolved config (the effective reward weights with it) as each logger's hyperparameters."""
    container = OmegaConf.to_container(cfg, resolve=True)
    for lg in loggers:
        lg.log_hyperparams(container)


def log_end_metrics(loggers: list[Any], cfg: DictConfig, metrics: dict[str, float]) -> None:
    """The run's end metrics (``hp/*``: the last model's caption scores, GRPO's reward over its last steps): plain
    metrics everywhere, and TensorBoard's hparams view row for this run (its config beside them), so the jobs of a
    sweep compare in one table."""
    metrics = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
    if not metrics:
        return
    for lg in loggers:
        if kind(lg) == "tensorboard":
            lg.log_hyperparams(_hparams(cfg), metrics=metrics)
        else:
            lg.log_metrics(metrics)


def _hparams(cfg: DictConfig) -> dict[str, Any]:
    """What the hparams view compares: the command line's overrides, the stage, and the effective reward weights."""
    out: dict[str, Any] = {"stage": str(OmegaConf.select(cfg, "stage.name", default="")),
                           "seed": OmegaConf.select(cfg, "seed", default=None)}
    try:
        for o in HydraConfig.get().overrides.task:
            key, _, value = str(o).partition("=")
            out[key.lstrip("+~")] = value
    except ValueError:  # not inside a Hydra job
        pass
    weights = OmegaConf.select(cfg, "reward.effective_weights", default=None)
    if isinstance(weights, DictConfig):
        out.update({f"w_{k}": float(v) for k, v in weights.items()})
    return {k: v for k, v in out.items() if v is not None}


def log_eval_rows(loggers: list[Any], name: str, scores: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    for lg in loggers:
        lg.log_metrics({f"val/{name}/{k}": float(v) for k, v in scores.items() if isinstance(v, (int, float))})
    log_table(loggers, f"val/{name}/captions", ["id", "generated", "reference"],
              [[r["id"], r["caption"], r["reference"]] for r in rows[:64]])


def log_results_table(loggers: list[Any], results: dict[str, dict[str, Any]]) -> None:
    """The evaluation table (paper's column order) in every dashboard, so runs compare side by side."""
    # lazy: torch, torchmetrics: slow to import, and only this path needs them
    from vase.metrics.caption import TABLE_COLUMNS

    keys = [k for k, _ in TABLE_COLUMNS] + ["n_pairs"]
    log_table(loggers, "val/table", ["model", *keys], [[name, *[row.get(k) for k in keys]] for name, row in results.items()])


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
