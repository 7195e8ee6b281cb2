"""Fewer, larger GRPO steps with the same samples: what one prompt's share of a step costs at each batch size, on
the quick sweep's GRPO job as it ran until 2026-12-07 (`QUICK_JOB`: six views, the tiny model at width 128, G 4, 48
tokens; ``experiment=ablation_quick`` has since shown two views in steps of 16 prompts, which this measurement led to).

    python benchmarks/grpo_batch.py                       # batches of 4 (the quick form's), 8 and 16 prompts
    python benchmarks/grpo_batch.py --batches 4,16 --prompts 96 --no-write

Each batch size runs in a process of its own, one after the other, alone on the machine: ``python train.py
experiment=ablation_demo val.vqa=null hydra.mode=RUN reward.weights.shape=0.6 stage.batch_size=<B>
trainer.max_steps=<P/B + 1> val.heldout=null`` (the job as the sweep runs it, without its held-out scoring), so every
size sees the same number of prompts after the first step. The seconds are the run's own ``perf/throughput.json``
(vase's throughput callback: the mean over the optimizer steps after the first, and each phase's share: decode,
reference, policy, reward, optimizer). The shared SFT they start from is built by the first run if the cache lacks
it, outside the timed steps. A prompt's cost is a step's seconds over its prompts; the ratio is that cost against the
smallest batch's. The section in RESULTS.md then says what the quick sweep's two GRPO jobs would take at each size:
the quick form's 300 steps of 4 prompts, as the same 1,200 prompts in larger steps (the training itself would change:
fewer optimizer steps, so its decisions would have to be checked again).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import commit_label, update_results  # noqa: E402
from benchmarks._results import machine as describe_machine  # noqa: E402
from vase.kernels import kernels_label  # noqa: E402
from vase.runs import RUN_FILE  # noqa: E402

QUICK_PROMPTS = 300 * 4
"""The quick form's GRPO job: 300 steps of 4 prompts (conf/shared/cpu_grpo.yaml)."""

QUICK_JOB = ["experiment=ablation_demo", "val.vqa=null"]
"""The quick sweep's GRPO job as these benchmarks measured it (six views, 4 prompts a step): experiment=ablation_quick
until 2026-12-07, which is experiment=ablation_demo on one draw without QA's transfer, one job at a time here."""


def run_batch(batch: int, prompts: int, work: Path, cache: Path) -> dict[str, Any]:
    """One GRPO job at ``batch`` prompts a step over ``prompts`` timed prompts: its throughput record."""
    steps = prompts // batch + 1  # the callback leaves the first step out (warm-up)
    logs = work / f"b{batch}"
    cmd = [sys.executable, str(ROOT / "train.py"), *QUICK_JOB, "hydra.mode=RUN", "reward.weights.shape=0.6",
           f"stage.batch_size={batch}", f"trainer.max_steps={steps}", "val.heldout=null", f"paths.log_dir={logs}",
           f"paths.cache_dir={cache}"]
    env = {**os.environ, "WANDB_MODE": "offline", "TOKENIZERS_PARALLELISM": "false"}
    print(f"batch {batch}: {steps} steps", flush=True)
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"batch {batch} failed (rc {p.returncode}): {' '.join(cmd[1:])}\n{p.stderr[-3000:]}")
    (record,) = sorted(logs.glob("*/runs/*/perf/throughput.json"))
    got = json.loads(record.read_text())
    ran = json.loads((record.parent.parent / RUN_FILE).read_text())
    return {"batch": batch, "s_per_step": got["s_per_step"],
            "phases": got.get("phases_s_per_step") or {}, "timed_steps": got.get("optimizer_steps_timed"),
            "machine": kernels_label(ran.get("machine"))}


def section(rows: list[dict[str, Any]], commit: str) -> str:
    """RESULTS.md's section: each batch size's step, its prompt's cost, the ratio, and the quick sweep's GRPO time."""
    base = rows[0]["s_per_step"] / rows[0]["batch"]
    phases = ["decode", "reference", "policy", "reward", "optimizer"]
    machines = sorted({r["machine"] for r in rows})
    out = [f"### Fewer, larger GRPO steps: a prompt's cost at each batch size, the quick sweep's GRPO job ({commit}; "
           f"cpu, {describe_machine('cpu')}, {time.strftime('%Y-%m-%d')})\n",
           f"Machine (the runs' own records): {'; '.join(machines)}.\n",
           "`python benchmarks/grpo_batch.py` (method in its docstring): `experiment=ablation_quick`'s GRPO job at "
           "shape weight 0.6, each batch size in its own process, alone on the machine, the same prompts after the "
           "first step.\n",
           "| prompts a step (x 4 completions) | timed steps | s a step | " + " | ".join(phases)
           + " | s a prompt | against 4 | the quick sweep's two GRPO jobs (2 x 1,200 prompts) |",
           "|---|---|---|" + "---|" * len(phases) + "---|---|---|"]
    for r in rows:
        per = r["s_per_step"] / r["batch"]
        out.append(f"| {r['batch']} | {r['timed_steps']} | {r['s_per_step']:.3f} | "
                   + " | ".join(f"{r['phases'].get(k, 0.0):.3f}" for k in phases)
                   + f" | {per:.4f} | {per / base:.2f}x | {2 * QUICK_PROMPTS * per:.0f} s |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="4,8,16", help="prompts a step, comma-separated, the smallest first")
    ap.add_argument("--prompts", type=int, default=192, help="timed prompts at every size (a multiple of each)")
    ap.add_argument("--cache", default=str(ROOT / ".cache"), help="the tiny model, the vases and the shared SFT")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true", help="print only; RESULTS.md untouched")
    a = ap.parse_args(argv)
    batches = [int(b) for b in a.batches.split(",")]
    if bad := [b for b in batches if b < 1 or a.prompts % b]:
        ap.error(f"--prompts {a.prompts} is not a multiple of the batch size(s) {bad}")
    with tempfile.TemporaryDirectory(prefix="vase-grpo-batch-") as work:
        rows = [run_batch(b, a.prompts, Path(work), Path(a.cache)) for b in batches]
    text = section(rows, commit_label(ROOT))
    print(text)
    if not a.no_write:
        update_results(a.results, "grpo_batch", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
