"""Trust, round 3 (issue 23): a dataset's ids are data, never paths. Hostile ids (``../``, separators, absolute,
``..``, NUL, control characters, drive letters, over-long names) go through every writer; no file appears outside
the folder that writer owns and the source dataset stays byte-identical. Each test failed on the code before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python
from tests.test_user_paths import _user_dataset, tree_hash
from vase.errors import ConfigError, DataError
from vase.io import MAX_NAME_BYTES, inside, name_problem, safe_name

HOSTILE = ["a/b", "..", "C:evil", "tab\there", "nul\x00byte", "x" * (MAX_NAME_BYTES + 1), "../../../escaped_by_id",
           "/tmp/abs_evil"]
"""One per record of the 8-vase synthetic set (6 train, then 2 val: the escapes, which evaluation reads)."""
ALSO = ["back\\slash", ".hidden", ".", "", "line\nbreak"]


def _files(top: Path) -> set[str]:
    return {str(p.relative_to(top)) for p in top.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.fixture
def hostile(synthetic_root: Path, tmp_path: Path) -> Path:
    """A user's vase-layout dataset (no views) under ``tmp_path/deep/er/dataset`` whose records carry the hostile
    ids, each keeping a real GLB (its ``model`` field) and its six dimensions."""
    root = _user_dataset(synthetic_root, tmp_path / "deep" / "er" / "dataset", views=False)
    ids = iter(HOSTILE)
    for split in ("train", "val"):
        ann = root / "annotations" / f"{split}.json"
        recs = json.loads(ann.read_text())
        for r in recs:
            r["model"], r["id"] = f"models/{r['id']}.glb", next(ids)
        ann.write_text(json.dumps(recs))
    return root


def test_names_are_checked_and_mapped_never_joined(tmp_path: Path) -> None:
    for bad in HOSTILE + ALSO:
        assert name_problem(bad) is not None, bad
        name = safe_name(bad)
        assert name_problem(name) is None and safe_name(name) == name, (bad, name)
        assert inside(tmp_path, "images", "front", f"{name}.png").parent == tmp_path / "images" / "front"
    assert len({safe_name(b) for b in HOSTILE + ALSO}) == len(HOSTILE + ALSO)  # distinct ids keep distinct files
    for good in ["3f2a9c_7", "v0003", "vase 12", "Ἀμφορεύς"]:
        assert safe_name(good) == good
    with pytest.raises(DataError, match="refusing to write outside"):
        inside(tmp_path, "images", "../../x.png")


def test_the_render_command_writes_only_inside_its_cache_folder(hostile: Path, tmp_path: Path) -> None:
    before, everything = tree_hash(hostile), _files(tmp_path)
    cache = tmp_path / "cache"
    for extra in ([], ["--write-to-root"]):
        p = run_python(["-m", "vase.data.render", "--root", str(hostile), "--cache-dir", str(cache), "--resolution",
                        "32", "--views", "front,back", "--sheets", *extra], cwd=ROOT, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        out = Path(json.loads(p.stdout)["out"])
        new = _files(tmp_path) - everything
        assert new and all(Path(tmp_path / f).is_relative_to(out) for f in new), sorted(new)[:5]
        assert (out / "images" / "front" / f"{safe_name('../../../escaped_by_id')}.png").is_file()
        everything |= new
    # the first run left the dataset alone; the second added only missing views under its images/ folder
    after = tree_hash(hostile)
    assert {k: v for k, v in after.items() if k in before} == before
    assert all(k.startswith("dataset/images/") for k in set(after) - set(before))
    assert not list(tmp_path.rglob("escaped_by_id.png"))


def test_trainings_render_step_and_dataset_read_the_same_safe_names(hostile: Path, tmp_path: Path) -> None:
    from vase.data.datamodule import VaseDataModule

    before, everything = tree_hash(hostile), _files(tmp_path)
    cache = tmp_path / "cache"
    dm = VaseDataModule(str(hostile), render={"enabled": True, "resolution": 32, "fov_deg": 35.0,
                                              "cache_dir": str(cache)})
    dm.prepare_data()
    new = _files(tmp_path) - everything
    assert new and all(f.startswith("cache/renders/") for f in new), sorted(new)[:5]
    assert tree_hash(hostile) == before
    dm.setup()
    ids = [r.id for r in dm.train_set.records]
    assert ids == HOSTILE[: len(ids)]  # the records keep their ids; only file names are mapped
    assert len(dm.train_set[0].images) == 6


@pytest.mark.parametrize("target", ["swift", "paper_eval", "release"])
def test_every_export_writes_only_into_its_output(hostile: Path, tmp_path: Path, target: str) -> None:
    cache = tmp_path / "cache"
    subprocess.run([sys.executable, "-m", "vase.data.render", "--root", str(hostile), "--out", str(hostile / ".." / "v"),
                    "--resolution", "32", "--cache-dir", str(cache)], cwd=ROOT, capture_output=True, timeout=300)
    # views shipped with the dataset this time (so the exports read them from the source itself)
    views = hostile.parent / "v" / "images"
    os.rename(views, hostile / "images")
    before, everything = tree_hash(hostile), _files(tmp_path)
    out = tmp_path / "out"
    p = run_python(["-m", "vase.data.export", str(hostile), str(out), "--to", target], cwd=ROOT, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    new = _files(tmp_path) - everything
    assert new and all(f.startswith("out/") for f in new), sorted(f for f in new if not f.startswith("out/"))[:5]
    assert tree_hash(hostile) == before
    from vase.data.layouts import read_records

    back = [r for rs in read_records(out).values() for r in rs]
    splits = ("val",) if target == "paper_eval" else ("train", "val")  # the paper's folder holds the val split
    assert len(back) == sum(len(json.loads((hostile / "annotations" / f"{s}.json").read_text())) for s in splits)
    if target == "swift":  # the id column keeps the original ids
        assert set(HOSTILE) <= {r.id for r in back}


def test_an_export_that_fails_leaves_no_partial_output(hostile: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    broken = sorted((hostile / "models").glob("*.glb"))[-1]
    broken.write_bytes(b"not a GLB")  # its views are missing and cannot be rendered: the export must fail
    p = run_python(["-m", "vase.data.export", str(hostile), str(out), "--to", "swift", "--cache-dir",
                    str(tmp_path / "cache")], cwd=ROOT, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr and broken.name in p.stderr, p.stderr[-2000:]
    assert not out.exists() and not [q for q in tmp_path.iterdir() if q.name.startswith(".out")]


def test_a_model_field_outside_the_dataset_is_never_read_or_copied(hostile: Path, tmp_path: Path) -> None:
    from vase.data.check import check_dataset
    from vase.data.dataset import models_to_render
    from vase.render.renderer import render_dataset

    secret = tmp_path / "deep" / "secret.glb"
    secret.write_bytes(next((hostile / "models").glob("*.glb")).read_bytes())
    ann = hostile / "annotations" / "val.json"
    recs = json.loads(ann.read_text())
    recs[-1]["model"] = "../../secret.glb"
    ann.write_text(json.dumps(recs))
    pairs = models_to_render(hostile, ("front",), missing_splits_ok=True)
    with pytest.raises(DataError, match=r"model field '\.\./\.\./secret\.glb' has a '\.\.' part"):
        render_dataset(hostile, pairs, views=("front",), out_root=tmp_path / "r", progress=False)
    report = check_dataset(hostile, models=False, progress=False)
    kinds = {(p["kind"], p["id"]) for p in report["problems"]}
    assert ("path_like_id", recs[-1]["id"]) in kinds
    assert {("path_like_id", i) for i in HOSTILE} <= kinds


def test_the_check_names_every_path_like_id(hostile: Path, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    before = tree_hash(hostile)
    p = run_python(["-m", "vase.data.check", str(hostile), "--no-models", "--report", str(report_path), "--cache-dir",
                    str(tmp_path / "cache")], cwd=ROOT, timeout=300)
    assert p.returncode == 1, p.stderr[-2000:]
    report = json.loads(report_path.read_text())
    flagged = {x["id"] for x in report["problems"] if x["kind"] == "path_like_id"}
    assert set(HOSTILE) <= flagged
    assert "escaped_by_id" in p.stdout and "path separator" in p.stdout
    assert tree_hash(hostile) == before


def test_reconstruct_names_outputs_safely(synthetic_root: Path, tmp_path: Path) -> None:
    import shutil

    from vase.reconstruct.base import reconstruct_folder

    photos = tmp_path / "photos"
    photos.mkdir()
    front = next((synthetic_root / "images" / "front").glob("*.png"))
    names = ["new\nline", "x" * 250]
    for n in names:
        shutil.copy(front, photos / f"{n}.png")

    def gen(images: list[Path], out: Path) -> None:
        shutil.copy(next((synthetic_root / "models").glob("*.glb")), out)

    out = tmp_path / "out"
    everything = _files(tmp_path)
    assert reconstruct_folder(gen, photos, out, progress=False)["made"] == 2
    new = _files(tmp_path) - everything
    assert all(f.startswith("out/") for f in new)
    assert {f"{safe_name(n)}.glb" for n in names} <= {Path(f).name for f in new}
    assert reconstruct_folder(gen, photos, out, progress=False)["skipped_existing"] == 2


def test_a_retrieval_index_refused_leaves_no_lock_beside_the_users_folder(synthetic_root: Path,
                                                                          tmp_path: Path) -> None:
    from tests.test_retrieval import _dm

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    dm = _dm(synthetic_root, tmp_path)
    dm.retrieval["index_dir"] = str(mine)
    listing, before = sorted(p.name for p in tmp_path.iterdir()), tree_hash(mine)
    with pytest.raises(ConfigError, match="retrieval.index_dir=.*mine.*vase did not create"):
        dm.setup()
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no mine.lock beside it
    assert tree_hash(mine) == before


@pytest.mark.parametrize("task", ["generate", "vqa"])
def test_evaluation_outputs_stay_in_the_run_folder(hostile: Path, tmp_path: Path, session_dirs: dict,
                                                   task: str) -> None:
    from tests.conftest import compose_cfg
    from vase.config import validate
    from vase.pipeline.evaluate import run_evaluation

    before, everything = tree_hash(hostile), _files(tmp_path)
    cfg = compose_cfg("evaluate", [f"action={task}", "logger=none", "data=vasevqa3d", f"data.root={hostile}",
                                   "data.num_workers=0", "render.resolution=32", "metrics=hf_tiny",
                                   "generation.max_new_tokens=4",
                                   *(["vqa.max_new_tokens=4", "vqa.protocol=open"] if task == "vqa" else [])],
                      tmp_path / "run", session_dirs)
    validate(cfg)
    run_evaluation(cfg)
    new = _files(tmp_path) - everything
    assert new and all(f.startswith("run/") for f in new), sorted(f for f in new if not f.startswith("run/"))[:5]
    assert tree_hash(hostile) == before
    rows = [json.loads(x) for f in (tmp_path / "run").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert {"../../../escaped_by_id", "/tmp/abs_evil"} <= {r["id"].split("#")[0] for r in rows}  # under their ids
