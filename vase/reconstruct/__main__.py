"""``python -m vase.reconstruct``: an image-to-3D generator over a folder (config ``conf/generate3d.yaml``).

    python -m vase.reconstruct input=/data/curated_photos                        # procedural silhouette fit
    python -m vase.reconstruct reconstruct=triposg input=... reconstruct.generator.cwd=/opt/TripoSG

Exits 1 when any object failed (each listed in ``failures.json``), 2 for a configuration error.
"""

from __future__ import annotations

import json
import sys

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig

from vase.config import (
    CONF_DIR,
    or_exit,
    preflight_overrides,
    run_entry,
    scratch_sweep_dir,
    validated,
)
from vase.reconstruct.base import reconstruct_folder


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="generate3d")
def main(cfg: DictConfig) -> None:
    if not validated(cfg):
        return
    report = run_entry(_reconstruct, cfg)
    print(json.dumps({"output": str(cfg.output), **report}, indent=1))
    if report["failed"]:
        sys.exit(1)


def _reconstruct(cfg: DictConfig) -> dict:
    # the generator is built here, inside the run's lifecycle: a bad reconstruct.generator value is its failure
    return reconstruct_folder(instantiate(cfg.reconstruct.generator), cfg.input, cfg.output)


if __name__ == "__main__":
    sys.argv[1:] = or_exit(preflight_overrides, sys.argv[1:], CONF_DIR, "generate3d")  # old names renamed
    scratch_sweep_dir(sys.argv)  # VASE_CHECK_CONFIG=1 on a sweep: its folders in a scratch folder
    main()
