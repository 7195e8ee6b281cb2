"""The overhead vase cuts without changing a bit, each measured on and off in one run on this machine.

    python benchmarks/overhead.py                  # both parts, written to RESULTS.md
    python benchmarks/overhead.py --pairs 1 --steps 31 --no-write

1. **The vision tower** (`vase.models.vision_tower`): the tiny model at the quick sweep's width (128), a batch of 48
   views of 112 pixels (an SFT batch of 8 vases x 6 views), forward and backward of the vision tower, in this process,
   alternating vase's classes and transformers' own (`--rounds` of 20 calls each, after one untimed call each); the
   outputs and gradients are compared bit for bit.
2. **`cpu_allocator`** (`vase.allocator`): the quick sweep's GRPO job as it ran then (six views, 4 prompts a step:
   ``experiment=ablation_demo val.vqa=null hydra.mode=RUN``, `benchmarks.grpo_batch.QUICK_JOB`; its SFT cached: the
   first pair builds it, untimed), two at a time side by side with ``OMP_WAIT_POLICY=PASSIVE`` as
   ``hydra/launcher=parallel`` runs them (shape weight 0.6 and 0), ``--pairs`` pairs with ``cpu_allocator=keep`` and
   as many with ``system``, alternated. Each job's seconds a step are its own ``perf/throughput.json`` (the steps
   after the first); its page faults and system time are the kernel's (``os.wait4``); the two settings' histories
   must be the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
from benchmarks.grpo_batch import QUICK_JOB  # noqa: E402


def vision_tower(cache: Path, rounds: int) -> dict[str, Any]:
    """Part 1: seconds a forward and backward of 48 views with vase's classes and with transformers'."""
    import torch

    from vase.models.loading import load_model
    from vase.models.tiny import TinySpec, build_tiny
    from vase.models.vision_tower import fast_vision_tower

    spec = TinySpec(hidden_size=128, intermediate_size=256)
    model = load_model(str(build_tiny(cache / "models" / f"tiny-qwen2_5_vl-{spec.fingerprint()}", spec)))
    visual, cfg = model.model.visual, model.model.visual.config
    grid = torch.tensor([[1, 8, 8]] * 48)
    torch.manual_seed(0)
    pixels = torch.randn(48 * 64, 3 * cfg.temporal_patch_size * cfg.patch_size ** 2)

    def call() -> tuple[torch.Tensor, list[torch.Tensor]]:
        visual.zero_grad(set_to_none=True)
        out = visual(pixels, grid_thw=grid).pooler_output
        out.pow(2).sum().backward()
        return out.detach(), [p.grad for p in visual.parameters() if p.grad is not None]

    results, times = {}, {True: [], False: []}
    for fast in (True, False):
        fast_vision_tower(model, fast)
        results[fast] = call()
    same = torch.equal(results[True][0], results[False][0]) and all(
        torch.equal(a, b) for a, b in zip(results[True][1], results[False][1]))
    for _ in range(rounds):
        for fast in (False, True):
            fast_vision_tower(model, fast)
            t = time.perf_counter()
            for _ in range(20):
                call()
            times[fast].append((time.perf_counter() - t) / 20)
    fast_vision_tower(model)
    return {"fast": times[True], "plain": times[False], "same_bits": same, "threads": torch.get_num_threads()}


def _grpo_job(mode: str, shape: str, steps: int, work: Path, cache: Path) -> subprocess.Popen:
    logs = work / f"{mode}-{shape}-{time.monotonic_ns()}"
    cmd = [sys.executable, str(ROOT / "train.py"), *QUICK_JOB, "hydra.mode=RUN",
           f"reward.weights.shape={shape}", f"trainer.max_steps={steps}", "val.heldout=null",
           f"cpu_allocator={mode}", f"paths.log_dir={logs}", f"paths.cache_dir={cache}"]
    env = {**os.environ, "WANDB_MODE": "offline", "TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": "PASSIVE"}
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    p.logs = logs  # type: ignore[attr-defined]
    return p


def _finish(p: subprocess.Popen) -> dict[str, Any]:
    err = p.stderr.read() if p.stderr else ""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"a GRPO job failed (rc {p.returncode}):\n{err[-3000:]}")
    (record,) = sorted(p.logs.glob("*/runs/*/perf/throughput.json"))  # type: ignore[attr-defined]
    history = next(record.parent.parent.glob("train_history*.json")).read_bytes()
    return {"s_per_step": json.loads(record.read_text())["s_per_step"], "faults": usage.ru_minflt,
            "sys_s": usage.ru_stime, "history": history}


def allocator_pairs(pairs: int, steps: int, cache: Path) -> dict[str, list[dict[str, Any]]]:
    """Part 2: ``pairs`` side-by-side pairs of GRPO jobs under each setting, alternated (after one untimed pair that
    builds what the cache lacks)."""
    out: dict[str, list[dict[str, Any]]] = {"keep": [], "system": []}
    with tempfile.TemporaryDirectory(prefix="vase-overhead-") as work:
        warm = _grpo_job("keep", "0.6", 2, Path(work), cache)
        _finish(warm)
        for i in range(pairs):
            for mode in (("system", "keep") if i % 2 else ("keep", "system")):
                jobs = [_grpo_job(mode, shape, steps, Path(work), cache) for shape in ("0.6", "0.0")]
                out[mode].append({"jobs": [_finish(p) for p in jobs]})
                print(f"{mode}: " + ", ".join(f"{j['s_per_step']:.3f} s a step" for j in out[mode][-1]["jobs"]),
                      flush=True)
    return out


def section(vision: dict[str, Any] | None, pairs: dict[str, list[dict[str, Any]]] | None, steps: int,
            commit: str) -> str:
    out = [f"### The overhead cut with the same bits: the vision tower and `cpu_allocator` ({commit}; cpu, "
           f"{describe_machine('cpu')}, {time.strftime('%Y-%m-%d')})\n",
           "`python benchmarks/overhead.py` (method in its docstring), both settings alternated in one run, alone on "
           "the machine.\n"]
    if vision:
        fast, plain = statistics.median(vision["fast"]), statistics.median(vision["plain"])
        out += ["| vision tower, 48 views, forward and backward | median s | rounds |",
                "|---|---|---|",
                f"| transformers' classes | {plain:.4f} | {len(vision['plain'])} |",
                f"| vase's (`vase.models.vision_tower`) | {fast:.4f} | {len(vision['fast'])} |",
                f"| **ratio** | **{fast / plain:.2f}x** | outputs and gradients "
                f"{'the same bits' if vision['same_bits'] else '**differ**'}; {vision['threads']} torch threads |\n"]
    if pairs:
        rows = {m: [j for pair in runs for j in pair["jobs"]] for m, runs in pairs.items()}
        same = len({j["history"] for m in rows for j in rows[m][::2]}) == 1 and \
            len({j["history"] for m in rows for j in rows[m][1::2]}) == 1
        med = {m: statistics.median(j["s_per_step"] for j in js) for m, js in rows.items()}
        out += [f"| two GRPO jobs side by side ({steps} steps each) | s a step, each job | median | page faults a job "
                "| system s a job |",
                "|---|---|---|---|---|"]
        for m in ("system", "keep"):
            each = ", ".join(f"{j['s_per_step']:.3f}" for j in rows[m])
            out.append(f"| `cpu_allocator={m}` | {each} | "
                       f"{med[m]:.3f} | {statistics.median(j['faults'] for j in rows[m]):,.0f} | "
                       f"{statistics.median(j['sys_s'] for j in rows[m]):.1f} |")
        out.append(f"| **ratio keep / system** | | **{med['keep'] / med['system']:.2f}x** | | histories "
                   f"{'the same bytes' if same else '**differ**'} |\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="vision tower: rounds of 20 calls per setting")
    ap.add_argument("--pairs", type=int, default=2, help="cpu_allocator: side-by-side pairs per setting")
    ap.add_argument("--steps", type=int, default=61, help="GRPO steps a job (the first is not timed)")
    ap.add_argument("--only", choices=["vision", "allocator"], help="run one part")
    ap.add_argument("--cache", default=str(ROOT / ".cache"), help="the tiny model, the vases and the shared SFT")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true", help="print only; RESULTS.md untouched")
    a = ap.parse_args(argv)
    cache = Path(a.cache)
    vision = vision_tower(cache, a.rounds) if a.only in (None, "vision") else None
    pairs = allocator_pairs(a.pairs, a.steps, cache) if a.only in (None, "allocator") else None
    text = section(vision, pairs, a.steps, commit_label(ROOT))
    print(text)
    if not a.no_write:
        update_results(a.results, "overhead", text)
    return 0 if (vision is None or vision["same_bits"]) and "**differ**" not in text else 1


if __name__ == "__main__":
    raise SystemExit(main())
