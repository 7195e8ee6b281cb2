"""Supervised fine-tuning with LoRA: multi-view images + caption in the Qwen2.5-VL chat template."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import pytorch_lightning as pl
import torch

from vase.training.checkpointing import rng_state, set_rng_state
from vase.training.lora import apply_lora, count_parameters


def warmup_cosine(step: int, total: int, warmup: int) -> float:
    """Learning-rate factor: linear warm-up to 1 over ``warmup`` steps, then cosine decay to 0 at ``total``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


class TrainableStateMixin:
    """Checkpoints hold only the trainable weights (LoRA adapters), so a 7B run's checkpoint is megabytes and resumes."""

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:  # type: ignore[override]
        full = super().state_dict(*args, **kwargs)  # type: ignore[misc]
        keep = {n for n, p in self.named_parameters() if p.requires_grad}  # type: ignore[attr-defined]
        return {k: v for k, v in full.items() if k in keep}

    def load_state_dict(self, state_dict: dict[str, torch.Tensor], strict: bool = True, **kwargs: Any):  # type: ignore[override]
        missing_trainable = {n for n, p in self.named_parameters() if p.requires_grad} - set(state_dict)  # type: ignore[attr-defined]
        if strict and missing_trainable:
            raise KeyError(f"checkpoint lacks trainable weights, e.g. {sorted(missing_trainable)[:3]}")
        return super().load_state_dict(state_dict, strict=False, **kwargs)  # type: ignore[misc]


def enable_gradient_checkpointing(model: Any) -> None:
    """Activation checkpointing on a (peft) Qwen2.5-VL: non-reentrant, so frozen inputs need no grad of their own,
    plus peft's hook that makes the input embeddings require grad (what reentrant checkpointing under LoRA needs)."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if hasattr(model, "enable_input_require_grads"):
        model.enable_input_require_grads()


class LoRAStageModule(TrainableStateMixin, pl.LightningModule):
    """What every training stage shares: LoRA on the model (or an adapter already there), the optimizer and the
    warm-up/cosine schedule, the per-batch history the report plots.

    Args:
        model: a loaded ``Qwen2_5_VLForConditionalGeneration`` (or a peft model already holding an adapter).
        lora: keyword arguments of `vase.training.lora.apply_lora`.
        optimizer: a partial optimizer (``_partial_: true`` in config) taking the trainable parameters.
        warmup_ratio: fraction of optimizer steps spent warming the learning rate up.
        full_finetune: train every weight instead (no adapter); the vision tower stays frozen if lora says so.
        processor: saved beside the adapter (by the SaveAdapter callback), so the adapter directory loads alone.
        lineage: the base model and the adapters merged into it before this stage, recorded beside the adapter.
        gradient_checkpointing: recompute activations in the backward pass instead of keeping them (transformers'
            activation checkpointing, non-reentrant, with peft's input-gradient hook): the same loss and gradients
            for far less memory, at the cost of a second forward pass through each layer.
    """

    def __init__(self, model: Any, lora: dict[str, Any] | None = None, optimizer: Any = None,
                 warmup_ratio: float = 0.05, full_finetune: bool = False, processor: Any = None,
                 lineage: dict[str, Any] | None = None, gradient_checkpointing: bool = False) -> None:
        super().__init__()
        self.processor = processor
        self.lineage = dict(lineage) if lineage else None
        # lazy: peft
        from peft import PeftModel

        if full_finetune:
            freeze_vision = bool((lora or {}).get("freeze_vision", True))
            for n, p in model.named_parameters():
                p.requires_grad_(not (freeze_vision and ".visual." in f".{n}"))
            self.model = model
        elif isinstance(model, PeftModel):
            for n, p in model.named_parameters():
                p.requires_grad_("lora_" in n)
            self.model = model
        else:
            self.model = apply_lora(model, **dict(lora or {}))
        if gradient_checkpointing:
            enable_gradient_checkpointing(self.model)
        # from_pretrained returns a model in eval mode; Lightning keeps module modes as it finds them, so LoRA
        # dropout would silently stay off
        self.model.train()
        self.optimizer_factory = optimizer or partial(torch.optim.AdamW, lr=1e-4)
        self.warmup_ratio = warmup_ratio
        self.history: list[dict[str, float]] = []
        trainable, total = count_parameters(self.model)
        self.trainable_parameters = trainable
        self.total_parameters = total

    def forward(self, **batch: torch.Tensor) -> Any:
        return self.model(**batch)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A resumed run continues the history and the random streams of the interrupted one: every rank's (each
        draws its own dropout and samples), gathered into the one file rank 0 writes."""
        checkpoint["vase_history"] = list(self.history)
        checkpoint["vase_rng"] = rng_state()
        if torch.distributed.is_available() and torch.distributed.is_initialized() and \
                torch.distributed.get_world_size() > 1:
            states: list[Any] = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(states, checkpoint["vase_rng"])  # every rank saves (a collective)
            checkpoint["vase_rng_per_rank"] = states

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.history = list(checkpoint.get("vase_history", []))
        per_rank = checkpoint.get("vase_rng_per_rank")
        rank = self.trainer.global_rank if self._trainer is not None else 0
        if per_rank and len(per_rank) > rank and (self._trainer is None or len(per_rank) == self.trainer.world_size):
            set_rng_state(per_rank[rank])
        elif "vase_rng" in checkpoint:
            set_rng_state(checkpoint["vase_rng"])

    def total_optimizer_steps(self) -> int:
        """Optimizer steps of the whole run, for the schedule."""
        return max(1, int(self.trainer.estimated_stepping_batches)) if self.trainer is not None else 1

    def configure_optimizers(self) -> Any:
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("no trainable parameters: check stage.module.lora.target_modules")
        opt = self.optimizer_factory(params)
        total = self.total_optimizer_steps()
        warmup = int(round(self.warmup_ratio * total))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, partial(warmup_cosine, total=total, warmup=warmup))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class SFTModule(LoRAStageModule):
    """LoRA SFT of a Qwen2.5-VL model. Loss: token cross-entropy on the answer only (labels -100 elsewhere)."""

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        out = self.model(**batch)
        loss = out.loss
        if not torch.isfinite(loss):
            raise FloatingPointError(f"train/loss is {loss.item()} at step {self.global_step}; lower stage.module.optimizer.lr")
        n_tokens = int((batch["labels"] != -100).sum())
        bs = batch["input_ids"].shape[0]
        self.log("train/loss", loss, prog_bar=True, on_step=True, batch_size=bs)
        self.log("train/answer_tokens", float(n_tokens), on_step=True, batch_size=bs)
        if self.trainer is not None and self.trainer.optimizers:
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], on_step=True, batch_size=bs)
        self.history.append({"step": float(self.global_step), "loss": float(loss.detach())})
        return loss
