"""What ``evaluate.py`` runs: `run_evaluation` dispatches ``action`` from the registry of evaluation actions
(`vase.config.EVAL_ACTIONS`, which says what each needs checked first) to its module in `vase.pipeline.actions` (one per
task). Only ``evaluate.py`` imports this module; captioning a split and scoring it, which training also does, is
`vase.eval.captions.evaluate_captions`.

The command that runs it: `vase.cli.evaluate` (``vase evaluate``, ``python evaluate.py``).
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

import vase.config  # noqa: F401  (registers the config resolvers)
from vase.choices import MIN_EVAL_VASES
from vase.config import EVAL_ACTIONS
from vase.errors import ConfigError
from vase.io import is_within, shown_path
from vase.loggers import build_loggers, check_loggers, log_config, log_eval_rows, log_results_table, say_unsent
from vase.metrics.registry import extra_metrics
from vase.models.checkpoint import check_adapter
from vase.models.loading import check_model
from vase.pipeline.actions.common import datamodule_of, split_limit

log = logging.getLogger("vase")


def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    """Run ``cfg.action``, an evaluation action of the registry (`vase.config.EVAL_ACTIONS`): its own precheck, outputs
    that are not a user's, the tracking server, the model and the split checked first (as the entry says), then
    its function; its scores, rows and table go to the loggers."""
    _seed(int(cfg.seed))
    action = EVAL_ACTIONS.get(str(cfg.action))
    if action is None:  # validate() refuses such an action first
        raise ConfigError(f"action={cfg.action!r} is not an evaluation action; choose one of {', '.join(EVAL_ACTIONS)}")
    if action.precheck:
        action.function("precheck")(cfg)  # an action's own, more telling refusal of its inputs
    refuse_foreign_outputs(written_files(cfg), cfg.paths.output_dir)
    if cfg.get("metrics"):
        extra_metrics(cfg.metrics.get("extra"))  # a caption metric that is none, or does not import: one line, now
    if action.logs:
        check_loggers(cfg)  # a tracking server that does not answer: one line now, not after the evaluation
    if action.checks_model(cfg):
        check_model(cfg.model)  # a broken checkpoint or an unreachable hub id: one line, before anything loads
    if cfg.get("adapter"):
        check_adapter(str(cfg.adapter), "adapter")  # a folder that is not an adapter, or one of its lineage gone: the same
    if action.reads_split:  # nothing evaluates on nothing: said before a load
        datamodule_of(cfg).check_evaluable(str(cfg.split), split_limit(cfg),
                                           MIN_EVAL_VASES if str(cfg.action) == "generate" else 1)
    started = time.time()
    out = action.function()(cfg)
    said = results_line(written_files(cfg), started)
    if said:
        print(said)  # where the action's files went: a user's own action printed nothing of it
    if not action.logs:
        return out
    loggers = build_loggers(cfg)
    log_config(loggers, cfg, Path(str(cfg.paths.output_dir)) / ".hydra" / "config.yaml")
    for lg in loggers:
        if out.get("scores"):
            lg.log_metrics({f"{cfg.split}/{k}": float(v) for k, v in out["scores"].items() if isinstance(v, (int, float))})
        if out.get("rows"):
            log_eval_rows([lg], str(cfg.split), {}, out["rows"])
        if out.get("table"):
            log_results_table([lg], out["table"])
    say_unsent(loggers, cfg.paths.output_dir)  # an MLflow server that stopped answering: what it lacks, and how to send it
    return out


def written_files(cfg: DictConfig) -> list[Path]:
    """The result files an action writes beside ``output`` (its registry entry's ``writes``). Resumable generation logs
    (``*.jsonl``) are not listed: a rerun continues them."""
    action = EVAL_ACTIONS[str(cfg.action)]
    return action.written(cfg.output) if action.writes else []


def results_line(files: list[Path], since: float) -> str | None:
    """``results: <file>, ...``: the files of an action's ``writes`` that this run wrote (changed since ``since``),
    as a printed path names them; None where it wrote none of them."""
    made = [f for f in files if f.is_file() and f.stat().st_mtime >= since - 1]
    return f"results: {', '.join(shown_path(f) for f in made)}" if made else None


def refuse_foreign_outputs(files: list[Path], run_dir: str | Path) -> None:
    """A result file that already exists outside this run's own (new) directory was not written by this run: it may
    be the user's, so it is never replaced. Raises ConfigError naming it, before any work is done."""
    for f in files:
        if (f.exists() or f.is_symlink()) and not is_within(f, run_dir):
            raise ConfigError(f"output: {f} already exists and this run did not write it; vase never replaces such a "
                              f"file: choose another output=... (or move the file away)")


def _seed(seed: int) -> None:
    """Seed python, numpy and torch without importing Lightning (action=score should start fast)."""
    # lazy: torch
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
