"""Finding and decoding photos robustly: every file is either a clean RGB image or a reason why not.

Museum dumps hold CMYK scans, 16-bit and palette PNGs, thumbnails, truncated downloads and stray text files. None of
them stops a run: `open_photo` returns the image or the reason it was rejected, and the runner reports it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp", ".webp", ".gif"})
UNUSUAL_MODES = {"CMYK": "CMYK", "I;16": "16-bit", "I;16B": "16-bit", "I;16L": "16-bit", "I": "16/32-bit",
                 "P": "palette", "PA": "palette", "F": "floating-point"}


def iter_files(root: str | Path) -> Iterator[Path]:
    """Every regular file under ``root``, sorted at each level (a stable order across runs), hidden ones skipped.

    Symbolic links are listed but never followed into folders; one that cannot be resolved (dangling, or a loop) is
    listed too, so that decoding rejects it with its reason instead of the walk failing or dropping it unseen."""
    root = Path(root)
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
        dirs = []
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                dirs.append(Path(e.path))
            elif e.is_symlink() or e.is_file(follow_symlinks=False):
                yield Path(e.path)
        stack.extend(reversed(dirs))


@dataclass
class Decoded:
    """The result of decoding one file: an RGB image, or the reason it was rejected; ``note`` records a conversion."""

    image: Image.Image | None
    reason: str | None = None
    note: str | None = None


def _to_rgb(im: Image.Image) -> Image.Image:
    """RGB of any PIL mode, done right: 16-bit scaled (not clipped), transparency over white, CMYK through PIL."""
    if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        a = np.asarray(im, dtype=np.float64)
        top = 65535.0 if a.max(initial=0) > 255 else 255.0
        return Image.fromarray(np.clip(a / top * 255.0 + 0.5, 0, 255).astype(np.uint8), "L").convert("RGB")
    if im.mode in ("P", "PA", "LA", "RGBA") or "transparency" in im.info:
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return im.convert("RGB")


def link_problem(path: Path) -> str | None:
    """Why a symbolic link cannot be read as a photo (a loop, a dangling link, a link to a folder); None if it can."""
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        return f"dangling symbolic link (its target {os.readlink(path)!r} does not exist)"
    except (RuntimeError, OSError):  # RuntimeError up to Python 3.12, OSError (ELOOP) after
        return "symbolic link loop (links that lead back to each other); not followed"
    if target.is_dir():
        if path.parent.resolve().is_relative_to(target):
            return "symbolic link loop (a link to a folder that holds it); not followed"
        return "symbolic link to a folder, not to an image file"
    return None


def open_photo(path: str | Path, min_side: int = 64, unusual_modes: str = "convert",
               draft_size: int | None = None) -> Decoded:
    """Decode one photo to RGB, or say why not.

    Args:
        path: the file.
        min_side: images whose shorter side is smaller are rejected as thumbnails.
        unusual_modes: ``convert`` CMYK, 16-bit and palette images to RGB (noted), or ``reject`` them.
        draft_size: decode JPEGs at a reduced DCT scale that still covers this many pixels on each side (fast for
            large photos whose model input is small); None decodes at full size.
    """
    path = Path(path)
    if path.is_symlink() and (why := link_problem(path)) is not None:
        return Decoded(None, why)
    if path.suffix.lower() not in IMAGE_EXTENSIONS:
        return Decoded(None, f"not an image file (extension {path.suffix or 'none'!r})")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(path)
    except UnidentifiedImageError:
        return Decoded(None, "not an image (no known image format inside)")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        return Decoded(None, f"too large to decode safely ({e})")
    except OSError as e:
        return Decoded(None, f"unreadable file ({e})")
    with im:
        w, h = im.size
        if min(w, h) < min_side:
            return Decoded(None, f"tiny image {w}x{h} (shorter side < filter.min_side={min_side})")
        kind = UNUSUAL_MODES.get(im.mode)
        if kind and unusual_modes == "reject":
            return Decoded(None, f"{kind} image, mode {im.mode} (filter.unusual_modes=reject)")
        note = f"converted from {kind} ({im.mode})" if kind else None
        try:
            if draft_size and im.format == "JPEG":
                im.draft("RGB" if im.mode in ("RGB", "YCbCr") else None, (draft_size, draft_size))
            im.load()
            im = ImageOps.exif_transpose(im)
            rgb = _to_rgb(im)
        except (OSError, ValueError, SyntaxError) as e:  # PIL raises these three for damaged image data
            return Decoded(None, f"truncated or corrupt image data ({e})")
    return Decoded(rgb, None, note)


def foreground_mask(rgb: np.ndarray, tolerance: float) -> np.ndarray:
    """Pixels that differ from the border's median colour by more than ``tolerance``; the largest blob, holes filled."""
    # lazy: scipy
    from scipy import ndimage

    border = np.concatenate([rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1]]).astype(np.float64)
    bg = np.median(border, axis=0)
    mask = np.abs(rgb.astype(np.float64) - bg).max(axis=2) > tolerance
    labels, n = ndimage.label(mask)
    if n == 0:
        return mask
    sizes = ndimage.sum(mask, labels, index=range(1, n + 1))
    return ndimage.binary_fill_holes(labels == (int(np.argmax(sizes)) + 1))
