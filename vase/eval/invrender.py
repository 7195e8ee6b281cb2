"""Inverse rendering (IR3D-Bench's "what I cannot create, I do not understand", for vases): a model sees a vase's
views and answers with the parameters of vase's procedural generator as JSON; vase builds that vase, renders it from
the same cameras and scores it against the original. This is the runner; the prompt task itself (prompt, answer,
parsing) is ``vase.prompt_tasks.invrender``.

    python evaluate.py action=invrender predictor=oracle   # the true parameters: silhouette IoU 1.0
    python evaluate.py action=invrender predictor=random   # seeded random parameters: the floor
    python evaluate.py action=invrender adapter=<run>/adapter   # predictor=model (default): the VLM answers

Parameters (`VaseParams`): ``shape`` (a shape family of the generator), ``height``, ``body``, ``neck`` and
``foot`` (multipliers of the family's proportions, 0.5-1.5), ``handles`` (true/false) and ``technique`` (which sets
the colours). Scores per vase: silhouette IoU per view (and their mean), Chamfer distance of the two meshes (seeded
surface samples, in the original's frame: a wrong size counts), colour distance (mean absolute RGB difference over
the pixels both silhouettes cover, 0-1). An answer that is not valid JSON with valid values is counted as
unparseable and scores IoU 0.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from vase.data.synthetic import build_from_params
from vase.errors import ConfigError
from vase.prompt_tasks.invrender import MASK_BG, VaseParams, frame_of, parse_params, silhouette_ious
from vase.render.renderer import VIEW_DIRECTIONS, Renderer, RenderSettings, load_glb, load_scene, parts_from_scene
from vase.views import model_file


def score_params(params: VaseParams | None, target_glb: str | Path, renderer: Any, views: tuple[str, ...],
                 samples: int = 4000) -> dict[str, Any]:
    """Silhouette IoU per view and mean, Chamfer distance and colour distance of ``params`` against the vase in
    ``target_glb``, both seen by the original's cameras; unparseable (None) scores IoU 0 and no distances."""
    # lazy: torch
    from vase.eval.vaseeval import Settings, as_mesh, geometry_metrics, surface_samples

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
            scored = score_params(params, model_file(root, rec.model, rec.id), r, views)
            scored["params"] = asdict(params) if params else None
            if raw is not None:
                scored["answer"] = raw
            items[rec.id] = scored
    return {"predictor": predictor, "summary": summarize(items), "items": items}
