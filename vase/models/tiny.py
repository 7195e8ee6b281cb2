"""A tiny, randomly initialised Qwen2.5-VL with a locally trained tokenizer and a real processor.

It is saved in Hugging Face format and loaded back through ``from_pretrained``, exactly like a real checkpoint,
so every code path that serves Qwen2.5-VL-3B/7B runs on a CPU in seconds. The tokenizer is a byte-level BPE
trained on texts from the vase vocabulary; the model's vocabulary is sized to it (a BPE trained on a small corpus
stops below its target size, and unused rows would be sampled and decode to nothing).

Build by hand: ``python -m vase.models.tiny --out .cache/models/tiny-qwen2_5_vl``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from vase.annotate.dimension_sampling import sample_tokenizer_record
from vase.annotate.records import raw_metadata
from vase.annotate.vocab import VOCABULARY
from vase.errors import out_refused
from vase.io import atomic_directory, built_by_vase, one_builder_at_a_time
from vase.prompts import CAPTION_PROMPT

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# The public Qwen2.5-VL tokenizer's special tokens, in id order from FIRST_SPECIAL_ID (151643): other tools (ms-swift's
# templates, qwen_vl_utils) find images and videos by these ids, not by the tokenizer's strings.
PUBLIC_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                         "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                         "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
FIRST_SPECIAL_ID = 151643

# The Qwen2.5-VL conversation format, written for our tiny model (real checkpoints ship their own template).
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class NetworkSizes:
    """The sizes of a small Qwen2.5-VL network (the tiny model's and the hub-shaped stand-in's)."""

    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vision_depth: int = 2
    vision_hidden_size: int = 32
    vision_intermediate_size: int = 64
    vision_num_heads: int = 2

    def mrope_section(self) -> list[int]:
        """The (temporal, height, width) rotary sections, which must sum to head_dim / 2 (the public [16, 24, 24]
        at head_dim 128).

        >>> NetworkSizes().mrope_section(), NetworkSizes(hidden_size=2048, num_attention_heads=16).mrope_section()
        ([2, 3, 3], [16, 24, 24])
        """
        half = self.hidden_size // self.num_attention_heads // 2
        return [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]


@dataclass(frozen=True)
class TinySpec(NetworkSizes):
    """Sizes of the tiny model; the defaults run a forward pass with six 112-pixel views in milliseconds."""

    tokenizer_vocab_size: int = 2048
    # Larger than the usual 0.02: the output head and final norm stay frozen under LoRA, and with 0.02 the
    # logits of a 64-wide model can never exceed about 1.3, so the loss could not fall below ~5.8 however well
    # the adapters learn.
    initializer_range: float = 0.02
    min_pixels: int = 56 * 56
    max_pixels: int = 112 * 112
    seed: int = 0
    # True: the special tokens sit at the public Qwen2.5-VL ids (151643 ... 151656, <|image_pad|> 151655), the
    # learned tokens below them and unused filler rows between, so tools that hard-code those ids (ms-swift's
    # templates) read the model as the real architecture. Off by default: the ~150k filler rows of a random output
    # head take most of the sampling mass, so the demo's GRPO would sample filler text (see pad_to_public_ids).
    public_token_ids: bool = False

    def fingerprint(self) -> str:
        fields = asdict(self)
        if not self.public_token_ids:  # so the default model's cache key is what it was before the option
            del fields["public_token_ids"]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]


def spec_fingerprint(overrides: dict | None = None) -> str:
    """The fingerprint of the spec that ``overrides`` (``model.tiny``) give: the tiny model's cache key.

    >>> spec_fingerprint() == TinySpec().fingerprint()
    True
    >>> spec_fingerprint({"hidden_size": 128}) != spec_fingerprint()
    True
    """
    return TinySpec(**dict(overrides or {})).fingerprint()


def _corpus(n_records: int = 3000, seed: int = 1234) -> list[str]:
    """Texts the tokenizer learns from: captions, raw metadata, QA and prompts of sampled vases."""
    rng = np.random.default_rng(seed)
    texts = [CAPTION_PROMPT, "You are a helpful assistant.", "system", "user", "assistant"]
    for terms in VOCABULARY.values():
        texts += [f for t in terms for f in t.forms()]
    for i in range(n_records):
        r = sample_tokenizer_record(rng, i)
        texts += [r.caption, raw_metadata(r)] + [q["question"] + " " + q["answer"] for q in r.qa]
    return texts


def build_tokenizer(spec: TinySpec):
    """Train a byte-level BPE with Qwen's pre-tokenizer and wrap it as a ``Qwen2Tokenizer``."""
    # lazy: transformers, tokenizers
    from tokenizers import trainers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer

    base = Qwen2Tokenizer(vocab={"<|endoftext|>": 0}, merges=[])
    backend = base.backend_tokenizer
    trainer = trainers.BpeTrainer(
        vocab_size=spec.tokenizer_vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_corpus(), trainer=trainer)
    model = json.loads(backend.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    vocab = {k: v for k, v in model["vocab"].items()}
    tok = Qwen2Tokenizer(
        vocab=vocab, merges=merges, unk_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    tok.chat_template = CHAT_TEMPLATE
    return pad_to_public_ids(tok) if spec.public_token_ids else tok


def pad_to_public_ids(base):
    """``base`` (a tiny BPE) renumbered: its learned tokens first, filler tokens up to 151643, then the public
    special tokens at their public ids. The fillers are never produced by encoding (no merge reaches them)."""
    # lazy: transformers
    from transformers import Qwen2Tokenizer

    model = json.loads(base.backend_tokenizer.to_str())["model"]
    learned = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]) if not t.startswith("<|")]
    vocab = {t: i for i, t in enumerate(learned)}
    for i in range(len(vocab), FIRST_SPECIAL_ID):
        vocab[f"zzfill{i}"] = i
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token=None, bos_token=None)
    tok.add_special_tokens({"additional_special_tokens": PUBLIC_SPECIAL_TOKENS})
    tok.eos_token, tok.pad_token = "<|im_end|>", "<|endoftext|>"
    tok.chat_template = CHAT_TEMPLATE
    ids = [tok.convert_tokens_to_ids(t) for t in PUBLIC_SPECIAL_TOKENS]
    if ids != list(range(FIRST_SPECIAL_ID, FIRST_SPECIAL_ID + len(PUBLIC_SPECIAL_TOKENS))):
        raise RuntimeError(f"special tokens landed at {ids}, not at the public ids")
    return tok


def build_processor(tokenizer, spec: TinySpec):
    # lazy: transformers
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    size = {"shortest_edge": spec.min_pixels, "longest_edge": spec.max_pixels}
    image_processor = Qwen2VLImageProcessor(size=size, patch_size=14, merge_size=2, temporal_patch_size=2)
    video_processor = Qwen2VLVideoProcessor(size=size, patch_size=14, merge_size=2, temporal_patch_size=2)
    return Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )


def build_model(tokenizer, spec: TinySpec):
    # lazy: torch, transformers
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    section = spec.mrope_section()
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section},
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
        initializer_range=spec.initializer_range,
    )
    vision = dict(
        depth=spec.vision_depth,
        hidden_size=spec.vision_hidden_size,
        intermediate_size=spec.vision_intermediate_size,
        num_heads=spec.vision_num_heads,
        out_hidden_size=spec.hidden_size,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=56,
        fullatt_block_indexes=[spec.vision_depth - 1],
        initializer_range=spec.initializer_range,
    )
    config = Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
        initializer_range=spec.initializer_range,
    )
    # a private RNG: building the model must not reset the caller's seeded stream (LoRA init, shuffling)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
        do_sample=False,
    )
    return model


def check_special_tokens(path: str | Path, public_ids: bool = False) -> None:
    """After reloading from disk, every special-token id in the config must be the tokenizer's (and, with
    ``public_ids``, the public Qwen2.5-VL one)."""
    # lazy: transformers
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    pairs = {
        "image_token_id": "<|image_pad|>",
        "video_token_id": "<|video_pad|>",
        "vision_start_token_id": "<|vision_start|>",
        "vision_end_token_id": "<|vision_end|>",
    }
    for key, token in pairs.items():
        if getattr(config, key) != tok.convert_tokens_to_ids(token):
            raise RuntimeError(
                f"{path}: config.{key}={getattr(config, key)} but the tokenizer has {token}="
                f"{tok.convert_tokens_to_ids(token)}"
            )
    tc = config.text_config
    for key, token in (
        ("eos_token_id", "<|im_end|>"),
        ("pad_token_id", "<|endoftext|>"),
        ("bos_token_id", "<|endoftext|>"),
    ):
        if getattr(tc, key) != tok.convert_tokens_to_ids(token):
            raise RuntimeError(f"{path}: text_config.{key} does not match the tokenizer's {token}")
    if tc.vocab_size != len(tok):
        raise RuntimeError(f"{path}: vocab_size {tc.vocab_size} != tokenizer size {len(tok)}")
    if public_ids:
        public = {t: FIRST_SPECIAL_ID + i for i, t in enumerate(PUBLIC_SPECIAL_TOKENS)}
        wrong = {t: tok.convert_tokens_to_ids(t) for t, i in public.items() if tok.convert_tokens_to_ids(t) != i}
        if wrong:
            raise RuntimeError(f"{path}: special tokens off their public Qwen2.5-VL ids: {wrong}")


@one_builder_at_a_time
def build_tiny(out: str | Path, spec: TinySpec | None = None, overwrite: bool = False) -> Path:
    """Build, save and verify the tiny model under ``out``; reuse it if ``out`` already holds this spec.

    A directory at ``out`` that vase did not build (a user's checkpoint) is never replaced: FileExistsError.
    """
    spec = spec or TinySpec()
    out = Path(out)
    stamp = out / "vase_tiny.json"
    if stamp.is_file() and not overwrite:
        if json.loads(stamp.read_text()).get("fingerprint") == spec.fingerprint():
            return out
    if out.exists() and not built_by_vase(out):
        raise FileExistsError(f"{out}: exists and is not a tiny model that vase built; refusing to build "
                              f"over it: give --out a folder that does not exist yet")
    tokenizer = build_tokenizer(spec)
    processor = build_processor(tokenizer, spec)
    model = build_model(tokenizer, spec)
    with atomic_directory(out, replace=True) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        check_special_tokens(tmp, spec.public_token_ids)
        (tmp / "vase_tiny.json").write_text(json.dumps({"fingerprint": spec.fingerprint(), **asdict(spec)}, indent=1))
    return out


def _main() -> None:
    ap = argparse.ArgumentParser(description="Build the tiny Qwen2.5-VL in Hugging Face format.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args()
    try:
        print(build_tiny(args.out, overwrite=args.overwrite))
    except OSError as e:  # an --out that is taken, or not writable: one line, naming it
        print(out_refused(args.out, e), file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    _main()
