"""The six-dimension reward on hand-written captions, expected values computed by hand."""

from __future__ import annotations

import difflib
import pickle
from pathlib import Path

import pytest

from tests.conftest import compose_cfg
from vase.config import validate
from vase.errors import ConfigError
from vase.rewards import VaseReward, extract_fields, reward_from_config

TARGET = {"fabric": "Athenian", "technique": "red-figure", "shape": "kylix", "dating": [-525, -475],
          "decoration": "a symposium scene", "attribution": "the Berlin Painter"}
NO_EXTRAS = {"penalty": {"length": 0.0, "repetition": 0.0, "irrelevance": 0.0}, "bonus": {"sequence": 0.0}}


def make(similarity: dict | None = None, penalty: dict | None = None, bonus: dict | None = None, **kw) -> VaseReward:
    """The configured reward with some dimensions' similarity, the penalty's values or the bonus's weight changed."""
    terms: dict = {d: {"similarity": kind} for d, kind in (similarity or {}).items()}
    if penalty is not None:
        terms["penalty"] = penalty
    if bonus is not None:
        terms["bonus"] = {"weight": bonus["sequence"]}
    return reward_from_config(terms=terms, **kw)


def only(dim: str, **kw) -> VaseReward:
    """A reward that weighs one dimension only, without penalties or bonus."""
    weights = {d: 0.0 for d in TARGET}
    weights[dim] = 1.0
    return make(weights=weights, **{**NO_EXTRAS, **kw})


def test_structured_and_prose_forms_extract_the_same_fields() -> None:
    s = extract_fields("Fabric: Attic; Technique: red figure; Shape: Kylix; Date: -525 to -475; "
                       "Decoration: a symposium scene; Attribution: Berlin Painter")
    p = extract_fields("Attic red-figure kylix, c. 525–475 BCE, depicting a symposium scene; attributed to the Berlin Painter.")
    assert s["fabric"] == "Attic" and p["fabric"] == "Attic"
    assert s["dating"] == "-525 to -475" and p["dating"] == "c. 525–475 BCE"
    assert s["decoration"] == p["decoration"] == "a symposium scene"
    r = make(similarity={"decoration": "sequence"}, **NO_EXTRAS)
    out = r.compute(["Fabric: Attic; Technique: red figure; Shape: Kylix; Date: -525 to -475; "
                     "Decoration: a symposium scene; Attribution: Berlin Painter",
                     "Attic red-figure kylix, c. 525–475 BCE, depicting a symposium scene; attributed to the Berlin "
                     "Painter.", "Corinthian black-figure amphora, c. 600 BCE."],
                    targets=[TARGET, TARGET, TARGET])
    a, b, c = out.total
    assert a == pytest.approx(1.0) and b == pytest.approx(1.0)
    # "Berlin Painter" and "the Berlin Painter" are one vocabulary term; a painter outside it falls back to difflib
    assert out.components["attribution_sim"][0] == 1.0
    assert r.dimension_similarity("attribution", "Painter of Q", "the Painter of X") == pytest.approx(
        difflib.SequenceMatcher(None, "painter of q", "the painter of x").ratio())
    # the third names another fabric, technique and shape, a date outside the range and no decoration: all fail
    assert c == 0.0 and out.components["fabric_pass"][2] == 0.0 and out.components["dating_sim"][2] == 0.0


@pytest.mark.parametrize("written, expected_range", [
    ("c. 525–475 BCE", (-525, -475)),
    ("-525 to -475", (-525, -475)),
    ("525-475 B.C.", (-525, -475)),
    ("ca. 510 BC", (-520, -500)),
    ("late 6th century BC", (-533, -500)),
    ("second quarter of the 5th century BC", (-475, -450)),
])
def test_each_dating_form(written: str, expected_range: tuple[int, int]) -> None:
    # target [-525, -475]; IoU by hand from the parsed range, then thresholded at tau
    lo, hi = expected_range
    inter = max(0, min(hi, -475) - max(lo, -525))
    union = max(hi, -475) - min(lo, -525)
    iou = inter / union
    for tau in (0.0, 0.7):
        r = only("dating", tau=tau)
        got = r([f"An Athenian vase, {written}."], targets=[TARGET])[0]
        assert got == pytest.approx(iou if iou >= tau and iou > 0 else 0.0)


def test_threshold_and_weights_by_hand() -> None:
    r = make(tau=0.7, similarity={"decoration": "sequence"}, **NO_EXTRAS)
    text = "Corinthian red-figure kylix, c. 500–450 BCE, depicting a symposium; attributed to the Berlin Painter."
    out = r.compute([text], targets=[TARGET])
    # fabric wrong (0), technique 0.20, shape 0.15, dating IoU [-500,-450] vs [-525,-475] = 25/75 < tau -> 0,
    # decoration: difflib("a symposium", "a symposium scene") = 2*11/28 = 0.7857 >= tau, attribution 0.10
    dec = difflib.SequenceMatcher(None, "a symposium", "a symposium scene").ratio()
    assert dec == pytest.approx(22 / 28)
    assert out.components["dating_sim"][0] == pytest.approx(1 / 3)
    assert out.components["dating_pass"][0] == 0.0
    assert out.total[0] == pytest.approx(0.20 + 0.15 + 0.20 * dec + 0.10)


def test_missing_dimensions_score_zero_and_short_text_is_penalised() -> None:
    r = make(penalty={"length": 0.1, "repetition": 0.0, "irrelevance": 0.1}, bonus={"sequence": 0.0})
    # two words: fabric and technique only; length 2 < 5 words -> 0.1 penalty
    assert r(["Athenian red-figure"], targets=[TARGET])[0] == pytest.approx(0.20 + 0.20 - 0.1)


def test_empty_and_non_english_completions() -> None:
    r = make(penalty={"length": 0.1, "repetition": 0.2, "irrelevance": 0.1}, bonus={"sequence": 0.0})
    empty, german, greek = r(["", "Eine schöne rotfigurige Schale aus Griechenland",
                               "Ένα αγγείο με μελανόμορφη διακόσμηση από την Αθήνα"], targets=[TARGET] * 3)
    assert empty == pytest.approx(-0.2)      # too short (0 words) and mentions nothing
    assert german == pytest.approx(-0.1)     # 6 words: long enough, but mentions no dimension
    assert greek == pytest.approx(-0.1)


def test_very_long_repetitive_completion() -> None:
    r = make(penalty={"min_words": 5, "max_words": 80, "length": 0.1, "repetition": 0.2, "irrelevance": 0.1},
                   bonus={"sequence": 0.0})
    text = " ".join(["Athenian"] * 200)
    # fabric matches (0.20); 200 words > 80 (-0.1); 198 trigrams, 197 repeats (-0.2 * 197/198); fields found: no irrelevance
    assert r([text], targets=[TARGET])[0] == pytest.approx(0.20 - 0.1 - 0.2 * 197 / 198)


def test_bonus_is_difflib_ratio_against_the_caption() -> None:
    ref = "Athenian red-figure kylix, c. 525–475 BCE, depicting a symposium scene; attributed to the Berlin Painter."
    gen = "Athenian black-figure amphora."
    r = make(weights={d: 0.0 for d in TARGET}, penalty={"length": 0.0, "repetition": 0.0, "irrelevance": 0.0},
                   bonus={"sequence": 0.5})
    expected = 0.5 * difflib.SequenceMatcher(None, gen.lower(), ref.lower()).ratio()
    assert r([gen], targets=[TARGET], reference=[ref])[0] == pytest.approx(expected)


def test_targets_can_come_from_reference_captions() -> None:
    ref = "Athenian red-figure kylix, c. 525–475 BCE, depicting a symposium scene; attributed to the Berlin Painter."
    r = make(similarity={"decoration": "sequence"}, **NO_EXTRAS)
    assert r([ref], reference=[ref])[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="targets"):
        r(["x"])


def test_embedding_similarity_uses_minilm() -> None:
    from sentence_transformers import SentenceTransformer

    from vase.models.tiny_clip import packaged_minilm_path

    a, b = "Herakles wrestling the lion", "a symposium scene"
    st = SentenceTransformer(str(packaged_minilm_path()), device="cpu")
    ea, eb = st.encode([a, b], normalize_embeddings=True)
    cos = float((ea * eb).sum())
    r = only("decoration", tau=0.0, similarity={"decoration": "embedding"})
    assert r([f"An amphora depicting {a}."], targets=[TARGET])[0] == pytest.approx(max(cos, 0.0), abs=1e-5)
    r_tau = only("decoration", tau=0.7, similarity={"decoration": "embedding"})
    assert cos < 0.7 and r_tau([f"An amphora depicting {a}."], targets=[TARGET])[0] == 0.0
    same = r_tau(["An amphora depicting a symposium scene."], targets=[TARGET])[0]
    assert same == pytest.approx(1.0, abs=1e-5)


def test_reward_is_picklable_and_gives_the_same_values() -> None:
    r = make()
    texts = ["Attic red-figure cup, c. 500 BCE, showing a symposium", "nothing"]
    before = r(texts, targets=[TARGET, TARGET])
    blob = pickle.dumps(r)
    assert len(blob) < 20_000  # no sentence encoder or cache travels with it
    clone = pickle.loads(blob)
    assert clone(texts, targets=[TARGET, TARGET]) == pytest.approx(before)


def test_trl_style_conversational_completions() -> None:
    r = make(similarity={"decoration": "sequence"}, **NO_EXTRAS)
    msg = [[{"role": "assistant", "content": "Athenian red-figure kylix, c. 525–475 BCE, depicting a symposium scene; "
                                             "attributed to the Berlin Painter."}]]
    assert r(msg, targets=[TARGET])[0] == pytest.approx(1.0)


def test_the_yaml_is_the_one_source_of_the_rewards_values(tmp_path, session_dirs) -> None:
    from vase.errors import ConfigError

    r = reward_from_config()
    assert r.weights == {"fabric": 0.2, "technique": 0.2, "shape": 0.15, "dating": 0.15, "decoration": 0.2,
                         "attribution": 0.1}  # the paper's, as conf/reward/vase6d.yaml states them
    # a dimension left out of the weights is a config error naming it, not a silent 0.0
    cfg = compose_cfg("train", ["stage=grpo", "~reward.weights.shape"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"reward\.terms\.shape\.weight: Interpolation key 'weights\.shape'"):
        validate(cfg)
    # a dimension term whose weight is set apart from reward.weights: named, never one of the two silently
    cfg = compose_cfg("train", ["stage=grpo", "reward.terms.shape.weight=0.6"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"reward\.terms\.shape\.weight=0\.6 differs from reward\.weights\.shape"):
        validate(cfg)
    terms = dict(r.terms)
    with pytest.raises(ValueError, match=r"reward\.terms\.shape\.weight=0\.6 but reward\.weights\.shape=0\.15"):
        VaseReward(tau=0.7, weights={**r.weights, "shape": 0.15}, terms={**terms, "shape": {
            "_target_": "vase.rewards.terms.Similarity", "dimension": "shape", "similarity": "vocabulary",
            "tau": 0.7, "weight": 0.6}})
    with pytest.raises(ValueError, match=r"both score dimension 'fabric'"):
        VaseReward(tau=0.7, terms={**terms, "fabric2": terms["fabric"]})
    cfg = compose_cfg("train", ["stage=grpo", "reward.terms.decoration.similarity=cosine"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"reward\.terms\.decoration\.similarity='cosine' must be one of"):
        validate(cfg)


def test_a_folder_as_the_reward_log_and_a_none_completion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vase.integrations.swift_plugin import VaseORM
    from vase.rewards import reward_from_config

    monkeypatch.setenv("VASE_REWARD_LOG", str(tmp_path))
    with pytest.raises(ConfigError, match="VASE_REWARD_LOG=.* is a folder"):
        VaseORM()
    reward = reward_from_config()
    target = {"fabric": "Athenian", "technique": "black-figure", "shape": "amphora", "dating": [-525, -475],
              "decoration": "Herakles", "attribution": "the Amasis Painter"}
    out = reward.compute([None, "None", ""], targets=[target] * 3)
    assert out.total[0] == out.total[2]  # None is the empty answer, not the word "None"
