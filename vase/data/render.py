"""Render a dataset's views by hand: ``vase render --root /data/VaseVQA-3D [--out DIR] [--resolution 224]`` (in a
checkout ``python -m vase.data.render``; ``python -m vase.render``, its old name, forwards here until vase 0.3).

Reads ``<root>/annotations/{train,val}.json`` and ``<root>/models/*.glb`` and renders the views each vase lacks. The
dataset is only read: renders go to ``--out`` (default: ``.cache/renders/<dataset>-<hash>``, where ``train.py`` and
``evaluate.py`` look for them); ``--write-to-root`` writes the missing views into the dataset itself instead, never
touching a file that is already there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vase.data.dataset import models_to_render
from vase.errors import DataError, VaseError
from vase.io import user_output_dir
from vase.render.renderer import RenderSettings, render_dataset
from vase.views import RENDER_CACHE_FILE, VIEWS, at_settings, render_cache_root
from vase.workers import workers_for


def _workers(value: str) -> str:
    """``--workers``: ``auto`` or a positive count (argparse's error names the flag otherwise)."""
    try:
        workers_for(value, 1, key="--workers")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vase render", description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="dataset root (models/, annotations/)")
    ap.add_argument("--out", help="where the renders go (default: the cache folder train.py reads)")
    ap.add_argument("--cache-dir", default=".cache", help="vase's cache (default .cache)")
    ap.add_argument("--write-to-root", action="store_true", help="write missing views into the dataset itself")
    ap.add_argument("--resolution", type=int, default=224)
    ap.add_argument("--fov-deg", type=float, default=35.0)
    ap.add_argument("--orbit-frames", type=int, default=0)
    ap.add_argument("--orbit-video", action="store_true", help="also write each orbit as an H.264 MP4")
    ap.add_argument("--sheets", action="store_true", help="a contact sheet per vase in images/sheets/")
    ap.add_argument("--views", default=",".join(VIEWS))
    ap.add_argument("--on-error", choices=("raise", "skip"), default="raise")
    ap.add_argument("--workers", type=_workers, default="auto",
                    help="processes that render: auto (one per core, for 64 vases or more) or a number")
    args = ap.parse_args(argv)
    root = Path(args.root)
    views = tuple(v for v in args.views.split(",") if v)
    # the cache folder train.py reads for these settings (a folder per resolution and field of view)
    cached = at_settings(render_cache_root(args.cache_dir, root), args.resolution, args.fov_deg)
    out = root if args.write_to_root else Path(args.out) if args.out else cached
    try:
        if not root.is_dir():
            raise DataError(f"--root {root}: no such dataset folder (models/ and annotations/ are read from it)")
        if not any((root / "annotations" / f"{split}.json").is_file() for split in ("train", "val")):
            raise DataError(f"--root {root}: not a dataset folder: no annotations/train.json or annotations/val.json "
                            f"in it (vase render renders the vases they list, from their GLB models)")
        if args.out and not args.write_to_root:  # a folder the user named: renders never land among their files
            user_output_dir(out, "--out", "vase render", f"images/{RENDER_CACHE_FILE}")
        # the dataset's own views are used as they are: only vases missing one are rendered
        pairs = models_to_render(root, views, args.orbit_frames, missing_splits_ok=True)
        result = render_dataset(root, pairs, RenderSettings(args.resolution, args.fov_deg), views=views,
                                orbit_frames=args.orbit_frames, out_root=out, keep_existing=out == root,
                                on_error=args.on_error, orbit_video=args.orbit_video, sheets=args.sheets,
                                workers=args.workers)
    except VaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"out": str(out), "rendered": result["rendered"], "cached": result["cached"],
                      "failed": result["failed"]}, indent=1))
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
