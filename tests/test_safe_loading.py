"""Files a user names are loaded as tensors only: a pickle that would run code is refused in one line, naming the key
and the file, before any of it runs (trust round 6: ``ckpt_path=`` and ``reward.terms.learned.checkpoint=`` once ran
a probe's ``os.system``)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from vase.errors import ConfigError


class _WritesAFile:
    """Unpickling this calls os.system, which writes ``marker``: what a hostile checkpoint does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"echo ran > {self.marker}",)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "ran.txt"
    path = tmp_path / "user" / "model.ckpt"
    path.parent.mkdir()
    torch.save({"state_dict": {"w": torch.zeros(2)}, "hparams": _WritesAFile(marker)}, path)
    return path, marker


def _one_line(e: pytest.ExceptionInfo, key: str, path: Path) -> None:
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"{key}={path}: refused") and "posix.system" in text, text


def test_a_checkpoint_that_would_run_code_is_refused_on_every_path_a_user_names(hostile: tuple[Path, Path]) -> None:
    from vase.filter.quality import export_best
    from vase.metrics.attributes import AttributePredictor
    from vase.pipeline.build import _epochs_to_continue

    path, marker = hostile
    with pytest.raises(ConfigError) as e:
        AttributePredictor(path)
    _one_line(e, "reward.terms.learned.checkpoint", path)
    with pytest.raises(ConfigError) as e:
        _epochs_to_continue(path, 1, -1)  # read even when no epoch cap is to be worked out
    _one_line(e, "ckpt_path", path)
    with pytest.raises(ConfigError):
        export_best(path, path.parent / "out.pt", {})
    assert not marker.exists()
    assert not (path.parent / "out.pt").exists()


def test_train_with_a_hostile_ckpt_path_stops_in_one_line_and_runs_none_of_it(hostile, train_cfg, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before the model loads (it was 41 s in, after the load), as are a missing file, a folder and a torch
    file that holds no training state."""
    import vase.pipeline.train as train
    from vase.pipeline import run_training

    def never(*a, **k):
        raise AssertionError("the model loaded before ckpt_path was checked")

    monkeypatch.setattr(train, "load_model_and_processor", never)
    path, marker = hostile
    cfg = train_cfg([f"ckpt_path={path}"])
    with pytest.raises(ConfigError) as e:
        run_training(cfg)
    _one_line(e, "ckpt_path", path)
    assert not marker.exists()
    weights = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(2)}, weights)
    for given, says in [(tmp_path / "nope.ckpt", "no such file"), (tmp_path, "a folder, not a checkpoint file"),
                        (weights, "not a Lightning training checkpoint (no state_dict and loops in it)")]:
        with pytest.raises(ConfigError, match="^" + re.escape(f"ckpt_path={given}: {says}")):
            run_training(train_cfg([f"ckpt_path={given}"]))


def test_plain_tensor_files_still_load(tmp_path: Path) -> None:
    from vase.io import load_tensors

    path = tmp_path / "ok.pt"
    torch.save({"w": torch.arange(3), "meta": {"n": 3, "names": ["a"]}}, path)
    blob = load_tensors(path, "some.key")
    assert blob["meta"]["n"] == 3 and torch.equal(blob["w"], torch.arange(3))
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(ConfigError, match=r"^some.key=.*junk.pt: not a readable torch file"):
        load_tensors(tmp_path / "junk.pt", "some.key")
