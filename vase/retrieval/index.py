"""The vase index: one point per training vase in a Qdrant collection.

Why Qdrant (``qdrant-client`` in local on-disk mode): the same client code runs against a Qdrant server when a
collection outgrows one machine (``retrieval.url``), points carry their payload (metadata and caption) so one query
returns what goes into the prompt, and points are upserted by id, so the index updates incrementally. faiss would
need a separate payload store and has no server.

Only training vases are indexed (never a validation vase), and a query never returns the vase it was asked for.
The index lives under the dataset root when vase owns it (the synthetic set), else under the cache keyed by the
dataset (a user's dataset is only read).
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import torch

from vase.annotate.records import VaseRecord, raw_metadata
from vase.annotate.vocab import DIMENSIONS
from vase.errors import ConfigError
from vase.io import own_output_dir
from vase.progress import progress_bar
from vase.views import path_key

PAYLOAD = "payload-2"  # what a point carries (2: each dimension's value, for retrieval.format=asked); in its hash
COLLECTION = "vases"  # one collection per encoder: vases_<hash of the encoder's name> (their vectors differ in size)


def point_id(vase_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"vase:{vase_id}"))


def record_text(rec: VaseRecord) -> str:
    """What a neighbour contributes to the prompt: its raw museum metadata line (or its caption without one)."""
    return raw_metadata(rec) if rec.has_dimensions else rec.caption


def embed_views(encoder: Any, images: list[Any]) -> torch.Tensor:
    """One vector per vase: the mean of its views' normalised image embeddings (CLIP's or the view descriptor's),
    normalised."""
    f = encoder.encode_images(images)
    f = f / f.norm(dim=-1, keepdim=True)
    m = f.mean(0)
    return m / m.norm()


class VaseIndex:
    """Embeddings of vases' views with their metadata, in a persistent Qdrant collection."""

    def __init__(self, path: str | Path | None, encoder: Any, url: str | None = None) -> None:
        # lazy: qdrant_client
        from qdrant_client import QdrantClient

        self.encoder = encoder
        if url:
            self.client = QdrantClient(url=url)
        elif path is None:
            raise ConfigError("retrieval.index_dir is not set (or retrieval.url for a Qdrant server)")
        else:
            # only a folder vase made holds the index: a user's non-empty folder is refused, never written into
            own_output_dir(path, "retrieval.index_dir")
            self.client = QdrantClient(path=str(path))
        self.path = path
        self.collection = f"{COLLECTION}_{hashlib.sha256(str(encoder.name).encode()).hexdigest()[:12]}"

    def close(self) -> None:
        self.client.close()

    def embed(self, images: list[Any]) -> torch.Tensor:
        return embed_views(self.encoder, images)

    def _ensure(self, dim: int) -> None:
        # lazy: qdrant_client
        from qdrant_client import models

        if not self.client.collection_exists(self.collection):
            self.client.create_collection(self.collection, vectors_config=models.VectorParams(
                size=dim, distance=models.Distance.COSINE))

    def stored_hashes(self) -> dict[str, str]:
        if not self.client.collection_exists(self.collection):
            return {}
        out, offset = {}, None
        while True:
            points, offset = self.client.scroll(self.collection, limit=256, offset=offset, with_payload=True)
            out.update({p.payload["id"]: p.payload["hash"] for p in points})
            if offset is None:
                return out

    def update(self, dataset: Any, progress: bool = True) -> dict[str, int]:
        """Upsert every vase of ``dataset`` whose record or views changed; delete indexed vases no longer in it.
        Returns counts (added or changed, unchanged, removed)."""
        # lazy: qdrant_client
        from qdrant_client import models

        stored = self.stored_hashes()
        todo = []
        for i, rec in enumerate(dataset.records):
            h = hashlib.sha256((repr(rec.to_json()) + self.encoder.name + PAYLOAD).encode()).hexdigest()[:16]
            if stored.get(rec.id) != h:
                todo.append((i, rec, h))
        it: Any = todo
        if progress and todo:
            it = progress_bar(todo, desc="indexing vases", unit="vase")
        points = []
        for i, rec, h in it:
            vec = self.embed(dataset[i].images)
            self._ensure(len(vec))
            points.append(models.PointStruct(id=point_id(rec.id), vector=vec.tolist(), payload={
                "id": rec.id, "hash": h, "text": record_text(rec), "caption": rec.caption,
                "values": {d: rec.dimension_text(d) for d in DIMENSIONS if getattr(rec, d) is not None}}))
        if points:
            self.client.upsert(self.collection, points=points)
        gone = sorted(set(stored) - {r.id for r in dataset.records})
        if gone:
            self.client.delete(self.collection, points_selector=models.PointIdsList(points=[point_id(v) for v in gone]))
        return {"indexed": len(todo), "unchanged": len(dataset.records) - len(todo), "removed": len(gone)}

    def ids(self) -> set[str]:
        return set(self.stored_hashes())

    def search(self, vector: torch.Tensor, k: int, exclude: str | None = None) -> list[dict[str, Any]]:
        """The ``k`` nearest indexed vases (payload plus ``score``), never ``exclude``."""
        # lazy: qdrant_client
        from qdrant_client import models

        if k <= 0 or not self.client.collection_exists(self.collection):
            return []
        flt = None
        if exclude is not None:
            flt = models.Filter(must_not=[models.FieldCondition(key="id", match=models.MatchValue(value=exclude))])
        res = self.client.query_points(self.collection, query=vector.tolist(), limit=k, query_filter=flt,
                                       with_payload=True)
        return [{**p.payload, "score": float(p.score)} for p in res.points]


class Retriever:
    """The prompt context of a vase: its ``k`` nearest training vases' metadata (embeddings cached per vase)."""

    def __init__(self, index: VaseIndex, k: int) -> None:
        self.index, self.k = index, int(k)
        self._cache: dict[str, torch.Tensor] = {}

    def neighbours(self, rec: VaseRecord, images: list[Any]) -> list[dict[str, Any]]:
        if rec.id not in self._cache:
            self._cache[rec.id] = self.index.embed(images)
        return self.index.search(self._cache[rec.id], self.k, exclude=rec.id)

    @staticmethod
    def context(found: list[dict[str, Any]]) -> str:
        """The vase's context from its neighbours (`neighbours`): each one's whole metadata line."""
        if not found:
            return ""
        lines = "\n".join(f"{n + 1}. {x['text']}" for n, x in enumerate(found))
        return f"Similar vases in the collection, for reference:\n{lines}\n\n"

    @staticmethod
    def asked_context(found: list[dict[str, Any]]) -> dict[str, str]:
        """Per dimension, the context of a question about it (``retrieval.format=asked``): only that dimension's
        value of each neighbour, in the words an answer uses ("Similar vases: Krater; Krater; Amphora.")."""
        out = {}
        for d in DIMENSIONS:
            values = [x["values"][d] for x in found if d in x.get("values", {})]
            if values:
                out[d] = f"Similar vases in the collection: {'; '.join(values)}.\n\n"
        return out


def index_dir(cfg_dir: str | None, data_root: str | Path, owns_root: bool, cache_dir: str | Path | None) -> Path:
    """Where the index lives: ``retrieval.index_dir`` if set; the dataset root when vase owns it; else the cache."""
    if cfg_dir:
        return Path(cfg_dir)
    if owns_root:
        return Path(data_root) / "retrieval"
    if not cache_dir:
        raise ConfigError("retrieval needs retrieval.index_dir or paths.cache_dir (a user's dataset is only read)")
    return Path(cache_dir) / "retrieval" / path_key(data_root)
