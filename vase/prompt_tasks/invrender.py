"""The inverse-rendering task: a model sees a vase's views and answers with the parameters of vase's procedural
generator as JSON (``data.mix=invrender`` trains it, ``python evaluate.py action=invrender`` scores it and the
``InvRender`` reward term rewards it). What is specific to the task lives here: its prompt, its answer
(`VaseParams`), how an answer is parsed, and how two silhouettes are compared. Building the answered vase is
the generator's (``vase.data.synthetic.build_from_params``); building, rendering and scoring answers is its runner's
(``vase.eval.invrender``).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from vase.annotate.vocab import terms
from vase.prompt_tasks.base import ChatSample, fields_of, none_of

TECHNIQUES = ("black-figure", "red-figure", "white-ground", "black-glaze")
RANGE = (0.5, 1.5)
MASK_BG = (255, 0, 255)  # a background no vase has, so silhouettes are exact
PROMPT = ("Describe this vase as the parameters of a procedural vase generator. Answer with JSON only: "
          '{"shape": one of [' + ", ".join(terms("shape")) + '], "height": 0.5-1.5, "body": 0.5-1.5, '
          '"neck": 0.5-1.5, "foot": 0.5-1.5, "handles": true or false, "technique": one of ['
          + ", ".join(TECHNIQUES) + "]}")


@dataclass(frozen=True)
class VaseParams:
    shape: str
    technique: str
    height: float = 1.0
    body: float = 1.0
    neck: float = 1.0
    foot: float = 1.0
    handles: bool = True

    @classmethod
    def of_record(cls, rec: Any) -> VaseParams:
        """The true parameters of a synthetic vase (the generator's proportions are the family's own)."""
        return cls(shape=rec.shape, technique=rec.technique)

    @classmethod
    def random(cls, rng: np.random.Generator) -> VaseParams:
        return cls(shape=str(rng.choice(terms("shape"))), technique=str(rng.choice(TECHNIQUES)),
                   height=float(rng.uniform(*RANGE)), body=float(rng.uniform(*RANGE)),
                   neck=float(rng.uniform(*RANGE)), foot=float(rng.uniform(*RANGE)), handles=bool(rng.random() < 0.5))


def parse_params(text: str) -> VaseParams | None:
    """The first JSON object in ``text`` as parameters, or None when it is missing, malformed or out of range.

    >>> parse_params('Sure: {"shape": "kylix", "technique": "red-figure", "height": 1.2, "handles": false}').height
    1.2
    >>> parse_params('{"shape": "teapot", "technique": "red-figure"}') is None
    True
    """
    m = re.search(r"\{.*?\}", text, flags=re.S)
    if not m:
        return None
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("shape") not in terms("shape") or obj.get("technique") not in TECHNIQUES:
        return None
    kw: dict[str, Any] = {"shape": obj["shape"], "technique": obj["technique"]}
    for k in ("height", "body", "neck", "foot"):
        if k in obj:
            if not isinstance(obj[k], (int, float)) or not RANGE[0] <= float(obj[k]) <= RANGE[1]:
                return None
            kw[k] = float(obj[k])
    if "handles" in obj:
        if not isinstance(obj["handles"], bool):
            return None
        kw["handles"] = obj["handles"]
    return VaseParams(**kw)


def silhouette_ious(pred: list[Any], target: list[Any]) -> list[float]:
    """IoU of the non-background pixels of each pair of renders (made over `MASK_BG`)."""
    out = []
    for a, b in zip(pred, target):
        ma = np.any(np.asarray(a) != MASK_BG, axis=-1)
        mb = np.any(np.asarray(b) != MASK_BG, axis=-1)
        union = (ma | mb).sum()
        out.append(float((ma & mb).sum() / union) if union else 1.0)
    return out


def frame_of(parts: list) -> tuple[tuple[float, float, float], float]:
    """The bounding sphere (centre, radius) of render parts: the cameras that see the original."""
    allv = np.concatenate([p.vertices for p in parts])
    lo, hi = allv.min(0), allv.max(0)
    return tuple(((lo + hi) / 2).tolist()), float(np.linalg.norm(hi - lo) / 2)


def samples(example: Any, ctx: str) -> list[ChatSample]:
    """One sample: the generator's parameters of a synthetic vase as JSON, rewarded by the ``InvRender`` term."""
    rec = example.record
    params = asdict(VaseParams.of_record(rec))
    return [ChatSample(f"{rec.id}#invrender", example.images, ctx + PROMPT, json.dumps(params), "invrender",
                       target={**none_of(fields_of(rec)), "invrender": params})]
