"""Loading Qwen2.5-VL models and processors: one ``from_pretrained`` path for the tiny model and real checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vase.choices import DTYPES
from vase.errors import ConfigError
from vase.models.checkpoint import check_adapter, check_checkpoint
from vase.models.tiny import TinySpec, build_tiny
from vase.models.vision_tower import fast_vision_tower

"""Written beside an adapter: the base model and the adapters merged into it before this one was trained."""

def resolve_model_path(cfg: Any) -> str:
    """The path or hub id to load; builds the tiny model first when ``cfg.build_tiny`` is set."""
    if cfg.get("build_tiny", False):
        spec = TinySpec(**dict(cfg.get("tiny", {}) or {}))
        return str(build_tiny(cfg.name_or_path, spec))
    return str(cfg.name_or_path)


def torch_dtype(name: str):
    # lazy: torch
    import torch

    key = DTYPES.get(str(name).lower())
    if key is None:
        raise ConfigError(f"model.dtype={name!r} is not one of {sorted(DTYPES)}")
    return "auto" if key == "auto" else getattr(torch, key)


def load_processor(path: str, min_pixels: int | None = None, max_pixels: int | None = None):
    """The model's processor, with the image and video pixel bounds overridden when given (the paper's MAX_PIXELS).

    A downloaded Qwen2.5-VL's ``preprocessor_config.json`` carries ``min_pixels``/``max_pixels`` keys (3136 and
    12,845,056 on the hub), and the image processor lets those keys win over a ``size=`` passed to it; so the bounds
    go in under those very names too, and the processor is checked afterwards: the grids follow the config, or the
    load fails naming the key.
    """
    # lazy: transformers
    from transformers import AutoProcessor

    bounds = {k: int(v) for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v}
    try:
        proc = AutoProcessor.from_pretrained(path)
    except OSError as e:
        raise OSError(
            f"could not load the processor from {path!r}: {e}. Set model.name_or_path to a local "
            f"directory or a hub id available on this machine."
        ) from e
    edges = {"min_pixels": "shortest_edge", "max_pixels": "longest_edge"}
    # set on the loaded processors' size (what every call reads), not passed to from_pretrained: transformers
    # then hands them to each call as min_pixels/max_pixels, a path it warns is going away
    for part in ("image_processor", "video_processor"):
        sub = getattr(proc, part, None)
        if sub is not None and bounds and getattr(sub, "size", None) is not None:
            sub.size = type(sub.size)(**{**dict(sub.size), **{edges[k]: v for k, v in bounds.items()}})
    for part in ("image_processor", "video_processor"):
        sub = getattr(proc, part, None)
        size = getattr(sub, "size", None)
        for key, want in bounds.items():
            got = size.get(edges[key]) if size is not None else None
            if got is not None and got != want:
                raise RuntimeError(f"model.processor.{key}={want} was not taken by {path}'s {part} (it uses {got}); "
                                   f"this transformers version reads the pixel bounds differently")
    proc.tokenizer.padding_side = "right"
    return proc


def pixel_bounds(processor: Any) -> dict[str, int | None]:
    """The pixel bounds a processor resizes images within (``model.processor.min_pixels``/``max_pixels``, or the
    checkpoint's own): what a results file records beside its decoding, since both decide the answers."""
    size = getattr(getattr(processor, "image_processor", None), "size", None)
    get = (lambda k: size.get(k)) if hasattr(size, "get") else (lambda k: getattr(size, k, None))
    return {"min_pixels": get("shortest_edge"), "max_pixels": get("longest_edge")}


def load_model(path: str, dtype: str = "float32", attn_implementation: str | None = None):
    """A Qwen2.5-VL for conditional generation from a local directory or hub id, its vision tower with less overhead
    on the CPU and the same bits (`vase.models.vision_tower`)."""
    # lazy: transformers
    from transformers import Qwen2_5_VLForConditionalGeneration

    kwargs: dict[str, Any] = {"dtype": torch_dtype(dtype)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, **kwargs)
    except OSError as e:
        raise OSError(
            f"could not load model weights from {path!r}: {e}. Set model.name_or_path to a local "
            f"directory or a hub id available on this machine."
        ) from e
    fast_vision_tower(model)  # the vision tower with less overhead on the CPU, the same bits
    return model


def check_model(cfg: Any) -> None:
    """A ``model`` config's checkpoint checked before anything loads (`check_checkpoint`); a tiny model vase builds
    itself is checked when built."""
    if not cfg.get("build_tiny", False):
        check_checkpoint(str(cfg.name_or_path))


def load_model_and_processor(cfg: Any, adapter: str | None = None, merge: bool = False):
    """Model (optionally with a peft adapter, optionally merged) and processor from a ``model`` config group."""
    path = resolve_model_path(cfg)
    check_checkpoint(path)  # one line naming the folder and the file, not transformers' traceback
    proc_cfg = cfg.get("processor", {}) or {}
    processor = load_processor(path, proc_cfg.get("min_pixels"), proc_cfg.get("max_pixels"))
    model = load_model(path, cfg.get("dtype", "float32"), cfg.get("attn_implementation"))
    if adapter:
        model = apply_adapter(model, adapter, merge=merge)
    return model, processor


def apply_adapter(model: Any, adapter: str, merge: bool = False, is_trainable: bool = False) -> Any:
    """Load a peft adapter onto ``model``; adapters its lineage file lists are merged in first (SFT under GRPO)."""
    # lazy: peft
    from peft import PeftModel

    path = Path(adapter)
    for earlier in check_adapter(adapter, "adapter"):  # every adapter of its lineage, before a weight loads
        model = apply_adapter(model, earlier, merge=True)
    model = PeftModel.from_pretrained(model, str(path), is_trainable=is_trainable)
    return model.merge_and_unload() if merge else model
