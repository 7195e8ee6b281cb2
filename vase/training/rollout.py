"""Rollout engines: how GRPO samples ``G`` completions per prompt (``stage.module.rollout``).

Every engine prefills each prompt once (images included), repeats its KV cache ``G`` times and decodes all ``B * G``
rows together; they differ in how one decode step runs:

- ``eager`` (the default): a growing ``DynamicCache`` and attention mask, one Python-level model call per token. On a
  GPU this is launch-bound (about 30 ms a token on the 3B, whatever the batch).
- ``static``: a preallocated ``StaticCache`` and a fixed-length attention mask, so every decode step has the same
  shapes (its capacity rounds up to ``bucket`` tokens, so prompts of similar length reuse it).
- ``compiled``: ``static`` with the decode step compiled by ``torch.compile``; on a GPU in ``reduce-overhead`` mode,
  so one step replays as one CUDA graph. The first rollout pays the compilation (tens of seconds).

The sampling loop (temperature, top-p, suppressed ids, the minimum length, stopping) is one function for all, so with
greedy decoding the engines give the same tokens (tests/test_rollout.py checks it token for token).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from vase.choices import ROLLOUT_ENGINES
from vase.models.token_sampling import sample_from, warp


def core_model(model: Any) -> Any:
    """The Qwen2_5_VLModel inside a (peft-wrapped) conditional-generation model; it holds the rope deltas."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model


def _positions(attn: torch.Tensor, deltas: torch.Tensor) -> torch.Tensor:
    """The 3D rope positions of the next token of each row: its count of real tokens so far, offset by the prompt's
    image positions."""
    n = attn.shape[0]
    return (attn.sum(1, keepdim=True) - 1 + deltas).unsqueeze(0).expand(3, n, 1)


class EagerDecoder:
    """Today's decoding: a dynamic cache and a mask that grow by one token a step."""

    name = "eager"
    repeat_cache = True  # the prefill's cache becomes B * g rows (the static engine copies it into its own instead)

    def prefill(self, model: Any, inputs: dict[str, torch.Tensor], g: int, max_new_tokens: int) -> torch.Tensor:
        """Prefill each prompt once, repeat its state ``g`` times; returns the first token's logits (B * g, V)."""
        # lazy: transformers
        from transformers import DynamicCache

        out = model(**inputs, cache=DynamicCache(), use_cache=True, logits_to_keep=1)
        self.model = model
        self.cache = out.cache
        if self.repeat_cache:
            self.cache.batch_repeat_interleave(g)
        self.deltas = core_model(model).rope_deltas.repeat_interleave(g, 0)  # (B*g, 1): 3D position offset of each prompt
        self.attn = inputs["attention_mask"].repeat_interleave(g, 0)
        return out.logits[:, -1].float().repeat_interleave(g, 0)

    def step(self, nxt: torch.Tensor) -> torch.Tensor:
        """Feed the sampled tokens (B * g,); returns the next logits."""
        self.attn = torch.cat([self.attn, torch.ones_like(self.attn[:, :1])], dim=1)  # finished rows see pads too
        out = self.model(input_ids=nxt.unsqueeze(1), attention_mask=self.attn,
                         position_ids=_positions(self.attn, self.deltas), cache=self.cache, use_cache=True)
        self.cache = out.cache
        return out.logits[:, -1].float()

    def release(self) -> None:
        """Drop the rollout's cache (the memory goes back before the policy's forward and backward)."""
        self.cache = self.model = None


class StaticDecoder(EagerDecoder):
    """Decoding over a preallocated static cache with a fixed-length mask; ``compile`` compiles the step.

    The cache and the compiled step are kept between rollouts: a rollout of the same batch size whose prompt and
    completion fit the capacity reuses them (no recompilation); a larger one reallocates (and recompiles).
    """

    repeat_cache = False

    def __init__(self, compile: bool = False, bucket: int = 64, mode: str | None = None) -> None:
        self.name = "compiled" if compile else "static"
        self.compile = compile
        self.bucket = int(bucket)
        self.mode = mode
        self._key: tuple[Any, ...] | None = None
        self._static: Any = None
        self._step: Any = None

    def _allocate(self, model: Any, dynamic: Any, n: int, capacity: int) -> None:
        # lazy: transformers
        from transformers import StaticCache

        self._static = StaticCache(config=model.config, max_cache_len=capacity)
        for layer, filled in zip(self._static.layers, dynamic.layers, strict=True):
            # it takes the batch size, heads, dtype and device from these (views of n rows, nothing copied)
            layer.lazy_initialization(filled.keys[:1, :, :1].expand(n, -1, -1, -1),
                                      filled.values[:1, :, :1].expand(n, -1, -1, -1))
        self._mask = torch.zeros((n, capacity), dtype=torch.long, device=dynamic.layers[0].keys.device)
        step = self._forward
        if self.compile:
            mode = self.mode or ("reduce-overhead" if self._mask.is_cuda else None)  # CUDA graphs where there is CUDA
            step = torch.compile(step, mode=mode, dynamic=False)
        self._step = step

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=self._static,
                         use_cache=True)
        return out.logits[:, -1].float()

    def prefill(self, model: Any, inputs: dict[str, torch.Tensor], g: int, max_new_tokens: int) -> torch.Tensor:
        logits = super().prefill(model, inputs, g, max_new_tokens)
        dynamic, attn = self.cache, inputs["attention_mask"]
        b, length = attn.shape
        n = b * g
        capacity = self.bucket * math.ceil((length + max_new_tokens) / self.bucket)
        keys = dynamic.layers[0].keys
        key = (id(model), n, keys.dtype, keys.device)
        if self._key != key or capacity > self._mask.shape[1]:  # first use, another model or batch size, or too small
            self._allocate(model, dynamic, n, capacity)
            self._key = key
        for layer, filled in zip(self._static.layers, dynamic.layers, strict=True):
            for mine, theirs in ((layer.keys, filled.keys), (layer.values, filled.values)):
                # each prompt's rows, g times over, copied straight from the prefill (no repeated copy in between)
                mine.view(b, g, *mine.shape[1:])[:, :, :, :length].copy_(theirs.unsqueeze(1))
            layer.cumulative_length.fill_(length)  # the next token goes right after the prompt
        self._mask.zero_()  # what the last rollout left beyond the prompt is masked out until overwritten
        self._mask[:, :length] = attn.repeat_interleave(g, 0)
        self.length = length
        self.cache = None  # the prefill's own cache is not needed any more
        return logits

    def step(self, nxt: torch.Tensor) -> torch.Tensor:
        self._mask[:, self.length] = 1
        self.length += 1
        # a compiled step's output lives in the graph's memory, overwritten by the next replay: keep a copy
        return self._step(nxt.unsqueeze(1), self._mask, _positions(self._mask, self.deltas)).clone()

    def release(self) -> None:
        self.model = None  # the static cache stays for the next rollout: its addresses are what the graph replays


def make_decoder(rollout: str = "eager") -> EagerDecoder:
    """The engine ``stage.module.rollout`` names."""
    if rollout == "eager":
        return EagerDecoder()
    if rollout in ("static", "compiled"):
        return StaticDecoder(compile=rollout == "compiled")
    raise ValueError(f"stage.module.rollout={rollout!r} must be one of {list(ROLLOUT_ENGINES)}")


@torch.no_grad()
def sample_groups(model: Any, inputs: dict[str, torch.Tensor], g: int, *, max_new_tokens: int, eos_ids: list[int],
                  pad_id: int, temperature: float = 1.0, top_p: float = 1.0, min_new_tokens: int = 0,
                  suppress_ids: list[int] | None = None, greedy: bool = False,
                  decoder: EagerDecoder | None = None) -> torch.Tensor:
    """``g`` completions per prompt, sharing each prompt's prefill.

    ``generate`` on a batch with every prompt repeated ``g`` times encodes the images and prefills the prompt ``g``
    times over. Here each prompt (images included) is prefilled once, its KV cache and 3D-position offsets are
    repeated ``g`` times, and only the decoding runs on all ``B * g`` rows (through ``decoder``: eager unless given).
    Returns completion ids (B * g, T), padded with ``pad_id`` after each row's end-of-sequence token; rows are grouped
    by prompt, as ``repeat_batch``.
    """
    decoder = decoder if decoder is not None else EagerDecoder()
    logits = decoder.prefill(model, inputs, g, max_new_tokens)
    n = logits.shape[0]
    device = logits.device
    done = torch.zeros(n, dtype=torch.bool, device=device)
    eos = torch.tensor(eos_ids, device=device)
    banned = torch.tensor(sorted(set(suppress_ids or [])), dtype=torch.long, device=device)
    tokens = []
    try:
        for t in range(max_new_tokens):
            if len(banned):
                logits[:, banned] = float("-inf")
            if t < min_new_tokens:
                logits[:, eos] = float("-inf")
            if greedy:
                nxt = logits.argmax(-1)
            else:  # inverse CDF (vase.models.token_sampling): a multinomial over the vocabulary cost twice the model step
                nxt = sample_from(warp(logits, temperature, 0, top_p))
            nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
            tokens.append(nxt)
            done |= torch.isin(nxt, eos)
            if bool(done.all()) or t == max_new_tokens - 1:
                break
            logits = decoder.step(nxt)
    finally:
        decoder.release()
    return torch.stack(tokens, dim=1)
