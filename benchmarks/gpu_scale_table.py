"""Collect the train.py runs of benchmarks/gpu_scale.sh into one table (each run's perf/throughput.json).

    python benchmarks/gpu_scale_table.py add runs.json NAME RUN_DIR RC SECONDS "OVERRIDES"
    python benchmarks/gpu_scale_table.py table runs.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def add(store: Path, name: str, run_dir: Path, rc: int, seconds: float, overrides: str) -> dict:
    perf = run_dir / "perf" / "throughput.json"
    row = {"name": name, "rc": rc, "wall_s": seconds, "overrides": overrides,
           **(json.loads(perf.read_text()) if perf.is_file() else {"missing": str(perf)})}
    rows = json.loads(store.read_text()) if store.is_file() else []
    store.write_text(json.dumps([r for r in rows if r["name"] != name] + [row], indent=1))
    return row


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return format(value, fmt) if isinstance(value, (int, float)) else "–"  # not measured: a dash, never 0.0


def table(rows: list[dict]) -> str:
    gpu = next((r["gpu"] for r in rows if r.get("gpu")), rows[0].get("device", "?") if rows else "?")
    lines = [f"### train.py at scale ({gpu}, {time.strftime('%Y-%m-%d')}, benchmarks/gpu_scale.sh)\n",
             "Each run's perf/throughput.json: the first optimizer step (warm-up, compilation) left out; MFU counts "
             "6 x parameters x tokens per step.\n",
             "| run | exit | s / optimizer step | tokens / s | peak memory (GiB) | MFU | steps timed | wall (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mfu = f"{100 * r['mfu']:.1f} %" if isinstance(r.get("mfu"), (int, float)) else "–"
        lines.append(f"| {r['name']} | {r['rc']} | {_cell(r, 's_per_step', '.2f')} | {_cell(r, 'tokens_per_s', ',.0f')} "
                     f"| {_cell(r, 'peak_memory_gib', '.1f')} | {mfu} | {r.get('optimizer_steps_timed', '–')} "
                     f"| {r['wall_s']} |")
    phased = [r for r in rows if r.get("phases_s_per_step")]
    if phased:
        lines.append("\nWhere a step's time goes (seconds per optimizer step, each part between two GPU "
                     "synchronisations; the GRPO module's `phase_seconds`):\n")
        for r in phased:
            parts = sorted(r["phases_s_per_step"].items(), key=lambda kv: -kv[1])
            lines.append(f"- {r['name']}: " + ", ".join(f"{k} {v:.2f}" for k, v in parts))
    lines.append("\nOverrides of each run:\n")
    lines += [f"- {r['name']}: `{r['overrides']}`" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    cmd, store = sys.argv[1], Path(sys.argv[2])
    if cmd == "add":
        name, run_dir, rc, seconds, overrides = sys.argv[3], Path(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), \
            sys.argv[7]
        print(json.dumps(add(store, name, run_dir, rc, seconds, overrides))[:300])
    elif cmd == "table":
        print(table(json.loads(store.read_text()) if store.is_file() else []))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
