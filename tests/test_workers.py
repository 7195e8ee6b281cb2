"""Preparing a set on every core (`vase.workers`): the same bytes as in one process, failures named as before, no
process left behind, and a caller's unguarded script never run again by a worker."""

from __future__ import annotations

import filecmp
import json
import multiprocessing
import os
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python
from vase.data.synthetic import generate
from vase.errors import DataError
from vase.render import RenderSettings, render_dataset
from vase.workers import MIN_ITEMS_PER_WORKER, ordered_map, usable_cores, workers_for

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _differing(a: Path, b: Path) -> list[str]:
    """Files that differ or exist on one side only, under two folders (recursively)."""
    def walk(d: filecmp.dircmp, at: str) -> list[str]:
        out = [f"{at}{n}" for n in d.diff_files + d.left_only + d.right_only]
        for name, sub in d.subdirs.items():
            out += walk(sub, f"{at}{name}/")
        return out
    return walk(filecmp.dircmp(a, b), "")


def test_auto_uses_the_cores_only_for_enough_items_and_a_bad_setting_names_its_key() -> None:
    assert workers_for("auto", MIN_ITEMS_PER_WORKER * 2 - 1) == 1  # too few to repay a second process
    assert workers_for("auto", 10_000) == usable_cores()
    assert workers_for(None, 10_000) == usable_cores()
    assert workers_for(3, 10_000) == 3 and workers_for("2", 10_000) == 2
    assert workers_for(4, 2) == 2  # never more processes than items
    for bad in (0, -1, "two", 1.5, "1.5"):
        with pytest.raises(ValueError, match=r"render\.workers="):
            workers_for(bad, 100)


def _square(x: int) -> int:
    return x * x


def test_ordered_map_keeps_the_items_order_in_processes() -> None:
    assert list(ordered_map(_square, range(40), 2, chunksize=3)) == [x * x for x in range(40)]
    assert list(ordered_map(_square, range(5), 1)) == [0, 1, 4, 9, 16]


def test_a_set_built_and_rendered_in_two_processes_is_the_same_bytes(tmp_path: Path) -> None:
    roots = {}
    for w in (1, 2):
        root = roots[w] = tmp_path / f"w{w}"
        splits = generate(root, num=12, seed=4, val_fraction=0.5, workers=w, progress=False)
        pairs = [(r.id, r.model) for recs in splits.values() for r in recs]
        result = render_dataset(root, pairs, RenderSettings(resolution=48), views=("front", "top"),
                                progress=False, workers=w)
        assert result == {"rendered": 12, "cached": 0, "failed": []}
    assert _differing(roots[1], roots[2]) == []
    assert len(list((roots[2] / "images" / "front").glob("*.png"))) == 12
    cache = json.loads((roots[2] / "images" / "render_cache.json").read_text())
    assert len(cache) == 12  # every vase recorded: a rerun skips them all
    again = render_dataset(roots[2], [(k, f"models/{k}.glb") for k in cache], RenderSettings(resolution=48),
                           views=("front", "top"), progress=False, workers=2)
    assert again["cached"] == 12 and again["rendered"] == 0


def test_a_broken_glb_in_a_worker_is_named_or_left_out_as_in_one_process(tmp_path: Path) -> None:
    root = tmp_path / "set"
    splits = generate(root, num=6, seed=1, val_fraction=0.5, progress=False)
    recs = [r for rs in splits.values() for r in rs]
    broken = recs[3]
    (root / broken.model).write_bytes(b"glTF not really")
    pairs = [(r.id, r.model) for r in recs]
    with pytest.raises(DataError, match=rf"vase '{broken.id}' could not be rendered"):
        render_dataset(root, pairs, RenderSettings(resolution=32), views=("front",), progress=False, workers=2)
    assert multiprocessing.active_children() == []  # the raise stopped the workers
    skipped = render_dataset(root, pairs, RenderSettings(resolution=32), views=("front",), progress=False,
                             workers=2, on_error="skip", out_root=tmp_path / "out")
    assert skipped["rendered"] == 5 and [f["id"] for f in skipped["failed"]] == [broken.id]
    assert not (tmp_path / "out" / "images" / "front" / f"{broken.id}.png").exists()


def test_a_callers_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """Spawned workers would run the caller's script again (and start the work again in each); they must not."""
    script = tmp_path / "mine.py"
    script.write_text(textwrap.dedent(f"""
        from vase.data.synthetic import generate
        print("script body ran", flush=True)
        generate({str(tmp_path / 'set')!r}, num=8, seed=2, val_fraction=0.5, workers=2, progress=False)
        print("generated", flush=True)
    """))
    out = run_python([str(script)], cwd=tmp_path, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["script body ran", "generated"], out.stdout + out.stderr[-2000:]
    assert len(list((tmp_path / "set" / "models").glob("*.glb"))) == 8


def test_the_render_command_refuses_a_bad_worker_count(tmp_path: Path) -> None:
    out = run_python(["-m", "vase.data.render", "--root", str(tmp_path), "--workers", "0"], cwd=tmp_path, env=ENV,
                     timeout=120)
    assert out.returncode == 2 and "--workers='0' must be 'auto' or a positive number" in out.stderr, out.stderr
