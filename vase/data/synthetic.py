"""Procedural vases: the embedded default dataset, written in the VaseVQA-3D on-disk layout.

Each vase is a real GLB file: a trimesh surface of revolution from a shape-specific profile, handles where the shape
has them, and a texture painted according to its technique (black-figure, red-figure, white-ground, black-glaze) and
decoration. Its six-dimension record follows archaeological correlations (white-ground lekythoi are Athenian and
fifth century, Corinthian wares are black-figure or animal friezes, ...) so that a model has something to learn.

Layout written under ``root``::

    models/<id>.glb
    annotations/{train,val}.json      # list of records: id, six dimensions, metadata, caption, qa
    images/<view>/<id>.png            # written later by vase.render

Run ``python -m vase.data.synthetic --root data/synthetic --num 32 --seed 0`` to generate by hand.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from vase.annotate import VaseRecord
from vase.annotate.dimension_sampling import hand, sample_record
from vase.annotate.vocab import terms
from vase.data.layouts import load_annotations
from vase.errors import DataError
from vase.io import (
    BUILT_MARKER,
    atomic_directory,
    atomic_write_bytes,
    atomic_write_text,
    built_by_vase,
    one_builder_at_a_time,
)
from vase.progress import progress_bar
from vase.prompt_tasks.invrender import VaseParams
from vase.workers import ordered_map, workers_for

# the generator's version: written into synthetic.json, and part of every cache key built on synthetic data (a set
# written by an older generator is regenerated, and an SFT adapter trained on one is not reused)
# 2: painters' careers, workshop shapes and subjects, and hands (vase.annotate.dimension_sampling.PAINTERS)
GENERATOR = 2

# ---------------------------------------------------------------- shapes
# Profiles: (height fraction, radius) control points, bottom to top, for a vase of unit height.
# Handles: (from height, to height, kind) with kind "vertical" (shoulder to neck) or "horizontal" (a loop on the side);
# angles give where around the body they sit.


@dataclass(frozen=True)
class ShapeSpec:
    profile: tuple[tuple[float, float], ...]
    height: float
    handles: tuple[tuple[float, float, str, float], ...]  # (y0, y1, kind, angle in degrees)
    band: tuple[float, float]  # height range of the figured frieze


SHAPE_SPECS: dict[str, ShapeSpec] = {
    "amphora": ShapeSpec(
        ((0, .17), (.04, .18), (.08, .12), (.16, .24), (.45, .38), (.68, .30), (.78, .15), (.92, .13), (.96, .17), (1, .17)),
        1.0, ((.70, .90, "vertical", 90), (.70, .90, "vertical", 270)), (.30, .62)),
    "hydria": ShapeSpec(
        ((0, .20), (.05, .21), (.09, .15), (.2, .30), (.5, .42), (.68, .36), (.78, .17), (.9, .12), (.95, .18), (1, .18)),
        0.95, ((.50, .60, "horizontal", 90), (.50, .60, "horizontal", 270), (.62, .90, "vertical", 180)), (.55, .72)),
    "lekythos": ShapeSpec(
        ((0, .12), (.04, .13), (.07, .08), (.12, .15), (.6, .17), (.66, .13), (.70, .05), (.85, .04), (.88, .08), (.96, .07), (1, .05)),
        1.1, ((.66, .84, "vertical", 180),), (.25, .58)),
    "kylix": ShapeSpec(
        ((0, .26), (.04, .26), (.07, .06), (.40, .05), (.50, .16), (.70, .42), (.85, .52), (1, .55)),
        0.42, ((.72, .80, "horizontal", 90), (.72, .80, "horizontal", 270)), (.60, .90)),
    "krater": ShapeSpec(
        ((0, .20), (.05, .21), (.10, .12), (.20, .20), (.50, .36), (.72, .42), (.92, .50), (1, .52)),
        0.85, ((.40, .55, "horizontal", 90), (.40, .55, "horizontal", 270)), (.55, .88)),
    "oinochoe": ShapeSpec(
        ((0, .16), (.04, .17), (.07, .13), (.20, .27), (.45, .31), (.65, .22), (.75, .11), (.88, .10), (.94, .16), (1, .13)),
        0.9, ((.60, .96, "vertical", 180),), (.30, .58)),
    "pelike": ShapeSpec(
        ((0, .22), (.05, .23), (.08, .20), (.25, .38), (.45, .36), (.65, .26), (.80, .18), (.93, .17), (.97, .20), (1, .20)),
        0.9, ((.62, .92, "vertical", 90), (.62, .92, "vertical", 270)), (.25, .60)),
    "alabastron": ShapeSpec(
        ((0, .02), (.03, .10), (.10, .14), (.60, .12), (.85, .08), (.90, .05), (.94, .05), (.97, .11), (1, .11)),
        1.0, (), (.20, .70)),
    "stamnos": ShapeSpec(
        ((0, .18), (.05, .19), (.10, .14), (.25, .30), (.55, .40), (.72, .36), (.82, .22), (.92, .20), (1, .23)),
        0.8, ((.62, .70, "horizontal", 90), (.62, .70, "horizontal", 270)), (.30, .66)),
    "skyphos": ShapeSpec(
        ((0, .20), (.05, .20), (.08, .16), (.25, .28), (.60, .38), (1, .42)),
        0.6, ((.78, .88, "horizontal", 90), (.78, .88, "horizontal", 270)), (.45, .90)),
}

# ---------------------------------------------------------------- sampling the six dimensions
# technique -> (fabrics with weights, dating windows, attributions, shapes)

assert set(SHAPE_SPECS) == set(terms("shape")), "every vocabulary shape needs a profile"


# ---------------------------------------------------------------- texture

CLAY = (196, 110, 58)
GLAZE = (22, 18, 16)
WHITE = (236, 228, 208)
PURPLE = (120, 40, 40)


# Fine detail (``data.synthetic.detail=true``): a scene is told apart by its figures' attributes (Herakles' club and
# lion skin, Athena's aegis, the Minotaur's bull head), details a few millimetres across on the vase. Each figural
# subject gets its own attribute beside every figure's head: a 3 x 3 grid of GLYPH_CELL-pixel cells of the texture,
# four of them inked, so that every attribute carries the same ink. Where one pixel of the image covers a cell or more
# (the model's input: about 3 texture pixels per pixel for a 112-pixel view) the attributes blur (two of them differ
# by about half the contrast on average); the view at its stored resolution (224: about 1.6) and a crop of its frieze
# resolve them (tests/test_zoom.py).
GLYPH_CELL = 3
SUBJECT_GLYPHS: dict[str, str] = {  # the inked cells of the 3 x 3 grid, row by row
    "Herakles and the Nemean lion": "110110000",
    "Herakles and the Erymanthian boar": "011011000",
    "Dionysos with satyrs and maenads": "101000101",
    "Athena Promachos": "010111000",
    "a warrior departing": "100100110",
    "a symposium scene": "000111010",
    "Theseus and the Minotaur": "100010011",
    "Achilles and Ajax playing dice": "001110100",
    "a woman at a grave stele": "010101010",
}


def glyph_cells(subject: str) -> list[tuple[int, int]]:
    """(row, column) of the inked cells of ``subject``'s attribute; [] for a subject without figures.

    >>> glyph_cells("Athena Promachos")
    [(0, 1), (1, 0), (1, 1), (1, 2)]
    """
    pattern = SUBJECT_GLYPHS.get(subject, "")
    return [(k // 3, k % 3) for k, c in enumerate(pattern) if c == "1"]


def _draw_glyph(draw: ImageDraw.ImageDraw, subject: str, x: int, y: int, color: tuple[int, int, int],
                ground: tuple[int, int, int]) -> None:
    size = 3 * GLYPH_CELL
    draw.rectangle([x - 1, y - 1, x + size, y + size], fill=ground)
    for r, c in glyph_cells(subject):
        x0, y0 = x + c * GLYPH_CELL, y + r * GLYPH_CELL
        draw.rectangle([x0, y0, x0 + GLYPH_CELL - 1, y0 + GLYPH_CELL - 1], fill=color)


def paint_texture(rec: VaseRecord, rng: np.random.Generator, size: tuple[int, int] = (512, 256),
                  detail: bool = False) -> Image.Image:
    """Paint the vase's unwrapped surface: u goes around the vase, v from the foot (bottom row) to the lip (top row);
    ``detail``: the figures' attributes (`SUBJECT_GLYPHS`), drawn without drawing from ``rng``."""
    w, h = size
    spec = SHAPE_SPECS[rec.shape]
    ground, figure = {
        "black-figure": (CLAY, GLAZE),
        "red-figure": (GLAZE, CLAY),
        "white-ground": (WHITE, GLAZE),
        "black-glaze": (GLAZE, CLAY),
    }[rec.technique]
    # Black-figure and red-figure bodies are glazed outside the frieze; white-ground and black-glaze are uniform.
    body = GLAZE if rec.technique in ("black-figure", "red-figure", "black-glaze") else WHITE
    if rec.technique == "black-figure" and rec.fabric == "Corinthian":
        body = CLAY
    img = Image.new("RGB", size, body)
    draw = ImageDraw.Draw(img)

    def y_px(v: float) -> int:
        return int(round((1.0 - v) * (h - 1)))

    b0, b1 = spec.band
    top, bottom = y_px(b1), y_px(b0)
    draw.rectangle([0, top, w, bottom], fill=ground)
    # the painter's hand (vase.annotate.dimension_sampling.PAINTERS): frame, the ornament band under the frieze, line weight,
    # added colour, ground levels
    painter = hand(rec.attribution)
    line = figure if rec.technique != "black-glaze" else CLAY
    if painter.framed:
        draw.rectangle([0, top - 4, w, top - 2], fill=line)
        draw.rectangle([0, bottom + 2, w, bottom + 4], fill=line)
    _ornament(draw, painter.ornament, bottom + 6, w, line, ground)
    band_h = bottom - top
    motif = rec.decoration
    accent = {"purple": PURPLE, "white": WHITE, None: None}[painter.accent]
    n = {"an animal frieze": 6, "palmettes and lotus buds": 8}.get(motif, 2 + int(rng.integers(0, 2)))
    for k in range(n):
        cx = int((k + 0.5) * w / n + rng.integers(-6, 7))
        lift = int(band_h * 0.12) * (1 if k % 2 else -1) if painter.staggered else 0
        _draw_motif(draw, motif, cx, top - lift, band_h, figure, rec.technique, rng, painter.stroke, accent,
                    glyph=ground if detail else None)
    # a dark foot and lip, as nearly every Greek vase has
    draw.rectangle([0, y_px(0.06), w, h], fill=GLAZE)
    draw.rectangle([0, 0, w, y_px(0.97)], fill=GLAZE)
    if detail:  # side A faces the front view (u = 0), as a catalogue photographs a vase: the first group centred there
        img = Image.fromarray(np.roll(np.asarray(img), -int(round(0.5 * w / n)), axis=1))
    return img


def _ornament(draw: ImageDraw.ImageDraw, kind: str, y: int, w: int, color: tuple[int, int, int],
              ground: tuple[int, int, int]) -> None:
    """The ornament band under the frieze, about 10 px of the texture on the frieze's ground colour: one of the
    hands' signatures (none: no band)."""
    if kind == "none":
        return
    draw.rectangle([0, y - 2, w, y + 12], fill=ground)
    for x in range(0, w, 16):
        if kind == "key":
            draw.rectangle([x, y, x + 8, y + 4], fill=color)
        elif kind == "tongues":
            draw.rectangle([x + 2, y, x + 12, y + 10], fill=color)
        elif kind == "dots":
            draw.ellipse([x + 4, y + 1, x + 11, y + 8], fill=color)
        elif kind == "zigzag":
            draw.line([x, y + 10, x + 8, y, x + 16, y + 10], fill=color, width=3)
        elif kind == "checker":
            draw.rectangle([x, y + (0 if x % 32 else 5), x + 8, y + (5 if x % 32 else 10)], fill=color)
        elif kind == "meander":
            draw.line([x, y + 10, x, y, x + 12, y, x + 12, y + 6, x + 6, y + 6], fill=color, width=2)
        elif kind == "waves":
            draw.arc([x, y, x + 16, y + 12], 180, 360, fill=color, width=3)


def _draw_motif(draw: ImageDraw.ImageDraw, motif: str, cx: int, top: int, bh: int, color: tuple[int, int, int],
                technique: str, rng: np.random.Generator, stroke: int = 2,
                accent: tuple[int, int, int] | None = None, glyph: tuple[int, int, int] | None = None) -> None:
    """One figure group of the frieze; ``glyph``: the ground's colour, to draw each figure's attribute on (fine
    detail), or None."""
    outline_only = technique == "white-ground"
    fill = None if outline_only else color
    lw = 2 if outline_only else 1
    if motif == "an animal frieze":
        y = top + int(bh * 0.55)
        draw.ellipse([cx - 18, y - 8, cx + 14, y + 8], fill=fill, outline=color, width=lw)
        draw.ellipse([cx + 10, y - 14, cx + 22, y - 2], fill=fill, outline=color, width=lw)
        for dx in (-14, -8, 4, 10):
            draw.line([cx + dx, y + 6, cx + dx, y + int(bh * 0.4)], fill=color, width=stroke)
        if accent is not None:
            draw.ellipse([cx - 8, y - 4, cx + 4, y + 4], fill=accent)
    elif motif == "palmettes and lotus buds":
        y = top + int(bh * 0.75)
        for a in np.linspace(-1.2, 1.2, 7):
            draw.line([cx, y, cx + int(20 * np.sin(a)), y - int(bh * 0.5 * np.cos(a))], fill=color, width=2)
        draw.ellipse([cx - 4, y - 4, cx + 4, y + 4], fill=color)
    elif motif == "a chariot race":
        y = top + int(bh * 0.6)
        draw.ellipse([cx - 10, y - 2, cx + 10, y + 18], outline=color, width=stroke + 1)
        draw.rectangle([cx - 26, y - 20, cx + 4, y], fill=fill, outline=color, width=lw)
        draw.ellipse([cx + 8, y - 24, cx + 40, y - 6], fill=fill, outline=color, width=lw)
        if accent is not None:
            draw.rectangle([cx - 22, y - 16, cx, y - 10], fill=accent)
    else:  # figural scenes: two or three standing figures with heads, torsos, arms and legs
        figs = 2 if motif in ("Achilles and Ajax playing dice", "a woman at a grave stele", "Theseus and the Minotaur") else 1
        for j in range(figs):
            x = cx + (j - (figs - 1) / 2) * 26
            head_y = top + int(bh * 0.15)
            r = max(4, bh // 14)
            draw.ellipse([x - r, head_y, x + r, head_y + 2 * r], fill=fill, outline=color, width=lw)
            draw.polygon([(x - 7, head_y + 2 * r), (x + 7, head_y + 2 * r), (x + 10, top + int(bh * 0.6)),
                          (x - 10, top + int(bh * 0.6))], fill=fill, outline=color)
            draw.line([x - 4, top + int(bh * 0.6), x - 8, top + int(bh * 0.95)], fill=color, width=stroke + 1)
            draw.line([x + 4, top + int(bh * 0.6), x + 8, top + int(bh * 0.95)], fill=color, width=stroke + 1)
            arm = int(rng.integers(8, 16))
            draw.line([x - 6, head_y + 3 * r, x - 6 - arm, head_y + 2 * r + arm], fill=color, width=stroke)
            draw.line([x + 6, head_y + 3 * r, x + 6 + arm, head_y + r], fill=color, width=stroke)
            if accent is not None:  # added colour: a belt and the face
                draw.rectangle([x - 8, top + int(bh * 0.42), x + 8, top + int(bh * 0.5)], fill=accent)
                draw.ellipse([x - r // 2, head_y + r // 2, x + r // 2, head_y + r + r // 2], fill=accent)
            if glyph is not None:  # the attribute, held in the raised hand, on a clear patch of the ground
                _draw_glyph(draw, motif, int(x + 2 + arm), head_y + r - 3 * GLYPH_CELL - 1, color, glyph)
        if motif == "a woman at a grave stele":
            draw.rectangle([cx + 34, top + int(bh * 0.2), cx + 44, top + int(bh * 0.95)], outline=color, width=2)


# ---------------------------------------------------------------- geometry


def _profile_curve(spec: ShapeSpec, n: int) -> tuple[np.ndarray, np.ndarray]:
    pts = np.array(spec.profile, dtype=float)
    # resample along arc length, then smooth lightly so silhouettes are curved rather than polygonal
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    s = np.concatenate([[0], np.cumsum(seg)]) / seg.sum()
    t = np.linspace(0, 1, n)
    y = np.interp(t, s, pts[:, 0])
    r = np.interp(t, s, pts[:, 1])
    kernel = np.array([1, 4, 6, 4, 1], dtype=float) / 16
    r = np.concatenate([r[:2], np.convolve(r, kernel, mode="valid"), r[-2:]])
    return y * spec.height, r


def body_mesh(spec: ShapeSpec, n_theta: int = 64, n_y: int = 80) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, r = _profile_curve(spec, n_y)
    theta = np.linspace(0, 2 * np.pi, n_theta + 1)  # seam duplicated so UVs wrap cleanly
    tt, yy = np.meshgrid(theta, np.arange(n_y), indexing="xy")
    rr = r[yy]
    verts = np.stack([rr * np.sin(tt), y[yy], rr * np.cos(tt)], axis=-1).reshape(-1, 3)
    uv = np.stack([tt / (2 * np.pi), y[yy] / spec.height], axis=-1).reshape(-1, 2)
    faces = []
    cols = n_theta + 1
    for i in range(n_y - 1):
        for j in range(n_theta):
            a, b, c, d = i * cols + j, i * cols + j + 1, (i + 1) * cols + j, (i + 1) * cols + j + 1
            faces += [[a, b, d], [a, d, c]]
    # a base disc closes the foot
    centre = len(verts)
    verts = np.vstack([verts, [[0.0, y[0], 0.0]]])
    uv = np.vstack([uv, [[0.5, 0.0]]])
    faces += [[centre, j + 1, j] for j in range(n_theta)]
    return verts, np.asarray(faces, dtype=np.int64), uv


def _handle(spec: ShapeSpec, y0: float, y1: float, kind: str, angle_deg: float,
            n_path: int = 24, n_ring: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    yc, rc = _profile_curve(spec, 200)

    def radius_at(yf: float) -> float:
        return float(np.interp(yf * spec.height, yc, rc))

    a = np.deg2rad(angle_deg)
    out = np.array([np.sin(a), 0.0, np.cos(a)])
    p0 = out * radius_at(y0) * 0.95 + np.array([0, y0 * spec.height, 0])
    p2 = out * radius_at(y1) * 0.95 + np.array([0, y1 * spec.height, 0])
    bulge = 0.16 if kind == "vertical" else 0.12
    p1 = (p0 + p2) / 2 + out * bulge + (np.array([0, 0.08, 0]) if kind == "vertical" else 0)
    t = np.linspace(0, 1, n_path)[:, None]
    path = (1 - t) ** 2 * p0 + 2 * (1 - t) * t * p1 + t ** 2 * p2
    tangent = np.gradient(path, axis=0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    side = np.cross(tangent, out)
    side /= np.linalg.norm(side, axis=1, keepdims=True) + 1e-9
    normal = np.cross(side, tangent)
    thick = 0.022
    phi = np.linspace(0, 2 * np.pi, n_ring, endpoint=False)
    ring = np.cos(phi)[None, :, None] * side[:, None, :] + np.sin(phi)[None, :, None] * normal[:, None, :]
    verts = (path[:, None, :] + thick * ring).reshape(-1, 3)
    faces = []
    for i in range(n_path - 1):
        for j in range(n_ring):
            a_, b_ = i * n_ring + j, i * n_ring + (j + 1) % n_ring
            c_, d_ = a_ + n_ring, b_ + n_ring
            faces += [[a_, b_, d_], [a_, d_, c_]]
    uv = np.tile([[0.25, 0.985]], (len(verts), 1))  # handles take the glazed lip colour
    return verts, np.asarray(faces, dtype=np.int64), uv


def build_mesh(rec: VaseRecord, rng: np.random.Generator, detail: bool = False):
    """The textured trimesh of one vase (body of revolution + handles); ``detail``: `paint_texture`'s."""
    return textured_vase(SHAPE_SPECS[rec.shape], paint_texture(rec, rng, detail=detail))


def textured_vase(spec: ShapeSpec, texture: Image.Image):
    """The body of revolution of ``spec`` with its handles, one mesh, textured with ``texture``."""
    # lazy: trimesh
    import trimesh

    parts = [body_mesh(spec)] + [_handle(spec, *h) for h in spec.handles]
    verts, faces, uvs, offset = [], [], [], 0
    for v, f, uv in parts:
        verts.append(v)
        faces.append(f + offset)
        uvs.append(uv)
        offset += len(v)
    material = trimesh.visual.material.PBRMaterial(baseColorTexture=texture, metallicFactor=0.0, roughnessFactor=0.8,
                                                   doubleSided=True)
    visual = trimesh.visual.TextureVisuals(uv=np.vstack(uvs), material=material)
    return trimesh.Trimesh(vertices=np.vstack(verts), faces=np.vstack(faces), visual=visual, process=False)


def mesh_to_glb(mesh) -> bytes:
    """GLB bytes of a mesh, deterministic for the same mesh."""
    # lazy: trimesh
    import trimesh

    scene = trimesh.Scene(mesh, base_frame="world")
    return trimesh.exchange.gltf.export_glb(scene, include_normals=True)


# ---------------------------------------------------------------- the dataset


@one_builder_at_a_time
def generate(root: str | Path, num: int = 32, seed: int = 0, val_fraction: float = 0.25,
             overwrite: bool = False, progress: bool = True, detail: bool = False,
             workers: int | str = 1) -> dict[str, list[VaseRecord]]:
    """Write ``num`` procedural vases under ``root``; byte-identical output for the same (num, seed, val_fraction,
    detail), whatever ``workers``. ``detail``: the figures' attributes (`SUBJECT_GLYPHS`; the same records, the same
    vases otherwise). ``workers``: processes that build the meshes (`vase.workers.workers_for`: ``auto`` or a count).

    Existing output with the same parameters is reused (``overwrite=False``): the manifest records them.
    """
    if num < 2:
        raise ValueError(f"data.num_vases must be at least 2 (one train, one val), got {num}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"data.val_fraction must lie in (0, 1), got {val_fraction}")
    root = Path(root)
    manifest_path = root / "synthetic.json"
    params = {"num": num, "seed": seed, "val_fraction": val_fraction, "generator": GENERATOR}
    if detail:  # only when asked: every set drawn before keeps its manifest, and so its renders and adapters
        params["detail"] = True
    if root.is_dir() and not manifest_path.exists() and any(root.iterdir()):
        # a folder with content but no manifest of ours holds someone's data: never write synthetic vases into it
        raise DataError(f"{root}: holds files that the synthetic generator did not write (no synthetic.json); "
                        f"refusing to generate synthetic vases into it. Point data.root at an empty or cache folder")
    if manifest_path.exists() and not overwrite:
        try:
            if json.loads(manifest_path.read_text()) == params:
                return load_split_records(root)
        except json.JSONDecodeError:
            pass  # a broken manifest means a broken earlier run: regenerate
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()  # an empty folder: nothing to keep, and the new set moves into its place whole
    elif manifest_path.exists() and not built_by_vase(root):
        (root / BUILT_MARKER).write_text("synthetic set written by vase (synthetic.json)\n")  # ours: replaceable
    # the whole set is written in a hidden sibling and moved into place at once: a kill leaves no half-written root
    # (which a later run would rightly refuse as a folder the generator did not write)
    with atomic_directory(root, replace=True) as tmp:
        splits = _write_set(tmp, num, seed, val_fraction, params, progress, workers)
    return splits


def vase_glb(task: tuple[VaseRecord, int, int, bool]) -> bytes:
    """The GLB bytes of vase ``i`` of draw ``seed``: ``task`` is (record, seed, i, detail). Its texture's randomness
    is its own (seeded by draw and index), so vases can be built in any order or process."""
    rec, seed, i, detail = task
    return mesh_to_glb(build_mesh(rec, np.random.default_rng([seed, i]), detail=detail))


def _write_set(root: Path, num: int, seed: int, val_fraction: float, params: dict,
               progress: bool, workers: int | str = 1) -> dict[str, list[VaseRecord]]:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    records = [sample_record(rng, i) for i in range(num)]  # one stream of draws, in order: the same set every time
    detail = bool(params.get("detail"))
    glbs = ordered_map(vase_glb, [(rec, seed, i, detail) for i, rec in enumerate(records)],
                       workers_for(workers, num))
    built: Any = zip(records, glbs)
    if progress:
        built = progress_bar(built, total=num, desc="synthesising vases", unit="vase")
    try:
        for rec, glb in built:
            atomic_write_bytes(root / rec.model, glb)
    finally:
        glbs.close()  # stops the workers now, also on an error
    n_val = max(1, int(round(num * val_fraction)))
    splits = {"train": records[:-n_val], "val": records[-n_val:]}
    for split, recs in splits.items():
        atomic_write_text(root / "annotations" / f"{split}.json",
                          json.dumps([r.to_json() for r in recs], indent=1, sort_keys=True, ensure_ascii=False))
    atomic_write_text(root / "synthetic.json", json.dumps(params, sort_keys=True))
    return splits


def load_split_records(root: str | Path) -> dict[str, list[VaseRecord]]:
    root = Path(root)
    return {split: load_annotations(root / "annotations" / f"{split}.json") for split in ("train", "val")}


def _main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--num", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--val-fraction", type=float, default=0.25)
    args = ap.parse_args()
    splits = generate(args.root, args.num, args.seed, args.val_fraction, overwrite=True)
    print({k: len(v) for k, v in splits.items()})


if __name__ == "__main__":
    _main()


def build_from_params(p: VaseParams) -> Any:
    """The textured mesh of ``p``: the family's profile with its foot (lowest 12 %), neck (above the widest point)
    and body radii and its height scaled; the family's handles or none; the technique's colours in plain bands."""
    base = SHAPE_SPECS[p.shape]
    widest = max(base.profile, key=lambda q: q[1])[0]
    profile = tuple((y, r * (p.foot if y < 0.12 else p.neck if y > widest + 0.1 else p.body)) for y, r in base.profile)
    spec = ShapeSpec(profile=profile, height=base.height * p.height, handles=base.handles if p.handles else (),
                     band=base.band)
    rec = VaseRecord("params", "Athenian", p.technique, p.shape, (-500, -475), "palmettes and lotus buds",
                     "unattributed")
    return textured_vase(spec, paint_texture(rec, np.random.default_rng(0)))
