"""Generator adapters: the procedural fit reconstructs the vase it saw; commands run, fail, time out and resume."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python
from vase.errors import ConfigError
from vase.eval.vaseeval import Settings, run_vaseeval
from vase.reconstruct.base import reconstruct_folder
from vase.reconstruct.command import CommandGenerator


@pytest.fixture(scope="module")
def photos(synthetic_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from vase.render.renderer import Renderer, RenderSettings

    base = tmp_path_factory.mktemp("recon")
    (base / "photos").mkdir()
    (base / "gt").mkdir()
    recs = [r for s in ("train", "val") for r in json.loads((synthetic_root / "annotations" / f"{s}.json").read_text())]
    by_shape = {}
    for r in sorted(recs, key=lambda r: r["id"]):
        by_shape.setdefault(r["shape"], synthetic_root / r["model"])
    glbs = sorted(by_shape.values())[:3]  # three different shapes: each fit must find its own
    assert len(glbs) == 3
    with Renderer(RenderSettings(resolution=160)) as r:
        for g in glbs:
            r.render_views(g, ["front"])["front"].save(base / "photos" / f"{g.stem}.png")
            shutil.copy(g, base / "gt" / g.name)
    return {"photos": base / "photos", "gt": base / "gt", "base": base}


def test_procedural_fit_reconstructs_the_vase_in_the_photo(photos: dict[str, Path], tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in photos["photos"].iterdir()}
    p = run_python(["-m", "vase.reconstruct", f"input={photos['photos']}", f"output={tmp_path / 'fit'}",
                    f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT)
    assert p.returncode == 0, p.stderr[-1500:]
    assert {q.name: q.read_bytes() for q in photos["photos"].iterdir()} == before
    stems = sorted(q.stem for q in photos["gt"].glob("*.glb"))
    assert sorted(q.stem for q in (tmp_path / "fit").glob("*.glb")) == stems
    # each fit is closer to its own vase than to the others (the fit of another vase as a "method")
    shuffled = tmp_path / "shuffled"
    shuffled.mkdir()
    for a, b in zip(stems, stems[1:] + stems[:1]):
        shutil.copy(tmp_path / "fit" / f"{b}.glb", shuffled / f"{a}.glb")
    res = run_vaseeval(photos["gt"], {"fit": tmp_path / "fit", "other": shuffled},
                       Settings(samples=3000, resolution=96, views=("front", "left")), progress=False)["methods"]
    own, other = res["fit"]["items"], res["other"]["items"]
    for s in stems:
        assert own[s]["chamfer_distance"] < other[s]["chamfer_distance"], s
        assert own[s]["ssim"] > other[s]["ssim"], s


def _fake(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "fake_generator.py"
    script.write_text("import sys, shutil, time\nimage, out = sys.argv[1], sys.argv[2]\n" + body)
    return [sys.executable, str(script), "{image}", "{output}"]


def test_a_command_generator_records_failures_times_out_and_resumes(photos: dict[str, Path], tmp_path: Path) -> None:
    gt = sorted(photos["gt"].glob("*.glb"))
    mesh = str(gt[0])
    body = (f"if image.endswith('{gt[1].stem}.png'): sys.exit('CUDA out of memory')\n"
            f"if image.endswith('{gt[2].stem}.png'): time.sleep(30)\n"
            f"shutil.copy({mesh!r}, out)\n")
    gen = CommandGenerator(_fake(tmp_path, body), timeout_s=3)
    out = tmp_path / "out"
    rep = reconstruct_folder(gen, photos["photos"], out, progress=False)
    assert rep["made"] == 1 and set(rep["failed"]) == {gt[1].stem, gt[2].stem}
    assert "CUDA out of memory" in rep["failed"][gt[1].stem] and "timed out" in rep["failed"][gt[2].stem]
    assert json.loads((out / "failures.json").read_text()) == rep["failed"]
    assert sorted(p.name for p in out.glob("*.glb")) == [f"{gt[0].stem}.glb"]  # no partial files left
    # a rerun skips what exists and retries what failed
    ok = CommandGenerator(_fake(tmp_path, f"shutil.copy({mesh!r}, out)\n"))
    rep2 = reconstruct_folder(ok, photos["photos"], out, progress=False)
    assert rep2["skipped_existing"] == 1 and rep2["made"] == 2 and rep2["failed"] == {}
    # a command that writes something that is not a mesh fails that object
    bad = CommandGenerator(_fake(tmp_path, "open(out, 'w').write('not a mesh')\n"))
    rep3 = reconstruct_folder(bad, photos["photos"], tmp_path / "bad", progress=False)
    assert rep3["made"] == 0 and all("not a readable mesh" in r for r in rep3["failed"].values())
    with pytest.raises(ConfigError, match="inside the input"):
        reconstruct_folder(ok, photos["photos"], photos["photos"] / "out", progress=False)


def test_the_papers_generators_have_configured_command_lines(tmp_path: Path) -> None:
    from tests.conftest import compose_cfg

    for name, needle in (("triposg", "scripts.inference_triposg"), ("hunyuan3d", "hunyuan3d_driver.py")):
        cfg = compose_cfg("generate3d", [f"reconstruct={name}", "input=/photos"], tmp_path,
                          {"cache": tmp_path / "c", "data": tmp_path / "d"})
        from hydra.utils import instantiate

        gen = instantiate(cfg.reconstruct.generator)
        argv = gen.argv([Path("/photos/a.png")], Path("/out/a.glb"))
        assert any(needle in a for a in argv) and "/photos/a.png" in argv and "/out/a.glb" in argv
    assert Path(__import__("vase.reconstruct.command", fromlist=["x"]).__file__).with_name("hunyuan3d_driver.py").is_file()
