"""A multirun's summary: one row per job with its overrides, mean reward per dimension, VQA accuracy per dimension
and caption metrics, written next to the jobs as ``summary.json``, ``summary.csv`` and ``summary.md`` when the sweep
ends (a Hydra callback, registered in ``conf/hydra/default.yaml``), and logged as a W&B table in the sweep's group.

    python train.py -m sweep=reward_weights          # logs/train/multiruns/<time>/summary.md
    python -m vase.eval.sweep_summary logs/train/multiruns/<time>    # (re)write it by hand, e.g. after a crash
    python evaluate.py task=leaderboard runs=[logs/train/multiruns/<time>]
"""

from __future__ import annotations

import csv
import io
import logging
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from vase.annotate.vocab import DIMENSIONS
from vase.io import atomic_write_json, atomic_write_text, read_json

log = logging.getLogger("vase")
CAPTION_KEYS = ("overall_score", "clip_score", "fid_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity")
LAST_STEPS = 20  # the reward of a job: the mean over its last steps (where training has got to)


def _job_dirs(sweep_dir: Path) -> list[Path]:
    jobs = [d for d in sweep_dir.iterdir() if d.is_dir() and (d / ".hydra" / "overrides.yaml").is_file()]
    return sorted(jobs, key=lambda d: (not d.name.isdigit(), int(d.name) if d.name.isdigit() else 0, d.name))


def _last_history(job: Path) -> tuple[str | None, list[dict[str, float]]]:
    """The history of the job's last stage (a GRPO follow-up's if it had one)."""
    follow = sorted(job.glob("train_history_*.json"))
    path = follow[-1] if follow else job / "train_history.json"
    if not path.is_file():
        return None, []
    stage = path.stem.removeprefix("train_history_") if follow else None
    return stage, read_json(path)


def job_row(job: Path) -> dict[str, Any]:
    """One job's row: overrides, status, mean reward (overall and per dimension), VQA accuracy, caption metrics."""
    overrides = [str(o) for o in OmegaConf.load(job / ".hydra" / "overrides.yaml")]
    row: dict[str, Any] = {"job": job.name, "overrides": " ".join(overrides), "status": "done", "metrics": {}}
    stage, hist = _last_history(job)
    if not hist:
        row["status"] = "no history (failed or still running)"
    rewards = [h for h in hist if "reward" in h][-LAST_STEPS:]
    if rewards:
        row["reward"] = sum(h["reward"] for h in rewards) / len(rewards)
        for d in DIMENSIONS:
            vals = [h[f"reward/{d}"] for h in rewards if f"reward/{d}" in h]
            if vals:
                row[f"reward/{d}"] = sum(vals) / len(vals)
    vqa_files = sorted(job.glob("vqa_*.json"))
    if vqa_files:
        vqa = read_json(vqa_files[-1]).get("vqa", {})  # the last stage's
        for protocol, s in vqa.items():
            for d, acc in s.get("accuracy", {}).items():
                row[f"vqa/{protocol}/{d}"] = acc
            row[f"vqa/{protocol}/mean"] = s.get("mean")
    if (job / "results.json").is_file():
        results = read_json(job / "results.json")
        if results:
            last = list(results.values())[-1]
            row["metrics"] = {k: last[k] for k in (*CAPTION_KEYS, "n_pairs") if k in last}
            row.update({k: last[k] for k in CAPTION_KEYS if k in last})
    return row


def write_sweep_summary(sweep_dir: str | Path) -> dict[str, Path]:
    """Summarise every job under ``sweep_dir`` into summary.json, summary.csv and summary.md; returns the paths."""
    sweep_dir = Path(sweep_dir)
    rows = [job_row(j) for j in _job_dirs(sweep_dir)]
    columns = ["job", "overrides", "status"]
    for r in rows:
        columns += [k for k in r if k not in columns and k != "metrics"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)

    def cell(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))

    short = [c for c in columns if c != "status"]
    md = ["| " + " | ".join(short) + " |", "|" + "---|" * len(short)]
    md += ["| " + " | ".join(cell(r.get(c)) for c in short) + " |" for r in rows]
    paths = {"json": atomic_write_json(sweep_dir / "summary.json", {"sweep_dir": str(sweep_dir), "columns": columns,
                                                                     "jobs": rows}),
             "csv": atomic_write_text(sweep_dir / "summary.csv", buf.getvalue()),
             "md": atomic_write_text(sweep_dir / "summary.md", "\n".join(md) + "\n")}
    return paths


def _log_to_wandb(config: DictConfig, sweep_dir: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    """The summary as a W&B table in a run named ``summary`` of the sweep's group (offline unless configured)."""
    node = OmegaConf.select(config, "logger.wandb")
    if node is None or os.environ.get("WANDB_MODE", "").lower() == "disabled":
        return
    import wandb

    from vase.config import wandb_offline

    choices = OmegaConf.select(config, "hydra.runtime.choices") or {}
    group = f"{choices.get('sweep') or 'multirun'}-{sweep_dir.name}"
    run = wandb.init(project=str(node.get("project", "vase")), group=group, name=f"{group}-summary",
                     job_type="summary", dir=str(sweep_dir), mode="offline" if wandb_offline() else "online",
                     reinit="create_new")
    try:
        run.log({"sweep/summary": wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in rows])})
    finally:
        run.finish()


class SweepSummary(Callback):
    """Hydra callback: at the end of a multirun, write the sweep's summary and log it to W&B."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not sweep_dir.is_dir():
            return
        paths = write_sweep_summary(sweep_dir)
        data = read_json(paths["json"])
        try:
            _log_to_wandb(config, sweep_dir, data["jobs"], data["columns"])
        except Exception as e:  # noqa: BLE001 - the summary files are written; W&B is a copy of them
            log.warning("the sweep summary was written to %s but could not be logged to W&B: %s", paths["md"], e)
        print(f"sweep summary: {paths['md']}")


def _main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m vase.eval.sweep_summary <multirun directory>", file=sys.stderr)
        return 2
    print(write_sweep_summary(argv[0])["md"])
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
