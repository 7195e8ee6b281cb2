"""Scoring caption files: our JSONL and the paper's JSON format, matched by ``<uuid>_<n>``, with counts of the unmatched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vase.annotate.records import image_key
from vase.errors import DataError
from vase.io import atomic_write_json, atomic_write_text, read_json
from vase.metrics.caption import CaptionScorer


def build_scorer(metrics_cfg: Any) -> CaptionScorer:
    """A CaptionScorer from a ``metrics`` config group (encoders loaded once)."""
    from vase.metrics.encoders import build_clip_encoder, cached_sentence_encoder

    clip = build_clip_encoder(metrics_cfg.clip)
    sent = cached_sentence_encoder(metrics_cfg.text_encoder.model, metrics_cfg.text_encoder.get("device", "cpu"))
    weights = {k: float(v) for k, v in (metrics_cfg.get("weights") or {}).items()} or None
    return CaptionScorer(clip, sent, weights)


def load_captions(path: str | Path) -> dict[str, str]:
    """``{key: caption}`` from the paper's JSON list (``{"images": [...], "caption": ...}``) or our JSONL rows.

    Keys are ``<uuid>_<n>`` (taken from the first image name in the paper's format, or the row's ``id``).
    """
    path = Path(path)
    if path.suffix == ".jsonl":
        from vase.eval.generate import read_jsonl

        rows = read_jsonl(path)
    else:
        rows = read_json(path)
        if not isinstance(rows, list):
            raise DataError(f"{path}: expected a JSON list of caption objects")
    out: dict[str, str] = {}
    for n, row in enumerate(rows):
        if not isinstance(row, dict) or "caption" not in row:
            raise DataError(f"{path}: item {n} has no 'caption' key")
        if "id" in row:
            key = str(row["id"])
        elif row.get("images"):
            key = image_key(str(row["images"][0]))
        else:
            raise DataError(f"{path}: item {n} has neither 'id' nor 'images' to match it by")
        if key in out:
            raise DataError(f"{path}: id {key!r} appears twice (item {n})")
        out[key] = str(row["caption"])
    return out


def match(
    generated: dict[str, str], reference: dict[str, str]
) -> tuple[list[str], list[str], list[str], dict[str, int]]:
    """Aligned (ids, preds, refs) over the ids both sides have, in reference order, and the counts."""
    ids = [k for k in reference if k in generated]
    counts = {
        "matched": len(ids),
        "unmatched_generated": len(set(generated) - set(reference)),
        "unmatched_reference": len(set(reference) - set(generated)),
    }
    return ids, [generated[k] for k in ids], [reference[k] for k in ids], counts


def write_results(path: str | Path, name: str, scores: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
    """Results JSON plus a markdown table beside it (same stem, ``.md``)."""
    from vase.eval.report import markdown_table

    path = Path(path)
    atomic_write_json(path, {**scores, **(extra or {})})
    atomic_write_text(path.with_suffix(".md"), markdown_table({name: scores}))
    return path
