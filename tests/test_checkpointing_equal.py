"""Activation checkpointing (stage.module.gradient_checkpointing) changes memory, never the numbers: the loss and
every LoRA gradient equal those without it, for SFT and for GRPO, on the tiny model."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.test_grpo import LengthReward


def _pair(make):
    """The same module built twice from the same seed, without and with checkpointing."""
    out = []
    for ckpt in (False, True):
        torch.manual_seed(0)
        out.append(make(ckpt))
    return out


def _grads(module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in module.model.named_parameters() if p.grad is not None}


def _assert_same(a: torch.Tensor, b: torch.Tensor, ga: dict, gb: dict) -> None:
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), (a, b)
    assert ga.keys() == gb.keys() and ga and all("lora_" in n for n in ga)
    for n in ga:
        assert torch.allclose(ga[n], gb[n], atol=1e-5, rtol=1e-4), n


def test_sft_loss_and_lora_gradients_equal_with_checkpointing(tiny_model_dir: Path, synthetic_root: Path) -> None:
    from vase.data.datamodule import ChatDataset, SFTCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor
    from vase.training.sft import SFTModule

    proc = load_processor(str(tiny_model_dir))
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "freeze_vision": False}
    plain, ckpt = _pair(lambda on: SFTModule(load_model(str(tiny_model_dir)), lora=lora, processor=proc,
                                             gradient_checkpointing=on))
    assert ckpt.model.is_gradient_checkpointing and not plain.model.is_gradient_checkpointing
    for m in (plain, ckpt):  # LoRA B starts at 0: move it, so that every LoRA weight has a gradient to compare
        with torch.no_grad():
            torch.manual_seed(1)
            for n, p in m.model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.02)
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    batch = SFTCollator(proc, 2048)([ds[0], ds[1]])
    losses, calls = [], []
    for m in (plain, ckpt):
        layer = next(mod for n, mod in m.model.named_modules() if n.endswith("language_model.layers.0"))
        count: list[int] = []
        if layer.gradient_checkpointing:  # count the checkpointed calls: proof it is on in training, not only set
            inner = layer._gradient_checkpointing_func
            layer._gradient_checkpointing_func = lambda *a, _c=count, _f=inner, **k: _c.append(1) or _f(*a, **k)
        loss = m.model(**batch).loss
        loss.backward()
        losses.append(loss.detach())
        calls.append(len(count))
    assert calls == [0, 1]
    _assert_same(losses[0], losses[1], _grads(plain), _grads(ckpt))


def test_grpo_loss_and_lora_gradients_equal_with_checkpointing(tiny_model_dir: Path, synthetic_root: Path) -> None:
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import GRPOModule, grpo_loss

    proc = load_processor(str(tiny_model_dir))
    plain, ckpt = _pair(lambda on: GRPOModule(
        load_model(str(tiny_model_dir)), LengthReward(), proc, lora={"r": 4, "alpha": 8, "dropout": 0.0},
        num_generations=4, max_completion_length=8, beta=0.04, gradient_checkpointing=on))
    assert ckpt.model.is_gradient_checkpointing and not plain.model.is_gradient_checkpointing
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    batch = PromptCollator(proc)([ds[0], ds[1]])
    torch.manual_seed(2)
    r = plain.rollout(batch)  # one rollout, scored by both policies
    losses = []
    for m in (plain, ckpt):
        m.model.train()
        logps = m._logps(m.model, r.inputs, r.completion_ids.shape[1])
        loss, _ = grpo_loss(logps, None, r.ref_logps, r.advantages, r.mask, beta=0.04, epsilon_low=0.2,
                            epsilon_high=0.2, loss_type="grpo", max_completion_length=8)
        loss.backward()
        losses.append(loss.detach())
    _assert_same(losses[0], losses[1], _grads(plain), _grads(ckpt))
