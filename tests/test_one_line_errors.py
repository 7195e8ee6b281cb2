"""A tool's output flag that names something already there is one line naming the flag and the path, exit 2, and the
user's thing untouched (tracebacks of 15 to 24 lines once)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg, run_python
from vase.config import validate
from vase.errors import ConfigError, DataError


def _digest(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("args", "line"), [
    (["-m", "vase.models.tiny", "--out", "{mine}"], "error: --out {mine}: exists and is not a tiny model that vase built"),
    (["-m", "vase.models.hub", "--out", "{mine}"], "error: --out {mine}: exists and is not a checkpoint that vase built"),
    (["-m", "vase.docsgen.config_reference", "--out", "{mine}"], "error: --out {mine}: a folder; give the file"),
    (["-m", "vase.filter", "filter.input={photos}", "filter.output={mine}/notes.txt"],
     "config error: filter.output={mine}/notes.txt: is a file; give a folder"),
])
def test_an_output_flag_naming_the_user_s_things_is_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    mine, photos = tmp_path / "mine", tmp_path / "photos"
    mine.mkdir()
    photos.mkdir()
    (mine / "notes.txt").write_text("the user's\n")
    before = _digest(mine)
    argv = [a.format(mine=mine, photos=photos) for a in args]
    p = run_python([*argv], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
                   timeout=300)
    err = [ln for ln in p.stderr.strip().splitlines() if not ln.startswith("<frozen runpy>")]
    assert p.returncode == 2 and err and err[-1].startswith(line.format(mine=mine)), p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert _digest(mine) == before


def test_render_refuses_a_root_that_is_no_dataset(tmp_path: Path) -> None:
    """A folder without annotations once exited 0 with "rendered": 0, as if all were well."""
    (tmp_path / "photos").mkdir()
    p = run_python(["-m", "vase.data.render", "--root", str(tmp_path / "photos"), "--cache-dir",
                    str(tmp_path / "cache")], cwd=ROOT, timeout=300)
    assert p.returncode == 2 and p.stderr.strip() == (
        f"error: --root {tmp_path / 'photos'}: not a dataset folder: no annotations/train.json or "
        f"annotations/val.json in it (vase render renders the vases they list, from their GLB models)")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("strict", [False, True])
def test_python_m_vase_render_is_the_render_command_by_its_old_name(tmp_path: Path, strict: bool) -> None:
    """`python -m vase.render` (the command's name until it moved to vase.data.render): the same command after one
    deprecation line; with VASE_DEPRECATIONS=error, one line refusing it and nothing run."""
    (tmp_path / "photos").mkdir()
    env = {**os.environ, "VASE_DEPRECATIONS": "error" if strict else ""}
    p = run_python(["-m", "vase.render", "--root", str(tmp_path / "photos"), "--cache-dir", str(tmp_path / "cache")],
                   cwd=ROOT, env=env, timeout=300)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    if strict:
        assert lines == ["error: old name refused (VASE_DEPRECATIONS=error): python -m vase.render is now vase render "
                         "(python -m vase.data.render)"], lines
    else:
        assert lines[0] == ("deprecated: python -m vase.render is now vase render (python -m vase.data.render) (the "
                            "old name is accepted until vase 0.3)"), lines
        assert len(lines) == 2 and lines[1].startswith(f"error: --root {tmp_path / 'photos'}: not a dataset folder")


def _error_of(overrides: list[str], tmp_path: Path, session_dirs: dict) -> str:
    with pytest.raises((ConfigError, DataError)) as e:
        validate(compose_cfg("evaluate", overrides, tmp_path, session_dirs))
    return str(e.value)


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
