"""vase's sampler (vase.models.token_sampling): inverse CDF in float64 draws from the distribution it is given, as
torch.multinomial does, and every sampling path (the GRPO rollout, sampled evaluation) uses it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from vase.models.token_sampling import SamplingProcessor, sample_from, warp

N = 200_000


def _counts(draws: torch.Tensor, k: int) -> np.ndarray:
    return np.bincount(draws.numpy(), minlength=k)


def _expected(p: torch.Tensor | np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The counts ``p`` predicts for as many draws as ``counts`` holds (float64: chisquare wants equal totals)."""
    p = np.asarray(p, dtype=np.float64)
    return p / p.sum() * counts.sum()


def test_draws_follow_a_known_distribution_and_multinomials_draws() -> None:
    """Chi-square against the exact probabilities (a skewed ten-way distribution, one entry 0), and a two-sample
    chi-square against torch.multinomial's own draws of the same rows: neither rejects at 0.1 %."""
    p = torch.tensor([0.30, 0.20, 0.15, 0.10, 0.08, 0.07, 0.05, 0.03, 0.02, 0.0])
    g = torch.Generator().manual_seed(0)
    ours = _counts(sample_from(p.expand(N, -1), generator=g), 10)
    assert ours[9] == 0  # an entry of 0 is never drawn
    assert stats.chisquare(ours[:9], f_exp=_expected(p[:9], ours[:9])).pvalue > 1e-3
    torch.manual_seed(1)
    theirs = _counts(torch.multinomial(p.expand(N, -1), 1).squeeze(1), 10)
    table = np.stack([ours[:9], theirs[:9]])
    assert stats.chi2_contingency(table).pvalue > 1e-3
    # a broken sampler (always one index too far) is caught by the same test
    shifted = np.roll(ours[:9], 1)
    assert stats.chisquare(shifted, f_exp=_expected(p[:9], shifted)).pvalue < 1e-6


def test_a_vocabulary_sized_row_keeps_its_small_entries_share() -> None:
    """On a 151,936-column row (Qwen2.5-VL's vocabulary) where half the mass is spread thinly over 150,000 tokens,
    the thin tail is drawn at its share and the head at its proportions; the rows' totals need not be 1."""
    v = 151_936
    logits = torch.full((v,), -30.0)
    logits[:10] = torch.linspace(2.0, 0.0, 10)
    probs = torch.softmax(logits, 0)
    tail = torch.zeros(v)
    tail[10:] = probs[:10].sum() / (v - 10)  # the tail holds as much mass as the head
    row = (probs + tail) * 3.0  # an unnormalised row
    n = 1_000
    draws = sample_from(row.expand(n, -1), generator=torch.Generator().manual_seed(2))
    share = float((draws >= 10).float().mean())
    expected = float(tail.sum() * 3.0 / row.sum())
    assert abs(share - expected) < 4 * (expected * (1 - expected) / n) ** 0.5
    head = _counts(draws[draws < 10], 10)
    assert stats.chisquare(head, f_exp=_expected(probs[:10], head)).pvalue > 1e-3


def test_warp_cuts_as_transformers_warpers_do() -> None:
    """Temperature, top-k and top-p give the same distribution as transformers' own warpers on the same logits."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(3)) * 3
    for t, k, p in [(0.7, 0, 1.0), (1.0, 5, 1.0), (0.7, 0, 0.9), (1.3, 10, 0.8)]:
        ref = TemperatureLogitsWarper(t)(None, logits.clone())
        if k:
            ref = TopKLogitsWarper(k)(None, ref)
        if p < 1.0:
            ref = TopPLogitsWarper(p)(None, ref)
        ours = warp(logits, t, k, p)
        assert torch.allclose(ours / ours.sum(-1, keepdim=True), torch.softmax(ref, -1), atol=1e-6), (t, k, p)


def test_the_processor_leaves_only_the_drawn_token() -> None:
    """Inside generate: the scores come back -inf everywhere but the drawn token, which follows the warped
    distribution (so a greedy generate emits vase's draw)."""
    torch.manual_seed(4)
    scores = torch.log(torch.tensor([[0.5, 0.3, 0.2, 1e-12]])).expand(20_000, -1).clone()
    out = SamplingProcessor(temperature=1.0, top_k=3)(None, scores)
    assert torch.isfinite(out).sum(-1).eq(1).all()
    picked = _counts(out.argmax(-1), 4)
    assert picked[3] == 0 and stats.chisquare(picked[:3], f_exp=_expected([0.5, 0.3, 0.2], picked[:3])).pvalue > 1e-3


@pytest.mark.parametrize("path", ["rollout", "evaluation"])
def test_every_sampling_path_draws_with_vases_sampler(path: str, tiny_model_dir, synthetic_root,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The GRPO rollout and sampled evaluation both call sample_from (and torch.multinomial never runs); greedy
    evaluation does not sample at all."""
    import vase.models.token_sampling as sampling
    import vase.training.rollout as rollout
    from vase.config import Decoding
    from vase.data.dataset import VaseDataset
    from vase.eval.generate import caption_items, generate_rows
    from vase.models.loading import load_model, load_processor

    calls = {"ours": 0}
    real = sampling.sample_from

    def counting(*a, **k):
        calls["ours"] += 1
        return real(*a, **k)

    def forbidden(*a, **k):
        raise AssertionError("torch.multinomial was called")

    monkeypatch.setattr(sampling, "sample_from", counting)
    monkeypatch.setattr(rollout, "sample_from", counting)
    monkeypatch.setattr(torch, "multinomial", forbidden)
    proc = load_processor(str(tiny_model_dir))
    model = load_model(str(tiny_model_dir)).eval()
    torch.manual_seed(0)
    if path == "evaluation":
        items = caption_items(VaseDataset(synthetic_root, "val"))[:2]
        generate_rows(model, proc, items, max_new_tokens=4, progress=False)
        assert calls["ours"] == 0  # greedy: nothing drawn
        generate_rows(model, proc, items, max_new_tokens=4, progress=False,
                      decoding=Decoding(do_sample=True, temperature=0.7, top_k=20))
        assert calls["ours"] >= 1
    else:
        from vase.data.datamodule import ChatDataset, PromptCollator
        from vase.training.rollout import sample_groups

        ds = ChatDataset(VaseDataset(synthetic_root, "train"), "caption")
        batch = PromptCollator(proc)([ds[0]])
        prompts = {k: batch[k] for k in ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values",
                                         "image_grid_thw")}
        tok = proc.tokenizer
        out = sample_groups(model, prompts, 4, max_new_tokens=4, eos_ids=[tok.eos_token_id], pad_id=tok.pad_token_id,
                            temperature=0.7)
        assert out.shape[0] == 4 and calls["ours"] >= 1
