"""GRPO with the six-dimension verifiable reward, as a LightningModule.

For each batch of prompts (multi-view images + instruction), the G completions of every prompt come from one batched
sampling call that prefills each prompt once and shares its KV cache across its G rows (``sample_groups``), rather
than prefilling (and encoding the images) G times as ``generate`` on repeated prompts does (``rollout`` picks the
decoding engine: eager, static cache, or compiled; ``vase.training.rollout``); each completion is
scored by the reward; advantages are normalised within the prompt's group (``scale_rewards``: group | batch | none);
the loss is the clipped surrogate (``epsilon_low``, ``epsilon_high``) plus ``beta`` times the k3 estimate of the KL
to the reference, reduced per ``loss_type`` (grpo | dr_grpo | dapo | bnpo). The reference is the same model with its
LoRA adapter disabled (no second copy in memory); only full fine-tuning keeps an explicit frozen copy.
``num_iterations`` (mu) optimises each batch of generations mu times against the stored old log-probabilities.

Optimisation is manual: rollouts of ``grad_accum`` batches are buffered, then each of the mu passes accumulates the
gradient over the buffer and takes one optimizer step.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from vase.choices import AGGREGATIONS, NEGATIVE_CONTROLS
from vase.data.datamodule import VISUAL_KEYS
from vase.loggers import kind, log_table
from vase.models.logprobs import head_logprobs
from vase.training.rollout import core_model, make_decoder, sample_groups
from vase.training.sft import LoRAStageModule


def gather_across_ranks(x: torch.Tensor) -> torch.Tensor:
    """``x`` from every process, concatenated in rank order (``x`` itself in a single process). Under DDP (gloo or
    NCCL) every rank calls this at the same point of its rollout."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts)


def group_advantages(rewards: torch.Tensor, group_size: int, scale: str = "group", eps: float = 1e-4) -> torch.Tensor:
    """(r - mean of its group) / (std + eps); std of the group, of the whole batch, or 1 (``none``).

    ``batch`` takes the standard deviation over the rewards of every process (gathered), as TRL does, so a run on
    N GPUs scales its advantages like one process holding the whole batch.
    """
    r = rewards.view(-1, group_size)
    centred = r - r.mean(dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (r.std(dim=1, keepdim=True) + eps)
    elif scale == "batch":
        centred = centred / (gather_across_ranks(rewards).std() + eps)
    elif scale != "none":
        raise ValueError(f"scale_rewards={scale!r} must be group, batch or none")
    return centred.reshape(-1)


def decoupled_advantages(per_term: torch.Tensor, weights: torch.Tensor, group_size: int,
                         eps: float = 1e-4) -> torch.Tensor:
    """GDPO's advantages (TRL's ``multi_objective_aggregation="normalize_then_sum"``): each term's rewards, an (N, K)
    matrix, normalised within their group, (r_k - group mean) / (group std + eps); the weighted sum of those; then
    normalised over the whole batch, gathered from every process, so a weight scales a unit-variance signal and
    different mixes of right and wrong terms no longer collapse onto one sum.

    >>> per_term = torch.tensor([[1., 0.], [0., 1.], [1., 1.], [0., 0.]])  # one group: two terms, four completions
    >>> a = decoupled_advantages(per_term, torch.tensor([1., 1.]), 4); [round(float(x), 3) for x in a]
    [0.0, 0.0, 1.225, -1.225]
    """
    k = per_term.shape[1]
    grouped = per_term.view(-1, group_size, k)
    z = (grouped - grouped.mean(dim=1, keepdim=True)) / (grouped.std(dim=1, keepdim=True) + eps)
    summed = (z.reshape(-1, k) * weights.to(z).unsqueeze(0)).sum(dim=1)
    everyone = gather_across_ranks(summed)
    return (summed - everyone.mean()) / (everyone.std() + eps)


def term_matrix(components: dict[str, list[float]], terms: dict[str, Any], device: Any = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The reward's terms as an (N, K) matrix of their values and a (K,) vector of their weights, in the reward's
    order: what `decoupled_advantages` normalises term by term (the total is the matrix times the weights)."""
    names = list(terms)
    values = torch.tensor([components[n] for n in names], dtype=torch.float32, device=device).T
    weights = torch.tensor([float(terms[n].weight) for n in names], dtype=torch.float32, device=device)
    return values, weights


def grpo_loss(logps: torch.Tensor, old_logps: torch.Tensor | None, ref_logps: torch.Tensor | None,
              advantages: torch.Tensor, mask: torch.Tensor, *, beta: float, epsilon_low: float, epsilon_high: float,
              loss_type: str, max_completion_length: int, num_items: float | None = None
              ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The GRPO objective on per-token log-probabilities of shape (N, T) with a (N, T) completion mask.

    ``old_logps`` None means one iteration: the ratio is exp(logp - logp.detach()), 1 in value, gradient of logp.
    ``num_items`` is the DAPO normaliser: completion tokens in the whole accumulated batch (default: this batch's).
    """
    mask = mask.to(logps.dtype)
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)
    a = advantages.unsqueeze(1)
    unclipped = ratio * a
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high) * a
    per_token = -torch.min(unclipped, clipped)
    kl = None
    if beta > 0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs reference log-probabilities")
        delta = ref_logps - logps
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + beta * kl
    total = (per_token * mask).sum()
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
    elif loss_type == "bnpo":
        loss = total / mask.sum().clamp(min=1)
    elif loss_type == "dr_grpo":
        loss = total / (per_token.shape[0] * max_completion_length)
    elif loss_type == "dapo":
        denom = mask.sum() if num_items is None else torch.as_tensor(num_items, dtype=total.dtype)
        loss = total / denom.clamp(min=1)
    else:
        raise ValueError(f"loss_type={loss_type!r} must be grpo, dr_grpo, dapo or bnpo")
    n = mask.sum().clamp(min=1)
    metrics = {"clip_fraction": ((clipped < unclipped).to(mask.dtype) * mask).sum() / n}
    if kl is not None:
        metrics["kl"] = (kl.detach() * mask).sum() / n
    return loss, metrics


def completion_mask(completion: torch.Tensor, eos_ids: list[int]) -> torch.Tensor:
    """1 for each token up to and including the first end-of-sequence token, 0 after it."""
    is_eos = torch.zeros_like(completion, dtype=torch.bool)
    for e in eos_ids:
        is_eos |= completion == e
    n = completion.shape[1]
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), torch.full_like(is_eos[:, 0], n, dtype=torch.long))
    return (torch.arange(n, device=completion.device).unsqueeze(0) <= first.unsqueeze(1)).long()


def _pooled(feats: tuple[torch.Tensor, ...]) -> Any:
    """Vision features in the form a Qwen2.5-VL forward takes as ``mm_encoder_outputs[kind]``."""
    # lazy: transformers
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    return BaseModelOutputWithPooling(pooler_output=feats)


def encode_visuals(model: Any, kind: str, pixels: torch.Tensor, grid: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``model``'s vision tower on a batch's pixels: one feature tensor per image (``kind`` "image") or per video
    ("video"), as the adapter state and gradient mode around the call make them."""
    core = core_model(model)
    encode = core.get_image_features if kind == "image" else core.get_video_features
    return tuple(encode(pixels, grid, return_dict=True).pooler_output)


def repeat_features(feats: tuple[torch.Tensor, ...], per_sample: list[int], g: int) -> tuple[torch.Tensor, ...]:
    """Each prompt's features (``per_sample[i]`` tensors for prompt i) repeated ``g`` times in a row, the order of
    `repeat_batch`'s rows. The copies are the same tensors: a backward through them sums their gradients.

    >>> a, b, c = (torch.full((1,), float(i)) for i in range(3))
    >>> [int(t) for t in repeat_features((a, b, c), [2, 1], 2)]
    [0, 1, 0, 1, 2, 2]
    """
    starts = [sum(per_sample[:i]) for i in range(len(per_sample))]
    return tuple(f for st, n in zip(starts, per_sample) for _ in range(g) for f in feats[st: st + n])


@dataclass
class PromptVisuals:
    """A batch's pixels, one copy per prompt, for the forwards over its G-times repeated rows when the vision tower
    trains (LoRA on it): `GRPOModule._logps` encodes them once per prompt through the model it is given (adapter on
    or off, with or without gradient) and repeats the features (`repeat_features`). The same features as encoding
    G repeated copies of the pixels, and a gradient summed over the copies, for 1/G of the vision tower's work."""

    kind: str  # image | video
    pixels: torch.Tensor
    grid: torch.Tensor
    per_sample: list[int]  # images (views) or videos per prompt
    g: int


def repeat_batch(batch: dict[str, Any], g: int, pixels: bool = True) -> dict[str, torch.Tensor]:
    """Each prompt repeated ``g`` times in a row, with its images or video (patches split per sample by their grids).
    ``pixels=False``: the grids only (the rollout hands on encoded features instead of repeated pixels)."""
    out = {k: batch[k].repeat_interleave(g, 0) for k in ("input_ids", "attention_mask", "mm_token_type_ids")}
    for pix, grid in (("pixel_values", "image_grid_thw"), ("pixel_values_videos", "video_grid_thw")):
        if pix not in batch:
            continue
        # views per prompt, or one video per prompt
        per_sample = [len(x) for x in batch["images"]] if pix == "pixel_values" else [1] * batch["input_ids"].shape[0]
        repeated, out[grid] = _repeat_visual(batch[pix] if pixels else None, batch[grid], per_sample, g)
        if repeated is not None:
            out[pix] = repeated
    if "pixel_values_videos" in batch and "second_per_grid_ts" in batch:
        out["second_per_grid_ts"] = batch["second_per_grid_ts"].repeat_interleave(g, 0)
    return out


def _repeat_visual(pixels: torch.Tensor | None, thw: torch.Tensor, per_sample: list[int], g: int
                   ) -> tuple[torch.Tensor | None, torch.Tensor]:
    patches = torch.split(pixels, thw.prod(dim=1).tolist()) if pixels is not None else None
    grids = torch.split(thw, 1)
    pv, gr, k = [], [], 0
    for n in per_sample:
        if patches is not None:
            pv += [torch.cat(patches[k: k + n])] * g
        gr += [torch.cat(grids[k: k + n])] * g
        k += n
    return (torch.cat(pv) if patches is not None else None), torch.cat(gr)


def group_spread(rewards: torch.Tensor, g: int, eps: float = 1e-6, per_term: torch.Tensor | None = None,
                 names: list[str] | None = None) -> dict[str, float]:
    """Whether a batch of groups carries anything to learn from: ``frac_reward_zero_std``, the share of groups whose
    G completions all scored the same (zero advantages: no gradient), as TRL logs it, and ``reward_std_in_group``,
    the mean standard deviation of the rewards within a group. Given the terms' values (``per_term``, (N, K), and
    their ``names``): ``frac_sum_ties_terms_differ``, the share of groups whose summed reward ties while their terms
    differ (the collapse GDPO names: different mixes of right and wrong, one sum), and ``reward_spread/<term>``, each
    term's mean standard deviation within a group.

    >>> group_spread(torch.tensor([0., 0., 0., 0., 0., 1., 0., 1.]), 4)
    {'frac_reward_zero_std': 0.5, 'reward_std_in_group': 0.2886751...}
    >>> terms = torch.tensor([[1., 0.], [0., 1.], [1., 0.], [0., 1.]])  # 1 + 0 = 0 + 1: the sum ties, the terms differ
    >>> group_spread(terms.sum(1), 4, per_term=terms, names=["shape", "dating"])["frac_sum_ties_terms_differ"]
    1.0
    """
    std = rewards.view(-1, g).std(dim=1)
    out = {"frac_reward_zero_std": float((std < eps).float().mean()), "reward_std_in_group": float(std.mean())}
    if per_term is not None and names:
        term_std = per_term.view(-1, g, per_term.shape[1]).std(dim=1)  # (groups, K)
        out["frac_sum_ties_terms_differ"] = float(((std < eps) & (term_std > eps).any(dim=1)).float().mean())
        out.update({f"reward_spread/{n}": float(term_std[:, k].mean()) for k, n in enumerate(names)})
    return out


def controlled_advantages(rewards: torch.Tensor, g: int, scale: str, control: str | None = None,
                          seed: int = 0, aggregation: str = "sum_then_normalize", per_term: torch.Tensor | None = None,
                          weights: torch.Tensor | None = None) -> torch.Tensor:
    """The advantages of a batch: `group_advantages` of the summed reward (``sum_then_normalize``, GRPO's own), or
    `decoupled_advantages` of the terms (``normalize_then_sum``, GDPO: ``scale`` does not apply, the batch
    normalisation does, as in TRL); or, with a negative control (``stage.module.negative_control``), a broken version
    a learning check must catch: ``flip_advantages`` negates them, ``shuffle_rewards`` computes them from the rewards
    permuted across all completions of the batch (seeded by ``seed``), so they no longer belong to their text."""
    decoupled = aggregation == "normalize_then_sum"
    if decoupled and (per_term is None or weights is None):
        raise ValueError("multi_objective_aggregation=normalize_then_sum needs each term's rewards and weights")
    if control == "shuffle_rewards":
        perm = torch.randperm(len(rewards), generator=torch.Generator().manual_seed(seed)).to(rewards.device)
        rewards = rewards[perm]
        per_term = per_term[perm] if per_term is not None else None
    adv = decoupled_advantages(per_term, weights, g) if decoupled else group_advantages(rewards, g, scale)
    return -adv if control == "flip_advantages" else adv


@dataclass
class Rollout:
    inputs: dict[str, torch.Tensor]  # prompt + completion, images
    completion_ids: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor
    old_logps: torch.Tensor | None
    ref_logps: torch.Tensor | None
    rewards: torch.Tensor
    components: dict[str, list[float]]
    texts: list[str]


class GRPOModule(LoRAStageModule):
    """GRPO over a Qwen2.5-VL policy with LoRA (see the module docstring for the objective)."""

    def __init__(self, model: Any, reward: Any, processor: Any, lora: dict[str, Any] | None = None,
                 optimizer: Any = None, warmup_ratio: float = 0.01, num_generations: int = 4,
                 temperature: float = 1.0, top_p: float = 1.0, max_completion_length: int = 256, beta: float = 0.001,
                 epsilon_low: float = 0.2, epsilon_high: float = 0.2, num_iterations: int = 1,
                 loss_type: str = "grpo", scale_rewards: str = "group", grad_accum: int = 1,
                 max_grad_norm: float | None = 1.0, full_finetune: bool = False, log_completions_every: int = 10,
                 min_completion_length: int = 0, lineage: dict[str, Any] | None = None,
                 negative_control: str | None = None, gradient_checkpointing: bool = False,
                 rollout: str = "eager", multi_objective_aggregation: str = "sum_then_normalize") -> None:
        super().__init__(model, lora=lora, optimizer=optimizer, warmup_ratio=warmup_ratio,
                         full_finetune=full_finetune, processor=processor, lineage=lineage,
                         gradient_checkpointing=gradient_checkpointing)
        # with LoRA the reference is the model with its adapter switched off; a full fine-tune has no adapter to
        # switch off, so it keeps an explicit frozen copy (only when the KL term needs one)
        self.ref_model = copy.deepcopy(model).eval().requires_grad_(False) if full_finetune and beta > 0 else None
        self.automatic_optimization = False
        self.reward = reward
        self.processor = processor
        self.G = int(num_generations)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.max_completion_length = int(max_completion_length)
        self.beta = float(beta)
        self.epsilon_low = float(epsilon_low)
        self.epsilon_high = float(epsilon_high)
        self.num_iterations = int(num_iterations)
        self.loss_type = loss_type
        self.scale_rewards = scale_rewards
        self.grad_accum = int(grad_accum)
        self.max_grad_norm = max_grad_norm
        self.log_completions_every = log_completions_every
        self.min_completion_length = int(min_completion_length)  # > 0 forces lengths, e.g. in benchmarks
        # a learning check must be able to fail: `flip_advantages` pushes away from what the reward asks,
        # `shuffle_rewards` hands each completion another's reward; neither is for training
        if negative_control not in (None, *NEGATIVE_CONTROLS):  # config validation says so first; this guards the API
            raise ValueError(f"stage.module.negative_control={negative_control!r} must be null or one of "
                             f"{list(NEGATIVE_CONTROLS)}")
        self.negative_control = negative_control
        if multi_objective_aggregation not in AGGREGATIONS:  # the config check says so first; this guards the API
            raise ValueError(f"stage.module.multi_objective_aggregation={multi_objective_aggregation!r} must be one "
                             f"of {list(AGGREGATIONS)}")
        self.multi_objective_aggregation = multi_objective_aggregation
        tok = processor.tokenizer
        self.eos_ids = sorted({i for i in (tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id,
                                            tok.convert_tokens_to_ids("<|endoftext|>")) if isinstance(i, int) and i >= 0})
        self.pad_id = tok.pad_token_id
        # a sampled image/video placeholder would break the next forward pass (placeholders must match the images)
        self.suppress_ids = sorted({i for t in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")
                                    if isinstance(i := tok.convert_tokens_to_ids(t), int) and i >= 0
                                    and i != tok.unk_token_id})
        self._buffer: list[Rollout] = []
        self.decoder = make_decoder(rollout)  # how completions are decoded (vase.training.rollout)
        # seconds spent in each part of a step, summed since the start (perf/throughput.json gives them per step)
        self.phase_seconds: dict[str, float] = {}

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time one part of a step into ``phase_seconds`` (on a GPU, between two synchronisations: a few
        microseconds each, against steps of seconds)."""
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if cuda:
                torch.cuda.synchronize(self.device)
            self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + time.perf_counter() - t0

    # ------------------------------------------------------------ log-probabilities

    def _vision_frozen(self) -> bool:
        """True when nothing in the vision tower trains (no adapter there, no trainable weight)."""
        if not hasattr(self, "_frozen_vision"):
            self._frozen_vision = not any(p.requires_grad or "lora_" in n for n, p in self.model.named_parameters()
                                          if ".visual." in f".{n}")
        return self._frozen_vision

    def _logps(self, model: Any, r_inputs: dict[str, torch.Tensor], n_completion: int) -> torch.Tensor:
        """Each completion token's log-probability at the temperature it was sampled at. The model's body gives the
        hidden states; the output head runs inside the chunked log-probabilities (`head_logprobs`, forward and
        backward), so the (rows, tokens, vocabulary) logits are never held: 1.2 GiB at 8 x 257 tokens of Qwen's
        vocabulary, growing with the completion length."""
        visuals = r_inputs.get("prompt_visuals")
        if visuals is not None:  # the vision tower trains: each prompt's pixels encoded once, here (PromptVisuals)
            feats = encode_visuals(model, visuals.kind, visuals.pixels, visuals.grid)
            r_inputs = {k: v for k, v in r_inputs.items() if k != "prompt_visuals"}
            r_inputs["mm_encoder_outputs"] = {visuals.kind: _pooled(repeat_features(feats, visuals.per_sample,
                                                                                    visuals.g))}
        hidden = core_model(model)(**r_inputs).last_hidden_state[:, -(n_completion + 1):-1]
        targets = r_inputs["input_ids"][:, -n_completion:]
        return head_logprobs(hidden, model.get_output_embeddings(), targets, self.temperature)

    @torch.no_grad()
    def _reference_logps(self, r_inputs: dict[str, torch.Tensor], n: int) -> torch.Tensor:
        if self.ref_model is not None:
            return self._logps(self.ref_model, r_inputs, n)
        with self.model.disable_adapter():
            return self._logps(self.model, r_inputs, n)

    def _encode_visuals(self, batch: dict[str, Any]) -> tuple[str, tuple[torch.Tensor, ...], list[int]] | None:
        """Each prompt's visual features from the (frozen) vision tower: ("image", one tensor per view, views per
        prompt) or ("video", one tensor per orbit, [1] * prompts); None for a text-only batch."""
        visuals = self._prompt_visuals(batch)
        if visuals is None:
            return None
        return visuals.kind, encode_visuals(self.model, visuals.kind, visuals.pixels, visuals.grid), visuals.per_sample

    def _prompt_visuals(self, batch: dict[str, Any]) -> PromptVisuals | None:
        """The batch's pixels, grids and images (or videos) per prompt; None for a text-only batch."""
        if "pixel_values" in batch:
            return PromptVisuals("image", batch["pixel_values"], batch["image_grid_thw"],
                                 [len(x) for x in batch["images"]], self.G)
        if "pixel_values_videos" in batch:
            return PromptVisuals("video", batch["pixel_values_videos"], batch["video_grid_thw"],
                                 [1] * batch["input_ids"].shape[0], self.G)
        return None

    # ------------------------------------------------------------ rollout

    @torch.no_grad()
    def rollout(self, batch: dict[str, Any]) -> Rollout:
        was_training = self.model.training
        self.model.eval()  # no dropout while sampling
        pixel_keys = ("pixel_values", "pixel_values_videos")
        prompts = {k: batch[k] for k in ("input_ids", "attention_mask", "mm_token_type_ids", *VISUAL_KEYS)
                   if k in batch and k not in pixel_keys}
        with self._phase("vision"):
            encoded = self._encode_visuals(batch) if self._vision_frozen() else None
        if encoded is not None:
            # a frozen vision tower gives the same features to the prefill, the reference and the policy: each
            # prompt's images (or orbit video) are encoded once and the features handed on instead of the pixels
            # (without this a 16-frame orbit went through the vision tower 2G + 1 times per prompt)
            kind, feats, per_sample = encoded
            prompts["mm_encoder_outputs"] = {kind: _pooled(feats)}
            repeated = repeat_features(feats, per_sample, self.G)
        else:
            prompts.update({k: batch[k] for k in pixel_keys if k in batch})
        # no G copies of the pixels: frozen, the features replace them; training, each forward encodes the prompts'
        # own pixels once and repeats the features (PromptVisuals)
        rep = repeat_batch(batch, self.G, pixels=False)
        with self._phase("decode"):  # the prefill and the sampled tokens
            completion = sample_groups(self.model, prompts, self.G, max_new_tokens=self.max_completion_length,
                                       eos_ids=self.eos_ids, pad_id=self.pad_id, temperature=self.temperature,
                                       top_p=self.top_p, suppress_ids=self.suppress_ids,
                                       min_new_tokens=self.min_completion_length, decoder=self.decoder)
        self.model.train(was_training)
        mask = completion_mask(completion, self.eos_ids)
        completion = torch.where(mask.bool(), completion, torch.full_like(completion, self.pad_id))
        texts = self.processor.batch_decode(completion, skip_special_tokens=True)
        targets = [t for t in batch["targets"] for _ in range(self.G)]
        refs = [t for t in batch["reference"] for _ in range(self.G)]
        images = [im for im in batch["images"] for _ in range(self.G)] if "images" in batch else None
        ids = [i for i in batch["ids"] for _ in range(self.G)] if "ids" in batch else None
        with self._phase("reward"):
            scored = self.reward.compute(texts, targets=targets, reference=refs, images=images, ids=ids)
        rewards = torch.tensor(scored.total, dtype=torch.float32, device=completion.device)
        per_term, weights = self._terms(scored.components, completion.device)
        adv = controlled_advantages(rewards, self.G, self.scale_rewards, self.negative_control, int(self.global_step),
                                    self.multi_objective_aggregation, per_term, weights)
        inputs = {"input_ids": torch.cat([rep["input_ids"], completion], 1),
                  "attention_mask": torch.cat([rep["attention_mask"], mask], 1),
                  "mm_token_type_ids": torch.cat([rep["mm_token_type_ids"], torch.zeros_like(completion)], 1),
                  **{k: rep[k] for k in VISUAL_KEYS if k in rep}}  # the grids: the pixels come as features or PromptVisuals
        if encoded is not None:
            inputs["mm_encoder_outputs"] = {kind: _pooled(repeated)}
        elif (visuals := self._prompt_visuals(batch)) is not None:
            inputs["prompt_visuals"] = visuals
        n = completion.shape[1]
        with self._phase("reference"):  # the old (mu > 1) and the reference log-probabilities, no gradient
            old = self._logps(self.model, inputs, n) if self.num_iterations > 1 else None
            ref = self._reference_logps(inputs, n) if self.beta > 0 else None
        return Rollout(inputs, completion, mask, adv, old, ref, rewards, scored.components, texts)

    def _terms(self, components: dict[str, list[float]], device: Any) -> tuple[Any, Any]:
        """The reward's terms as values and weights (`term_matrix`); (None, None) for a reward without terms (a plain
        function: it has only its sum)."""
        terms = getattr(self.reward, "terms", None)
        if not terms or not all(n in components for n in terms):
            return None, None
        return term_matrix(components, terms, device)

    # ------------------------------------------------------------ optimisation

    def total_optimizer_steps(self) -> int:
        batches = super().total_optimizer_steps()
        return max(1, batches // self.grad_accum) * self.num_iterations

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        r = self.rollout(batch)
        self._buffer.append(r)
        self.tokens_last_batch = int(r.inputs["attention_mask"].sum())  # prompts and completions (throughput)
        self._log_rollout(r, batch)
        if len(self._buffer) < self.grad_accum:
            return None
        opt = self.optimizers()
        sched = self.lr_schedulers()
        num_items = float(sum(x.mask.sum() for x in self._buffer))
        for _ in range(self.num_iterations):
            losses, clip, kl = [], [], []
            for x in self._buffer:
                with self._phase("policy"):  # forward and backward
                    logps = self._logps(self.model, x.inputs, x.completion_ids.shape[1])
                    loss, m = grpo_loss(logps, x.old_logps, x.ref_logps, x.advantages, x.mask, beta=self.beta,
                                        epsilon_low=self.epsilon_low, epsilon_high=self.epsilon_high,
                                        loss_type=self.loss_type, max_completion_length=self.max_completion_length,
                                        num_items=num_items)
                    scaled = loss if self.loss_type == "dapo" else loss / len(self._buffer)
                    self.manual_backward(scaled)
                losses.append(float(scaled.detach()))
                clip.append(float(m["clip_fraction"]))
                if "kl" in m:
                    kl.append(float(m["kl"]))
            with self._phase("optimizer"):
                if self.max_grad_norm and "DeepSpeed" not in type(self.trainer.strategy).__name__:
                    # DeepSpeed owns its gradients (and clips through its own config); elsewhere clip here
                    self.clip_gradients(opt, gradient_clip_val=self.max_grad_norm, gradient_clip_algorithm="norm")
                opt.step()
                opt.zero_grad(set_to_none=True)
            if sched is not None:
                sched.step()
            step_loss = sum(losses)
            self.log("train/loss", step_loss, prog_bar=True, on_step=True, batch_size=1)
            self.log("train/clip_fraction", sum(clip) / len(clip), on_step=True, batch_size=1)
            if kl:
                self.log("train/kl", sum(kl) / len(kl), on_step=True, batch_size=1)
            self.log("train/lr", opt.param_groups[0]["lr"], on_step=True, batch_size=1)
            rewards = torch.cat([x.rewards for x in self._buffer])
            terms = [self._terms(x.components, rewards.device)[0] for x in self._buffer]
            per_term = torch.cat(terms) if all(t is not None for t in terms) else None
            spread = group_spread(rewards, self.G, per_term=per_term,
                                  names=list(getattr(self.reward, "terms", {}) or {}) if per_term is not None else None)
            entry = {"step": float(self.global_step), "loss": step_loss, "reward": float(rewards.mean()),
                     **spread, **({"kl": sum(kl) / len(kl)} if kl else {})}
            names = [k for k in self._buffer[0].components if not k.endswith(("_sim", "_pass"))]
            for name in names:  # each part of the reward (dimensions and configured terms), for summaries and reports
                vals = [v for x in self._buffer for v in x.components.get(name, [])]
                if vals:
                    entry[f"reward/{name}"] = sum(vals) / len(vals)
            self.history.append(entry)
        self._buffer.clear()
        return None

    def _log_rollout(self, r: Rollout, batch: dict[str, Any]) -> None:
        bs = len(r.texts)
        self.log("train/reward", r.rewards.mean(), prog_bar=True, on_step=True, batch_size=bs)
        self.log("train/reward_std", r.rewards.std() if bs > 1 else 0.0, on_step=True, batch_size=bs)
        per_term, _ = self._terms(r.components, r.rewards.device)
        names = list(getattr(self.reward, "terms", {}) or {})
        spread = group_spread(r.rewards, self.G, per_term=per_term, names=names)
        for key, value in spread.items():  # can this step learn anything, and from which terms?
            self.log(f"train/{key}", value, on_step=True, batch_size=bs)
        for name, values in r.components.items():
            if name.endswith("_sim"):
                continue
            key = f"train/reward/{name[:-5]}_pass_rate" if name.endswith("_pass") else f"train/reward/{name}"
            self.log(key, sum(values) / len(values), on_step=True, batch_size=bs)
        lengths = r.mask.sum(1).float()
        self.log("train/completion_length", lengths.mean(), on_step=True, batch_size=bs)
        if self.log_completions_every and self.global_step % self.log_completions_every == 0:
            self._log_completions_table(r, batch)

    def _log_completions_table(self, r: Rollout, batch: dict[str, Any]) -> None:
        """Sampled completions with their reward breakdown: in W&B with the view the prompt showed, in TensorBoard
        and MLflow as a table."""
        loggers = self.loggers if self.trainer is not None else []
        if not loggers:
            return
        dims = [k for k in r.components if not k.endswith(("_sim", "_pass"))]
        rows = [[int(self.global_step), batch["ids"][k // self.G], text, float(r.rewards[k]),
                 *[float(r.components[d][k]) for d in dims]] for k, text in enumerate(r.texts)]
        columns = ["step", "id", "completion", "reward", *dims]
        wandb_loggers = [lg for lg in loggers if kind(lg) == "wandb"]
        if wandb_loggers:
            # lazy: wandb
            import wandb

            with_views = [[*row[:2], wandb.Image(batch["images"][k // self.G][0]), *row[2:]] for k, row in enumerate(rows)]
            for lg in wandb_loggers:
                lg.log_table(key="train/completions", columns=[*columns[:2], "view", *columns[2:]], data=with_views)
        log_table([lg for lg in loggers if kind(lg) != "wandb"], "train/completions", columns, rows,
                  step=int(self.global_step))
