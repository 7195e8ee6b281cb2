"""The streaming photo filter: decode -> quality classifier -> CLIP fragment filter -> best view per object.

    python -m vase.filter filter.input=/data/photos                       # CLIP stage + best view
    python -m vase.filter filter.input=/data/photos filter.quality.checkpoint=<run>/quality_classifier.pt

Images stream through DataLoader workers (decode + both models' preprocessing) in fixed batches; the models see whole
batches. Every finished batch is appended to ``manifest.jsonl`` in one write (flushed and fsynced), so a killed run
resumes at the first unfinished batch and, because batches are the same, ends with the same numbers. Thresholds
that need all scores (a percentile) and best-view selection are applied afterwards from the manifest, so changing
them (``filter.clip.threshold``, ``percentile``, ``best_view.*``) re-decides without re-encoding anything.

The input folder is only read. The output folder holds the manifest, ``decisions.csv``, ``kept.txt``, the retention
report (``report.json``, ``report.md``: stage, in, out, retention %, the paper's Table 1), ``clip_scores.png`` and,
with ``filter.keep=link|copy``, ``kept/`` with links to (or copies of) the kept photos.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from vase import markdown as md
from vase.errors import ConfigError, DataError
from vase.filter.clip_filter import ClipScorer
from vase.images import iter_files, open_photo
from vase.io import (
    append_jsonl,
    atomic_directory,
    atomic_write_json,
    atomic_write_text,
    is_within,
    read_jsonl,
    repair_jsonl_tail,
    save_figure,
)
from vase.progress import progress_bar

MANIFEST = "manifest.jsonl"
FORMAT = 1


def _fingerprint_settings(cfg: Any) -> dict:
    """What decides a photo's recorded scores; a manifest written under other settings cannot be resumed."""
    q = cfg.quality
    c = cfg.clip
    return {
        "format": FORMAT, "min_side": int(cfg.min_side), "unusual_modes": cfg.unusual_modes, "draft": bool(cfg.draft),
        "batch_size": int(cfg.batch_size),
        "quality": {"checkpoint": str(q.checkpoint) if q.checkpoint else None, "threshold": float(q.threshold)},
        "clip": {"enabled": bool(c.enabled), "backend": c.backend, "model": str(c.model),
                 "pretrained": str(c.get("pretrained")), "good": list(c.good_prompts), "bad": list(c.bad_prompts),
                 "ensemble": c.ensemble, "view_description": c.get("view_description"),
                 "precision": c.get("precision", "fp32")},
    }


class _Decode(Dataset):
    """Decode one photo and apply the models' preprocessing, in a worker; never raises for a bad file."""

    def __init__(self, root: Path, files: list[str], transforms: dict[str, Any], min_side: int, unusual_modes: str,
                 draft_size: int | None) -> None:
        self.root, self.files, self.transforms = root, files, transforms
        self.min_side, self.unusual_modes, self.draft_size = min_side, unusual_modes, draft_size

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> dict:
        d = open_photo(self.root / self.files[i], self.min_side, self.unusual_modes, self.draft_size)
        item = {"index": i, "reason": d.reason, "note": d.note}
        if d.image is not None:
            try:
                for name, t in self.transforms.items():
                    item[name] = t(d.image)
            except Exception as e:  # a decoded image the preprocessing cannot take is a rejected photo, not a crash
                return {"index": i, "reason": f"preprocessing failed ({type(e).__name__}: {e})", "note": d.note}
        return item


def _collate(items: list[dict]) -> list[dict]:
    return items


def _read_manifest(path: Path) -> tuple[dict | None, dict[str, dict]]:
    """Header and records (last line per file wins); a torn last line from a kill is dropped (its batch is redone)."""
    rows = read_jsonl(path)
    if not rows:
        return None, {}
    return rows[0], {r["file"]: r for r in rows[1:] if isinstance(r, dict) and "file" in r}


def _check_paths(input_dir: Path, out: Path) -> None:
    if not input_dir.is_dir():
        raise ConfigError(f"filter.input={input_dir}: not a folder of photos")
    if is_within(out, input_dir) or is_within(input_dir, out):
        raise ConfigError(f"filter.output={out} and filter.input={input_dir} overlap; the input is only read, so the "
                          f"output must live outside it (and not contain it)")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise ConfigError(f"filter.output={out}: a non-empty folder that holds no {MANIFEST} of ours; choose an empty "
                          f"or new folder")


def score_photos(cfg: Any, input_dir: Path, out: Path, progress: bool = True) -> dict[str, dict]:
    """Stream every file under ``input_dir`` through decode, quality and CLIP; append to the manifest; return it."""
    _check_paths(input_dir, out)
    out.mkdir(parents=True, exist_ok=True)
    settings = _fingerprint_settings(cfg)
    mpath = out / MANIFEST
    header, rows = _read_manifest(mpath)
    if header is not None and (header.get("settings") != settings or header.get("input") != str(input_dir)):
        changed = sorted(k for k in settings if (header.get("settings") or {}).get(k) != settings[k])
        if header.get("input") != str(input_dir):
            changed.append("input")
        raise ConfigError(f"{mpath}: written for other settings ({', '.join(changed)}); resuming would mix scores. "
                          f"Choose another filter.output, or set the settings back")
    repair_jsonl_tail(mpath)  # a kill mid-append leaves a torn line: the next batch must start on a fresh one
    if header is None:
        atomic_write_text(mpath, json.dumps({"vase_filter": FORMAT, "input": str(input_dir), "settings": settings},
                                            sort_keys=True) + "\n")
    files = [str(p.relative_to(input_dir)) for p in iter_files(input_dir)]
    if not files:
        raise DataError(f"filter.input={input_dir}: no files to filter")
    bs = int(cfg.batch_size)
    batches = [list(range(i, min(i + bs, len(files)))) for i in range(0, len(files), bs)]
    todo = [b for b in batches if any(files[i] not in rows for i in b)]
    done = len(files) - sum(len(b) for b in todo)

    quality = clip = None
    transforms: dict[str, Any] = {}
    if cfg.quality.checkpoint and todo:
        # lazy: pytorch_lightning
        from vase.filter.quality import QualityScorer

        quality = QualityScorer(cfg.quality.checkpoint, cfg.device)
        transforms["quality"] = quality.transform
    if cfg.clip.enabled and todo:
        clip = ClipScorer(cfg.clip)
        transforms["clip"] = clip.transform
    draft = None
    if cfg.draft:
        sizes = [quality.spec.image_size if quality else 0, 224 if clip else 0]
        draft = max(sizes) or None
    ds = _Decode(input_dir, files, transforms, int(cfg.min_side), str(cfg.unusual_modes), draft)
    workers = int(cfg.num_workers)
    loader = DataLoader(ds, batch_sampler=todo, num_workers=workers, collate_fn=_collate,
                        prefetch_factor=2 if workers else None, persistent_workers=False)
    bar = None
    if progress:
        bar = progress_bar(total=len(files), initial=done, desc="filtering photos", unit="img")
    qthr = float(cfg.quality.threshold)
    started = time.perf_counter()
    for items in loader:
        recs = {it["index"]: {"file": files[it["index"]], "reason": it["reason"], "note": it["note"]} for it in items}
        ok = [it for it in items if it["reason"] is None]
        if quality is not None and ok:
            probs = quality(torch.stack([it["quality"] for it in ok]))
            for it, p in zip(ok, probs.tolist()):
                recs[it["index"]]["quality"] = round(p, 7)
            ok = [it for it, p in zip(ok, probs.tolist()) if p >= qthr]
        if clip is not None and ok:
            s = clip(torch.stack([it["clip"] for it in ok]))
            for j, it in enumerate(ok):
                for k, v in s.items():
                    recs[it["index"]][k] = round(float(v[j]), 7)
        lines = [recs[i] for i in sorted(recs)]
        append_jsonl(mpath, lines)
        if bar is not None:
            bar.update(len(lines))
    if bar is not None:
        bar.close()
    if todo:  # this session's throughput, beside the manifest (not in it: timing is not a result)
        atomic_write_json(out / "timing.json", {"images": sum(len(b) for b in todo),
                                                "seconds": round(time.perf_counter() - started, 3)})
    return _read_manifest(mpath)[1]


# ------------------------------------------------------------------------------------------------ decisions


def group_ids(files: list[str], cfg: Any, input_dir: Path) -> dict[str, str]:
    """Object id of each file by the configured rule: a regex with an ``id`` group on the file name's stem, or a
    metadata CSV column. A file the rule does not cover is its own group (counted in the report)."""
    rule = cfg.group_by
    if rule == "pattern":
        try:
            pat = re.compile(cfg.pattern)
        except re.error as e:
            raise ConfigError(f"filter.best_view.pattern={cfg.pattern!r} is not a regular expression ({e})") from e
        if "id" not in pat.groupindex:
            raise ConfigError(f"filter.best_view.pattern={cfg.pattern!r} needs a named group (?P<id>...)")
        out = {}
        for f in files:
            m = pat.match(Path(f).stem)
            out[f] = m.group("id") if m else f
        return out
    if rule == "metadata":
        path = Path(cfg.metadata) if cfg.metadata else None
        if path is None or not path.is_file():
            raise ConfigError(f"filter.best_view.metadata={cfg.metadata}: no such CSV file (group_by=metadata)")
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            cols = reader.fieldnames or []
            for col in (cfg.file_column, cfg.id_column):
                if col not in cols:
                    raise ConfigError(f"{path}: no column {col!r} (filter.best_view.file_column/id_column); "
                                      f"columns: {cols}")
            table = {row[cfg.file_column]: row[cfg.id_column] for row in reader}
        # the CSV may name files by base name or by path relative to the input folder
        return {f: table.get(f, table.get(Path(f).name, f)) for f in files}
    raise ConfigError(f"filter.best_view.group_by={rule!r} must be pattern or metadata")


def decide(cfg: Any, input_dir: Path, rows: dict[str, dict]) -> dict:
    """Apply the thresholds and best-view selection to the manifest; returns decisions and the report."""
    files = sorted(rows)
    stages = [{"stage": "readable image", "in": len(files)}]
    decoded = [f for f in files if rows[f]["reason"] is None]
    stages[0]["out"] = len(decoded)
    reasons: dict[str, str] = {f: rows[f]["reason"] for f in files if rows[f]["reason"] is not None}
    alive = decoded
    if cfg.quality.checkpoint:
        thr = float(cfg.quality.threshold)
        kept = [f for f in alive if rows[f].get("quality", -1.0) >= thr]
        for f in set(alive) - set(kept):
            reasons[f] = f"quality classifier: P(good)={rows[f].get('quality', float('nan')):.3f} < {thr}"
        stages.append({"stage": "quality classifier", "in": len(alive), "out": len(kept)})
        alive = kept
    clip_threshold = None
    scores = np.array([rows[f]["clip"] for f in alive]) if cfg.clip.enabled else np.array([])
    if cfg.clip.enabled:
        missing = [f for f in alive if "clip" not in rows[f]]
        if missing:
            raise DataError(f"{len(missing)} photo(s) have no CLIP score in the manifest (first: {missing[0]}); "
                            f"rerun the filter to finish scoring")
        clip_threshold = clip_threshold_of(cfg.clip, scores)
        kept = [f for f in alive if rows[f]["clip"] >= clip_threshold]
        for f in set(alive) - set(kept):
            reasons[f] = f"CLIP fragment filter: score {rows[f]['clip']:.4f} < {clip_threshold:.4f}"
        stages.append({"stage": "CLIP fragment filter", "in": len(alive), "out": len(kept)})
        alive = kept
    groups: dict[str, str] = {}
    if cfg.best_view.enabled and cfg.clip.enabled:
        if not cfg.clip.get("view_description"):
            raise ConfigError("filter.best_view needs filter.clip.view_description (the view to keep)")
        groups = group_ids(alive, cfg.best_view, input_dir)
        best: dict[str, str] = {}
        for f in alive:  # sorted: ties keep the first file name
            g = groups[f]
            if g not in best or rows[f]["view"] > rows[best[g]]["view"]:
                best[g] = f
        kept = sorted(best.values())
        for f in set(alive) - set(kept):
            reasons[f] = f"best view: {best[groups[f]]} shows object {groups[f]!r} better"
        stages.append({"stage": "best view per object", "in": len(alive), "out": len(kept)})
        alive = kept
    for s in stages:
        s["retention_pct"] = round(100.0 * s["out"] / s["in"], 1) if s["in"] else 0.0
    overall = {"stage": "overall", "in": len(files), "out": len(alive),
               "retention_pct": round(100.0 * len(alive) / len(files), 1) if files else 0.0}
    categories = Counter(_category(r) for f, r in reasons.items() if rows[f]["reason"] is not None)
    report = {
        "input": str(input_dir), "stages": stages, "overall": overall,
        "clip_threshold": clip_threshold, "quality_threshold": float(cfg.quality.threshold) if cfg.quality.checkpoint
        else None, "rejected_at_decode": dict(sorted(categories.items())),
        "converted": {f: rows[f]["note"] for f in decoded if rows[f].get("note")},
        "unreadable": {f: rows[f]["reason"] for f in files if rows[f]["reason"] is not None},
    }
    return {"kept": alive, "reasons": reasons, "report": report, "scores": scores, "groups": groups}


def clip_threshold_of(cfg: Any, scores: np.ndarray) -> float:
    """The given threshold, or the ``percentile`` of a seeded sample of ``sample_size`` scores (the paper: the 25th
    percentile of 500)."""
    if cfg.threshold is not None:
        return float(cfg.threshold)
    if len(scores) == 0:
        return float("inf")
    n = min(int(cfg.sample_size), len(scores))
    sample = np.random.default_rng(int(cfg.seed)).choice(scores, size=n, replace=False)
    return float(np.percentile(sample, float(cfg.percentile)))


def _category(reason: str) -> str:
    """A reason without its particulars: "tiny image 20x16 (shorter side ...)" -> "tiny image"."""
    return " ".join(w for w in reason.split(" (")[0].split() if not any(c.isdigit() for c in w)).rstrip(",")


def write_outputs(cfg: Any, input_dir: Path, out: Path, rows: dict[str, dict], result: dict) -> None:
    """decisions.csv, kept.txt, report.{json,md}, clip_scores.png and, as configured, kept/ links or copies."""
    kept = set(result["kept"])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["file", "kept", "quality", "clip", "view", "group", "reason"])
    for f in sorted(rows):
        r = rows[f]
        w.writerow([f, int(f in kept), r.get("quality", ""), r.get("clip", ""), r.get("view", ""),
                    result["groups"].get(f, ""), result["reasons"].get(f, "")])
    atomic_write_text(out / "decisions.csv", buf.getvalue())
    atomic_write_text(out / "kept.txt", "".join(f + "\n" for f in result["kept"]))
    atomic_write_json(out / "report.json", result["report"])
    atomic_write_text(out / "report.md", report_markdown(result["report"]))
    if cfg.clip.enabled and len(result["scores"]):
        histogram(result["scores"], result["report"]["clip_threshold"], out / "clip_scores.png")
    if cfg.keep in ("link", "copy"):
        with atomic_directory(out / "kept", replace=True) as tmp:
            for f in result["kept"]:
                dst = tmp / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                if cfg.keep == "link":
                    os.symlink((input_dir / f).resolve(), dst)
                else:
                    shutil.copy2(input_dir / f, dst)
    elif cfg.keep != "manifest":
        raise ConfigError(f"filter.keep={cfg.keep!r} must be manifest, link or copy")


def report_markdown(report: dict) -> str:
    """The retention table in the paper's Table 1 layout, then what decoding rejected."""
    lines = md.table(["Stage", "In", "Out", "Retention"],
                     [[s["stage"], s["in"], s["out"], f"{s['retention_pct']:.1f} %"]
                      for s in [*report["stages"], report["overall"]]], align="lrrr")
    if report.get("clip_threshold") is not None:
        lines += ["", f"CLIP threshold: {report['clip_threshold']:.4f}"]
    if report["unreadable"]:
        lines += ["", *md.table(["Rejected file", "Reason"], report["unreadable"].items())]
    if report["converted"]:
        lines += ["", *md.table(["Converted file", "Note"], report["converted"].items())]
    return "\n".join(lines) + "\n"


def histogram(scores: np.ndarray, threshold: float, path: Path) -> None:
    """Histogram of the CLIP scores with the threshold marked (written atomically)."""
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(scores, bins=min(50, max(10, len(scores) // 5)), color="#8c6d46")
    ax.axvline(threshold, color="#b22222", linestyle="--", label=f"threshold {threshold:.4f}")
    kept = int((scores >= threshold).sum())
    ax.set_title(f"CLIP fragment score: {kept} of {len(scores)} kept")
    ax.set_xlabel("sim(good prompts) - sim(bad prompts)")
    ax.set_ylabel("photos")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def run_filter(cfg: Any, progress: bool = True) -> dict:
    """Score (resuming), decide, write; returns the report."""
    if not cfg.input:
        raise ConfigError("filter.input is not set: the folder of photos to filter")
    input_dir = Path(cfg.input).expanduser().resolve()
    out = Path(cfg.output).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"filter.output={cfg.output}: is a file; give a folder (new, or one the filter wrote)")
    rows = score_photos(cfg, input_dir, out, progress)
    result = decide(cfg, input_dir, rows)
    write_outputs(cfg, input_dir, out, rows, result)
    return result["report"]
