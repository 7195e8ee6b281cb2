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


def instantiate_group(group: DictConfig | None) -> list[Any]:
    """Instantiate every ``_target_`` entry of a callbacks/logger group (an empty or missing group gives [])."""
    if not group:
        return []
    return [instantiate(node) for node in group.values() if isinstance(node, DictConfig) and "_target_" in node]


def _log_eval(loggers: list[Any], name: str, scores: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    for lg in loggers:
        lg.log_metrics({f"val/{name}/{k}": float(v) for k, v in scores.items()})
        if hasattr(lg, "log_table"):
            lg.log_table(
                key=f"val/{name}/captions",
                columns=["id", "generated", "reference"],
                data=[[r["id"], r["caption"], r["reference"]] for r in rows[:64]],
            )


def evaluate_captions(
    model: Any,
    processor: Any,
    dataset: Any,
    scorer: Any,
    out_dir: Path,
    name: str,
    max_new_tokens: int,
    batch_size: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate (resumable JSONL ``generations_<name>.jsonl``) and score; writes ``results_<name>.json``."""
    from vase.eval.generate import generate_captions
    from vase.eval.scoring import score_rows, write_results

    rows = generate_captions(
        model,
        processor,
        dataset,
        out_dir / f"generations_{name}.jsonl",
        batch_size=batch_size,
        max_new_tokens=max_new_tokens,
    )
    scores = score_rows(scorer, rows)
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
        lines = [("reference", ex.record.caption)]
        lines += [(name, rows[i]["caption"] or "(empty)") for name, rows in generations.items()]
        items.append({"id": ex.record.id, "images": ex.images, "lines": lines})
    return items


def run_training(cfg: DictConfig) -> dict[str, Any]:
    """Prepare data, build the model and stage module, fit, evaluate before/after, and write the report."""
    import pytorch_lightning as pl

    from vase.models.loading import load_model_and_processor
    from vase.training.callbacks import SaveAdapter

    pl.seed_everything(int(cfg.seed), workers=True)
    out_dir = Path(cfg.paths.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))

    log.info("loading model %s", cfg.model.name_or_path)
    model, processor = load_model_and_processor(cfg.model)
    if cfg.get("init_adapter"):
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, cfg.init_adapter, is_trainable=True)

    datamodule = instantiate(cfg.data, processor=processor, _convert_="partial")
    datamodule.prepare_data()
    datamodule.setup("fit")

    extra: dict[str, Any] = {}
    if cfg.stage.name == "grpo":
        extra = {"reward": instantiate(cfg.reward), "processor": processor}
    module = instantiate(cfg.stage.module, model=model, **extra, _convert_="partial")

    callbacks = instantiate_group(cfg.get("callbacks"))
    for cb in callbacks:
        if isinstance(cb, SaveAdapter):
            cb.processor = processor
    loggers = instantiate_group(cfg.get("logger"))
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, _convert_="partial")
    for lg in loggers:
        lg.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))

    results: dict[str, dict[str, Any]] = {}
    generations: dict[str, list[dict[str, Any]]] = {}
    ev = cfg.get("evaluate", {}) or {}
    scorer = None
    if ev.get("before") or ev.get("after"):
        from vase.eval.scoring import build_scorer

        scorer = build_scorer(cfg.metrics)
    label = cfg.model.get("label", "model")
    if ev.get("before") and trainer.is_global_zero:
        name = f"{label} (untrained)"
        results[name], generations[name] = evaluate_captions(
            module.model,
            processor,
            datamodule.val_set,
            scorer,
            out_dir,
            "untrained",
            int(ev.max_new_tokens),
            int(ev.batch_size),
        )
        _log_eval(loggers, "untrained", results[name], generations[name])

    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    history = list(getattr(module, "history", []))
    atomic_write_json(out_dir / "train_history.json", history)

    if ev.get("after") and trainer.is_global_zero:
        name = f"{label} ({cfg.stage.name})"
        results[name], generations[name] = evaluate_captions(
            module.model,
            processor,
            datamodule.val_set,
            scorer,
            out_dir,
            cfg.stage.name,
            int(ev.max_new_tokens),
            int(ev.batch_size),
        )
        _log_eval(loggers, cfg.stage.name, results[name], generations[name])

    if trainer.is_global_zero and results:
        atomic_write_json(out_dir / "results.json", results)
        if cfg.get("report", True):
            from vase.eval.report import markdown_table, write_report

            report = write_report(
                out_dir,
                results,
                history,
                _sheet_items(datamodule.val_set, generations),
                title=f"vase: {cfg.task_name}",
                notes=_notes(cfg, module),
            )
            log.info("report: %s", report)
            print("\n" + markdown_table(results))
            print(f"report written to {report}")
            _log_results_table(loggers, results)
            for lg in loggers:
                if hasattr(lg, "log_image"):
                    imgs = [str(p) for p in (out_dir / "loss.png", out_dir / "contact_sheet.png") if p.is_file()]
                    if imgs:
                        lg.log_image(key="report", images=imgs)
    return {"results": results, "history": history, "output_dir": str(out_dir), "module": module}


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
    """Caption the configured split with the configured model (and adapter) and score it."""
    import pytorch_lightning as pl

    from vase.data.dataset import VaseDataset
    from vase.eval.scoring import build_scorer, write_results
    from vase.models.loading import load_model_and_processor

    if cfg.task != "generate":
        raise ValueError(f"task={cfg.task!r}: this version of evaluate.py supports task=generate")
    pl.seed_everything(int(cfg.seed))
    out = Path(cfg.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    model, processor = load_model_and_processor(
        cfg.model, adapter=cfg.get("adapter"), merge=bool(cfg.get("merge_adapter"))
    )
    datamodule = instantiate(cfg.data, processor=processor, _convert_="partial")
    datamodule.prepare_data()
    dataset = VaseDataset(
        datamodule.root, cfg.split, datamodule.views, limit=cfg.data.get("limit_val") if cfg.split == "val" else None
    )
    scorer = build_scorer(cfg.metrics)
    scores, rows = evaluate_captions(
        model,
        processor,
        dataset,
        scorer,
        out.parent,
        out.stem,
        int(cfg.generation.max_new_tokens),
        int(cfg.generation.batch_size),
    )
    write_results(
        out, str(cfg.name), scores, {"name": str(cfg.name), "split": cfg.split, "adapter": cfg.get("adapter")}
    )
    loggers = instantiate_group(cfg.get("logger"))
    for lg in loggers:
        lg.log_hyperparams(OmegaConf.to_container(cfg, resolve=True))
    _log_eval(loggers, str(cfg.split), scores, rows)
    from vase.eval.report import markdown_table

    print("\n" + markdown_table({str(cfg.name): scores}))
    return {"scores": scores, "rows": rows, "output": str(out)}
