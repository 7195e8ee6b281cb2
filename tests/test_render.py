"""Headless rendering from the GLB itself, the view cache, and clear errors for bad inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, run_python
from vase.data.dataset import VIEWS, VaseDataset, load_annotations, load_views, view_path
from vase.errors import DataError
from vase.render import Renderer, RenderSettings, render_dataset


def test_six_views_show_the_textured_vase(synthetic_root: Path) -> None:
    rec = load_annotations(synthetic_root / "annotations" / "train.json")[0]
    with Renderer(RenderSettings(resolution=96)) as r:
        views = r.render_views(synthetic_root / rec.model)
    assert list(views) == list(VIEWS)
    bg = np.array([128, 128, 128])
    for name, img in views.items():
        a = np.asarray(img).astype(int)
        assert a.shape == (96, 96, 3)
        covered = (np.abs(a - bg).sum(-1) > 20).mean()
        assert 0.05 < covered < 0.95, f"{name}: vase covers {covered:.0%} of the frame"
    # front and top views see different things
    assert np.abs(np.asarray(views["front"]).astype(int) - np.asarray(views["top"]).astype(int)).mean() > 5


def test_texture_colours_reach_the_image(tmp_path: Path) -> None:
    """A white-ground vase renders bright, a red-figure one dark: the texture is sampled, not a flat colour."""
    from vase.data.synthetic import build_mesh, mesh_to_glb, sample_record

    rng = np.random.default_rng(0)
    recs = {}
    for i in range(60):
        r = sample_record(rng, i)
        recs.setdefault(r.technique, r)
    means = {}
    with Renderer(RenderSettings(resolution=64)) as rd:
        for tech in ("white-ground", "red-figure"):
            p = tmp_path / f"{tech}.glb"
            p.write_bytes(mesh_to_glb(build_mesh(recs[tech], np.random.default_rng(0))))
            a = np.asarray(rd.render_views(p, ["front"])["front"]).astype(float)
            fg = np.abs(a - 128).sum(-1) > 20
            means[tech] = a[fg].mean()
    assert means["white-ground"] > means["red-figure"] + 30, means


def test_cache_skips_unchanged_and_rerenders_changed(synthetic_root: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root)
    recs = load_annotations(root / "annotations" / "val.json")
    pairs = [(r.id, r.model) for r in recs]
    s = RenderSettings(resolution=64)
    assert render_dataset(root, pairs, s, progress=False) == {"rendered": 0, "cached": len(pairs), "failed": []}
    glb = root / recs[0].model
    glb.write_bytes(glb.read_bytes() + b"\0\0\0\0")  # content changed: hash differs
    assert render_dataset(root, pairs, s, progress=False) == {"rendered": 1, "cached": len(pairs) - 1, "failed": []}
    assert render_dataset(root, pairs, RenderSettings(resolution=48), progress=False)["rendered"] == len(pairs)


def test_corrupt_glb_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken_0.glb"
    bad.write_bytes(b"glTF" + b"\x00" * 40)
    with Renderer(RenderSettings(resolution=32)) as r:
        with pytest.raises(DataError, match="broken_0.glb"):
            r.render_views(bad)


def test_missing_view_names_the_file(synthetic_root: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root)
    rec = load_annotations(root / "annotations" / "train.json")[1]
    missing = view_path(root, "left", rec.id)
    missing.unlink()
    with pytest.raises(DataError, match=str(missing)):
        load_views(root, rec.id)
    with pytest.raises(DataError, match="left"):
        VaseDataset(root, "train")


def test_malformed_annotation_json_names_the_file(tmp_path: Path) -> None:
    ann = tmp_path / "annotations"
    ann.mkdir()
    (ann / "train.json").write_text('[{"id": "a_0", "fabric": "Athenian",\n  "technique": }]')
    with pytest.raises(DataError, match=r"train\.json: malformed JSON at line 2"):
        load_annotations(ann / "train.json")
    (ann / "train.json").write_text('{"id": "a_0"}')
    with pytest.raises(DataError, match=r"train\.json: expected a JSON list"):
        load_annotations(ann / "train.json")


def test_triton_can_load_after_a_render_context() -> None:
    """Mesa's llvmpipe and triton each bring an LLVM; triton loading second used to segfault the process."""

    code = ("from vase.render.renderer import Renderer, RenderSettings\n"
            "r = Renderer(RenderSettings(resolution=16))\n"
            "import torch._dynamo, torchvision.ops\n"
            "print('alive')\n")
    proc = run_python(["-c", code])
    assert proc.returncode == 0 and "alive" in proc.stdout, proc.stderr[-1000:]


def test_orbit_video_and_contact_sheet(synthetic_root, tmp_path) -> None:
    """render.orbit_video writes an H.264 MP4 that decodes back to the frames; data.modality=orbit reads either."""

    import numpy as np
    from PIL import Image

    from vase.data.dataset import VaseDataset, load_video
    from vase.render.renderer import RenderSettings, render_dataset

    rec = json.loads((synthetic_root / "annotations" / "val.json").read_text())[0]
    out = tmp_path / "out"
    render_dataset(synthetic_root, [(rec["id"], rec["model"])], RenderSettings(resolution=64), orbit_frames=8,
                   out_root=out, orbit_video=True, sheets=True, progress=False)
    frames = [Image.open(p).convert("RGB") for p in sorted((out / "images" / "orbit" / rec["id"]).glob("*.png"))]
    video = load_video(out / "images" / "orbit" / f"{rec['id']}.mp4", max_frames=100)
    assert len(video) == len(frames) == 8 and video[0].size == (64, 64)
    diffs = [np.abs(np.asarray(a, float) - np.asarray(b, float)).mean() for a, b in zip(video, frames)]
    assert max(diffs) < 6.0  # H.264 at crf 18: close to the frames, not equal
    sheet = Image.open(out / "images" / "sheets" / f"{rec['id']}.jpg")
    assert sheet.size == (64 * 6, (64 + 14) * 3)  # six views, then eight orbit frames in rows of six
    import shutil

    shutil.rmtree(out / "images" / "orbit" / rec["id"])  # only the MP4 left: the orbit modality reads it
    ds = VaseDataset(synthetic_root, "val", modality="orbit", image_roots=[out], limit=1)
    assert len(ds[0].images) == 8


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_two_runs_at_two_resolutions_at_once_each_train_on_their_own_views(tmp_path: Path) -> None:
    """render.resolution once re-rendered the synthetic set's views in place: two runs at 32 and 48 pixels overwrote
    each other's views and one trained on the other's. Each now reads a set named by its settings; a set given by
    data.root at other settings than its views' is refused in one line, its views left as they were."""
    import os

    from PIL import Image

    cache, logs = tmp_path / "cache", tmp_path / "logs"
    common = ["train.py", "logger=none", "debug=fast", "trainer.max_steps=1", "val.after=false", "report=false",
              "data.synthetic.num_vases=8", f"paths.cache_dir={cache}", f"paths.log_dir={logs}"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    procs = [subprocess.Popen([sys.executable, *common, f"render.resolution={r}"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (32, 48)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-1500:] for o in outs]
    for r in (32, 48):
        root = cache / "data" / f"synthetic-n8-s0-r{r}-fov35"
        sizes = {Image.open(f).size for f in (root / "images" / "front").glob("*.png")}
        assert sizes == {(r, r)}, (r, sizes)
    import yaml

    roots = sorted(yaml.safe_load(c.read_text())["data"]["root"] for c in logs.glob("train/runs/*/config.yaml"))
    assert roots == [str(cache / "data" / f"synthetic-n8-s0-r{r}-fov35") for r in (32, 48)]  # each its own set
    # the same set named by hand at another resolution: refused, nothing re-rendered
    given = cache / "data" / "synthetic-n8-s0-r32-fov35"
    before = {f: f.stat().st_mtime_ns for f in (given / "images" / "front").glob("*.png")}
    p = run_python([*common, "render.resolution=48", f"data.root={given}"], cwd=ROOT, env=env, timeout=600)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith(
        f"error: data.root='{given}' holds views rendered at other render settings than this run's"), p.stderr[-1500:]
    assert before == {f: f.stat().st_mtime_ns for f in (given / "images" / "front").glob("*.png")}
