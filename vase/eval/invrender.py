"""Inverse rendering (IR3D-Bench's "what I cannot create, I do not understand", for vases): a model sees a vase's
views and answers with the parameters of vase's procedural generator as JSON; vase builds that vase, renders it from
the same cameras and scores it against the original.

    python evaluate.py task=invrender predictor=oracle     # the true parameters: silhouette IoU 1.0
    python evaluate.py task=invrender predictor=random     # seeded random parameters: the floor
    python evaluate.py task=invrender adapter=<run>/adapter   # predictor=model (default): the VLM answers

Parameters (:class:`VaseParams`): ``shape`` (a shape family of the generator), ``height``, ``body``, ``neck`` and
``foot`` (multipliers of the family's proportions, 0.5-1.5), ``handles`` (true/false) and ``technique`` (which sets
the colours). Scores per vase: silhouette IoU per view (and their mean), Chamfer distance of the two meshes (seeded
surface samples, in the original's frame: a wrong size counts), colour distance (mean absolute RGB difference over
the pixels both silhouettes cover, 0-1). An answer that is not valid JSON with valid values is counted as
unparseable and scores IoU 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vase.annotate.vocab import terms
from vase.errors import ConfigError

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


def build_from_params(p: VaseParams):
    """The textured mesh of ``p``: the family's profile with its foot (lowest 12 %), neck (above the widest point)
    and body radii and its height scaled; the family's handles or none; the technique's colours in plain bands."""
    from vase.annotate.records import VaseRecord
    from vase.data.synthetic import SHAPE_SPECS, ShapeSpec, paint_texture, textured_vase

    base = SHAPE_SPECS[p.shape]
    widest = max(base.profile, key=lambda q: q[1])[0]
    profile = tuple((y, r * (p.foot if y < 0.12 else p.neck if y > widest + 0.1 else p.body)) for y, r in base.profile)
    spec = ShapeSpec(profile=profile, height=base.height * p.height, handles=base.handles if p.handles else (),
                     band=base.band)
    rec = VaseRecord("params", "Athenian", p.technique, p.shape, (-500, -475), "palmettes and lotus buds",
                     "unattributed")
    return textured_vase(spec, paint_texture(rec, np.random.default_rng(0)))


def silhouette_ious(pred: list[Any], target: list[Any]) -> list[float]:
    """IoU of the non-background pixels of each pair of renders (made over :data:`MASK_BG`)."""
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


def score_params(params: VaseParams | None, target_glb: str | Path, renderer: Any, views: tuple[str, ...],
                 samples: int = 4000) -> dict[str, Any]:
    """Silhouette IoU per view and mean, Chamfer distance and colour distance of ``params`` against the vase in
    ``target_glb``, both seen by the original's cameras; unparseable (None) scores IoU 0 and no distances."""
    from vase.eval.vaseeval import Settings, as_mesh, geometry_metrics, surface_samples
    from vase.render.renderer import VIEW_DIRECTIONS, load_glb, load_scene, parts_from_scene

    target_parts = load_glb(target_glb)
    frame = frame_of(target_parts)
    dirs = [VIEW_DIRECTIONS[v] for v in views]
    target = [np.asarray(im) for im in renderer.render_parts(target_parts, dirs, background=MASK_BG, frame=frame)]
    if params is None:
        return {"iou": 0.0, "iou_per_view": {v: 0.0 for v in views}, "chamfer_distance": None,
                "colour_distance": None, "parsed": False}
    mesh = build_from_params(params)
    pred = [np.asarray(im) for im in renderer.render_parts(parts_from_scene(mesh), dirs, background=MASK_BG,
                                                           frame=frame)]
    ious = dict(zip(views, silhouette_ious(pred, target)))
    colour = []
    for a, b in zip(pred, target):
        both = np.any(a != MASK_BG, axis=-1) & np.any(b != MASK_BG, axis=-1)
        if both.any():
            colour.append(float(np.abs(a[both].astype(float) - b[both].astype(float)).mean() / 255.0))
    gt_mesh = as_mesh(load_scene(target_glb))
    geo = geometry_metrics(surface_samples(mesh, samples, 0), surface_samples(gt_mesh, samples, 0), Settings())
    return {"iou": float(np.mean(list(ious.values()))), "iou_per_view": ious,
            "chamfer_distance": geo["chamfer_distance"], "colour_distance": float(np.mean(colour)) if colour else None,
            "parsed": True}


def summarize(items: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Means over vases (distances over the parsed answers only) and the unparseable count."""
    parsed = [x for x in items.values() if x["parsed"]]

    def mean(key: str) -> float | None:
        vals = [x[key] for x in parsed if x.get(key) is not None]
        return float(np.mean(vals)) if vals else None

    return {"n": len(items), "unparseable": len(items) - len(parsed),
            "iou": float(np.mean([x["iou"] for x in items.values()])) if items else None,
            "chamfer_distance": mean("chamfer_distance"), "colour_distance": mean("colour_distance")}


def run_invrender(dataset: Any, root: Path, predictor: str, views: tuple[str, ...], resolution: int = 128,
                  seed: int = 0, answers: dict[str, str] | None = None) -> dict[str, Any]:
    """Score every vase of ``dataset`` (GLBs under ``root``) with the ``oracle``, ``random`` or ``model`` answers."""
    from vase.render.renderer import Renderer, RenderSettings

    if predictor not in ("oracle", "random", "model"):
        raise ConfigError(f"predictor={predictor!r} must be oracle, random or model")
    rng = np.random.default_rng(seed)
    items: dict[str, dict[str, Any]] = {}
    with Renderer(RenderSettings(resolution=resolution)) as r:
        for rec in dataset.records:
            if predictor == "oracle":
                params, raw = VaseParams.of_record(rec), None
            elif predictor == "random":
                params, raw = VaseParams.random(rng), None
            else:
                raw = (answers or {}).get(rec.id, "")
                params = parse_params(raw)
            scored = score_params(params, root / rec.model, r, views)
            scored["params"] = asdict(params) if params else None
            if raw is not None:
                scored["answer"] = raw
            items[rec.id] = scored
    return {"predictor": predictor, "summary": summarize(items), "items": items}
