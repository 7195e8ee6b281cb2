"""A user's files are only read: no output flag, index, report or export replaces or writes into a file or
folder vase did not make; a refusal names the path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg, run_python
from tests.test_user_paths import _user_dataset, tree_hash
from vase.errors import ConfigError


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
    p = run_python(["-m", "vase.data.export", str(src), str(src / "sub"), "--to", "swift"], cwd=ROOT, timeout=300)
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
    common = ["action=score", "logger=none", "metrics=hf_tiny", "metrics.clip.build_tiny=false",
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


def test_the_dataset_check_never_writes_its_report_over_a_file_it_did_not_write(tmp_path: Path,
                                                                                synthetic_root: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("my notes")
    cmd = [sys.executable, "-m", "vase.data.check", str(synthetic_root), "--no-models", "--report"]
    p = subprocess.run([*cmd, str(notes)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and notes.read_text() == "my notes"
    assert p.stderr.strip() == (f"error: --report {notes}: the file exists and vase.data.check did not write it; vase "
                                f"never replaces such a file: choose another path, or add --force to replace it")
    ours = tmp_path / "check.json"
    for _ in range(2):  # its own report, written and then rewritten
        p = subprocess.run([*cmd, str(ours)], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and json.loads(ours.read_text())["written_by"] == "vase.data.check"
    p = subprocess.run([*cmd, str(notes), "--force"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and json.loads(notes.read_text())["ok"] is True


@pytest.mark.parametrize("tool", ["render", "sanity", "config_reference"])
def test_every_out_flag_refuses_a_user_s_folder_or_file(tmp_path: Path, synthetic_root: Path, tool: str) -> None:
    """python -m vase.data.render --out, python -m vase.sanity --out and the configuration reference's --out: a folder (or
    page) holding what vase did not write is refused in one line, before anything runs, and left as it was."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("my notes")
    target = mine / "page.md" if tool == "config_reference" else mine
    if tool == "config_reference":
        target.write_text("# my page\n")
    args = {"render": ["-m", "vase.data.render", "--root", str(synthetic_root), "--out", str(mine)],
            "sanity": ["-m", "vase.sanity", "--out", str(mine)],
            "config_reference": ["-m", "vase.docsgen.config_reference", "--out", str(target)]}[tool]
    p = run_python([*args], cwd=ROOT, timeout=300)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    assert p.stderr.startswith(f"error: --out {target}: ")
    assert sorted(x.name for x in mine.iterdir()) == sorted(["notes.md"] + (["page.md"] if tool == "config_reference" else []))
    assert (mine / "notes.md").read_text() == "my notes"


def test_render_out_takes_a_new_folder_and_its_own_again(tmp_path: Path, synthetic_root: Path) -> None:
    import shutil

    bare = tmp_path / "bare"  # the synthetic set without its views: a dataset that ships none
    shutil.copytree(synthetic_root, bare, ignore=shutil.ignore_patterns("images", "renders"))
    out = tmp_path / "renders"
    cmd = [sys.executable, "-m", "vase.data.render", "--root", str(bare), "--out", str(out), "--resolution", "32",
           "--views", "front"]
    for expect in ("rendered", "cached"):  # a new folder, then the same folder it rendered into (its cache file)
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        assert json.loads(p.stdout)[expect] == 8


def test_the_dataset_check_writes_nothing_unasked_where_it_is_run(tmp_path: Path, synthetic_root: Path) -> None:
    """`python -m vase.data.check <folder>` wrote check-<name>-<hash>.json into the current directory; now the JSON
    goes only where --report says, and the output says how to ask for it."""
    here = tmp_path / "where-i-am"
    here.mkdir()
    p = run_python(["-m", "vase.data.check", str(synthetic_root), "--no-models"], cwd=here,
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "JSON report: none written (--report FILE writes every problem there)"
    assert list(here.iterdir()) == []
