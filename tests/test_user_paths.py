"""A user's files are read-only: checkpoints, encoders, datasets (annotations, views, GLBs), adapters and caption
files that a run is pointed at are only ever read. Each case here deleted or overwrote user data before (issue 7).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg, run_python
from vase.config import validate
from vase.errors import ConfigError, DataError


def tree_hash(path: Path) -> dict[str, str]:
    """Every file under ``path`` (or the file itself) with the sha256 of its bytes."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink())
    return {str(p.relative_to(path.parent)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _sentinel_dir(path: Path, n: int = 3) -> Path:
    path.mkdir(parents=True)
    for i in range(n):
        (path / f"weights-{i}.safetensors").write_bytes(bytes([i]) * 1000)
    (path / "config.json").write_text('{"model_type": "mine"}')
    return path


# ------------------------------------------------------------------ building never replaces what is not ours


def test_atomic_directory_never_replaces_a_directory_vase_did_not_build(tmp_path: Path) -> None:
    from vase.io import atomic_directory

    mine = _sentinel_dir(tmp_path / "ckpt")
    before = tree_hash(mine)
    for replace in (False, True):
        with pytest.raises(FileExistsError, match="ckpt"):
            with atomic_directory(mine, replace=replace) as tmp:
                (tmp / "x").write_text("random")
    assert tree_hash(mine) == before
    # a directory vase built may be replaced, by an explicit request
    out = tmp_path / "built"
    with atomic_directory(out) as tmp:
        (tmp / "a").write_text("1")
    with atomic_directory(out, replace=True) as tmp:
        (tmp / "a").write_text("2")
    assert (out / "a").read_text() == "2"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_tiny_builders_refuse_a_users_directory(tmp_path: Path) -> None:
    from vase.models.tiny import build_tiny
    from vase.models.tiny_clip import build_tiny_clip, build_tiny_open_clip

    for build in (build_tiny, build_tiny_clip, build_tiny_open_clip):
        d = _sentinel_dir(tmp_path / build.__name__)
        before = tree_hash(d)
        with pytest.raises(FileExistsError, match=build.__name__):
            build(d)
        assert tree_hash(d) == before


def test_builders_of_one_cache_entry_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parallel sweep's jobs (submitit's local or SLURM executor) build the same tiny model in the shared cache at
    once; the second's final rename failed ("Directory not empty", seen in make test-slow). Builders of one output
    take turns, so the second finds the first's result; builders of different outputs do not wait for each other."""
    import threading

    from vase.data.synthetic import generate
    from vase.io import one_builder_at_a_time
    from vase.models.tiny import build_tiny
    from vase.models.tiny_clip import build_tiny_clip, build_tiny_open_clip, build_tiny_sentence_encoder

    events: list[tuple[str, str]] = []

    @one_builder_at_a_time
    def build(out: Path, name: str) -> None:
        events.append(("in", name))
        time.sleep(0.3)
        events.append(("out", name))

    same = [threading.Thread(target=build, args=(tmp_path / "a", n)) for n in ("x", "y", "z")]
    for t in same:
        t.start()
    for t in same:
        t.join()
    assert [e for e, _ in events] == ["in", "out"] * 3  # never two inside at once
    events.clear()
    other = [threading.Thread(target=build, args=(tmp_path / n, n)) for n in ("b", "c")]
    for t in other:
        t.start()
    for t in other:
        t.join()
    assert [e for e, _ in events][:2] == ["in", "in"]  # different outputs build side by side
    # every cache builder a sweep's jobs share is one of them
    for f in (build_tiny, build_tiny_clip, build_tiny_open_clip, build_tiny_sentence_encoder, generate):
        assert getattr(f, "__wrapped__", None) is not None, f.__name__
    assert not list(tmp_path.glob("*.lock"))  # the locks live in the temp folder, never beside the output
    # a process the lock cannot see (another machine) moves the same build into place first: its build is kept
    from vase.io import BUILT_MARKER, atomic_directory

    out = tmp_path / "shared" / "model"
    rename = Path.rename

    def theirs_first(self: Path, target: Path) -> Path:  # theirs lands between our check and our rename
        if Path(target) == out and not out.exists():
            out.mkdir()
            (out / "weights").write_text("theirs")
            (out / BUILT_MARKER).write_text("built by vase")
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", theirs_first)
    with atomic_directory(out, replace=True) as tmp:
        (tmp / "weights").write_text("mine")
    assert (out / "weights").read_text() == "theirs" and [p.name for p in out.parent.iterdir()] == ["model"]


# ------------------------------------------------------------------ config errors before anything is written


def _error(config: str, overrides: list[str], tmp_path: Path, session_dirs: dict) -> str:
    cfg = compose_cfg(config, overrides, tmp_path, session_dirs)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    return str(e.value)


def test_a_checkpoint_path_with_the_tiny_model_is_a_config_error(tmp_path: Path, session_dirs: dict) -> None:
    ckpt = _sentinel_dir(tmp_path / "ckpt" / "merged-sft")
    for config in ("train", "evaluate"):
        msg = _error(config, [f"model.name_or_path={ckpt}"], tmp_path, session_dirs)
        assert msg.startswith(f"model.name_or_path='{ckpt}'") and "model.build_tiny=false" in msg
    # with build_tiny off, the same path is a checkpoint to load: valid
    validate(compose_cfg("train", [f"model.name_or_path={ckpt}", "model.build_tiny=false"], tmp_path, session_dirs))
    # the default tiny model lives in the cache, keyed by its spec
    a = compose_cfg("train", [], tmp_path, session_dirs).model.name_or_path
    b = compose_cfg("train", ["model.tiny={hidden_size:128}"], tmp_path, session_dirs).model.name_or_path
    assert a != b and all(str(x).startswith(str(session_dirs["cache"])) for x in (a, b))


def test_an_encoder_path_with_a_tiny_clip_is_a_config_error(tmp_path: Path, session_dirs: dict) -> None:
    clip = _sentinel_dir(tmp_path / "models" / "clip")
    msg = _error("evaluate", ["action=score", "metrics.clip.backend=hf", f"metrics.clip.model={clip}"], tmp_path,
                 session_dirs)
    assert msg.startswith("metrics.clip.model=") and "metrics.clip.build_tiny=false" in msg
    msg = _error("evaluate", ["action=score", f"metrics.clip.pretrained={clip}/model.pt"], tmp_path, session_dirs)
    assert msg.startswith("metrics.clip.pretrained=") and "metrics.clip.build_tiny=false" in msg


def test_synthetic_settings_never_generate_into_a_users_dataset(tmp_path: Path, session_dirs: dict,
                                                                synthetic_root: Path) -> None:
    real = tmp_path / "real"
    shutil.copytree(synthetic_root / "annotations", real / "annotations")
    msg = _error("train", ["experiment=demo", "data=vasevqa3d", f"data.root={real}"], tmp_path, session_dirs)
    assert msg.startswith("data.root=") and "synthetic" in msg
    # debug=fast limits any dataset instead of configuring synthetic data (it raised KeyError: 'seed' before)
    cfg = compose_cfg("train", ["data=vasevqa3d", f"data.root={real}", "debug=fast"], tmp_path, session_dirs)
    validate(cfg)
    assert cfg.data.synthetic is None and cfg.data.limit_train == 8
    # and the generator itself refuses a folder it did not write
    from vase.data.synthetic import generate

    before = tree_hash(real)
    with pytest.raises(DataError, match="synthetic.json"):
        generate(real, num=4, progress=False)
    assert tree_hash(real) == before


def test_entry_points_exit_with_one_line_and_touch_nothing(tmp_path: Path, session_dirs: dict) -> None:
    ckpt = _sentinel_dir(tmp_path / "ckpt")
    before = tree_hash(ckpt)
    for script in ("train.py", "evaluate.py"):
        p = run_python([script, f"model.name_or_path={ckpt}", "logger=none", f"paths.cache_dir={session_dirs['cache']}",
                        f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, timeout=120)
        assert p.returncode == 2, p.stderr[-2000:]
        assert p.stderr.strip().splitlines() == [p.stderr.strip()]  # one line
        assert p.stderr.startswith("config error: model.name_or_path=")
    assert tree_hash(ckpt) == before


# ------------------------------------------------------------------ views a dataset ships are used as they are


def _user_dataset(synthetic_root: Path, dest: Path, views: bool) -> Path:
    """A copy of the synthetic vases laid out as a user's dataset: no manifest, no render cache of ours."""
    shutil.copytree(synthetic_root, dest, ignore=shutil.ignore_patterns("synthetic.json", "render_cache.json", ".vase-built",
                                                                        *(() if views else ("images",))))
    return dest


def _datamodule(root: Path, cache: Path, **render):
    from vase.data.datamodule import VaseDataModule

    return VaseDataModule(str(root), render={"enabled": True, "resolution": 64, "fov_deg": 35.0,
                                             "cache_dir": str(cache), **render})


def test_shipped_views_are_read_not_rerendered(synthetic_root: Path, tmp_path: Path) -> None:
    root = _user_dataset(synthetic_root, tmp_path / "user", views=True)
    # make the shipped views recognisably the dataset's own
    from PIL import Image

    front = next((root / "images" / "front").glob("*.png"))
    Image.new("RGB", (64, 64), (255, 0, 0)).save(front)
    before = tree_hash(root)
    dm = _datamodule(root, tmp_path / "cache")
    dm.prepare_data()
    dm.setup()
    assert tree_hash(root) == before
    assert not (tmp_path / "cache").exists()  # nothing needed rendering
    ds, i = next((d, k) for d in (dm.train_set, dm.val_set) for k, r in enumerate(d.records) if r.id == front.stem)
    assert ds[i].images[0].getpixel((0, 0)) == (255, 0, 0)


def test_missing_views_render_to_the_cache_or_only_missing_files_to_the_root(synthetic_root: Path,
                                                                              tmp_path: Path) -> None:
    from vase.views import VIEWS, at_settings, render_cache_root, view_path

    root = _user_dataset(synthetic_root, tmp_path / "user", views=False)
    before = tree_hash(root)
    dm = _datamodule(root, tmp_path / "cache")
    dm.prepare_data()
    dm.setup()
    assert tree_hash(root) == before
    rendered = at_settings(render_cache_root(tmp_path / "cache", root), 64)  # the run's settings name the folder
    assert rendered == render_cache_root(tmp_path / "cache", root) / "renders" / "r64-fov35"
    ids = [r.id for r in dm.train_set.records + dm.val_set.records]
    assert all(view_path(rendered, v, i).is_file() for v in VIEWS for i in ids)
    assert dm.train_set[0].images[0].size == (64, 64)

    # write_to_root: only the missing files are written; a view the dataset has is never touched
    (root / "images" / "front").mkdir(parents=True)
    own = root / "images" / "front" / f"{ids[0]}.png"
    own.write_bytes(b"not even a png, but the user's")
    dm = _datamodule(root, tmp_path / "cache2", write_to_root=True)
    dm.prepare_data()
    assert own.read_bytes() == b"not even a png, but the user's"
    assert view_path(root, "back", ids[0]).is_file() and view_path(root, "front", ids[1]).is_file()
    after = tree_hash(root)
    assert all(after[name] == digest for name, digest in before.items())  # what was there is byte-identical
    assert len(after) > len(before)


def test_a_bad_model_is_skipped_with_its_reason_or_raised(synthetic_root: Path, tmp_path: Path, caplog) -> None:
    root = _user_dataset(synthetic_root, tmp_path / "user", views=False)
    recs = json.loads((root / "annotations" / "train.json").read_text())
    bad = root / recs[0]["model"]
    bad.write_bytes(b"glTF" + b"\0" * 40)
    with pytest.raises(DataError, match=bad.name):
        _datamodule(root, tmp_path / "cache").prepare_data()
    dm = _datamodule(root, tmp_path / "cache", on_error="skip")
    with caplog.at_level("WARNING", logger="vase"):
        dm.prepare_data()
        dm.setup()
    assert recs[0]["id"] in dm.left_out() and "not a readable GLB" in dm.left_out()[recs[0]["id"]]
    assert recs[0]["id"] not in {r.id for r in dm.train_set.records}
    assert len(dm.train_set) == len(recs) - 1
    assert "left out 1 of" in caplog.text and "without 1 vases" in caplog.text

    # a job that finds the views rendered writes nothing into the shared renders (a sweep's jobs prepare in turn)
    failures = dm.render_root() / "images" / "render_failures.json"
    rendered = {q: q.stat().st_mtime_ns for q in dm.render_root().rglob("*")}
    _datamodule(root, tmp_path / "cache", on_error="skip").prepare_data()
    assert {q: q.stat().st_mtime_ns for q in dm.render_root().rglob("*")} == rendered
    # the model mended: its vase is rendered and is no longer left out
    (root / recs[0]["model"]).write_bytes((synthetic_root / recs[0]["model"]).read_bytes())
    dm = _datamodule(root, tmp_path / "cache", on_error="skip")
    dm.prepare_data()
    assert json.loads(failures.read_text()) == [] and dm.left_out() == {}


def test_python_m_vase_render_writes_to_the_cache(synthetic_root: Path, tmp_path: Path) -> None:
    root = _user_dataset(synthetic_root, tmp_path / "user", views=False)
    before = tree_hash(root)
    out = tmp_path / "renders"
    p = run_python(["-m", "vase.data.render", "--root", str(root), "--out", str(out), "--resolution", "32"], cwd=ROOT,
                   timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    n = len(json.loads((root / "annotations" / "train.json").read_text())) + len(
        json.loads((root / "annotations" / "val.json").read_text()))
    assert json.loads(p.stdout)["rendered"] == n
    assert len(list((out / "images" / "front").glob("*.png"))) == n
    assert tree_hash(root) == before


def test_make_clean_keeps_data_and_runs() -> None:
    p = subprocess.run(["make", "--no-print-directory", "-n", "clean"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    cmd = " ".join(line for line in p.stdout.splitlines() if line.startswith("rm"))
    assert ".cache" in cmd
    for kept in (" data", " logs", " multirun", " outputs"):
        assert kept not in cmd
    p = subprocess.run(["make", "--no-print-directory", "-n", "clean-runs"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "logs" in p.stdout and " data" not in p.stdout


# ------------------------------------------------------------------ every entry point, every user path


@pytest.fixture
def user_world(tmp_path: Path, session_dirs: dict, synthetic_root: Path, tiny_model_dir: Path,
               tiny_clip_dir: Path) -> dict[str, Path]:
    """What a user points vase at, each a copy it owns: checkpoint, CLIP, dataset with views, adapter, files."""
    from vase.pipeline import run_training

    user = tmp_path / "user"
    world = {"ckpt": user / "ckpt", "clip": user / "clip", "data": user / "data"}
    shutil.copytree(tiny_model_dir, world["ckpt"], ignore=shutil.ignore_patterns(".vase-built"))
    shutil.copytree(tiny_clip_dir, world["clip"], ignore=shutil.ignore_patterns(".vase-built"))
    _user_dataset(synthetic_root, world["data"], views=True)
    cfg = compose_cfg("train", ["logger=none", "data.synthetic.num_vases=8", "render.resolution=64",
                                "trainer.max_steps=1", "stage.batch_size=2", "stage.grad_accum=1",
                                "val.after=false", "report=false"], tmp_path / "setup", session_dirs)
    run_training(cfg)
    world["adapter"] = user / "adapter"
    shutil.copytree(Path(cfg.paths.output_dir) / "adapter", world["adapter"], ignore=shutil.ignore_patterns(".vase-built"))
    recs = json.loads((world["data"] / "annotations" / "val.json").read_text())
    world["gt"] = user / "gt.json"
    world["gt"].write_text(json.dumps([{"images": [f"{r['id']}_ac001001.jpg"], "caption": r["caption"]} for r in recs]))
    world["gen"] = user / "gen.json"
    world["gen"].write_text(json.dumps([{"images": [f"{r['id']}_ac001001.jpg"], "caption": "an amphora"}
                                        for r in recs]))
    world["results"] = user / "runs" / "results.json"
    world["results"].parent.mkdir(parents=True)
    world["results"].write_text(json.dumps({"mine": {"clip_score": 0.5, "fid_score": 0.4, "r_at_1": 0.1,
                                                     "r_at_5": 0.2, "r_at_10": 0.3, "lexical_similarity": 0.2,
                                                     "overall_score": 0.3, "n_pairs": 2}}))
    return world


def test_every_entry_point_leaves_every_user_path_untouched(user_world: dict, tmp_path: Path,
                                                            session_dirs: dict) -> None:
    from vase.pipeline import run_training
    from vase.pipeline.evaluate import run_evaluation

    w = user_world
    before = tree_hash(w["ckpt"].parent)
    model = ["model=qwen2_5_vl_3b", f"model.name_or_path={w['ckpt']}", "model.dtype=float32",
             "model.processor.max_pixels=12544"]
    data = ["data=vasevqa3d", f"data.root={w['data']}", "data.num_workers=0", "render.resolution=64"]
    metrics = ["metrics=hf_tiny", "metrics.clip.build_tiny=false", f"metrics.clip.model={w['clip']}"]
    runs = {
        "train": ("train", ["logger=none", *model, *data, *metrics, f"init_adapter={w['adapter']}",
                            "trainer.max_steps=1", "stage.batch_size=2", "stage.grad_accum=1", "stage.epochs=1",
                            "val.after=true", "val.max_new_tokens=4", "data.limit_val=2", "report=true"]),
        "generate": ("evaluate", ["logger=none", *model, *data, *metrics, f"adapter={w['adapter']}",
                                  "generation.max_new_tokens=4", "data.limit_val=2"]),
        "vqa": ("evaluate", ["action=vqa", "logger=none", *model, *data, f"adapter={w['adapter']}",
                             "vqa.max_new_tokens=4", "data.limit_val=1"]),
        "score": ("evaluate", ["action=score", "logger=none", *metrics, f"generated={w['gen']}",
                               f"ground_truth={w['gt']}"]),
        "leaderboard": ("evaluate", ["action=leaderboard", "logger=none",
                                     f"runs=[{w['results']},{w['results'].parent}]"]),
    }
    for name, (config, overrides) in runs.items():
        cfg = compose_cfg(config, overrides, tmp_path / name, session_dirs)
        validate(cfg)
        out = (run_training if config == "train" else run_evaluation)(cfg)
        assert out, name
        assert tree_hash(w["ckpt"].parent) == before, f"{name} changed a user's file"
    assert (tmp_path / "train" / "results.json").is_file() and (tmp_path / "score" / "results.json").is_file()


@pytest.mark.parametrize("name", ["", "  "])
def test_vase_init_with_an_empty_name_writes_nothing(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``vase init ''`` wrote its 14 files into the current folder (``wrote 14 files into ; next: cd  && ...``)."""
    from vase.cli.init import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["vase init", name])
    assert main() == 2
    assert capsys.readouterr().err == ("error: give the new project's folder (vase init mylab): an empty name names "
                                       "none\n")
    assert list(tmp_path.iterdir()) == []
