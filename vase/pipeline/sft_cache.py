"""One SFT adapter shared by every GRPO job of a sweep: trained once, content-addressed, race-free.

A reward or tau sweep ablates the GRPO stage; the SFT stage it starts from must be the same for every job, and
training it nine times is waste. With ``sft_init=true`` (the reward and tau sweeps set it) a GRPO run asks for the
adapter that ``cfg.sft`` (an SFT stage config) gives on this run's model, data, render settings and seed (``sft.seed``
when set, so that a sweep over seeds varies GRPO alone and still trains one SFT). It lives
at ``<paths.cache_dir>/sft/<key>/adapter``, ``key`` a hash of exactly those settings; the first job trains it while
holding a file lock, in a temporary folder renamed into place when complete, and every later or concurrent job
waits for the lock and reuses it.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from vase.config import Decoding
from vase.data.synthetic import GENERATOR as SYNTHETIC_GENERATOR
from vase.errors import ConfigError
from vase.eval.vqa import evaluate_vqa, protocols_of
from vase.io import file_lock, read_json
from vase.models.loading import load_model_and_processor

log = logging.getLogger("vase")

# data settings that change batching or evaluation only, not the adapter SFT learns
_DATA_IGNORED = ("batch_size", "eval_batch_size", "num_workers", "limit_val", "render", "pixel_cache_mb")


def plain(cfg: DictConfig, key: str) -> Any:
    """``cfg``'s node at ``key`` as plain, resolved Python (None when missing)."""
    node = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def data_spec(cfg: DictConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The data and render settings that decide which vases and views a model trained on this run's data sees
    (batching and evaluation settings left out): part of every cache key of something trained on them."""
    data = {k: v for k, v in (plain(cfg, "data") or {}).items() if k not in _DATA_IGNORED}
    if isinstance(data.get("synthetic"), dict) and not data["synthetic"].get("detail"):
        # detail=false draws the sets drawn before the key existed: their keys (adapters, classifiers) stay
        data["synthetic"] = {k: v for k, v in data["synthetic"].items() if k != "detail"}
    for key, before in (("zoom_width", 1.0), ("zoom_direct", 5)):  # as every adapter before the keys existed
        if data.get(key, before) == before:
            data.pop(key, None)
    render = {k: v for k, v in (plain(cfg, "render") or {}).items() if k not in ("cache_dir", "on_error")}
    return data, render


def content_key(spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A content-addressed cache key of ``spec`` (which holds ``data``: `data_spec`'s), with the synthetic
    generator's version added for synthetic data (a set drawn by another generator is other data): the key and what
    it hashes."""
    spec = {**spec, "synthetic_generator": SYNTHETIC_GENERATOR if spec["data"].get("synthetic") else None}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16], spec


def sft_key(cfg: DictConfig) -> tuple[str, dict[str, Any]]:
    """The cache key of the shared SFT adapter and what it hashes (model, data, render, SFT stage, seed)."""
    data, render = data_spec(cfg)
    sft = plain(cfg, "sft") or {}
    if "limit_train" in sft:  # the SFT's own training subset: the run's (GRPO's) subset does not change the adapter
        data["limit_train"] = sft["limit_train"]
    seed = sft.get("seed", plain(cfg, "seed"))  # `sft.seed` shares one SFT across a sweep's seeds
    spec = {"model": plain(cfg, "model"), "data": data, "render": render, "sft": sft, "seed": seed,
            "precision": OmegaConf.select(cfg, "trainer.precision"), "version": 2}
    if cfg.get("cpu_kernels") == "portable":  # other kernels, other last bits: never a native SFT's adapter
        spec["cpu_kernels"] = "portable"
    if data.get("zoom") and (data.get("retrieval") or {}).get("k"):
        spec["zoom_context"] = "asked"  # the zoom samples' prompts took format=asked (before: whole lines)
    return content_key(spec)


def shared_sft_adapter(cfg: DictConfig, train: Callable[[DictConfig], Any]) -> Path:
    """The adapter of ``cfg.sft`` on this run's model and data: from the cache, or trained now (once, under a lock)
    by ``train`` (``run_training``, passed in so that this module does not import the one that imports it)."""

    if OmegaConf.select(cfg, "sft") is None:
        raise ConfigError("sft_init=true needs an SFT stage under `sft` (defaults: `- /stage@sft: sft`)")
    key, spec = sft_key(cfg)
    root = Path(cfg.paths.cache_dir) / "sft"
    final = root / key
    adapter = final / "adapter"
    if (adapter / "adapter_config.json").is_file():
        _baseline_vqa(cfg, adapter, root / f"{key}.lock")
        return adapter
    with file_lock(root / f"{key}.lock"):
        if (adapter / "adapter_config.json").is_file():  # a concurrent job finished it while we waited
            _baseline_vqa(cfg, adapter)
            return adapter
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}."))
        try:
            sub = copy.deepcopy(cfg)
            with open_dict(sub):
                sub.stage = cfg.sft
                sub.followup = None
                sub.init_adapter = None
                sub.ckpt_path = None
                sub.sft_init = False
                sub.report = False
                sub.logger = None
                # no caption scoring, but VQA if the run asks for it: a sweep's report compares with SFT's accuracy
                # (its held-out reward is each GRPO job's start, on the job's task: answered once, cached beside it)
                sub.val = {**OmegaConf.to_container(cfg.val), "before": False, "after": False, "heldout": False}
                sub.paths.output_dir = str(tmp)
                if cfg.sft.get("data_mix"):   # e.g. SFT on captions and QA, GRPO on captions
                    sub.data.mix = cfg.sft.data_mix
                if "limit_train" in cfg.sft:  # e.g. SFT on every training vase, GRPO on a few
                    sub.data.limit_train = cfg.sft.limit_train
                # the GRPO run's step cap is its own: the SFT stage runs its epochs (or the sft node's max_steps)
                sub.trainer.max_steps = int(cfg.sft.get("max_steps", -1))
                sub.seed = int(cfg.sft.get("seed", cfg.seed))
            log.info("training the shared SFT adapter %s (used by every GRPO job with these settings)", key)
            train(sub)
            (tmp / "sft_key.json").write_text(json.dumps(spec, indent=1, sort_keys=True, default=str))
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared by every job
            tmp.rename(final)  # complete or absent: never a half-trained adapter in the cache
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # only this temporary folder, which this call created
    return adapter


def _baseline_vqa(cfg: DictConfig, adapter: Path, lock: Path | None = None) -> None:
    """A run that asks for VQA compares with the shared SFT's: where the cached adapter was trained without it, the
    SFT adapter is evaluated now, once, and ``vqa_sft.json`` is cached beside it (a sweep's report never lacks its
    baseline)."""
    protocol = (cfg.get("val") or {}).get("vqa")
    target = adapter.parent / "vqa_sft.json"

    decoding = Decoding.of(cfg.get("val") or {}, "val")

    def have() -> bool:  # cached with every protocol this run asks for, decoded as this run decodes
        if not target.is_file():
            return False
        cached = read_json(target)
        return (set(protocols_of(str(protocol))) <= set(cached.get("vqa", {}))
                and cached.get("decoding", decoding.record()) == decoding.record())

    if not protocol or have():
        return
    with file_lock(lock) if lock is not None else contextlib.nullcontext():
        if have():
            return
        log.info("evaluating the shared SFT adapter %s once (the baseline of every job's VQA)", adapter)
        model, processor = load_model_and_processor(cfg.model, adapter=str(adapter), merge=True)
        data = instantiate(cfg.data, processor=processor, stage="sft", _convert_="partial")
        data.prepare_data()
        data.setup("fit")
        ev = cfg.val
        evaluate_vqa(model, processor, data.val_set, instantiate(cfg.reward, _convert_="partial"),
                     float(cfg.reward.tau), target, f"{cfg.model.get('label', 'model')} (sft)", str(protocol),
                     int(ev.get("vqa_choices", 4)), int(ev.batch_size), int(ev.get("vqa_max_new_tokens", 24)),
                     decoding=decoding)
