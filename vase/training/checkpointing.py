"""Checkpoints that survive a kill: written atomically, holding everything a resumed run needs to continue exactly.

A Lightning checkpoint already holds the trainable weights (see ``TrainableStateMixin``), the optimizer, the
learning-rate scheduler and the loops' progress. vase adds the rest:

- `AtomicCheckpointIO` writes each checkpoint to a temporary file and renames it over the old one, so a
  kill during a save leaves the previous checkpoint whole;
- ``vase.data.loader.ResumableSampler`` orders each epoch from a generator seeded by (seed, epoch) and, on resume,
  skips what the interrupted epoch had already consumed (the data module stores that position in the checkpoint);
- `rng_state` / `set_rng_state`: the global RNGs (torch, numpy, random) travel in the checkpoint, so
  dropout and GRPO sampling continue as in an uninterrupted run; so does the module's per-step history.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

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
    """Restore what `rng_state` captured."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
