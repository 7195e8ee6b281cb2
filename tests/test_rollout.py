"""Rollout engines (stage.module.rollout): the static-cache and compiled engines decode exactly the tokens of the
eager one, batch after batch (a reused cache never leaks the last batch's prompts), and GRPO runs on each."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="module")
def chaotic(tiny_model_dir: Path, synthetic_root: Path):
    """The tiny model with its weights scaled up, so that greedy completions depend on the prompt (at its built scale
    every prompt decodes the same few tokens, which would hide a cache that kept the last batch's prompt), and two
    batches of prompts of different lengths."""
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor

    proc = load_processor(str(tiny_model_dir))
    model = load_model(str(tiny_model_dir)).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".visual." not in f".{name}" and p.dim() == 2:
                p.normal_(0.0, 0.3, generator=gen)
    train = VaseDataset(synthetic_root, "train")
    keys = ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw")
    batches = []
    for task, idx in (("qa", [0, 7, 13]), ("caption", [2, 3, 4])):  # short questions, then longer caption prompts
        ds = ChatDataset(train, task)
        batch = PromptCollator(proc)([ds[i] for i in idx])
        batches.append({k: batch[k] for k in keys})
    tok = proc.tokenizer
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    return model, batches, eos, tok.pad_token_id


def _decode(model, inputs, decoder, eos, pad, **kw):
    from vase.training.rollout import sample_groups

    return sample_groups(model, inputs, 2, max_new_tokens=10, eos_ids=eos, pad_id=pad, greedy=True, decoder=decoder,
                         **kw)


@pytest.mark.parametrize("engine", ["static", pytest.param("compiled", marks=pytest.mark.slow)])  # compiling: slow
def test_engines_decode_the_eager_tokens_batch_after_batch(chaotic, engine: str) -> None:
    from vase.training.rollout import EagerDecoder, make_decoder

    model, batches, eos, pad = chaotic
    decoder = make_decoder(engine)
    torch._dynamo.reset()
    for inputs in batches + batches[:1]:  # the third rollout reuses the cache the second one left behind
        want = _decode(model, inputs, EagerDecoder(), eos, pad)
        got = _decode(model, inputs, decoder, eos, pad)
        assert torch.equal(got, want)
    first, second = (_decode(model, b, EagerDecoder(), eos, pad) for b in batches)
    assert not torch.equal(first, second)  # the prompts matter, so a stale prompt in the cache would have shown
    assert batches[0]["input_ids"].shape[1] != batches[1]["input_ids"].shape[1]
    # the minimum length and suppressed ids hold in every engine
    forced = _decode(model, batches[0], decoder, eos, pad, min_new_tokens=10, suppress_ids=[5, 6, 7])
    assert forced.shape == (6, 10) and not torch.isin(forced, torch.tensor(eos + [5, 6, 7])).any()
    assert torch.equal(forced, _decode(model, batches[0], EagerDecoder(), eos, pad, min_new_tokens=10,
                                       suppress_ids=[5, 6, 7]))
    if engine == "compiled":  # compiled once (one capacity, one batch size), not fallen back to eager
        from torch._dynamo.utils import counters

        assert counters["stats"]["unique_graphs"] >= 1
        assert decoder._step is not decoder._forward


def test_static_cache_grows_when_a_longer_rollout_comes(chaotic) -> None:
    """A rollout that does not fit the cache's capacity gets a larger cache (rounded to the bucket), same tokens."""
    from vase.training.rollout import EagerDecoder, StaticDecoder

    model, batches, eos, pad = chaotic
    from vase.training.rollout import sample_groups

    decoder = StaticDecoder(bucket=8)
    _decode(model, batches[0], decoder, eos, pad)
    small = decoder._mask.shape[1]
    long = sample_groups(model, batches[1], 2, max_new_tokens=40, eos_ids=[], pad_id=pad, greedy=True,
                         decoder=decoder)
    assert decoder._mask.shape[1] > small and decoder._mask.shape[1] % 8 == 0
    want = sample_groups(model, batches[1], 2, max_new_tokens=40, eos_ids=[], pad_id=pad, greedy=True,
                         decoder=EagerDecoder())
    assert long.shape == (6, 40) and torch.equal(long, want)


def test_grpo_rolls_out_through_the_engine_it_is_given(tiny_model_dir: Path, synthetic_root: Path) -> None:
    from tests.test_grpo import LengthReward
    from vase.data.datamodule import ChatDataset, PromptCollator
    from vase.data.dataset import VaseDataset
    from vase.models.loading import load_model, load_processor
    from vase.training.grpo import GRPOModule

    torch.manual_seed(0)
    proc = load_processor(str(tiny_model_dir))
    module = GRPOModule(load_model(str(tiny_model_dir)), LengthReward(), proc, num_generations=2,
                        max_completion_length=6, rollout="static")
    assert module.decoder.name == "static"
    ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
    r = module.rollout(PromptCollator(proc)([ds[0], ds[1]]))
    assert r.completion_ids.shape[0] == 4 and len(r.texts) == 4
    with pytest.raises(ValueError, match="stage.module.rollout='vllm'"):
        GRPOModule(load_model(str(tiny_model_dir)), LengthReward(), proc, rollout="vllm")


def test_an_unknown_engine_is_a_config_error_naming_the_key(tmp_path: Path, session_dirs: dict) -> None:
    from tests.conftest import compose_cfg
    from vase.config import validate
    from vase.errors import ConfigError

    cfg = compose_cfg("train", ["stage=grpo", "stage.module.rollout=fast"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"stage\.module\.rollout.*eager"):
        validate(cfg)
