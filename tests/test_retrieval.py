"""The retrieval index: only training vases, never the query itself, incremental, persistent; prompts carry it."""

from __future__ import annotations

from pathlib import Path

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
