"""``vase evaluate`` (``vase-evaluate``; ``python evaluate.py`` in a checkout runs this too): run one evaluation action (``action=``, default ``generate``) from the registry ``vase.config.EVAL_ACTIONS``.

    python evaluate.py --help                                  # every action, one line each
    python evaluate.py                                         # generate: tiny model, synthetic val split, scored
    python evaluate.py adapter=logs/train/runs/<time>/adapter  # a trained adapter
    python evaluate.py model=qwen2_5_vl_7b data=vasevqa3d data.root=/data/VaseVQA-3D metrics=paper
    python evaluate.py action=vqa adapter=<run>/adapter        # per-dimension VQA accuracy
    python evaluate.py action=score generated=G.json ground_truth=T.json output=OUT.json

`--help` lists the actions (one module each in ``vase.pipeline.actions`` and one ``conf/action/<name>.yaml``), with any
an installed package registers under the entry-point group ``vase.eval_actions``. generate writes results.json (the
caption metrics: docs/glossary.md), a markdown table beside it, and the generations as resumable JSONL (a rerun
skips what is done).

What it runs: `vase.pipeline.evaluate`.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from vase.cli.project import command_name, groups_help, use_project
from vase.cli.version import version_line
from vase.config import (
    CONF_DIR,
    EVAL_ACTIONS,
    actions_help,
    load_plugins,
    or_exit,
    preflight_overrides,
    run_entry,
    scratch_sweep_dir,
    validated,
)
from vase.loggers import finish_wandb
from vase.pipeline.evaluate import run_evaluation
from vase.pipeline.reach import reach_check


def _run(cfg: DictConfig) -> None:
    if not validated(cfg, reach=reach_check):  # VASE_CHECK_CONFIG=1: the dataset, checkpoint, tracking server too
        return
    try:
        out = run_entry(run_evaluation, cfg)  # a bad input is one line and exit 2; the run record says how it ended
        if "check" in out and not out["check"]["ok"]:
            sys.exit(1)  # action=check: a dataset with problems fails the command, as python -m vase.data.check does
    finally:
        finish_wandb()


def main() -> None:
    """The command: installed packages' actions loaded, its overrides checked before Hydra composes, then the action."""
    if "--version" in sys.argv[1:]:
        print(version_line())
        return
    argv, conf = or_exit(use_project, sys.argv[1:])  # --config-dir: the user's project's conf/, before vase's
    # installed packages' modules (entry points "vase.eval_actions"), then the project's (conf/plugins.yaml)
    or_exit(load_plugins, conf)
    if "--help" in argv or "-h" in argv:  # the actions and groups, then Hydra's help: the composed config
        print(groups_help("evaluate", conf) + "\n" + actions_help(command=command_name("evaluate")))
    argv = or_exit(preflight_overrides, argv, CONF_DIR, "evaluate", EVAL_ACTIONS, [conf])  # a name 0.2 changed: the new one
    sys.argv = [sys.argv[0], *argv]
    scratch_sweep_dir(sys.argv)  # VASE_CHECK_CONFIG=1 on a sweep: its folders in a scratch folder
    hydra.main(version_base="1.3", config_path=str(conf), config_name="evaluate")(_run)()
