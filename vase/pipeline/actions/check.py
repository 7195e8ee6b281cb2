"""``evaluate.py action=check``: every problem of a dataset, listed before a long run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vase.config import EvalAction
from vase.data.check import check_dataset, format_report
from vase.io import atomic_write_json, atomic_write_text

ACTION = EvalAction("list every problem of a dataset before a long run: data.root=...", logs=False,
                writes=())  # writes into its run directory only


def run(cfg: DictConfig) -> dict[str, Any]:
    """Check ``data.root`` in its layout (vase.data.check): check.json and check.md in the run directory."""
    report = check_dataset(cfg.data.root, str(cfg.data.get("layout", "auto")), list(cfg.data.views),
                           cache_dir=cfg.render.get("cache_dir") or cfg.paths.cache_dir)
    out_dir = Path(cfg.paths.output_dir)
    atomic_write_json(out_dir / "check.json", report)
    text = format_report(report)
    atomic_write_text(out_dir / "check.md", text)
    print(text, end="")
    return {"check": report}
