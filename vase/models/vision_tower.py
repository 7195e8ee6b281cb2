"""Qwen2.5-VL's vision tower with less overhead on the CPU, the same bits (`fast_vision_tower`).

Two costs of transformers' vision tower that are overhead, not arithmetic, on a small model:

- **One attention call per window.** With ``attn_implementation: sdpa`` each window is its own call: the tiny
  model's window block cuts each 112-pixel view into 4 windows of 16 patches and its full block attends within each
  view, so an SFT batch of 8 vases x 6 views makes 240 calls forward and as many backward, each a few microseconds of
  arithmetic behind tens of overhead. When every window of a call has the same length (every view the same size, as
  vase's renders are) and the tensors are on the CPU, `EqualWindowsAttention` stacks them into one batched call: the
  same kernel on the same numbers for each window. 48 views' forward and backward 0.046 -> 0.030 s on 2 cores.
- **The index tensors, rebuilt every forward.** The patches' rotary positions, the window order and the windows'
  and views' boundaries depend only on the views' grids, but transformers builds them with a Python loop over the
  views on every call. `GridMemoVisionTower` builds them once per distinct set of grids (the last
  `GRID_MEMO_SIZE`) and hands them in through the arguments transformers takes precomputed ones by.

Outputs and gradients are equal to the bit (tests/test_vision_tower.py), and so are the SFT's and GRPO's histories.
Anywhere else (windows of several lengths, a GPU, eager or flash attention, precomputed indices passed in) each runs
transformers' own code unchanged.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any

GRID_MEMO_SIZE = 32
"""How many distinct sets of grids a vision tower keeps the index tensors of (a training run has one or a few)."""
PRECOMPUTED = ("position_ids", "window_index", "cu_window_seqlens", "cu_seqlens")
"""The vision tower's arguments that transformers takes precomputed (its vision_utils' ``kwargs.pop``)."""


@functools.cache
def vision_classes() -> tuple[type, type]:
    """(`EqualWindowsAttention`, `GridMemoVisionTower`), built on first use (transformers loads only then)."""
    # lazy: transformers
    from transformers import vision_utils
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen

    class EqualWindowsAttention(qwen.Qwen2_5_VLVisionAttention):
        """Qwen2.5-VL's vision attention, one sdpa call for equal windows on the CPU (the module's docstring)."""

        def forward(self, hidden_states: Any, cu_seqlens: Any, position_embeddings: Any = None,
                    max_seqlen: int | None = None, **kwargs: Any) -> Any:
            lengths = cu_seqlens[1:] - cu_seqlens[:-1]
            if (hidden_states.device.type != "cpu" or self.config._attn_implementation != "sdpa"
                    or position_embeddings is None or len(lengths) < 2 or bool((lengths != lengths[0]).any())):
                return super().forward(hidden_states, cu_seqlens, position_embeddings, max_seqlen, **kwargs)
            seq, length = hidden_states.shape[0], int(lengths[0])
            q, k, v = self.qkv(hidden_states).reshape(seq, 3, self.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
            cos, sin = position_embeddings
            q, k = qwen.apply_rotary_pos_emb_vision(q, k, cos, sin)
            # (patches, heads, dim) -> (windows, heads, window length, dim): each window its own batch row
            q, k, v = (t.reshape(seq // length, length, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
            attend = qwen.ALL_ATTENTION_FUNCTIONS["sdpa"]
            out = attend(self, q, k, v, attention_mask=None, scaling=self.scaling,
                         dropout=0.0 if not self.training else self.attention_dropout, is_causal=False, **kwargs)[0]
            return self.proj(out.reshape(seq, -1).contiguous())  # (windows, length, heads, dim): the windows in order

    class GridMemoVisionTower(qwen.Qwen2_5_VisionTransformerPretrainedModel):
        """Qwen2.5-VL's vision tower, its index tensors built once per set of grids on the CPU (the module's
        docstring)."""

        def forward(self, hidden_states: Any, grid_thw: Any, **kwargs: Any) -> Any:
            if grid_thw.device.type == "cpu" and not any(k in kwargs for k in PRECOMPUTED):
                kwargs.update(self._indices(grid_thw))
            return super().forward(hidden_states, grid_thw, **kwargs)

        def _indices(self, grid_thw: Any) -> dict[str, Any]:
            memo = self.__dict__.setdefault("_vase_grid_memo", OrderedDict())
            key = tuple(grid_thw.flatten().tolist())
            if key in memo:
                memo.move_to_end(key)
                return dict(memo[key])
            window_index, cu_window_seqlens = vision_utils.get_vision_window_index(
                grid_thw, spatial_merge_size=self.spatial_merge_size, window_size=self.window_size,
                patch_size=self.patch_size)
            memo[key] = {"position_ids": vision_utils.get_vision_position_ids(grid_thw, self.spatial_merge_size),
                         "window_index": window_index, "cu_window_seqlens": cu_window_seqlens,
                         "cu_seqlens": vision_utils.get_vision_cu_seqlens(grid_thw)}
            while len(memo) > GRID_MEMO_SIZE:
                memo.popitem(last=False)
            return dict(memo[key])

    return EqualWindowsAttention, GridMemoVisionTower


def fast_vision_tower(model: Any, fast: bool = True) -> int:
    """Make ``model``'s Qwen2.5-VL vision tower a `GridMemoVisionTower` and its attention modules
    `EqualWindowsAttention` (the same weights and modules; only their classes change); ``fast=False`` gives them
    transformers' own classes back (what a comparison measures against). Returns how many modules it changed."""
    swap = {cls.__bases__[0]: cls for cls in vision_classes()}
    if not fast:
        swap = {mine: theirs for theirs, mine in swap.items()}
    changed = 0
    for module in model.modules():
        if type(module) in swap:
            module.__class__ = swap[type(module)]
            changed += 1
    return changed
