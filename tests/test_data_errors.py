"""Bad data is one line naming the file, line or id, before a model loads: malformed annotations, missing
images, empty datasets and splits, decompression bombs; views rendered into the cache count as present."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python
from tests.test_user_paths import _user_dataset
from vase.errors import DataError


def _empty(layout: str, tmp_path: Path) -> Path:
    root = tmp_path / layout
    if layout == "vase":
        (root / "annotations").mkdir(parents=True)
        (root / "annotations" / "train.json").write_text("[]")
        (root / "annotations" / "val.json").write_text("[]")
    elif layout == "release":
        (root / "annotations").mkdir(parents=True)
        (root / "annotations" / "captions.json").write_text("[]")
    elif layout == "paper_eval":
        root.mkdir()
        (root / "groundTruth.json").write_text("[]")
    else:
        root.mkdir()
        root = root / "train.jsonl"
        root.write_text("")
    return root


def _record(run: Path) -> dict:
    return json.loads((run / ".vase-run.json").read_text())


def _run(args: list[str], tmp_path: Path, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:

    env = {**os.environ, "WANDB_MODE": "disabled", **({"VASE_CHECK_CONFIG": "1"} if check else {})}
    return run_python([*args], cwd=ROOT, env=env, timeout=timeout)


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
    p = run_python(["-m", "vase.data.render", "--root", str(ds), "--cache-dir", str(cache), "--resolution", "64"],
                   cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-1500:]
    rep = check_dataset(ds, progress=False, models=False, cache_dir=cache)
    assert rep["ok"], rep["problems"][:3]
    assert any("rendered in the cache" in x for x in rep["info"])


def test_a_decompression_bomb_is_one_line_naming_the_file_and_the_limit(synthetic_root: Path,
                                                                        tmp_path: Path) -> None:
    from PIL import Image

    from vase.config import one_line
    from vase.data.dataset import load_views

    root = _user_dataset(synthetic_root, tmp_path / "user", views=True)
    bomb = next((root / "images" / "front").glob("*.png"))
    Image.new("1", (20000, 20000)).save(bomb)  # 400 megapixels, 1-bit: small on disk, too large to decode safely
    with pytest.raises(DataError) as e:
        load_views(root, bomb.stem)
    msg = str(e.value)
    assert str(bomb) in msg and "too large to decode safely" in msg and f"{2 * Image.MAX_IMAGE_PIXELS:,}" in msg
    # raised in a DataLoader worker, it comes back wrapped in the worker's traceback: the one line is the original
    import torch.utils.data as tud

    class Views(tud.Dataset):
        def __len__(self) -> int:
            return 1

        def __getitem__(self, i: int):
            return load_views(root, bomb.stem)

    with pytest.raises(DataError) as wrapped:
        next(iter(tud.DataLoader(Views(), num_workers=1, collate_fn=lambda x: x)))
    assert "Traceback" in str(wrapped.value) and one_line(wrapped.value) == msg


@pytest.mark.parametrize("layout", ["vase", "release", "paper_eval", "swift"])
def test_an_empty_dataset_fails_the_check_and_is_refused_before_a_model_loads(layout: str, tmp_path: Path) -> None:
    """An empty ms-swift JSONL passed the check ("0 vases ... no problems found") and trained to "finished" with no
    adapter; a vase layout with train.json = [] the same."""
    from vase.data.check import check_dataset
    from vase.data.datamodule import VaseDataModule

    root = _empty(layout, tmp_path)
    report = check_dataset(root, progress=False)
    assert not report["ok"] and report["counts"] == {"empty": 1}, report
    p = run_python(["-m", "vase.data.check", str(root), "--report", str(tmp_path / "r.json")], cwd=ROOT, timeout=120)
    assert p.returncode == 1 and "no vase" in p.stdout + p.stderr
    dm = VaseDataModule(str(root), processor=None, split={"cache_dir": str(tmp_path / "cache")},
                        render={"enabled": False})
    with pytest.raises(DataError, match="nothing would train"):
        dm.check_trainable()


def test_train_py_on_an_empty_jsonl_stops_before_loading_a_model(tmp_path: Path) -> None:
    root = _empty("swift", tmp_path)
    run = tmp_path / "run"
    t = time.perf_counter()
    p = run_python(["train.py", "data=vasevqa3d", f"data.root={root}", "logger=none", f"hydra.run.dir={run}",
                    f"paths.cache_dir={tmp_path / 'cache'}"], cwd=ROOT, timeout=300)
    assert p.returncode == 2 and "nothing would train" in p.stderr, p.stderr[-2000:]
    assert "loading model" not in p.stdout + p.stderr and not (run / "adapter").exists()
    assert _record(run)["status"] == "failed" and time.perf_counter() - t < 120


def test_a_missing_image_names_the_jsonl_and_its_line(tmp_path: Path) -> None:
    from vase.data.check import check_dataset

    jsonl = tmp_path / "train.jsonl"
    line = {"messages": [{"role": "user", "content": "<image>Describe the vase."},
                         {"role": "assistant", "content": "An Attic amphora."}], "images": ["/nonexistent/dir/view.png"]}
    jsonl.write_text("\n" + json.dumps(line) + "\n")
    (problem,) = [p for p in check_dataset(jsonl, progress=False)["problems"] if p["kind"] == "missing_view"]
    assert problem["message"].startswith(f"{jsonl}:2 (no 'id' column: the vase is named after its media): "
                                         f"/nonexistent/dir/view.png"), problem


def test_evaluating_an_empty_split_is_refused_naming_the_data_before_any_encoder_loads(tmp_path: Path) -> None:
    """evaluate.py on a dataset whose split is empty failed after the encoders loaded with "CLIPTextScore: no caption
    pairs to score", naming no data."""
    root = tmp_path / "empty"
    (root / "annotations").mkdir(parents=True)
    (root / "annotations" / "train.json").write_text("[]")
    (root / "annotations" / "val.json").write_text("[]")
    p = _run(["evaluate.py", "data=vasevqa3d", f"data.root={root}", f"paths.log_dir={tmp_path / 'logs'}",
              f"paths.cache_dir={tmp_path / 'cache'}", "logger=none"], tmp_path)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and err[-1].startswith(f"error: {root} (vase layout): its val split has no vase to "
                                                    f"evaluate"), p.stderr[-2000:]
    assert "CLIPTextScore" not in p.stderr and "Loading weights" not in p.stderr


def test_a_missing_image_on_a_later_line_of_a_jsonl_is_named_as_missing(tmp_path: Path) -> None:
    """A vase's second line in an ms-swift JSONL listing a file that is not there was reported as "appears with other
    media than on an earlier line"; it is the missing file, named with its line."""
    from PIL import Image

    from vase.data.check import check_dataset

    ok = tmp_path / "front.png"
    Image.new("RGB", (32, 32)).save(ok)
    gone = tmp_path / "gone.png"

    def line(img: Path, q: str, a: str) -> str:
        return json.dumps({"id": "v1", "messages": [{"role": "user", "content": f"<image>{q}"},
                                                    {"role": "assistant", "content": a}], "images": [str(img)]})

    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text(line(ok, "Describe the vase.", "An Attic amphora.") + "\n"
                     + line(gone, "What is the shape of the vase?", "Amphora.") + "\n")
    problems = check_dataset(jsonl, progress=False)["problems"]
    assert [(p["kind"], p["message"]) for p in problems] == [
        ("missing_view", f"{jsonl}:2: {gone}: listed for vase 'v1' but missing")]
