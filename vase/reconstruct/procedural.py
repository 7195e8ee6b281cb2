"""A procedural generator that runs anywhere: fit a surface of revolution to the object's silhouette in its photo
and paint the photo onto it.

Greek vases are (nearly) bodies of revolution, so the silhouette of a front photo gives the profile: per image row,
the half-width of the foreground is the radius at that height. The texture is the photo projected around the body
(the back shows the front mirrored). Handles and anything off-axis are not modelled. It is an honest baseline and
the path by which VaseEval and the rest of the 3D pipeline run end to end without a GPU generator.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from vase.data.synthetic import ShapeSpec, body_mesh, mesh_to_glb
from vase.images import foreground_mask, open_photo
from vase.reconstruct.base import GenerationError


class SilhouetteFit:
    """``(images, output)``: a textured GLB from the first image's silhouette."""

    def __init__(self, tolerance: float = 30.0, rows: int = 48, texture: tuple[int, int] = (512, 256)) -> None:
        self.tolerance, self.rows, self.texture = tolerance, rows, texture

    def profile(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int, float, np.ndarray]:
        """(height fractions bottom->top, radii as fractions of the height, top row, bottom row, centre column,
        half-width per row in pixels)."""
        rows = np.flatnonzero(mask.any(axis=1))
        if len(rows) < 8:
            raise GenerationError("no object found in the photo (its silhouette is under 8 rows)")
        top, bottom = int(rows[0]), int(rows[-1])
        cols = [np.flatnonzero(mask[r]) for r in range(top, bottom + 1)]
        left = np.array([c[0] if len(c) else np.nan for c in cols], dtype=float)
        right = np.array([c[-1] if len(c) else np.nan for c in cols], dtype=float)
        centre = float(np.nanmedian((left + right) / 2))
        half = np.nan_to_num(np.maximum(right - centre, centre - left) + 0.5, nan=0.0)
        height = bottom - top + 1
        idx = np.linspace(0, height - 1, self.rows).round().astype(int)
        y = 1.0 - idx / (height - 1)  # image rows run top->bottom; the profile bottom->top
        r = half[idx] / height
        return y[::-1], np.maximum(r[::-1], 1e-3), top, bottom, centre, half

    def __call__(self, images: list[Path], output: Path) -> None:
        # lazy: trimesh
        import trimesh

        d = open_photo(images[0], min_side=16)
        if d.image is None:
            raise GenerationError(f"{images[0]}: {d.reason}")
        rgb = np.asarray(d.image)
        mask = foreground_mask(rgb, self.tolerance)
        y, r, top, bottom, centre, half = self.profile(mask)
        spec = ShapeSpec(profile=tuple(zip(y.tolist(), r.tolist())), height=1.0, handles=(), band=(0.3, 0.6))
        verts, faces, uv = body_mesh(spec)
        # texture: column u goes around the body (theta = 2*pi*u, seen from the front at u = 0), row 0 is the lip
        tw, th = self.texture
        theta = 2 * np.pi * (np.arange(tw) + 0.5) / tw
        rows = top + (np.arange(th) / (th - 1) * (bottom - top)).round().astype(int)
        cols = centre + np.sin(theta)[None, :] * half[rows - top][:, None]
        cols = np.clip(cols.round().astype(int), 0, rgb.shape[1] - 1)
        tex = Image.fromarray(rgb[rows[:, None], cols])
        material = trimesh.visual.material.PBRMaterial(baseColorTexture=tex, metallicFactor=0.0, roughnessFactor=0.8,
                                                       doubleSided=True)
        mesh = trimesh.Trimesh(vertices=verts, faces=faces, visual=trimesh.visual.TextureVisuals(uv=uv,
                                                                                                  material=material),
                               process=False)
        output.write_bytes(mesh_to_glb(mesh))
