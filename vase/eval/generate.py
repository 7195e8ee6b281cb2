"""Batched, deterministic caption generation, resumable through an append-only JSONL keyed by vase id."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from vase.data.datamodule import prompt_text
from vase.data.dataset import VaseDataset
from vase.errors import DataError
from vase.prompts import CAPTION_PROMPT


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file. A torn last line (a run killed mid-write) is dropped; any other bad line raises."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    lines = path.read_text(encoding="utf-8").split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n == len(lines) or (n == len(lines) - 1 and not lines[-1]):
                break  # the unfinished tail of an interrupted append: it will be generated again
            raise DataError(f"{path}: line {n} is not JSON ({e.msg})") from e
    return rows


def _append_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    # One write per batch, flushed and synced: a kill leaves whole lines plus at most one torn tail line.
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        f.flush()
        os.fsync(f.fileno())


def _repair_tail(path: Path) -> None:
    """Cut a torn final line so appends start on a fresh line."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(cut)


@torch.inference_mode()
def generate_captions(
    model: Any,
    processor: Any,
    dataset: VaseDataset,
    out_path: str | Path | None = None,
    batch_size: int = 8,
    max_new_tokens: int = 64,
    do_sample: bool = False,
    prompt: str = CAPTION_PROMPT,
    progress: bool = True,
    **gen_kwargs: Any,
) -> list[dict[str, Any]]:
    """Caption every vase of ``dataset``; rows are ``{"id", "caption", "reference"}`` in dataset order.

    With ``out_path`` the rows are appended to that JSONL as they are made, and ids already there are skipped, so
    a rerun after a kill finishes the job without losing or duplicating a line.
    """
    done: dict[str, dict[str, Any]] = {}
    path = Path(out_path) if out_path else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        _repair_tail(path)
        done = {r["id"]: r for r in read_jsonl(path)}
    todo = [i for i, r in enumerate(dataset.records) if r.id not in done]
    was_training = model.training
    model.eval()
    tok = processor.tokenizer
    old_side = tok.padding_side
    tok.padding_side = "left"  # generation continues each row from its end
    device = next(model.parameters()).device
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="generating captions", unit="vase")
    try:
        for start in range(0, len(todo), batch_size):
            idx = todo[start : start + batch_size]
            examples = [dataset[i] for i in idx]
            texts = [prompt_text(processor, len(ex.images), prompt) for ex in examples]
            enc = processor(text=texts, images=[ex.images for ex in examples], return_tensors="pt", padding=True)
            enc = {k: v.to(device) for k, v in enc.items()}
            out = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=do_sample, pad_token_id=tok.pad_token_id, **gen_kwargs
            )
            new = out[:, enc["input_ids"].shape[1] :]
            captions = processor.batch_decode(new, skip_special_tokens=True)
            rows = [
                {"id": ex.record.id, "caption": c.strip(), "reference": ex.record.caption}
                for ex, c in zip(examples, captions)
            ]
            if path is not None:
                _append_jsonl(path, rows)
            done.update({r["id"]: r for r in rows})
            if bar is not None:
                bar.update(len(rows))
    finally:
        tok.padding_side = old_side
        if bar is not None:
            bar.close()
        model.train(was_training)
    return [done[r.id] for r in dataset.records]
