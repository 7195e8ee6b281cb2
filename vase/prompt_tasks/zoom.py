"""The zoom-in task (as CiQi-Agent's): before answering, the model may ask to see part of a view up close.

The model answers ``<zoom view="front" box="x0,y0,x1,y1"/>`` (fractions of the image, top-left origin) and is
then asked again with that crop, cut from the view at its stored resolution (finer than what the model sees once
the processor has fitted every image to ``max_pixels``), added as a last image, after the call:

    <views> <question + tool note>            ->  <zoom view="front" box="0.1,0.3,0.9,0.6"/>
    <views, crop> <question + tool note + call + "Zoomed view: the last image.">  ->  answer

Training data (``data.zoom=true``) teaches this on the decoration question, where the synthetic generator knows
where the frieze lies; evaluation (``vqa.zoom=true``) answers every open question with the tool, up to
``vqa.zoom_calls`` calls, beside the answers without it (its runner: ``vase.eval.zoom``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from vase.annotate.vocab import DIMENSIONS
from vase.images import foreground_mask
from vase.prompt_tasks.base import ChatSample, asked_context, fields_of, none_of, only
from vase.views import VIEWS

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


def decoration_box(image: Image.Image, band: tuple[float, float], margin: float = 0.04,
                   width: float = 1.0) -> tuple[float, ...]:
    """Where the frieze lies in a front view: the vase's silhouette (the foreground the silhouette fit uses) gives its
    top and bottom rows and its width; the generator's ``band`` (fractions of the height) gives the frieze's rows.
    ``width`` < 1: only that fraction of the frieze's width, around the view's centre (where a set drawn with detail
    puts side A's scene), so that the crop magnifies it more."""
    fg = foreground_mask(np.asarray(image.convert("RGB")), tolerance=12.0)
    rows, cols = np.flatnonzero(fg.any(axis=1)), np.flatnonzero(fg.any(axis=0))
    h, w = fg.shape
    if len(rows) < 2:
        return (0.0, 0.0, 1.0, 1.0)
    top, bottom = rows[0] / h, (rows[-1] + 1) / h
    y0 = bottom - band[1] * (bottom - top) - margin
    y1 = bottom - band[0] * (bottom - top) + margin
    x0, x1 = cols[0] / w - margin, (cols[-1] + 1) / w + margin
    if width < 1.0:
        centre, half = (x0 + x1) / 2, (x1 - x0) * width / 2
        x0, x1 = centre - half, centre + half
    return (max(0.0, x0), max(0.0, y0), min(1.0, x1), min(1.0, y1))


def view_index(views: tuple[str, ...] | list[str], view: str) -> int | None:
    return list(views).index(view) if view in views else None


def samples(example: Any, ctx: str, views: tuple[str, ...] | list[str], band_of: Callable[[str], Any],
            views_are_images: bool, width: float = 1.0, direct: int = 5) -> list[ChatSample]:
    """With the tool offered, ``direct`` of the questions other than decoration (all five by default; fewer: a
    rotation fixed by the vase's id, so every question keeps its share) are answered directly (when not to zoom),
    and the decoration question goes through the tool: one sample whose answer is the call on the front view's frieze
    (``band_of(shape)``: where the generator paints it, None for a shape it does not know), one that answers after
    seeing the crop (``width``: `decoration_box`'s). Records of unknown shape, or runs without a front view,
    get no tool samples."""
    rec = example.record
    fields = fields_of(rec)
    others = [q for q in rec.qa if q["dimension"] in DIMENSIONS and q["dimension"] != "decoration"]
    if direct < len(others):
        start = zlib.crc32(str(rec.id).encode()) % len(others)
        others = [others[(start + k) % len(others)] for k in range(direct)]
    out = [ChatSample(f"{rec.id}#{q['dimension']}#tool", example.images,
                      asked_context(example, ctx, q["dimension"]) + q["question"] + TOOL_NOTE,
                      q["answer"], q["dimension"], target=only(fields, q["dimension"])) for q in others]
    q = next((q for q in rec.qa if q["dimension"] == "decoration"), None)
    band = band_of(rec.shape)
    if q is None or band is None or "front" not in views:
        return out
    i = list(views).index("front")
    have = views_are_images and len(example.images) > i
    box = decoration_box(example.images[i], band, width=width) if have else (0.0, 0.0, 1.0, 1.0)
    call = zoom_call("front", box)
    zoomed = [*example.images, crop(example.images[i], box)] if have else example.images
    ctx = asked_context(example, ctx, "decoration")  # as every question: only its dimension's neighbour values
    return out + [ChatSample(f"{rec.id}#zoom-call", example.images, ctx + q["question"] + TOOL_NOTE, call, "zoom",
                             target=none_of(fields)),
                  ChatSample(f"{rec.id}#zoom-answer", zoomed, ctx + followup(q["question"], call), q["answer"],
                             "decoration", target=only(fields, "decoration"))]
