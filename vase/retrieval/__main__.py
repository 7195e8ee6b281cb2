"""Build or update the retrieval index of a dataset's training vases: ``python -m vase.retrieval`` takes the same
overrides as train.py (``data=...``, ``metrics.clip...``, ``retrieval.index_dir=...``).

    python -m vase.retrieval                                   # the synthetic set
    python -m vase.retrieval data=vasevqa3d data.root=/data/VaseVQA-3D metrics=paper

Prints what was indexed and, for the first validation vase, its nearest training vases. Training and evaluation with
``retrieval.k=K`` update the same index themselves; this command is for building it ahead of time or inspecting it.
"""

from __future__ import annotations

import sys

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from vase.config import (
    CONF_DIR,
    or_exit,
    preflight_overrides,
    run_entry,
    scratch_sweep_dir,
    validated,
)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def main(cfg: DictConfig) -> None:
    if not validated(cfg):
        return
    dm, counts = run_entry(_index, cfg)
    print(f"index: {counts}")
    if len(dm.val_set):
        rec = dm.val_set.records[0]
        print(f"nearest training vases of validation vase {rec.id}:\n{dm.val_set.contexts.get(rec.id, '')}")


def _index(cfg: DictConfig) -> tuple:
    with open_dict(cfg):
        cfg.retrieval.k = max(int(cfg.retrieval.k), 3)
    dm = instantiate(cfg.data, stage="sft", _convert_="partial")
    dm.prepare_data()
    dm.retrieval["k"] = 0  # setup without contexts; attach them here to print the counts
    dm.setup()
    dm.retrieval["k"] = int(cfg.retrieval.k)
    return dm, dm.attach_retrieval()


if __name__ == "__main__":
    sys.argv[1:] = or_exit(preflight_overrides, sys.argv[1:], CONF_DIR, "train")  # old names renamed
    scratch_sweep_dir(sys.argv)  # VASE_CHECK_CONFIG=1 on a sweep: its folders in a scratch folder
    main()
