"""Make a random-weight Qwen2.5-VL-3B/7B-Instruct-architecture checkpoint for GPU benchmarks (no hub access needed).

The architecture is the public ``config.json`` of each model (sizes, heads, vision tower, special-token ids, vocabulary
rows); the weights are random; the tokenizer is vase's tiny byte-level BPE padded to the public vocabulary, so that
every special token sits at the public id (``<|endoftext|>`` 151643 ... ``<|video_pad|>`` 151656) and the rows past
the tokenizer stay unused, as in the real checkpoint. The folder is saved with ``save_pretrained`` and loads through
``model.name_or_path`` like a downloaded one:

    python benchmarks/random_checkpoint.py --arch 3b --out /tmp/qwen2_5_vl_3b_random --device cuda
    python train.py model=qwen2_5_vl_3b model.name_or_path=/tmp/qwen2_5_vl_3b_random stage=grpo trainer=gpu

``--count`` builds on the meta device and prints the parameter count only (3B: 3,754,622,976).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from vase.io import atomic_directory  # noqa: E402
from vase.models.hub import ARCHS  # noqa: E402  (the public architectures, one table for both stand-ins)
from vase.models.tiny import FIRST_SPECIAL_ID, PUBLIC_SPECIAL_TOKENS, TinySpec, build_processor, build_tokenizer  # noqa: E402,F401

VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, in_chans=3, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[7, 15, 23, 31],
              tokens_per_second=2, hidden_act="silu")
SPECIAL = PUBLIC_SPECIAL_TOKENS


def padded_tokenizer(spec: TinySpec | None = None):
    """The tiny BPE with every special token at its public id (:func:`vase.models.tiny.pad_to_public_ids`)."""
    return build_tokenizer(replace(spec or TinySpec(), public_token_ids=True))


def public_config(arch: str, **overrides: Any):
    """The public architecture of ``arch`` (``3b``/``7b``) as a ``Qwen2_5_VLConfig``; ``overrides`` change text sizes
    (a smaller model of the same shape, for tests)."""
    # lazy: transformers
    from transformers import Qwen2_5_VLConfig

    a = {**ARCHS[arch], **overrides}
    vision_over = {k[len("vision_"):]: v for k, v in overrides.items() if k.startswith("vision_")}
    a = {k: v for k, v in a.items() if not k.startswith("vision_")}
    text = dict(a, hidden_act="silu", max_position_embeddings=128000, rms_norm_eps=1e-6, sliding_window=32768,
                use_sliding_window=False, attention_dropout=0.0, initializer_range=0.02,
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
                bos_token_id=FIRST_SPECIAL_ID, eos_token_id=FIRST_SPECIAL_ID + 2, pad_token_id=FIRST_SPECIAL_ID)
    vision = dict(VISION, out_hidden_size=a["hidden_size"], **vision_over)
    at = {t: FIRST_SPECIAL_ID + i for i, t in enumerate(SPECIAL)}
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, image_token_id=at["<|image_pad|>"],
                            video_token_id=at["<|video_pad|>"], vision_start_token_id=at["<|vision_start|>"],
                            vision_end_token_id=at["<|vision_end|>"], tie_word_embeddings=a["tie_word_embeddings"])


def count_parameters(arch: str, **overrides: Any) -> int:
    """Parameters of the architecture, built on the meta device (nothing allocated)."""
    # lazy: torch, transformers
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    with torch.device("meta"):
        model = Qwen2_5_VLForConditionalGeneration(public_config(arch, **overrides))
    return sum(p.numel() for p in model.parameters())


def make_checkpoint(arch: str, out: str | Path, device: str = "cpu", dtype: str = "bfloat16", seed: int = 0,
                    max_pixels: int = 200704, **overrides: Any) -> Path:
    """Build the random-weight model on ``device`` in ``dtype`` and save it, its tokenizer and processor to ``out``
    (written to a temporary folder first; a folder already at ``out`` is never replaced)."""
    # lazy: torch, transformers
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLForConditionalGeneration

    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists: choose another --out (this tool never replaces a folder)")
    tok = padded_tokenizer()
    processor = build_processor(tok, TinySpec(min_pixels=3136, max_pixels=max_pixels))
    config = public_config(arch, **overrides)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.random.fork_rng(devices=[]), torch.device(device):
            torch.manual_seed(seed)
            model = Qwen2_5_VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config = GenerationConfig(eos_token_id=[FIRST_SPECIAL_ID + 2, FIRST_SPECIAL_ID],
                                               pad_token_id=FIRST_SPECIAL_ID, bos_token_id=FIRST_SPECIAL_ID)
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        (tmp / "vase_random_checkpoint.json").write_text(json.dumps(
            {"arch": arch, "seed": seed, "dtype": dtype, "overrides": overrides,
             "parameters": sum(p.numel() for p in model.parameters()),
             "note": "random weights in the public architecture: for speed and memory only"}, indent=2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", choices=sorted(ARCHS), default="3b")
    ap.add_argument("--out", help="the folder to create (must not exist)")
    ap.add_argument("--device", default="cpu", help="where to initialise the weights (cuda is much faster)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--max-pixels", type=int, default=200704, help="the processor's per-image pixel budget")
    ap.add_argument("--count", action="store_true", help="print the parameter count and stop")
    args = ap.parse_args()
    if args.count:
        print(f"{args.arch}: {count_parameters(args.arch):,} parameters")
        return
    if not args.out:
        ap.error("--out is required (or --count)")
    path = make_checkpoint(args.arch, args.out, device=args.device, dtype=args.dtype, max_pixels=args.max_pixels)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
