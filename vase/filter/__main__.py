"""Curate photos as the paper did: ``python -m vase.filter`` (Hydra; config ``conf/curate.yaml``, group ``filter``).

    python -m vase.filter filter.input=/data/photos                                   # CLIP filter + best view
    python -m vase.filter filter.input=/data/photos filter.quality.checkpoint=Q.pt    # + the quality classifier
    python -m vase.filter action=train_quality filter.quality.train_dir=/data/labelled  # train Q.pt (0/ bad, 1/ good)
    python -m vase.filter action=synthetic                   # synthetic photos -> train the classifier -> filter them

A killed run resumes when the same command is run again; changing only thresholds or best-view settings re-decides
from the manifest without re-encoding.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from vase.config import (
    CONF_DIR,
    FILTER_ACTIONS,
    actions_help,
    or_exit,
    preflight_overrides,
    run_entry,
    scratch_sweep_dir,
    validated,
)
from vase.filter.synthetic_photos import generate_photos


def run(cfg: DictConfig) -> dict:
    """Run ``cfg.action``; returns the retention report (run, synthetic) or the classifier's metrics."""
    # lazy: torch, pytorch_lightning
    from vase.filter.quality import train_quality
    from vase.filter.runner import run_filter

    out_dir = Path(HydraConfig.get().runtime.output_dir)
    if cfg.action == "train_quality":
        path = train_quality(cfg.filter.quality, out_dir)
        print(f"quality classifier: {path}")
        return {"checkpoint": str(path)}
    if cfg.action == "synthetic":
        s = cfg.synthetic
        root = Path(s.root)
        generate_photos(root, int(s.objects), int(s.photos_per_object), int(s.seed),
                        classifier_set=int(s.classifier_set))
        with open_dict(cfg):
            if not cfg.filter.quality.checkpoint:
                cfg.filter.quality.merge_with(s.quality)
                cfg.filter.quality.train_dir = str(root / "quality")
                cfg.filter.quality.checkpoint = str(train_quality(cfg.filter.quality, out_dir))
            cfg.filter.input = str(root / "photos")
            cfg.filter.output = str(out_dir / "filtered")
    report = run_filter(cfg.filter)
    # lazy: torch
    from vase.filter.runner import report_markdown

    print(report_markdown(report))
    print(f"outputs: {cfg.filter.output}")
    return report


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="curate")
def main(cfg: DictConfig) -> None:
    if not validated(cfg):
        return
    run_entry(run, cfg)  # bad input or settings: one line naming the file or key, exit 2 (nothing lost)


if __name__ == "__main__":
    if "--help" in sys.argv or "-h" in sys.argv:
        print(actions_help(FILTER_ACTIONS, "python -m vase.filter"))  # then Hydra's own help
    sys.argv[1:] = or_exit(preflight_overrides, sys.argv[1:], CONF_DIR, "curate", FILTER_ACTIONS)  # old names renamed
    scratch_sweep_dir(sys.argv)  # VASE_CHECK_CONFIG=1 on a sweep: its folders in a scratch folder
    main()
