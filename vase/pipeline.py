"""What the entry points run: build everything from a composed config, train, evaluate, report.

``train.py`` and ``evaluate.py`` compose and validate the config, then call :func:`run_training` or
:func:`run_evaluation`; everything here takes a plain DictConfig, so tests drive it with Hydra's compose API.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

import vase.config  # noqa: F401  (registers the config resolvers, e.g. vase.wandb_offline)
from vase.io import atomic_write_json, atomic_write_text

log = logging.getLogger("vase")


def finish_wandb() -> None:
    """Close the W&B run even when the job failed, or its offline directory is left half written."""
    import sys

    wandb = sys.modules.get("wandb")  # imported only when a W&B logger was built
    if wandb is not None and wandb.run is not None:
        wandb.finish()


def instantiate_group(group: DictConfig | None) -> list[Any]:
    """Instantiate every ``_target_`` entry of a callbacks/logger group (an empty or missing group gives [])."""
    if not group:
        return []
    return [instantiate(node) for node in group.values() if isinstance(node, DictConfig) and "_target_" in node]


def build_loggers(cfg: DictConfig) -> list[Any]:
    """The run's loggers. ``WANDB_MODE=disabled`` drops the W&B logger altogether: no run, online or offline."""
    import os

    nodes = cfg.get("logger")
    if not nodes:
        return []
    disabled = os.environ.get("WANDB_MODE", "").strip().lower() == "disabled"
    out = []
    for node in nodes.values():
        if not (isinstance(node, DictConfig) and "_target_" in node):
            continue
        if disabled and "wandb" in str(node._target_).lower():
            log.info("WANDB_MODE=disabled: no W&B run is written")
            continue
        out.append(instantiate(node))
    return out


def _log_eval(loggers: list[Any], name: str, scores: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    for lg in loggers:
        lg.log_metrics({f"val/{name}/{k}": float(v) for k, v in scores.items()})
        if hasattr(lg, "log_table"):
            lg.log_table(
                key=f"val/{name}/captions",
                columns=["id", "generated", "reference"],
                data=[[r["id"], r["caption"], r["reference"]] for r in rows[:64]],
            )


def evaluate_captions(model: Any, processor: Any, dataset: Any, scorer: Any, out_dir: Path, name: str,
                      max_new_tokens: int, batch_size: int, image_score: bool = True, write: bool = True
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate (resumable JSONL ``generations_<name>.jsonl``) and score; writes ``results_<name>.json`` unless
    ``write`` is off (the caller writes the scores itself)."""
    from vase.eval.generate import generate_captions
    from vase.eval.scoring import write_results

    rows = generate_captions(model, processor, dataset, out_dir / f"generations_{name}.jsonl",
                             batch_size=batch_size, max_new_tokens=max_new_tokens)
    images = [dataset[i].images for i in range(len(dataset))] if image_score else None
    scores = scorer.score([r["caption"] for r in rows], [r["reference"] for r in rows], images)
    if write:
        write_results(out_dir / f"results_{name}.json", name, scores)
    log.info("%s: %s", name, {k: round(v, 4) for k, v in scores.items()})
    return scores, rows


def _log_results_table(loggers: list[Any], results: dict[str, dict[str, Any]]) -> None:
    """The evaluation table (paper's column order) as a W&B table, so runs compare side by side in the UI."""
    from vase.metrics.caption import TABLE_COLUMNS

    keys = [k for k, _ in TABLE_COLUMNS] + ["n_pairs"]
    for lg in loggers:
        if hasattr(lg, "log_table"):
            lg.log_table(
                key="val/table",
                columns=["model", *keys],
                data=[[name, *[row.get(k) for k in keys]] for name, row in results.items()],
            )


def _sheet_items(dataset: Any, generations: dict[str, list[dict[str, Any]]], n: int = 4) -> list[dict[str, Any]]:
    items = []
    for i in range(min(n, len(dataset))):
        ex = dataset[i]
        step = max(1, len(ex.images) // 6)  # an orbit shows six of its frames
        lines = [("reference", ex.record.caption)]
        lines += [(name, rows[i]["caption"] or "(empty)") for name, rows in generations.items()]
        items.append({"id": ex.record.id, "images": list(ex.images)[::step][:6], "lines": lines})
    return items


def build_stage_module(stage: DictConfig, model: Any, processor: Any, cfg: DictConfig) -> Any:
    """The LightningModule of one stage; GRPO also gets the reward, the processor and its accumulation count."""
    extra: dict[str, Any] = {}
    if stage.name == "grpo":
        extra = {"reward": instantiate(cfg.reward, _convert_="partial"), "processor": processor,
                 "grad_accum": int(stage.grad_accum)}
    return instantiate(stage.module, model=model, **extra, _convert_="partial")


def build_trainer(cfg: DictConfig, stage: DictConfig, callbacks: list[Any], loggers: list[Any], root: Path,
                  first: bool) -> Any:
    """The Lightning trainer for a stage. GRPO optimises manually (it accumulates and clips itself)."""
    kwargs: dict[str, Any] = {"callbacks": callbacks, "logger": loggers or False, "default_root_dir": str(root)}
    if not first:
        # a later stage has its own length, but never runs past the trainer's cap (debug=fast caps every stage)
        cap, own = int(cfg.trainer.get("max_steps", -1) or -1), int(stage.get("max_steps", -1))
        steps = min(s for s in (cap, own) if s > 0) if max(cap, own) > 0 else -1
        kwargs.update(max_epochs=int(stage.epochs), max_steps=steps)
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
    from vase.training.callbacks import SaveAdapter

    shared_init = None
    if not cfg.get("init_adapter") and cfg.get("sft_init"):
        # before seeding: whether the shared adapter is trained now or read from the cache, this run's own random
        # streams start from the same seed
        from vase.training.sft_cache import shared_sft_adapter

        shared_init = str(shared_sft_adapter(cfg))
        log.info("starting from the shared SFT adapter %s", shared_init)
    pl.seed_everything(int(cfg.seed), workers=True)
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
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
            datamodule.stage = str(stage.name)
            datamodule.batch_size = int(stage.batch_size)
        module = build_stage_module(stage, model, processor, cfg)
        callbacks = instantiate_group(cfg.get("callbacks"))
        for cb in callbacks:
            if i > 0 and hasattr(cb, "dirpath") and cb.dirpath:
                cb.dirpath = str(stage_dir / Path(cb.dirpath).name)
            if isinstance(cb, SaveAdapter):
                cb.processor = processor
                cb.lineage = {"base": str(cfg.model.name_or_path), "merged_adapters": list(merged)}
        trainer = build_trainer(cfg, stage, callbacks, loggers, stage_dir, first=i == 0)

        if i == 0 and ev.get("before") and trainer.is_global_zero:
            name = f"{label} (untrained)"
            results[name], generations[name] = evaluate_captions(
                module.model, processor, datamodule.val_set, scorer, out_dir, "untrained",
                int(ev.max_new_tokens), int(ev.batch_size), bool(cfg.metrics.get("image_score", True)))
            _log_eval(loggers, "untrained", results[name], generations[name])

        trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path") if i == 0 else None)
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
            _log_eval(loggers, str(stage.name), results[name], generations[name])

    if trainer is not None and trainer.is_global_zero and results:
        atomic_write_json(out_dir / "results.json", results)
        if cfg.get("report", True):
            from vase.eval.report import markdown_table, write_report

            report = write_report(out_dir, results, histories, _sheet_items(datamodule.val_set, generations),
                                  title=f"vase: {cfg.task_name}", notes=_notes(cfg, module))
            log.info("report: %s", report)
            print("\n" + markdown_table(results))
            print(f"report written to {report}")
            _log_results_table(loggers, results)
            for lg in loggers:
                if hasattr(lg, "log_image"):
                    imgs = [str(p) for p in (out_dir / "loss.png", out_dir / "contact_sheet.png") if p.is_file()]
                    if imgs:
                        lg.log_image(key="report", images=imgs)
    history = histories.get(str(cfg.stage.name), [])
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


def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    """``task``: generate (caption a split and score it), score (score caption files), vqa (per-dimension accuracy)
    or leaderboard (gather runs into one table)."""
    _seed(int(cfg.seed))
    tasks = {"generate": _eval_generate, "score": _eval_score, "vqa": _eval_vqa, "leaderboard": _eval_leaderboard,
             "export": _eval_export}
    if cfg.task not in tasks:
        raise ValueError(f"task={cfg.task!r} must be one of {sorted(tasks)}")
    out = tasks[cfg.task](cfg)
    loggers = build_loggers(cfg)
    for lg in loggers:
        lg.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
        if out.get("scores"):
            lg.log_metrics({f"{cfg.split}/{k}": float(v) for k, v in out["scores"].items() if isinstance(v, (int, float))})
        if out.get("rows"):
            _log_eval([lg], str(cfg.split), {}, out["rows"])
        if out.get("table"):
            _log_results_table([lg], out["table"])
    return out


def _seed(seed: int) -> None:
    """Seed python, numpy and torch without importing Lightning (task=score should start fast)."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _dataset_and_model(cfg: DictConfig) -> tuple[Any, Any, Any]:
    from vase.models.loading import load_model_and_processor

    model, processor = load_model_and_processor(cfg.model, adapter=cfg.get("adapter"),
                                                merge=bool(cfg.get("merge_adapter")))
    datamodule = instantiate(cfg.data, processor=processor, _convert_="partial")
    datamodule.prepare_data()
    limit = cfg.data.get("limit_val") if cfg.split == "val" else None
    return datamodule.dataset(cfg.split, limit), model, processor


def _eval_generate(cfg: DictConfig) -> dict[str, Any]:
    from vase.eval.report import markdown_table
    from vase.eval.scoring import build_scorer, write_results

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset, model, processor = _dataset_and_model(cfg)
    scorer = build_scorer(cfg.metrics)
    scores, rows = evaluate_captions(model, processor, dataset, scorer, out.parent, out.stem,
                                     int(cfg.generation.max_new_tokens), int(cfg.generation.batch_size),
                                     bool(cfg.metrics.get("image_score", True)), write=False)
    write_results(out, str(cfg.name), scores, {"name": str(cfg.name), "split": cfg.split, "adapter": cfg.get("adapter")})
    print("\n" + markdown_table({str(cfg.name): scores}))
    return {"scores": scores, "rows": rows, "output": str(out), "table": {str(cfg.name): scores}}


def _eval_score(cfg: DictConfig) -> dict[str, Any]:
    """Score one generated-captions file, or a list of them, against a ground-truth file (the paper's JSON or our
    JSONL). The encoders load once; with ``metrics.embedding_cache`` the references are encoded once ever."""
    from omegaconf import ListConfig

    from vase.errors import DataError
    from vase.eval.report import markdown_table
    from vase.eval.scoring import build_scorer, load_captions, match, write_results

    if not cfg.get("generated") or not cfg.get("ground_truth"):
        raise DataError("task=score needs generated=<file> (or generated=[a,b,...]) and ground_truth=<file>")
    files = [str(f) for f in cfg.generated] if isinstance(cfg.generated, (list, ListConfig)) else [str(cfg.generated)]
    inputs = {Path(f).resolve() for f in [*files, str(cfg.ground_truth)]}
    if Path(cfg.output).resolve() in inputs or Path(cfg.output).with_suffix(".md").resolve() in inputs:
        raise DataError(f"output={cfg.output} would overwrite a caption file it scores; choose another output path")
    ref = load_captions(cfg.ground_truth)
    gens = [load_captions(f) for f in files]  # every file read and checked before any model loads
    matched = []
    for f, gen in zip(files, gens):
        ids, preds, refs, counts = match(gen, ref, str((cfg.get("score") or {}).get("duplicates", "last")))
        ex = counts["examples"]
        print(f"{f}: matched {counts['matched']} pairs; unmatched: {counts['unmatched_generated']} generated "
              f"{_first(ex['unmatched_generated'])}, {counts['unmatched_reference']} ground truth "
              f"{_first(ex['unmatched_reference'])}; repeated keys: {counts['repeated_generated']} generated "
              f"{_first(ex['repeated_generated'])}, {counts['repeated_reference']} ground truth (last caption kept) "
              f"{_first(ex['repeated_reference'])}; without a key: {counts['no_key_generated']} / "
              f"{counts['no_key_reference']}")
        if not ids:
            raise DataError(f"no key of {f} matches one of {cfg.ground_truth} (keys are the first two '_'-separated "
                            f"parts of the first image name, or the row's id): nothing to score")
        matched.append((f, preds, refs, counts))
    scorer = build_scorer(cfg.metrics)
    out = Path(cfg.output)
    if len(files) == 1:
        f, preds, refs, counts = matched[0]
        scores = scorer.score(preds, refs)
        write_results(out, str(cfg.name), scores, {**counts, "name": str(cfg.name), "generated": f,
                                                   "ground_truth": str(cfg.ground_truth)})
        print("\n" + markdown_table({str(cfg.name): scores}))
        flat = {k: v for k, v in counts.items() if isinstance(v, int)}
        return {"scores": {**scores, **flat}, "output": str(out), "table": {str(cfg.name): scores}}
    stems = [Path(f).stem for f in files]
    names = stems if len(set(stems)) == len(stems) else files
    table: dict[str, dict[str, Any]] = {}
    for name, (f, preds, refs, counts) in zip(names, matched):
        table[name] = {**scorer.score(preds, refs), **counts, "generated": f}
    atomic_write_json(out, {"ground_truth": str(cfg.ground_truth), "results": table})
    md = markdown_table({n: {k: v for k, v in row.items() if not isinstance(v, (dict, str))} for n, row in table.items()})
    atomic_write_text(out.with_suffix(".md"), md)
    print("\n" + md)
    return {"scores": {}, "output": str(out), "table": table}


def _first(keys: list[str]) -> str:
    return f"(e.g. {', '.join(keys)})" if keys else ""


def _eval_vqa(cfg: DictConfig) -> dict[str, Any]:
    """Answer each vase's six questions (open-ended and/or multiple choice) and report accuracy per dimension."""
    from vase.eval.vqa import evaluate_vqa, vqa_table

    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset, model, processor = _dataset_and_model(cfg)
    v = cfg.vqa
    scores = evaluate_vqa(model, processor, dataset, instantiate(cfg.reward, _convert_="partial"),
                          float(cfg.reward.tau), out, str(cfg.name), str(v.protocol), int(v.num_choices),
                          int(cfg.generation.batch_size), int(v.max_new_tokens),
                          {"split": cfg.split, "adapter": cfg.get("adapter")})
    print("\n" + vqa_table(scores, str(cfg.name)))
    flat = {f"vqa/{p}/{d}": a for p, s in scores.items() for d, a in s["accuracy"].items()}
    flat.update({f"vqa/{p}/mean": s["mean"] for p, s in scores.items()})
    return {"scores": flat, "vqa": scores, "output": str(out)}


def _eval_leaderboard(cfg: DictConfig) -> dict[str, Any]:
    from vase.eval.leaderboard import build_leaderboard, write_leaderboard
    from vase.eval.report import markdown_table

    rows = build_leaderboard([str(r) for r in cfg.get("runs") or []], bool(cfg.leaderboard.include_paper))
    paths = write_leaderboard(rows, Path(cfg.output).parent)
    print("\n" + markdown_table(rows))
    print(f"leaderboard written to {paths['md']}")
    return {"rows_by_model": rows, "table": rows, "paths": {k: str(p) for k, p in paths.items()}}


def _eval_export(cfg: DictConfig) -> dict[str, Any]:
    """A standalone merged Hugging Face checkpoint (base + the adapter and every adapter under it, with the processor)
    that transformers loads without peft: ``python evaluate.py task=export adapter=<run>/adapter output=<new dir>``."""
    import json

    from vase.errors import DataError
    from vase.io import atomic_directory
    from vase.models.loading import LINEAGE_FILE, load_model_and_processor, resolve_model_path

    if not cfg.get("adapter"):
        raise DataError("task=export needs adapter=<run>/adapter (the adapter to merge into the base model)")
    out = Path(str(cfg.output))
    if out.suffix == ".json":
        raise DataError(f"task=export writes a checkpoint directory: pass output=<new directory>, not {out}")
    if out.exists():
        raise DataError(f"{out}: already exists; export writes a new directory and never replaces one")
    base = resolve_model_path(cfg.model)
    model, processor = load_model_and_processor(cfg.model, adapter=str(cfg.adapter), merge=True)
    lineage = Path(str(cfg.adapter)) / LINEAGE_FILE
    merged = json.loads(lineage.read_text()).get("merged_adapters", []) if lineage.is_file() else []
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        (tmp / "vase_export.json").write_text(json.dumps(
            {"base": base, "adapters": [*merged, str(cfg.adapter)]}, indent=1))
    print(f"merged checkpoint written to {out}")
    return {"output": str(out)}


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
