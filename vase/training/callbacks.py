"""Callbacks: save the LoRA adapter in peft format, atomically, when training ends (and every N epochs)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytorch_lightning as pl

from vase.io import atomic_directory
from vase.models.loading import LINEAGE_FILE


def save_adapter(model: Any, processor: Any, dirpath: str | Path, lineage: dict[str, Any] | None = None) -> Path:
    """Write a peft adapter (and the processor, so the directory loads on its own) to ``dirpath`` atomically.

    ``lineage`` records what the adapter sits on: the base model and the adapters merged into it first (an SFT
    adapter under a GRPO one), so that loading the adapter alone rebuilds the right model.
    """
    import json

    dirpath = Path(dirpath)
    with atomic_directory(dirpath, replace=True) as tmp:
        model.save_pretrained(tmp)
        if processor is not None:
            processor.save_pretrained(tmp)
        if lineage:
            (tmp / LINEAGE_FILE).write_text(json.dumps(lineage, indent=1))
    return dirpath


class SaveAdapter(pl.Callback):
    """Save ``pl_module.model`` (a peft model), with the module's processor and lineage, to ``dirpath`` at the end of
    training and every ``every_n_epochs``."""

    def __init__(self, dirpath: str, every_n_epochs: int = 0) -> None:
        self.dirpath = dirpath
        self.every_n_epochs = every_n_epochs

    def _save(self, trainer: pl.Trainer, pl_module: pl.LightningModule, name: str | None = None) -> None:
        target = Path(self.dirpath) if name is None else Path(self.dirpath).with_name(name)
        gather: Any = contextlib.nullcontext()
        if getattr(trainer.strategy, "zero_stage_3", False):
            # ZeRO-3 keeps each weight partitioned across ranks: gather the adapter's weights on every rank (a
            # collective), so rank 0 writes whole tensors rather than empty shards
            import deepspeed

            params = [p for n, p in pl_module.model.named_parameters() if p.requires_grad or "lora_" in n]
            gather = deepspeed.zero.GatheredParameters(params, modifier_rank=None)
        with gather:
            if trainer.is_global_zero:
                # the module carries its processor and lineage (base model, adapters merged under it)
                save_adapter(pl_module.model, getattr(pl_module, "processor", None), target,
                             getattr(pl_module, "lineage", None))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.every_n_epochs and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self._save(trainer, pl_module, f"adapter-epoch{trainer.current_epoch + 1}")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._save(trainer, pl_module)


class ResumeCheckpoint(pl.Callback):
    """Write ``<dirpath>/last.ckpt`` every ``every_n_train_steps`` optimizer steps and when training ends.

    The file is replaced atomically (the trainer's checkpoint IO is :class:`AtomicCheckpointIO`), so a run killed at
    any moment leaves the previous checkpoint whole; ``python train.py ckpt_path=<dirpath>/last.ckpt`` resumes it with
    the same weights, optimizer, scheduler, random states, data position and history
    (see :mod:`vase.training.checkpointing`).
    """

    FILENAME = "last.ckpt"

    def __init__(self, dirpath: str, every_n_train_steps: int = 50) -> None:
        if every_n_train_steps < 0:
            raise ValueError(f"callbacks.checkpoint.every_n_train_steps={every_n_train_steps} must be >= 0")
        self.dirpath = dirpath
        self.every_n_train_steps = every_n_train_steps
        self._saved_at = -1

    @property
    def path(self) -> Path:
        return Path(self.dirpath) / self.FILENAME

    def _save(self, trainer: pl.Trainer) -> None:
        # every rank calls it (DeepSpeed gathers its shards collectively); the full state, not weights only
        trainer.save_checkpoint(self.path, weights_only=False)
        self._saved_at = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step
        n = self.every_n_train_steps
        # with gradient accumulation several batches end at one step: save once, after the optimizer stepped
        if n and step > 0 and step % n == 0 and step != self._saved_at:
            self._save(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.global_step != self._saved_at:
            self._save(trainer)
