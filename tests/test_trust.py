"""Trust, round 2 (issue 15): no writer replaces what it did not write, bad input never hides other problems, and
every refusal is one line naming the key or file. Each test failed on the code before the issue."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg
from tests.test_user_paths import _user_dataset, tree_hash
from vase.config import validate
from vase.errors import ConfigError, DataError


def _run(args: list[str], tmp_path: Path, session_dirs: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline"}
    return subprocess.run([sys.executable, *args, f"paths.cache_dir={session_dirs['cache']}",
                           f"paths.log_dir={tmp_path / 'logs'}"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def _one_line(p: subprocess.CompletedProcess) -> str:
    lines = [x for x in p.stderr.splitlines() if x.strip() and "warn" not in x.lower()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    return lines[0]


# ------------------------------------------------------------------ writers never write into a user's folder


def test_reconstruct_refuses_a_users_folder_and_takes_nothing_there_as_done(synthetic_root: Path, tmp_path: Path) -> None:
    from vase.reconstruct.base import reconstruct_folder

    photos = tmp_path / "photos"
    photos.mkdir()
    shutil.copy(next((synthetic_root / "images" / "front").glob("*.png")), photos / "v0.png")
    calls = []

    def gen(images: list[Path], out: Path) -> None:
        calls.append(out)
        shutil.copy(next((synthetic_root / "models").glob("*.glb")), out)

    user = _user_dataset(synthetic_root, tmp_path / "dataset", views=False)
    (user / "v0.glb").write_bytes(b"the user's own mesh")          # same stem: must not count as "done"
    (user / "failures.json").write_text('{"mine": "keep"}')
    before = tree_hash(user)
    with pytest.raises(ConfigError, match=r"output=.*dataset.*non-empty folder vase did not create"):
        reconstruct_folder(gen, photos, user, progress=False)
    assert tree_hash(user) == before and calls == []
    # a new folder is vase's: a rerun resumes in it
    out = tmp_path / "out"
    assert reconstruct_folder(gen, photos, out, progress=False)["made"] == 1
    assert reconstruct_folder(gen, photos, out, progress=False)["skipped_existing"] == 1 and len(calls) == 1


def test_export_refuses_an_output_inside_the_source(synthetic_root: Path, tmp_path: Path) -> None:
    src = _user_dataset(synthetic_root, tmp_path / "src", views=True)
    before = tree_hash(src)
    p = subprocess.run([sys.executable, "-m", "vase.data.export", str(src), str(src / "sub"), "--to", "swift"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "inside the source dataset" in p.stderr, p.stderr[-1500:]
    assert tree_hash(src) == before and not (src / "sub").exists()


def test_a_retrieval_index_never_goes_into_a_users_folder(tmp_path: Path) -> None:
    from vase.retrieval.index import VaseIndex

    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine")
    before = tree_hash(mine)
    with pytest.raises(ConfigError, match="retrieval.index_dir=.*notes.*vase did not create"):
        VaseIndex(mine, encoder=None)
    assert tree_hash(mine) == before


def test_score_never_replaces_a_users_file_beside_its_output(tmp_path: Path, session_dirs: dict,
                                                               tiny_clip_dir: Path) -> None:
    from vase.pipeline.evaluate import run_evaluation

    gt, gen = tmp_path / "gt.json", tmp_path / "gen.json"
    caps = ["an amphora", "a black-figure hydria", "a kylix"]
    gt.write_text(json.dumps([{"images": [f"a_{i}_ac001001.jpg"], "caption": c} for i, c in enumerate(caps)]))
    gen.write_text(json.dumps([{"images": [f"a_{i}_ac001001.jpg"], "caption": "red " + c} for i, c in enumerate(caps)]))
    common = ["task=score", "logger=none", "metrics=hf_tiny", "metrics.clip.build_tiny=false",
              f"metrics.clip.model={tiny_clip_dir}", f"generated={gen}", f"ground_truth={gt}"]
    notes = tmp_path / "X.md"
    notes.write_text("my notes")
    for existing in (notes, tmp_path / "Y.json"):
        existing.write_text("mine")
        cfg = compose_cfg("evaluate", [*common, f"output={existing.with_suffix('.json')}"], tmp_path / "run",
                          session_dirs)
        with pytest.raises(ConfigError, match=f"{existing.name} already exists and this run did not write it"):
            run_evaluation(cfg)
        assert existing.read_text() == "mine"
    # inside this run's own (new) folder, or a fresh name, it writes as before
    cfg = compose_cfg("evaluate", [*common, f"output={tmp_path / 'Z.json'}"], tmp_path / "run", session_dirs)
    run_evaluation(cfg)
    assert (tmp_path / "Z.md").is_file() and notes.read_text() == "mine"


def test_a_run_directory_given_on_the_command_line_must_not_be_a_users_folder(tmp_path: Path,
                                                                                session_dirs: dict) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine")
    p = _run(["train.py", "logger=none", f"hydra.run.dir={mine}"], tmp_path, session_dirs)
    assert "hydra.run.dir=" in _one_line(p) and "vase did not write" in p.stderr
    assert sorted(x.name for x in mine.iterdir()) == ["thesis.tex"]


def test_a_live_run_directory_cannot_be_claimed_twice(tmp_path: Path) -> None:
    from vase import runs

    d = tmp_path / "run"
    runs.claim(d)
    code = ("import sys; from vase import runs; from vase.errors import ConfigError\n"
            "try: runs.claim(sys.argv[1])\nexcept ConfigError as e: print(e); sys.exit(3)\n")
    p = subprocess.run([sys.executable, "-c", code, str(d)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3 and "in use by another running process" in p.stdout
    runs.release(d)
    p = subprocess.run([sys.executable, "-c", code, str(d)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout  # its holder gone (as a killed process is), an unfinished run may be taken up


# ------------------------------------------------------------------ checker and filter: bad input hides nothing


def test_a_malformed_annotation_file_hides_no_other_problem(synthetic_root: Path, tmp_path: Path) -> None:
    from vase.data.check import check_dataset

    ds = _user_dataset(synthetic_root, tmp_path / "ds", views=True)
    train = json.loads((ds / "annotations" / "train.json").read_text())
    (ds / "annotations" / "val.json").write_text('[{"id": "x",')                      # malformed file
    a, b = train[0]["id"], train[1]["id"]
    (ds / "images" / "front" / f"{a}.png").unlink()                                     # missing view
    (ds / "models" / f"{b}.glb").write_bytes(b"")                                       # 0-byte GLB
    rep = check_dataset(ds, progress=False)
    found = sorted((p["kind"], p["id"]) for p in rep["problems"])
    assert found == sorted([("unreadable_file", "val.json"), ("missing_view", a), ("corrupt_model", b)])
    assert rep["records"] == len(train) and rep["splits"] == {"train": len(train)}
    empty = next(p["message"] for p in rep["problems"] if p["kind"] == "corrupt_model")
    assert "empty file (0 bytes)" in empty and "IndexError" not in empty


def test_views_rendered_in_the_cache_count_as_present(synthetic_root: Path, tmp_path: Path) -> None:
    from vase.data.check import check_dataset

    ds = _user_dataset(synthetic_root, tmp_path / "ds", views=False)
    cache = tmp_path / "cache"
    assert {p["kind"] for p in check_dataset(ds, progress=False, models=False)["problems"]} == {"missing_view"}
    p = subprocess.run([sys.executable, "-m", "vase.render", "--root", str(ds), "--cache-dir", str(cache),
                        "--resolution", "64"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1500:]
    rep = check_dataset(ds, progress=False, models=False, cache_dir=cache)
    assert rep["ok"], rep["problems"][:3]
    assert any("rendered in the cache" in x for x in rep["info"])


def test_the_filter_rejects_a_symlink_loop_with_its_reason(tmp_path: Path) -> None:
    from vase.images import iter_files, open_photo

    d = tmp_path / "photos"
    d.mkdir()
    (d / "ok.txt").write_text("x")
    os.symlink("b.jpg", d / "a.jpg")
    os.symlink("a.jpg", d / "b.jpg")
    os.symlink("nowhere.jpg", d / "dangling.jpg")
    os.symlink(d, d / "loop")  # a folder that contains itself: never followed
    files = sorted(p.name for p in iter_files(d))
    assert files == ["a.jpg", "b.jpg", "dangling.jpg", "loop", "ok.txt"]
    assert open_photo(d / "a.jpg").reason.startswith("symbolic link loop")
    assert open_photo(d / "dangling.jpg").reason.startswith("dangling symbolic link")
    assert open_photo(d / "loop").reason.startswith("symbolic link loop")


# ------------------------------------------------------------------ errors name the key, early, in one line


@pytest.mark.parametrize(("override", "expected"), [
    ("+stage.modul.lr=1", "+stage.modul.lr: stage has no key 'modul', so nothing would read it; did you mean 'module'?"),
    ("+stage.module.optimizer.lrr=1", "stage.module.optimizer.lrr: AdamW takes no argument 'lrr', so nothing would "
                                      "read it; did you mean 'lr'?"),
    ("stage.module.optimizer.lr=-1", "stage.module.optimizer.lr=-1 must be a positive number"),
])
def test_a_typo_or_a_bad_value_fails_before_the_model_loads(override: str, expected: str, tmp_path: Path,
                                                              session_dirs: dict) -> None:
    p = _run(["train.py", "logger=none", override], tmp_path, session_dirs)
    assert _one_line(p) == f"config error: {expected}"
    assert "loading model" not in p.stdout + p.stderr


def test_every_target_in_every_shipped_config_takes_its_keys(tmp_path: Path, session_dirs: dict) -> None:
    """The signature check must not refuse what vase ships (every experiment, both entry points)."""
    for name in sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")):
        validate(compose_cfg("train", [f"experiment={name}"], tmp_path / name, session_dirs))
    validate(compose_cfg("evaluate", [], tmp_path / "evaluate", session_dirs))


@pytest.mark.parametrize("args", [
    ["task=score", "generated=/nonexistent/g.json", "ground_truth=/nonexistent/t.json"],
    ["task=vaseeval", "gt_dir=/nonexistent/gt", "methods={a: /nonexistent/a}"],
    ["task=foo"],
])
def test_evaluate_refusals_are_one_line(args: list[str], tmp_path: Path, session_dirs: dict) -> None:
    from vase.config import EVAL_TASKS

    line = _one_line(_run(["evaluate.py", "logger=none", *args], tmp_path, session_dirs))
    assert "/nonexistent/" in line or ("task='foo'" in line and all(f"'{t}'" in line for t in EVAL_TASKS))


def test_evaluate_help_lists_the_tasks() -> None:
    p = subprocess.run([sys.executable, "evaluate.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0
    from vase.config import EVAL_TASKS

    for task, what in EVAL_TASKS.items():
        assert f"  {task}" in p.stdout and what in p.stdout


def test_the_advice_for_a_users_clip_file_leads_somewhere(tmp_path: Path, session_dirs: dict) -> None:
    msg = _error_of(["metrics.clip.pretrained=/models/clip/open_clip_model.pt"], tmp_path, session_dirs)
    assert "metrics.clip.build_tiny=false" in msg and "metrics.clip.model=" in msg
    # following only half of it is caught before anything loads, with the other half
    msg = _error_of(["metrics.clip.pretrained=/models/clip/open_clip_model.pt", "metrics.clip.build_tiny=false"],
                    tmp_path, session_dirs)
    assert "metrics.clip.model='vase-tiny-clip' is vase's tiny test architecture" in msg and "ViT-B-32" in msg
    validate(compose_cfg("evaluate", ["metrics.clip.pretrained=/models/clip/open_clip_model.pt",
                                      "metrics.clip.build_tiny=false", "metrics.clip.model=ViT-B-32"],
                         tmp_path, session_dirs))


def _error_of(overrides: list[str], tmp_path: Path, session_dirs: dict) -> str:
    with pytest.raises((ConfigError, DataError)) as e:
        validate(compose_cfg("evaluate", overrides, tmp_path, session_dirs))
    return str(e.value)
