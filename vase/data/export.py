"""Write a dataset in another layout (vase.data.layouts): to train with ms-swift, to score with the paper's tools,
or to hand over in the release's form. The source is only read; the destination must be new or empty. Views come
from the dataset or vase's render cache (``--cache-dir``); missing ones are rendered into the cache first.

    python -m vase.data.export SRC OUT --to swift          # ms-swift JSONL (train.jsonl, val.jsonl) + the views
    python -m vase.data.export SRC OUT --to swift-grpo     # ms-swift GRPO lines: prompt, solution, six dimensions
    python -m vase.data.export SRC OUT --to paper_eval     # groundTruth.json + one view folder per vase (JPEG)
    python -m vase.data.export SRC OUT --to release        # annotations/{captions,qa_pairs,metadata}.json + views + models
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from vase.annotate.records import VaseRecord, raw_metadata
from vase.annotate.vocab import DIMENSIONS
from vase.config import check_only
from vase.data.dataset import load_views, models_to_render, read_rgb
from vase.data.layouts import detect_layout, no_such_dataset, read_records
from vase.errors import DataError, VaseError
from vase.io import atomic_directory, atomic_write_text, inside, is_within, safe_name
from vase.prompt_tasks.base import fields_of, only
from vase.prompts import CAPTION_PROMPT
from vase.render.renderer import RenderSettings, render_dataset
from vase.views import VIEWS, at_settings, model_file, render_cache_root


def _check_fresh(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{out}: exists and is not empty; export writes into a new or empty folder only")


def _fresh(out: Path) -> None:
    _check_fresh(out)
    out.mkdir(parents=True, exist_ok=True)


def check_output(src: Path, out: Path) -> None:
    """The export goes outside the source, which is only read (and into a new or empty folder: `_fresh`)."""
    if is_within(out, src) or is_within(src, out):
        raise DataError(f"{out}: lies inside the source dataset {src.resolve()} (or holds it), which is only read; "
                        f"export to a folder outside it")


def _save(img: Any, out: Path, *parts: str, **kw: Any) -> str:
    """Save ``img`` at ``out/parts`` (refused outside ``out``: names come from the data); returns the relative path."""
    target = inside(out, *parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    img.save(target, **kw)
    return "/".join(parts)


def export_release(splits: dict[str, list[VaseRecord]], image_roots: list[Path], src: Path, out: Path) -> Path:
    """The release's documented layout; captions as a list of objects, QA as a mapping, metadata as raw lines.
    The release names its files by vase id, so each vase's id there is its safe file name (`safe_name`):
    the id itself unless it was path-like."""
    _fresh(out)
    recs = [r for rs in splits.values() for r in rs]
    for r in recs:
        name = safe_name(r.id)
        for view, img in zip(VIEWS, _views_of(r, image_roots)):
            _save(img, out, "images", view, f"{name}.png")
        if r.model:
            glb = inside(out, "models", f"{name}.glb")
            glb.parent.mkdir(exist_ok=True)
            shutil.copy2(model_file(src, r.model, r.id), glb)
    ann = out / "annotations"
    atomic_write_text(ann / "captions.json", json.dumps([{"image": f"{safe_name(r.id)}.png", "caption": r.caption}
                                                         for r in recs], indent=1, ensure_ascii=False))
    atomic_write_text(ann / "qa_pairs.json", json.dumps({safe_name(r.id): r.qa for r in recs}, indent=1,
                                                        ensure_ascii=False))
    atomic_write_text(ann / "metadata.json", json.dumps([{"model_id": safe_name(r.id), "metadata": raw_metadata(r)}
                                                         for r in recs if r.has_dimensions], indent=1,
                                                        ensure_ascii=False))
    return out


def export_paper_eval(splits: dict[str, list[VaseRecord]], image_roots: list[Path], out: Path,
                      split: str = "val") -> Path:
    """groundTruth.json plus ``<id>/<view>.jpg`` folders, as the paper's eval/qwen.py and compare.py read them."""
    _fresh(out)
    recs = splits[split] if split in splits else [r for rs in splits.values() for r in rs]
    for r in recs:
        for view, img in zip(VIEWS, _views_of(r, image_roots)):
            _save(img, out, safe_name(r.id), f"{view}.jpg", quality=95)
    atomic_write_text(out / "groundTruth.json", json.dumps([{"images": [f"{safe_name(r.id)}.jpg"], "caption": r.caption}
                                                            for r in recs], indent=1, ensure_ascii=False))
    return out


def _views_of(r: VaseRecord, image_roots: list[Path]) -> list[Any]:
    """A record's views: its own listed images (an ms-swift file names them), else the views looked up by id."""
    if r.images:
        return [read_rgb(Path(p), f"image {p!r} of vase {r.id!r}") for p in r.images]
    return load_views(image_roots, r.id, VIEWS)


def swift_grpo_line(r: VaseRecord, question: str, answer: str, dimension: str | None,
                    media: dict[str, Any]) -> dict[str, Any]:
    """A GRPO line as ms-swift reads it: the user turn only, the reference answer as ``solution``, and the six
    dimensions as columns (``dating`` as [start, end]) that vase's reward plugin reads; a QA line states only its
    own dimension (the others are null: not expected of a one-phrase answer, as vase's own QA reward has it)."""
    fields = fields_of(r)
    if dimension is not None:
        fields = only(fields, dimension)
    return {"messages": [{"role": "user", "content": question}], "solution": answer, **media, "id": r.id,
            "task": "caption" if dimension is None else dimension, **fields}


def export_swift(splits: dict[str, list[VaseRecord]], image_roots: list[Path], out: Path, final: Path | None = None,
                 relative: bool = False, grpo: bool = False) -> Path:
    """ms-swift JSONL per split: a caption line and one line per QA pair, the six views as ``images``, plus
    ``id`` and ``metadata`` columns (ms-swift passes extra columns to reward functions).

    Image paths are absolute, as the files will lie at ``final`` (the folder the export appears as; ``out`` is
    where it is being built), so the file works from any directory; ``relative`` writes them relative to the
    export folder instead (for a folder that will move: run ms-swift there, or set ``ROOT_IMAGE_DIR`` to it).
    ``grpo`` writes GRPO lines (`swift_grpo_line`) and needs the six dimensions of every vase."""
    _fresh(out)
    base = (final or out).expanduser().resolve()
    if grpo:
        lacking = [r.id for rs in splits.values() for r in rs if not r.has_dimensions]
        if lacking:
            raise DataError(f"--to swift-grpo: {len(lacking)} vase(s) lack some of the six dimensions the reward "
                            f"scores (e.g. {lacking[:3]}); GRPO lines need all six (export --to swift trains captions)")
    for split, recs in splits.items():
        lines = []
        for r in recs:
            rel = [_save(img, out, "images", view, f"{safe_name(r.id)}.png")
                   for view, img in zip(VIEWS, _views_of(r, image_roots))]
            paths = rel if relative else [str(base / p) for p in rel]
            tags = "<image>" * len(paths)
            turns = [(r.prompt or CAPTION_PROMPT, r.caption, None)] + [
                (q["question"], q["answer"], q.get("dimension")) for q in r.qa]
            for question, answer, dim in turns:
                if grpo:
                    known = dim if dim in DIMENSIONS else None
                    if dim is not None and known is None:
                        continue  # a free-form question: nothing of the reward's to score it by
                    lines.append(swift_grpo_line(r, tags + question, answer, known, {"images": paths}))
                    continue
                extra = {"id": r.id, **({"metadata": raw_metadata(r)} if r.has_dimensions else {}),
                         **({"system": r.system} if r.system else {})}
                lines.append({"messages": [{"role": "user", "content": tags + question},
                                           {"role": "assistant", "content": answer}], "images": paths, **extra})
        atomic_write_text(out / f"{split}.jsonl", "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    return out


def views_for_export(src: Path, splits: dict[str, list[VaseRecord]], layout: str, cache_dir: Path,
                     settings: RenderSettings | None = None) -> list[Path]:
    """Where an export reads views: the dataset's own, then vase's render cache for it (``python -m vase.data.render``
    and training render there); views missing from both are rendered into the cache first, as training does. The
    dataset itself is never written."""
    settings = settings or RenderSettings()
    # the folder training and python -m vase.data.render use for these settings (one per resolution and field of view)
    cache = at_settings(render_cache_root(cache_dir, src), settings.resolution, settings.fov_deg)
    records = None if layout == "vase" else [r for rs in splits.values() for r in rs]
    pairs = models_to_render(src, VIEWS, records=records, missing_splits_ok=True)
    if pairs:
        render_dataset(src, pairs, settings, views=VIEWS, out_root=cache)
    return [src, cache]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--to", required=True, choices=["release", "paper_eval", "swift", "swift-grpo"])
    ap.add_argument("--from-layout", default="auto")
    ap.add_argument("--relative", action="store_true",
                    help="ms-swift image paths relative to OUT (default: absolute, usable from any directory)")
    ap.add_argument("--cache-dir", default=".cache",
                    help="vase's cache: views are read from (and missing ones rendered into) its renders/ folder")
    ap.add_argument("--resolution", type=int, default=224, help="of views rendered for the export")
    a = ap.parse_args()
    if check_only():  # the README's commands are checked this far by the tests
        print(f"config ok: --to {a.to} (export arguments parsed; nothing read or written)")
        return
    src, out = Path(a.src), Path(a.out)
    try:
        if not src.exists():
            raise no_such_dataset(src)
        check_output(src, out)
        layout = detect_layout(src) if a.from_layout == "auto" else a.from_layout
        splits = read_records(src, layout)
        _check_fresh(out)  # before any rendering
        roots = views_for_export(src, splits, layout, Path(a.cache_dir), RenderSettings(resolution=a.resolution))
        if out.exists():
            out.rmdir()  # new or empty (checked): the export is built beside it and appears whole, or not at all
        with atomic_directory(out) as tmp:
            if a.to == "release":
                export_release(splits, roots, src, tmp)
            elif a.to == "paper_eval":
                export_paper_eval(splits, roots, tmp)
            else:
                export_swift(splits, roots, tmp, final=out, relative=a.relative, grpo=a.to == "swift-grpo")
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {a.to} layout to {out}")


if __name__ == "__main__":
    main()
