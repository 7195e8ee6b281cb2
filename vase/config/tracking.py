"""The loggers' settings that depend on the machine: whether W&B runs offline (``${vase.wandb_offline:}``), where
MLflow's tracking store is (``${vase.mlflow_uri:...}``) and where a new MLflow experiment keeps its files
(``${vase.mlflow_artifacts:...}``)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

SERVER_SCHEMES = ("http", "https", "databricks")
"""Tracking URIs that name a server: it keeps the artifacts, in its own store."""


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


def mlflow_artifacts(tracking_uri: str, log_dir: str) -> str | None:
    """``${vase.mlflow_artifacts:<tracking uri>,<log_dir>}``: where a new experiment keeps its files. Against a
    server (http, https, databricks) null, so the server's own artifact store is used (a client-side folder would be
    out of reach of the server, a second machine and every other client); for a local store ``<log_dir>/mlartifacts``.

    >>> mlflow_artifacts("http://10.0.0.5:5000", "logs"), mlflow_artifacts("sqlite:////x/mlflow.db", "/x")
    (None, '/x/mlartifacts')
    """
    if urlparse(str(tracking_uri)).scheme in SERVER_SCHEMES:
        return None
    return f"{Path(log_dir)}/mlartifacts"
