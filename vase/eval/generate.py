"""Batched, deterministic caption generation, resumable through an append-only JSONL keyed by vase id."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from vase.data.datamodule import encode_prompts
from vase.data.dataset import VaseDataset
from vase.io import append_jsonl, read_jsonl, repair_jsonl_tail
from vase.prompts import CAPTION_PROMPT


@dataclass
class GenerationItem:
    """One prompt to answer: an id (the JSONL key), how to get its images, the prompt and the expected answer."""

    id: str
    images: Callable[[], list[Any]]
    prompt: str
    reference: str
    extra: dict[str, Any] = field(default_factory=dict)


def caption_items(dataset: VaseDataset, prompt: str = CAPTION_PROMPT) -> list[GenerationItem]:
    """A caption prompt per vase; views are read only when the item is generated."""
    return [GenerationItem(rec.id, visuals_of(dataset, i), prompt_context(dataset, i) + prompt, rec.caption)
            for i, rec in enumerate(dataset.records)]


def prompt_context(dataset: Any, i: int) -> str:
    """Retrieved neighbours' metadata for vase ``i`` (retrieval.k), as in training; "" without retrieval."""
    return dataset.context_of(i) if hasattr(dataset, "context_of") else ""


def visuals_of(dataset: VaseDataset, i: int) -> Callable[[], list[Any]]:
    """A picklable loader of vase ``i``'s views (or orbit frames), read only when called."""
    return partial(_visuals, dataset, i)


def _visuals(dataset: VaseDataset, i: int) -> list[Any]:
    return dataset[i].images


@torch.inference_mode()
def generate_rows(model: Any, processor: Any, items: list[GenerationItem], out_path: str | Path | None = None,
                  batch_size: int = 8, max_new_tokens: int = 64, do_sample: bool = False, progress: bool = True,
                  desc: str = "generating", **gen_kwargs: Any) -> list[dict[str, Any]]:
    """Answer every item; rows are ``{"id", "caption", "reference", **extra}`` in item order.

    With ``out_path`` the rows are appended to that JSONL as they are made, and ids already there are skipped, so
    a rerun after a kill finishes the job without losing or duplicating a line.
    """
    done: dict[str, dict[str, Any]] = {}
    path = Path(out_path) if out_path else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl_tail(path)
        done = {r["id"]: r for r in read_jsonl(path)}
    todo = [it for it in items if it.id not in done]
    was_training = model.training
    model.eval()
    tok = processor.tokenizer
    old_side = tok.padding_side
    tok.padding_side = "left"  # generation continues each row from its end
    device = next(model.parameters()).device
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=desc, unit="item")
    try:
        for start in range(0, len(todo), batch_size):
            chunk = todo[start: start + batch_size]
            images = [it.images() for it in chunk]
            enc = encode_prompts(processor, [it.prompt for it in chunk], images, "left")
            enc = {k: v.to(device) for k, v in enc.items()}
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=do_sample,
                                 pad_token_id=tok.pad_token_id, **gen_kwargs)
            answers = processor.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            rows = [{"id": it.id, "caption": a.strip(), "reference": it.reference, **it.extra}
                    for it, a in zip(chunk, answers)]
            if path is not None:
                append_jsonl(path, rows)
            done.update({r["id"]: r for r in rows})
            if bar is not None:
                bar.update(len(rows))
    finally:
        tok.padding_side = old_side
        if bar is not None:
            bar.close()
        model.train(was_training)
    return [done[it.id] for it in items]


def generate_captions(model: Any, processor: Any, dataset: VaseDataset, out_path: str | Path | None = None,
                      batch_size: int = 8, max_new_tokens: int = 64, do_sample: bool = False,
                      prompt: str = CAPTION_PROMPT, progress: bool = True, **gen_kwargs: Any) -> list[dict[str, Any]]:
    """Caption every vase of ``dataset`` (resumable, see :func:`generate_rows`); rows in dataset order."""
    return generate_rows(model, processor, caption_items(dataset, prompt), out_path, batch_size, max_new_tokens,
                         do_sample, progress, desc="generating captions", **gen_kwargs)
