"""Text embeddings cached on disk, keyed by the encoder's weights and the text, so references that every run of an
evaluation shares are encoded once.

The key of an encoder is a hash of every tensor of its loaded weights (plus its class and maximum length), so a
cache entry can never be served for another model, a fine-tuned copy or another truncation. Entries live in
append-only shards (``<dir>/<key>/shard-*.pt``, each written atomically): concurrent runs may add shards side by
side, and a killed run loses at most the shard it was writing.

    enc = CachedTextEncoder(SentenceEncoder("packaged:all-MiniLM-L6-v2"), ".cache/embeddings")
    enc.encode(texts)   # encodes only the texts no earlier run encoded
"""

from __future__ import annotations

import hashlib
import io
import uuid
from pathlib import Path
from typing import Any

import torch

from vase.io import atomic_write_bytes


def weights_fingerprint(module: torch.nn.Module, extra: str = "") -> str:
    """sha256 over every parameter and buffer of ``module`` (names, dtypes, shapes and bytes), and ``extra``."""
    h = hashlib.sha256(extra.encode())
    for name, t in sorted(module.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:24]


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class CachedTextEncoder:
    """Wraps an encoder's ``encode(list[str]) -> (N, D)``: texts found on disk are read, the others are encoded in
    one call and stored as a new shard. Everything else (``encode_images``, attributes) passes through."""

    def __init__(self, encoder: Any, cache_dir: str | Path, fingerprint: str | None = None) -> None:
        self.encoder = encoder
        module = getattr(encoder, "model", None)
        if fingerprint is None:
            if not isinstance(module, torch.nn.Module):
                raise TypeError(f"{type(encoder).__name__} has no .model to fingerprint; pass fingerprint=")
            extra = f"{type(encoder).__name__}:{getattr(encoder, 'max_length', '')}"
            fingerprint = weights_fingerprint(module, extra)
        self.dir = Path(cache_dir) / fingerprint
        self._index: dict[str, torch.Tensor] = {}
        self._loaded: set[str] = set()
        self.hits = self.misses = 0

    def __getattr__(self, name: str) -> Any:  # encode_images, name, model, ...
        return getattr(self.encoder, name)

    def _load(self) -> None:
        if not self.dir.is_dir():
            return
        for shard in sorted(self.dir.glob("shard-*.pt")):
            if shard.name in self._loaded:
                continue
            data = torch.load(shard, map_location="cpu", weights_only=True)
            self._index.update(zip(data["keys"], data["emb"]))
            self._loaded.add(shard.name)

    def encode(self, texts: list[str]) -> torch.Tensor:
        self._load()
        keys = [_text_key(t) for t in texts]
        todo: dict[str, str] = {}  # in the caller's order (it may have sorted by length to pad less)
        for k, t in zip(keys, texts):
            if k not in self._index and k not in todo:
                todo[k] = t
        self.hits += sum(1 for k in keys if k not in todo)
        if todo:
            emb = self.encoder.encode(list(todo.values())).float().cpu()
            self.misses += len(todo)
            self._index.update(zip(todo, emb))
            buf = io.BytesIO()
            torch.save({"keys": list(todo), "emb": emb.clone()}, buf)
            name = f"shard-{uuid.uuid4().hex}.pt"
            atomic_write_bytes(self.dir / name, buf.getvalue())
            self._loaded.add(name)
        if not texts:
            return self.encoder.encode([])
        return torch.stack([self._index[k] for k in keys])
