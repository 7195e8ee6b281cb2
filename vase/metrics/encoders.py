"""Text encoders for the caption metrics: CLIP text towers and sentence-transformers models.

Every failure raises with the model path in the message: the paper's scorer turned a failing encoder into a silent
0.0 (for instance under transformers 5, where ``get_text_features`` returns an output object); ours never does.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from vase.errors import MetricError

PACKAGED_PREFIX = "packaged:"


def resolve_encoder_path(name: str) -> str:
    """``packaged:all-MiniLM-L6-v2`` -> the weights shipped in site-packages; anything else is a path or hub id."""
    if name.startswith(PACKAGED_PREFIX):
        what = name[len(PACKAGED_PREFIX) :].lower()
        if what in ("all-minilm-l6-v2", "minilm"):
            from vase.models.tiny_clip import packaged_minilm_path

            return str(packaged_minilm_path())
        raise MetricError(f"unknown packaged encoder {name!r}; the only one shipped is packaged:all-MiniLM-L6-v2")
    return name


def _features(out: Any) -> torch.Tensor:
    """A tensor from ``get_text_features``: transformers 4 returns one, transformers 5 an output object."""
    if isinstance(out, torch.Tensor):
        return out
    pooled = getattr(out, "pooler_output", None)
    if isinstance(pooled, torch.Tensor):
        return pooled
    raise MetricError(f"get_text_features returned {type(out).__name__} without a pooler_output tensor")


class HFCLIPTextEncoder:
    """CLIP text embeddings through transformers' ``CLIPModel`` (what the paper's scorer used)."""

    def __init__(self, model: str, batch_size: int = 256, device: str = "cpu", build_tiny: bool = False) -> None:
        from transformers import AutoTokenizer, CLIPModel

        if build_tiny:
            from vase.models.tiny_clip import build_tiny_clip

            model = str(build_tiny_clip(model))
        self.name = model
        try:
            self.model = CLIPModel.from_pretrained(model).to(device).eval()
            self.tokenizer = AutoTokenizer.from_pretrained(model)
        except Exception as e:
            raise MetricError(f"could not load the CLIP model {model!r} (metrics.clip.model): {e}") from e
        self.batch_size = batch_size
        self.device = device
        self.max_length = min(77, int(getattr(self.model.config.text_config, "max_position_embeddings", 77)))

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        outs = []
        for i in range(0, len(texts), self.batch_size):
            chunk = texts[i : i + self.batch_size]
            enc = self.tokenizer(chunk, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
            enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            outs.append(_features(self.model.get_text_features(**enc)).float().cpu())
        if not outs:
            return torch.zeros((0, int(self.model.config.projection_dim)))
        return torch.cat(outs)


class OpenCLIPTextEncoder:
    """CLIP text embeddings through open_clip (``model`` as ``ARCH`` with ``pretrained`` a tag or a local file)."""

    def __init__(self, model: str, pretrained: str | None = None, batch_size: int = 256, device: str = "cpu") -> None:
        import open_clip

        self.name = f"{model}:{pretrained}"
        try:
            self.model, _, _ = open_clip.create_model_and_transforms(model, pretrained=pretrained, device=device)
            self.tokenizer = open_clip.get_tokenizer(model)
        except Exception as e:
            raise MetricError(
                f"could not load the open_clip model {model!r} with pretrained={pretrained!r}: {e}"
            ) from e
        self.model.eval()
        self.batch_size = batch_size
        self.device = device

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        outs = [
            self.model.encode_text(self.tokenizer(texts[i : i + self.batch_size]).to(self.device)).float().cpu()
            for i in range(0, len(texts), self.batch_size)
        ]
        return torch.cat(outs) if outs else torch.zeros((0, 1))


class SentenceEncoder:
    """Sentence embeddings (paper: all-mpnet-base-v2 for FID; default here: the packaged all-MiniLM-L6-v2)."""

    def __init__(self, model: str, batch_size: int = 256, device: str = "cpu") -> None:
        from sentence_transformers import SentenceTransformer

        path = resolve_encoder_path(model)
        self.name = model
        try:
            self.model = SentenceTransformer(path, device=device)
        except Exception as e:
            raise MetricError(f"could not load the sentence encoder {model!r} (metrics.text_encoder.model): {e}") from e
        self.batch_size = batch_size

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        if not texts:
            return torch.zeros((0, self.model.get_sentence_embedding_dimension() or 1))
        emb = self.model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True, show_progress_bar=False)
        return emb.float().cpu()


@lru_cache(maxsize=4)
def cached_sentence_encoder(model: str, device: str = "cpu") -> SentenceEncoder:
    """One loaded encoder per (model, device) per process: the reward and the metrics share it."""
    return SentenceEncoder(model, device=device)


def build_clip_encoder(cfg: Any) -> Any:
    """The CLIP text encoder named by a ``metrics.clip`` config."""
    backend = cfg.get("backend", "hf")
    if backend == "hf":
        return HFCLIPTextEncoder(
            cfg.model,
            batch_size=int(cfg.get("batch_size", 256)),
            device=cfg.get("device", "cpu"),
            build_tiny=bool(cfg.get("build_tiny", False)),
        )
    if backend == "open_clip":
        return OpenCLIPTextEncoder(
            cfg.model,
            cfg.get("pretrained"),
            batch_size=int(cfg.get("batch_size", 256)),
            device=cfg.get("device", "cpu"),
        )
    raise MetricError(f"metrics.clip.backend={backend!r} must be 'hf' or 'open_clip'")
