"""What several evaluation actions share: the split they evaluate (with ``data.limit_val`` on the val split), the model
with its adapter, how an adapter trained (for results files), and a Markdown table written beside the output and shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from vase.io import atomic_write_text
from vase.models.checkpoint import LINEAGE_FILE
from vase.models.loading import load_model_and_processor


def adapter_trained(cfg: DictConfig) -> dict[str, Any] | None:
    """How ``cfg.adapter`` trained, from its lineage (``trained``: the stage and GRPO's aggregation), for the results
    files of an evaluation; None without an adapter or for one saved before vase recorded it."""
    if not cfg.get("adapter"):
        return None
    lineage = Path(str(cfg.adapter)) / LINEAGE_FILE
    try:
        return json.loads(lineage.read_text()).get("trained") if lineage.is_file() else None
    except (OSError, ValueError):  # a lineage that cannot be read records nothing; loading the adapter says why
        return None


def split_limit(cfg: DictConfig) -> int | None:
    """How many vases of ``cfg.split`` a task evaluates: ``data.limit_val`` on the val split, else all."""
    return cfg.data.get("limit_val") if cfg.split == "val" else None


def datamodule_of(cfg: DictConfig, processor: Any = None) -> Any:
    """The data module of ``cfg.data``, prepared (its data checked, views rendered where needed)."""
    datamodule = instantiate(cfg.data, processor=processor, _convert_="partial")
    datamodule.prepare_data()
    return datamodule


def eval_split(cfg: DictConfig, processor: Any = None) -> Any:
    """The dataset of ``cfg.split`` with its limit (`split_limit`)."""
    return datamodule_of(cfg, processor).dataset(cfg.split, split_limit(cfg))


def dataset_and_model(cfg: DictConfig) -> tuple[Any, Any, Any]:
    """What an evaluation action that needs the model starts from (public: `vase.api.dataset_and_model`): the split
    ``cfg.split`` of ``cfg.data`` (its ``limit`` applied), the model of ``cfg.model`` with
    ``cfg.adapter`` (merged where ``merge_adapter``) and its processor, as ``(dataset, model, processor)``; hand them
    to `vase.api.generate_captions`."""
    model, processor = load_model_and_processor(cfg.model, adapter=cfg.get("adapter"),
                                                merge=bool(cfg.get("merge_adapter")))
    return eval_split(cfg, processor), model, processor


def write_table(out: Path, table: str) -> None:
    """``table`` (Markdown) written as ``<out's stem>.md`` beside ``out``, and shown."""
    atomic_write_text(out.with_suffix(".md"), table)
    print("\n" + table.rstrip("\n"))
