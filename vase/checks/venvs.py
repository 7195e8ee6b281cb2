"""Other tools' own virtualenvs, for the checks that run them for real (ms-swift, MLflow's server): built from the
package index when missing, rebuilt when the wanted packages change, one builder at a time. They live in the user's
cache (`tools_dir`), not a checkout's: a fresh clone on the same machine (CI's) uses them as they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from vase.io import one_builder_at_a_time

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}


def tools_dir() -> Path:
    """Where the tools' virtualenvs are built: ``$VASE_TOOLS_DIR``, else ``$XDG_CACHE_HOME/vase/tools`` (default
    ``~/.cache/vase/tools``)."""
    given = os.environ.get("VASE_TOOLS_DIR", "").strip()
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache") / "vase" / "tools"


def run_logged(cmd: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None, timeout: int = 900) -> int:
    """Run ``cmd`` with its output to ``log``; the return code (124 when it ran past ``timeout``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                                  env={**os.environ, **OFFLINE, **(env or {})}).returncode
        except subprocess.TimeoutExpired:
            return 124


@one_builder_at_a_time
def tool_venv(venv: Path, packages: list[str], log: Path, what: str, after: list[list[str]] | None = None,
              stamp_extra: Any = None) -> Path:
    """A virtualenv holding ``packages`` (then the ``after`` pip arguments, each one install), built when missing or
    built for other packages; ``what`` names it in the one line said while building."""
    stamp = venv / ".vase-venv.json"
    want = {"packages": packages, "after": after or [], "extra": stamp_extra}
    if stamp.is_file() and json.loads(stamp.read_text()) == want:
        return venv
    py = venv / "bin" / "python"
    base = getattr(sys, "_base_executable", None) or "python3"  # the interpreter vase's own venv was made from
    steps = [[base, "-m", "venv", str(venv)] if not py.is_file() else None,
             [str(py), "-m", "pip", "install", "-q", "--no-cache-dir", "--upgrade", "pip"],
             [str(py), "-m", "pip", "install", "-q", "--no-cache-dir", *packages],
             *([str(py), "-m", "pip", "install", "-q", "--no-cache-dir", *args] for args in after or [])]
    print(f"building {what}'s virtualenv in {venv} (a few minutes, once)", flush=True)
    for n, cmd in enumerate(c for c in steps if c is not None):
        if run_logged(cmd, log.with_suffix(f".{n}.log"), venv.parent if venv.parent.is_dir() else Path.cwd(),
                      timeout=1800) != 0:
            raise RuntimeError(f"building {venv} failed at: {' '.join(cmd)} (log: {log.with_suffix(f'.{n}.log')})")
    stamp.write_text(json.dumps(want))
    return venv
