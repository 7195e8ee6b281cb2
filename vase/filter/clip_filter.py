"""CLIP prompt-ensemble scores: how much a photo looks like a complete vase rather than a fragment, and how close it
comes to a description of the view a curator wants (best-view selection).

score = sim(image, good prompts) - sim(image, bad prompts). ``ensemble`` says how a prompt list becomes one
similarity: ``mean_embedding`` (the paper's public filter: average the prompts' text embeddings, normalise, one
cosine) or ``mean_similarity`` (one cosine per prompt, averaged).
"""

from __future__ import annotations

from typing import Any

import torch

from vase.errors import ConfigError
from vase.metrics.encoders import build_clip_encoder


class PromptEnsemble:
    """Text side of a prompt list, encoded once; `similarity` scores a batch of normalised image features.

    >>> import torch
    >>> e = PromptEnsemble(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), "mean_similarity")
    >>> e.similarity(torch.tensor([[1.0, 0.0]])).tolist()
    [0.5]
    >>> round(PromptEnsemble(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), "mean_embedding")
    ...       .similarity(torch.tensor([[1.0, 0.0]])).item(), 4)
    0.7071
    """

    def __init__(self, text_features: torch.Tensor, ensemble: str = "mean_embedding") -> None:
        if ensemble not in ("mean_embedding", "mean_similarity"):
            raise ConfigError(f"filter.clip.ensemble={ensemble!r} must be mean_embedding or mean_similarity")
        self.ensemble = ensemble
        t = text_features.float()
        if ensemble == "mean_embedding":
            m = t.mean(0, keepdim=True)
            self.text = m / m.norm(dim=-1, keepdim=True)
        else:
            self.text = t / t.norm(dim=-1, keepdim=True)

    def similarity(self, image_features: torch.Tensor) -> torch.Tensor:
        return (image_features @ self.text.T).mean(-1)


class ClipScorer:
    """Fragment score and best-view similarity from one image embedding per photo."""

    def __init__(self, cfg: Any) -> None:
        good, bad = list(cfg.good_prompts or []), list(cfg.bad_prompts or [])
        if not good or not bad:
            raise ConfigError("filter.clip.good_prompts and filter.clip.bad_prompts both need at least one prompt")
        precision = cfg.get("precision", "fp32")
        if precision not in ("fp32", "bf16"):
            raise ConfigError(f"filter.clip.precision={precision!r} must be fp32 or bf16")
        self.bf16 = precision == "bf16"
        self.device_type = "cuda" if str(cfg.get("device", "cpu")).startswith("cuda") else "cpu"
        self.encoder = build_clip_encoder(cfg)
        self.transform = self.encoder.image_transform()
        self.good = PromptEnsemble(self.encoder.encode(good), cfg.ensemble)
        self.bad = PromptEnsemble(self.encoder.encode(bad), cfg.ensemble)
        description = cfg.get("view_description")
        self.view = PromptEnsemble(self.encoder.encode([description]), "mean_embedding") if description else None

    @torch.inference_mode()
    def __call__(self, px: torch.Tensor) -> dict[str, torch.Tensor]:
        # bf16: the image tower's matrix products at half the memory traffic (CPUs with AVX512-BF16/AMX, GPUs);
        # the text side stays fp32. Scores move by about 1e-3, so near-threshold decisions can change.
        with torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16):
            f = self.encoder.encode_pixels(px)
        f = f / f.norm(dim=-1, keepdim=True)
        good, bad = self.good.similarity(f), self.bad.similarity(f)
        out = {"clip": good - bad, "good": good, "bad": bad}
        if self.view is not None:
            out["view"] = self.view.similarity(f)
        return out
