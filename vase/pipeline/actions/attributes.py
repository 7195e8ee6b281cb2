"""``evaluate.py action=attributes``: the six-head attribute baseline on frozen CLIP view features."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from vase.config import EvalAction
from vase.io import atomic_write_json
from vase.pipeline.actions.common import datamodule_of, write_table

ACTION = EvalAction("the six-head attribute baseline on frozen CLIP view features", reads_split=True,
                writes=("{name}", "{stem}.md", "attribute_heads.pt"))


def run(cfg: DictConfig) -> dict[str, Any]:
    """The six-head attribute baseline (vase.metrics.attributes): frozen features of the views
    (``attributes.features``), heads trained on the train split, scored on ``split`` by the open-ended VQA rule; a
    majority-class row gives the level to beat."""
    # lazy: torch, torchmetrics, pytorch_lightning
    from vase.eval.vqa import score_vqa, vqa_table
    from vase.metrics.attributes import fit_heads, majority_rows, predict_rows

    a = cfg.attributes
    datamodule = datamodule_of(cfg)
    train, evald = datamodule.dataset("train"), datamodule.dataset(cfg.split)
    model, encoder, ex = fit_heads(a, train, evald, int(cfg.seed))
    reward = instantiate(cfg.reward, _convert_="partial")
    tau = float(cfg.reward.tau)
    scores = {"open": score_vqa(predict_rows(model, ex, evald.records), reward, tau)["open"]}
    chance = {"open": score_vqa(majority_rows(train.records, evald.records), reward, tau)["open"]}
    out = Path(cfg.output)
    # lazy: torch, torchmetrics, pytorch_lightning
    from vase.metrics.attributes import save_heads

    heads = save_heads(model, encoder, out.with_name("attribute_heads.pt"))
    result = {"name": "six-head baseline", "split": cfg.split, "vqa": scores, "majority_class": chance,
              "encoder": encoder, "checkpoint": str(heads)}
    atomic_write_json(out, result)
    table = vqa_table(scores, "six-head baseline") + "\n".join(vqa_table(chance, "majority class").splitlines()[2:]) + "\n"
    write_table(out, table)
    flat = {f"vqa/open/{d}": v for d, v in scores["open"]["accuracy"].items()}
    flat["vqa/open/mean"] = scores["open"]["mean"]
    return {"scores": flat, "vqa": scores, "output": str(out)}
