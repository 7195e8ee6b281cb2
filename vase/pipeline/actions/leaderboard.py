"""``evaluate.py action=leaderboard``: runs and results files gathered into one table and plot, with the paper's rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vase.config import EvalAction

ACTION = EvalAction("gather runs and results files into one table and plot: runs=[dir,file,...]",
                writes=("leaderboard.md", "leaderboard.json", "leaderboard.png"))


def run(cfg: DictConfig) -> dict[str, Any]:
    # lazy: torch, torchmetrics
    from vase.metrics.caption_metrics import markdown_table
    from vase.reports.leaderboard import build_leaderboard, write_leaderboard

    rows = build_leaderboard([str(r) for r in cfg.get("runs") or []], bool(cfg.leaderboard.include_paper))
    paths = write_leaderboard(rows, Path(cfg.output).parent)
    print("\n" + markdown_table(rows))
    print(f"leaderboard written to {paths['md']}")
    return {"rows_by_model": rows, "table": rows, "paths": {k: str(p) for k, p in paths.items()}}
