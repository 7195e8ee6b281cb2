"""Can the model's vision tower see what the zoom-in tool shows? A linear probe on its features, before any training.

For every vase whose decoration is a figural scene (told apart, in a set drawn with ``data.synthetic.detail``, by the
figures' attributes), the front view and the crop the zoom data teaches (``data.zoom_width`` of the frieze) go
through the processor (fitted to ``max_pixels``, as in training) and the model's vision tower; a logistic regression on
the pooled features (mean and max over the visual tokens) is fitted on the training vases and scored on the held-out
ones, for the view and for the crop, beside the majority scene. A crop that the probe reads no better than the view
gives the tool nothing to teach; a gap is what SFT with zoom data can at best reach for.

    python -m vase.eval.zoom_probe experiment=beyond_zoom                # train.py's overrides; one draw (-m: all)
    python -m vase.eval.zoom_probe experiment=beyond_zoom data.zoom_width=1.0 data.synthetic.seed=5

Each probe also writes ``zoom_probe.json`` (its result, the draw, the crop's width, the command's overrides, the
machine and the code) into its run directory (``logs/beyond_zoom/runs/<time>/``), from which ``make readme-tables``
writes the findings page's table.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig
from sklearn.linear_model import LogisticRegression

from vase import markdown as md
from vase.config import CONF_DIR, or_exit, preflight_overrides, scratch_sweep_dir, validated
from vase.data.synthetic import SUBJECT_GLYPHS
from vase.errors import DataError, VaseError
from vase.eval.stats import bootstrap_ci
from vase.io import atomic_write_json
from vase.models.loading import load_model_and_processor
from vase.prompt_tasks.zoom import crop, decoration_box, view_index
from vase.provenance import machine_stamp


def vision_features(model: Any, processor: Any, images: list[Any]) -> np.ndarray:
    """Per image: the mean and the max over its visual tokens of the vision tower's output (one row each)."""
    # lazy: torch
    import torch

    tower = model.model.visual if hasattr(model, "model") and hasattr(model.model, "visual") else model.visual
    rows = []
    for im in images:
        batch = processor.image_processor(images=[im], return_tensors="pt")
        pixels = batch["pixel_values"]
        if getattr(model, "dtype", None) is not None:
            pixels = pixels.to(model.dtype)
        with torch.no_grad():
            out = tower(pixels, grid_thw=batch["image_grid_thw"])
        f = out.pooler_output if hasattr(out, "pooler_output") else out
        f = (f if torch.is_tensor(f) else f[0]).float()
        rows.append(torch.cat([f.mean(0), f.max(0).values]).numpy())
    return np.stack(rows)


def figural(dataset: Any) -> list[int]:
    """Indices of ``dataset``'s vases decorated with a figural scene (those with an attribute to read)."""
    return [i for i, rec in enumerate(dataset.records) if rec.decoration in SUBJECT_GLYPHS]


def _inputs(dataset: Any, band_of: Any, width: float) -> tuple[list[Any], list[Any], list[str]]:
    front = view_index(dataset.views, "front")
    if front is None:
        raise DataError(f"the zoom probe needs the front view; {dataset.root} has views {list(dataset.views)}")
    views, crops, labels = [], [], []
    for i in figural(dataset):
        ex = dataset[i]
        band = band_of(ex.record.shape)
        if band is None:
            continue
        view = ex.images[front]
        views.append(view)
        crops.append(crop(view, decoration_box(view, band, width=width)))
        labels.append(ex.record.decoration)
    return views, crops, labels


def probe(model: Any, processor: Any, train_set: Any, val_set: Any, band_of: Any, width: float = 1.0,
          seed: int = 0) -> dict[str, Any]:
    """Held-out accuracy of a linear probe on the vision tower's features of the view and of the crop (with 95 %
    bootstrap intervals), the majority scene's, and the counts."""
    tr_views, tr_crops, y_tr = _inputs(train_set, band_of, width)
    va_views, va_crops, y_va = _inputs(val_set, band_of, width)
    if len(set(y_tr)) < 2 or not y_va:
        raise DataError(f"the zoom probe needs training vases of two figural scenes or more and held-out ones: "
                        f"{len(y_tr)} training ({len(set(y_tr))} scenes), {len(y_va)} held out")
    commonest = max(sorted(set(y_tr)), key=y_tr.count)
    out: dict[str, Any] = {"train": len(y_tr), "heldout": len(y_va), "scenes": len(set(y_tr)), "width": width}
    majority = [float(y == commonest) for y in y_va]
    out["majority"] = {"accuracy": float(np.mean(majority)), "ci": bootstrap_ci(majority, seed=seed)}
    for name, tr, va in (("view", tr_views, va_views), ("crop", tr_crops, va_crops)):
        clf = LogisticRegression(max_iter=5000).fit(vision_features(model, processor, tr), y_tr)
        hits = [float(p == y) for p, y in zip(clf.predict(vision_features(model, processor, va)), y_va)]
        out[name] = {"accuracy": float(np.mean(hits)), "ci": bootstrap_ci(hits, seed=seed)}
    return out


def format_probe(result: dict[str, Any]) -> str:
    """The probe's result as a short table."""
    lines = [f"figural vases: {result['train']} training, {result['heldout']} held out, {result['scenes']} scenes; "
             f"crop: {result['width']:g} of the frieze's width", "",
             *md.table(["features of", "held-out accuracy [95 % CI]"],
                       [[name, f"{100 * r['accuracy']:.1f} % [{100 * r['ci'][0]:.1f}, {100 * r['ci'][1]:.1f}]"]
                        for name, r in ((n, result[n]) for n in ("majority", "view", "crop"))])]
    return "\n".join(lines)


def write_probe(run_dir: Path, result: dict[str, Any], data_seed: int | None, overrides: list[str]) -> Path:
    """``zoom_probe.json`` in the probe's own run directory (atomic): the result with the draw (None: not a synthetic
    set), the overrides it was run with, and where and by which code it was made."""
    record = {**result, "data_seed": data_seed, "overrides": list(overrides), "machine": machine_stamp()}
    return atomic_write_json(run_dir / "zoom_probe.json", record)


def _main() -> None:
    # lazy: the datamodule pulls in pytorch_lightning, torch and torchmetrics; only the command needs it
    from vase.data.datamodule import frieze_band

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
    def main(cfg: DictConfig) -> None:
        if not validated(cfg):
            return
        try:
            dm = instantiate(cfg.data, stage="sft", _convert_="partial")
            dm.prepare_data()
            dm.setup()
            model, processor = load_model_and_processor(cfg.model)
            result = probe(model.eval(), processor, dm.train_set, dm.val_set, frieze_band,
                           width=float(cfg.data.get("zoom_width", 1.0)), seed=int(cfg.seed))
        except VaseError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        hc = HydraConfig.get()
        synthetic = cfg.data.get("synthetic")
        out = write_probe(Path(hc.runtime.output_dir), result, int(synthetic.seed) if synthetic else None,
                          list(hc.overrides.task))
        print(format_probe(result))
        print(f"written: {out}")

    sys.argv[1:] = or_exit(preflight_overrides, sys.argv[1:], CONF_DIR, "train")  # old names renamed

    scratch_sweep_dir(sys.argv)  # VASE_CHECK_CONFIG=1 on a sweep: its folders in a scratch folder
    if not any(a in ("-m", "--multirun") or a.startswith("hydra.mode=") for a in sys.argv[1:]):
        sys.argv.append("hydra.mode=RUN")  # one probe, though an experiment (beyond_zoom) sweeps: -m for its sweep
    main()


if __name__ == "__main__":
    _main()
