"""A run's end (`finish_run`): what it ended at on the dashboards (``hp/*``, the held-out verdict against its start, a
sweep's job against its baseline), what it writes for people to look at (results.json, report.md: table, curves,
contact sheet, and the same to the loggers) and its record's ``finished``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from vase import runs
from vase.config import swept_keys
from vase.eval.stats import dashboard_columns, heldout_metrics
from vase.io import atomic_write_json
from vase.loggers import log_end_metrics, log_images, log_results_table, say_unsent
from vase.metrics.caption_metrics import markdown_table
from vase.metrics.paired import compare_captions, format_comparison
from vase.provenance import machine_stamp
from vase.reports.hypothesis import hypothesis_of
from vase.reports.report import write_report
from vase.reports.verdict_view import comparison_at_job_end

log = logging.getLogger("vase")


def finish_run(cfg: DictConfig, out_dir: Path, ev: Any, loggers: list[Any], hypothesis_metrics: list[str],
               last_stage: str, datamodule: Any, module: Any, global_zero: bool) -> None:
    """The run's end, on rank 0: what it ended at (`end_metrics`, the last stage's held-out verdict against its start,
    a sweep's job against its baseline) logged with the hypothesis's measures first, and results.json and the report
    (`write_run_report`); then, on every rank, what an MLflow server that stopped answering lacks, and the record
    says ``finished``. ``ev`` is the run's `vase.pipeline.evaluation.RunEvaluation`."""
    if global_zero:
        metrics = end_metrics(ev.results, ev.histories)
        if last_stage in ev.heldout:  # the held-out verdict per dimension against the start, and the captions'
            metrics.update(heldout_metrics(ev.heldout[last_stage], ev.heldout_start.get(last_stage)))
        metrics.update(_sweep_comparison(cfg, out_dir))
        log_end_metrics(loggers, cfg, metrics, shown=dashboard_columns(metrics, hypothesis_metrics))
        if ev.results:
            write_run_report(cfg, out_dir, ev.results, ev.histories, ev.generations, datamodule.val_set, module,
                             loggers, ev.scorer)
    say_unsent(loggers, out_dir)  # an MLflow server that stopped answering: what it lacks, and the command to send it
    runs.set_status(out_dir, "finished")


def _sweep_comparison(cfg: DictConfig, out_dir: Path) -> dict[str, float]:
    """A sweep's job against its baseline job, where that has finished (W&B can take it only now); {} outside a sweep
    and for the shared SFT a job trains first in the cache, which is no job of the sweep."""
    swept = swept_keys()
    hc = HydraConfig.get() if swept else None
    job_dir = OmegaConf.select(hc, "runtime.output_dir", default=None) if hc is not None else None
    if not job_dir or Path(str(job_dir)).resolve() != Path(out_dir).resolve():
        return {}
    return comparison_at_job_end(hc.sweep.dir, out_dir, hypothesis_of(cfg), swept)


def _number(v: Any) -> float | None:
    """A history value as a float (numpy and torch scalars too), or None."""
    try:
        return None if v is None or isinstance(v, bool) else float(v)
    except (TypeError, ValueError):
        return None


def end_metrics(results: dict[str, dict[str, Any]], histories: dict[str, list[dict[str, Any]]],
                last: int = 20) -> dict[str, float]:
    """What a run ended at, for dashboards' run tables (``hp/*``): the last evaluated model's caption scores, and
    the last stage's mean training loss or reward over its last ``last`` steps."""
    out: dict[str, float] = {}
    if results:
        row = list(results.values())[-1]
        for k in ("clip_score", "r_at_5", "fid_score", "lexical_similarity", "overall_score"):
            if _number(row.get(k)) is not None:
                out[f"hp/{k}"] = _number(row[k])
    history = list(histories.values())[-1] if histories else []
    for key in ("reward", "loss"):
        values = [v for v in (_number(h.get(key)) for h in history[-last:]) if v is not None]
        if values:
            out[f"hp/train_{key}_last{last}"] = sum(values) / len(values)
    return out


def write_run_report(cfg: DictConfig, out_dir: Path, results: dict[str, Any], histories: dict[str, Any],
                     generations: dict[str, Any], dataset: Any, module: Any, loggers: list[Any],
                     scorer: Any = None) -> None:
    """``results.json``, and with ``report=true`` the report, its table printed and everything sent to the loggers.
    With two trained stages (SFT then GRPO), the last one's captions against the one before, paired over the
    validation vases (``paired_captions.json`` and a section of the report)."""
    atomic_write_json(out_dir / "results.json", results)
    paired = _last_stage_vs_previous(cfg, out_dir, generations, scorer)
    if not cfg.get("report", True):
        return
    aggregations = {str(st.name): str(st.module.get("multi_objective_aggregation", "sum_then_normalize"))
                    for st in (cfg.stage, cfg.get("followup")) if st is not None and st.get("name") == "grpo"}
    report = write_report(out_dir, results, histories, _sheet_items(dataset, generations),
                          title=f"vase: {cfg.run_kind}", notes=_notes(cfg, module), extra=paired,
                          aggregations=aggregations)
    log.info("report: %s", report)
    print("\n" + markdown_table(results))
    print(f"report written to {report}")
    log_results_table(loggers, results)
    log_images(loggers, "report", [out_dir / "loss.png", out_dir / "contact_sheet.png"])


def _last_stage_vs_previous(cfg: DictConfig, out_dir: Path, generations: dict[str, list[dict[str, Any]]],
                            scorer: Any) -> str:
    trained = [k for k in generations if not k.endswith("(untrained)")]
    if scorer is None or len(trained) < 2:
        return ""
    run, start = trained[-1], trained[-2]
    refs = {r["id"]: r["reference"] for r in generations[run]}
    comp = compare_captions(scorer, {r["id"]: r["caption"] for r in generations[run]},
                            {r["id"]: r["caption"] for r in generations[start]}, refs,
                            weights=cfg.metrics.get("weights"))
    atomic_write_json(out_dir / "paired_captions.json", {"run": run, "start": start, "metrics": comp,
                                                        "machine": machine_stamp()})
    n = comp["lexical_similarity"]["n"]
    return (f"\n## {run} against {start}, paired over the same {n} validation vases\n\n"
            + format_comparison(comp, run, start)
            + "\nA difference is shown (**held**) only where its interval excludes 0. 'Detectable' is the smallest "
              "true difference this many vases find with 80 % power (from the run's own per-vase spread); a "
              "difference below it, or an interval that holds 0, says nothing either way.\n")


def _sheet_items(dataset: Any, generations: dict[str, list[dict[str, Any]]], n: int = 4) -> list[dict[str, Any]]:
    items = []
    for i in range(min(n, len(dataset))):
        ex = dataset[i]
        step = max(1, len(ex.images) // 6)  # an orbit shows six of its frames
        lines = [("reference", ex.record.caption)]
        lines += [(name, rows[i]["caption"] or "(empty)") for name, rows in generations.items()]
        items.append({"id": ex.record.id, "images": list(ex.images)[::step][:6], "lines": lines})
    return items


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
