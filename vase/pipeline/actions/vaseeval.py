"""``evaluate.py action=vaseeval``: 3D reconstructions scored against ground-truth GLBs (VaseEval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vase.config import EvalAction
from vase.data.layouts import read_keyed
from vase.errors import ConfigError
from vase.io import atomic_write_json, is_within
from vase.pipeline.actions.common import write_table

ACTION = EvalAction("score 3D reconstructions against ground-truth GLBs: gt_dir=... 'methods={name: dir}'", logs=False,
                writes=("{name}", "{stem}.md", "{stem}_sheet.png"))


def run(cfg: DictConfig) -> dict[str, Any]:
    """VaseEval (vase.eval.vaseeval): reconstruction metrics of each method's GLBs against ``gt_dir``; writes the
    JSON to ``output``, a markdown table and a contact sheet beside it."""
    # lazy: torch
    from vase.eval.vaseeval import Settings, contact_sheet, markdown_table, run_vaseeval

    v = cfg.vaseeval
    if not cfg.get("gt_dir"):
        raise ConfigError("gt_dir is not set: the folder of ground-truth GLBs (action=vaseeval)")
    settings = Settings(samples=int(v.samples), seed=int(v.seed), chamfer=str(v.chamfer), align=str(v.align),
                        f_threshold=float(v.f_threshold), normals=str(v.normals), views=tuple(v.views),
                        resolution=int(v.resolution), lpips_weights=v.lpips.weights, lpips_net=str(v.lpips.net),
                        sheet_items=int(v.sheet_items))
    captions = None
    if v.get("captions"):
        keyed = read_keyed(Path(v.captions), "a caption")
        captions = {k: (x if isinstance(x, str) else x.get("caption", "")) for k, vals in keyed.items() for x in vals[-1:]}
    clip = None
    if v.get("clip", True):
        # lazy: torch, torchmetrics
        from vase.metrics.encoders import build_clip_encoder

        clip = build_clip_encoder(cfg.metrics.clip)
    methods = {str(k): str(p) for k, p in (cfg.methods or {}).items()}
    out = Path(cfg.output)
    for src in [cfg.gt_dir, *methods.values()]:  # the meshes compared are only read: results go elsewhere
        if is_within(out.parent, src):
            raise ConfigError(f"output={out} lies inside {src}, a folder of meshes VaseEval only reads; "
                              f"write the results elsewhere")
    result = run_vaseeval(cfg.gt_dir, methods, settings, clip, captions)
    sheet = contact_sheet(result, out.with_name(out.stem + "_sheet.png"), settings.sheet_items)
    result.pop("_renders", None)
    result["contact_sheet"] = str(sheet) if sheet else None
    atomic_write_json(out, result)
    table = markdown_table(result)
    write_table(out, table)
    return {"vaseeval": result}
