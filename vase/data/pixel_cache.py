"""Views kept between batches of one process: decoded from their files, and as the image processor's patches.

A training run shows each vase's views many times (an SFT epoch asks six questions and a caption of every vase, each
with the same six views; GRPO draws every prompt again each pass), and every time the files were decoded and the
processor resized, normalised and cut them into patches: on the CPU demos that was a third of an SFT step. One
least-recently-used store per process, bounded in bytes (``data.pixel_cache_mb``), keeps both: a decoded view under
its file (path, modification time and size: `read_view`), the processor's patches and grid under the image's
file, or its pixels' digest where it has none, and the processor's arguments (`cached_pixels`). What comes out is
the same tensors, bit for bit (tests/test_pixel_cache.py), in the same order; videos, and any output the processor
makes beyond ``pixel_values`` and ``image_grid_thw``, go through untouched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DEFAULT_MB = 1024
"""Each process's store (each data-loader worker has its own): the CPU demos' 240 training vases take 650 MiB, their
six views decoded (150 KiB each at 224 px) and as the tiny model's patches (300 KiB each at its 112 px)."""

KEYS = {"pixel_values", "image_grid_thw"}
SOURCE = "_vase_source"
"""The attribute `read_view` sets on each image it returns: the file it was decoded from (PIL's own operations make
new images without it; vase never draws on a view in place)."""


class ViewStore:
    """Values under keys, least recently used dropped first when their bytes pass ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[Any, ...]) -> Any:
        got = self._items.get(key)
        if got is None:
            return None
        self._items.move_to_end(key)
        return got[0]

    def put(self, key: tuple[Any, ...], value: Any, nbytes: int) -> None:
        if nbytes > self.max_bytes or key in self._items:
            return
        self._items[key] = (value, nbytes)
        self.bytes += nbytes
        while self.bytes > self.max_bytes:
            _, (_, old) = self._items.popitem(last=False)
            self.bytes -= old

    def clear(self) -> None:
        self._items.clear()
        self.bytes = self.hits = self.misses = 0


STORE = ViewStore(DEFAULT_MB * 2**20)
"""This process's store (`configure` sets its bound)."""


def configure(max_mb: float | None) -> None:
    """Bound this process's store at ``max_mb`` MiB (0 or None: keep nothing), dropping what no longer fits."""
    STORE.max_bytes = int((max_mb or 0) * 2**20)
    while STORE.bytes > STORE.max_bytes and len(STORE):
        _, (_, old) = STORE._items.popitem(last=False)
        STORE.bytes -= old


def read_view(path: Path, decode: Callable[[Path], Any]) -> Any:
    """The image ``decode`` makes of ``path``, decoded once while the store holds it (a copy each call: the caller
    may change it), marked with its file (`SOURCE`) so that its patches are kept under the file too."""
    if not STORE.max_bytes:  # nothing kept: the file decoded, as without the store
        return decode(path)
    st = os.stat(path)
    source = (str(path), st.st_mtime_ns, st.st_size)
    key = ("decoded", *source)
    image = STORE.get(key)
    if image is None:
        image = decode(path)
        STORE.put(key, image, len(image.getbands()) * image.size[0] * image.size[1])
    out = image.copy()
    setattr(out, SOURCE, source)
    return out


def image_key(image: Any) -> tuple[Any, ...] | None:
    """What decides an image's patches: its mode, size and file (`read_view`'s mark) or pixels (a digest); None for
    what is no PIL image."""
    tobytes = getattr(image, "tobytes", None)
    if tobytes is None or not hasattr(image, "mode") or not hasattr(image, "size"):
        return None
    source = getattr(image, SOURCE, None)
    return image.mode, tuple(image.size), source or hashlib.blake2b(tobytes(), digest_size=16).hexdigest()


_PROCESSOR_KEYS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def processor_key(image_processor: Any) -> str:
    """A digest of ``image_processor``'s settings (its size limits, mean, std, patch size, ...): two processors that
    would cut an image differently never share its patches."""
    key = _PROCESSOR_KEYS.get(image_processor)
    if key is None:
        settings = json.dumps(image_processor.to_dict(), sort_keys=True, default=str)
        key = _PROCESSOR_KEYS[image_processor] = hashlib.blake2b(settings.encode(), digest_size=16).hexdigest()
    return key


class CachedImageProcessor:
    """``inner`` (a transformers image processor) with the store in front of its ``__call__``; every other attribute
    is the processor's own."""

    def __init__(self, inner: Any, store: ViewStore) -> None:
        self._inner = inner
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __call__(self, images: Any, **kwargs: Any) -> Any:
        # lazy: torch and transformers: vase.data.dataset imports this module, and reading a view needs neither
        import torch
        from transformers.image_utils import make_flat_list_of_images

        flat = make_flat_list_of_images(images)
        keys = [image_key(im) for im in flat]
        try:
            args = repr(sorted(kwargs.items()))
        except TypeError:  # arguments that do not sort are not ones to key on
            return self._inner(images, **kwargs)
        if not flat or any(k is None for k in keys):
            return self._inner(images, **kwargs)
        keys = [("patches", processor_key(self._inner), *k, args) for k in keys]
        held: dict[tuple[Any, ...], tuple[Any, Any]] = {}  # what this batch takes from the store, held before the
        for k in dict.fromkeys(keys):                        # misses' patches can push it out
            if (found := self._store.get(k)) is not None:
                held[k] = found
        missing = [k for k in dict.fromkeys(keys) if k not in held]
        if missing:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            out = self._inner([flat[first[k]] for k in missing], **kwargs)
            pixels, grid = out.get("pixel_values"), out.get("image_grid_thw")
            if set(out.keys()) != KEYS or not isinstance(pixels, torch.Tensor) or not isinstance(grid, torch.Tensor) \
                    or len(grid) != len(missing):
                return self._inner(images, **kwargs)  # an output this store does not know how to split
            counts = grid.prod(dim=-1).tolist()
            for k, rows, g in zip(missing, torch.split(pixels, counts), grid):
                held[k] = (rows.clone(), g.clone())  # a view would keep the whole batch's tensor alive
                self._store.put(k, held[k], rows.numel() * rows.element_size())
        self._store.misses += len(missing)
        self._store.hits += len(keys) - len(missing)
        got = [held[k] for k in keys]
        from transformers.feature_extraction_utils import BatchFeature  # lazy: transformers, as above

        return BatchFeature({"pixel_values": torch.cat([r for r, _ in got]),
                             "image_grid_thw": torch.stack([g for _, g in got])})


@contextlib.contextmanager
def cached_pixels(processor: Any, on: bool = True) -> Iterator[Any]:
    """``processor`` with its image processor behind this process's store for the ``with`` block (put back after
    it: a processor that is saved is the user's own); ``on`` false, or a store bounded at 0: the processor as it is."""
    inner = getattr(processor, "image_processor", None)
    if not on or not STORE.max_bytes or inner is None or isinstance(inner, CachedImageProcessor):
        yield processor
        return
    processor.image_processor = CachedImageProcessor(inner, STORE)
    try:
        yield processor
    finally:
        processor.image_processor = inner
