"""Reading the VaseVQA-3D on-disk layout: annotations, GLB models and rendered views, with clear errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from vase.annotate import VaseRecord
from vase.errors import DataError
from vase.io import read_json

VIEWS: tuple[str, ...] = ("front", "back", "left", "right", "top", "bottom")


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


def view_path(root: str | Path, view: str, vase_id: str) -> Path:
    """Where the rendered ``view`` of a vase lives: ``images/<view>/<id>.png``."""
    return Path(root) / "images" / view / f"{vase_id}.png"


def load_views(root: str | Path, vase_id: str, views: tuple[str, ...] | list[str] = VIEWS) -> list[Image.Image]:
    """The rendered views of one vase as RGB images; a missing or unreadable file is a DataError naming it."""
    out = []
    for view in views:
        p = view_path(root, view, vase_id)
        if not p.is_file():
            raise DataError(f"{p}: view {view!r} of vase {vase_id!r} is missing; run the render step "
                            f"(python train.py ... render.enabled=true) or check data.root")
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


def orbit_dir(root: str | Path, vase_id: str) -> Path:
    """Where the orbit frames of a vase live: ``images/orbit/<id>/NNN.png``."""
    return Path(root) / "images" / "orbit" / vase_id


def load_orbit(root: str | Path, vase_id: str) -> VideoFrames:
    """The orbit frames of one vase as RGB images; a missing or empty folder is a DataError naming it."""
    folder = orbit_dir(root, vase_id)
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
    """Records of a split plus their rendered views, read lazily from ``root``."""

    def __init__(self, root: str | Path, split: str, views: tuple[str, ...] | list[str] = VIEWS,
                 limit: int | None = None, check_views: bool = True, modality: str = "views") -> None:
        if modality not in ("views", "orbit"):
            raise ValueError(f"data.modality={modality!r} must be views or orbit")
        self.root = Path(root)
        self.split = split
        self.views = tuple(views)
        self.modality = modality
        ann = self.root / "annotations" / f"{split}.json"
        self.records = load_annotations(ann)
        if limit is not None:
            self.records = self.records[:limit]
        if check_views and modality == "orbit":
            for r in self.records:
                if not any(orbit_dir(self.root, r.id).glob("*.png")):
                    raise DataError(f"{orbit_dir(self.root, r.id)}: no orbit frames for vase {r.id!r} (split "
                                    f"{split!r}); render them with render.orbit_frames=N or use data.modality=views")
        elif check_views:  # fail at set-up, naming the first missing file, not an hour into training
            for r in self.records:
                for v in self.views:
                    p = view_path(self.root, v, r.id)
                    if not p.is_file():
                        raise DataError(f"{p}: view {v!r} of vase {r.id!r} (split {split!r}) is missing; "
                                        f"render the dataset first (render.enabled=true)")

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> VaseExample:
        rec = self.records[i]
        if self.modality == "orbit":
            return VaseExample(rec, load_orbit(self.root, rec.id))
        return VaseExample(rec, load_views(self.root, rec.id, self.views))
