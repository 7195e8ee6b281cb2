"""``evaluate.py action=generate`` (the default): caption a split with a model (and adapter) and score the captions:
results.json and its table, the generations as resumable JSONL (a rerun skips what is done)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vase.config import Decoding, EvalAction
from vase.eval.captions import evaluate_captions
from vase.models.loading import pixel_bounds
from vase.pipeline.actions.common import adapter_trained, dataset_and_model

ACTION = EvalAction("caption a split with a model (and adapter) and score the captions (the default)", loads_model=True,
                reads_split=True)


def run(cfg: DictConfig) -> dict[str, Any]:
    # lazy: torch, torchmetrics
    from vase.eval.scoring import build_scorer, write_results
    from vase.metrics.caption_metrics import markdown_table

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset, model, processor = dataset_and_model(cfg)
    scorer = build_scorer(cfg.metrics)
    decoding = Decoding.of(cfg.generation)
    scores, rows = evaluate_captions(model, processor, dataset, scorer, out.parent, out.stem,
                                     int(cfg.generation.max_new_tokens), int(cfg.generation.batch_size),
                                     bool(cfg.metrics.get("image_score", True)), write=False, decoding=decoding)
    write_results(out, str(cfg.name), scores, {"name": str(cfg.name), "split": cfg.split, "adapter": cfg.get("adapter"),
                                               "trained": adapter_trained(cfg), "decoding": decoding.record(),
                                               "pixels": pixel_bounds(processor)})
    print("\n" + markdown_table({str(cfg.name): scores}))
    return {"scores": scores, "rows": rows, "output": str(out), "table": {str(cfg.name): scores}}
