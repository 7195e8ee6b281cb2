"""benchmarks/random_checkpoint.py: the public 3B/7B architectures, to the parameter, and a random-weight checkpoint
that loads through vase's own loader (here a shrunk one of the same shape: one layer, 256 wide, the real vocabulary
and special-token ids)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks.random_checkpoint import FIRST_SPECIAL_ID, count_parameters, make_checkpoint

SMALL = dict(num_hidden_layers=1, hidden_size=256, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
             vision_depth=1, vision_hidden_size=64, vision_intermediate_size=64, vision_num_heads=2,
             vision_fullatt_block_indexes=[0])


def test_the_public_architectures_to_the_parameter() -> None:
    assert count_parameters("3b") == 3_754_622_976  # the count of the random 3B measured on the H200 (issue 18)
    assert count_parameters("7b") == 8_292_166_656  # Qwen2.5-VL-7B-Instruct's published size


def test_a_random_checkpoint_loads_through_model_name_or_path(tmp_path: Path, synthetic_root: Path) -> None:
    from omegaconf import OmegaConf
    from PIL import Image

    from vase.models.loading import load_model_and_processor

    out = make_checkpoint("3b", tmp_path / "random-3b-small", max_pixels=112 * 112, **SMALL)
    with pytest.raises(FileExistsError, match="never replaces"):
        make_checkpoint("3b", out, **SMALL)
    model, processor = load_model_and_processor(OmegaConf.create({
        "name_or_path": str(out), "dtype": "bfloat16", "processor": {"min_pixels": 3136, "max_pixels": 12544}}))
    tok = processor.tokenizer
    assert model.config.text_config.vocab_size == 151936 and len(tok) == FIRST_SPECIAL_ID + 14
    assert tok.convert_tokens_to_ids("<|image_pad|>") == model.config.image_token_id == 151655
    assert tok.convert_tokens_to_ids("<|im_end|>") == 151645 and tok.pad_token_id == 151643
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is the shape?"}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    enc = processor(text=[text], images=[Image.new("RGB", (112, 112), "red")], return_tensors="pt")
    assert (enc["input_ids"] == 151655).sum() == 16  # 112 px: 8 x 8 patches, merged 2 x 2
    with torch.no_grad():
        gen = model.generate(**enc, max_new_tokens=3, do_sample=False)
    assert gen.shape[1] == enc["input_ids"].shape[1] + 3
