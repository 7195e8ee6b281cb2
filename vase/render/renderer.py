"""Headless rendering of GLB models into the six canonical views (and orbit frames) with moderngl over EGL.

The renderer reads the GLB itself (every mesh in the scene graph with its transform, base-colour texture or
colour), so real TripoSG/Hunyuan3D outputs and the synthetic vases go through the same code. Views are cached:
a vase is rendered again only when its GLB bytes or the render settings change.

Run by hand: ``python -m vase.data.render --root /data/VaseVQA-3D --resolution 224`` (see ``vase/data/render.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from vase.errors import DataError
from vase.io import atomic_write_bytes, atomic_write_json, inside
from vase.progress import progress_bar
from vase.views import RENDER_CACHE_FILE, VIEWS, model_file, orbit_dir, sheet_path, view_path
from vase.workers import ordered_map, workers_for

VERTEX_SHADER = """
#version 330
uniform mat4 mvp;
uniform mat4 model;
in vec3 in_pos;
in vec3 in_normal;
in vec2 in_uv;
out vec3 v_normal;
out vec2 v_uv;
void main() {
    gl_Position = mvp * vec4(in_pos, 1.0);
    v_normal = mat3(model) * in_normal;
    v_uv = in_uv;
}
"""

FRAGMENT_SHADER = """
#version 330
uniform sampler2D tex;
uniform vec4 base_color;
uniform bool use_texture;
uniform vec3 light_dir;
uniform vec3 view_dir;
in vec3 v_normal;
in vec2 v_uv;
out vec4 f_color;
void main() {
    vec4 c = base_color;
    if (use_texture) { c = c * texture(tex, v_uv); }
    vec3 n = normalize(v_normal);
    // two-sided lighting: open vessels show their inside, whose normals face away
    float key = abs(dot(n, normalize(light_dir)));
    float head = abs(dot(n, normalize(view_dir)));
    float shade = 0.30 + 0.45 * key + 0.30 * head;
    f_color = vec4(c.rgb * min(shade, 1.15), 1.0);
}
"""


@dataclass(frozen=True)
class RenderSettings:
    """What determines a rendered image; part of the cache key."""

    resolution: int = 224
    fov_deg: float = 35.0
    background: tuple[int, int, int] = (128, 128, 128)
    margin: float = 1.08
    samples: int = 4  # multisampling for clean silhouettes

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray) -> np.ndarray:
    f = target - eye
    f = f / np.linalg.norm(f)
    s = np.cross(f, up)
    s = s / np.linalg.norm(s)
    u = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def perspective(fov_deg: float, near: float, far: float) -> np.ndarray:
    f = 1.0 / np.tan(np.deg2rad(fov_deg) / 2)
    m = np.zeros((4, 4))
    m[0, 0] = f
    m[1, 1] = f
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2 * far * near / (near - far)
    m[3, 2] = -1
    return m


# direction from the object's centre to the camera, and the camera's up vector (glTF is Y-up, front is +Z)
VIEW_DIRECTIONS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "front": ((0, 0, 1), (0, 1, 0)),
    "back": ((0, 0, -1), (0, 1, 0)),
    "left": ((-1, 0, 0), (0, 1, 0)),
    "right": ((1, 0, 0), (0, 1, 0)),
    "top": ((0, 1, 0), (0, 0, -1)),
    "bottom": ((0, -1, 0), (0, 0, 1)),
}


def orbit_direction(
    k: int, n: int, elevation_deg: float = 15.0
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """Camera direction of orbit frame ``k`` of ``n`` (360 degrees around the vertical axis)."""
    a = 2 * np.pi * k / n
    e = np.deg2rad(elevation_deg)
    return ((float(np.sin(a) * np.cos(e)), float(np.sin(e)), float(np.cos(a) * np.cos(e))), (0.0, 1.0, 0.0))


@dataclass
class _Part:
    vertices: np.ndarray  # (n, 3) float32, world space
    normals: np.ndarray
    uv: np.ndarray
    faces: np.ndarray
    image: Image.Image | None
    color: tuple[float, float, float, float]


def load_scene(path: str | Path, what: str = "mesh"):
    """A mesh file (GLB, OBJ, ...) as a trimesh Scene with at least one triangle; a DataError naming the file
    otherwise (missing, empty, unreadable, no triangles). The one reader for rendering, VaseEval and reconstruction."""
    # lazy: trimesh
    import trimesh

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: {what} not found")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: empty file (0 bytes), not a readable {what}")
    try:
        scene = trimesh.load(str(path), force="scene", process=False)
    except Exception as e:  # trimesh raises many types for a bad file; all mean the same thing to the user
        raise DataError(f"{path}: not a readable {what} ({type(e).__name__}: {e})") from e
    if not any(isinstance(g, trimesh.Trimesh) and len(g.faces) for g in scene.geometry.values()):
        raise DataError(f"{path}: {what} holds no triangle mesh")
    return scene


def load_glb(path: str | Path) -> list[_Part]:
    """Read a GLB into world-space parts with their textures; a corrupt or empty file is a DataError naming it."""
    parts = parts_from_scene(load_scene(path, "GLB model"))
    if not parts:
        raise DataError(f"{path}: GLB model holds no triangle mesh to render")
    return parts


def parts_from_scene(scene) -> list[_Part]:
    """World-space parts with their textures from a trimesh Scene (or a single Trimesh)."""
    # lazy: trimesh
    import trimesh

    if isinstance(scene, trimesh.Trimesh):
        scene = trimesh.Scene(scene)
    parts = []
    for node in scene.graph.nodes_geometry:
        transform, geom_name = scene.graph[node]
        mesh = scene.geometry[geom_name]
        if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
            continue
        verts = trimesh.transform_points(mesh.vertices, transform).astype(np.float32)
        normals = (mesh.vertex_normals @ transform[:3, :3].T).astype(np.float32)
        image, color, uv = None, (0.8, 0.8, 0.8, 1.0), np.zeros((len(verts), 2), np.float32)
        vis = mesh.visual
        if isinstance(vis, trimesh.visual.TextureVisuals):
            mat = vis.material
            tex = getattr(mat, "baseColorTexture", None) or getattr(mat, "image", None)
            factor = getattr(mat, "baseColorFactor", None)
            if factor is not None:
                color = tuple(float(x) / 255.0 if np.max(factor) > 1 else float(x) for x in factor)
            if tex is not None and vis.uv is not None:
                image = tex.convert("RGBA")
                uv = np.asarray(vis.uv, dtype=np.float32)
        elif isinstance(vis, trimesh.visual.ColorVisuals) and vis.kind is not None:
            # per-vertex colours: bake into a 1-pixel-high strip texture indexed by vertex
            c = np.asarray(vis.vertex_colors, dtype=np.uint8)
            image = Image.fromarray(c[None, :, :], "RGBA")
            uv = np.stack([(np.arange(len(c)) + 0.5) / len(c), np.full(len(c), 0.5)], 1).astype(np.float32)
        parts.append(_Part(verts, normals, uv, np.asarray(mesh.faces, dtype=np.int32), image, color))
    return parts


def _load_triton_first() -> None:
    """Import triton (when installed) before Mesa's llvmpipe loads its LLVM: the other order segfaults the process
    as soon as anything (torch._dynamo, torchvision.ops) imports triton after an EGL context exists."""
    try:
        import triton  # noqa: F401  # lazy: optional; imported for its side effect, before EGL
    except Exception:  # not installed, or unusable here: then there is nothing to clash with
        pass


class Renderer:
    """An offscreen EGL context with one shader; render many GLBs through it."""

    def __init__(self, settings: RenderSettings | None = None, backend: str = "egl") -> None:
        # lazy: moderngl
        import moderngl

        _load_triton_first()
        self.settings = settings or RenderSettings()
        try:
            self.ctx = moderngl.create_context(standalone=True, backend=backend)
        except Exception as e:
            raise RuntimeError(
                f"could not create a headless OpenGL context with backend {backend!r} ({e}). On Debian/Ubuntu "
                "install libegl1 libegl-mesa0 libgl1-mesa-dri (make setup does this)."
            ) from e
        self.prog = self.ctx.program(vertex_shader=VERTEX_SHADER, fragment_shader=FRAGMENT_SHADER)
        r = self.settings.resolution
        samples = self.settings.samples
        self.fbo_ms = self.ctx.framebuffer(
            color_attachments=[self.ctx.renderbuffer((r, r), 4, samples=samples)],
            depth_attachment=self.ctx.depth_renderbuffer((r, r), samples=samples),
        )
        self.fbo = self.ctx.framebuffer(color_attachments=[self.ctx.renderbuffer((r, r), 4)])

    def close(self) -> None:
        self.ctx.release()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def render_parts(self, parts: list[_Part], directions: list[tuple],
                     background: tuple[int, int, int] | None = None,
                     frame: tuple[tuple[float, float, float], float] | None = None) -> list[Image.Image]:
        """Render ``parts`` from each (direction, up) pair; the camera frames the bounding sphere. ``background``
        (RGB 0-255) overrides the settings' colour for these images; ``frame`` (centre, radius) fixes the framed
        sphere instead, so that two meshes in one coordinate frame are seen by the same cameras."""
        # lazy: moderngl
        import moderngl

        ctx, s = self.ctx, self.settings
        if frame is not None:
            centre, radius = np.asarray(frame[0], dtype=np.float64), float(frame[1])
        else:
            allv = np.concatenate([p.vertices for p in parts])
            lo, hi = allv.min(0), allv.max(0)
            centre = (lo + hi) / 2
            radius = float(np.linalg.norm(hi - lo) / 2) or 1.0
        dist = radius * s.margin / np.sin(np.deg2rad(s.fov_deg) / 2)
        proj = perspective(s.fov_deg, dist - radius * 1.5, dist + radius * 1.5)
        vaos, textures, buffers = [], [], []
        try:
            for p in parts:
                data = np.hstack([p.vertices, p.normals, p.uv]).astype("f4")
                vbo = ctx.buffer(data.tobytes())
                ibo = ctx.buffer(p.faces.astype("i4").tobytes())
                buffers += [vbo, ibo]
                vao = ctx.vertex_array(self.prog, [(vbo, "3f 3f 2f", "in_pos", "in_normal", "in_uv")], ibo)
                tex = None
                if p.image is not None:
                    # glTF's UV origin is the top-left of the image; OpenGL samples from the bottom-left
                    img = p.image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
                    tex = ctx.texture(img.size, 4, img.tobytes())
                    tex.build_mipmaps()
                    tex.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)
                    textures.append(tex)
                vaos.append((vao, tex, p.color))
            out = []
            bg = tuple(c / 255 for c in (background or s.background))
            for direction, up in directions:
                d = np.asarray(direction, dtype=float)
                eye = centre + d * dist
                view = look_at(eye, centre, np.asarray(up, dtype=float))
                mvp = (proj @ view).astype("f4")
                self.fbo_ms.use()
                ctx.enable(moderngl.DEPTH_TEST)
                ctx.disable(moderngl.CULL_FACE)
                ctx.clear(*bg, 1.0)
                self.prog["mvp"].write(mvp.T.tobytes())
                self.prog["model"].write(np.eye(4, dtype="f4").tobytes())
                self.prog["light_dir"].value = tuple((d + np.array([0.4, 0.8, 0.3])).tolist())
                self.prog["view_dir"].value = tuple(d.tolist())
                for vao, tex, color in vaos:
                    self.prog["base_color"].value = color
                    self.prog["use_texture"].value = tex is not None
                    if tex is not None:
                        tex.use(0)
                        self.prog["tex"].value = 0
                    vao.render(moderngl.TRIANGLES)
                ctx.copy_framebuffer(self.fbo, self.fbo_ms)
                raw = self.fbo.read(components=3)
                # OpenGL's rows run bottom-up: decode them with a negative stride (one pass, no extra flip copy)
                out.append(Image.frombytes("RGB", (s.resolution, s.resolution), raw, "raw", "RGB", 0, -1))
            return out
        finally:
            for vao, _, _ in vaos:
                vao.release()
            for t in textures:
                t.release()
            for b in buffers:
                b.release()

    def render_views(self, glb: str | Path, views: tuple[str, ...] | list[str] = VIEWS) -> dict[str, Image.Image]:
        """The canonical views of one GLB."""
        unknown = [v for v in views if v not in VIEW_DIRECTIONS]
        if unknown:
            raise ValueError(f"render.views has unknown view(s) {unknown}; choose from {list(VIEW_DIRECTIONS)}")
        imgs = self.render_parts(load_glb(glb), [VIEW_DIRECTIONS[v] for v in views])
        return dict(zip(views, imgs))

    def render_orbit(self, glb: str | Path, n_frames: int, elevation_deg: float = 15.0) -> list[Image.Image]:
        """``n_frames`` frames of a 360-degree orbit around the vertical axis."""
        return self.render_parts(load_glb(glb), [orbit_direction(k, n_frames, elevation_deg) for k in range(n_frames)])


def mp4_bytes(frames: list[Image.Image], fps: int = 12, crf: int = 18) -> bytes:
    """An H.264 MP4 of ``frames`` (PyAV's bundled ffmpeg; yuv420p, so any player shows it)."""
    # lazy: av
    import av

    w, h = frames[0].size
    w, h = w - w % 2, h - h % 2  # yuv420p needs even sides
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"crf": str(crf), "preset": "medium"}
        for im in frames:
            frame = av.VideoFrame.from_image(im.convert("RGB").crop((0, 0, w, h)))
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return buf.getvalue()


def contact_sheet_bytes(images: list[Image.Image], labels: list[Any], columns: int = 6) -> bytes:
    """A JPEG grid of ``images`` with a label under each: one look at a vase's views and orbit."""
    w, h = images[0].size
    rows = (len(images) + columns - 1) // columns
    sheet = Image.new("RGB", (w * min(columns, len(images)), (h + 14) * rows), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for k, (im, label) in enumerate(zip(images, labels)):
        x, y = (k % columns) * w, (k // columns) * (h + 14)
        sheet.paste(im, (x, y))
        draw.text((x + 3, y + h + 1), str(label), fill=(40, 40, 40))
    buf = io.BytesIO()
    sheet.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def _vase_files(out_root: Path, vid: str, views: Any, shots: dict[str, Image.Image], frames: list[Image.Image],
                orbit_video: bool, sheets: bool) -> dict[Path, bytes]:
    """What one rendered vase writes, by path: its views, orbit frames, MP4 and contact sheet. File names come from
    vase.views (the id mapped to a safe name), and each is checked to stay inside ``out_root`` before it is
    written: an id from the data never steers a write."""
    blobs = {view_path(out_root, v, vid): png_bytes(img) for v, img in shots.items()}
    blobs.update({orbit_dir(out_root, vid) / f"{k:03d}.png": png_bytes(img) for k, img in enumerate(frames)})
    if orbit_video and frames:
        blobs[orbit_dir(out_root, vid).with_suffix(".mp4")] = mp4_bytes(frames)
    if sheets:
        blobs[sheet_path(out_root, vid)] = contact_sheet_bytes([shots[v] for v in views] + frames,
                                                               [*views, *range(len(frames))])
    return {inside(out_root, str(path.relative_to(out_root))): data for path, data in blobs.items()}


def _read_cache(path: Path) -> dict[str, str]:
    """The render cache (id -> hash of its GLB and settings); empty when missing or unreadable (all re-rendered)."""
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}


def rendered_settings(out_root: str | Path) -> set[str]:
    """The render settings (`RenderSettings.key`) the views under ``out_root`` were rendered with, from its cache."""
    cache = _read_cache(Path(out_root) / "images" / RENDER_CACHE_FILE)
    return {v.split(":")[1] for v in cache.values() if isinstance(v, str) and v.count(":") >= 1}


def render_dataset(
    root: str | Path,
    ids_and_models: list[tuple[str, str]],
    settings: RenderSettings | None = None,
    views: tuple[str, ...] | list[str] = VIEWS,
    orbit_frames: int = 0,
    progress: bool = True,
    force: bool = False,
    out_root: str | Path | None = None,
    keep_existing: bool = False,
    on_error: str = "raise",
    orbit_video: bool = False,
    sheets: bool = False,
    workers: int | str = 1,
) -> dict[str, Any]:
    """Render every (id, GLB path relative to ``root``) into ``<out_root>/images/<view>/<id>.png`` (``out_root``
    defaults to ``root``), skipping cached ones.

    The cache (``<out_root>/images/render_cache.json``) maps each id to the hash of its GLB bytes and the settings;
    it is written after every vase, so an interrupted run resumes where it stopped. With ``keep_existing`` a file
    already under ``out_root`` is never written (a dataset's own views, when rendering into a root vase does not
    own): only missing views are rendered. ``on_error="raise"`` stops at the first GLB that fails, naming it;
    ``"skip"`` records the failure (id, model, reason) and goes on. ``orbit_video`` also writes each orbit as an
    H.264 MP4 beside its frames (``images/orbit/<id>.mp4``); ``sheets`` writes a contact sheet of the views (and
    orbit frames) per vase to ``images/sheets/<id>.jpg``. ``workers``: processes that render (``auto`` or a count,
    `vase.workers.workers_for`), each with its own context; this process writes every file, in the vases' order, so
    the views are the same bytes whatever the count. Returns counts and the failures.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"render.on_error={on_error!r} must be 'raise' or 'skip'")
    root = Path(root)
    out_root = Path(out_root) if out_root is not None else root
    settings = settings or RenderSettings()
    cache_path = out_root / "images" / RENDER_CACHE_FILE
    cache = {} if force else _read_cache(cache_path)
    todo, cached, failed = [], 0, []
    view_key = _view_key(settings, views, orbit_frames, orbit_video, sheets)

    def fail(vid: str, model: str, reason: str, exc: BaseException | None = None) -> None:
        if on_error == "raise":
            raise DataError(reason) from exc
        failed.append({"id": vid, "model": model, "reason": reason})

    for vid, model in ids_and_models:
        try:
            glb = model_file(root, model, vid)
        except DataError as e:
            fail(vid, model, str(e), e)
            continue
        if keep_existing and _has_views(out_root, vid, views, orbit_frames):
            cached += 1
            continue
        if not glb.is_file():
            fail(vid, model, f"{glb}: GLB model of vase {vid!r} not found")
            continue
        key = hashlib.sha256(glb.read_bytes()).hexdigest()[:24] + ":" + view_key
        done = cache.get(vid) == key and all(view_path(out_root, v, vid).is_file() for v in views)
        if done:
            cached += 1
        else:
            todo.append((vid, model, glb, key))
    if todo:
        tasks = [_RenderTask(out_root, vid, glb, tuple(views), orbit_frames, orbit_video, sheets) for vid, _, glb, _ in todo]
        mapped = ordered_map(_render_in_worker, tasks, workers_for(workers, len(tasks)),
                             initializer=_start_renderer, initargs=(settings,))
        results: Any = progress_bar(mapped, total=len(todo), desc="rendering views", unit="vase") if progress else mapped
        try:
            for (files, error), (vid, model, glb, key) in zip(results, todo):  # results first: the bar ends
                if error is not None:
                    fail(vid, model, f"{glb}: vase {vid!r} could not be rendered: {error}", RuntimeError(error))
                    continue
                _write_renders(files, keep_existing)
                cache[vid] = key
                atomic_write_json(cache_path, cache)
        finally:
            mapped.close()  # stops the workers now, also when a failure is raised
            _stop_renderer()
    return {"rendered": len(todo) - len(failed), "cached": cached, "failed": failed}


def _view_key(settings: RenderSettings, views: tuple[str, ...] | list[str], orbit_frames: int, orbit_video: bool,
              sheets: bool) -> str:
    """What a vase's renders depend on besides its GLB: the settings, the views, the orbit, the video and the sheet
    (part of each vase's cache entry)."""
    return (settings.key() + ":" + ",".join(views) + f":orbit{orbit_frames}" + (":mp4" if orbit_video else "")
            + (":sheet" if sheets else ""))


def _write_renders(files: dict[Path, bytes], keep_existing: bool) -> None:
    """One vase's rendered files, each written whole; with ``keep_existing`` a file already there (a view the dataset
    ships) is never overwritten."""
    for target, data in files.items():
        if keep_existing and target.exists():
            continue
        atomic_write_bytes(target, data)


def _has_views(out_root: Path, vid: str, views: tuple[str, ...] | list[str], orbit_frames: int) -> bool:
    """Whether every view of vase ``vid`` (and an orbit frame, when orbits are asked) is already under ``out_root``."""
    return all(view_path(out_root, v, vid).is_file() for v in views) and (
        not orbit_frames or any(orbit_dir(out_root, vid).glob("*.png")))


@dataclass(frozen=True)
class _RenderTask:
    """One vase for `_render_in_worker`: where its files go, its GLB and what to render of it."""

    out_root: Path
    vid: str
    glb: Path
    views: tuple[str, ...]
    orbit_frames: int
    orbit_video: bool
    sheets: bool


_RENDERER: list[Renderer] = []
"""The renderer of this process while `render_dataset` runs (a worker's, or this process's own)."""


_START_ERROR: list[BaseException] = []
"""Why a worker's renderer could not start: raised by its first task, so the caller sees the error (a pool whose
initializer raises would start new workers for ever)."""


def _start_renderer(settings: RenderSettings) -> None:
    """A worker's (or this process's) renderer. A spawned worker's llvmpipe rasterises on one thread unless
    LP_NUM_THREADS says otherwise: the workers are the parallelism."""
    _stop_renderer()
    _START_ERROR.clear()  # an earlier call's: not this one's
    if multiprocessing.parent_process() is None:
        _RENDERER.append(Renderer(settings))  # this process: an error is raised here and now
        return
    os.environ.setdefault("LP_NUM_THREADS", "1")
    try:
        _RENDERER.append(Renderer(settings))
    except Exception as e:  # noqa: BLE001 - kept, and raised by the worker's first task
        _START_ERROR.append(e)


def _stop_renderer() -> None:
    while _RENDERER:
        _RENDERER.pop().close()


def _render_in_worker(task: _RenderTask) -> tuple[dict[Path, bytes], str | None]:
    """One vase's files by path (views, orbit, MP4, sheet) and None, or no files and why it failed."""
    if _START_ERROR:
        raise _START_ERROR[0]
    r = _RENDERER[-1]
    try:
        shots = r.render_views(task.glb, task.views)
        frames = r.render_orbit(task.glb, task.orbit_frames) if task.orbit_frames else []
        return _vase_files(task.out_root, task.vid, task.views, shots, frames, task.orbit_video, task.sheets), None
    except Exception as e:  # noqa: BLE001 - every failure is either raised or recorded with its reason
        return {}, str(e) or type(e).__name__
