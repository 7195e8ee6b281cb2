"""The vision tower's attention as one call for a batch of equal windows, on the CPU.

transformers' Qwen2.5-VL vision attention, with ``attn_implementation: sdpa``, runs one attention call per window:
the tiny model's window block cuts each 112-pixel view into 4 windows of 16 patches and its full block attends
within each view, so an SFT batch of 8 vases x 6 views makes 240 calls forward and as many backward, each a few
microseconds of arithmetic behind tens of overhead. When every window of a call has the same length (every view the
same size, as vase's renders are) and the tensors are on the CPU, `EqualWindowsAttention` stacks them into one
batched call: the same kernel on the same numbers for each window, so its outputs and gradients are equal to the bit
(tests/test_vision_attention.py); 48 views' forward and backward 0.046 -> 0.030 s on 2 cores (2026-12-06). Anywhere
else (windows of several lengths, a GPU, eager or flash attention) it runs transformers' own forward unchanged.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def equal_windows_class() -> type:
    """`EqualWindowsAttention`, built on first use (transformers loads only then)."""
    # lazy: transformers
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

    return EqualWindowsAttention


def batch_equal_windows(model: Any) -> int:
    """Make every Qwen2.5-VL vision attention module of ``model`` an `EqualWindowsAttention` (same weights, same
    module; only its class changes). Returns how many it changed."""
    cls = equal_windows_class()
    base = cls.__bases__[0]
    changed = 0
    for module in model.modules():
        if type(module) is base:
            module.__class__ = cls
            changed += 1
    return changed
