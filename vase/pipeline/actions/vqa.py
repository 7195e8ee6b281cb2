"""``evaluate.py action=vqa``: per-dimension VQA accuracy, open-ended and/or multiple choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from vase.config import Decoding, EvalAction
from vase.pipeline.actions.common import adapter_trained, dataset_and_model

ACTION = EvalAction("per-dimension VQA accuracy, open-ended and/or multiple choice by letter or by option likelihood "
                "(vqa.protocol=open|mc|ll|both|open+ll)", loads_model=True, reads_split=True)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Answer each vase's six questions (open-ended and/or multiple choice) and report accuracy per dimension."""
    # lazy: torch, pytorch_lightning
    from vase.eval.vqa import evaluate_vqa, vqa_table

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset, model, processor = dataset_and_model(cfg)
    v = cfg.vqa
    scores = evaluate_vqa(model, processor, dataset, instantiate(cfg.reward, _convert_="partial"),
                          float(cfg.reward.tau), out, str(cfg.name), str(v.protocol), int(v.num_choices),
                          int(cfg.generation.batch_size), int(v.max_new_tokens),
                          {"split": cfg.split, "adapter": cfg.get("adapter"), "trained": adapter_trained(cfg)}, bool(v.get("zoom", False)),
                          int(v.get("zoom_calls", 1)), Decoding.of(cfg.generation))
    print("\n" + vqa_table(scores, str(cfg.name)))
    flat = {f"vqa/{p}/{d}": a for p, s in scores.items() for d, a in s["accuracy"].items()}
    flat.update({f"vqa/{p}/mean": s["mean"] for p, s in scores.items()})
    return {"scores": flat, "vqa": scores, "output": str(out)}
