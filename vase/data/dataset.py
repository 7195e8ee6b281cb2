"""Reading the VaseVQA-3D on-disk layout: annotations, GLB models and rendered views, with clear errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from vase.annotate import VaseRecord
from vase.errors import DataError
from vase.io import read_json
from vase.layout import VIEWS, find_orbit, find_view, orbit_dir, view_path

__all__ = ["VIEWS", "VaseDataset", "VaseExample", "VideoFrames", "load_annotations", "load_orbit", "load_views", "models_to_render",
           "orbit_dir", "read_rgb", "view_path"]


def load_annotations(path: str | Path) -> list[VaseRecord]:
    """Records of one split file (a JSON list of vase objects); errors name the file and the vase id."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON list of vases, got {type(data).__name__}")
    records = [VaseRecord.from_json(obj, str(path)) for obj in data]
    seen: set[str] = set()
    for r in records:
        if r.id in seen:
            raise DataError(f"{path}: vase id {r.id!r} appears twice")
        seen.add(r.id)
    return records


def models_to_render(root: str | Path, views: tuple[str, ...] | list[str], orbit_frames: int = 0,
                     only_missing: bool = True, missing_splits_ok: bool = False) -> list[tuple[str, str]]:
    """``(id, GLB path relative to root)`` of every vase in ``annotations/{train,val}.json``; with ``only_missing``
    just those that lack one of ``views`` (or, with ``orbit_frames``, orbit frames) under ``root``: a dataset's own
    views are used as they are. A missing split file is a DataError unless ``missing_splits_ok``."""
    root = Path(root)
    pairs = []
    for split in ("train", "val"):
        ann = root / "annotations" / f"{split}.json"
        if missing_splits_ok and not ann.is_file():
            continue
        pairs += [(r.id, r.model or f"models/{r.id}.glb") for r in load_annotations(ann)]
    if not only_missing:
        return pairs

    def shipped(vid: str) -> bool:
        return all(view_path(root, v, vid).is_file() for v in views) and (
            not orbit_frames or any(orbit_dir(root, vid).glob("*.png")))

    return [(vid, m) for vid, m in pairs if not shipped(vid)]


def _roots(root: str | Path | list) -> list[Path]:
    return [Path(r) for r in root] if isinstance(root, (list, tuple)) else [Path(root)]


def load_views(root: str | Path | list, vase_id: str, views: tuple[str, ...] | list[str] = VIEWS) -> list[Image.Image]:
    """The views of one vase as RGB images, from the first image root that has each (``root`` may be a list: the
    dataset, then the render cache); a missing or unreadable file is a DataError naming it."""
    roots = _roots(root)
    out = []
    for view in views:
        p = find_view(roots, view, vase_id)
        if p is None:
            raise DataError(f"{view_path(roots[0], view, vase_id)}: view {view!r} of vase {vase_id!r} is missing; "
                            f"run the render step (python train.py ... render.enabled=true) or check data.root")
        out.append(read_rgb(p, f"view {view!r} of vase {vase_id!r}"))
    return out


def read_rgb(path: Path, what: str) -> Image.Image:
    """An image file as RGB; an unreadable one is a DataError naming the file and ``what`` it should have shown."""
    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except (UnidentifiedImageError, OSError) as e:
        raise DataError(f"{path}: {what} is not a readable image ({e})") from e


class VideoFrames(list):
    """The frames of a 360-degree orbit, in order: a model sees them as one video, not as separate views."""


def load_orbit(root: str | Path | list, vase_id: str) -> VideoFrames:
    """The orbit frames of one vase as RGB images; a missing or empty folder is a DataError naming it."""
    roots = _roots(root)
    folder = find_orbit(roots, vase_id) or orbit_dir(roots[0], vase_id)
    frames = sorted(folder.glob("*.png")) if folder.is_dir() else []
    if not frames:
        raise DataError(f"{folder}: no orbit frames for vase {vase_id!r}; render them with render.orbit_frames=N "
                        f"(N > 0) or use data.modality=views")
    return VideoFrames(read_rgb(p, f"orbit frame of vase {vase_id!r}") for p in frames)


@dataclass
class VaseExample:
    """One training or evaluation example: a record with the views that show it."""

    record: VaseRecord
    images: list[Image.Image]


class VaseDataset:
    """Records of a split plus their views, read lazily.

    ``image_roots`` are searched in order for each view (default: ``root`` alone): a dataset's own views first,
    then the cache that vase rendered into. ``exclude`` drops vases by id (those whose GLB failed to render).
    """

    def __init__(self, root: str | Path, split: str, views: tuple[str, ...] | list[str] = VIEWS,
                 limit: int | None = None, check_views: bool = True, modality: str = "views",
                 image_roots: list[str | Path] | None = None, exclude: set[str] | frozenset[str] = frozenset()) -> None:
        if modality not in ("views", "orbit"):
            raise ValueError(f"data.modality={modality!r} must be views or orbit")
        self.root = Path(root)
        self.split = split
        self.views = tuple(views)
        self.modality = modality
        self.image_roots = [Path(r) for r in image_roots] if image_roots else [self.root]
        ann = self.root / "annotations" / f"{split}.json"
        self.records = [r for r in load_annotations(ann) if r.id not in exclude]
        if limit is not None:
            self.records = self.records[:limit]
        if check_views and modality == "orbit":
            for r in self.records:
                if find_orbit(self.image_roots, r.id) is None:
                    raise DataError(f"{orbit_dir(self.root, r.id)}: no orbit frames for vase {r.id!r} (split "
                                    f"{split!r}); render them with render.orbit_frames=N or use data.modality=views")
        elif check_views:  # fail at set-up, naming the first missing file, not an hour into training
            for r in self.records:
                for v in self.views:
                    if find_view(self.image_roots, v, r.id) is None:
                        raise DataError(f"{view_path(self.root, v, r.id)}: view {v!r} of vase {r.id!r} (split "
                                        f"{split!r}) is missing; render the dataset first (render.enabled=true)")

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> VaseExample:
        rec = self.records[i]
        if self.modality == "orbit":
            return VaseExample(rec, load_orbit(self.image_roots, rec.id))
        return VaseExample(rec, load_views(self.image_roots, rec.id, self.views))
