"""Caption metrics against values computed by hand or by an independent reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vase.errors import MetricError
from vase.metrics import (
    PAPER_OVERALL_WEIGHTS,
    CaptionScorer,
    CLIPTextScore,
    LexicalJaccard,
    RecallAtK,
    SentenceFID,
    frechet_distance,
    jaccard,
    overall_score,
)


def test_clip_text_score_by_hand() -> None:
    g = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    r = torch.tensor([[0.0, 2.0], [3.0, 3.0]])
    m = CLIPTextScore()
    m.update(g, r)
    # cos = 0 for the first pair, 1 for the second
    assert float(m.compute()) == pytest.approx(0.5)


def test_recall_at_k_by_hand_with_ties() -> None:
    g = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    r = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    m = RecallAtK(ks=(1, 2))
    m.update(g, r)
    out = m.compute()
    # sims: row0 [1,1,0] own=1: nothing better, the tie (ref1) comes later -> rank 0
    #       row1 [0,0,1] own=0: ref2 better, ref0 tied and earlier -> rank 2
    #       row2 [1,1,0] own=0: refs 0 and 1 better -> rank 2
    assert float(out["r_at_1"]) == pytest.approx(1 / 3)
    assert float(out["r_at_2"]) == pytest.approx(1 / 3)
    # duplicated references: the earlier copy wins the tie, as with a stable argsort
    m2 = RecallAtK(ks=(1,))
    m2.update(torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    assert float(m2.compute()["r_at_1"]) == pytest.approx(0.5)


def test_recall_matches_argsort_without_ties() -> None:
    rng = np.random.default_rng(0)
    g, r = rng.normal(size=(50, 8)), rng.normal(size=(50, 8))
    m = RecallAtK(ks=(1, 5, 10))
    m.update(torch.tensor(g), torch.tensor(r))
    out = m.compute()
    gn = g / np.linalg.norm(g, axis=1, keepdims=True)
    rn = r / np.linalg.norm(r, axis=1, keepdims=True)
    sim = gn @ rn.T
    for k in (1, 5, 10):
        hits = [i in np.argsort(-sim[i], kind="stable")[:k] for i in range(50)]  # the paper's way
        assert float(out[f"r_at_{k}"]) == pytest.approx(np.mean(hits))


def test_fid_matches_direct_scipy_computation() -> None:
    from scipy import linalg

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(40, 6)), rng.normal(loc=0.3, size=(40, 6))
    m = SentenceFID()
    m.update(torch.tensor(x), torch.tensor(y))
    s1 = np.cov(x, rowvar=False) + 1e-6 * np.eye(6)
    s2 = np.cov(y, rowvar=False) + 1e-6 * np.eye(6)
    ref = np.sum((x.mean(0) - y.mean(0)) ** 2) + np.trace(s1 + s2 - 2 * linalg.sqrtm(s1 @ s2).real)
    assert float(m.compute()) == pytest.approx(ref, rel=1e-5)
    assert frechet_distance(x, x) == pytest.approx(0.0, abs=1e-6)


def test_fid_of_shifted_identity_covariances_by_hand() -> None:
    # equal covariances: FID is the squared distance of the means, computed here by hand
    x = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
    y = x + np.array([3.0, 4.0])
    assert frechet_distance(x, y) == pytest.approx(25.0, abs=1e-4)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("A red vase", "a RED cup", 2 / 4),
        ("Athenian, red-figure", "athenian red-figure", 1 / 3),  # punctuation stays attached to words, as in the paper
        ("", "", 1.0),
        ("", "something", 0.0),
        ("same same same", "same", 1.0),
    ],
)
def test_jaccard_cases(a: str, b: str, expected: float) -> None:
    assert jaccard(a, b) == pytest.approx(expected)


def test_lexical_metric_mean() -> None:
    m = LexicalJaccard()
    m.update(["a b", "x"], ["a c", "x"])
    assert float(m.compute()) == pytest.approx((1 / 3 + 1) / 2)


def test_overall_score_paper_weights() -> None:
    s = {"clip_score": 0.8, "r_at_10": 0.2, "r_at_5": 0.1, "r_at_1": 0.03, "lexical_similarity": 0.25}
    expected = 0.25 * 0.8 + 0.25 * 0.8 + 0.20 * 0.2 + 0.15 * 0.25 + 0.10 * 0.1 + 0.05 * 0.03
    assert overall_score(s) == pytest.approx(expected)
    assert sum(PAPER_OVERALL_WEIGHTS.values()) == pytest.approx(1.0)


def test_failures_raise_instead_of_zero() -> None:
    with pytest.raises(MetricError):
        CLIPTextScore().compute()
    with pytest.raises(MetricError):
        LexicalJaccard().compute()
    with pytest.raises(MetricError):
        frechet_distance(np.zeros((1, 3)), np.zeros((1, 3)))
    with pytest.raises(MetricError):
        CLIPTextScore().update(torch.zeros(2, 3), torch.zeros(3, 3))


class _BagOfWords:
    """An independent toy encoder: word counts over a fixed vocabulary."""

    def __init__(self, vocab: list[str]) -> None:
        self.vocab = vocab
        self.calls = 0

    def encode(self, texts: list[str]) -> torch.Tensor:
        self.calls += 1
        return torch.tensor([[t.lower().split().count(w) + 0.01 for w in self.vocab] for t in texts])


def test_scorer_encodes_each_caption_once_and_combines() -> None:
    enc = _BagOfWords(["red", "black", "amphora", "kylix"])
    sc = CaptionScorer(enc, enc)
    preds = ["red amphora", "black kylix", "red kylix"]
    refs = ["red amphora", "black kylix", "black amphora"]
    out = sc.score(preds, refs)
    assert enc.calls == 2  # one CLIP batch and one sentence batch for all captions
    assert out["n_pairs"] == 3
    assert out["lexical_similarity"] == pytest.approx((1 + 1 + 0) / 3)
    assert out["r_at_1"] == pytest.approx(2 / 3)
    # CLIP score: mean cosine of each pair's embeddings; FID as the paper's scorer computes it, by hand with scipy
    e_p, e_r = enc.encode(preds).double().numpy(), enc.encode(refs).double().numpy()
    cos = [float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in zip(e_p, e_r)]
    assert out["clip_score"] == pytest.approx(sum(cos) / 3, abs=1e-6)
    from scipy import linalg

    s1 = np.cov(e_p, rowvar=False) + 1e-6 * np.eye(4)
    s2 = np.cov(e_r, rowvar=False) + 1e-6 * np.eye(4)
    diff = e_p.mean(0) - e_r.mean(0)
    fid = diff @ diff + np.trace(s1 + s2 - 2 * linalg.sqrtm(s1 @ s2).real)
    assert out["fid_score"] == pytest.approx(fid, rel=1e-4, abs=1e-5)
    r10 = r5 = 1.0  # three references: every true match is in the top 5 and top 10
    expected = (0.25 * out["clip_score"] + 0.25 * out["clip_score"] + 0.20 * r10 + 0.15 * (2 / 3) + 0.10 * r5
                + 0.05 * (2 / 3))
    assert out["overall_score"] == pytest.approx(expected, abs=1e-6)


def test_hf_clip_encoder_and_transformers5_output(tiny_clip_dir) -> None:
    from vase.metrics.encoders import HFCLIPEncoder

    enc = HFCLIPEncoder(str(tiny_clip_dir))
    e = enc.encode(["Athenian red-figure kylix.", "Corinthian black-figure amphora.", "Athenian red-figure kylix."])
    assert e.shape == (3, 64)
    assert torch.allclose(e[0], e[2]) and not torch.allclose(e[0], e[1])
    with pytest.raises(MetricError, match="no-such-clip"):
        HFCLIPEncoder("/no-such-clip")


def test_packaged_minilm_gives_real_semantics() -> None:
    from vase.metrics.encoders import SentenceEncoder

    enc = SentenceEncoder("packaged:all-MiniLM-L6-v2")
    e = torch.nn.functional.normalize(enc.encode(["a painted drinking cup", "a decorated wine cup", "tax law"]), dim=-1)
    assert e.shape[1] == 384
    assert float(e[0] @ e[1]) > float(e[0] @ e[2]) + 0.2


def test_fast_tokenisation_gives_the_wrappers_embeddings(tiny_clip_dir) -> None:
    from vase.metrics.encoders import HFCLIPEncoder, SentenceEncoder

    texts = ["Athenian red-figure kylix, c. 480–470 BCE.", "A jug.", "Ünïcödé vase with a very " + "long " * 40 + "text"]
    clip = HFCLIPEncoder(str(tiny_clip_dir))
    assert clip._fast is not None
    fast = clip.encode(texts)
    clip._fast = None  # the transformers tokenizer wrapper
    assert torch.allclose(fast, clip.encode(texts), atol=1e-6)
    sent = SentenceEncoder("packaged:all-MiniLM-L6-v2")
    assert sent._fast is not None
    ours = sent.encode(texts)
    ref = sent.model.encode(texts, convert_to_tensor=True).float()
    assert torch.allclose(ours, ref, atol=1e-5)


def test_embedding_cache_is_keyed_by_weights_and_text(tmp_path) -> None:
    from vase.metrics.embedding_cache import CachedTextEncoder

    class Enc:
        def __init__(self, seed: int) -> None:
            torch.manual_seed(seed)
            self.model = torch.nn.Linear(3, 4)
            self.calls: list[list[str]] = []

        def encode(self, texts: list[str]) -> torch.Tensor:
            self.calls.append(list(texts))
            x = torch.tensor([[len(t), t.count("a"), t.count("e")] for t in texts], dtype=torch.float32)
            return self.model(x).detach()

    a = Enc(0)
    first = CachedTextEncoder(a, tmp_path).encode(["amphora", "kylix", "amphora"])
    assert a.calls == [["amphora", "kylix"]]  # each distinct text once, in the caller's order
    again = CachedTextEncoder(a, tmp_path)  # a later run: reads the shards from disk
    out = again.encode(["kylix", "amphora", "hydria"])
    assert a.calls[-1] == ["hydria"] and again.hits == 2 and again.misses == 1
    assert torch.equal(out[0], first[1]) and torch.equal(out[1], first[0])
    b = Enc(1)  # other weights: another key, nothing served from a's entries
    CachedTextEncoder(b, tmp_path).encode(["amphora"])
    assert b.calls == [["amphora"]]
    assert len(list(tmp_path.iterdir())) == 2


def test_the_scorer_never_waits_on_other_ranks_when_rank_0_evaluates_alone(monkeypatch) -> None:
    """A DDP run (trainer=ddp, or two SLURM tasks) evaluates on rank 0 after the other ranks have finished: a
    gather across processes there died with "Connection closed by peer". The scorer keeps to its own process."""
    from torchmetrics import Metric

    enc = _BagOfWords(["red", "black", "amphora", "kylix"])
    sc = CaptionScorer(enc, enc)
    assert not any(m.sync_on_compute for m in sc._metrics)

    def gathering(*a, **k):
        raise AssertionError("the scorer gathered across processes")

    monkeypatch.setattr(Metric, "_sync_dist", gathering)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)  # as in a DDP job
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
    out = sc.score(["red amphora", "black kylix"], ["red amphora", "black amphora"])
    assert out["n_pairs"] == 2
