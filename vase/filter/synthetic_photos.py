"""Synthetic museum photos, so the whole filtering pipeline runs end to end on material it makes.

Each object is a procedural vase (the same generator as the embedded dataset) photographed several times:

* ``whole``   a photo-like render of the complete vase: random angle, museum backdrop, vignette, sensor noise;
* ``shard``   a fragment: the vase's mesh cut by two random planes, photographed from outside;
* ``blurred`` a whole-vase photo out of focus;
* ``drawing`` a line drawing of the vase (edges on paper), as catalogues print them.

Layout written under ``root`` (a folder vase owns: it carries ``synthetic_photos.json``)::

    photos/<object>_<n>.jpg          # several photos per object, grouped by the file-name rule
    photos/zz_*                      # planted bad inputs (truncated JPEG, CMYK, 16-bit and palette PNG, tiny, text)
    labels.json                      # file -> {object, kind} (kind: whole|shard|blurred|drawing|bad)
    metadata.csv                     # filename,object_id (the metadata-column grouping rule)
    quality/{0,1}/*.jpg              # a labelled set for the quality classifier: 0 bad (shard/blur/drawing), 1 good

    python -m vase.filter.synthetic_photos --root /tmp/photos --objects 24 --seed 0
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter, ImageOps

from vase.annotate.dimension_sampling import sample_record
from vase.data.synthetic import build_mesh
from vase.errors import DataError
from vase.io import atomic_write_bytes, atomic_write_text
from vase.progress import progress_bar
from vase.render.renderer import Renderer, RenderSettings, orbit_direction, parts_from_scene

KINDS = ("whole", "shard", "blurred", "drawing")
MANIFEST = "synthetic_photos.json"
BACKDROPS = ((40, 40, 44), (232, 230, 226), (120, 122, 126), (18, 18, 20), (205, 196, 178))


def _shard(mesh, rng: np.random.Generator):
    """A fragment of ``mesh``: the faces on the positive side of two random planes through the body (with UVs)."""
    # lazy: trimesh
    import trimesh

    centroids = mesh.triangles_center
    lo, hi = mesh.bounds
    for _ in range(50):
        keep = np.ones(len(centroids), dtype=bool)
        for _ in range(2):
            normal = rng.normal(size=3)
            normal /= np.linalg.norm(normal)
            point = lo + (hi - lo) * rng.uniform(0.3, 0.7, size=3)
            keep &= (centroids - point) @ normal > 0
        if 0.08 * len(centroids) < keep.sum() < 0.35 * len(centroids):
            break
    faces = mesh.faces[keep]
    used = np.unique(faces)
    remap = np.full(len(mesh.vertices), -1)
    remap[used] = np.arange(len(used))
    visual = trimesh.visual.TextureVisuals(uv=np.asarray(mesh.visual.uv)[used], material=mesh.visual.material)
    piece = trimesh.Trimesh(vertices=mesh.vertices[used], faces=remap[faces], visual=visual, process=False)
    # look at the painted outside: from the piece's centre, away from the vase's axis
    c = piece.vertices.mean(0)
    out = np.array([c[0], 0.0, c[2]])
    out = out / (np.linalg.norm(out) + 1e-9) if np.linalg.norm(out) > 1e-6 else np.array([0.0, 0.0, 1.0])
    return piece, out


def _frame(img: Image.Image, size: tuple[int, int]) -> Image.Image:
    """The square render centred on a canvas of the photo's size and aspect, filled with its backdrop."""
    w, h = size
    side = min(w, h)
    img = img.resize((side, side), Image.Resampling.BICUBIC)
    canvas = Image.new("RGB", (w, h), img.getpixel((1, 1)))
    canvas.paste(img, ((w - side) // 2, (h - side) // 2))
    return canvas


def _photo_finish(img: Image.Image, rng: np.random.Generator, size: tuple[int, int]) -> Image.Image:
    """Camera look: uneven lighting (vignette), exposure, sensor noise, framed to the photo's aspect."""
    w, h = size
    a = np.asarray(_frame(img, size), dtype=np.float32)
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot((xx - w / 2) / (w / 2), (yy - h / 2) / (h / 2))
    a *= (1.0 - 0.25 * r ** 2)[..., None] * rng.uniform(0.85, 1.15)
    a += rng.normal(0, 3.0, a.shape)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def _drawing(img: Image.Image) -> Image.Image:
    """Black lines on paper from the render's edges."""
    edges = img.convert("L").filter(ImageFilter.FIND_EDGES)
    lines = edges.point(lambda v: 0 if v > 24 else 255)
    paper = Image.new("RGB", img.size, (246, 242, 230))
    paper.paste((30, 30, 30), mask=ImageOps.invert(lines))
    return paper


def _jpeg(img: Image.Image, quality: int = 90, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality, **kw)
    return buf.getvalue()


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _bad_inputs(good: Image.Image) -> dict[str, bytes]:
    """One file per kind of bad input; CMYK, 16-bit and palette are real photos in unusual encodings."""
    full = _jpeg(good)
    gray16 = (np.asarray(good.convert("L"), dtype=np.uint16) * 257)
    return {
        "zz_truncated_1.jpg": full[: len(full) // 2],
        "zz_cmyk_1.jpg": _jpeg(good.convert("CMYK")),
        "zz_deep16_1.png": _png(Image.fromarray(gray16)),
        "zz_palette_1.png": _png(good.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)),
        "zz_tiny_1.jpg": _jpeg(good.resize((20, 16))),
        "zz_notes_1.txt": b"photographer's notes, not an image\n",
        "zz_fake_1.jpg": b"<html>404 not found</html>\n",
    }


BAD_REASONS = {  # the planted file -> what the decoder must say (a substring), or None where it is converted
    "zz_truncated_1.jpg": "truncated",
    "zz_cmyk_1.jpg": None,
    "zz_deep16_1.png": None,
    "zz_palette_1.png": None,
    "zz_tiny_1.jpg": "tiny image",
    "zz_notes_1.txt": "not an image file",
    "zz_fake_1.jpg": "not an image",
}


def generate_photos(root: str | Path, objects: int = 12, photos_per_object: int = 3, seed: int = 0,
                    size: tuple[int, int] = (160, 120), render_resolution: int = 128, classifier_set: int = 24,
                    bad_inputs: bool = True, progress: bool = True) -> dict:
    """Write the synthetic photo collection under ``root``; the same arguments give byte-identical files.

    Returns the labels (file name -> {object, kind}). A folder with content but without our manifest is refused.
    """
    root = Path(root)
    params = {"objects": objects, "photos_per_object": photos_per_object, "seed": seed, "size": list(size),
              "render_resolution": render_resolution, "classifier_set": classifier_set, "bad_inputs": bad_inputs,
              "generator": 1}
    manifest = root / MANIFEST
    if root.is_dir() and any(root.iterdir()) and not manifest.is_file():
        raise DataError(f"{root}: holds files the photo generator did not write (no {MANIFEST}); refusing to write "
                        f"synthetic photos into it. Choose an empty folder")
    if manifest.is_file() and json.loads(manifest.read_text()) == params and (root / "labels.json").is_file():
        return json.loads((root / "labels.json").read_text())
    rng = np.random.default_rng(seed)
    labels: dict[str, dict] = {}
    jobs = [("photos", f"v{i:04d}", n) for i in range(objects) for n in range(photos_per_object)]
    jobs += [("quality", f"q{i:04d}", 0) for i in range(classifier_set)]
    it = jobs
    if progress:
        it = progress_bar(jobs, desc="photographing vases", unit="photo")
    meshes: dict[str, object] = {}
    first_whole: Image.Image | None = None
    with Renderer(RenderSettings(resolution=render_resolution)) as r:
        for folder, obj, n in it:
            if obj not in meshes:
                meshes.clear()
                rec = sample_record(rng, int(obj[1:]) + (10_000 if folder == "quality" else 0))
                meshes[obj] = build_mesh(rec, np.random.default_rng([seed, int(obj[1:]), folder == "quality"]))
            mesh = meshes[obj]
            if folder == "quality":
                kind = KINDS[int(rng.integers(0, 4))] if rng.random() < 0.6 else "whole"
            else:
                kind = "whole" if n == 0 else str(rng.choice(KINDS, p=[0.4, 0.3, 0.15, 0.15]))
            bg = BACKDROPS[int(rng.integers(0, len(BACKDROPS)))]
            if kind == "shard":
                piece, out = _shard(mesh, rng)
                up = (0.0, 1.0, 0.0)
                img = r.render_parts(parts_from_scene(piece), [(tuple(out.tolist()), up)], background=bg)[0]
            else:
                view = orbit_direction(int(rng.integers(0, 360)), 360, float(rng.uniform(-5, 25)))
                img = r.render_parts(parts_from_scene(mesh), [view], background=bg)[0]
            if kind == "blurred":
                img = img.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(3, 6)) * render_resolution / 128))
            elif kind == "drawing":
                img = _drawing(img)
            photo = _photo_finish(img, rng, size) if kind != "drawing" else _frame(img, size)
            if folder == "quality":
                name = f"quality/{0 if kind != 'whole' else 1}/{obj}.jpg"
            else:
                name = f"photos/{obj}_{n}.jpg"
                labels[Path(name).name] = {"object": obj, "kind": kind}
                if kind == "whole" and first_whole is None:
                    first_whole = photo
            atomic_write_bytes(root / name, _jpeg(photo))
    if bad_inputs and first_whole is not None:
        for name, data in _bad_inputs(first_whole).items():
            atomic_write_bytes(root / "photos" / name, data)
            labels[name] = {"object": name.rsplit("_", 1)[0], "kind": "bad"}
    rows = sorted((name, lab["object"]) for name, lab in labels.items())
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["filename", "object_id"])
    w.writerows(rows)
    atomic_write_text(root / "metadata.csv", buf.getvalue())
    atomic_write_text(root / "labels.json", json.dumps(labels, indent=1, sort_keys=True))
    atomic_write_text(manifest, json.dumps(params, sort_keys=True))
    return labels


def _main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--objects", type=int, default=12)
    ap.add_argument("--photos-per-object", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--height", type=int, default=120)
    ap.add_argument("--render-resolution", type=int, default=128)
    ap.add_argument("--classifier-set", type=int, default=24)
    ap.add_argument("--no-bad-inputs", action="store_true")
    a = ap.parse_args()
    labels = generate_photos(a.root, a.objects, a.photos_per_object, a.seed, (a.width, a.height),
                             a.render_resolution, a.classifier_set, not a.no_bad_inputs)
    kinds: dict[str, int] = {}
    for lab in labels.values():
        kinds[lab["kind"]] = kinds.get(lab["kind"], 0) + 1
    print(f"{len(labels)} photos under {a.root}/photos: {kinds}")


if __name__ == "__main__":
    _main()
