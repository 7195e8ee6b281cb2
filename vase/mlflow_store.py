"""MLflow's store made ready before a run or a sweep's end logs to it: a server probed once, fast (`probe_mlflow_server`),
a local SQLite store created and migrated under a lock, the experiment made a model-training one (`prepare_mlflow`).
The loggers that then log to it: `vase.loggers`."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from vase.config import SERVER_SCHEMES
from vase.errors import ConfigError, VaseError
from vase.io import path_lock

MLFLOW_PROBE_S = 5.0


def probe_mlflow_server(tracking_uri: str) -> None:
    """One request to an MLflow server's ``/health`` (at most `MLFLOW_PROBE_S` seconds): a ConfigError naming the URI
    and what to do when nothing answers, or something that is not an MLflow server (an auth wall counts as one)."""
    where = f"logger.mlflow.tracking_uri={tracking_uri!r}"
    todo = (f"start it ({server_command(tracking_uri)}), fix MLFLOW_TRACKING_URI, or unset it to log to the local "
            f"store under paths.log_dir")
    try:
        urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=MLFLOW_PROBE_S).close()
    except urllib.error.HTTPError as e:
        if e.code not in (401, 403):  # an auth wall in front of a server is a server; anything else is not one
            raise ConfigError(f"{where}: no MLflow server there (HTTP {e.code} on /health); {todo}") from None
    except (urllib.error.URLError, OSError) as e:
        raise ConfigError(f"{where}: no MLflow server answers there ({getattr(e, 'reason', e)}); {todo}") from None


def server_command(tracking_uri: str) -> str:
    """The command that starts an MLflow server where ``tracking_uri`` points (its host and port).

    >>> server_command("http://10.0.0.5:5123")
    'mlflow server --host 10.0.0.5 --port 5123 --backend-store-uri sqlite:///mlflow.db --artifacts-destination ./mlartifacts'
    """
    url = urlparse(tracking_uri)
    port = url.port or (443 if url.scheme == "https" else 5000)
    return (f"mlflow server --host {url.hostname or '127.0.0.1'} --port {port} --backend-store-uri "
            f"sqlite:///mlflow.db --artifacts-destination ./mlartifacts")


def prepare_mlflow(tracking_uri: str, experiment: str, artifact_location: str | None = None) -> None:
    """See `check_loggers`. The experiment is created (if missing) as a model-training one, so MLflow's UI opens it on
    its runs, not on the GenAI overview."""
    scheme = urlparse(tracking_uri).scheme
    if scheme in ("http", "https"):
        where = f"logger.mlflow.tracking_uri={tracking_uri!r}"
        probe_mlflow_server(tracking_uri)
        try:
            ensure_experiment(tracking_uri, experiment, None)
        except Exception as e:  # noqa: BLE001 - the server's refusal, in one line, before any model loads
            first = (str(e).strip().splitlines() or [""])[0][:300]
            raise ConfigError(f"{where}: the server refused experiment {experiment!r} ({type(e).__name__}: {first})"
                              ) from None
    elif scheme == "sqlite":
        db = Path(tracking_uri[len("sqlite:///"):])
        with path_lock(db, "mlflow-store"):
            try:
                ensure_experiment(tracking_uri, experiment, artifact_location)
            except Exception as e:  # noqa: BLE001 - any failure to open the store is the user's to see, in one line
                first = (str(e).strip().splitlines() or [""])[0][:300]
                raise VaseError(
                    f"{db}: MLflow's store cannot be opened ({type(e).__name__}: {first}). If an earlier run left it "
                    f"half made, move it aside (mv {db} {db}.broken) and run again: a new store is made; or point "
                    f"MLFLOW_TRACKING_URI at another store") from None
    elif scheme not in SERVER_SCHEMES:
        try:
            ensure_experiment(tracking_uri, experiment, artifact_location)
        except Exception as e:  # noqa: BLE001 - e.g. MLflow 3's file store ("in maintenance mode"): one line
            first = (str(e).strip().splitlines() or [""])[0][:300]
            raise ConfigError(
                f"logger.mlflow.tracking_uri={tracking_uri!r} (MLFLOW_TRACKING_URI when set): MLflow cannot use this "
                f"store ({type(e).__name__}: {first}); use a SQLite store (sqlite:///<folder>/mlflow.db), a server "
                f"(http://host:5000), or unset MLFLOW_TRACKING_URI for the local store under paths.log_dir") from None


EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
"""The experiment tag that makes MLflow 3's UI open an experiment on its runs (unset, it may open the GenAI overview)."""


def ensure_experiment(tracking_uri: str, name: str, artifact_location: str | None) -> None:
    # lazy: mlflow: slow to import, and only runs with logger=mlflow need it
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            client.create_experiment(name, artifact_location=artifact_location, tags=dict([EXPERIMENT_KIND]))
            return
        except MlflowException:  # another client created it first (a server takes runs from many machines)
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if EXPERIMENT_KIND[0] not in exp.tags:
        client.set_experiment_tag(exp.experiment_id, *EXPERIMENT_KIND)

