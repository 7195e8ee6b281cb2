"""What the entry points run: build everything from a composed config, train, evaluate, report.

``train.py`` and ``evaluate.py`` compose and validate the config, then call :func:`run_training` or
:func:`run_evaluation`; everything here takes a plain DictConfig, so tests drive it with Hydra's compose API.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

import vase.config  # noqa: F401  (registers the config resolvers, e.g. vase.wandb_offline)
from vase import runs
from vase.eval.tasks import evaluate_captions
from vase.io import atomic_write_json, atomic_write_text
from vase.loggers import build_loggers, log_eval_rows, log_results_table

log = logging.getLogger("vase")


def _sheet_items(dataset: Any, generations: dict[str, list[dict[str, Any]]], n: int = 4) -> list[dict[str, Any]]:
    items = []
    for i in range(min(n, len(dataset))):
        ex = dataset[i]
        step = max(1, len(ex.images) // 6)  # an orbit shows six of its frames
        lines = [("reference", ex.record.caption)]
        lines += [(name, rows[i]["caption"] or "(empty)") for name, rows in generations.items()]
        items.append({"id": ex.record.id, "images": list(ex.images)[::step][:6], "lines": lines})
    return items


def build_stage_module(stage: DictConfig, model: Any, processor: Any, cfg: DictConfig,
                       lineage: dict[str, Any] | None = None) -> Any:
    """The LightningModule of one stage, with the processor and lineage its adapter is saved with; GRPO also gets
    the reward and its accumulation count."""
    extra: dict[str, Any] = {"processor": processor, "lineage": lineage}
    if stage.name == "grpo":
        extra.update(reward=instantiate(cfg.reward, _convert_="partial"), grad_accum=int(stage.grad_accum))
    return instantiate(stage.module, model=model, **extra, _convert_="partial")


def build_callbacks(cfg: DictConfig, stage_dir: Path | None = None) -> list[Any]:
    """The callbacks of a stage; a later stage (``stage_dir`` given) writes its checkpoints and adapter there."""
    out = []
    for node in (cfg.get("callbacks") or {}).values():
        if not (isinstance(node, DictConfig) and "_target_" in node):
            continue
        kwargs = {"dirpath": str(stage_dir / Path(str(node.dirpath)).name)} if stage_dir and node.get("dirpath") else {}
        out.append(instantiate(node, **kwargs))
    return out


def _epochs_to_continue(ckpt: Path | None, max_epochs: int, max_steps: int) -> int | None:
    """Where a checkpoint already completed ``max_epochs`` but stopped short of ``max_steps`` (a finished run
    continued with a larger ``trainer.max_steps``), the epoch cap to train on to ``max_steps`` with: -1 (none)."""
    if ckpt is None or max_steps <= 0 or max_epochs < 0:
        return None
    import torch

    state = torch.load(ckpt, map_location="cpu", weights_only=False, mmap=True)
    done = int(state["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"])
    step = int(state.get("global_step", 0))
    if done >= max_epochs and step < max_steps:
        log.warning("the checkpoint at step %d already finished stage.epochs=%d; training on to "
                    "trainer.max_steps=%d", step, max_epochs, max_steps)
        return -1
    return None


def build_trainer(cfg: DictConfig, stage: DictConfig, callbacks: list[Any], loggers: list[Any], root: Path,
                  first: bool, ckpt: Path | None = None) -> Any:
    """The Lightning trainer for a stage. GRPO optimises manually (it accumulates and clips itself); ``ckpt`` is the
    checkpoint it will resume from, if any."""
    kwargs: dict[str, Any] = {"callbacks": callbacks, "logger": loggers or False, "default_root_dir": str(root)}
    epochs, steps = int(cfg.trainer.get("max_epochs", stage.epochs) or -1), int(cfg.trainer.get("max_steps", -1) or -1)
    if not first:
        # a later stage has its own length, but never runs past the trainer's cap (debug=fast caps every stage)
        cap, own = steps, int(stage.get("max_steps", -1))
        steps = min(s for s in (cap, own) if s > 0) if max(cap, own) > 0 else -1
        epochs = int(stage.epochs)
        kwargs.update(max_epochs=epochs, max_steps=steps)
    more = _epochs_to_continue(ckpt, epochs, steps)
    if more is not None:
        kwargs["max_epochs"] = more
    strategy = cfg.trainer.get("strategy")
    if "deepspeed" not in str(strategy.get("_target_", "") if isinstance(strategy, DictConfig) else strategy).lower():
        from vase.training.checkpointing import AtomicCheckpointIO

        kwargs["plugins"] = [AtomicCheckpointIO()]  # DeepSpeed writes its own sharded checkpoint directories
    if stage.name == "grpo":
        kwargs.update(accumulate_grad_batches=1, gradient_clip_val=None)
    else:
        kwargs.update(accumulate_grad_batches=int(stage.grad_accum))
    return instantiate(cfg.trainer, **kwargs, _convert_="partial")


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """Prepare data, build the model and stage module, fit, evaluate before/after, and write the report.

    With ``followup`` set (a second stage config, e.g. GRPO after SFT), the first stage's adapter is merged and the
    second stage trains a fresh adapter on top, in the same run; its outputs go to ``<run>/<followup name>/``.
    """
    import pytorch_lightning as pl

    from vase.models.loading import load_model_and_processor

    shared_init = None
    if not cfg.get("init_adapter") and cfg.get("sft_init"):
        # before seeding: whether the shared adapter is trained now or read from the cache, this run's own random
        # streams start from the same seed
        from vase.training.sft_cache import shared_sft_adapter

        shared_init = str(shared_sft_adapter(cfg))
        log.info("starting from the shared SFT adapter %s", shared_init)
    pl.seed_everything(int(cfg.seed), workers=True)
    resume = str(cfg.get("resume") or "never")
    out_dir = runs.claim(cfg.paths.output_dir, resume)  # this process's alone; an earlier run there is not overwritten
    if cfg.get("reward") is not None:
        from vase.rewards.reward import effective_weights

        # what the reward really uses: config.yaml, W&B and the sweep summary show it beside the weights given
        with open_dict(cfg):
            cfg.reward.effective_weights = effective_weights(cfg.reward)
    atomic_write_text(out_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))

    log.info("loading model %s", cfg.model.name_or_path)
    # an initial adapter (e.g. from SFT) is merged first, as the paper merged LoRA before RL; the new stage's
    # adapter then trains on top and its reference (adapter off) is the merged model
    init_adapter = cfg.get("init_adapter") or shared_init
    model, processor = load_model_and_processor(cfg.model, adapter=init_adapter, merge=True)
    merged = [str(init_adapter)] if init_adapter else []

    datamodule = instantiate(cfg.data, processor=processor, stage=cfg.stage.name, _convert_="partial")
    datamodule.prepare_data()
    datamodule.setup("fit")
    loggers = build_loggers(cfg)
    for lg in loggers:
        lg.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    results: dict[str, dict[str, Any]] = {}
    generations: dict[str, list[dict[str, Any]]] = {}
    histories: dict[str, list[dict[str, float]]] = {}
    vqa: dict[str, dict[str, Any]] = {}
    ev = cfg.get("evaluate", {}) or {}
    scorer = None
    if ev.get("before") or ev.get("after"):
        import torch

        from vase.eval.scoring import build_scorer

        # loading encoders initialises modules from the global RNG: keep it off the seeded training stream, so a
        # run trains the same whichever metrics it reports
        with torch.random.fork_rng(devices=[]):
            scorer = build_scorer(cfg.metrics)
    label = cfg.model.get("label", "model")

    stages = [(cfg.stage, out_dir)]
    if cfg.get("followup"):
        stages.append((cfg.followup, out_dir / str(cfg.followup.name)))
    module = trainer = None
    for i, (stage, stage_dir) in enumerate(stages):
        if i > 0:
            model = module.model.merge_and_unload()  # the previous stage's adapter becomes part of the base
            merged.append(str(stages[i - 1][1] / "adapter"))
            # the next stage's batches (prompts for GRPO, its batch size): a data module of its own, same data
            datamodule = instantiate(cfg.data, processor=processor, stage=str(stage.name),
                                     batch_size=int(stage.batch_size), _convert_="partial")
            datamodule.prepare_data()
            datamodule.setup("fit")
        lineage = {"base": str(cfg.model.name_or_path), "merged_adapters": list(merged)}
        module = build_stage_module(stage, model, processor, cfg, lineage)
        callbacks = build_callbacks(cfg, None if i == 0 else stage_dir)
        ckpt = Path(cfg.ckpt_path) if i == 0 and cfg.get("ckpt_path") else runs.resume_checkpoint(
            out_dir, stage_dir, resume)
        if ckpt is not None and not cfg.get("ckpt_path"):
            print(f"resuming {stage.name} from {ckpt} (resume=auto; resume=never starts afresh)")
        trainer = build_trainer(cfg, stage, callbacks, loggers, stage_dir, first=i == 0, ckpt=ckpt)

        if i == 0 and ev.get("before") and trainer.is_global_zero:
            name = f"{label} (untrained)"
            results[name], generations[name] = evaluate_captions(
                module.model, processor, datamodule.val_set, scorer, out_dir, "untrained",
                int(ev.max_new_tokens), int(ev.batch_size), bool(cfg.metrics.get("image_score", True)))
            log_eval_rows(loggers, "untrained", results[name], generations[name])

        trainer.fit(module, datamodule=datamodule, ckpt_path=str(ckpt) if ckpt else None)
        histories[str(stage.name)] = list(module.history)
        atomic_write_json(out_dir / ("train_history.json" if i == 0 else f"train_history_{stage.name}.json"),
                          module.history)

        if ev.get("vqa") and trainer.is_global_zero:
            from vase.eval.vqa import evaluate_vqa

            reward = instantiate(cfg.reward, _convert_="partial")
            vqa[str(stage.name)] = evaluate_vqa(
                module.model, processor, datamodule.val_set, reward, float(cfg.reward.tau),
                out_dir / f"vqa_{stage.name}.json", f"{label} ({stage.name})", str(ev.vqa),
                int(ev.get("vqa_choices", 4)), int(ev.batch_size), int(ev.get("vqa_max_new_tokens", 24)))
            for lg in loggers:
                lg.log_metrics({f"val/{stage.name}/vqa/{p}/{d}": a for p, sc in vqa[str(stage.name)].items()
                                for d, a in sc["accuracy"].items()})
        if ev.get("after") and trainer.is_global_zero:
            name = f"{label} ({stage.name})"
            results[name], generations[name] = evaluate_captions(
                module.model, processor, datamodule.val_set, scorer, out_dir, str(stage.name),
                int(ev.max_new_tokens), int(ev.batch_size), bool(cfg.metrics.get("image_score", True)))
            log_eval_rows(loggers, str(stage.name), results[name], generations[name])

    if trainer is not None and trainer.is_global_zero and results:
        atomic_write_json(out_dir / "results.json", results)
        if cfg.get("report", True):
            from vase.eval.report import markdown_table, write_report

            report = write_report(out_dir, results, histories, _sheet_items(datamodule.val_set, generations),
                                  title=f"vase: {cfg.task_name}", notes=_notes(cfg, module))
            log.info("report: %s", report)
            print("\n" + markdown_table(results))
            print(f"report written to {report}")
            log_results_table(loggers, results)
            for lg in loggers:
                if hasattr(lg, "log_image"):
                    imgs = [str(p) for p in (out_dir / "loss.png", out_dir / "contact_sheet.png") if p.is_file()]
                    if imgs:
                        lg.log_image(key="report", images=imgs)
    history = histories.get(str(cfg.stage.name), [])
    runs.set_status(out_dir, "finished")
    return {"results": results, "history": history, "histories": histories, "vqa": vqa, "output_dir": str(out_dir),
            "module": module}


def _notes(cfg: DictConfig, module: Any) -> str:
    trainable = getattr(module, "trainable_parameters", None)
    total = getattr(module, "total_parameters", None)
    data = cfg.data
    n = (
        f"{data.synthetic.num_vases} synthetic vases (seed {data.synthetic.seed})"
        if data.get("synthetic")
        else str(data.root)
    )
    s = (
        f"Model `{cfg.model.name_or_path}`, stage `{cfg.stage.name}`, data: {n}, views {list(data.views)}, "
        f"{cfg.stage.epochs} epoch(s), batch {cfg.stage.batch_size} x accumulation {cfg.stage.grad_accum}."
    )
    if trainable:
        s += f" Trainable parameters: {trainable:,} of {total:,}."
    return s


def objective(out: dict[str, Any], key: str) -> float:
    """The number a sweeper optimises (``optimized_metric``): a caption metric of the last evaluated stage
    (``overall_score``, ``r_at_1``, ...), ``vqa/<open|mc>/<dimension|mean>`` of the last stage's VQA, or
    ``train/reward`` (mean GRPO reward over the last 20 steps)."""
    from vase.errors import ConfigError

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
    raise ConfigError(f"optimized_metric={key!r}: this run has no such value (a caption metric needs evaluate.after=true, "
                      f"vqa/... needs evaluate.vqa, train/reward needs stage=grpo)")
