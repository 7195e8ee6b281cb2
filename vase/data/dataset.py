"""Reading the VaseVQA-3D on-disk layout: annotations, GLB models and rendered views, with clear errors."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from vase.annotate import VaseRecord
from vase.data.layouts import load_annotations
from vase.data.pixel_cache import read_view
from vase.errors import DataError
from vase.views import VIEWS, default_model, find_orbit, find_view, orbit_dir, view_path

__all__ = ["VIEWS", "VaseDataset", "VaseExample", "VideoFrames", "load_annotations", "load_media", "load_orbit",
           "load_video", "load_views", "models_to_render", "orbit_dir", "read_rgb", "view_path"]


def models_to_render(root: str | Path, views: tuple[str, ...] | list[str], orbit_frames: int = 0,
                     only_missing: bool = True, missing_splits_ok: bool = False,
                     records: list[VaseRecord] | None = None) -> list[tuple[str, str]]:
    """``(id, GLB path relative to root)`` of every vase in ``annotations/{train,val}.json`` (or of ``records``, for
    the other layouts); with ``only_missing`` just those that lack one of ``views`` (or, with ``orbit_frames``,
    orbit frames) under ``root``: a dataset's own views are used as they are. Records that list their own media, and
    records of a layout without a model for them, need no rendering. A missing split file is a DataError unless
    ``missing_splits_ok``."""
    root = Path(root)
    if records is None:
        records = []
        for split in ("train", "val"):
            ann = root / "annotations" / f"{split}.json"
            if missing_splits_ok and not ann.is_file():
                continue
            records += [r if r.model else replace(r, model=default_model(r.id)) for r in load_annotations(ann)]
    pairs = [(r.id, r.model) for r in records if r.model and not (r.images or r.videos)]
    if not only_missing:
        return pairs

    def shipped(vid: str) -> bool:
        return all(find_view([root], v, vid) is not None for v in views) and (
            not orbit_frames or find_orbit([root], vid) is not None)

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
    try:  # decoded once while this process's store holds it (vase.data.pixel_cache)
        return read_view(path, _decode_rgb)
    except Image.DecompressionBombError as e:  # not an OSError: PIL's guard against images that would fill memory
        raise DataError(f"{path}: {what} is too large to decode safely (over PIL's limit of "
                        f"{2 * (Image.MAX_IMAGE_PIXELS or 0):,} pixels); shrink it or replace it") from e
    except (UnidentifiedImageError, OSError) as e:
        raise DataError(f"{path}: {what} is not a readable image ({e})") from e


def _decode_rgb(path: Path) -> Image.Image:
    with Image.open(path) as im:
        return im.convert("RGB")


class VideoFrames(list):
    """The frames of a 360-degree orbit, in order: a model sees them as one video, not as separate views."""


FRAME_SUFFIXES = (".png", ".jpg", ".jpeg")


def load_video(path: str | Path, max_frames: int | None = 16) -> VideoFrames:
    """A video as RGB frames: a folder of frame images or a video file (decoded with PyAV), subsampled evenly to at
    most ``max_frames`` (None: all); a missing or undecodable one is a DataError naming it."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in FRAME_SUFFIXES)
        frames = [read_rgb(p, "video frame") for p in _even(files, max_frames)]
    elif path.is_file():
        try:
            # lazy: av
            import av

            with av.open(str(path)) as container:
                decoded = [f.to_image().convert("RGB") for f in container.decode(video=0)]
        except ImportError as e:
            raise DataError(f"{path}: reading video files needs PyAV (pip install av)") from e
        except Exception as e:  # PyAV raises its own error types for every container or codec problem
            raise DataError(f"{path}: not a readable video ({type(e).__name__}: {e})") from e
        frames = _even(decoded, max_frames)
    else:
        raise DataError(f"{path}: video not found")
    if not frames:
        raise DataError(f"{path}: the video has no frames")
    return VideoFrames(frames)


def _even(items: list, k: int | None) -> list:
    """At most ``k`` items spread evenly over ``items`` (first and last kept); all of them for ``k=None``."""
    if k is None or len(items) <= k:
        return list(items)
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)] if k > 1 else [items[0]]


def load_media(rec: VaseRecord, max_frames: int = 16) -> list[Image.Image] | VideoFrames:
    """The explicit media of a record (layouts that list files): its first video, else its images in order."""
    if rec.videos:
        return load_video(rec.videos[0], max_frames)
    return [read_rgb(Path(p), f"image of vase {rec.id!r}") for p in rec.images]


def load_orbit(root: str | Path | list, vase_id: str) -> VideoFrames:
    """The orbit frames of one vase as RGB images, all of them, from its frame folder or its MP4; a missing or
    empty one is a DataError naming it."""
    roots = _roots(root)
    found = find_orbit(roots, vase_id)
    if found is None:
        raise DataError(f"{orbit_dir(roots[0], vase_id)}: no orbit frames for vase {vase_id!r}; render them with "
                        f"render.orbit_frames=N (N > 0) or use data.modality=views")
    return load_video(found, max_frames=None)


@dataclass
class VaseExample:
    """One training or evaluation example: a record with the views that show it."""

    record: VaseRecord
    images: list[Image.Image]
    context: str = ""  # text put before every prompt of this vase (retrieved neighbours), "" when none
    # per dimension, the context of a question about it (retrieval.format=asked); a dimension not here gets `context`
    asked: dict[str, str] = field(default_factory=dict)


class VaseDataset:
    """Records of a split plus their views, read lazily.

    ``image_roots`` are searched in order for each view (default: ``root`` alone): a dataset's own views first,
    then the cache that vase rendered into. ``exclude`` drops vases by id (those whose GLB failed to render).
    """

    def __init__(self, root: str | Path, split: str, views: tuple[str, ...] | list[str] = VIEWS,
                 limit: int | None = None, check_views: bool = True, modality: str = "views",
                 image_roots: list[str | Path] | None = None, exclude: set[str] | frozenset[str] = frozenset(),
                 records: list[VaseRecord] | None = None, max_video_frames: int = 16) -> None:
        if modality not in ("views", "orbit"):
            raise ValueError(f"data.modality={modality!r} must be views or orbit")
        self.root = Path(root)
        self.split = split
        self.views = tuple(views)
        self.modality = modality
        self.max_video_frames = max_video_frames
        self.contexts: dict[str, str] = {}  # vase id -> prompt context (vase.retrieval), filled by the data module
        self.asked_contexts: dict[str, dict[str, str]] = {}  # vase id -> dimension -> a question's context (asked)
        self.image_roots = [Path(r) for r in image_roots] if image_roots else [self.root]
        if records is None:
            records = load_annotations(self.root / "annotations" / f"{split}.json")
        self.records = [r for r in records if r.id not in exclude]
        if limit is not None:
            self.records = self.records[:limit]
        explicit = [r for r in self.records if r.images or r.videos]
        for r in explicit:  # layouts that list their media: every listed file must be there
            for p in r.videos[:1] or r.images:
                if not Path(p).exists():
                    raise DataError(f"{r.where()}{p}: listed for vase {r.id!r} (split {split!r}) but missing")
        if explicit:
            return
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
        ctx, asked = self.contexts.get(rec.id, ""), self.asked_contexts.get(rec.id, {})
        if rec.images or rec.videos:
            return VaseExample(rec, load_media(rec, self.max_video_frames), ctx, asked)
        if self.modality == "orbit":
            return VaseExample(rec, load_orbit(self.image_roots, rec.id), ctx, asked)
        return VaseExample(rec, load_views(self.image_roots, rec.id, self.views), ctx, asked)

    def context_of(self, i: int, dim: str | None = None) -> str:
        """The prompt context of vase ``i`` (retrieved neighbours), without reading its images; with ``dim``, that
        of a question about it (``retrieval.format=asked``), else the vase's."""
        rec_id = self.records[i].id
        asked = self.asked_contexts.get(rec_id, {})
        return asked[dim] if dim in asked else self.contexts.get(rec_id, "")

    def asked_of(self, i: int) -> dict[str, str]:
        return self.asked_contexts.get(self.records[i].id, {})
