"""What ``VASE_CHECK_CONFIG=1`` checks beyond the config's values, in seconds: the things a run
reaches for first, each with the one-line error the run itself would give minutes later.

- the dataset: ``data.root`` exists and holds a layout vase reads (``no such folder`` or the layouts looked for);
- the checkpoint: ``model.name_or_path`` is a complete folder (config, processor, tokenizer, chat template, weights
  whose headers and lengths are whole) or a hub id in this machine's cache or reachable;
- the adapter to start from or to evaluate (``init_adapter``, ``adapter``): a folder with ``adapter_config.json``
  and the adapters its lineage merges under it;
- the tracking server: an MLflow ``http(s)`` URI answers ``/health``;
- a trainer that asks for CUDA GPUs (``trainer=gpu``, DeepSpeed): as many as it asks for are there.

What it cannot check in seconds is said, not passed over: synthetic data and tiny models (built at the run's start),
W&B (not contacted before the run), GPU memory, and a SLURM cluster's queue.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from omegaconf import DictConfig, OmegaConf

from vase.data.layouts import detect_layout
from vase.loggers import check_logger_dirs
from vase.mlflow_store import probe_mlflow_server
from vase.models.checkpoint import check_adapter, check_checkpoint
from vase.pipeline.build import check_accelerator, check_ckpt_path


def reach_check(cfg: DictConfig) -> list[str]:
    """Check what the run would reach first (module docstring); a vase error on the first that fails, else the lines
    that say what was checked and what was not."""
    checked: list[str] = []
    unchecked: list[str] = []
    data = cfg.get("data")
    if isinstance(data, DictConfig) and "root" in data:
        if data.get("synthetic"):
            unchecked.append("the synthetic vases (generated at the run's start)")
        else:
            layout = detect_layout(str(data.root))
            checked.append(f"data.root={data.root} ({layout} layout)")
    model = cfg.get("model")
    if isinstance(model, DictConfig) and "name_or_path" in model:
        if model.get("build_tiny", False):
            unchecked.append("the tiny model (built at the run's start)")
        else:
            check_checkpoint(str(model.name_or_path))
            where = "folder" if Path(str(model.name_or_path)).expanduser().is_dir() else "hub id"
            checked.append(f"model.name_or_path={model.name_or_path} (checkpoint {where})")
    for key in ("init_adapter", "adapter"):  # train.py's adapter to start from; evaluate.py's to apply
        if cfg.get(key):
            check_adapter(str(cfg[key]), key)
            checked.append(f"{key}={cfg[key]}")
    if cfg.get("ckpt_path"):
        check_ckpt_path(str(cfg.ckpt_path))
        checked.append(f"ckpt_path={cfg.ckpt_path}")
    if isinstance(cfg.get("trainer"), DictConfig):
        gpus = check_accelerator(cfg.trainer)
        if gpus is not None:
            checked.append(f"{gpus} CUDA GPU(s) for trainer.accelerator={cfg.trainer.get('accelerator')}")
    check_logger_dirs(cfg)
    for name in (cfg.get("logger") or {}):
        uri = str(OmegaConf.select(cfg, f"logger.{name}.tracking_uri", default="") or "")
        if name == "mlflow" and urlparse(uri).scheme in ("http", "https"):
            probe_mlflow_server(uri)
            checked.append(f"the MLflow server at {uri}")
        elif name == "mlflow":
            unchecked.append("MLflow's local store (created at the run's start)")
        elif name == "wandb":
            unchecked.append("W&B (not contacted before the run; offline unless a key is configured)")
    unchecked += ["GPU memory", "a SLURM queue (the sweep's launcher checks it when it submits)"]
    return [f"checked: {'; '.join(checked) or 'nothing beyond the config'}",
            f"not checked: {', '.join(unchecked)}"]
