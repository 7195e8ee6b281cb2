"""``vase train`` (``vase-train``; ``python train.py`` in a checkout runs this too). Train a vase model: compose the Hydra config, validate it, then prepare data, fit, evaluate and report.

    python train.py                              # tiny model, synthetic vases, LoRA SFT on CPU
    python train.py experiment=demo              # what `make demo` runs
    python train.py model=qwen2_5_vl_7b stage=grpo trainer=deepspeed_zero3 init_adapter=<sft run>/adapter
    python train.py -m sweep=reward_weights      # a sweep over reward weights
    python train.py --cfg job                    # print the composed config and stop

A bad value fails before any model loads, with one line naming its key (e.g. `reward.tau=1.7 must lie in [0, 1]`).

What it runs: `vase.pipeline.train`.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from vase.cli.project import groups_help, use_project
from vase.cli.version import version_line
from vase.config import (
    CONF_DIR,
    load_plugins,
    or_exit,
    preflight_overrides,
    run_entry,
    scratch_sweep_dir,
    validated,
)
from vase.loggers import finish_wandb
from vase.pipeline.reach import reach_check
from vase.sacct import quiet_sacct_warnings


def _run(cfg: DictConfig) -> float | None:
    if not validated(cfg, reach=reach_check):  # VASE_CHECK_CONFIG=1: the dataset, checkpoint, tracking server too
        return None
    # lazy: the pipeline loads torch and Lightning (seconds), which --help, --cfg and a bad value never need
    from vase.pipeline.train import objective, run_training
    from vase.training.callbacks import TrainingInterrupted

    try:
        out = run_entry(run_training, cfg)  # a bad input is one line and exit 2; the run record says how it ended
    except TrainingInterrupted as e:  # the checkpoint is saved and its line printed: requeue, or exit as the signal asks
        e.exit()
    finally:
        finish_wandb()
    # a sweeper (e.g. optuna) optimises the returned number, the one `optimized_metric` names
    metric = cfg.get("optimized_metric")
    if metric:
        return objective(out, str(metric))
    return None


def main() -> None:
    """The command: its overrides checked before Hydra composes, then the run (or ``--version``)."""
    if "--version" in sys.argv[1:]:
        print(version_line())
        return
    argv, conf = or_exit(use_project, sys.argv[1:])  # --config-dir: the user's project's conf/, before vase's
    # installed packages' modules (entry points "vase.eval_actions"), then the project's (conf/plugins.yaml): their
    # report kinds, prompt tasks and mixes are known before the config is checked
    or_exit(load_plugins, conf)
    if "--help" in argv or "-h" in argv:
        print(groups_help("train", conf))  # then Hydra's help: the composed config (conf/hydra/default.yaml)
    argv = or_exit(preflight_overrides, argv, CONF_DIR, "train", None, [conf])  # a name 0.2 changed: the new one
    sys.argv = [sys.argv[0], *argv]
    scratch_sweep_dir(sys.argv)  # VASE_CHECK_CONFIG=1 on a sweep: its folders in a scratch folder
    quiet_sacct_warnings()  # a sweep on a cluster without accounting: submitit's warning once, not every poll
    hydra.main(version_base="1.3", config_path=str(conf), config_name="train")(_run)()
