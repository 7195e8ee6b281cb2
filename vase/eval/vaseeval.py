"""VaseEval: how close generated 3D vases come to ground-truth ones (the paper's generator comparison).

    python evaluate.py action=vaseeval gt_dir=/data/vaseeval/gt \
        'methods={triposg: /out/triposg, hunyuan3d: /out/hunyuan3d}' output=vaseeval.json

Predictions are matched to ground truth by file stem (``<stem>.glb``, or ``<stem>_<anything>.glb`` as generators
name their outputs). Both meshes are normalised (bounding-box centre to the origin, farthest vertex at distance 1:
the unit bounding sphere) and, with ``vaseeval.align=icp``, the prediction is aligned to the ground truth by ICP
(four starting turns about the vertical axis, the best kept). Then, on ``samples`` seeded surface samples each:

* ``chamfer_distance``  mean squared nearest-neighbour distance prediction -> ground truth plus ground truth ->
  prediction (``vaseeval.chamfer=l1``: unsquared distances);
* ``normal_consistency`` mean |cos| between each sample's face normal and its nearest neighbour's, both ways
  (``vaseeval.normals=signed`` keeps the sign: a mesh with flipped faces then scores -1);
* ``f_score``           harmonic mean of precision (prediction samples within ``f_threshold`` of the ground truth)
  and recall (the reverse); the threshold is a fraction of the normalised scale (the unit sphere's radius), 0.01;

and, on renders of both from the same cameras by vase's renderer (``views``, ``resolution``): ``psnr`` and ``ssim``
(torchmetrics), ``lpips`` (torchmetrics; its backbone weights cannot be downloaded here, so it is computed only with
``vaseeval.lpips.weights`` pointing at a local torchvision AlexNet/VGG file, otherwise null with the reason),
``clip_i`` (cosine of CLIP image embeddings, render vs render) and ``clip_t`` (render vs the vase's caption, from
``vaseeval.captions``). A missing or unreadable prediction is listed with its reason, never scored 0.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

from vase import markdown as md
from vase.errors import ConfigError, DataError
from vase.io import atomic_write_bytes
from vase.progress import progress_bar
from vase.render.renderer import VIEW_DIRECTIONS, Renderer, RenderSettings, load_scene, parts_from_scene
from vase.views import VIEWS

METRICS = ("chamfer_distance", "normal_consistency", "f_score", "psnr", "ssim", "lpips", "clip_i", "clip_t")
HIGHER_IS_BETTER = {"chamfer_distance": False, "lpips": False}


@dataclass
class Settings:
    samples: int = 10000
    seed: int = 0
    chamfer: str = "l2"
    align: str = "none"
    f_threshold: float = 0.01
    normals: str = "unsigned"
    views: tuple[str, ...] = VIEWS
    resolution: int = 256
    lpips_weights: str | None = None
    lpips_net: str = "alex"
    sheet_items: int = 4

    def __post_init__(self) -> None:
        for key, value, allowed in (("chamfer", self.chamfer, ("l2", "l1")), ("align", self.align, ("none", "icp")),
                                    ("normals", self.normals, ("unsigned", "signed")),
                                    ("lpips.net", self.lpips_net, ("alex", "vgg"))):
            if value not in allowed:
                raise ConfigError(f"vaseeval.{key}={value!r} must be one of {list(allowed)}")


# ------------------------------------------------------------------------------------------------ geometry


def as_mesh(scene):
    """All of a scene's triangles in world coordinates, as one mesh."""
    # lazy: trimesh
    import trimesh

    meshes = [g for g in scene.dump() if isinstance(g, trimesh.Trimesh) and len(g.faces)]
    return trimesh.util.concatenate(meshes) if len(meshes) > 1 else meshes[0]


def normalising_transform(mesh) -> np.ndarray:
    """4x4 that moves the bounding-box centre to the origin and scales the farthest vertex to distance 1."""
    v = np.asarray(mesh.vertices, dtype=np.float64)
    centre = (v.min(0) + v.max(0)) / 2
    radius = float(np.linalg.norm(v - centre, axis=1).max()) or 1.0
    t = np.eye(4)
    t[:3, :3] /= radius
    t[:3, 3] = -centre / radius
    return t


def surface_samples(mesh, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` area-weighted surface points and their face normals, the same for the same seed."""
    # lazy: trimesh
    import trimesh

    points, faces = trimesh.sample.sample_surface(mesh, n, seed=seed)
    return np.asarray(points), np.asarray(mesh.face_normals[faces])


def icp(source: np.ndarray, target: np.ndarray, turns: int = 4) -> np.ndarray:
    """Rigid 4x4 aligning ``source`` points to ``target`` by ICP, started from ``turns`` rotations about the vertical
    axis (a vase looks alike from many sides, so one start can settle on the wrong one); the lowest cost wins."""
    # lazy: trimesh
    import trimesh

    best, best_cost = np.eye(4), np.inf
    for k in range(turns):
        a = 2 * np.pi * k / turns
        start = np.eye(4)
        start[[0, 0, 2, 2], [0, 2, 0, 2]] = [np.cos(a), np.sin(a), -np.sin(a), np.cos(a)]
        matrix, _, cost = trimesh.registration.icp(source, target, initial=start, max_iterations=60, scale=False)
        if cost < best_cost:
            best, best_cost = matrix, cost
    return best


def nearest(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distance from each point of ``a`` to its nearest in ``b``, and that neighbour's index."""
    # lazy: scipy
    from scipy.spatial import cKDTree

    return cKDTree(b).query(a, k=1)


def geometry_metrics(pred: tuple[np.ndarray, np.ndarray], gt: tuple[np.ndarray, np.ndarray],
                     s: Settings) -> dict[str, float]:
    """Chamfer distance, normal consistency and F-score of two sampled surfaces (points, normals).

    >>> p = (np.array([[0.0, 0, 0], [1, 0, 0]]), np.array([[0, 0, 1.0], [0, 0, 1]]))
    >>> g = (np.array([[0.0, 0, 0], [1, 0, 0.1]]), np.array([[0, 0, 1.0], [0, 0, -1]]))
    >>> m = geometry_metrics(p, g, Settings(f_threshold=0.05))
    >>> round(m["chamfer_distance"], 6), m["normal_consistency"], round(m["f_score"], 3)
    (0.01, 1.0, 0.5)
    """
    (pp, pn), (gp, gn) = pred, gt
    d_pg, i_pg = nearest(pp, gp)
    d_gp, i_gp = nearest(gp, pp)
    chamfer = (np.mean(d_pg ** 2) + np.mean(d_gp ** 2)) if s.chamfer == "l2" else (np.mean(d_pg) + np.mean(d_gp))
    cos_pg = np.sum(pn * gn[i_pg], axis=1)
    cos_gp = np.sum(gn * pn[i_gp], axis=1)
    if s.normals == "unsigned":
        cos_pg, cos_gp = np.abs(cos_pg), np.abs(cos_gp)
    precision = float(np.mean(d_pg < s.f_threshold))
    recall = float(np.mean(d_gp < s.f_threshold))
    f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"chamfer_distance": float(chamfer), "normal_consistency": float((cos_pg.mean() + cos_gp.mean()) / 2),
            "f_score": float(f)}


# ------------------------------------------------------------------------------------------------ images


def image_metrics(gt_views: list[Image.Image], pred_views: list[Image.Image], lpips: Any) -> dict[str, float | None]:
    """PSNR and SSIM (and LPIPS where a network is given) of matched renders, averaged over the views."""
    # lazy: torchmetrics
    from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

    def stack(ims: list[Image.Image]) -> torch.Tensor:
        return torch.stack([torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1) for im in ims])

    a, b = stack(pred_views), stack(gt_views)
    psnr = peak_signal_noise_ratio(a, b, data_range=1.0, reduction="none", dim=(1, 2, 3))
    out: dict[str, float | None] = {
        "psnr": float(torch.clamp(psnr, max=100.0).mean()),  # identical views: infinite PSNR, reported as 100 dB
        "ssim": float(structural_similarity_index_measure(a, b, data_range=1.0)),
    }
    if lpips is not None:
        with torch.inference_mode():
            out["lpips"] = float(lpips(a * 2 - 1, b * 2 - 1).mean())
    return out


class LPIPS:
    """torchmetrics' LPIPS network with its backbone read from a local torchvision weights file (never downloaded):
    the file is linked, read-only, under a private torch-hub folder with the name torchvision looks for."""

    def __init__(self, weights: str | Path, net: str = "alex") -> None:
        # lazy: torchvision, torchmetrics
        import torchvision
        from torchmetrics.functional.image.lpips import _LPIPS

        path = Path(weights).expanduser()
        if not path.is_file():
            raise ConfigError(f"vaseeval.lpips.weights={path}: no such file (a torchvision {net} weights file)")
        enum = {"alex": torchvision.models.AlexNet_Weights, "vgg": torchvision.models.VGG16_Weights}[net].DEFAULT
        with tempfile.TemporaryDirectory() as hub, _hub_dir(hub):
            (Path(hub) / "checkpoints").mkdir()
            (Path(hub) / "checkpoints" / Path(enum.url).name).symlink_to(path.resolve())
            try:
                self.net = _LPIPS(pretrained=True, net=net).eval()
            except Exception as e:
                raise ConfigError(f"vaseeval.lpips.weights={path}: not torchvision {net} weights ({e})") from e

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.net(a, b).flatten()


@contextlib.contextmanager
def _hub_dir(path: str):
    old = torch.hub.get_dir()
    torch.hub.set_dir(path)
    try:
        yield
    finally:
        torch.hub.set_dir(old)


def render_normalised(renderer: Any, scene, transform: np.ndarray, views: tuple[str, ...]) -> list[Image.Image]:
    """Views of ``scene`` moved by ``transform`` into the normalised frame, framed as the unit sphere (so the
    ground truth and a prediction are seen by the same cameras)."""
    moved = scene.copy()
    moved.apply_transform(transform)
    return renderer.render_parts(parts_from_scene(moved), [VIEW_DIRECTIONS[v] for v in views],
                                 frame=((0.0, 0.0, 0.0), 1.0))


# ------------------------------------------------------------------------------------------------ the run


def match(gt_dir: Path, pred_dir: Path) -> tuple[dict[str, Path], list[str], list[str]]:
    """Ground-truth stem -> prediction file; ground truth without prediction; predictions without ground truth."""
    gts = sorted(p.stem for p in gt_dir.glob("*.glb"))
    preds = sorted(pred_dir.glob("*.glb")) if pred_dir.is_dir() else []
    out: dict[str, Path] = {}
    used: set[Path] = set()
    for stem in sorted(gts, key=len, reverse=True):  # longer stems first, so "a_1" does not take "a_10_mesh.glb"
        exact = pred_dir / f"{stem}.glb"
        cand = exact if exact in preds else next((p for p in preds if p.stem.startswith(stem + "_") and p not in used),
                                                 None)
        if cand is not None:
            out[stem] = cand
            used.add(cand)
    return dict(sorted(out.items())), [s for s in gts if s not in out], [p.name for p in preds if p not in used]


def run_vaseeval(gt_dir: str | Path, methods: dict[str, str | Path], s: Settings, clip: Any = None,
                 captions: dict[str, str] | None = None, progress: bool = True) -> dict[str, Any]:
    """Score every method against the ground truth; returns per-method means, per-item values and what failed."""
    gt_dir = Path(gt_dir)
    if not gt_dir.is_dir() or not any(gt_dir.glob("*.glb")):
        raise ConfigError(f"gt_dir={gt_dir}: no .glb files to compare against")
    if not methods:
        raise ConfigError("methods is empty: give {name: folder of predicted GLBs, ...}")
    lpips = LPIPS(s.lpips_weights, s.lpips_net) if s.lpips_weights else None
    absent = {}
    if lpips is None:
        absent["lpips"] = "no local backbone weights (vaseeval.lpips.weights); LPIPS needs them and none can be downloaded"
    if clip is None:
        absent["clip_i"] = absent["clip_t"] = "no CLIP encoder configured"
    elif not captions:
        absent["clip_t"] = "no captions given (vaseeval.captions)"
    result: dict[str, Any] = {"settings": {k: v for k, v in s.__dict__.items() if k != "lpips_weights"},
                              "absent": absent, "methods": {}}
    gt_cache: dict[str, Any] = {}
    renders: dict[str, dict[str, Image.Image]] = {}
    with Renderer(RenderSettings(resolution=s.resolution)) as renderer:
        work = []
        for name, folder in methods.items():
            matched, missing, extra = match(gt_dir, Path(folder))
            if not Path(folder).is_dir():
                raise ConfigError(f"methods.{name}={folder}: not a folder")
            result["methods"][name] = {"items": {}, "failed": [{"item": m, "reason": "no prediction"} for m in missing],
                                       "unmatched_predictions": extra}
            work += [(name, stem, path) for stem, path in matched.items()]
        it: Any = work
        if progress and work:
            it = progress_bar(work, desc="VaseEval", unit="mesh")
        for name, stem, path in it:
            entry = result["methods"][name]
            if stem not in gt_cache:
                scene = load_scene(gt_dir / f"{stem}.glb")  # a broken ground truth is the user's to fix: raise
                mesh = as_mesh(scene)
                t = normalising_transform(mesh)
                samples = surface_samples(mesh.copy().apply_transform(t), s.samples, s.seed)
                views = render_normalised(renderer, scene, t, s.views)
                gt_cache[stem] = (samples, views, _clip_images(clip, views))
                renders.setdefault(stem, {})["ground truth"] = views[0]
            (gp, gn), gviews, gclip = gt_cache[stem]
            try:
                scene = load_scene(path)
                mesh = as_mesh(scene)
                t = normalising_transform(mesh)
                pp, pn = surface_samples(mesh.copy().apply_transform(t), s.samples, s.seed)
                if s.align == "icp":
                    a = icp(pp, gp)
                    pp = pp @ a[:3, :3].T + a[:3, 3]
                    pn = pn @ a[:3, :3].T
                    t = a @ t
                values: dict[str, Any] = geometry_metrics((pp, pn), (gp, gn), s)
                pviews = render_normalised(renderer, scene, t, s.views)
                values.update(image_metrics(gviews, pviews, lpips))
                if clip is not None:
                    pclip = _clip_images(clip, pviews)
                    values["clip_i"] = float((pclip * gclip).sum(-1).mean())
                    if captions and stem in captions:
                        text = clip.encode([captions[stem]])
                        text = text / text.norm(dim=-1, keepdim=True)
                        values["clip_t"] = float((pclip @ text.T).mean())
                renders.setdefault(stem, {})[name] = pviews[0]
                entry["items"][stem] = values
            except DataError as e:
                entry["failed"].append({"item": stem, "reason": str(e)})
    for entry in result["methods"].values():
        items = entry["items"]
        entry["n_items"] = len(items)
        entry["mean"] = {m: (float(np.mean([v[m] for v in items.values() if v.get(m) is not None]))
                             if any(v.get(m) is not None for v in items.values()) else None) for m in METRICS}
    result["_renders"] = renders
    return result


def _clip_images(clip: Any, views: list[Image.Image]) -> torch.Tensor | None:
    if clip is None:
        return None
    f = clip.encode_images(views)
    return f / f.norm(dim=-1, keepdim=True)


def markdown_table(result: dict[str, Any]) -> str:
    """Methods as rows, metrics as columns, arrows for the better direction: the paper's generator comparison."""
    names = {"psnr": "PSNR", "ssim": "SSIM", "lpips": "LPIPS", "chamfer_distance": "CD", "normal_consistency": "NC",
             "f_score": "F-score", "clip_i": "CLIP-I", "clip_t": "CLIP-T"}
    order = ("psnr", "ssim", "lpips", "chamfer_distance", "normal_consistency", "f_score", "clip_i", "clip_t")
    lines = md.table(["Method", *(f"{names[m]} {'↑' if HIGHER_IS_BETTER.get(m, True) else '↓'}" for m in order), "n",
                      "failed"],
                     [[name, *("n/a" if e["mean"][m] is None else f"{e['mean'][m]:.4f}" for m in order), e["n_items"],
                       len(e["failed"])] for name, e in result["methods"].items()])
    notes = [f"- {m}: n/a, {why}" for m, why in result["absent"].items()]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def contact_sheet(result: dict[str, Any], path: Path, items: int = 4) -> Path | None:
    """Front renders: ground truth beside each method, one row per item (the first ``items``)."""
    renders = result.get("_renders", {})
    stems = sorted(renders)[:items]
    if not stems:
        return None
    cols = ["ground truth", *result["methods"]]
    side = next(iter(renders[stems[0]].values())).size[0]
    sheet = Image.new("RGB", (side * len(cols), (side + 18) * len(stems) + 18), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for c, name in enumerate(cols):
        draw.text((c * side + 4, 3), name, fill=(0, 0, 0))
    for r, stem in enumerate(stems):
        y = 18 + r * (side + 18)
        draw.text((4, y + side + 2), stem, fill=(60, 60, 60))
        for c, name in enumerate(cols):
            im = renders[stem].get(name)
            if im is not None:
                sheet.paste(im, (c * side, y))
            else:
                draw.text((c * side + 8, y + side // 2), "failed", fill=(180, 0, 0))
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    return atomic_write_bytes(path, buf.getvalue())
