"""Caption a split with a model and score the captions: the one routine behind ``evaluate.py action=generate`` and the
training pipeline's before/after rows."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vase.config import Decoding
from vase.metrics.paired import per_vase_scores
from vase.models.loading import pixel_bounds

log = logging.getLogger("vase")


def evaluate_captions(model: Any, processor: Any, dataset: Any, scorer: Any, out_dir: Path, name: str,
                      max_new_tokens: int, batch_size: int, image_score: bool = True, write: bool = True,
                      decoding: Decoding | None = None, extra: dict[str, Any] | None = None
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate (resumable JSONL ``generations_<name>.jsonl``, decoded by ``decoding``, default greedy) and score;
    writes ``results_<name>.json`` (with the decoding it used, and ``extra``: how the model trained) unless ``write``
    is off (the caller writes the scores itself)."""
    # lazy: torch, torchmetrics, pytorch_lightning
    from vase.eval.generate import generate_captions
    from vase.eval.scoring import write_results

    rows = generate_captions(model, processor, dataset, out_dir / f"generations_{name}.jsonl",
                             batch_size=batch_size, max_new_tokens=max_new_tokens, decoding=decoding)
    images = [dataset[i].images for i in range(len(dataset))] if image_score else None
    preds, refs = [r["caption"] for r in rows], [r["reference"] for r in rows]
    scores = scorer.score(preds, refs, images)
    if len(rows) > 1:  # each vase's term of every per-vase metric: intervals (leaderboard) and pairings need them
        per_vase, _, _ = per_vase_scores(scorer, preds, refs, weights=scorer.weights)
        scores["per_vase"] = {"ids": [r["id"] for r in rows], **{m: v.tolist() for m, v in per_vase.items()}}
    log.info("%s: %s", name, {k: round(v, 4) for k, v in scores.items() if isinstance(v, (int, float))})
    if getattr(scorer, "encoders", None):
        scores["encoders"] = scorer.encoders
    if write:
        write_results(out_dir / f"results_{name}.json", name, scores, {"decoding": (decoding or Decoding()).record(),
                                                                       "pixels": pixel_bounds(processor),
                                                                       **(extra or {})})
    return scores, rows
