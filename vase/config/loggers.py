"""The loggers' settings that depend on the machine: whether W&B runs offline (``${vase.wandb_offline:}``) and
where MLflow's tracking store is (``${vase.mlflow_uri:...}``)."""

from __future__ import annotations

import os
from pathlib import Path


def wandb_offline() -> bool:
    """W&B runs offline unless the user configured a key (WANDB_API_KEY or a netrc entry for api.wandb.ai)."""
    if os.environ.get("WANDB_MODE", "").lower() in ("online", "run"):
        return False
    if os.environ.get("WANDB_API_KEY"):
        return False
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return "api.wandb.ai" not in netrc.read_text()
    except OSError:
        return True


def mlflow_uri(log_dir: str) -> str:
    """``${vase.mlflow_uri:<log_dir>}``: MLFLOW_TRACKING_URI when set (and not empty), else a SQLite store in the log
    folder (MLflow 3 refuses its old file store)."""
    return os.environ.get("MLFLOW_TRACKING_URI", "").strip() or f"sqlite:///{Path(log_dir).resolve()}/mlflow.db"
