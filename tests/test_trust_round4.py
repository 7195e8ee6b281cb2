"""Trust, round 4: one validation of the reward for every way in (train.py, the ms-swift plugin, TRL's functions), every
data and retrieval knob checked before a model loads, one run lifecycle for every entry point (failed with its
reason, killed when its process is gone), nothing trains on nothing whatever the layout, messages that name the
JSONL line, a launch race on one folder, and the small ones (stale build folders, a folder as the reward log, a
None completion, hidden photos)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, compose_cfg
from vase.config import validate
from vase.errors import ConfigError, DataError

# ------------------------------------------------------------------ 1: one validation of the reward


@pytest.mark.parametrize("overrides,says", [("tau=5", "reward.tau=5.0 must lie in [0, 1]"),
                                            ("weights.shape=-3", "reward.weights.shape=-3.0 must be non-negative"),
                                            ("nosuchkey=1", "reward.nosuchkey")])
def test_the_plugin_and_trl_refuse_what_train_py_refuses(overrides: str, says: str, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path, session_dirs: dict) -> None:
    """VASE_REWARD_OVERRIDES="tau=5" once trained an ms-swift run on R=0.10 for the reference caption (train.py
    refuses it); "nosuchkey=1" gave a raw TypeError naming neither the variable nor the valid keys."""
    from vase.integrations.columns import ColumnReward
    from vase.integrations.trl import reward_functions

    monkeypatch.setenv("VASE_REWARD_OVERRIDES", overrides)
    for build in (ColumnReward, reward_functions):  # the ms-swift plugin's shared reward; TRL's functions
        with pytest.raises(ConfigError) as e:
            build()
        msg = str(e.value)
        assert msg.startswith(f"VASE_REWARD_OVERRIDES='{overrides}'") and says in msg and "\n" not in msg
        assert "valid keys: tau" in msg and "weights.shape" in msg and "terms.<name>.<field>" in msg
    if overrides != "nosuchkey=1":  # train.py says the same of the same value
        with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
            validate(compose_cfg("train", [f"reward.{overrides}"], tmp_path, session_dirs))
    monkeypatch.setenv("VASE_REWARD_OVERRIDES", "weights.shape=0.6 tau=0.5")
    assert ColumnReward().reward.terms["shape"].weight == 0.6


@pytest.mark.parametrize("override,says", [("data.zoom_width=2", "data.zoom_width=2 must be in (0, 1]"),
                                           ("data.zoom_direct=-1", "data.zoom_direct=-1 must be 0 to 5"),
                                           ("retrieval.format=nope", "retrieval.format='nope' must be one of"),
                                           ("retrieval.k=abc", "retrieval.k='abc' must be a whole number"),
                                           ("retrieval.features=x", "retrieval.features='x' must be one of")])
def test_every_data_and_retrieval_knob_is_checked_with_the_config(override: str, says: str, tmp_path: Path,
                                                                   session_dirs: dict) -> None:
    """Before: the zoom knobs failed after the model loaded, in Hydra's 7-line block; retrieval.format=nope trained
    with exit 0 when retrieval was off."""
    for config in ("train", "evaluate"):
        if config == "evaluate" and override.startswith("data.zoom"):
            continue
        with pytest.raises(ConfigError) as e:
            validate(compose_cfg(config, [override], tmp_path, session_dirs))
        assert str(e.value).startswith(says), str(e.value)


def test_a_plain_typed_argument_of_a_target_is_checked(tmp_path: Path, session_dirs: dict) -> None:
    """reconstruct.generator.rows=abc once became a failure per object ("silhouette under 8 rows") in a run that
    ended "finished"."""
    cfg = compose_cfg("generate3d", ["reconstruct.generator.rows=abc", f"input={tmp_path}"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"reconstruct\.generator\.rows='abc' must be a whole number"):
        validate(cfg)
    cfg = compose_cfg("curate", ["filter.keep=nope", f"filter.input={tmp_path}"], tmp_path, session_dirs)
    with pytest.raises(ConfigError, match=r"filter\.keep='nope' must be manifest, link or copy"):
        validate(cfg)


# ------------------------------------------------------------------ 2: one run lifecycle


def _record(run: Path) -> dict:
    return json.loads((run / ".vase-run.json").read_text())


@pytest.mark.parametrize("argv,reason", [
    (["train.py", "retrieval.k=abc", "logger=none"], "retrieval.k='abc' must be a whole number"),
    (["evaluate.py", "task=score", "generated=/nonexistent/g.json", "ground_truth=/nonexistent/t.json",
      "logger=none"], "file not found"),
    (["-m", "vase.filter", "filter.min_side=abc", "filter.input=."], "filter.min_side"),
    (["-m", "vase.reconstruct", "reconstruct.generator.rows=abc", "input=."], "reconstruct.generator.rows='abc'"),
    (["-m", "vase.retrieval", "retrieval.k=abc"], "retrieval.k='abc'"),
])
def test_every_entry_point_records_its_failure_with_the_reason(argv: list[str], reason: str, tmp_path: Path) -> None:
    """Before, each of these left its run "running" (a traceback, or the wrong key named)."""
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, *argv, f"hydra.run.dir={run}", f"paths.cache_dir={tmp_path / 'cache'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    rec = _record(run)
    assert rec["status"] == "failed" and reason in rec["reason"], rec


def test_a_finished_evaluation_says_so_and_a_killed_run_is_reported_killed(tmp_path: Path) -> None:
    from vase.runs import list_runs, main

    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps([{"images": ["u_1_ac001001.jpg"], "caption": "An Attic amphora."},
                              {"images": ["u_2_ac001001.jpg"], "caption": "A Corinthian aryballos."}]))
    run = tmp_path / "logs" / "score"
    p = subprocess.run([sys.executable, "evaluate.py", "task=score", f"generated={gt}", f"ground_truth={gt}",
                        "metrics=hf_tiny", "logger=none", f"output={tmp_path / 'out.json'}", f"hydra.run.dir={run}",
                        f"paths.cache_dir={tmp_path / 'cache'}"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert _record(run)["status"] == "finished"  # evaluate.py's runs stayed "running" for ever
    # a process that holds its run and is killed outright: its record still says running, readers say killed
    held = tmp_path / "logs" / "held"
    code = (f"from vase.runs import claim; claim({str(held)!r}, 'auto', overrides=[]); "
            "import sys, time; print('held', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    assert {r["run"]: r["status"] for r in list_runs(tmp_path / "logs")}[str(held)] == "running"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert _record(held)["status"] == "running"
    assert {r["run"]: r["status"] for r in list_runs(tmp_path / "logs")} == {str(run): "finished", str(held): "killed"}
    assert main([str(tmp_path / "logs")]) == 0


def test_run_entry_marks_an_unexpected_exception_and_an_interruption(tmp_path: Path, monkeypatch) -> None:
    import vase.config.entry as config
    from vase import runs
    from vase.errors import Interrupted

    run = runs.claim(tmp_path / "r", "auto", overrides=[])
    monkeypatch.setattr(config, "job_dir", lambda: run)
    try:
        def boom(cfg):
            raise RuntimeError("disk full\nmore lines")

        with pytest.raises(RuntimeError):
            config.run_entry(boom, None)
        assert (_record(run)["status"], _record(run)["reason"]) == ("failed", "RuntimeError: disk full\nmore lines")

        def stop(cfg):
            raise Interrupted("saved step 3", signal.SIGTERM)

        with pytest.raises(Interrupted):
            config.run_entry(stop, None)
        assert _record(run)["status"] == "interrupted" and "reason" not in _record(run)
    finally:
        runs.release(run)


# ------------------------------------------------------------------ 3: nothing trains on nothing


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


@pytest.mark.parametrize("layout", ["vase", "release", "paper_eval", "swift"])
def test_an_empty_dataset_fails_the_check_and_is_refused_before_a_model_loads(layout: str, tmp_path: Path) -> None:
    """An empty ms-swift JSONL passed the check ("0 vases ... no problems found") and trained to "finished" with no
    adapter; a vase layout with train.json = [] the same."""
    from vase.data.check import check_dataset
    from vase.data.datamodule import VaseDataModule

    root = _empty(layout, tmp_path)
    report = check_dataset(root, progress=False)
    assert not report["ok"] and report["counts"] == {"empty": 1}, report
    p = subprocess.run([sys.executable, "-m", "vase.data.check", str(root), "--report", str(tmp_path / "r.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "no vase" in p.stdout + p.stderr
    dm = VaseDataModule(str(root), processor=None, split={"cache_dir": str(tmp_path / "cache")},
                        render={"enabled": False})
    with pytest.raises(DataError, match="nothing would train"):
        dm.check_trainable()


def test_train_py_on_an_empty_jsonl_stops_before_loading_a_model(tmp_path: Path) -> None:
    root = _empty("swift", tmp_path)
    run = tmp_path / "run"
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "train.py", "data=vasevqa3d", f"data.root={root}", "logger=none",
                        f"hydra.run.dir={run}", f"paths.cache_dir={tmp_path / 'cache'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "nothing would train" in p.stderr, p.stderr[-2000:]
    assert "loading model" not in p.stdout + p.stderr and not (run / "adapter").exists()
    assert _record(run)["status"] == "failed" and time.perf_counter() - t < 120


# ------------------------------------------------------------------ 4: the JSONL line of a missing image


def test_a_missing_image_names_the_jsonl_and_its_line(tmp_path: Path) -> None:
    from vase.data.check import check_dataset

    jsonl = tmp_path / "train.jsonl"
    line = {"messages": [{"role": "user", "content": "<image>Describe the vase."},
                         {"role": "assistant", "content": "An Attic amphora."}], "images": ["/nonexistent/dir/view.png"]}
    jsonl.write_text("\n" + json.dumps(line) + "\n")
    (problem,) = [p for p in check_dataset(jsonl, progress=False)["problems"] if p["kind"] == "missing_view"]
    assert problem["message"].startswith(f"{jsonl}:2 (no 'id' column: the vase is named after its media): "
                                         f"/nonexistent/dir/view.png"), problem


# ------------------------------------------------------------------ 5: a launch race on one folder


def test_a_given_run_folder_is_held_before_hydra_writes_there(tmp_path: Path) -> None:
    """Run B started while run A was still importing wrote its .hydra files into A's folder (A's .hydra then said
    r=8 while its adapter said r=4). Now the folder is held from the overrides' check, before Hydra writes."""
    from vase import runs
    from vase.config import CONF_DIR, preflight_overrides

    folder = tmp_path / "run"
    preflight_overrides([f"hydra.run.dir={folder}", "stage.module.lora.r=4"], CONF_DIR, "train")
    try:
        assert folder.resolve() in runs._held and _record(folder)["status"] == "running"
        assert not (folder / ".hydra").exists()
        p = subprocess.run([sys.executable, "train.py", f"hydra.run.dir={folder}", "stage.module.lora.r=8",
                            "logger=none"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and "in use by another running process" in p.stderr, p.stderr[-2000:]
        assert not (folder / ".hydra").exists() and not (folder / "train.log").exists()
        assert _record(folder)["overrides"] == [f"hydra.run.dir={folder}", "stage.module.lora.r=4"]
    finally:
        runs.release(folder)


# ------------------------------------------------------------------ 6: the small ones


def test_a_killed_build_leaves_no_folder_for_ever(tmp_path: Path) -> None:
    from vase.io import _builder_tag, atomic_directory

    out = tmp_path / "models" / "tiny-x"
    code = ("import os, sys, time; from vase.io import atomic_directory\n"
            f"with atomic_directory({str(out)!r}) as tmp:\n    print(tmp, flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    stale = Path(child.stdout.readline().strip())
    live = tmp_path / "models" / f".tiny-x.{_builder_tag()}.live"  # a build in progress (this process): kept
    live.mkdir()
    foreign = tmp_path / "models" / ".tiny-x.b1-mine"  # not named by vase: never touched
    foreign.mkdir()
    assert stale.name.startswith(".tiny-x.b")
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert stale.is_dir()
    with atomic_directory(out) as tmp:
        (tmp / "a").write_text("x")
    assert not stale.exists() and live.is_dir() and foreign.is_dir()
    assert sorted(p.name for p in out.iterdir()) == [".vase-built", "a"]


def test_a_folder_as_the_reward_log_and_a_none_completion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vase.integrations.swift_plugin import VaseORM
    from vase.rewards import reward_from_config

    monkeypatch.setenv("VASE_REWARD_LOG", str(tmp_path))
    with pytest.raises(ConfigError, match="VASE_REWARD_LOG=.* is a folder"):
        VaseORM()
    reward = reward_from_config()
    target = {"fabric": "Athenian", "technique": "black-figure", "shape": "amphora", "dating": [-525, -475],
              "decoration": "Herakles", "attribution": "the Amasis Painter"}
    out = reward.compute([None, "None", ""], targets=[target] * 3)
    assert out.total[0] == out.total[2]  # None is the empty answer, not the word "None"


def test_hidden_photos_are_named_when_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from PIL import Image

    from vase.reconstruct.base import objects_in

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    Image.new("RGB", (8, 8)).save(tmp_path / ".b.png")
    with caplog.at_level("WARNING", logger="vase"):
        assert list(objects_in(tmp_path)) == ["a"]
    assert ".b.png" in caplog.text and "hidden" in caplog.text
