"""Log-probabilities of chosen tokens without a full-vocabulary log-softmax copy.

``log_softmax(logits / T).gather(targets)`` materialises two (N, L, V) float tensors beside the logits and keeps one
for the backward pass: with Qwen's 151,936-row vocabulary, 4 completions of 257 tokens are 625 MB a copy. Here the
forward pass walks the rows in chunks and keeps only the logits (which the model's output holds anyway) and one
log-sum-exp per token; the backward pass recomputes each chunk's softmax to write the gradient.
"""

from __future__ import annotations

from typing import Any

import torch


def _blocks(shape: torch.Size, rows: int) -> list[tuple[int, slice]]:
    """(sequence, positions) blocks of at most ``rows`` positions. Each block of a (N, T, V) tensor is contiguous even
    when the tensor is a slice along T (``logits[:, :-1]``), where a reshape to (N * T, V) would copy all of it."""
    return [(i, slice(s, s + rows)) for i in range(shape[0]) for s in range(0, shape[1], rows)]


def _logprob_grad_(x: torch.Tensor, lse: torch.Tensor, targets: torch.Tensor, g: torch.Tensor, t: float
                   ) -> torch.Tensor:
    """In place on ``x`` (a chunk's float32 logits, before the temperature): the gradient of its selected
    log-probabilities, d/dx_j [x_y - logsumexp(x)] = [j == y] - softmax(x)_j, times the upstream ``g``, over ``t``."""
    if t != 1.0:
        x.div_(t)
    x.sub_(lse[..., None]).exp_().mul_(-g[..., None])
    x.scatter_add_(-1, targets[..., None], g[..., None])
    if t != 1.0:
        x.div_(t)
    return x


class _SelectedLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor, temperature: float, rows: int
                ) -> torch.Tensor:
        lse = torch.empty(targets.shape, dtype=torch.float32, device=logits.device)
        out = torch.empty_like(lse)
        for i, s in _blocks(logits.shape, rows):
            x = logits[i, s].float()
            if temperature != 1.0:
                x = x / temperature
            lse[i, s] = torch.logsumexp(x, dim=-1)
            out[i, s] = x.gather(1, targets[i, s, None]).squeeze(1) - lse[i, s]
        ctx.save_for_backward(logits, targets, lse)
        ctx.temperature, ctx.rows = temperature, rows
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        logits, targets, lse = ctx.saved_tensors
        t, rows = ctx.temperature, ctx.rows
        g = grad_out.float()
        grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        for i, s in _blocks(logits.shape, rows):
            grad[i, s] = _logprob_grad_(logits[i, s].to(torch.float32, copy=True), lse[i, s], targets[i, s], g[i, s], t)
        return grad, None, None, None


def selected_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0,
                      rows: int = 256) -> torch.Tensor:
    """``log_softmax(logits / temperature, -1)`` at ``targets`` (shape of ``targets``; float32), differentiable in
    ``logits`` (N, L, V), computed ``rows`` token positions at a time so that no (N, L, V) copy is made.

    >>> x = torch.randn(2, 3, 11); y = torch.randint(0, 11, (2, 3))
    >>> ref = torch.log_softmax(x / 0.7, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    >>> bool(torch.allclose(selected_logprobs(x, y, 0.7, rows=2), ref, atol=1e-6))
    True
    """
    return _SelectedLogprobs.apply(logits, targets, float(temperature), int(rows))


HEAD_CHUNK_ELEMENTS = 1 << 23
"""Logits one chunk of `head_logprobs` may hold: 8 M floats (32 MiB in float32), whatever the batch and vocabulary
(55 tokens at Qwen's 151,936 rows). Smaller than the 128 MiB it was: each chunk's logits are
written, reduced and rewritten while they are still in the processor's cache. With one matrix product per chunk and
the log-sum-exp in place, GRPO's reference phase went from 1.16 to 0.49 s a step at 256 tokens on 2 cores
(`benchmarks/grpo_phases.py --against 36c1504`, benchmarks/RESULTS.md)."""


def _logsumexp_(x: torch.Tensor) -> torch.Tensor:
    """``torch.logsumexp(x, -1)`` computed in place (``x`` is overwritten with ``exp(x - max)``): no (rows, V)
    temporaries, one read-modify-write pass and one reduction over a chunk that is still in cache. Rows whose maximum
    is not finite (all ``-inf``) are shifted by 0 instead, as torch's own logsumexp does."""
    m = x.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return x.sub_(m).exp_().sum(-1).log_().add_(m.squeeze(-1))


def _head_chunk(hidden: torch.Tensor, targets: torch.Tensor, head: Any, temperature: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk's selected log-probabilities and log-sum-exps, its logits overwritten (`_logsumexp_`) and freed on
    return."""
    x = head(hidden).float()
    if temperature != 1.0:
        x = x.div_(temperature)  # no graph here (a forward without gradients): in place
    picked = x.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    lse = _logsumexp_(x)
    return picked - lse, lse


class _HeadLogprobs(torch.autograd.Function):
    """`head_logprobs` with gradients, on (T, H) hidden states and (T,) targets: the forward pass keeps one
    log-sum-exp per token; the backward pass recomputes each chunk's logits once, with the head's graph, turns them in
    place into the gradient of the selected log-probabilities ((one-hot - softmax) x upstream / temperature) and hands
    that to the head's own backward, which writes the hidden states' and the head's parameters' gradients (a LoRA
    head's, a ``modules_to_save`` head's)."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, targets: torch.Tensor, temperature: float, rows: int, head: Any,
                *params: torch.Tensor) -> torch.Tensor:
        out = torch.empty(targets.shape, dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(out)
        with torch.no_grad():
            for s in range(0, targets.shape[0], rows):
                out[s:s + rows], lse[s:s + rows] = _head_chunk(hidden[s:s + rows], targets[s:s + rows], head,
                                                               temperature)
        ctx.save_for_backward(hidden, targets, lse)
        ctx.temperature, ctx.rows, ctx.head, ctx.params = temperature, rows, head, params
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        hidden, targets, lse = ctx.saved_tensors
        t, rows, head, params = ctx.temperature, ctx.rows, ctx.head, list(ctx.params)
        need_h = ctx.needs_input_grad[0]
        g = grad_out.float()
        grad_h = torch.zeros_like(hidden) if need_h else None
        grad_p: list[torch.Tensor | None] = [None] * len(params)
        for s in range(0, targets.shape[0], rows):
            h = hidden[s:s + rows].detach().requires_grad_(need_h)
            with torch.enable_grad():
                x = head(h)
            # in place on the logits themselves (a float32 head): no backward of a linear layer reads its output, and
            # autograd's version counter would refuse the step if one did
            p = _logprob_grad_(x.detach().float(), lse[s:s + rows], targets[s:s + rows], g[s:s + rows], t)
            inputs = ([h] if need_h else []) + params
            grads = torch.autograd.grad(x, inputs, grad_outputs=p.to(x.dtype), allow_unused=True)
            if need_h:
                grad_h[s:s + rows] = grads[0]
                grads = grads[1:]
            for i, gp in enumerate(grads):
                if gp is not None:
                    grad_p[i] = gp if grad_p[i] is None else grad_p[i].add_(gp)
        return (grad_h, None, None, None, None, *grad_p)


def _vocab_size(head: Any) -> int | None:
    weight = getattr(head, "weight", None)
    return int(weight.shape[0]) if isinstance(weight, torch.Tensor) and weight.dim() == 2 else None


def head_logprobs(hidden: torch.Tensor, head: Any, targets: torch.Tensor, temperature: float = 1.0,
                  rows: int | None = None) -> torch.Tensor:
    """``log_softmax(head(hidden) / temperature, -1)`` at ``targets`` (N, L; float32), with the output head inside the
    chunks: ``rows`` tokens at a time (the (N, L) tokens taken as one list, so each chunk's hidden states are one
    contiguous block and its head one matrix product; by default as many as `HEAD_CHUNK_ELEMENTS` allows), each
    chunk's logits computed, reduced to one number per token and freed. With gradients on (`_HeadLogprobs`), the
    backward pass recomputes each chunk's logits once, so neither pass ever holds the (N, L, V) logits (1.2 GiB for 8
    completions of 257 tokens at Qwen's vocabulary). ``head`` is any module (a LoRA-wrapped or ``modules_to_save``
    head too): its parameters get their gradients through its own backward.

    >>> head = torch.nn.Linear(4, 11, bias=False); h = torch.randn(2, 3, 4); y = torch.randint(0, 11, (2, 3))
    >>> ref = torch.log_softmax(head(h) / 0.7, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    >>> bool(torch.allclose(head_logprobs(h, head, y, 0.7, rows=2), ref, atol=1e-6))
    True
    """
    n, length = targets.shape
    if rows is None:
        vocab = _vocab_size(head) or 152064
        rows = max(1, HEAD_CHUNK_ELEMENTS // vocab)
    # one list of tokens: a (N, L) slice of the model's hidden states (its last positions) is copied once here, not
    # once per chunk (a slice along L of every sequence made the head a batched product of N thin ones)
    flat, flat_targets = hidden.reshape(n * length, hidden.shape[-1]), targets.reshape(n * length)
    params = [p for p in head.parameters() if p.requires_grad]
    if torch.is_grad_enabled() and (hidden.requires_grad or params):
        out = _HeadLogprobs.apply(flat, flat_targets, float(temperature), int(rows), head, *params)
        return out.view(n, length)
    with torch.no_grad():
        return torch.cat([_head_chunk(flat[s:s + rows], flat_targets[s:s + rows], head, float(temperature))[0]
                          for s in range(0, n * length, rows)]).view(n, length)
