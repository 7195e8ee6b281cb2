"""``evaluate.py action=invrender``: inverse rendering; a predictor answers generator parameters, vase renders and
scores them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vase import markdown as md
from vase.config import Decoding, EvalAction
from vase.eval.invrender import run_invrender
from vase.io import atomic_write_json
from vase.pipeline.actions.common import dataset_and_model, eval_split, write_table
from vase.prompt_tasks.invrender import PROMPT, VaseParams

ACTION = EvalAction("inverse rendering: predictor=model|oracle|random answers generator parameters, rendered and "
                "scored", loads_model=lambda cfg: cfg.get("predictor") == "model", reads_split=True)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Inverse rendering (vase.eval.invrender): the model (or the oracle / a random predictor) answers generator
    parameters as JSON; vase builds, renders and scores them against each vase of ``split``."""
    # lazy: torch, pytorch_lightning
    from vase.eval.generate import GenerationItem, generate_rows, visuals_of

    v = cfg.invrender
    predictor = str(cfg.predictor)
    out = Path(cfg.output)
    answers = None
    if predictor == "model":
        dataset, model, processor = dataset_and_model(cfg)
        items = [GenerationItem(rec.id, visuals_of(dataset, i), PROMPT,
                                json.dumps(asdict(VaseParams.of_record(rec)))) for i, rec in enumerate(dataset.records)]
        rows = generate_rows(model, processor, items, out.parent / "answers_invrender.jsonl",
                             batch_size=int(cfg.generation.batch_size), max_new_tokens=int(v.max_new_tokens),
                             decoding=Decoding.of(cfg.generation))
        answers = {r["id"]: r["caption"] for r in rows}
    else:
        dataset = eval_split(cfg)
    result = run_invrender(dataset, Path(cfg.data.root), predictor, tuple(v.views), int(v.resolution),
                           int(cfg.seed), answers)
    if predictor == "model":
        result["decoding"] = Decoding.of(cfg.generation).record()
    atomic_write_json(out, result)
    s = result["summary"]

    def fmt(x: Any) -> str:
        return "n/a" if x is None else f"{x:.4f}"

    table = md.table_text(["predictor", "silhouette IoU ↑", "Chamfer ↓", "colour distance ↓", "unparseable", "n"],
                          [[predictor, fmt(s["iou"]), fmt(s["chamfer_distance"]), fmt(s["colour_distance"]),
                            s["unparseable"], s["n"]]])
    write_table(out, table)
    return {"scores": {f"invrender/{k}": x for k, x in s.items() if isinstance(x, (int, float))}, "output": str(out)}
