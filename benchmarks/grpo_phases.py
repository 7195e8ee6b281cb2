"""Where one GRPO step's time goes on this CPU, phase by phase, against what the machine can do.

vase's GRPOModule at the paper's structure on the hub-shaped checkpoint (`vase.models.hub`: Qwen's tokenizer and
151,936-row vocabulary, tiny sizes), G = 4 completions of 2 prompts, six rendered views each, LoRA r 8, beta 0.04,
forced completion lengths (256 and 1,024 tokens by default), each length in its own process. The module already
times its phases (`GRPOModule.phase_seconds`: vision, decode, reward, reference, policy, optimizer); the rest of a
step (Lightning's loop, detokenizing, advantages, logging) is the step's time less theirs.

For each phase the script counts, in one more step run under two PyTorch dispatch modes (never timed):

- **FLOPs** from the shapes of every aten operator (`torch.utils.flop_counter`'s formulas: 2mnk for each matrix
  product, the attention kernels' own formulas, the backward's products too);
- **operators** (aten calls reaching the dispatcher) and **bytes** (the sizes of every operator's non-view tensor
  inputs and outputs: the traffic if nothing stayed in cache, an upper bound).

It measures, in the same process and threads, the matrix-product peak (a 2,048-square float32 `torch.mm`, best of
7), the memory bandwidth (a 256 MiB copy, read plus write, best of 7) and one small operator's cost (an 8 x 64
`torch.add`, the dispatcher's and Python's per-call price). Each phase's time is then set against three floors:
FLOPs at peak, bytes at the bandwidth, operators at the per-call price; what none of them covers is the rest
(Python between calls, allocation, sampling's data-dependent work, the cost model's own error).

    python benchmarks/grpo_phases.py                          # 256 and 1,024 tokens, section in RESULTS.md
    python benchmarks/grpo_phases.py --tokens 256 --no-write  # one length, printed only
    python benchmarks/grpo_phases.py --against 36c1504        # before and after a change, in one run

With ``--against <commit>`` each length runs twice in the same run, alternating: once with vase's code at that
commit (a detached git worktree in a temporary folder, removed at the end; this script and its helpers stay the
current ones) and once with the current tree, and the section gives both tables and each phase's ratio (current
over then): a change's effect measured side by side on the same machine, never against a number from another day.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import commit_label, update_results  # noqa: E402
from benchmarks._results import machine as describe_machine  # noqa: E402

PHASES = ("vision", "decode", "reward", "reference", "policy", "optimizer")
WHAT = {"vision": "the frozen vision tower, once per prompt",
        "decode": "the prefill and every sampled token (8 rows, the head over the whole vocabulary each token)",
        "reward": "the captions' reward (VaseReward, sequence similarity)",
        "reference": "the reference log-probabilities (the adapter off): one forward, head in chunks",
        "policy": "the policy's forward and backward (LoRA), head in chunks, recomputed in the backward",
        "optimizer": "gradient clipping and AdamW on the LoRA weights",
        "outside": "the rest of the step: Lightning's loop, detokenizing, advantages, logging"}


def machine_floors(threads: int) -> dict:
    """This process's matrix-product peak (GFLOP/s), memory bandwidth (GB/s) and one small operator's cost (s)."""
    import torch

    torch.set_num_threads(threads)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)

    def best(fn, reps: int = 7) -> float:
        fn()
        out = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        return min(out)

    mm = best(lambda: torch.mm(a, b))
    big = torch.ones(2 ** 26)  # 256 MiB
    dst = torch.empty_like(big)
    copy = best(lambda: dst.copy_(big))
    x, y = torch.randn(8, 64), torch.randn(8, 64)

    def adds() -> None:
        for _ in range(2000):
            torch.add(x, y)

    op = best(adds) / 2000
    return {"peak_gflops": 2 * n ** 3 / mm / 1e9, "bandwidth_gbs": 2 * big.nbytes / copy / 1e9, "op_s": op,
            "threads": torch.get_num_threads()}


def _counting_phase(module, counts: dict):
    """A stand-in for `GRPOModule._phase` that counts each phase's FLOPs, operators and bytes instead of its time."""
    from contextlib import contextmanager

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import FlopCounterMode

    # FlopCounterMode's own formulas, without the mode: its module tracker breaks on a head called inside a custom
    # backward (vase.models.logprobs recomputes each chunk's logits there)
    registry = FlopCounterMode(display=False).flop_registry

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops, self.bytes, self.flops = 0, 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            self.ops += 1
            if func._overloadpacket in registry:
                self.flops += registry[func._overloadpacket](*args, **kwargs, out_val=out)
            if not getattr(func, "is_view", False):
                self.bytes += sum(t.nbytes for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor))
            return out

    @contextmanager
    def phase(name: str):
        ops = Ops()
        with ops:
            yield
        c = counts.setdefault(name, {"flops": 0, "ops": 0, "bytes": 0})
        c["flops"] += ops.flops
        c["ops"] += ops.ops
        c["bytes"] += ops.bytes

    return phase


def run_child(cache: Path, tokens: int, warmup: int, steps: int, threads: int, code: str | None = None) -> dict:
    if code:  # vase from another tree (--against): first on the path, before anything imports it
        sys.path.insert(0, code)
    import pytorch_lightning as pl
    import torch

    import vase
    from benchmarks.grpo_step import vase_module

    if code and not Path(vase.__file__).resolve().is_relative_to(Path(code).resolve()):
        raise SystemExit(f"vase was imported from {vase.__file__}, not from {code}")

    floors = machine_floors(threads)
    total = warmup + steps + 1  # the last one counts FLOPs, operators and bytes, untimed
    module, loader = vase_module(cache, total, model_path="hub", tokens=tokens)
    model = module.model
    timed: list[dict] = []
    counts: dict = {}
    state = {"i": 0, "t": 0.0, "before": {}}

    class Clock(pl.Callback):
        def on_train_batch_start(self, *a, **k):
            if state["i"] == warmup + steps:
                module._phase = _counting_phase(module, counts)
            state["before"] = dict(module.phase_seconds)
            state["t"] = time.perf_counter()

        def on_train_batch_end(self, *a, **k):
            wall = time.perf_counter() - state["t"]
            if warmup <= state["i"] < warmup + steps:
                phases = {p: module.phase_seconds.get(p, 0.0) - state["before"].get(p, 0.0) for p in PHASES}
                timed.append({"wall": wall, **phases})
            state["i"] += 1

    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=total, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[Clock()],
                         precision="32-true")
    trainer.fit(module, train_dataloaders=loader)
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return {"tokens": tokens, "floors": floors, "timed": timed, "counts": counts, "torch": torch.__version__,
            "vase": str(Path(vase.__file__).resolve().parents[1]),
            "model": {"hidden": cfg.hidden_size, "layers": cfg.num_hidden_layers, "vocab": cfg.vocab_size,
                      "params": sum(p.numel() for p in model.parameters())}}


def phase_rows(res: dict) -> tuple[list[dict], float]:
    """Each phase's median time over the timed steps, its counts and floors, and the step's median wall time."""
    import statistics

    timed, counts, fl = res["timed"], res["counts"], res["floors"]
    wall = statistics.median(t["wall"] for t in timed)
    rows = []
    for p in PHASES:
        s = statistics.median(t[p] for t in timed)
        c = counts.get(p, {"flops": 0, "ops": 0, "bytes": 0})
        t_flops = c["flops"] / (fl["peak_gflops"] * 1e9)
        t_bytes = c["bytes"] / (fl["bandwidth_gbs"] * 1e9)
        t_ops = c["ops"] * fl["op_s"]
        rows.append({"phase": p, "s": s, "gflop": c["flops"] / 1e9, "gflops": c["flops"] / 1e9 / s if s else 0.0,
                     "t_flops": t_flops, "t_bytes": t_bytes, "ops": c["ops"], "t_ops": t_ops,
                     "rest": s - max(t_flops, t_bytes) - t_ops})
    inside = sum(r["s"] for r in rows)
    rows.append({"phase": "outside", "s": wall - inside, "gflop": 0.0, "gflops": 0.0, "t_flops": 0.0, "t_bytes": 0.0,
                 "ops": 0, "t_ops": 0.0, "rest": wall - inside})
    return rows, wall


def gap_line(rows: list[dict], wall: float) -> str:
    """What a length's table says: the phase furthest above its floors, or, where every phase is within 5 % of the
    step of them, the largest phase and the floor that bounds it (the byte floor is an upper bound on the traffic:
    a phase "at" it may still be faster where its tensors stay in cache)."""
    def floor(r: dict) -> float:
        return max(r["t_flops"], r["t_bytes"])

    gap = max(rows, key=lambda r: r["s"] - floor(r))
    if gap["s"] - floor(gap) > 0.05 * wall:
        return (f"\nLargest gap to its floors: **{gap['phase']}** ({WHAT[gap['phase']]}): {gap['s']:.2f} s against "
                f"{floor(gap):.2f} s of FLOPs or bytes at the machine's rates and {gap['t_ops']:.2f} s of operator "
                "calls.\n")
    big = max(rows, key=lambda r: r["s"])
    bound = "bytes" if big["t_bytes"] >= big["t_flops"] else "FLOPs"
    return (f"\nEvery phase is within {max(0.0, gap['s'] - floor(gap)):.2f} s of its floors (5 % of the step or "
            f"less). The largest is **{big['phase']}** ({100 * big['s'] / wall:.0f} % of the step: "
            f"{WHAT[big['phase']]}), {big['s']:.2f} s against {floor(big):.2f} s of {bound} at the machine's rates.\n")


def section(results: list[dict], commit: str, against: list[dict] | None = None, base: str = "") -> str:
    """The RESULTS.md section: the floors, each length's phase table and its largest gap; with ``against`` (the same
    lengths run with vase's code at ``base``), that code's tables too and each phase's time as a ratio."""
    fl = results[0]["floors"]
    m = results[0]["model"]
    out = [f"### GRPO step phases against the machine's floors (cpu, {describe_machine('cpu')}, "
           f"{time.strftime('%Y-%m-%d')}, commit {commit})\n",
           f"`python benchmarks/grpo_phases.py` (method in its docstring). The hub-shaped Qwen2.5-VL ({m['params']:,} "
           f"parameters: hidden {m['hidden']}, {m['layers']} layers, vocabulary {m['vocab']:,}), 2 prompts x G=4, "
           f"six 112-px views per prompt, LoRA r 8, beta 0.04, loss dapo, rollout eager, torch {results[0]['torch']} "
           f"on {fl['threads']} threads. This process measured: matrix-product peak **{fl['peak_gflops']:.1f} "
           f"GFLOP/s** (2,048-square float32 mm), memory bandwidth **{fl['bandwidth_gbs']:.1f} GB/s** (256 MiB "
           f"copy), one small operator **{fl['op_s'] * 1e6:.1f} us** (8 x 64 add). Floors: FLOPs at that peak, "
           f"bytes (every operator's tensors, an upper bound) at that bandwidth, operators at that price; rest = "
           f"time less the larger of the first two and the third.\n"]
    if against:
        out.append(f"\nRun with `--against {base}`: each length ran with vase's code at {base} and with {commit}, "
                   "alternating in one run on this machine; the tables below are the current code's, then the "
                   "ratios.\n")
    for res in results:
        rows, wall = phase_rows(res)
        out.append(f"\n{res['tokens']} completion tokens: {wall:.2f} s per step (median of {len(res['timed'])}).\n\n"
                   "| phase | s | share | GFLOP | GFLOP/s | % of peak | FLOP floor s | byte floor s | operators | "
                   "operator floor s | rest s |\n|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            pct = 100 * r["gflops"] / fl["peak_gflops"]
            out.append(f"| {r['phase']} | {r['s']:.2f} | {100 * r['s'] / wall:.0f} % | {r['gflop']:.2f} | "
                       f"{r['gflops']:.1f} | {pct:.1f} | {r['t_flops']:.2f} | {r['t_bytes']:.2f} | {r['ops']:,} | "
                       f"{r['t_ops']:.2f} | {r['rest']:.2f} |")
        out.append(gap_line(rows, wall))
    if against:
        out.append(ratio_table(results, against, commit, base))
    out.append("\nPhases: " + "; ".join(f"{k}: {v}" for k, v in WHAT.items()) + ".\n")
    return "\n".join(out)


def ratio_table(now: list[dict], then: list[dict], commit: str, base: str) -> str:
    """Each phase's median seconds at ``base`` and now, and now over then, per length."""
    out = [f"\nBefore ({base}) and after ({commit}), seconds per step (median), in one run:\n\n"
           "| tokens | phase | before s | after s | after / before |\n|---|---|---|---|---|"]
    for a, b in zip(now, then):
        rows_a, wall_a = phase_rows(a)
        rows_b, wall_b = phase_rows(b)
        for ra, rb in zip([*rows_a, {"phase": "step", "s": wall_a}], [*rows_b, {"phase": "step", "s": wall_b}]):
            ratio = f"{ra['s'] / rb['s']:.2f}x" if rb["s"] > 0.005 else "-"
            name = f"**{ra['phase']}**" if ra["phase"] == "step" else ra["phase"]
            out.append(f"| {a['tokens']} | {name} | {rb['s']:.2f} | {ra['s']:.2f} | {ratio} |")
    return "\n".join(out) + "\n"


@contextlib.contextmanager
def worktree(commit: str):
    """vase's tree at ``commit``, checked out (detached) in a temporary folder and removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix="vase-against-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where / "tree"), commit], check=True,
                   capture_output=True)
    try:
        yield where / "tree"
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where / "tree")],
                       capture_output=True)
        shutil.rmtree(where, ignore_errors=True)  # our own temporary folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="256,1024", help="forced completion lengths, comma-separated")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per length (the median is reported)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "bench"))
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true", help="print only; RESULTS.md untouched")
    ap.add_argument("--json", help="also write the raw measurements here")
    ap.add_argument("--against", help="also run each length with vase's code at this commit (before and after)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--code", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        res = run_child(Path(args.cache), args.child, args.warmup, args.steps, args.threads, args.code)
        Path(args.result).write_text(json.dumps(res))
        return

    def child(tokens: int, code: Path | None) -> dict:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            path = Path(f.name)
        print(f"running {tokens} tokens{f' with vase at {args.against}' if code else ''} ...", flush=True)
        subprocess.run([sys.executable, __file__, "--child", str(tokens), "--result", str(path), "--warmup",
                        str(args.warmup), "--steps", str(args.steps), "--threads", str(args.threads), "--cache",
                        args.cache, *(["--code", str(code)] if code else [])], check=True,
                       env={**os.environ, "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"})
        try:
            return json.loads(path.read_text())
        finally:
            path.unlink()  # our own temporary file

    lengths = [int(t) for t in args.tokens.split(",")]
    results, before = [], []
    with worktree(args.against) if args.against else contextlib.nullcontext() as tree:
        for tokens in lengths:
            if tree is not None:
                before.append(child(tokens, tree))
            results.append(child(tokens, None))
    if args.json:
        Path(args.json).write_text(json.dumps({"now": results, "before": before}, indent=1))
    text = section(results, commit_label(ROOT), before or None, args.against or "")
    print(text)
    if not args.no_write:
        update_results(args.results, "grpo_phases cpu hub", text)


if __name__ == "__main__":
    main()
