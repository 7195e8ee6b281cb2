"""GRPO's log-probabilities on the real vocabulary: the chunked gather (vase.models.logprobs) against the full
log-softmax it replaced, side by side, on the hub-shaped checkpoint (vase.models.hub: Qwen's 151,936-row output head)
and on the tiny model at the same completion length.

Each contender runs a few GRPO optimizer steps (benchmarks/grpo_step.py's vase run: 2 prompts x G=4, six views,
forced completion length, beta 0.04, LoRA r 8) in its own process, so the peak-memory readings do not mix; the
per-step losses of the two implementations on the hub checkpoint must agree to 1e-6 (the same seed gives the same
rollouts; only how log-probabilities are computed differs).

    python benchmarks/logprob_memory.py               # CPU; writes its block into benchmarks/RESULTS.md
    python benchmarks/logprob_memory.py --tokens 256  # the paper's completion length
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import machine as describe_machine  # noqa: E402
from benchmarks._results import update_results  # noqa: E402


def _full_logps(self, model, r_inputs, n_completion):  # the code this change replaced, kept here to measure it
    import torch
    import torch.nn.functional as F

    out = model(**r_inputs, logits_to_keep=n_completion + 1)
    logits = out.logits[:, :-1, :].float() / self.temperature
    targets = r_inputs["input_ids"][:, -n_completion:]
    return torch.gather(F.log_softmax(logits, dim=-1), 2, targets.unsqueeze(-1)).squeeze(-1)


def _alone(impl: str, rows: int, tokens: int, vocab: int = 151936) -> dict:
    """The log-probabilities alone, forward and backward, on logits of a GRPO step's shape: the growth of the process's
    peak RSS over the logits and their gradient (which any implementation holds), and the time."""
    import resource

    import torch

    from vase.models.logprobs import selected_logprobs

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(rows, tokens, vocab, generator=g).requires_grad_(True)
    targets = torch.randint(0, vocab, (rows, tokens), generator=g)
    upstream = torch.randn(rows, tokens, generator=g)
    grad = torch.zeros_like(logits)  # the gradient's memory, touched before the baseline is read
    del grad
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    if impl == "full":
        out = _full_from_logits(logits, targets, 1.0)
    else:
        out = selected_logprobs(logits, targets, 1.0)
    (out * upstream).sum().backward()
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"extra_mib": peak - base, "seconds": seconds, "copy_mib": rows * tokens * vocab * 4 / 2**20,
            "values": out.detach()[:, :4].tolist()}


def _full_from_logits(logits, targets, temperature):
    import torch
    import torch.nn.functional as F

    x = logits.float() / temperature
    return torch.gather(F.log_softmax(x, dim=-1), 2, targets.unsqueeze(-1)).squeeze(-1)


def _child(args: argparse.Namespace) -> None:
    if args.alone:
        Path(args.result).write_text(json.dumps(_alone(args.impl, 4, 257)))
        return
    from benchmarks.grpo_step import run_ours
    from vase.training.grpo import GRPOModule

    if args.impl == "full":
        GRPOModule._logps = _full_logps
    model = None
    if args.model == "hub":
        from vase.models.hub import HubSpec, build_hub_checkpoint

        model = str(build_hub_checkpoint(Path(args.cache) / f"hub-qwen2_5_vl-{HubSpec().fingerprint()}"))
    if not args.profile:
        res = run_ours(Path(args.cache), args.steps, args.warmup, "cpu", "dapo", model, tokens=args.tokens)
        Path(args.result).write_text(json.dumps(res))
        return
    profile = cProfile.Profile()  # a run of its own: the profiler's overhead stays out of the timed rows
    profile.enable()
    res = run_ours(Path(args.cache), args.steps, args.warmup, "cpu", "dapo", model, tokens=args.tokens)
    profile.disable()
    stats = pstats.Stats(profile).stats  # (file, line, name) -> (calls, ncalls, tottime, cumtime, callers)
    steps = args.steps + args.warmup
    top = sorted(((v[2], k[2], v[1]) for k, v in stats.items()), reverse=True)[:5]
    res["profile"] = [{"function": name, "s_per_step": tot / steps, "calls_per_step": calls / steps}
                      for tot, name, calls in top]
    Path(args.result).write_text(json.dumps(res))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3, help="timed optimizer steps per contender")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=64, help="forced completion tokens per completion")
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "bench"))
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--impl", choices=["full", "chunked"], help=argparse.SUPPRESS)
    ap.add_argument("--model", choices=["hub", "tiny"], help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--alone", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.impl:
        _child(args)
        return
    out: dict[tuple[str, str], dict] = {}
    for model, impl in (("hub", "full"), ("hub", "chunked"), ("tiny", "chunked"), ("hub", "profile")):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            res_path = f.name
        print(f"running {model} / {impl} ...", flush=True)
        subprocess.run([sys.executable, __file__, "--impl", "chunked" if impl == "profile" else impl, "--model", model,
                        "--result", res_path, "--steps", str(args.steps), "--warmup", str(args.warmup),
                        "--tokens", str(args.tokens), "--cache", args.cache]
                       + (["--profile"] if impl == "profile" else []), check=True,
                       env={**os.environ, "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"})
        out[(model, impl)] = json.loads(Path(res_path).read_text())
    alone: dict[str, dict] = {}
    for impl in ("full", "chunked"):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            res_path = f.name
        subprocess.run([sys.executable, __file__, "--impl", impl, "--alone", "--result", res_path], check=True)
        alone[impl] = json.loads(Path(res_path).read_text())
    same = max(abs(a - b) for ra, rb in zip(alone["full"]["values"], alone["chunked"]["values"]) for a, b in zip(ra, rb))
    full, chunked, tiny = out[("hub", "full")], out[("hub", "chunked")], out[("tiny", "chunked")]
    diff = max(abs(a - b) for a, b in zip(full["losses"], chunked["losses"]))
    med = {k: statistics.median(v["times"]) for k, v in out.items() if k[1] != "profile"}
    rows = [("hub-shaped 3B (debug size, 151,936-row head), full log-softmax (before)", full, med[("hub", "full")]),
            ("hub-shaped 3B (debug size, 151,936-row head), chunked gather (now)", chunked, med[("hub", "chunked")]),
            ("tiny model (2,048-row head), chunked gather", tiny, med[("tiny", "chunked")])]
    table = (f"### GRPO log-probabilities on the real vocabulary (cpu, {describe_machine('cpu')}, "
             f"{time.strftime('%Y-%m-%d')}, `benchmarks/logprob_memory.py`)\n\n"
             f"2 prompts x G=4, six 112-px views, {args.tokens} forced completion tokens, beta 0.04, LoRA r 8, loss "
             f"dapo; median of {args.steps} steps after {args.warmup} warm-up; each row its own process.\n\n"
             "| model, log-probabilities | s / optimizer step | peak memory (MiB) |\n|---|---|---|\n"
             + "".join(f"| {name} | {t:.2f} | {r['peak_mib']:.0f} |\n" for name, r, t in rows)
             + f"\nHub-shaped: now / before **{med[('hub', 'chunked')] / med[('hub', 'full')]:.2f}x** the time, "
             f"**{chunked['peak_mib'] / full['peak_mib']:.2f}x** the peak memory; the per-step losses of the two agree "
             f"to {diff:.1e} (over {len(full['losses'])} steps). Hub-shaped / tiny step time: "
             f"**{med[('hub', 'chunked')] / med[('tiny', 'chunked')]:.2f}x** at the same completion length. "
             "Peak memory is the process maximum RSS.\n\n"
             "Where the hub-shaped run's time goes (cProfile over the whole run, loading and warm-up included, per step; the largest "
             "functions by own time): "
             + "; ".join(f"`{p['function']}` {p['s_per_step']:.2f} s/step ({p['calls_per_step']:.0f} calls)"
                         for p in out[("hub", "profile")]["profile"]) + ".\n\n"
             f"The log-probabilities alone, forward and backward, on fp32 logits of 4 completions x 257 tokens x 151,936 "
             f"(one copy is {alone['full']['copy_mib']:.0f} MiB; the logits and their gradient are held before the "
             "baseline is read), each in its own process:\n\n"
             "| log-probabilities | peak RSS growth (MiB) | copies | seconds |\n|---|---|---|---|\n"
             + "".join(f"| {name} | {alone[k]['extra_mib']:.0f} | {alone[k]['extra_mib'] / alone[k]['copy_mib']:.1f} | "
                       f"{alone[k]['seconds']:.2f} |\n" for name, k in (("full log-softmax + gather (before)", "full"),
                                                                       ("chunked gather (now)", "chunked")))
             + f"\nValues equal to {same:.1e}.\n")
    print(table)
    if diff > 1e-6:
        raise SystemExit(f"the losses differ by {diff:.2e} > 1e-6")
    update_results(args.results, "logprob_memory cpu", table)


if __name__ == "__main__":
    main()
