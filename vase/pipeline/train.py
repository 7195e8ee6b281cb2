"""``run_training``: what ``python train.py`` runs, top to bottom, one call per step into its room: check every input
(`vase.pipeline.build.check_run`), start (claim the run's folder, load the model, merging an SFT adapter first, build
the data and the loggers), then for each stage (``stage``, and ``followup`` if set) build, fit and evaluate
(`vase.pipeline.evaluation`), then finish (`vase.pipeline.finish.finish_run`: the end's metrics, the report, the
record). Everything takes a plain DictConfig, so tests drive it with Hydra's compose API.

The command that runs it: `vase.cli.train` (``vase train``, ``python train.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf, open_dict

import vase.config  # noqa: F401  (registers the config resolvers, e.g. vase.wandb_offline)
from vase import runs
from vase.config import check_only
from vase.errors import ConfigError
from vase.io import atomic_write_json, atomic_write_text, read_json
from vase.loggers import build_loggers, log_config, log_hypothesis_start, start_comparison
from vase.models.loading import load_model_and_processor
from vase.pipeline.build import (
    build_callbacks,
    build_datamodule,
    build_stage_module,
    build_trainer,
    check_run,
    slurm_master_address,
    slurm_placement,
    slurm_task_line,
)
from vase.pipeline.evaluation import RunEvaluation
from vase.pipeline.finish import finish_run
from vase.pipeline.learned import learned_heads
from vase.pipeline.sft_cache import shared_sft_adapter
from vase.reports.hypothesis import hypothesis_of
from vase.rewards.reward import effective_weights

log = logging.getLogger("vase")


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """The stages a run goes through, one call each: check every input, start (the folder, the model, the data,
    the loggers), train and evaluate each stage, finish (the end's metrics, the report, the record).

    With ``followup`` set (a second stage config, e.g. GRPO after SFT), the first stage's adapter is merged and the
    second stage trains a fresh adapter on top, in the same run; its outputs go to ``<run>/<followup name>/``.
    """
    if runs.finished_sweep_job(cfg.paths.output_dir, str(cfg.get("resume") or "never")):
        return _kept(Path(cfg.paths.output_dir))
    hypothesis_metrics = check_run(cfg)  # one line for a bad input, before any model loads
    run = _start(cfg, hypothesis_metrics)
    for i, (stage, stage_dir) in enumerate(run.stages):
        _train_stage(cfg, run, i, stage, stage_dir)
    finish_run(cfg, run.out_dir, run.ev, run.loggers, hypothesis_metrics, str(run.stages[-1][0].name),
               run.datamodule, run.module, run.trainer is not None and run.trainer.is_global_zero)
    ev = run.ev
    return {"results": ev.results, "history": ev.histories.get(str(cfg.stage.name), []), "histories": ev.histories,
            "vqa": ev.vqa, "output_dir": str(run.out_dir), "module": run.module}


@dataclass
class _Run:
    """What a run has built by its first stage, and what the stages leave for the next one and for the end."""

    out_dir: Path
    stages: list[tuple[DictConfig, Path]]
    model: Any
    processor: Any
    datamodule: Any
    loggers: list[Any]
    ev: RunEvaluation
    merged: list[str]  # the adapters merged into the model so far (its lineage)
    shared_sft: Path | None  # the cache's shared SFT adapter this run started from (writable: vase's own)
    module: Any = None
    trainer: Any = None


def _start(cfg: DictConfig, hypothesis_metrics: list[str]) -> _Run:
    """The run's place (SLURM's master address, its folder claimed, the shared SFT), its model (an initial adapter,
    e.g. from SFT, merged first, as the paper merged LoRA before RL: the new stage's adapter trains on top and its
    reference, adapter off, is the merged model), its data, its loggers (the config and the hypothesis's measures
    sent first: MLflow's comparison plots the first metric a run logs) and its evaluations."""
    slurm_master_address()  # a job over several SLURM nodes whose names do not resolve: the address from SLURM
    placement = slurm_task_line()
    if placement:
        print(placement, flush=True)
    out_dir, init_adapter = _claim(cfg)
    log.info("loading model %s", cfg.model.name_or_path)
    model, processor = load_model_and_processor(cfg.model, adapter=init_adapter, merge=True)
    datamodule = build_datamodule(cfg, processor, cfg.stage.name)
    loggers = build_loggers(cfg)
    log_config(loggers, cfg, out_dir / "config.yaml")
    log_hypothesis_start(loggers, [*start_comparison(hypothesis_of(cfg)), *hypothesis_metrics])
    stages = [(cfg.stage, out_dir)]
    if cfg.get("followup"):
        stages.append((cfg.followup, out_dir / str(cfg.followup.name)))
    shared_sft = None if cfg.get("init_adapter") or not init_adapter else Path(init_adapter)
    return _Run(out_dir, stages, model, processor, datamodule, loggers, RunEvaluation(cfg, processor, out_dir, loggers),
                [str(init_adapter)] if init_adapter else [], shared_sft)


def _train_stage(cfg: DictConfig, run: _Run, i: int, stage: DictConfig, stage_dir: Path) -> None:
    """One stage: on top of the previous stage's adapter (merged), build its module and trainer, fit (resuming a
    checkpoint where one is found), keep its history, and evaluate it."""
    ev = run.ev
    if i > 0:
        run.model = run.module.model.merge_and_unload()  # the previous stage's adapter becomes part of the base
        run.merged.append(str(run.stages[i - 1][1] / "adapter"))
        run.datamodule = build_datamodule(cfg, run.processor, stage.name, int(stage.batch_size))
    ev.trained = trained_with(stage)
    lineage = {"base": str(cfg.model.name_or_path), "merged_adapters": list(run.merged), "trained": ev.trained}
    run.module = module = build_stage_module(stage, run.model, run.processor, cfg, lineage)
    ckpt = Path(cfg.ckpt_path) if i == 0 and cfg.get("ckpt_path") else runs.resume_checkpoint(
        run.out_dir, stage_dir, str(cfg.get("resume") or "never"))
    if ckpt is not None and not cfg.get("ckpt_path"):
        print(f"resuming {stage.name} from {ckpt} (resume=auto; resume=never starts afresh){slurm_placement()}")
    run.trainer = trainer = build_trainer(cfg, stage, build_callbacks(cfg, None if i == 0 else stage_dir), run.loggers,
                                          stage_dir, first=i == 0, ckpt=ckpt)
    if i == 0 and trainer.is_global_zero:
        ev.captions(module, run.datamodule, "untrained", before=True)
    trainer.fit(module, datamodule=run.datamodule, ckpt_path=str(ckpt) if ckpt else None, weights_only=True)
    ev.histories[str(stage.name)] = list(module.history)
    keep_history(trainer, run.out_dir / ("train_history.json" if i == 0 else f"train_history_{stage.name}.json"),
                 module.history)
    if trainer.is_global_zero:
        ev.after_stage(module, run.datamodule, stage, i == 0, bool(run.merged), run.shared_sft)


def keep_history(trainer: Any, path: Path, history: list[dict[str, Any]]) -> bool:
    """Write the stage's history (its steps' losses, as global rank 0 logs them) to ``path``: rank 0 alone writes it.
    Each rank of a multi-process run keeps its own history (its own batches' losses), and every rank writing the one
    file left whichever finished last: rank 0's losses one run, rank 1's the next (the cluster check's two-node part
    parted from the one-node run at step 0 so, with the same inputs). True when this process wrote it."""
    if not getattr(trainer, "is_global_zero", True):
        return False
    atomic_write_json(path, history)
    return True


def trained_with(stage: DictConfig) -> dict[str, str]:
    """How a stage trained, as every results file of the model it made records it (``trained``) and its adapter's
    lineage keeps it: the stage, and for GRPO the advantages' aggregation (what a reward weight meant).

    >>> trained_with(OmegaConf.create({"name": "grpo", "module": {"multi_objective_aggregation": "normalize_then_sum"}}))
    {'stage': 'grpo', 'multi_objective_aggregation': 'normalize_then_sum'}
    """
    out = {"stage": str(stage.name)}
    if str(stage.name) == "grpo":
        out["multi_objective_aggregation"] = str(stage.module.get("multi_objective_aggregation")
                                                 or "sum_then_normalize")
    return out


def _kept(out_dir: Path) -> dict[str, Any]:
    """A finished job of a sweep taken up again: kept as it is, its results read back from its folder (what a
    sweeper's objective and the sweep summary read)."""
    print(f"keeping the finished sweep job {out_dir} (resume=auto; its results stand)")
    histories = {p.stem.removeprefix("train_history").lstrip("_") or "first": read_json(p)
                 for p in sorted(out_dir.glob("train_history*.json"))}
    results = out_dir / "results.json"
    return {"results": read_json(results) if results.is_file() else {}, "history": histories.get("first", []),
            "histories": histories, "vqa": {p.stem.removeprefix("vqa_"): read_json(p) for p in out_dir.glob("vqa_*.json")},
            "output_dir": str(out_dir), "module": None, "kept": True}


def _claim(cfg: DictConfig) -> tuple[Path, str | None]:
    """The shared SFT adapter (trained now or read from the cache), the seed, this run's own folder (claimed: an
    earlier run there is not overwritten) and its config.yaml; returns the folder and the adapter to merge first."""
    shared_init = None
    if not cfg.get("init_adapter") and cfg.get("sft_init"):
        # before seeding: whether the shared adapter is trained now or read from the cache, this run's own random
        # streams start from the same seed
        shared_init = str(shared_sft_adapter(cfg, run_training))
        log.info("starting from the shared SFT adapter %s", shared_init)
    learned_heads(cfg)  # reward.terms.learned.checkpoint=train: trained on this run's training vases (GRPO runs)
    pl.seed_everything(int(cfg.seed), workers=True)
    out_dir = runs.claim(cfg.paths.output_dir, str(cfg.get("resume") or "never"))
    runs.record_machine_held()  # the CPU, kernels and threads its numbers come from, in the record of the folder just
    #                             claimed (a sweep job's is claimed here, after the config's check recorded the others)
    if cfg.get("reward") is not None:
        # what the reward really uses: config.yaml, W&B and the sweep summary show it beside the weights given
        with open_dict(cfg):
            cfg.reward.effective_weights = effective_weights(cfg.reward)
    atomic_write_text(out_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    return out_dir, cfg.get("init_adapter") or shared_init


def prepare_shared(cfg: DictConfig) -> None:
    """What a sweep job shares with the sweep's other jobs, built before they start (`vase.launchers`' parallel
    launcher, with every core, one job's config at a time): the shared SFT adapter (``sft_init``, with the model and
    the data it trains on) and the reward's learned heads where the run trains them. Each is cached under its key,
    as the job would have built it; the job then finds it. A config check (``VASE_CHECK_CONFIG``) builds nothing."""
    if check_only() is not None or runs.finished_sweep_job(cfg.paths.output_dir, str(cfg.get("resume") or "never")):
        return
    check_run(cfg)  # a bad input fails here as it would in the job (the launcher leaves it to the job)
    if not cfg.get("init_adapter") and cfg.get("sft_init"):
        shared_sft_adapter(cfg, run_training)
    learned_heads(cfg)


def objective(out: dict[str, Any], key: str) -> float:
    """The number a sweeper optimises (``optimized_metric``): a caption metric of the last evaluated stage
    (``overall_score``, ``r_at_1``, ...), ``vqa/<open|mc>/<dimension|mean>`` of the last stage's VQA, or
    ``train/reward`` (mean GRPO reward over the last 20 steps)."""
    if key == "train/reward":
        rewards = [h["reward"] for h in out.get("history", []) if "reward" in h][-20:]
        if rewards:
            return float(sum(rewards) / len(rewards))
    elif key.startswith("vqa/"):
        _, protocol, dim = (key.split("/") + ["", ""])[:3]
        if out.get("vqa"):
            s = list(out["vqa"].values())[-1].get(protocol, {})
            value = s.get("mean") if dim == "mean" else s.get("accuracy", {}).get(dim)
            if value is not None:
                return float(value)
    elif out.get("results"):
        row = list(out["results"].values())[-1]
        if key in row:
            return float(row[key])
    raise ConfigError(f"optimized_metric={key!r}: this run has no such value (a caption metric needs val.after=true, "
                      f"vqa/... needs val.vqa, train/reward needs stage=grpo)")
