"""A zoom-in tool (as CiQi-Agent's): before answering, the model may ask to see part of a view up close.

The model answers ``<zoom view="front" box="x0,y0,x1,y1"/>`` (fractions of the image, top-left origin) and is
then asked again with that crop, cut from the view at its stored resolution (finer than what the model sees once
the processor has fitted every image to ``max_pixels``), added as a last image, after the call:

    <views> <question + tool note>            ->  <zoom view="front" box="0.1,0.3,0.9,0.6"/>
    <views, crop> <question + tool note + call + "Zoomed view: the last image.">  ->  answer

Training data (``data.zoom=true``) teaches this on the decoration question, where the synthetic generator knows
where the frieze lies; evaluation (``vqa.zoom=true``) answers every open question with the tool, up to
``vqa.zoom_calls`` calls, beside the answers without it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from PIL import Image

from vase.layout import VIEWS

TOOL_NOTE = ('\nYou may look closer first: reply <zoom view="front" box="x0,y0,x1,y1"/> (a view name and fractions '
             "of the image) to see that part at full resolution.")
_CALL = re.compile(r'<zoom\s+view="(\w+)"\s+box="([-\d.]+),([-\d.]+),([-\d.]+),([-\d.]+)"\s*/?>')


def zoom_call(view: str, box: tuple[float, float, float, float]) -> str:
    """The call's text.

    >>> zoom_call("front", (0.1, 0.25, 0.9, 0.5))
    '<zoom view="front" box="0.10,0.25,0.90,0.50"/>'
    """
    return f'<zoom view="{view}" box="' + ",".join(f"{x:.2f}" for x in box) + '"/>'


def parse_zoom(text: str, views: tuple[str, ...] | list[str] = VIEWS) -> tuple[str, tuple[float, ...]] | None:
    """The first valid zoom call in ``text`` (a known view, a box inside the image with positive area), or None.

    >>> parse_zoom('<zoom view="front" box="0.1,0.2,0.9,0.6"/>')
    ('front', (0.1, 0.2, 0.9, 0.6))
    >>> parse_zoom('<zoom view="inside" box="0,0,1,1"/>') is None
    True
    """
    m = _CALL.search(text)
    if not m or m.group(1) not in views:
        return None
    box = tuple(float(x) for x in m.groups()[1:])
    x0, y0, x1, y1 = box
    if not (0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0):
        return None
    return m.group(1), box


def crop(image: Image.Image, box: tuple[float, ...]) -> Image.Image:
    """The box of ``image`` at its own resolution, scaled up so that its longer side matches the image's."""
    w, h = image.size
    x0, y0, x1, y1 = box
    c = image.crop((int(x0 * w), int(y0 * h), max(int(x0 * w) + 1, int(round(x1 * w))),
                    max(int(y0 * h) + 1, int(round(y1 * h)))))
    scale = max(w, h) / max(c.size)
    return c.resize((max(1, round(c.size[0] * scale)), max(1, round(c.size[1] * scale))), Image.Resampling.BICUBIC)


def followup(question: str, call: str) -> str:
    """The prompt after a call: the question, the tool note, the call, and where the crop is."""
    return f"{question}{TOOL_NOTE}\n{call}\nZoomed view: the last image."


def decoration_box(image: Image.Image, band: tuple[float, float], margin: float = 0.04) -> tuple[float, ...]:
    """Where the frieze lies in a front view: the vase's silhouette (the foreground the silhouette fit uses) gives its
    top and bottom rows and its width; the generator's ``band`` (fractions of the height) gives the frieze's rows."""
    from vase.reconstruct.procedural import foreground_mask

    fg = foreground_mask(np.asarray(image.convert("RGB")), tolerance=12.0)
    rows, cols = np.flatnonzero(fg.any(axis=1)), np.flatnonzero(fg.any(axis=0))
    h, w = fg.shape
    if len(rows) < 2:
        return (0.0, 0.0, 1.0, 1.0)
    top, bottom = rows[0] / h, (rows[-1] + 1) / h
    y0 = bottom - band[1] * (bottom - top) - margin
    y1 = bottom - band[0] * (bottom - top) + margin
    x0, x1 = cols[0] / w - margin, (cols[-1] + 1) / w + margin
    return (max(0.0, x0), max(0.0, y0), min(1.0, x1), min(1.0, y1))


def view_index(views: tuple[str, ...] | list[str], view: str) -> int | None:
    return list(views).index(view) if view in views else None


def zoom_rows(model: Any, processor: Any, items: list[Any], views: tuple[str, ...], max_calls: int = 1,
              out_path: Any = None, **gen: Any) -> list[dict[str, Any]]:
    """Answer ``items`` with the tool: ask each with the tool note; every answer that is a valid call gets the crop
    and is asked again (up to ``max_calls`` rounds); rows carry the final answer and the calls made."""
    from pathlib import Path

    from vase.eval.generate import GenerationItem, generate_rows

    rows_by_id: dict[str, dict[str, Any]] = {}
    current = [GenerationItem(it.id, it.images, it.prompt + TOOL_NOTE, it.reference, {**it.extra, "calls": []})
               for it in items]
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
                                      followup(src.prompt, "\n".join(calls)), it.reference, {**it.extra, "calls": calls}))
        current = nxt
        if not current:
            break
    return [rows_by_id[it.id] for it in items]


def _with_crop(images_fn: Any, index: int, box: tuple[float, ...]) -> Any:
    from functools import partial

    return partial(_load_with_crop, images_fn, index, box)


def _load_with_crop(images_fn: Any, index: int, box: tuple[float, ...]) -> list[Image.Image]:
    imgs = list(images_fn())
    return imgs + [crop(imgs[index], box)]
