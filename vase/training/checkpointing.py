"""Checkpoints that survive a kill: written atomically, holding everything a resumed run needs to continue exactly.

A Lightning checkpoint already holds the trainable weights (see ``TrainableStateMixin``), the optimizer, the
learning-rate scheduler and the loops' progress. vase adds the rest:

- :class:`AtomicCheckpointIO` writes each checkpoint to a temporary file and renames it over the old one, so a
  kill during a save leaves the previous checkpoint whole;
- :class:`ResumableSampler` orders each epoch from a generator seeded by (seed, epoch) and, on resume, skips what
  the interrupted epoch had already consumed (the data module stores that position in the checkpoint);
- :func:`rng_state` / :func:`set_rng_state`: the global RNGs (torch, numpy, random) travel in the checkpoint, so
  dropout and GRPO sampling continue as in an uninterrupted run; so does the module's per-step history.
"""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from torch.utils.data import DataLoader, Sampler

from vase.io import atomic_write_bytes


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` into memory, then a temporary file renamed over the target: never a torn checkpoint."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options (got {storage_options!r})")
        buf = io.BytesIO()
        torch.save(checkpoint, buf)
        atomic_write_bytes(Path(path), buf.getvalue())


def rng_state() -> dict[str, Any]:
    """The global random states a training step draws from (CPU torch, CUDA if present, numpy, random), as tensors
    and plain values only, so the checkpoint still loads with ``torch.load(weights_only=True)``."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(),
             "numpy": {"kind": str(kind), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
                       "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)},
             "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` captured."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class ResumableSampler(Sampler[int]):
    """Indices of a dataset, shuffled per epoch by a generator seeded from (seed, epoch), so any epoch's order can
    be rebuilt; :meth:`resume` makes the next pass over ``epoch`` start after the items already consumed.

    >>> s = ResumableSampler(6, seed=1)
    >>> s.set_epoch(2); full = list(s)
    >>> s.resume(epoch=2, skip=4); list(s) == full[4:]
    True
    >>> list(s) == full  # only one pass skips
    True
    """

    def __init__(self, n: int, seed: int = 0, shuffle: bool = True) -> None:
        self.n = n
        self.seed = seed
        self.shuffle = shuffle
        self.epoch = 0
        self._resume: tuple[int, int] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def resume(self, epoch: int, skip: int) -> None:
        self._resume = (int(epoch), int(skip))

    def order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator().manual_seed(int(self.seed) * 1_000_003 + int(epoch))
        return torch.randperm(self.n, generator=g).tolist()

    def __iter__(self) -> Iterator[int]:
        skip = 0
        if self._resume is not None and self._resume[0] == self.epoch:
            skip = self._resume[1]
            self._resume = None
        yield from self.order(self.epoch)[skip:]

    def __len__(self) -> int:
        return self.n


class ResumableLoader(DataLoader):
    """A DataLoader that tells Lightning it resumes exactly: its position travels in the data module's checkpoint
    state and is restored through :class:`ResumableSampler`, so the loader itself has nothing to save."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        del state_dict  # the data module restores the position (ResumableSampler.resume)
