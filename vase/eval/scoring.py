"""Scoring caption files: our JSONL and the paper's JSON format, matched by ``<uuid>_<n>``, with counts of the unmatched."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vase.data.layouts import paper_key
from vase.errors import DataError
from vase.io import atomic_write_json, atomic_write_text, read_json, read_jsonl
from vase.metrics.caption_metrics import CaptionScorer, markdown_table
from vase.metrics.embedding_cache import CachedTextEncoder
from vase.metrics.encoders import build_clip_encoder, cached_sentence_encoder
from vase.metrics.registry import extra_metrics
from vase.provenance import code_stamp


def encoders_label(metrics_cfg: Any) -> str:
    """The encoders a ``metrics`` group scores with, short: the CLIP model's and the sentence encoder's last path part
    (``clip-vit-base-patch32 + all-mpnet-base-v2`` for ``metrics=paper``, wherever their copies lie)."""
    def short(name: Any) -> str:
        return str(name).rsplit(":", 1)[-1].rstrip("/").rsplit("/", 1)[-1]

    return f"{short(metrics_cfg.clip.model)} + {short(metrics_cfg.text_encoder.model)}"


def build_scorer(metrics_cfg: Any) -> CaptionScorer:
    """A CaptionScorer from a ``metrics`` config group (encoders loaded once); ``scorer.encoders`` names them, and
    results files record it (``encoders``) so that a leaderboard can tell what is comparable."""
    clip = build_clip_encoder(metrics_cfg.clip)
    sent = cached_sentence_encoder(metrics_cfg.text_encoder.model, metrics_cfg.text_encoder.get("device", "cpu"))
    cache = metrics_cfg.get("embedding_cache")
    if cache:  # text embeddings on disk, keyed by the weights: references shared by many runs are encoded once
        clip, sent = CachedTextEncoder(clip, cache), CachedTextEncoder(sent, cache)
    weights = {k: float(v) for k, v in (metrics_cfg.get("weights") or {}).items()} or None
    scorer = CaptionScorer(clip, sent, weights, extra=extra_metrics(metrics_cfg.get("extra")))
    scorer.encoders = encoders_label(metrics_cfg)
    return scorer


@dataclass
class CaptionFile:
    """The keyed captions of one file, in file order; ``no_key`` counts items with neither an id nor an image."""

    path: Path
    items: list[tuple[str, str]]
    no_key: int = 0


def load_captions(path: str | Path) -> CaptionFile:
    """Keyed captions from the paper's JSON list (``{"images": [...], "caption": ...}``, keyed by
    `paper_key` of the first image) or our JSONL / JSON rows (``{"id", "caption"}``, keyed by id).

    Items without an id or image are counted and skipped, as the paper's scorer skips them; an item without a
    caption string is a DataError naming the file and the item.
    """
    path = Path(path)
    if path.suffix == ".jsonl":
        rows = read_jsonl(path)
    else:
        rows = read_json(path)
        if not isinstance(rows, list):
            raise DataError(f"{path}: expected a JSON list of caption objects, got {type(rows).__name__}")
    out = CaptionFile(path, [])
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{path}: item {n} is a {type(row).__name__}, not an object with a 'caption'")
        if "id" in row:
            key = str(row["id"])
        elif isinstance(row.get("images"), list) and row["images"]:
            key = paper_key(str(row["images"][0]))
        else:
            out.no_key += 1
            continue
        caption = row.get("caption")
        if not isinstance(caption, str):
            raise DataError(f"{path}: item {n} (key {key!r}) has no caption string (got {caption!r})")
        out.items.append((key, caption))
    return out


EXAMPLES = 5  # how many unmatched or repeated keys a result lists by name


def _repeated(keys: list[str]) -> list[str]:
    seen: set[str] = set()
    rep: dict[str, None] = {}
    for k in keys:
        if k in seen:
            rep[k] = None
        seen.add(k)
    return list(rep)


def match(generated: CaptionFile, reference: CaptionFile, duplicates: str = "last"
          ) -> tuple[list[str], list[str], list[str], dict[str, Any]]:
    """Pairs as the paper's scorer forms them: a repeated ground-truth key keeps its last caption, and the pairs
    follow the generated file's order (a repeated generated key gives a pair each time); unmatched items are
    skipped. Returns (ids, preds, refs) and counts with the first few unmatched and repeated keys by name.

    ``duplicates="error"`` raises instead, naming the file and the repeated keys.
    """
    if duplicates not in ("last", "error"):
        raise ValueError(f"score.duplicates={duplicates!r} must be 'last' or 'error'")
    rep_gen = _repeated([k for k, _ in generated.items])
    rep_ref = _repeated([k for k, _ in reference.items])
    if duplicates == "error":
        for f, rep in ((generated, rep_gen), (reference, rep_ref)):
            if rep:
                raise DataError(f"{f.path}: {len(rep)} key(s) appear more than once, e.g. {rep[:EXAMPLES]} "
                                f"(score.duplicates=error; 'last' keeps the last, as the paper's scorer does)")
    ref = dict(reference.items)  # the last caption of a repeated key wins
    ids, preds, refs, unmatched = [], [], [], []
    for key, caption in generated.items:
        if key in ref:
            ids.append(key)
            preds.append(caption)
            refs.append(ref[key])
        else:
            unmatched.append(key)
    used = set(ids)
    unmatched_ref = [k for k in ref if k not in used]
    counts: dict[str, Any] = {
        "matched": len(ids),
        "unmatched_generated": len(unmatched),
        "unmatched_reference": len(unmatched_ref),
        "repeated_generated": len(rep_gen),
        "repeated_reference": len(rep_ref),
        "no_key_generated": generated.no_key,
        "no_key_reference": reference.no_key,
        "examples": {"unmatched_generated": unmatched[:EXAMPLES], "unmatched_reference": unmatched_ref[:EXAMPLES],
                     "repeated_generated": rep_gen[:EXAMPLES], "repeated_reference": rep_ref[:EXAMPLES]},
    }
    return ids, preds, refs, counts


def write_results(path: str | Path, name: str, scores: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
    """Results JSON (with the code that made it, `vase.provenance.code_stamp`) plus a markdown table beside it (same stem,
    ``.md``)."""
    path = Path(path)
    atomic_write_json(path, {**scores, **(extra or {}), "code": code_stamp()})  # the code that made it
    atomic_write_text(path.with_suffix(".md"), markdown_table({name: scores}))
    return path
