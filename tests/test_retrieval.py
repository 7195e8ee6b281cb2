"""The retrieval index: only training vases, never the query itself, incremental, persistent; prompts carry it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vase.annotate.records import raw_metadata


def _dm(synthetic_root: Path, tmp_path: Path, k: int = 3):
    from vase.data.datamodule import VaseDataModule
    from vase.models.tiny_clip import build_tiny_open_clip

    weights = build_tiny_open_clip(tmp_path / "clip")
    return VaseDataModule(str(synthetic_root), render={"enabled": False}, split={"cache_dir": str(tmp_path)},
                          retrieval={"k": k, "index_dir": str(tmp_path / "index"),
                                     "clip": {"backend": "open_clip", "model": "vase-tiny-clip",
                                              "pretrained": str(weights)}})


def test_index_holds_only_training_vases_and_never_returns_the_query(synthetic_root: Path, tmp_path: Path) -> None:
    from vase.retrieval.index import VaseIndex

    dm = _dm(synthetic_root, tmp_path)
    dm.setup()
    train = {r.id: r for r in dm.train_set.records}
    val = {r.id for r in dm.val_set.records}
    text_of = {raw_metadata(r): rid for rid, r in train.items()}
    for ds in (dm.train_set, dm.val_set):
        for rec in ds.records:
            ctx = ds.contexts[rec.id]
            lines = [ln.split(". ", 1)[1] for ln in ctx.strip().splitlines()[1:]]
            assert len(lines) == 3
            ids = [text_of[ln] for ln in lines]  # every neighbour is a training vase, named by its metadata
            assert rec.id not in ids and not set(ids) & val
    from omegaconf import OmegaConf

    from vase.metrics.encoders import build_clip_encoder

    index = VaseIndex(tmp_path / "index", build_clip_encoder(OmegaConf.create(dm.retrieval["clip"])))
    assert index.ids() == set(train)  # persisted: a fresh client sees the same points
    assert index.update(dm.train_set, progress=False) == {"indexed": 0, "unchanged": len(train), "removed": 0}
    index.close()


def test_index_updates_incrementally(synthetic_root: Path, tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from vase.metrics.encoders import build_clip_encoder
    from vase.retrieval.index import VaseIndex

    dm = _dm(synthetic_root, tmp_path, k=0)
    dm.setup()
    index = VaseIndex(tmp_path / "idx", build_clip_encoder(OmegaConf.create(dm.retrieval["clip"])))
    n = len(dm.train_set)
    assert index.update(dm.train_set, progress=False)["indexed"] == n
    dm.train_set.records[0].caption = "an edited caption"
    removed = dm.train_set.records.pop()
    assert index.update(dm.train_set, progress=False) == {"indexed": 1, "unchanged": n - 2, "removed": 1}
    assert removed.id not in index.ids()
    index.close()


def test_every_prompt_carries_the_context_only_when_asked(synthetic_root: Path, tmp_path: Path) -> None:
    from vase.data.datamodule import samples_for
    from vase.eval.generate import caption_items
    from vase.eval.vqa import vqa_items

    dm = _dm(synthetic_root, tmp_path)
    dm.retrieval["format"] = "lines"  # every prompt of the vase, questions too, carries the whole lines
    dm.setup()
    rec = dm.val_set.records[0]
    ctx = dm.val_set.contexts[rec.id]
    assert ctx.startswith("Similar vases in the collection")
    assert all(s.prompt.startswith(ctx) for s in samples_for(dm.val_set[0], "all"))
    assert caption_items(dm.val_set)[0].prompt.startswith(ctx)
    assert all(it.prompt.startswith(ctx) for it in vqa_items(dm.val_set)[:12])
    plain = _dm(synthetic_root, tmp_path / "plain", k=0)
    plain.setup()
    assert not plain.val_set.contexts and not caption_items(plain.val_set)[0].prompt.startswith("Similar")


def test_training_with_retrieval_runs(train_cfg) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(["retrieval.k=2"])
    run_training(cfg)
    assert (Path(cfg.paths.output_dir) / "adapter" / "adapter_model.safetensors").is_file()
    assert (Path(cfg.data.root) / "retrieval").is_dir()  # the synthetic set is vase's: its index lives beside it


@pytest.fixture(scope="module")
def painted_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list, Path]:
    """240 synthetic vases (seed 0) with four views each at 224 px, as training renders them (about 20 s)."""
    from vase.data.synthetic import generate
    from vase.render.renderer import RenderSettings, render_dataset

    root = tmp_path_factory.mktemp("painted") / "set"
    splits = generate(root, num=240, seed=0, val_fraction=0.25, progress=False)
    recs = splits["train"] + splits["val"]
    render_dataset(root, [(r.id, r.model) for r in recs], RenderSettings(resolution=224),
                   views=("front", "back", "left", "right"), progress=False)
    return splits["train"], splits["val"], root


def _vectors(recs: list, root: Path) -> torch.Tensor:
    from PIL import Image

    from vase.metrics.features import ViewDescriptor
    from vase.retrieval.index import embed_views
    from vase.views import view_path

    enc = ViewDescriptor()
    return torch.stack([embed_views(enc, [Image.open(view_path(root, v, r.id)) for v in ("front", "back", "left", "right")])
                        for r in recs])


@pytest.mark.slow  # heavy (whole runs in subprocesses, or a 30 s fixture): make test-slow keeps the default suite short
def test_the_index_features_are_not_random_neighbours_share_painter_and_date(painted_set) -> None:
    """The view descriptor's nearest training vases share a validation vase's attribution far more often than
    chance, and more often than chance within its technique (so it is not only the colour scheme); their dates
    overlap more."""
    from vase.annotate.vocab import dating_iou

    train, val, root = painted_set
    sims = _vectors(val, root) @ _vectors(train, root).T
    nn = sims.topk(3, dim=1).indices.tolist()
    share = sum(train[j].attribution == v.attribution for v, row in zip(val, nn) for j in row) / (3 * len(val))
    chance = sum(t.attribution == v.attribution for v in val for t in train) / (len(val) * len(train))
    within = sum(sum(t.attribution == v.attribution for t in train if t.technique == v.technique)
                 / sum(t.technique == v.technique for t in train) for v in val) / len(val)
    assert share > within + 0.1 and share > chance + 0.2, (share, within, chance)
    iou = sum(dating_iou(train[j].dating, v.dating) for v, row in zip(val, nn) for j in row) / (3 * len(val))
    iou_chance = sum(dating_iou(t.dating, v.dating) for v in val for t in train) / (len(val) * len(train))
    assert iou > 2 * iou_chance, (iou, iou_chance)


@pytest.mark.slow  # heavy (whole runs in subprocesses, or a 30 s fixture): make test-slow keeps the default suite short
def test_the_painters_hand_is_visible_a_classifier_on_views_beats_the_majority(painted_set) -> None:
    """Attribution from the views alone (nearest training vase by the view descriptor) beats answering the majority
    painter on the held-out vases, by more than its 95 % interval's half-width; and it does so on the named painters'
    vases, where the majority answer ("unattributed") is always wrong."""
    import math

    train, val, root = painted_set
    nn = (_vectors(val, root) @ _vectors(train, root).T).argmax(dim=1).tolist()
    right = [train[j].attribution == v.attribution for v, j in zip(val, nn)]
    majority = max({t.attribution for t in train}, key=[t.attribution for t in train].count)
    base = [v.attribution == majority for v in val]
    diff = [a - b for a, b in zip(right, base)]
    mean = sum(diff) / len(diff)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diff) / (len(diff) - 1))
    assert mean - 1.96 * sd / math.sqrt(len(diff)) > 0, (sum(right), sum(base), len(val))
    named = [r for r, v in zip(right, val) if v.attribution != majority]
    assert sum(named) / len(named) > 0.3, (sum(named), len(named))


def test_retrieval_features_auto_picks_pixels_for_the_tiny_random_clip() -> None:
    from vase.data.datamodule import VaseDataModule
    from vase.errors import ConfigError
    from vase.metrics.features import ViewDescriptor, features_of

    assert features_of({"clip": {"build_tiny": True}}) == "pixels"
    assert features_of({"clip": {"build_tiny": False, "model": "openai/clip-vit-base-patch32"}}) == "clip"
    assert features_of({"features": "clip", "clip": {"build_tiny": True}}) == "clip"
    with pytest.raises(ConfigError, match="retrieval.features='sift'"):
        features_of({"features": "sift"})

    def encoder(retrieval: dict):
        return VaseDataModule("/nonexistent", render={"enabled": False}, retrieval=retrieval).index_encoder()

    assert isinstance(encoder({"k": 3, "features": "pixels"}), ViewDescriptor)
    with pytest.raises(ConfigError, match="needs retrieval.clip"):
        encoder({"k": 3, "features": "clip"})


def test_with_format_asked_a_question_sees_only_its_dimensions_neighbour_values(synthetic_root: Path,
                                                                                tmp_path: Path) -> None:
    """retrieval.format=asked (the cure for the tiny model answering a neighbour's line to every question): each QA
    and multiple-choice prompt, in training, held-out answers and VQA alike, carries only the asked dimension's value
    of each neighbour; the caption keeps the whole lines; the neighbours are the same."""

    from vase.annotate.vocab import DIMENSIONS
    from vase.data.datamodule import samples_for
    from vase.eval.generate import caption_items
    from vase.eval.heldout import heldout_items
    from vase.eval.vqa import vqa_items

    dm = _dm(synthetic_root, tmp_path)  # format=asked is the default
    dm.setup()
    rec, ex = dm.val_set.records[0], dm.val_set[0]
    ctx = dm.val_set.contexts[rec.id]
    found = [line.split(". ", 1)[1] for line in ctx.splitlines()[1:] if line[:1].isdigit()]
    assert len(found) == 3
    for s in samples_for(ex, "all"):
        if s.dimension in DIMENSIONS:  # QA and multiple choice
            head = s.prompt.split("\n\n")[0]
            assert head.startswith("Similar vases in the collection: ") and "Fabric:" not in head, s.prompt
            shape = {"shape": r"Shape: ", "technique": "Technique: "}.get(s.dimension)
            if shape:  # the asked values are the neighbours' own (upper-case in the raw lines)
                vals = [f.split(shape)[1].split(";")[0].lower() for f in found]
                assert head.removeprefix("Similar vases in the collection: ").rstrip(".").lower().split("; ") == vals
        else:
            assert s.prompt.startswith(ctx)  # the caption: whole lines
    assert caption_items(dm.val_set)[0].prompt.startswith(ctx)
    asked = dm.val_set.asked_of(0)
    tool = [s for s in samples_for(ex, "qa", zoom=True) if "#tool" in s.id or "#zoom" in s.id]
    assert {s.id.split("#", 1)[1] for s in tool} >= {"zoom-call", "zoom-answer", "shape#tool"}
    for s in tool:  # the zoom tool's samples too: the asked dimension's values, decoration's for the zoom pair
        dim = "decoration" if "#zoom" in s.id else s.id.split("#")[1]
        assert s.prompt.startswith(asked[dim]) and ctx not in s.prompt, s.id
    items = [it for it in vqa_items(dm.val_set, "open") if it.id.startswith(rec.id)]
    assert all(it.prompt.startswith(dm.val_set.asked_of(0)[it.extra["dimension"]]) for it in items)
    held, _ = heldout_items(dm.val_set, "qa")
    assert held[0].prompt.startswith(dm.val_set.asked_of(0)[held[0].id.split("#")[1]])
    with pytest.raises(Exception, match="retrieval.format='json'"):
        bad = _dm(synthetic_root, tmp_path / "bad")
        bad.retrieval["format"] = "json"
        bad.setup()
