"""What a vase's views are compared and classified by: a real CLIP's image embeddings, or a descriptor computed from
the views' pixels alone. The retrieval index (``retrieval.features``) and the six-head attribute classifier
(``attributes.features``, the learned reward's ``reward.terms.learned.heads.features``) choose the same way:

- ``clip``: the image tower of the CLIP config beside it (``retrieval.clip``, ``attributes.encoder``: ``metrics.clip``):
  what to use with a pretrained CLIP (``metrics=paper``), whose embeddings carry what a vase looks like.
- ``pixels``: `ViewDescriptor`, weight-free: the horizontal bands of a view (mean colour and horizontal edge
  energy per row band: friezes, frames and ornament bands run around a vase) and its joint colour histogram (added
  colour, fabric and technique). Nothing is learned, so nothing leaks from validation vases; it is the honest choice
  where the only CLIP is a random tiny one (the synthetic demos), whose embeddings carry next to nothing.
- ``auto`` (default): ``pixels`` when the CLIP is vase's tiny random one (``clip.build_tiny``), else ``clip``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from vase.choices import VIEW_FEATURES
from vase.errors import ConfigError
from vase.metrics.encoders import build_clip_encoder

FEATURES = VIEW_FEATURES


class ViewDescriptor:
    """Bands and colours of a view (see the module's docstring), each block centred and scaled to unit length."""

    def __init__(self, size: int = 128, rows: int = 32, bins: int = 4) -> None:
        if size % rows:
            raise ConfigError(f"the view descriptor's rows ({rows}) must divide its size ({size})")
        self.size, self.rows, self.bins = size, rows, bins
        self.name = f"vase-view-descriptor-v1-{size}-{rows}-{bins}"  # part of the index's per-vase hash

    def describe(self, image: Any) -> np.ndarray:
        a = np.asarray(image.convert("RGB").resize((self.size, self.size)), dtype=np.float32) / 255.0
        band = self.size // self.rows
        profile = a.reshape(self.rows, band, self.size, 3).mean(axis=(1, 2)).ravel()
        dx = np.abs(np.diff(a.mean(-1), axis=1))
        edges = dx.reshape(self.rows, band, self.size - 1).mean(axis=(1, 2))
        q = np.minimum((a * self.bins).astype(int), self.bins - 1)
        cells = (q[..., 0] * self.bins + q[..., 1]) * self.bins + q[..., 2]
        hist = np.bincount(cells.ravel(), minlength=self.bins ** 3).astype(np.float32)
        blocks = [profile - profile.mean(), edges - edges.mean(), hist / hist.sum() - 1.0 / self.bins ** 3]
        return np.concatenate([b / (np.linalg.norm(b) + 1e-8) for b in blocks])

    def encode_images(self, images: list[Any]) -> torch.Tensor:
        return torch.from_numpy(np.stack([self.describe(im) for im in images]))


def features_of(section: Any, key: str = "retrieval") -> str:
    """``<key>.features`` resolved: ``auto`` is ``pixels`` when the section's CLIP (``clip`` or ``encoder``) is vase's
    tiny random one, else ``clip``."""
    kind = str(section.get("features") or "auto")
    if kind not in FEATURES:
        raise ConfigError(f"{key}.features={kind!r} must be one of {', '.join(FEATURES)}")
    if kind == "auto":
        clip = section.get("clip") or section.get("encoder") or {}
        return "pixels" if clip.get("build_tiny") else "clip"
    return kind


def view_encoder(section: Any, key: str = "retrieval") -> tuple[Any, dict[str, Any]]:
    """The encoder ``<key>.features`` names (``encode_images``) and the record that rebuilds it
    (`encoder_from_record`; saved beside what was trained on its features)."""
    if features_of(section, key) == "pixels":
        enc = ViewDescriptor()
        return enc, {"features": "pixels", "name": enc.name}
    clip_cfg = section.get("clip") or section.get("encoder")
    if clip_cfg is None:
        raise ConfigError(f"{key}.features=clip needs {key}.clip (the CLIP image encoder to use)")
    plain = OmegaConf.to_container(clip_cfg, resolve=True) if isinstance(clip_cfg, DictConfig) else dict(clip_cfg)
    return build_clip_encoder(OmegaConf.create(plain)), {"features": "clip", **plain}


def encoder_from_record(record: dict[str, Any]) -> Any:
    """The encoder a saved record names (a record without ``features`` is a CLIP config: checkpoints before it)."""
    record = dict(record)
    if record.pop("features", "clip") == "pixels":
        enc = ViewDescriptor()
        if record.get("name", enc.name) != enc.name:
            raise ConfigError(f"the checkpoint's view descriptor {record['name']!r} is not this vase's ({enc.name}); "
                              f"retrain it")
        return enc
    return build_clip_encoder(OmegaConf.create(record))
