"""The tiny Qwen2.5-VL: saved in HF format, reloaded with from_pretrained, special tokens consistent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from vase.models.loading import load_model, load_model_and_processor, load_processor
from vase.models.tiny import check_special_tokens


def test_tiny_model_is_a_real_hf_checkpoint(tiny_model_dir: Path) -> None:
    for f in ("config.json", "model.safetensors", "tokenizer.json", "processor_config.json", "chat_template.jinja"):
        assert (tiny_model_dir / f).is_file(), f
    cfg = json.loads((tiny_model_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen2_5_vl"
    check_special_tokens(tiny_model_dir)  # raises on any mismatch


def test_vocab_sized_to_tokenizer_and_round_trip(tiny_model_dir: Path) -> None:
    proc = load_processor(str(tiny_model_dir))
    model = load_model(str(tiny_model_dir))
    assert model.config.text_config.vocab_size == len(proc.tokenizer)
    text = "Athenian red-figure kylix, c. 450–400 BCE, depicting a symposium scene."
    ids = proc.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert proc.tokenizer.decode(ids) == text
    assert type(proc).__name__ == "Qwen2_5_VLProcessor"


def test_forward_and_generate_with_images(tiny_model_dir: Path, synthetic_root: Path) -> None:
    from vase.data.datamodule import prompt_text
    from vase.data.dataset import VaseDataset

    cfg = OmegaConf.create({"name_or_path": str(tiny_model_dir), "dtype": "float32", "processor": {}})
    model, proc = load_model_and_processor(cfg)
    ex = VaseDataset(synthetic_root, "val")[0]
    enc = proc(text=[prompt_text(proc, 6, "Describe.")], images=[ex.images], return_tensors="pt")
    # six 64-pixel views resize to 56x56: 2x2 merged tokens each
    assert enc["image_grid_thw"].tolist() == [[1, 4, 4]] * 6
    n_img = int((enc["input_ids"] == model.config.image_token_id).sum())
    assert n_img == 6 * 4
    n = enc["input_ids"].shape[1]
    out = model.generate(**enc, max_new_tokens=5, do_sample=False)
    assert torch.equal(out[:, :n], enc["input_ids"])  # the prompt, then the new tokens
    new = out[0, n:].tolist()
    assert 1 <= len(new) <= 5
    eos = set(model.generation_config.eos_token_id)
    assert len(new) == 5 or new[-1] in eos  # stopped early only at an end-of-sequence token
    assert not eos & set(new[:-1])  # and never went past one
    assert torch.equal(model.generate(**enc, max_new_tokens=5, do_sample=False), out)  # greedy: deterministic


def test_missing_checkpoint_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="nowhere"):
        load_model(str(tmp_path / "nowhere"))


def test_adapter_path_without_adapter_fails_clearly(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = OmegaConf.create({"name_or_path": str(tiny_model_dir), "dtype": "float32"})
    from vase.errors import ConfigError

    with pytest.raises(ConfigError, match=r"adapter='.*': no adapter_config\.json in it; give the adapter folder"):
        load_model_and_processor(cfg, adapter=str(tmp_path))


def test_greedy_batches_and_the_pixel_bounds_say_nothing(tiny_model_dir: Path, capfd: pytest.CaptureFixture,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Every greedy batch warned "generation flags are not valid ... ['top_k']" and "Both min_new_tokens and
    min_length"; the pixel bounds went through a processor-call path transformers says it will remove. Now: no warning,
    and the bounds still decide the grid."""
    import warnings

    from PIL import Image

    from vase.eval.generate import GenerationItem, generate_rows
    from vase.models.loading import load_model, load_processor

    processor = load_processor(str(tiny_model_dir), 3136, 12544)
    model = load_model(str(tiny_model_dir))
    img = Image.new("RGB", (448, 448), (120, 80, 40))
    items = [GenerationItem(id=f"v{i}", prompt="Describe the vase.", reference="x", images=lambda: [img])
             for i in range(2)]
    with warnings.catch_warnings(record=True) as caught, caplog.at_level("WARNING"):
        warnings.simplefilter("always")
        rows = generate_rows(model, processor, items, batch_size=2, max_new_tokens=4, progress=False)
    said = capfd.readouterr().err + caplog.text + " ".join(str(w.message) for w in caught)
    assert len(rows) == 2
    assert "not valid" not in said and "min_new_tokens" not in said and "min_pixels" not in said, said[-1500:]
    grid = processor(text=["<|vision_start|><|image_pad|><|vision_end|>x"], images=[img])["image_grid_thw"]
    assert grid.tolist() == [[1, 8, 8]]  # 112 x 112 = 12,544 pixels: max_pixels decided it
