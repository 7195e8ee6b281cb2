"""LoRA with peft: which layers get adapters, which stay frozen."""

from __future__ import annotations

from typing import Any

VISION_PATTERN = r".*\bvisual\b.*"


def apply_lora(
    model: Any,
    r: int = 8,
    alpha: int = 32,
    dropout: float = 0.05,
    target_modules: str | list[str] = "all-linear",
    freeze_vision: bool = True,
    modules_to_save: list[str] | None = None,
) -> Any:
    """Wrap ``model`` in a peft LoRA model; only adapter weights (and ``modules_to_save``) train.

    ``target_modules="all-linear"`` puts adapters on every linear layer but the output head (the paper's setting);
    ``freeze_vision`` keeps the vision tower and its merger free of adapters, as the paper's SFT did.
    """
    # lazy: peft
    from peft import LoraConfig, get_peft_model

    targets = target_modules if isinstance(target_modules, str) else list(target_modules)
    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=targets,
        bias="none",
        exclude_modules=VISION_PATTERN if freeze_vision else None,
        modules_to_save=list(modules_to_save) if modules_to_save else None,
    )
    peft_model = get_peft_model(model, config)
    return peft_model


def count_parameters(model: Any) -> tuple[int, int]:
    """(trainable, total) parameter counts."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total
