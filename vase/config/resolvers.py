"""The ``${vase.*}`` resolvers the YAML files use, registered with OmegaConf in one table (on ``import vase.config``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import OmegaConf

from vase.config.cluster import slurm_gpus, slurm_tasks
from vase.config.naming import (
    folder_name,
    kind_dir,
    launch_dir,
    overrides_hash,
    run_name,
    run_tags,
    sweep_group,
    tiny_key,
)
from vase.config.tracking import mlflow_artifacts, mlflow_uri, wandb_offline
from vase.errors import ConfigError, config_exit
from vase.runs import log_root, root_digest, run_dir
from vase.views import path_key, settings_suffix

RESOLVERS = {
    "vase.run_name": run_name,
    "vase.sweep_group": sweep_group,
    "vase.overrides_hash": overrides_hash,
    "vase.tags": run_tags,
    "vase.slurm_gpus": slurm_gpus,
    "vase.slurm_tasks": slurm_tasks,
    "vase.mlflow_uri": mlflow_uri,
    "vase.mlflow_artifacts": mlflow_artifacts,
    "vase.wandb_offline": wandb_offline,
    "vase.cwd": launch_dir,
    "vase.folder_name": folder_name,
    "vase.input_key": path_key,
    "vase.render_key": settings_suffix,
    "vase.tiny_key": tiny_key,
    "vase.config_digest": root_digest,  # not cached: it reads the config it is resolved in
    "vase.run_dir": run_dir,
    "vase.log_dir": lambda root: str(log_root(root)),  # $VASE_LOG_DIR, where set and not empty, else <root>/logs
    "vase.kind_dir": kind_dir,
    "vase.task_dir": kind_dir,  # its name before 0.2: run folders made then still resolve their saved configs
}
"""Each ``${name:...}`` the configs use and the function that resolves it."""
# cached in the config too, so a sweep's jobs (and a requeued SLURM job's pickled config) keep one folder
CACHED = ("vase.run_dir",)
AT_SETUP = ("vase.run_dir", "vase.kind_dir")
"""Resolved while Hydra sets up a run's folder, where an error came out as Hydra's traceback: one line and exit 2."""


def _one_line_at_setup(fn: Callable[..., Any]) -> Callable[..., Any]:
    def resolve(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as e:  # SystemExit passes through OmegaConf's and Hydra's handlers, as a callback's does
            config_exit(e)

    resolve.__name__, resolve.__doc__ = fn.__name__, fn.__doc__
    return resolve


def register_resolvers() -> None:
    """Register every resolver of `RESOLVERS` with OmegaConf (those already registered are left as they are)."""
    for name, fn in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, _one_line_at_setup(fn) if name in AT_SETUP else fn,
                                            use_cache=name in CACHED)
