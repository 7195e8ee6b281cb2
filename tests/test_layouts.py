"""Every layout loads the same vases; each accepted file shape reads; the checker finds each planted problem."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, compose_cfg, run_python
from vase.data.check import check_dataset, format_report
from vase.data.dataset import load_media, load_views
from vase.data.export import export_paper_eval, export_release, export_swift
from vase.data.layouts import detect_layout, load_split, read_records
from vase.errors import DataError
from vase.prompts import CAPTION_PROMPT
from vase.views import VIEWS

DIMS = ("fabric", "technique", "shape", "dating", "decoration", "attribution")


def _digest(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def layouts(synthetic_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("layouts")
    splits = read_records(synthetic_root)
    return {
        "vase": synthetic_root,
        "release": export_release(splits, [synthetic_root], synthetic_root, base / "release"),
        "paper_eval": export_paper_eval({"all": [r for rs in splits.values() for r in rs]}, [synthetic_root],
                                        base / "paper_eval"),
        "swift": export_swift(splits, [synthetic_root], base / "swift"),
    }


def _pixels(images) -> list[np.ndarray]:
    return [np.asarray(im, dtype=np.float64) for im in images]


def test_the_four_layouts_load_the_same_vases(layouts: dict[str, Path], synthetic_root: Path) -> None:
    base = {r.id: r for rs in read_records(synthetic_root).values() for r in rs}
    views = {vid: _pixels(load_views([synthetic_root], vid, VIEWS)) for vid in base}
    for layout, root in layouts.items():
        assert detect_layout(root) == layout
        got = {r.id: r for rs in read_records(root).values() for r in rs}
        assert set(got) == set(base), layout
        for vid, ref in base.items():
            rec = got[vid]
            assert rec.caption == ref.caption, (layout, vid)
            if layout in ("vase", "release", "swift"):  # the layouts that carry the six dimensions and QA
                assert [getattr(rec, d) for d in DIMS] == [getattr(ref, d) for d in DIMS], (layout, vid)
                assert rec.qa == ref.qa, (layout, vid)
            else:
                assert not rec.has_dimensions and rec.qa == []
            if layout == "release":
                assert (root / rec.model).read_bytes() == (synthetic_root / ref.model).read_bytes()
            imgs = _pixels(load_media(rec)) if (rec.images or rec.videos) else _pixels(load_views([root], vid, VIEWS))
            tol = 3.0 if layout == "paper_eval" else 0.0  # the paper's folders hold JPEGs
            assert len(imgs) == 6 and all(np.abs(a - b).mean() <= tol for a, b in zip(imgs, views[vid])), (layout, vid)
    # the splits that a layout carries are kept: vase's and the JSONL files' train/val
    for layout in ("vase", "swift"):
        assert {k: sorted(r.id for r in v) for k, v in read_records(layouts[layout]).items()} == \
            {k: sorted(r.id for r in v) for k, v in read_records(synthetic_root).items()}
    assert {r.prompt for rs in read_records(layouts["swift"]).values() for r in rs} == {CAPTION_PROMPT}


def test_a_release_without_a_split_is_split_by_id_and_saved_in_the_cache(layouts: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    root = layouts["release"]
    before = _digest(root)
    train = load_split(root, "train", seed=3, val_fraction=0.25, cache_dir=tmp_path / "cache")
    val = load_split(root, "val", seed=3, val_fraction=0.25, cache_dir=tmp_path / "cache")
    assert _digest(root) == before  # nothing written into the dataset
    ids = {r.id for rs in read_records(root).values() for r in rs}
    assert {r.id for r in train} | {r.id for r in val} == ids and not {r.id for r in train} & {r.id for r in val}
    assert len(val) == 2
    saved = list((tmp_path / "cache" / "splits").glob("release-*-s3-v0.25.json"))
    assert len(saved) == 1 and sorted(json.loads(saved[0].read_text())["val"]) == sorted(r.id for r in val)
    (tmp_path / "mine.json").write_text(json.dumps({"train": sorted(ids)[1:], "val": sorted(ids)[:1]}))
    assert [r.id for r in load_split(root, "val", split_file=tmp_path / "mine.json")] == sorted(ids)[:1]


def test_release_files_in_other_reasonable_shapes(tmp_path: Path) -> None:
    ann = tmp_path / "ds" / "annotations"
    ann.mkdir(parents=True)
    (ann / "metadata.json").write_text(json.dumps({
        "a_1_ac001001": "Fabric: ATHENIAN; Technique: BLACK-FIGURE; Shape: AMPHORA, NECK; Date: -525 to -475; "
                        "Decoration: Herakles and the lion; Attribution: Unattributed",
        "b_2_ac001001": {"fabric": "Corinthian", "technique": "black-figure", "shape": "oinochoe",
                         "dating": "-625 to -600", "decoration": "an animal frieze", "attribution": "Unattributed"}}))
    (ann / "captions.json").write_text(json.dumps([{"images": ["a_1_ac001001.jpg"], "text": "An Athenian amphora."},
                                                   {"image_name": "b_2_ac001001.png", "caption": "A jug."}]))
    (ann / "qa_pairs.json").write_text(json.dumps([
        {"vase_id": "a_1_ac001001", "question": "What is the fabric of the vase?", "answer": "Athenian."},
        {"vase_id": "a_1_ac001001", "question": "Who painted it?", "answer": "Unknown."}]))
    recs = {r.id: r for r in read_records(tmp_path / "ds")["all"]}
    a, b = recs["a_1_ac001001"], recs["b_2_ac001001"]
    assert (a.fabric, a.technique, a.shape, a.dating) == ("Athenian", "black-figure", "amphora, neck", (-525, -475))
    assert a.caption == "An Athenian amphora." and b.caption == "A jug."
    assert [q["dimension"] for q in a.qa] == ["fabric", "other"]
    assert b.dating == (-625, -600) and len(b.qa) == 6  # no QA given: made from its metadata, as for vase's own
    (ann / "captions.json").write_text(json.dumps("just a string"))
    with pytest.raises(DataError, match=r"captions.json: expected a list of objects with an id .* or a mapping"):
        read_records(tmp_path / "ds")


def test_paper_eval_folders_are_keyed_as_the_papers_scorer_keys_them(tmp_path: Path, synthetic_root: Path) -> None:
    name = "0A1F555B-F4F2-4074-9559-D96D3FA0C97C_2_ac001001"
    folder = tmp_path / "eval" / f"{name}_textured_2k.glb_shaded"
    folder.mkdir(parents=True)
    vid = read_records(synthetic_root)["val"][0].id
    for view, img in zip(VIEWS, load_views([synthetic_root], vid, VIEWS)):
        img.save(folder / f"{view}.jpg")
    (tmp_path / "eval" / "groundTruth.json").write_text(json.dumps([{"images": [f"{name}.jpg"], "caption": "A vase."}]))
    (rec,) = read_records(tmp_path / "eval")["all"]
    assert rec.id == "0A1F555B-F4F2-4074-9559-D96D3FA0C97C_2" and rec.caption == "A vase."
    assert [Path(p).name for p in rec.images] == [f"{v}.jpg" for v in VIEWS]


def test_a_users_plain_swift_jsonl_with_videos(tmp_path: Path, synthetic_root: Path) -> None:
    import av

    vid = read_records(synthetic_root)["train"][0].id
    frames = load_views([synthetic_root], vid, VIEWS)
    (tmp_path / "frames").mkdir()
    for k, im in enumerate(frames):
        im.save(tmp_path / "frames" / f"{k:03d}.png")
    with av.open(str(tmp_path / "orbit.mp4"), "w") as c:
        s = c.add_stream("mpeg4", rate=6)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        for im in frames:
            c.mux(s.encode(av.VideoFrame.from_image(im)))
        c.mux(s.encode())
    lines = [{"messages": [{"role": "user", "content": "<video>请描述这个花瓶"},
                           {"role": "assistant", "content": "An Athenian amphora."}], "videos": ["orbit.mp4"]},
             {"messages": [{"role": "user", "content": "<video>What is the shape of the vase?"},
                           {"role": "assistant", "content": "Amphora."}], "videos": ["orbit.mp4"]},
             {"messages": [{"role": "user", "content": "<video>Describe."},
                           {"role": "assistant", "content": "A lekythos."}], "videos": [str(tmp_path / "frames")]}]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    recs = {r.id: r for r in read_records(tmp_path / "mine.jsonl")["all"]}
    assert set(recs) == {"orbit", "frames"}
    orbit = recs["orbit"]
    assert orbit.caption == "An Athenian amphora." and orbit.prompt == "请描述这个花瓶" and not orbit.has_dimensions
    assert orbit.qa == [{"dimension": "shape", "question": "What is the shape of the vase?", "answer": "Amphora."}]
    decoded = load_media(orbit)
    assert type(decoded).__name__ == "VideoFrames" and len(decoded) == 6 and decoded[0].size == (64, 64)
    assert len(load_media(recs["frames"], max_frames=4)) == 4


# ------------------------------------------------------------------------------------------------ training on them


def test_training_reads_swift_jsonl_and_release_unchanged(layouts: dict[str, Path], tiny_model_dir: Path,
                                                          tmp_path: Path, session_dirs: dict) -> None:
    from vase.pipeline import run_training

    for layout in ("swift", "release"):
        before = _digest(layouts[layout])
        cfg = compose_cfg("train", ["logger=none", "model=qwen2_5_vl_3b", f"model.name_or_path={tiny_model_dir}",
                                    "model.dtype=float32", "model.processor.max_pixels=12544", "data=vasevqa3d",
                                    f"data.root={layouts[layout]}", "data.num_workers=0", "render.resolution=64",
                                    "trainer.max_steps=1", "stage.batch_size=2", "stage.grad_accum=1",
                                    "val.after=false", "report=false"], tmp_path / layout, session_dirs)
        run_training(cfg)
        assert (tmp_path / layout / "adapter" / "adapter_model.safetensors").is_file()
        assert _digest(layouts[layout]) == before


def test_grpo_refuses_records_without_dimensions(layouts: dict[str, Path], tmp_path: Path) -> None:
    from vase.data.datamodule import VaseDataModule

    dm = VaseDataModule(str(layouts["paper_eval"]), stage="grpo", split={"cache_dir": str(tmp_path)})
    with pytest.raises(DataError, match="GRPO's reward needs the six dimensions"):
        dm.setup()


# ------------------------------------------------------------------------------------------------ the checker


def _broken(synthetic_root: Path, dest: Path) -> Path:
    """A copy of the synthetic set with one of each kind of problem planted."""
    shutil.copytree(synthetic_root, dest, ignore=shutil.ignore_patterns(".vase-built", "synthetic.json"))
    train = json.loads((dest / "annotations" / "train.json").read_text())
    val = json.loads((dest / "annotations" / "val.json").read_text())
    a, b, c, d, e = (r["id"] for r in train[:5])
    (dest / "images" / "front" / f"{a}.png").unlink()                                  # missing view
    (dest / "images" / "left" / f"{b}.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")   # unreadable view
    (dest / "models" / f"{c}.glb").write_bytes(b"glTF not really")                     # corrupt GLB
    (dest / "models" / f"{d}.glb").unlink()                                            # missing model
    del train[4]["shape"]                                                              # missing dimension (e)
    train[3]["dating"] = "in the days of yore"                                         # unparseable date (d)
    train.append(dict(train[0]))                                                       # duplicate id (a)
    val.append(dict(train[1]))                                                         # split overlap (b)
    (dest / "annotations" / "train.json").write_text(json.dumps(train))
    (dest / "annotations" / "val.json").write_text(json.dumps(val))
    return dest


def test_the_checker_lists_every_planted_problem_and_only_those(synthetic_root: Path, tmp_path: Path) -> None:
    clean = check_dataset(synthetic_root, progress=False)
    assert clean["ok"] and clean["problems"] == [] and clean["records"] == 8
    ds = _broken(synthetic_root, tmp_path / "ds")
    before = _digest(ds)
    rep = check_dataset(ds, progress=False)
    assert _digest(ds) == before
    train = json.loads((ds / "annotations" / "train.json").read_text())
    a, b, c, d, e = (r["id"] for r in train[:5])
    found = [(p["kind"], p["id"]) for p in rep["problems"]]
    assert len(found) == len(set(found)) and set(found) == {("missing_view", a), ("unreadable_view", b), ("corrupt_model", c), ("missing_model", d),
                     ("bad_date", d), ("missing_dimension", e), ("duplicate_id", a), ("split_overlap", b)}
    assert not rep["ok"] and "corrupt_model" in format_report(rep)


def test_check_commands_exit_1_and_write_json_beside_the_text(synthetic_root: Path, tmp_path: Path,
                                                              session_dirs: dict) -> None:
    ds = _broken(synthetic_root, tmp_path / "ds")
    p = run_python(["-m", "vase.data.check", str(ds), "--report", str(tmp_path / "r.json")], cwd=ROOT)
    assert p.returncode == 1 and "split_overlap" in p.stdout
    assert len(json.loads((tmp_path / "r.json").read_text())["problems"]) == 8
    p = run_python(["-m", "vase.data.check", str(synthetic_root), "--report", str(tmp_path / "ok.json"), "--no-models"],
                   cwd=ROOT)
    assert p.returncode == 0 and "no problems found" in p.stdout
    p = run_python(["-m", "vase.data.check", str(ds), "--report", str(ds / "r.json")], cwd=ROOT)
    assert p.returncode == 2 and "inside the dataset" in p.stderr and not (ds / "r.json").exists()
    p = run_python([str(ROOT / "evaluate.py"), "action=check", "data=vasevqa3d", f"data.root={ds}", "logger=none",
                    f"hydra.run.dir={tmp_path / 'run'}", f"paths.cache_dir={session_dirs['cache']}"], cwd=ROOT)
    assert p.returncode == 1, p.stderr[-1500:]
    assert json.loads((tmp_path / "run" / "check.json").read_text())["counts"]["corrupt_model"] == 1
    assert "missing_view" in (tmp_path / "run" / "check.md").read_text()


def test_a_missing_dataset_folder_is_one_message_from_every_entry_point(tmp_path: Path) -> None:
    """The same mistake, the same words at once: train.py (before any model loads), the data check and the export
    each say the folder does not exist, and write nothing."""
    missing = tmp_path / "VaseVQA-3D"
    commands = {
        "train.py": [sys.executable, "train.py", "data=vasevqa3d", f"data.root={missing}", "model=tiny",
                     f"paths.log_dir={tmp_path / 'logs'}", f"paths.cache_dir={tmp_path / 'cache'}", "logger=none"],
        "data.check": [sys.executable, "-m", "vase.data.check", str(missing), "--report", str(tmp_path / "r.json")],
        "data.export": [sys.executable, "-m", "vase.data.export", str(missing), str(tmp_path / "out"), "--to", "swift"],
    }
    for name, cmd in commands.items():
        p = run_python(cmd, cwd=ROOT, env={**os.environ,
                           "WANDB_MODE": "disabled"}, timeout=300)
        said = p.stdout + p.stderr
        assert p.returncode != 0 and f"{missing}: no such folder; data.root" in said, (name, said[-1500:])
        assert "Traceback" not in said, name
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.json").exists() and not missing.exists()
