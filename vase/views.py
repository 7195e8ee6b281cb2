"""View names and where views and renders of a dataset live, in one low module that data, render, config and eval import.

    <root>/models/<id>.glb
    <root>/annotations/{train,val}.json
    <root>/images/<view>/<id>.png          # views a dataset ships, or that vase rendered into a root it owns
    <root>/images/orbit/<id>/NNN.png       # 360-degree orbit frames

An id is data, never a path: every file name here is `vase.io.safe_name` of the id (the id itself when it is
a plain file name, else a cleaned stem plus a hash), for reading and writing alike, and a record's ``model`` field
is read only when it stays inside the dataset (`model_file`).

Views that vase renders for a dataset it does not own go to a cache folder with the same ``images/`` layout
(`render_cache_root`); readers search the dataset first and the cache second (`find_view`). Views rendered at other
than the default settings (224 pixels, 35 degrees) go one level further, to ``renders/r<pixels>-fov<degrees>/`` below
that folder (`at_settings`), and a set vase generates is named by its settings (`settings_suffix`): two runs at two
resolutions never share, or overwrite, one set of views.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vase.errors import DataError
from vase.io import relpath_problem, safe_name

VIEWS: tuple[str, ...] = ("front", "back", "left", "right", "top", "bottom")
RENDER_CACHE_FILE = "render_cache.json"


def view_path(root: str | Path, view: str, vase_id: str) -> Path:
    """Where the ``view`` of a vase lives under one image root: ``images/<view>/<id>.png``."""
    return Path(root) / "images" / view / f"{safe_name(vase_id)}.png"


def orbit_dir(root: str | Path, vase_id: str) -> Path:
    """Where the orbit frames of a vase live under one image root: ``images/orbit/<id>/NNN.png``."""
    return Path(root) / "images" / "orbit" / safe_name(vase_id)


def sheet_path(root: str | Path, vase_id: str) -> Path:
    """Where the contact sheet of a vase lives under one image root: ``images/sheets/<id>.jpg``."""
    return Path(root) / "images" / "sheets" / f"{safe_name(vase_id)}.jpg"


def default_model(vase_id: str) -> str:
    """The GLB of a vase whose record names none, relative to the dataset root: ``models/<id>.glb``."""
    return f"models/{safe_name(vase_id)}.glb"


def model_file(root: str | Path, model: str, vase_id: str) -> Path:
    """The GLB a record names (``model``, relative to the dataset root); a DataError naming the vase when the field
    would reach outside the dataset (absolute, or with a ``..`` part).

    >>> model_file("/data/v", "models/a.glb", "a").as_posix()
    '/data/v/models/a.glb'
    """
    why = relpath_problem(model)
    if why is not None:
        raise DataError(f"vase {vase_id!r}: its model field {model!r} {why}; a dataset's model paths must stay "
                        f"inside the dataset ({root})")
    return Path(root) / model


def find_view(roots: Sequence[str | Path], view: str, vase_id: str) -> Path | None:
    """The first of ``roots`` that holds this view (a dataset's own views win over rendered ones), else None."""
    for r in roots:
        p = view_path(r, view, vase_id)
        if p.is_file():
            return p
        for ext in (".jpg", ".jpeg"):  # a release may ship its views as JPEG
            q = p.with_suffix(ext)
            if q.is_file():
                return q
    return None


def find_orbit(roots: Sequence[str | Path], vase_id: str) -> Path | None:
    """The first of ``roots`` whose orbit for this vase exists: its frame folder, else its MP4
    (``images/orbit/<id>.mp4``); None if neither."""
    for r in roots:
        d = orbit_dir(r, vase_id)
        if d.is_dir() and any(d.glob("*.png")):
            return d
        if d.with_suffix(".mp4").is_file():
            return d.with_suffix(".mp4")
    return None


DEFAULT_RESOLUTION = 224
DEFAULT_FOV_DEG = 35.0


def at_settings(base: str | Path, resolution: int = DEFAULT_RESOLUTION, fov_deg: float = DEFAULT_FOV_DEG) -> Path:
    """Where views rendered at ``resolution`` and ``fov_deg`` live below an image root: the root itself at the default
    settings, else ``renders/r<resolution>-fov<fov>/`` below it.

    >>> at_settings("/c/a"), at_settings("/c/a", 64), at_settings("/c/a", 224, 50)
    (PosixPath('/c/a'), PosixPath('/c/a/renders/r64-fov35'), PosixPath('/c/a/renders/r224-fov50'))
    """
    if int(resolution) == DEFAULT_RESOLUTION and float(fov_deg) == DEFAULT_FOV_DEG:
        return Path(base)
    return Path(base) / "renders" / f"r{int(resolution)}-fov{float(fov_deg):g}"


def settings_suffix(resolution: Any = DEFAULT_RESOLUTION, fov_deg: Any = DEFAULT_FOV_DEG) -> str:
    """``${vase.render_key:${render.resolution},${render.fov_deg}}``: what names a generated set's folder after its
    render settings: "" at the defaults, else ``-r<pixels>-fov<degrees>``.

    >>> settings_suffix(224, 35.0), settings_suffix(64, 35)
    ('', '-r64-fov35')
    """
    if int(resolution) == DEFAULT_RESOLUTION and float(fov_deg) == DEFAULT_FOV_DEG:
        return ""
    return f"-r{int(resolution)}-fov{float(fov_deg):g}"


def render_cache_root(cache_dir: str | Path, dataset_root: str | Path) -> Path:
    """Where views rendered for a dataset that vase does not own are kept: keyed by the dataset's resolved path.

    >>> render_cache_root("/c", "/data/a") != render_cache_root("/c", "/data/b")
    True
    """
    return Path(cache_dir) / "renders" / path_key(dataset_root)


def path_key(path: str | Path | None) -> str:
    """A folder name for what vase keeps about a user's folder: its name plus a hash of its resolved path.

    >>> path_key("/data/photos").startswith("photos-")
    True
    """
    if path is None:
        return "none"
    resolved = str(Path(path).expanduser().resolve())
    return f"{Path(resolved).name}-{hashlib.sha256(resolved.encode()).hexdigest()[:16]}"
