"""Answering with the zoom-in tool (the task itself: ``vase.prompt_tasks.zoom``): each question is asked with the tool note;
an answer that is a valid call gets the crop and is asked again, up to ``vqa.zoom_calls`` rounds."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from PIL import Image

from vase.eval.generate import GenerationItem, generate_rows
from vase.prompt_tasks.zoom import TOOL_NOTE, crop, followup, parse_zoom, view_index, zoom_call


def zoom_rows(model: Any, processor: Any, items: list[Any], views: tuple[str, ...], max_calls: int = 1,
              out_path: Any = None, **gen: Any) -> list[dict[str, Any]]:
    """Answer ``items`` with the tool: ask each with the tool note; every answer that is a valid call gets the crop
    and is asked again (up to ``max_calls`` rounds); rows carry the final answer and the calls made."""
    rows_by_id: dict[str, dict[str, Any]] = {}
    current = [GenerationItem(it.id, it.images, it.prompt + TOOL_NOTE, it.reference, {**it.extra, "calls": []},
                              system=it.system) for it in items]
    base = {it.id: it for it in items}
    for round_ in range(max_calls + 1):
        path = Path(out_path).with_name(f"{Path(out_path).stem}_round{round_}.jsonl") if out_path else None
        rows = generate_rows(model, processor, current, path, desc=f"zoom round {round_}", **gen)
        nxt = []
        for it, row in zip(current, rows):
            call = parse_zoom(row["caption"], views) if round_ < max_calls else None
            i = view_index(views, call[0]) if call else None
            if call is None or i is None:
                rows_by_id[it.id] = {**row, "calls": it.extra["calls"]}
                continue
            calls = [*it.extra["calls"], zoom_call(*call)]
            src = base[it.id]
            nxt.append(GenerationItem(it.id, _with_crop(it.images, i, call[1]),
                                      followup(src.prompt, "\n".join(calls)), it.reference, {**it.extra, "calls": calls},
                                      system=it.system))
        current = nxt
        if not current:
            break
    return [rows_by_id[it.id] for it in items]


def _with_crop(images_fn: Any, index: int, box: tuple[float, ...]) -> Any:
    return partial(_load_with_crop, images_fn, index, box)


def _load_with_crop(images_fn: Any, index: int, box: tuple[float, ...]) -> list[Image.Image]:
    imgs = list(images_fn())
    return imgs + [crop(imgs[index], box)]
