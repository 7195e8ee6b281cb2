"""The generator interface and the resumable folder runner (this package's base; ``vase.prompt_tasks.base`` is the
prompt tasks').

A generator turns the photo(s) of one object into a GLB: ``generator(images, output)``. `reconstruct_folder`
runs one over a folder (one object per image, or per sub-folder of images), skips objects whose GLB exists (a
killed run resumes), records each failure with its reason in ``failures.json`` and goes on. The input is only read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vase.errors import ConfigError, VaseError
from vase.images import IMAGE_EXTENSIONS
from vase.io import atomic_write_json, inside, own_output_dir, safe_name
from vase.progress import progress_bar
from vase.render.renderer import load_scene

Generator = Callable[[list[Path], Path], None]
log = logging.getLogger("vase")


class GenerationError(VaseError):
    """One object could not be reconstructed; the message says why (recorded, the run goes on)."""


def objects_in(input_dir: Path) -> dict[str, list[Path]]:
    """Object name -> its images: each image file is an object; each sub-folder of images is one object."""
    out: dict[str, list[Path]] = {}
    hidden = []
    for p in sorted(input_dir.iterdir()):
        if p.name.startswith("."):  # hidden (.DS_Store, editors' files, vase's own temporary folders): said, not read
            hidden.append(p.name)
            continue
        if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS:
            out[p.stem] = [p]
        elif p.is_dir():
            imgs = sorted(q for q in p.iterdir() if q.suffix.lower() in IMAGE_EXTENSIONS)
            if imgs:
                out[p.name] = imgs
    if hidden:
        log.warning("%s: %d hidden entr%s skipped (names starting with '.'): %s", input_dir, len(hidden),
                    "y" if len(hidden) == 1 else "ies", ", ".join(hidden[:5]) + (" ..." if len(hidden) > 5 else ""))
    return out


def reconstruct_folder(generator: Generator, input_dir: str | Path, output_dir: str | Path,
                       progress: bool = True) -> dict[str, Any]:
    """Run ``generator`` over every object in ``input_dir``; GLBs to ``output_dir/<object>.glb``."""
    if not input_dir:
        raise ConfigError("input is not set: the folder of photos to reconstruct")
    input_dir, output_dir = Path(input_dir).resolve(), Path(output_dir).resolve()
    if not input_dir.is_dir():
        raise ConfigError(f"reconstruct.input={input_dir}: not a folder of images")
    # a folder of the user's (a dataset root, another tool's output) is refused: nothing is written into it, and a GLB
    # found there is never taken as this command's finished work
    own_output_dir(output_dir, "output", (input_dir,))
    objects = objects_in(input_dir)
    if not objects:
        raise ConfigError(f"reconstruct.input={input_dir}: no images (or folders of images) in it")

    def glb(name: str, prefix: str = "", suffix: str = "") -> Path:
        # an object's name comes from a file name in the input: used only as a safe name, inside the output folder
        return inside(output_dir, f"{prefix}{safe_name(name)}{suffix}.glb")

    done = {name for name in objects if glb(name).is_file()}
    failures: dict[str, str] = {}
    todo = [n for n in objects if n not in done]
    it: Any = todo
    if progress and todo:
        it = progress_bar(todo, desc="reconstructing", unit="object")
    for name in it:
        out, tmp = glb(name), glb(name, ".", f".partial-{os.getpid()}")
        try:
            generator(objects[name], tmp)
            load_scene(tmp)  # a file that is not a readable mesh is a failure, not a result
            os.replace(tmp, out)
        except (VaseError, OSError) as e:
            failures[name] = str(e)
        finally:
            tmp.unlink(missing_ok=True)
        atomic_write_json(output_dir / "failures.json", failures)
    report = {"objects": len(objects), "skipped_existing": len(done), "made": len(todo) - len(failures),
              "failed": failures}
    atomic_write_json(output_dir / "failures.json", failures)
    return report
