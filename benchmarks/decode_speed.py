"""Milliseconds per decoded token: vase's rollout engines (eager, static, compiled) against transformers' ``generate``
(the peer), side by side in one process on the same model, prompts and settings.

G completions of one prompt (one rendered view and the caption instruction), sampled at temperature 1, exactly
``--tokens`` new tokens each (the end token is forbidden until then, in every contender), bf16 on a GPU. ``generate``
gets the prompt repeated G times (how TRL calls it); vase's engines prefill it once. The time is the whole call
(prefill included) divided by the tokens per row, the median of ``--repeats`` calls after one untimed call (which
pays any compilation).

    python benchmarks/decode_speed.py                                        # tiny model, CPU
    python benchmarks/decode_speed.py --device cuda --model /tmp/qwen3b      # a (random-weight) 3B on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._results import machine, update_results  # noqa: E402
from benchmarks.grpo_step import bench_model, bench_root  # noqa: E402
from vase.io import WRITTEN_BY, atomic_write_json, user_output  # noqa: E402

TOOL = "benchmarks/decode_speed.py"


def _prompt(processor, root: Path, device: str):
    from vase.data.datamodule import PromptCollator, samples_for
    from vase.data.dataset import VaseDataset

    ds = VaseDataset(root, "train", views=("front",))
    batch = PromptCollator(processor)([samples_for(ds[0], "caption")[0]])
    keys = ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw")
    return {k: batch[k].to(device) for k in keys}


def run(model_dir: str, device: str, g: int, tokens: int, repeats: int, root: Path, engines: list[str]) -> dict:
    import torch

    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import repeat_batch
    from vase.training.rollout import make_decoder, sample_groups

    processor = load_processor(model_dir)
    model = load_model(model_dir, dtype="bfloat16" if device == "cuda" else "float32").to(device).eval()
    inputs = _prompt(processor, root, device)
    tok = processor.tokenizer
    eos = sorted({tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")})
    pad = tok.pad_token_id

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def timed(fn) -> tuple[float, list[float]]:
        fn()  # untimed: compilation, allocator warm-up
        times = []
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            out = fn()
            sync()
            times.append(time.perf_counter() - t0)
            assert out.shape[-1] >= tokens, out.shape
        return statistics.median(times) / tokens * 1e3, times

    results: dict[str, dict] = {}
    rep = repeat_batch({**inputs, "images": [[None]]}, g)
    rep = {k: v for k, v in rep.items() if k != "images"}

    def generate():
        with torch.no_grad():
            out = model.generate(**rep, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=tokens,
                                 min_new_tokens=tokens, pad_token_id=pad, eos_token_id=eos)
        return out[:, rep["input_ids"].shape[1]:]

    if "generate" in engines:
        ms, times = timed(generate)
        results["transformers generate"] = {"ms_per_token": ms, "times": times}
    for engine in [e for e in engines if e != "generate"]:
        decoder = make_decoder(engine)
        ms, times = timed(lambda d=decoder: sample_groups(model, inputs, g, max_new_tokens=tokens, eos_ids=eos,
                                                          pad_id=pad, min_new_tokens=tokens, decoder=d))
        results[f"vase {engine}"] = {"ms_per_token": ms, "times": times}
    return {"results": results, "machine": machine(device), "prompt_tokens": int(inputs["input_ids"].shape[1]),
            "torch": torch.__version__, "parameters": sum(p.numel() for p in model.parameters())}


def table(res: dict, args: argparse.Namespace) -> str:
    base = res["results"].get("transformers generate", {}).get("ms_per_token")
    lines = [f"### Decoding: vase's rollout engines vs transformers `generate` ({args.device}, {res['machine']}, "
             f"{time.strftime('%Y-%m-%d')})\n",
             f"Model `{args.model_label}` ({res['parameters']:,} parameters), G = {args.g}, one view "
             f"({res['prompt_tokens']} prompt tokens), {args.tokens} sampled tokens per row, median of "
             f"{args.repeats} calls after one untimed call; torch {res['torch']}.\n",
             "| engine | ms / token | vs generate |", "|---|---|---|"]
    for name, r in res["results"].items():
        ratio = f"{r['ms_per_token'] / base:.2f}x" if base else "–"
        lines.append(f"| {name} | {r['ms_per_token']:.2f} | {ratio} |")
    if args.device == "cpu":
        lines.append("\nOn a CPU with the tiny model this shows per-call overhead only; the target (<= 8 ms/token for "
                     "the 3B at G 4 on an H100/H200) is measured by `benchmarks/gpu_scale.sh`.")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a Qwen2.5-VL folder (default: the tiny model, built here)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--g", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--resolution", type=int, default=448, help="the rendered view's size in pixels")
    ap.add_argument("--engines", default="generate,eager,static,compiled")
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "bench"))
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--json", help="also write the raw numbers here")
    ap.add_argument("--force", action="store_true", help="replace an existing --json file whatever wrote it")
    args = ap.parse_args()
    # checked before the run: never over a file vase did not write (--force replaces it)
    json_out = user_output(args.json, "--json", TOOL, args.force) if args.json else None
    cache = Path(args.cache)
    args.model_label = Path(args.model).name if args.model else "tiny Qwen2.5-VL"
    res = run(bench_model(cache, args.model), args.device, args.g, args.tokens, args.repeats,
              bench_root(cache, args.resolution), [e.strip() for e in args.engines.split(",") if e.strip()])
    text = table(res, args)
    print(text)
    if json_out is not None:
        atomic_write_json(json_out, {WRITTEN_BY: TOOL, **res})
    update_results(args.results, f"decode_speed {args.device}", text)


if __name__ == "__main__":
    main()
