"""Check a dataset before a long run: every problem listed, none hidden behind the first.

    python -m vase.data.check /data/VaseVQA-3D                 # any layout vase reads (vase.data.layouts)
    python -m vase.data.check /data/train.jsonl --report r.json
    python evaluate.py action=check data=vasevqa3d data.root=/data/VaseVQA-3D

Finds: unreadable annotation files or lines, duplicate ids, records without a model (layouts that carry models) or
without one of the six dimensions (layouts that carry them), dates it cannot parse, missing or unreadable views and
listed media, corrupt GLBs, ids in both train and val, and ids or model fields that are paths rather than names
(``..``, separators, absolute, NUL or control characters, drive letters, over 200 bytes). Prints a summary and each problem; writes the same as JSON
where ``--report`` says (never inside the dataset; nothing is written without it); exits 1 when anything is wrong.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from vase import markdown as md
from vase.annotate.vocab import DIMENSIONS
from vase.choices import LAYOUTS
from vase.data.dataset import load_video
from vase.data.layouts import detect_layout, no_such_dataset, read_records
from vase.errors import DataError, VaseError
from vase.images import open_photo
from vase.io import WRITTEN_BY, atomic_write_json, is_within, name_problem, relpath_problem, safe_name, user_output
from vase.progress import progress_bar
from vase.render.renderer import load_glb
from vase.views import VIEWS, default_model, find_view, render_cache_root, view_path

TOOL = "vase.data.check"

KINDS = {
    "unreadable_file": "annotation file that cannot be read",
    "bad_line": "line or item that cannot be read",
    "missing_id": "item without an id",
    "duplicate_id": "id that appears more than once",
    "missing_model": "record without its GLB model",
    "corrupt_model": "GLB that cannot be read",
    "missing_dimension": "record without one of the six dimensions",
    "bad_date": "date that cannot be parsed",
    "bad_caption": "missing or unreadable caption",
    "bad_qa": "QA pair without question or answer",
    "missing_view": "view or listed media file that is missing",
    "unreadable_view": "view or listed media file that cannot be decoded",
    "split_overlap": "id in both train and val",
    "path_like_id": "id or model field that is a path, not a name (files are named by a hash of it)",
    "empty": "dataset or training split with no vases: nothing would train",
}
CARRIES = {"vase": {"models", "dimensions"}, "release": {"models", "dimensions"}, "paper_eval": set(), "swift": set()}


def _readable(path: Path) -> str | None:
    """None if the image or video decodes, else the reason."""
    if path.suffix.lower() in (".mp4", ".webm", ".mov", ".avi", ".mkv") or path.is_dir():
        try:
            load_video(path, max_frames=1)
        except DataError as e:
            return str(e)
        return None
    d = open_photo(path, min_side=1)
    return None if d.image is not None else d.reason


def _split_overlaps(splits: dict[str, list[Any]]) -> list[tuple[str, str, str]]:
    """Ids in more than one split (kind split_overlap)."""
    seen: dict[str, str] = {}
    out = []
    for split, rs in splits.items():
        for r in rs:
            if r.id in seen and seen[r.id] != split:
                out.append(("split_overlap", r.id, f"vase {r.id!r} is in both {seen[r.id]} and {split}"))
            seen.setdefault(r.id, split)
    return out


def _path_like(records: list[Any]) -> list[tuple[str, str, str]]:
    """Ids that are paths rather than names, and model fields that reach outside the dataset (kind path_like_id)."""
    out = []
    for r in {r.id: r for r in records}.values():
        if (why := name_problem(r.id)) is not None:
            out.append(("path_like_id", r.id, f"vase id {r.id!r} {why}: an id is a name, not a path; vase names its "
                                              f"files {safe_name(r.id)!r} instead"))
        if r.model and (why := relpath_problem(r.model)) is not None:
            out.append(("path_like_id", r.id, f"vase {r.id!r}: its model field {r.model!r} {why}; it must stay "
                                              f"inside the dataset"))
    return out


def _dimension_problems(records: list[Any], layout: str, stage: str, problems: list[tuple[str, str, str]],
                        info: list[str]) -> list[tuple[str, str, str]]:
    """Vases without some of the six dimensions, in layouts that carry them (kind missing_dimension). A vase with no
    dimensions at all (an ms-swift line without metadata, the paper's evaluation folder) trains captions: a note
    says what it cannot train, unless ``stage`` is ``grpo``, whose reward scores the six dimensions."""
    carries = "dimensions" in CARRIES[layout]
    bare = [r for r in records if len(r.missing_dimensions()) == len(DIMENSIONS)]
    captions_only = (not carries or layout == "swift") and stage != "grpo"  # bare vases are a note, not a fault
    if bare and captions_only:
        whole = "its records" if len(bare) == len(records) else f"{len(bare)} of its {len(records)} vases"
        info.append(f"{whole} state no six dimensions ({layout} layout without metadata): they train captions and "
                    f"their own QA; GRPO on the six dimensions and the per-dimension questions need them "
                    f"(python -m vase.data.check ... --stage grpo)")
    reported = {(k, i) for k, i, _ in problems}
    out = []
    for r in records:
        missing = r.missing_dimensions()
        if not missing or ("missing_dimension", r.id) in reported or ("bad_date", r.id) in reported:
            continue
        if captions_only and len(missing) == len(DIMENSIONS):
            continue
        why = " (GRPO's reward scores all six)" if stage == "grpo" else ""
        out.append(("missing_dimension", r.id, f"vase {r.id!r} lacks {missing}{why}"))
    return out


def check_dataset(path: str | Path, layout: str = "auto", views: list[str] | tuple[str, ...] = VIEWS,
                  models: bool = True, progress: bool = True, cache_dir: str | Path | None = None,
                  stage: str = "sft") -> dict[str, Any]:
    """Every problem of the dataset at ``path`` as a report dict (``problems``: kind, id, message). Views that vase
    rendered for it into ``cache_dir`` (``python -m vase.data.render --root``) count as present. ``stage`` is what the
    data should train: ``sft`` (captions and QA) or ``grpo`` (the six-dimension reward: every vase needs them)."""
    root = Path(path)
    rendered = render_cache_root(cache_dir, root) if cache_dir else None
    # views rendered at any settings count (at_settings: one folder per resolution and field of view)
    rendered_roots = ([rendered, *sorted(p for p in (rendered / "renders").glob("*") if p.is_dir())]
                      if rendered is not None else [])
    from_cache: set[str] = set()
    problems: list[tuple[str, str, str]] = []
    info: list[str] = []
    if not root.exists():
        raise no_such_dataset(root)
    layout = detect_layout(root) if layout == "auto" else layout
    try:
        splits = read_records(root, layout, problems)
    except DataError as e:  # a file that cannot be read at all: reported, and nothing more can be checked in it
        problems.append(("unreadable_file", "-", str(e)))
        splits = {}
    records = [r for rs in splits.values() for r in rs]
    if not records:
        problems.append(("empty", "-", f"{root}: no vase could be read ({layout} layout): nothing would train on it"))
    elif "train" in splits and not splits["train"]:
        problems.append(("empty", "train", f"{root}: its train split has no vases ({layout} layout)"))
    problems += _split_overlaps(splits)
    problems += _path_like(records)
    problems += _dimension_problems(records, layout, stage, problems, info)
    it: Any = records
    if progress and records:
        it = progress_bar(records, desc="checking vases", unit="vase", file=sys.stderr)
    checked: set[str] = set()
    for r in it:
        if r.id in checked:  # a repeated id is one problem (reported above), not a second set of file problems
            continue
        checked.add(r.id)
        if r.images or r.videos:
            for p in [Path(x) for x in (r.videos or r.images)]:
                if not p.exists():
                    problems.append(("missing_view", r.id, f"{r.where()}{p}: listed for vase {r.id!r} but missing"))
                elif (why := _readable(p)) is not None:
                    problems.append(("unreadable_view", r.id, f"{r.where()}{p}: {why}"))
        else:
            for v in views:
                p = find_view([root], v, r.id)
                if p is None and rendered_roots:
                    p = find_view(rendered_roots, v, r.id)
                    if p is not None:
                        from_cache.add(r.id)
                if p is None:
                    hint = " (its GLB can render it: python -m vase.data.render)" if r.model else ""
                    problems.append(("missing_view", r.id, f"{view_path(root, v, r.id)}: view {v!r} of vase "
                                                           f"{r.id!r} is missing{hint}"))
                elif (why := _readable(p)) is not None:
                    problems.append(("unreadable_view", r.id, f"{p}: {why}"))
        if "models" in CARRIES[layout]:
            glb = root / (r.model or default_model(r.id))
            if r.model and relpath_problem(r.model) is not None:
                pass  # reported above as path_like_id; never read outside the dataset
            elif not glb.is_file():
                problems.append(("missing_model", r.id, f"{glb}: no GLB model for vase {r.id!r}"))
            elif models:
                try:
                    load_glb(glb)
                except DataError as e:
                    problems.append(("corrupt_model", r.id, str(e)))
    if from_cache:
        info.append(f"views of {len(from_cache)} vases are not in the dataset but rendered in the cache ({rendered})")
    counts = Counter(k for k, _, _ in problems)
    return {
        "path": str(root.resolve()), "layout": layout, "records": len(records),
        "splits": {k: len(v) for k, v in splits.items()}, "ok": not problems,
        "counts": {k: counts[k] for k in KINDS if counts[k]}, "info": info,
        "problems": [{"kind": k, "id": i, "message": m} for k, i, m in problems],
    }


def format_report(report: dict[str, Any], per_kind: int = 20, json_report: bool = True) -> str:
    """The report for people: a summary table, then each problem (``per_kind`` shown of each kind; the rest are in
    the JSON report, or ``json_report=False``: said how to get one)."""
    splits = ", ".join(f"{k} {v}" for k, v in report["splits"].items())
    lines = [f"{report['path']}: layout {report['layout']}, {report['records']} vases ({splits or 'none read'})"]
    lines += [f"note: {x}" for x in report["info"]]
    if report["ok"]:
        return "\n".join([*lines, "no problems found"]) + "\n"
    lines += ["", *md.table(["problem", "count"], [[f"{KINDS[k]} ({k})", n] for k, n in report["counts"].items()],
                            align="lr")]
    for kind in report["counts"]:
        items = [p for p in report["problems"] if p["kind"] == kind]
        lines += ["", f"{kind}:"]
        lines += [f"  {p['message']}" for p in items[:per_kind]]
        if len(items) > per_kind:
            where = "all in the JSON report" if json_report else "--report FILE lists them all"
            lines.append(f"  ... and {len(items) - per_kind} more ({where})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="dataset folder or ms-swift JSONL file")
    ap.add_argument("--layout", default="auto", choices=["auto", *LAYOUTS])
    ap.add_argument("--views", nargs="+", default=list(VIEWS))
    ap.add_argument("--no-models", action="store_true", help="do not load every GLB (faster; missing ones still count)")
    ap.add_argument("--stage", choices=["sft", "grpo"], default="sft",
                    help="what the data should train: grpo needs the six dimensions of every vase")
    ap.add_argument("--report", help="where to write the JSON report of every problem (none is written without it); "
                                     "never over a file vase did not write, never inside the dataset")
    ap.add_argument("--force", action="store_true", help="replace an existing --report file whatever wrote it")
    ap.add_argument("--cache-dir", default=".cache",
                    help="vase's cache (paths.cache_dir): views rendered there for the dataset count as present")
    a = ap.parse_args(argv)
    report_path = Path(a.report).resolve() if a.report else None
    if report_path is not None and is_within(report_path, Path(a.path).resolve()):
        print(f"error: {report_path} lies inside the dataset, which is only read; pass --report elsewhere",
              file=sys.stderr)
        return 2
    try:
        if report_path is not None:
            user_output(report_path, "--report", TOOL, a.force)
        report = check_dataset(a.path, a.layout, a.views, models=not a.no_models, cache_dir=a.cache_dir,
                               stage=a.stage)
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if report_path is not None:
        atomic_write_json(report_path, {WRITTEN_BY: TOOL, **report})
    print(format_report(report, json_report=report_path is not None), end="")
    print(f"JSON report: {report_path}" if report_path else "JSON report: none written (--report FILE writes every "
                                                            "problem there)")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
