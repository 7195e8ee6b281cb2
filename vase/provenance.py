"""Where a result comes from, stored with it: the machine (`machine_stamp`: CPU, kernels, threads, libraries), vase's
code (`code_stamp`: its commit, whether its tree had changes and the changes themselves, or the commit an installed
wheel was built from) and the user's project it ran from (`project_stamp`: its folder, commit, dirty flag and
changes). `vase.runs` writes them into every run's record; tables and verdicts name them from there."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from vase.io import atomic_write_bytes
from vase.kernels import cpu_record, portable_pinned


def machine_stamp() -> dict[str, Any]:
    """Where, when and by which code (`code_stamp`) a result was made, stored with it, so that a table built from it
    names the machine and the code."""
    try:
        # lazy: torch
        import torch

        torch_version = str(torch.__version__)
    except ImportError:  # pragma: no cover - torch is a dependency
        torch_version = "absent"
    return {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "machine": platform.machine(),
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "torch": torch_version, **cpu_record(), "code": code_stamp()}


SOURCE = Path(__file__).resolve().parent.parent
"""Where vase's code lives: a git checkout (an editable install, a clone), or site-packages (a wheel)."""
CODE_PACKAGES = ("torch", "transformers", "peft", "trl")


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(SOURCE), *args], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.decode(errors="replace") if p.returncode == 0 else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


PATCH_FILE = "code.patch"
"""A dirty run's changes to its commit, in its folder: ``git apply`` on that commit gives the code that ran."""
PATCH_CAP = 5_000_000
"""The largest patch a run folder keeps (bytes); over it the record says how large the changes were and keeps none."""


@functools.lru_cache(maxsize=1)
def _changes() -> tuple[str, list[str]]:
    """This checkout's changes to its commit: ``git diff HEAD --binary`` and the files git does not track yet, read
    once per process for both the code stamp's hash and the run's patch."""
    listing = _git("ls-files", "--others", "--exclude-standard", "-z") or ""
    return _git("diff", "HEAD", "--binary") or "", sorted(n for n in listing.split("\0") if n)


BUILD_FILE = Path(__file__).resolve().parent / "BUILD.json"
"""An installed wheel's stamp of the commit it was built from (written by setup.py at build time)."""


def _built() -> dict[str, Any]:
    """The commit an installed wheel was built from (`BUILD_FILE`), marked ``installed``; {} without one."""
    try:
        stamp = json.loads(BUILD_FILE.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(stamp, dict) or not stamp.get("commit"):
        return {}
    return {"commit": str(stamp["commit"]), "dirty": bool(stamp.get("dirty")), "diff": stamp.get("diff"),
            "installed": True}


@functools.lru_cache(maxsize=1)
def _code() -> dict[str, Any]:
    top = _git("rev-parse", "--show-toplevel")
    commit = _git("rev-parse", "HEAD") if top and Path(top.strip()).resolve() == SOURCE else None
    out: dict[str, Any] = {"commit": commit.strip() if commit else None, "dirty": None, "diff": None}
    if not commit:  # not a checkout: an installed wheel names the commit it was built from
        out.update(_built())
    elif commit:
        diff, untracked = _changes()
        digest = hashlib.sha256(diff.encode())
        for name in untracked:  # files git does not track yet are code too
            with contextlib.suppress(OSError):
                digest.update(name.encode() + b"\0" + (SOURCE / name).read_bytes())
        out["dirty"] = bool(diff or untracked)
        out["diff"] = digest.hexdigest()[:12] if out["dirty"] else None
    return {**out, "vase": _version("vase"), **{p: _version(p) for p in CODE_PACKAGES}}


@functools.lru_cache(maxsize=1)
def code_patch() -> bytes | None:
    """This checkout's changes to its commit as one patch (``git diff HEAD --binary``, then each untracked file as a
    new file), or None where the tree is clean or not a checkout; stops once over `PATCH_CAP` (the caller sees the
    size). Read from the checkout only: git's index and tree are left as they are."""
    if not _code().get("dirty") or _code().get("installed"):  # a wheel's changes were not shipped with it
        return None
    diff, untracked = _changes()
    parts = [diff.encode()]
    size = len(parts[0])
    for name in untracked:
        if size > PATCH_CAP:
            break
        try:  # --no-index exits 1 where the files differ, as a new file always does
            p = subprocess.run(["git", "-C", str(SOURCE), "diff", "--no-index", "--binary", "--", "/dev/null", name],
                               capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode in (0, 1):
            parts.append(p.stdout)
            size += len(p.stdout)
    return b"".join(parts)


def keep_patch(path: Path) -> dict[str, Any]:
    """Write a dirty checkout's `code_patch` into the run folder ``path`` (`PATCH_FILE`) and say what was kept: ``{}``
    for a clean tree, ``{"patch": "code.patch"}``, or ``{"patch": None, "patch_bytes": n}`` over the cap."""
    patch = code_patch()
    if patch is None:
        return {}
    if len(patch) > PATCH_CAP:
        return {"patch": None, "patch_bytes": len(patch)}
    atomic_write_bytes(path / PATCH_FILE, patch)
    return {"patch": PATCH_FILE}


PROJECT_ENV = "VASE_PROJECT"
"""The user's project a command composes from (``--config-dir``): set by `vase.cli.project.use_project`, carried in
the environment to a sweep's jobs, whatever launcher runs them."""
PROJECT_PATCH = "project.patch"
"""A run's copy of the user's project's changes to its commit: ``git apply`` on that commit gives the code that ran."""


def _git_in(folder: Path, *args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.decode(errors="replace") if p.returncode == 0 else None


def project_stamp(folder: str | Path | None = None) -> dict[str, Any] | None:
    """The user's project a run was composed from (``folder``, by default `PROJECT_ENV`'s): its folder and, where it
    is a git checkout, its commit, whether its tree has changes and a hash of them (``git diff HEAD`` and the files
    git does not track yet); None outside a project."""
    folder = folder if folder is not None else os.environ.get(PROJECT_ENV)
    if not folder:
        return None
    root = Path(folder)
    out: dict[str, Any] = {"folder": str(root), "commit": None, "dirty": None, "diff": None}
    commit = _git_in(root, "rev-parse", "HEAD")
    if commit:
        diff = _git_in(root, "diff", "HEAD", "--binary") or ""
        untracked = sorted(n for n in (_git_in(root, "ls-files", "--others", "--exclude-standard", "-z") or "")
                           .split("\0") if n)
        digest = hashlib.sha256(diff.encode())
        for name in untracked:
            with contextlib.suppress(OSError):
                digest.update(name.encode() + b"\0" + (root / name).read_bytes())
        out.update(commit=commit.strip(), dirty=bool(diff or untracked),
                   diff=digest.hexdigest()[:12] if diff or untracked else None)
    return out


def keep_project_patch(path: Path, project: dict[str, Any]) -> dict[str, Any]:
    """Write a dirty project's changes to its commit into the run folder ``path`` (`PROJECT_PATCH`: ``git diff HEAD``,
    then each untracked file as a new file; at most `PATCH_CAP`) and say what was kept, as `keep_patch` does for
    vase's own code."""
    if not project.get("dirty"):
        return {}
    root = Path(project["folder"])
    parts = [(_git_in(root, "diff", "HEAD", "--binary") or "").encode()]
    for name in sorted(n for n in (_git_in(root, "ls-files", "--others", "--exclude-standard", "-z") or "").split("\0")
                       if n):
        if sum(map(len, parts)) > PATCH_CAP:
            break
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # --no-index exits 1 where the files differ
            parts.append(subprocess.run(["git", "-C", str(root), "diff", "--no-index", "--binary", "--", "/dev/null",
                                         name], capture_output=True, timeout=30).stdout)
    patch = b"".join(parts)
    if len(patch) > PATCH_CAP:
        return {"patch": None, "patch_bytes": len(patch)}
    atomic_write_bytes(path / PROJECT_PATCH, patch)
    return {"patch": PROJECT_PATCH}


def project_label(project: dict[str, Any] | None) -> str:
    """
    >>> project_label({"folder": "/p", "commit": "3f2a9c1d0e77", "dirty": True, "diff": "a1b2"})
    '3f2a9c1d0e (changes a1b2)'
    >>> project_label({"folder": "/p", "commit": None})
    'not a git checkout'
    """
    if not project or not project.get("commit"):
        return "not a git checkout"
    return project["commit"][:10] + (f" (changes {project['diff']})" if project.get("dirty") else "")


def code_stamp() -> dict[str, Any]:
    """Which code made a result, stored with it: vase's git commit, whether its tree had changes (and a hash of them:
    ``git diff HEAD`` and the untracked files), vase's version, the torch, transformers, peft and trl versions, and
    ``cpu_kernels``. An installed wheel names the commit it was built from (``installed``: true; `BUILD_FILE`); a
    package with no stamp has ``commit`` None and its version names it. Computed once per process."""
    return {**_code(), "cpu_kernels": "portable" if portable_pinned() else "native"}


def code_label(code: dict[str, Any] | None) -> str:
    """One short name for a code stamp: ``3f2a9c1d0e (changes a1b2c3d4e5f6)``; an installed wheel's, with its
    version; ``vase 0.1.0`` where nothing names the commit.

    >>> code_label({"commit": "3f2a9c1d0e77", "dirty": True, "diff": "a1b2c3d4e5f6", "vase": "0.1.0"})
    '3f2a9c1d0e (changes a1b2c3d4e5f6)'
    >>> code_label({"commit": None, "vase": "0.1.0"}), code_label(None)
    ('vase 0.1.0', 'unrecorded')
    >>> code_label({"commit": "3f2a9c1d0e77", "dirty": False, "installed": True, "vase": "0.2.0"})
    '3f2a9c1d0e, installed vase 0.2.0'
    """
    if not code:
        return "unrecorded"
    if not code.get("commit"):
        return f"vase {code.get('vase') or '?'}"
    changes = f" (changes {code['diff']})" if code.get("dirty") and code.get("diff") else (
        " (changes)" if code.get("dirty") else "")
    return code["commit"][:10] + changes + (f", installed vase {code.get('vase') or '?'}" if code.get("installed") else "")
