"""The vision tower with less overhead on the CPU (`vase.models.vision_tower`): equal windows in one attention call
and the index tensors built once per set of grids, with the same bits as transformers' own code, forward and
backward, and transformers' own path where windows differ."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vase.models.loading import load_model
from vase.models.vision_tower import fast_vision_tower, vision_classes


def _attention_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counted(q: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        calls.append(q.shape[0])
        return sdpa(q, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    return calls


def _forward_backward(model, pixels: torch.Tensor, grid: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    visual = model.model.visual
    visual.zero_grad(set_to_none=True)
    out = visual(pixels, grid_thw=grid)
    out = out.pooler_output if hasattr(out, "pooler_output") else out
    out.pow(2).sum().backward()
    return out.detach().clone(), [p.grad.clone() for p in visual.parameters() if p.grad is not None]


@pytest.mark.parametrize("sizes", [[(8, 8)] * 12, [(8, 8), (4, 8), (8, 8)]], ids=["equal views", "views of two sizes"])
def test_the_fast_vision_tower_computes_the_same_bits(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                      sizes: list[tuple[int, int]]) -> None:
    torch.manual_seed(0)
    model = load_model(str(tiny_model_dir))  # the classes vase loads every Qwen2.5-VL with
    cfg = model.model.visual.config
    attention, tower = vision_classes()
    assert sum(type(m) is attention for m in model.modules()) == cfg.depth
    assert type(model.model.visual) is tower
    grid = torch.tensor([[1, h, w] for h, w in sizes])
    pixels = torch.randn(int(grid.prod(-1).sum()), 3 * cfg.temporal_patch_size * cfg.patch_size ** 2)
    calls = _attention_calls(monkeypatch)
    fast = [_forward_backward(model, pixels, grid) for _ in range(2)]  # the second from the grids' memo
    fast_calls = list(calls)
    calls.clear()
    assert fast_vision_tower(model, fast=False) == cfg.depth + 1  # transformers' own classes again
    plain = _forward_backward(model, pixels, grid)
    for got in fast:
        assert torch.equal(got[0], plain[0])
        assert len(got[1]) == len(plain[1]) > 0 and all(torch.equal(a, b) for a, b in zip(got[1], plain[1]))
    if len(set(sizes)) == 1:  # each block one call of every window: 12 views x 4 windows, then 12 whole views
        assert fast_calls == [12 * 4, 12] * 2 and len(calls) == 12 * 4 + 12
    else:  # the window block's windows are all 16 patches (one call); the full block's views differ: one call each
        assert fast_calls == [4 + 2 + 4, 1, 1, 1] * 2 and len(calls) == 10 + 3


def test_the_grid_memo_is_bounded_and_keyed_by_the_grids(tiny_model_dir: Path) -> None:
    from vase.models.vision_tower import GRID_MEMO_SIZE

    visual = load_model(str(tiny_model_dir)).model.visual
    cfg = visual.config
    width = 3 * cfg.temporal_patch_size * cfg.patch_size ** 2
    with torch.no_grad():
        for n in range(1, GRID_MEMO_SIZE + 3):
            visual(torch.randn(n * 64, width), grid_thw=torch.tensor([[1, 8, 8]] * n))
    memo = visual.__dict__["_vase_grid_memo"]
    assert len(memo) == GRID_MEMO_SIZE and (1, 8, 8) not in memo  # the oldest went first
    assert len(memo[(1, 8, 8) * (GRID_MEMO_SIZE + 2)]["window_index"]) == (GRID_MEMO_SIZE + 2) * 16
