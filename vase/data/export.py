"""Write a dataset in another layout (vase.data.layouts): to train with ms-swift, to score with the paper's tools,
or to hand over in the release's form. The source is only read; the destination must be new or empty.

    python -m vase.data.export SRC OUT --to swift          # ms-swift JSONL (train.jsonl, val.jsonl) + the views
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
from vase.data.dataset import load_views
from vase.data.layouts import read_records
from vase.errors import DataError, VaseError
from vase.io import atomic_directory, atomic_write_text, inside, is_within, safe_name
from vase.prompts import CAPTION_PROMPT
from vase.views import VIEWS, model_file


def _fresh(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{out}: exists and is not empty; export writes into a new or empty folder only")
    out.mkdir(parents=True, exist_ok=True)


def check_output(src: Path, out: Path) -> None:
    """The export goes outside the source, which is only read (and into a new or empty folder: :func:`_fresh`)."""
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
    The release names its files by vase id, so each vase's id there is its safe file name (:func:`safe_name`):
    the id itself unless it was path-like."""
    _fresh(out)
    recs = [r for rs in splits.values() for r in rs]
    for r in recs:
        name = safe_name(r.id)
        for view, img in zip(VIEWS, load_views(image_roots, r.id, VIEWS)):
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
        for view, img in zip(VIEWS, load_views(image_roots, r.id, VIEWS)):
            _save(img, out, safe_name(r.id), f"{view}.jpg", quality=95)
    atomic_write_text(out / "groundTruth.json", json.dumps([{"images": [f"{safe_name(r.id)}.jpg"], "caption": r.caption}
                                                            for r in recs], indent=1, ensure_ascii=False))
    return out


def export_swift(splits: dict[str, list[VaseRecord]], image_roots: list[Path], out: Path) -> Path:
    """ms-swift JSONL per split: a caption line and one line per QA pair, the six views as ``images``, plus
    ``id`` and ``metadata`` columns (ms-swift passes extra columns to reward functions)."""
    _fresh(out)
    for split, recs in splits.items():
        lines = []
        for r in recs:
            paths = [_save(img, out, "images", view, f"{safe_name(r.id)}.png")
                     for view, img in zip(VIEWS, load_views(image_roots, r.id, VIEWS))]
            extra = {"id": r.id, **({"metadata": raw_metadata(r)} if r.has_dimensions else {})}
            tags = "<image>" * len(paths)
            turns = [(r.prompt or CAPTION_PROMPT, r.caption)] + [(q["question"], q["answer"]) for q in r.qa]
            for question, answer in turns:
                lines.append({"messages": [{"role": "user", "content": tags + question},
                                           {"role": "assistant", "content": answer}], "images": paths, **extra})
        atomic_write_text(out / f"{split}.jsonl", "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--to", required=True, choices=["release", "paper_eval", "swift"])
    ap.add_argument("--from-layout", default="auto")
    a = ap.parse_args()
    src, out = Path(a.src), Path(a.out)
    try:
        check_output(src, out)
        splits = read_records(src, a.from_layout)
        _fresh(out)
        out.rmdir()  # new or empty (checked): the export is built beside it and appears whole, or not at all
        with atomic_directory(out) as tmp:
            if a.to == "release":
                export_release(splits, [src], src, tmp)
            elif a.to == "paper_eval":
                export_paper_eval(splits, [src], tmp)
            else:
                export_swift(splits, [src], tmp)
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {a.to} layout to {out}")


if __name__ == "__main__":
    main()
