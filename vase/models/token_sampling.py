"""How vase draws a token from a distribution over the vocabulary: by inverse CDF in float64, on every sampling path.

``torch.multinomial`` over Qwen2.5-VL's 151,936 columns took 124 ms a decoded token on 2 CPU cores (2026-11-28),
twice the model's own step; one cumulative sum in float64 and a binary search take a fraction of it and draw from
the same distribution (tests/test_sampling.py checks both against the exact probabilities and against
``multinomial``'s draws). The GRPO rollout (`vase.training.rollout.sample_groups`, eager, static and compiled alike)
and sampled evaluation (`SamplingProcessor` inside ``generate``) both draw here, so one seed means one sampler.
"""

from __future__ import annotations

from typing import Any

import torch


def sample_from(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One index per row of ``probs`` (N, V; non-negative, any positive total), drawn with probability proportional
    to its entry: a uniform draw scaled to the row's total, found in the row's cumulative sum (float64: in float32 the
    running sum of a 151,936-column row rounds each small entry's width by about 1 %). An entry of 0 is never drawn.

    >>> sample_from(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]])).tolist()
    [1, 2]
    """
    cdf = probs.to(torch.float64).cumsum(dim=-1)
    total = cdf[:, -1:]
    u = torch.rand(probs.shape[0], 1, dtype=torch.float64, device=probs.device, generator=generator) * total
    idx = torch.searchsorted(cdf, u, right=True)
    # u < total in exact arithmetic; where rounding lands on the total, the last entry with any mass (never a 0)
    last = (cdf < total).sum(dim=-1, keepdim=True)
    return torch.minimum(idx, last).squeeze(1)


def warp(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """The probabilities to draw from: ``softmax(logits / temperature)``, cut to the ``top_k`` most likely (0: no
    cut) and to the smallest set whose mass reaches ``top_p`` (1.0: no cut), as transformers' warpers do, not
    renormalised (`sample_from` scales to the total).

    >>> warp(torch.tensor([[0.0, 0.0, 10.0]]), top_k=1).tolist()
    [[0.0, 0.0, 0.9999...]]
    """
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_k and 0 < top_k < probs.shape[-1]:
        kth = probs.topk(top_k, dim=-1).values[:, -1:]
        probs = probs.masked_fill(probs < kth, 0.0)
    if top_p < 1.0:  # of what top-k left, as transformers does (its top-p warper sees the cut logits)
        probs = probs / probs.sum(dim=-1, keepdim=True)
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > top_p  # keep the smallest prefix whose mass reaches top_p
        probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p.masked_fill(drop, 0.0))
    return probs


class SamplingProcessor:
    """A transformers ``LogitsProcessor`` that samples: it draws each row's next token with `warp` and `sample_from`
    and returns scores with only that token left, so ``generate`` run greedy (``do_sample=False``) emits vase's draw.
    Transformers' own warpers stay neutral (temperature 1, no cut) and its processors that come before (a repetition
    penalty) still apply first."""

    def __init__(self, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> None:
        self.temperature, self.top_k, self.top_p = float(temperature), int(top_k), float(top_p)

    def __call__(self, input_ids: Any, scores: torch.Tensor) -> torch.Tensor:
        nxt = sample_from(warp(scores, self.temperature, self.top_k, self.top_p))
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, nxt.unsqueeze(1), 0.0)
