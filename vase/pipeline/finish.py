"""What a finished run writes for people to look at: results.json, report.md (table, curves, contact sheet), and the
same to the loggers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vase.io import atomic_write_json
from vase.loggers import log_images, log_results_table
from vase.metrics.caption_metrics import markdown_table
from vase.metrics.paired import compare_captions, format_comparison
from vase.provenance import machine_stamp
from vase.reports.report import write_report

log = logging.getLogger("vase")


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
