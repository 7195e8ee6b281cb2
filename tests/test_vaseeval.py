"""VaseEval against values computed independently, and an end-to-end ranking of perturbed copies."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

from tests.conftest import compose_cfg
from vase.eval.vaseeval import Settings, geometry_metrics, image_metrics, run_vaseeval, surface_samples


def _sphere(radius: float = 1.0):
    import trimesh

    return trimesh.creation.icosphere(subdivisions=5, radius=radius)


def test_chamfer_and_f_score_of_a_sphere_and_a_scaled_sphere() -> None:
    a = surface_samples(_sphere(1.0), 20000, 0)
    b = surface_samples(_sphere(0.9), 20000, 1)
    m = geometry_metrics(b, a, Settings(f_threshold=0.12))
    # every point of one sphere lies 0.1 from the other sphere; the samples add at most their spacing (~0.02)
    assert m["chamfer_distance"] == pytest.approx(2 * 0.1 ** 2, rel=0.08)
    assert geometry_metrics(b, a, Settings(chamfer="l1"))["chamfer_distance"] == pytest.approx(0.2, rel=0.04)
    assert m["f_score"] == 1.0
    assert geometry_metrics(b, a, Settings(f_threshold=0.09))["f_score"] == 0.0


def test_normal_consistency_with_itself_and_with_flipped_faces() -> None:
    mesh = _sphere()
    flipped = mesh.copy()
    flipped.invert()
    same = surface_samples(mesh, 5000, 0)
    inv = surface_samples(flipped, 5000, 0)
    assert geometry_metrics(same, same, Settings())["normal_consistency"] == pytest.approx(1.0)
    assert geometry_metrics(inv, same, Settings())["normal_consistency"] == pytest.approx(1.0, abs=1e-3)
    assert geometry_metrics(inv, same, Settings(normals="signed"))["normal_consistency"] == pytest.approx(-1.0, abs=1e-3)


def test_psnr_and_ssim_of_known_images() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(20, 200, (48, 48, 3), dtype=np.uint8)
    b = (a.astype(int) + 10).astype(np.uint8)
    m = image_metrics([Image.fromarray(a)], [Image.fromarray(b)], None)
    assert m["psnr"] == pytest.approx(10 * math.log10(1 / (10 / 255) ** 2), abs=1e-3)
    assert image_metrics([Image.fromarray(a)], [Image.fromarray(a)], None)["ssim"] == pytest.approx(1.0, abs=1e-6)
    assert m["ssim"] < 1.0


def _perturbed(src: Path, dest: Path, seed: int, noise: float = 0.0, stretch: float = 1.0,
               rotate_deg: float = 0.0, decimate: float = 1.0) -> None:
    """A copy of a GLB with its vertices moved (texture kept): noise as a fraction of the mesh's size."""
    import trimesh

    scene = trimesh.load(str(src), force="scene", process=False)
    rng = np.random.default_rng(seed)
    for name in list(scene.geometry):
        geom = scene.geometry[name]
        if decimate < 1.0:  # quadric decimation to a fraction of the faces (the texture is lost, as it often is)
            geom = geom.simplify_quadric_decimation(face_count=max(4, int(len(geom.faces) * decimate)))
            scene.geometry[name] = geom
        v = np.asarray(geom.vertices, dtype=np.float64)
        size = float(np.linalg.norm(v.max(0) - v.min(0)))
        v = v + rng.normal(0, noise * size, v.shape)
        v[:, 1] *= stretch
        a = np.deg2rad(rotate_deg)
        rot = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
        geom.vertices = v @ rot.T
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(scene.export(file_type="glb"))


@pytest.fixture(scope="module")
def world(synthetic_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("vaseeval")
    gt = base / "gt"
    gt.mkdir()
    for glb in sorted((synthetic_root / "models").glob("*.glb"))[:3]:
        shutil.copy(glb, gt / glb.name)
    methods = {"exact": {}, "noise_small": {"noise": 0.004}, "noise_large": {"noise": 0.03},
               "stretched": {"stretch": 1.4}, "rotated": {"rotate_deg": 30.0}, "decimated": {"decimate": 0.05}}
    for name, kw in methods.items():
        for k, glb in enumerate(sorted(gt.glob("*.glb"))):
            _perturbed(glb, base / name / f"{glb.stem}_mesh.glb", seed=k, **kw)
    return {"gt": gt, **{name: base / name for name in methods}, "base": base}


def test_identical_meshes_score_ideally_and_perturbations_rank_in_order(world: dict[str, Path]) -> None:
    from vase.metrics.encoders import build_clip_encoder
    from vase.models.tiny_clip import build_tiny_open_clip

    weights = build_tiny_open_clip(world["base"] / "clip")
    clip = build_clip_encoder(OmegaConf.create({"backend": "open_clip", "model": "vase-tiny-clip",
                                                "pretrained": str(weights)}))
    names = ["exact", "noise_small", "noise_large", "stretched", "rotated", "decimated"]
    s = Settings(samples=4000, resolution=96, views=("front", "left", "top"))
    res = run_vaseeval(world["gt"], {n: world[n] for n in names}, s, clip, progress=False)
    mean = {n: res["methods"][n]["mean"] for n in names}
    assert all(res["methods"][n]["n_items"] == 3 and not res["methods"][n]["failed"] for n in names)
    ideal = mean["exact"]
    assert ideal["chamfer_distance"] == pytest.approx(0.0, abs=1e-12) and ideal["f_score"] == 1.0
    assert ideal["normal_consistency"] == pytest.approx(1.0) and ideal["psnr"] == 100.0
    assert ideal["ssim"] == pytest.approx(1.0, abs=1e-5) and ideal["clip_i"] == pytest.approx(1.0, abs=1e-5)
    assert ideal["lpips"] is None and "lpips" in res["absent"] and ideal["clip_t"] is None
    cd = [mean[n]["chamfer_distance"] for n in ("exact", "noise_small", "noise_large")]
    assert cd == sorted(cd) and cd[1] < cd[2]
    for m in ("f_score", "normal_consistency", "psnr", "ssim"):
        vals = [mean[n][m] for n in ("exact", "noise_small", "noise_large")]
        assert vals == sorted(vals, reverse=True), m
    assert mean["stretched"]["chamfer_distance"] > mean["noise_small"]["chamfer_distance"]
    assert 0 < mean["decimated"]["chamfer_distance"] < mean["noise_large"]["chamfer_distance"]
    assert mean["decimated"]["f_score"] < 1.0
    # ICP undoes a rotation: the rotated copy comes back close to the exact one
    aligned = run_vaseeval(world["gt"], {"rotated": world["rotated"]}, Settings(samples=4000, resolution=96,
                                                                                views=("front",), align="icp"),
                           None, progress=False)["methods"]["rotated"]["mean"]
    assert aligned["chamfer_distance"] < mean["rotated"]["chamfer_distance"] / 10
    assert aligned["f_score"] > mean["rotated"]["f_score"]


def test_missing_and_corrupt_predictions_are_listed_not_fatal(world: dict[str, Path], tmp_path: Path) -> None:
    stems = sorted(p.stem for p in world["gt"].glob("*.glb"))
    pred = tmp_path / "pred"
    pred.mkdir()
    shutil.copy(world["gt"] / f"{stems[0]}.glb", pred / f"{stems[0]}.glb")
    (pred / f"{stems[1]}.glb").write_bytes(b"glTF broken")
    (pred / "stranger.glb").write_bytes(b"x")
    res = run_vaseeval(world["gt"], {"m": pred}, Settings(samples=500, resolution=64, views=("front",)),
                       progress=False)["methods"]["m"]
    assert res["n_items"] == 1 and list(res["items"]) == [stems[0]]
    failed = {f["item"]: f["reason"] for f in res["failed"]}
    assert set(failed) == {stems[1], stems[2]} and failed[stems[2]] == "no prediction"
    assert "not a readable mesh" in failed[stems[1]] and res["unmatched_predictions"] == ["stranger.glb"]
    assert res["mean"]["chamfer_distance"] == pytest.approx(0.0, abs=1e-12)


def test_lpips_from_a_local_backbone_file(world: dict[str, Path], tmp_path: Path) -> None:
    from torchvision.models import alexnet

    from vase.errors import ConfigError
    from vase.eval.vaseeval import LPIPS

    torch.manual_seed(0)
    torch.save(alexnet().state_dict(), tmp_path / "my-alexnet.pth")
    net = LPIPS(tmp_path / "my-alexnet.pth")
    a = torch.rand(2, 3, 64, 64) * 2 - 1
    assert net(a, a).abs().max() < 1e-6 and (net(a, -a) > 0).all()
    res = run_vaseeval(world["gt"], {"noisy": world["noise_large"]},
                       Settings(samples=500, resolution=64, views=("front",), lpips_weights=str(tmp_path / "my-alexnet.pth")),
                       progress=False)
    assert res["methods"]["noisy"]["mean"]["lpips"] > 0 and "lpips" not in res["absent"]
    with pytest.raises(ConfigError, match="no such file"):
        LPIPS(tmp_path / "missing.pth")


def test_evaluate_task_vaseeval_writes_json_table_and_sheet(world: dict[str, Path], tmp_path: Path,
                                                           session_dirs: dict) -> None:
    from vase.pipeline.evaluate import run_evaluation

    caps = tmp_path / "captions.json"
    caps.write_text(json.dumps({p.stem: "an Athenian amphora" for p in world["gt"].glob("*.glb")}))
    out = tmp_path / "ve.json"
    cfg = compose_cfg("evaluate", ["action=vaseeval", f"gt_dir={world['gt']}", "logger=none",
                                   f"methods={{exact: {world['exact']}, noisy: {world['noise_large']}}}",
                                   f"output={out}", "vaseeval.samples=500", "vaseeval.resolution=64",
                                   "vaseeval.views=[front]", f"vaseeval.captions={caps}"], tmp_path, session_dirs)
    run_evaluation(cfg)
    res = json.loads(out.read_text())
    assert res["methods"]["exact"]["mean"]["clip_t"] is not None and res["methods"]["noisy"]["n_items"] == 3
    md = out.with_suffix(".md").read_text()
    assert md.startswith("| Method | PSNR ↑ | SSIM ↑ | LPIPS ↓ | CD ↓") and "| exact |" in md and "lpips: n/a" in md
    sheet = Image.open(res["contact_sheet"])
    assert sheet.size[0] == 64 * 3


def test_vaseeval_refuses_to_write_into_the_meshes_it_reads(world: dict[str, Path], tmp_path: Path,
                                                          session_dirs: dict) -> None:
    from vase.errors import ConfigError
    from vase.pipeline.evaluate import run_evaluation

    before = sorted(p.name for p in world["exact"].iterdir())
    cfg = compose_cfg("evaluate", ["action=vaseeval", f"gt_dir={world['gt']}", "logger=none",
                                   f"methods={{exact: {world['exact']}}}", f"output={world['exact'] / 've.json'}"],
                      tmp_path, session_dirs)
    with pytest.raises(ConfigError, match="only reads"):
        run_evaluation(cfg)
    assert sorted(p.name for p in world["exact"].iterdir()) == before
