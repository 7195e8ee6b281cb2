"""A generator that is an external command (TripoSG, Hunyuan3D, or any other), run in its own environment.

The command line is a list with placeholders: ``{image}`` (the first image), ``{images}`` (all, as separate
arguments), ``{output}`` (the GLB to write), ``{hunyuan3d_driver}`` (the path of vase's small Hunyuan3D-2 driver script). ``env`` adds variables, ``cwd`` is where it runs (the generator's
checkout), ``timeout_s`` bounds each object. A non-zero exit, a timeout or no output file is a GenerationError with
the command's last output lines.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from vase.reconstruct.base import GenerationError


class CommandGenerator:
    def __init__(self, command: list[str], env: dict[str, str] | None = None, cwd: str | None = None,
                 timeout_s: float = 3600.0) -> None:
        if not command:
            raise GenerationError("reconstruct.command is empty")
        self.command, self.env, self.cwd, self.timeout_s = list(command), dict(env or {}), cwd, float(timeout_s)

    def argv(self, images: list[Path], output: Path) -> list[str]:
        out: list[str] = []
        for part in self.command:
            if part == "{images}":
                out += [str(p) for p in images]
            else:
                out.append(part.replace("{image}", str(images[0])).replace("{output}", str(output))
                           .replace("{output_dir}", str(output.parent))
                           .replace("{hunyuan3d_driver}", str(Path(__file__).with_name("hunyuan3d_driver.py"))))
        return out

    def __call__(self, images: list[Path], output: Path) -> None:
        argv = self.argv(images, output)
        try:
            p = subprocess.run(argv, cwd=self.cwd, env={**os.environ, **self.env}, capture_output=True, text=True,
                               timeout=self.timeout_s)
        except subprocess.TimeoutExpired as e:
            raise GenerationError(f"{argv[0]}: timed out after {self.timeout_s:.0f} s on {images[0].name}") from e
        except OSError as e:
            raise GenerationError(f"{argv[0]}: could not start ({e})") from e
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-5:])
        if p.returncode != 0:
            raise GenerationError(f"{argv[0]} exited with {p.returncode} on {images[0].name}: {tail}")
        if not output.is_file():
            raise GenerationError(f"{argv[0]} wrote no {output.name} for {images[0].name}: {tail}")
