"""Batched, deterministic caption generation, resumable through an append-only JSONL keyed by vase id."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from vase.config import Decoding
from vase.data.datamodule import IGNORE_INDEX, ChatSample, SFTCollator, encode_prompts
from vase.data.dataset import VaseDataset
from vase.io import append_jsonl, read_jsonl, repair_jsonl_tail
from vase.models.logprobs import selected_logprobs
from vase.models.token_sampling import SamplingProcessor
from vase.progress import progress_bar
from vase.prompts import CAPTION_PROMPT


@dataclass
class GenerationItem:
    """One prompt to answer: an id (the JSONL key), how to get its images, the prompt and the expected answer."""

    id: str
    images: Callable[[], list[Any]]
    prompt: str
    reference: str
    extra: dict[str, Any] = field(default_factory=dict)
    system: str = ""  # the dataset's system prompt, as in training


def caption_items(dataset: VaseDataset, prompt: str = CAPTION_PROMPT) -> list[GenerationItem]:
    """A caption prompt per vase; views are read only when the item is generated."""
    return [GenerationItem(rec.id, visuals_of(dataset, i), prompt_context(dataset, i) + prompt, rec.caption,
                           system=rec.system) for i, rec in enumerate(dataset.records)]


def prompt_context(dataset: Any, i: int, dim: str | None = None) -> str:
    """Retrieved neighbours' metadata for vase ``i`` (retrieval.k), as in training; "" without retrieval. With
    ``dim``, the context of a question about that dimension (retrieval.format=asked: its values only)."""
    if not hasattr(dataset, "context_of"):
        return ""
    return dataset.context_of(i, dim) if dim is not None else dataset.context_of(i)


def visuals_of(dataset: VaseDataset, i: int) -> Callable[[], list[Any]]:
    """A picklable loader of vase ``i``'s views (or orbit frames), read only when called."""
    return partial(_visuals, dataset, i)


def _visuals(dataset: VaseDataset, i: int) -> list[Any]:
    return dataset[i].images


def _resumable_rows(model: Any, items: list[GenerationItem], out_path: str | Path | None, batch_size: int,
                    progress: bool, desc: str, answer: Callable[[list[GenerationItem]], list[dict[str, Any]]]
                    ) -> list[dict[str, Any]]:
    """Answer ``items`` in chunks with ``answer``; rows in item order. With ``out_path`` the rows are appended to
    that JSONL as they are made and ids already there are skipped, so a rerun after a kill finishes the job without
    losing or duplicating a line. The model is in eval mode meanwhile."""
    done: dict[str, dict[str, Any]] = {}
    path = Path(out_path) if out_path else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl_tail(path)
        done = {r["id"]: r for r in read_jsonl(path)}
    todo = [it for it in items if it.id not in done]
    was_training = model.training
    model.eval()
    bar = None
    if progress and todo:
        bar = progress_bar(total=len(todo), desc=desc, unit="item")
    try:
        for start in range(0, len(todo), batch_size):
            rows = answer(todo[start: start + batch_size])
            if path is not None:
                append_jsonl(path, rows)
            done.update({r["id"]: r for r in rows})
            if bar is not None:
                bar.update(len(rows))
    finally:
        if bar is not None:
            bar.close()
        model.train(was_training)
    return [done[it.id] for it in items]


# Every decoding knob that a checkpoint's generation_config.json could set, at its neutral value: an explicit value in
# the config passed to ``generate`` is never filled from the checkpoint's (transformers fills only unset fields).
# min_length stays unset: min_new_tokens (0) takes precedence over any checkpoint's min_length, and setting both makes
# transformers warn on every batch.
NEUTRAL_DECODING = {"num_beams": 1, "num_beam_groups": 1, "penalty_alpha": None, "min_length": None, "min_new_tokens": 0,
                    "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "min_p": None, "length_penalty": 1.0,
                    "no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0, "num_return_sequences": 1,
                    "renormalize_logits": False, "use_cache": True}


def generation_config(model: Any, tokenizer: Any, decoding: Decoding, max_new_tokens: int) -> Any:
    """The ``GenerationConfig`` of one call: ``decoding`` and the neutral values of every other knob, with the end
    and pad ids of the checkpoint (what its tokenizer means by "stop") and nothing else of its generation config."""
    # lazy: transformers
    from transformers import GenerationConfig

    own = getattr(model, "generation_config", None)
    eos = getattr(own, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    # greedy: the sampling knobs at transformers' own neutral values (top_k 50, which it never calls invalid for greedy
    # decoding; 0 made it warn on every batch), set so a checkpoint's (top_k 1, temperature 0.1) is never merged in
    # sampling is vase's (`sampler`: inverse CDF, the rollout's sampler): generate itself runs greedy and picks the
    # one token the sampler leaves
    return GenerationConfig(**NEUTRAL_DECODING, do_sample=False, temperature=1.0, top_p=1.0, top_k=50,
                            repetition_penalty=float(decoding.repetition_penalty), max_new_tokens=int(max_new_tokens),
                            eos_token_id=eos, pad_token_id=tokenizer.pad_token_id,
                            bos_token_id=getattr(own, "bos_token_id", None))


def sampler(decoding: Decoding) -> Any:
    """The logits processors of one ``generate`` call: for sampled decoding, vase's sampler
    (`vase.models.token_sampling.SamplingProcessor`, after any repetition penalty), so evaluation draws tokens the way the
    GRPO rollout does; none for greedy."""
    # lazy: transformers
    from transformers import LogitsProcessorList

    if not decoding.do_sample:
        return LogitsProcessorList()
    return LogitsProcessorList([SamplingProcessor(decoding.temperature, decoding.top_k, decoding.top_p)])


@torch.inference_mode()
def generate_rows(model: Any, processor: Any, items: list[GenerationItem], out_path: str | Path | None = None,
                  batch_size: int = 8, max_new_tokens: int = 64, decoding: Decoding | None = None,
                  progress: bool = True, desc: str = "generating") -> list[dict[str, Any]]:
    """Answer every item; rows are ``{"id", "caption", "reference", **extra}`` in item order (resumable through
    ``out_path``, see `_resumable_rows`). ``decoding`` (default: greedy, no penalty) is all that decides how
    tokens are chosen (`generation_config`)."""
    tok = processor.tokenizer
    device = next(model.parameters()).device
    config = generation_config(model, tok, decoding or Decoding(), max_new_tokens)
    processors = sampler(decoding or Decoding())

    def answer(chunk: list[GenerationItem]) -> list[dict[str, Any]]:
        enc = encode_prompts(processor, [it.prompt for it in chunk], [it.images() for it in chunk], "left",
                             [it.system for it in chunk])
        enc = {k: v.to(device) for k, v in enc.items()}
        out = model.generate(**enc, generation_config=config, logits_processor=processors)
        answers = processor.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        return [{"id": it.id, "caption": a.strip(), "reference": it.reference, **it.extra}
                for it, a in zip(chunk, answers)]

    old_side = tok.padding_side
    tok.padding_side = "left"  # generation continues each row from its end
    try:
        return _resumable_rows(model, items, out_path, batch_size, progress, desc, answer)
    finally:
        tok.padding_side = old_side


@torch.inference_mode()
def option_loglik_rows(model: Any, processor: Any, items: list[GenerationItem], out_path: str | Path | None = None,
                       batch_size: int = 8, progress: bool = True, desc: str = "scoring options") -> list[dict[str, Any]]:
    """Multiple choice by likelihood: for each item (``extra["options"]``, each already in the answer's form), the
    summed log-probability the model gives each option as its whole answer (closing token included), one forward
    pass per option, in the very format SFT trains on; the row's ``pick`` is the most likely option. Options differ in
    length (with Qwen's vocabulary by 2.2 tokens on average, up to 9), and a sum favours the shorter, so each row also
    carries the options' token counts (``tokens``), the per-token mean log-probabilities (``loglik_mean``) and the
    option they pick (``pick_mean``). Cheap (no generation) and free of answer-format luck, so hundreds of held-out
    vases can be scored on a CPU. Resumable like `generate_rows`."""
    collate = SFTCollator(processor)
    device = next(model.parameters()).device

    def answer(chunk: list[GenerationItem]) -> list[dict[str, Any]]:
        samples = []
        for it in chunk:
            images = it.images()
            samples += [ChatSample(it.id, images, it.prompt, o) for o in it.extra["options"]]
        batch = {k: v.to(device) for k, v in collate(samples).items()}
        labels = batch.pop("labels")
        logits = model(**batch).logits[:, :-1]
        target = labels[:, 1:]
        mask = target != IGNORE_INDEX
        logp = selected_logprobs(logits, target.clamp(min=0))
        totals = (logp * mask).sum(-1).tolist()
        counts = mask.sum(-1).tolist()
        rows, k = [], 0
        for it in chunk:
            n = len(it.extra["options"])
            scores, tokens = totals[k: k + n], counts[k: k + n]
            means = [s / max(t, 1) for s, t in zip(scores, tokens)]
            k += n
            pick = max(range(n), key=lambda i: scores[i])
            rows.append({"id": it.id, "caption": it.extra["options"][pick], "reference": it.reference,
                         "loglik": [round(x, 5) for x in scores], "pick": pick, "tokens": tokens,
                         "loglik_mean": [round(x, 5) for x in means],
                         "pick_mean": max(range(n), key=lambda i: means[i]), **it.extra})
        return rows

    return _resumable_rows(model, items, out_path, batch_size, progress, desc, answer)


def generate_captions(model: Any, processor: Any, dataset: VaseDataset, out_path: str | Path | None = None,
                      batch_size: int = 8, max_new_tokens: int = 64, decoding: Decoding | None = None,
                      prompt: str = CAPTION_PROMPT, progress: bool = True) -> list[dict[str, Any]]:
    """Caption every vase of ``dataset``: one row per vase in dataset order, ``{"id": the vase's id, "caption": the
    model's answer (stripped), "reference": the record's caption}``. With ``out_path`` (JSONL), each row is written as
    it is made and a rerun continues from the rows there (`generate_rows`)."""
    return generate_rows(model, processor, caption_items(dataset, prompt), out_path, batch_size, max_new_tokens,
                         decoding, progress, desc="generating captions")
