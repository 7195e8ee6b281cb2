"""The six-head attribute baseline learns above the majority class on the synthetic set, scored like the VLMs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import compose_cfg


def test_six_head_baseline_beats_the_majority_class(tmp_path: Path, session_dirs: dict) -> None:
    from vase.pipeline.evaluate import run_evaluation

    out = tmp_path / "attributes.json"
    cfg = compose_cfg("evaluate", ["action=attributes", "logger=none", "data.synthetic.num_vases=96",
                                   "render.resolution=64", f"output={out}"], tmp_path, session_dirs)
    run_evaluation(cfg)
    res = json.loads(out.read_text())
    ours, chance = res["vqa"]["open"], res["majority_class"]["open"]
    assert ours["n"] == chance["n"] == 24 * 6
    # technique (colour scheme) and shape (silhouette) are visible in the views: well above the majority class
    for dim in ("technique", "shape"):
        assert ours["accuracy"][dim] >= chance["accuracy"][dim] + 0.25, dim
    assert ours["mean"] > chance["mean"] + 0.1
    assert "| six-head baseline | open-ended" in out.with_suffix(".md").read_text()


def _heads(synthetic_root: Path, tmp_path: Path) -> Path:
    from omegaconf import OmegaConf

    from vase.data.dataset import VaseDataset
    from vase.metrics.attributes import save_heads, train_attribute_heads, view_features
    from vase.metrics.encoders import build_clip_encoder
    from vase.models.tiny_clip import build_tiny_open_clip

    enc_cfg = {"backend": "open_clip", "model": "vase-tiny-clip", "pretrained": str(build_tiny_open_clip(tmp_path / "c"))}
    enc = build_clip_encoder(OmegaConf.create(enc_cfg))
    train, val = VaseDataset(synthetic_root, "train"), VaseDataset(synthetic_root, "val")
    model = train_attribute_heads(view_features(train, enc, False), train.records, view_features(val, enc, False),
                                  val.records, epochs=30)
    return save_heads(model, enc_cfg, tmp_path / "attribute_heads.pt")


def test_the_learned_reward_term_rewards_agreement_with_the_classifier(synthetic_root: Path, tmp_path: Path) -> None:
    from vase.data.dataset import VaseDataset
    from vase.metrics.attributes import AttributePredictor
    from vase.rewards.reward import reward_from_config

    path = _heads(synthetic_root, tmp_path)
    ds = VaseDataset(synthetic_root, "val")
    images = ds[0].images
    pred = AttributePredictor(path).predict(images)
    agree = (f"{pred['fabric']} {pred['technique']} {pred['shape']}, {pred['dating']}, depicting "
             f"{pred['decoration']}; attributed to {pred['attribution']}.")
    other_shape = "kylix" if pred["shape"] != "kylix" else "amphora"
    disagree = agree.replace(pred["shape"], other_shape)
    target = {d: getattr(ds.records[0], d) for d in ("fabric", "technique", "shape", "dating", "decoration",
                                                      "attribution")}
    base = reward_from_config()
    r = reward_from_config(terms={"learned": {"weight": 0.5, "checkpoint": str(path)}})
    texts = [agree, disagree]
    kw = {"targets": [target] * 2, "reference": [ds.records[0].caption] * 2, "images": [images] * 2,
          "ids": [f"{ds.records[0].id}#caption"] * 2}
    out, plain = r.compute(texts, **kw), base.compute(texts, **kw)
    # full agreement: 1 up to the float32 rounding of a cosine of identical embeddings
    assert out.components["learned"][0] == pytest.approx(1.0, abs=1e-6) and out.components["learned"][1] < 0.99
    assert out.total == [t + 0.5 * x for t, x in zip(plain.total, out.components["learned"])]
    assert plain.components["learned"] == [0.0, 0.0]


def test_grpo_with_the_learned_reward_term(synthetic_root: Path, tmp_path: Path, train_cfg) -> None:
    import json as _json

    from vase.pipeline import run_training

    path = _heads(synthetic_root, tmp_path)
    cfg = train_cfg(["stage=grpo", "reward.terms.learned.weight=0.5", f"reward.terms.learned.checkpoint={path}",
                     "stage.module.max_completion_length=8", "stage.module.num_generations=2"])
    run_training(cfg)
    history = _json.loads((Path(cfg.paths.output_dir) / "train_history.json").read_text())
    assert history and all(0.0 <= h["reward/learned"] <= 1.0 for h in history)


def test_grpo_trains_the_learned_terms_classifier_on_its_training_vases(tmp_path: Path, train_cfg) -> None:
    """reward.terms.learned.checkpoint=train: the GRPO run trains the six heads on its own training vases (the
    weight-free view descriptor with the tiny random CLIP), caches them by data and settings, and rewards agreement
    with them; a second run with the same data reuses the file."""
    from omegaconf import OmegaConf

    from vase.data.dataset import VaseDataset
    from vase.metrics.attributes import AttributePredictor
    from vase.pipeline import run_training
    from vase.pipeline.learned import heads_key, learned_heads

    over = ["stage=grpo", "reward.terms.learned.weight=0.5", "reward.terms.learned.checkpoint=train",
            "reward.terms.learned.heads.epochs=20", "stage.module.max_completion_length=8",
            "stage.module.num_generations=2"]
    cfg = train_cfg(over)
    key, spec = heads_key(cfg)
    assert spec["seed"] == 0 and spec["heads"]["features"] == "auto"
    run_training(cfg)
    path = Path(cfg.paths.cache_dir) / "attributes" / key / "attribute_heads.pt"
    saved = OmegaConf.load(Path(cfg.paths.output_dir) / "config.yaml")
    assert saved.reward.terms.learned.checkpoint == str(path) and path.is_file()
    info = json.loads((path.parent / "heads.json").read_text())
    root = Path(cfg.data.root)
    train, val = VaseDataset(root, "train"), VaseDataset(root, "val")
    assert info["train_vases"] == len(train) and info["encoder"]["features"] == "pixels"
    assert set(info["held_out_accuracy"]) >= {"technique", "shape"}
    assert all(v["n"] == len(val) for v in info["held_out_accuracy"].values())
    history = json.loads((Path(cfg.paths.output_dir) / "train_history.json").read_text())
    assert history and all(0.0 <= h["reward/learned"] <= 1.0 for h in history)
    # the classifier predicts from a vase's views: the same answer texts as the reward term asks for
    assert set(AttributePredictor(path).predict(val[0].images)) >= {"shape", "technique", "fabric"}

    stamp = path.stat().st_mtime_ns
    again = train_cfg([*over, "seed=7"])  # another GRPO seed: the same classifier (heads.seed), not retrained
    assert learned_heads(again) == path and path.stat().st_mtime_ns == stamp
    assert again.reward.terms.learned.checkpoint == str(path)
    other = train_cfg([*over, "reward.terms.learned.heads.hidden=64"])
    assert heads_key(other)[0] != key
    assert learned_heads(train_cfg(["stage=grpo"])) is None  # the term off: nothing trained
    sft = train_cfg([o for o in over if not o.startswith("stage")])  # an SFT run has no reward: nothing trained
    assert learned_heads(sft) is None and sft.reward.terms.learned.checkpoint == "train"
    followup = train_cfg([*over[1:4], "+stage@followup=grpo"])  # SFT then GRPO in one run: the GRPO stage needs it
    assert followup.stage.name == "sft" and learned_heads(followup) == path


def test_the_learned_term_refuses_train_outside_a_grpo_run() -> None:
    from vase.rewards.terms import Learned

    with pytest.raises(ValueError, match="checkpoint=train is resolved by a GRPO run"):
        Learned(weight=0.5, checkpoint="train")
    assert Learned(weight=0.0, checkpoint="train")([""], [{}]) == [0.0]
