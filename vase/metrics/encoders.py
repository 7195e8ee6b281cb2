"""Text encoders for the caption metrics: CLIP text towers and sentence-transformers models.

Every failure raises with the model path in the message: the paper's scorer turned a failing encoder into a silent
0.0 (for instance under transformers 5, where ``get_text_features`` returns an output object); ours never does.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from vase.errors import MetricError
from vase.models.tiny_clip import build_tiny_clip, build_tiny_open_clip, packaged_minilm_path

PACKAGED_PREFIX = "packaged:"


def resolve_encoder_path(name: str) -> str:
    """``packaged:all-MiniLM-L6-v2`` -> the weights shipped in site-packages; anything else is a path or hub id."""
    if name.startswith(PACKAGED_PREFIX):
        what = name[len(PACKAGED_PREFIX) :].lower()
        if what in ("all-minilm-l6-v2", "minilm"):
            return str(packaged_minilm_path())
        raise MetricError(f"unknown packaged encoder {name!r}; the only one shipped is packaged:all-MiniLM-L6-v2")
    return name


class FastBatchTokenizer:
    """Pads and truncates whole batches in the Rust tokenizer, skipping the Python wrapper's per-call overhead
    (about half the encoding time of a tiny model). Same ids and mask as ``tokenizer(texts, padding=True,
    truncation=True, max_length=...)``; a private copy, so the shared tokenizer's settings are untouched."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        # lazy: tokenizers
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        self.backend.enable_truncation(max_length)
        self.backend.enable_padding(pad_id=tokenizer.pad_token_id, pad_token=tokenizer.pad_token)

    def __call__(self, texts: list[str]) -> dict[str, torch.Tensor]:
        enc = self.backend.encode_batch(texts)
        return {"input_ids": torch.tensor([e.ids for e in enc], dtype=torch.long),
                "attention_mask": torch.tensor([e.attention_mask for e in enc], dtype=torch.long)}


def fast_tokenizer(tokenizer: Any, max_length: int) -> FastBatchTokenizer | None:
    """A FastBatchTokenizer where the tokenizer has a Rust backend and a pad token, else None (use the wrapper)."""
    if getattr(tokenizer, "backend_tokenizer", None) is None or tokenizer.pad_token is None:
        return None
    try:
        return FastBatchTokenizer(tokenizer, max_length)
    except Exception:  # an exotic backend: the wrapper still works, only slower
        return None


def _features(out: Any) -> torch.Tensor:
    """A tensor from ``get_text_features``: transformers 4 returns one, transformers 5 an output object."""
    if isinstance(out, torch.Tensor):
        return out
    pooled = getattr(out, "pooler_output", None)
    if isinstance(pooled, torch.Tensor):
        return pooled
    raise MetricError(f"get_text_features returned {type(out).__name__} without a pooler_output tensor")


class HFCLIPEncoder:
    """CLIP text (and image) embeddings through transformers' ``CLIPModel`` (what the paper's scorer used)."""

    def __init__(self, model: str, batch_size: int = 256, device: str = "cpu", build_tiny: bool = False) -> None:
        # lazy: transformers
        from transformers import AutoTokenizer, CLIPModel

        if build_tiny:
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
        self._fast = fast_tokenizer(self.tokenizer, self.max_length)
        self._image_processor: Any = None

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        outs = []
        for i in range(0, len(texts), self.batch_size):
            chunk = texts[i: i + self.batch_size]
            if self._fast is not None:
                enc = self._fast(chunk)
            else:
                enc = self.tokenizer(chunk, padding=True, truncation=True, max_length=self.max_length,
                                     return_tensors="pt")
            enc = {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            outs.append(_features(self.model.get_text_features(**enc)).float().cpu())
        if not outs:
            return torch.zeros((0, int(self.model.config.projection_dim)))
        return torch.cat(outs)

    def image_transform(self) -> Any:
        """A picklable PIL -> pixel tensor transform equal in steps to the model's ``CLIPImageProcessor`` (resize the
        shorter side bicubically, centre-crop, rescale, normalise), to run in DataLoader workers."""
        # lazy: torchvision, transformers
        from torchvision import transforms as T
        from transformers import CLIPImageProcessor

        try:
            p = CLIPImageProcessor.from_pretrained(self.name)
        except Exception as e:
            raise MetricError(f"{self.name}: no image processor to encode images with ({e})") from e
        size = p.size.get("shortest_edge") or min(p.size.get("height", 224), p.size.get("width", 224))
        crop = (p.crop_size["height"], p.crop_size["width"]) if p.do_center_crop else (size, size)
        return T.Compose([T.Resize(size, interpolation=T.InterpolationMode.BICUBIC, antialias=True),
                          T.CenterCrop(crop), T.ToTensor(), T.Normalize(p.image_mean, p.image_std)])

    @torch.inference_mode()
    def encode_pixels(self, px: torch.Tensor) -> torch.Tensor:
        """Image embeddings (not normalised) of a batch of pixel tensors from `image_transform`."""
        return _features(self.model.get_image_features(pixel_values=px.to(self.device))).float().cpu()

    @torch.inference_mode()
    def encode_images(self, images: list[Any]) -> torch.Tensor:
        if self._image_processor is None:
            # lazy: transformers
            from transformers import CLIPImageProcessor

            try:
                self._image_processor = CLIPImageProcessor.from_pretrained(self.name)
            except Exception as e:
                raise MetricError(f"{self.name}: no image processor to encode images with ({e})") from e
        outs = []
        for i in range(0, len(images), self.batch_size):
            px = self._image_processor(images=images[i: i + self.batch_size], return_tensors="pt")["pixel_values"]
            outs.append(_features(self.model.get_image_features(pixel_values=px.to(self.device))).float().cpu())
        return torch.cat(outs)


class OpenCLIPEncoder:
    """CLIP text and image embeddings through open_clip: ``model`` an architecture name (``ViT-B-32``), ``pretrained``
    a tag (``openai``) or a local weights file. An architecture JSON beside a local file is registered first, so a
    custom model loads like a built-in one."""

    def __init__(self, model: str, pretrained: str | None = None, batch_size: int = 256, device: str = "cpu",
                 build_tiny: bool = False) -> None:
        # lazy: open_clip
        import open_clip

        if build_tiny:
            if not pretrained:
                raise MetricError("metrics.clip.build_tiny needs metrics.clip.pretrained: where to keep the weights")
            pretrained = str(build_tiny_open_clip(Path(pretrained).parent))
        if pretrained and Path(pretrained).is_file() and (Path(pretrained).parent / f"{model}.json").is_file():
            open_clip.add_model_config(str(Path(pretrained).parent))
        self.name = f"{model}:{pretrained}"
        try:
            self.model, _, self.preprocess = open_clip.create_model_and_transforms(model, pretrained=pretrained,
                                                                                device=device)
            self.tokenizer = open_clip.get_tokenizer(model)
        except Exception as e:
            raise MetricError(f"could not load the open_clip model {model!r} with pretrained={pretrained!r} "
                              f"(metrics.clip.model / metrics.clip.pretrained): {e}") from e
        self.model.eval()
        self.batch_size = batch_size
        self.device = device

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        outs = [self.model.encode_text(self.tokenizer(texts[i: i + self.batch_size]).to(self.device)).float().cpu()
                for i in range(0, len(texts), self.batch_size)]
        return torch.cat(outs) if outs else torch.zeros((0, int(self.model.text_projection.shape[-1])))

    def image_transform(self) -> Any:
        """open_clip's own preprocessing (a picklable torchvision transform), to run in DataLoader workers."""
        return self.preprocess

    @torch.inference_mode()
    def encode_pixels(self, px: torch.Tensor) -> torch.Tensor:
        """Image embeddings (not normalised) of a batch of pixel tensors from `image_transform`."""
        return self.model.encode_image(px.to(self.device)).float().cpu()

    @torch.inference_mode()
    def encode_images(self, images: list[Any]) -> torch.Tensor:
        outs = []
        for i in range(0, len(images), self.batch_size):
            px = torch.stack([self.preprocess(im.convert("RGB")) for im in images[i: i + self.batch_size]])
            outs.append(self.model.encode_image(px.to(self.device)).float().cpu())
        return torch.cat(outs)


class SentenceEncoder:
    """Sentence embeddings (paper: all-mpnet-base-v2 for FID; default here: the packaged all-MiniLM-L6-v2)."""

    def __init__(self, model: str, batch_size: int = 256, device: str = "cpu") -> None:
        # lazy: sentence_transformers
        from sentence_transformers import SentenceTransformer

        path = resolve_encoder_path(model)
        self.name = model
        try:
            self.model = SentenceTransformer(path, device=device)
        except Exception as e:
            raise MetricError(f"could not load the sentence encoder {model!r} (metrics.text_encoder.model): {e}") from e
        self.batch_size = batch_size
        self.device = device
        self._fast = None
        first = self.model[0] if len(self.model) else None
        tok = getattr(first, "tokenizer", None)
        if tok is not None and type(first).__name__ == "Transformer":
            self._fast = fast_tokenizer(tok, int(getattr(first, "max_seq_length", None) or 512))

    @property
    def dimension(self) -> int | None:
        """The embedding width (sentence-transformers 6 renamed the method; both spellings are accepted)."""
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return get()

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        if not texts:
            return torch.zeros((0, self.dimension or 1))
        if self._fast is None:
            emb = self.model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True, show_progress_bar=False)
            return emb.float().cpu()
        # the model's own modules on batches tokenised in Rust: the same embeddings as model.encode, less overhead
        self.model.eval()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = torch.empty((len(texts), self.dimension))
        for i in range(0, len(order), self.batch_size):
            idx = order[i: i + self.batch_size]
            feats = {k: v.to(self.device) for k, v in self._fast([texts[j] for j in idx]).items()}
            out[idx] = self.model(feats)["sentence_embedding"].float().cpu()
        return out


@lru_cache(maxsize=4)
def cached_sentence_encoder(model: str, device: str = "cpu") -> SentenceEncoder:
    """One loaded encoder per (model, device) per process: the reward and the metrics share it."""
    return SentenceEncoder(model, device=device)


def build_clip_encoder(cfg: Any) -> Any:
    """The CLIP encoder named by a ``metrics.clip`` config."""
    backend = cfg.get("backend", "open_clip")
    kwargs = {"batch_size": int(cfg.get("batch_size", 256)), "device": cfg.get("device", "cpu"),
              "build_tiny": bool(cfg.get("build_tiny", False))}
    if backend == "hf":
        return HFCLIPEncoder(cfg.model, **kwargs)
    if backend == "open_clip":
        return OpenCLIPEncoder(cfg.model, cfg.get("pretrained"), **kwargs)
    raise MetricError(f"metrics.clip.backend={backend!r} must be 'hf' or 'open_clip'")
