"""The learned reward's classifier trained for the run: ``reward.terms.learned.checkpoint=train``.

The learned term (`vase.rewards.terms.Learned`) asks a completion to agree with a six-head classifier's
predictions from the vase's views. With ``checkpoint=train`` the GRPO run trains that classifier itself, on its own
training vases only (the held-out vases validate it, nothing more), with the settings of
``reward.terms.learned.heads`` (``features``: ``auto`` | ``clip`` | ``pixels``, as ``attributes.features``). It is
content-addressed like the shared SFT adapter: ``<paths.cache_dir>/attributes/<key>/attribute_heads.pt``, ``key`` a
hash of the data, the render settings, the heads' settings and their seed; the first job trains it under a file lock
and writes it atomically, every later or concurrent job reuses it. ``heads.json`` beside it says how often it is right
on the held-out vases, per dimension, beside the majority class: what the term can teach at best.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from vase.io import atomic_write_json, file_lock
from vase.metrics.attributes import fit_heads, heads_accuracy, save_heads
from vase.pipeline.sft_cache import content_key, data_spec, plain

log = logging.getLogger("vase")

TRAIN = "train"  # the checkpoint value that asks the run to train the classifier


def heads_key(cfg: DictConfig) -> tuple[str, dict[str, Any]]:
    """The cache key of the run's learned-reward classifier and what it hashes."""
    data, render = data_spec(cfg)
    heads = plain(cfg, "reward.terms.learned.heads") or {}
    seed = heads.get("seed", plain(cfg, "seed"))
    return content_key({"data": data, "render": render, "heads": heads, "seed": seed, "version": 1})


def learned_heads(cfg: DictConfig) -> Path | None:
    """The classifier ``reward.terms.learned.checkpoint=train`` asks for (from the cache or trained now); None when
    the term is off, names its own checkpoint, or no stage of the run is GRPO (``stage`` or ``followup``)."""
    term = OmegaConf.select(cfg, "reward.terms.learned")
    if term is None or not float(term.get("weight") or 0.0) or str(term.get("checkpoint")) != TRAIN:
        return None
    if "grpo" not in (OmegaConf.select(cfg, "stage.name"), OmegaConf.select(cfg, "followup.name")):
        return None  # an SFT (the shared one included) has no reward to build
    key, spec = heads_key(cfg)
    root = Path(cfg.paths.cache_dir) / "attributes" / key
    path = root / "attribute_heads.pt"
    with file_lock(root.parent / f"{key}.lock"):
        if not path.is_file():
            log.info("training the learned reward's six-head classifier %s on the training vases", key)
            datamodule = instantiate(cfg.data, _convert_="partial")
            datamodule.prepare_data()
            train, val = datamodule.dataset("train"), datamodule.dataset("val")
            heads = term.get("heads") or {}
            model, encoder, vx = fit_heads(heads, train, val, int(spec["seed"]), key="reward.terms.learned.heads")
            accuracy = heads_accuracy(model, vx, val.records, train.records)
            atomic_write_json(root / "heads.json", {"key": key, "spec": spec, "encoder": encoder,
                                                    "train_vases": len(train), "held_out_accuracy": accuracy})
            save_heads(model, encoder, path)  # last: its presence means complete
    acc = json.loads((root / "heads.json").read_text())["held_out_accuracy"]
    log.info("learned reward: classifier %s; held-out accuracy %s", path,
             ", ".join(f"{d} {v['heads']:.0%} (majority {v['majority']:.0%})" for d, v in acc.items()))
    with open_dict(cfg):
        cfg.reward.terms.learned.checkpoint = str(path)
    return path
