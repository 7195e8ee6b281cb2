"""vase's wheel as a user installs it (``make wheel-check``): ``pip install <wheel>`` into a new virtual environment
with nothing borrowed, then the README's demo from an empty folder.

    python -m vase.checks.wheel_check                 # PASS/FAIL per part; logs/wheel_check/<time>/
    python -m vase.checks.wheel_check --wheel dist/vase-0.1.0-py3-none-any.whl

`make test` installs the wheel into an environment that borrows this one's dependencies (fast, in every CI run);
this check is the rest of the user's path, slower (pip installs about 160 packages, the demo trains): the wheel (the
one given, else built from a copy of the checkout's files, so the checkout is left as it was) installed with its
dependencies resolved and installed by pip from the package index into a new environment under the check's folder,
then, from an empty folder:

0. ``install``: pip installs the wheel and its dependencies (torch at its pin), and ``pip check`` finds nothing
   broken.
1. ``imports``: every module of the installed package imports, but those that need an extra (`EXTRAS`).
2. ``version``: ``vase --version`` names the version and says the code is installed, not a checkout.
3. ``demo``: ``vase-train experiment=demo logger=none`` ends with rc 0, its run finished under the empty folder
   (``logs/demo/runs/<time>/``, its results table there), its data, tiny models and renders under that folder's
   ``.cache``, and not one file of the installed package written or changed.

Results in ``wheel_check.json`` / ``.md``, with the machine and each part's seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from importlib.metadata import requires
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from vase import __version__
from vase import markdown as md
from vase.io import atomic_write_json, atomic_write_text
from vase.provenance import code_stamp, machine_stamp
from vase.runs import log_root, run_dir

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, str]:
    """What vase's requirements pin with ``==`` (setup.cfg's torch and torchvision), read from the package's metadata:
    checked in the new environment."""
    found = {}
    for req in map(Requirement, requires("vase") or []):
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if exact and req.marker is None:
            found[req.name.lower()] = exact[0]
    return found

EXTRAS = {"vase.docsgen.docstrings": "dev", "vase.integrations.trl": "bench"}
"""The modules that need an extra's packages (``pip install vase[dev]``: the docs' generators; ``vase[bench]``: TRL
and its ``datasets``): every other module imports from the wheel's own requirements."""

IMPORT_ALL = """
import importlib, json, pkgutil, vase
bad = {}
for m in pkgutil.walk_packages(vase.__path__, "vase.", onerror=lambda name: None):
    if not m.name.endswith("__main__"):
        try:
            importlib.import_module(m.name)
        except BaseException as e:
            bad[m.name] = f"{type(e).__name__}: {e}"
print(json.dumps(bad))
"""
"""Imports every module of the installed package and prints those that fail, with why."""


def source_copy(dest: Path, root: Path = ROOT) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) copied into ``dest``, links kept as links: a
    wheel is built there, so the build leaves nothing in the checkout."""
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for name in names:
        src, dst = root / name, dest / name
        if not (src.exists() or src.is_symlink()):
            continue  # deleted in the work tree, not yet in git
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    # the copy has no .git: it carries the checkout's commit, which the build writes into the wheel (setup.py)
    code = code_stamp()
    if code.get("commit"):
        atomic_write_json(dest / "vase" / "BUILD.json", {"commit": code["commit"], "dirty": code.get("dirty"),
                                                         "diff": code.get("diff"), "built_from": "a copy of the checkout"})
    return dest


def build_wheel(work: Path, root: Path = ROOT) -> Path:
    """The wheel of ``root``'s files, built in a copy under ``work`` (``pip wheel``, no dependencies)."""
    src = source_copy(work / "src", root)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(work / "dist"), str(src)], check=True, capture_output=True, timeout=600)
    (wheel,) = (work / "dist").glob("vase-*.whl")
    return wheel


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (Python's bytecode cache aside) and the sha256 of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _run(cmd: list[str], cwd: Path, log: Path, timeout: float, env: dict[str, str]) -> int:
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, env=env).returncode
        except subprocess.TimeoutExpired:
            return 124


def check(wheel: Path, work: Path) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """The four parts of the module docstring, in ``work``; the results and each part's seconds."""
    results: dict[str, dict[str, Any]] = {}
    seconds: dict[str, int] = {}
    venv, user = work / "venv", work / "user"
    user.mkdir()
    # a user's shell: no $VASE_LOG_DIR, no PYTHONPATH into the checkout, one torch job on the machine
    env = {k: v for k, v in os.environ.items() if k not in ("VASE_LOG_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    env["WANDB_MODE"] = "disabled"
    t = time.time()
    rc = _run([sys.executable, "-m", "venv", str(venv)], work, work / "venv.log", 300, env)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    if rc == 0:
        rc = _run([*pip, "install", "--no-input", str(wheel)], work, work / "install.log", 3600, env)
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, env=env) if rc == 0 else None
    listed = subprocess.run([*pip, "list", "--format", "json"], capture_output=True, text=True, env=env) if rc == 0 else None
    installed = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)} if listed and listed.returncode == 0 else {}
    pinned = pins()
    got = {k: installed.get(k) for k in pinned}
    results["install"] = {"passed": (rc == 0 and checked is not None and checked.returncode == 0 and bool(pinned)
                                     and got == pinned), "rc": rc, "packages": len(installed), "pins": got,
                          "pip_check": (checked.stdout + checked.stderr).strip()[-300:] if checked else None,
                          "log": str(work / "install.log")}
    seconds["install"] = round(time.time() - t)
    if not results["install"]["passed"]:
        return results, seconds
    purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True, env=env).stdout.strip())
    package = purelib / "vase"
    before = tree_digest(package)
    bin_ = venv / "bin"
    t = time.time()
    imp = subprocess.run([str(bin_ / "python"), "-c", IMPORT_ALL], cwd=user, capture_output=True, text=True,
                         env={**env, "OMP_NUM_THREADS": "1"}, timeout=900)
    failed = json.loads(imp.stdout.strip().splitlines()[-1]) if imp.returncode == 0 and imp.stdout.strip() else None
    results["imports"] = {"passed": failed is not None and set(failed) <= set(EXTRAS),
                          "failed": failed if failed is not None else imp.stderr[-500:],
                          "extras_only": sorted(set(failed or {}) & set(EXTRAS))}
    seconds["imports"] = round(time.time() - t)
    t = time.time()
    v = subprocess.run([str(bin_ / "vase"), "--version"], cwd=user, capture_output=True, text=True, env=env, timeout=300)
    said = (v.stdout + v.stderr).strip()
    results["version"] = {"passed": v.returncode == 0 and __version__ in said and "installed" in said, "said": said[-200:]}
    seconds["version"] = round(time.time() - t)
    t = time.time()
    rc = _run([str(bin_ / "vase-train"), "experiment=demo", "logger=none"], user, work / "demo.log", 3600, env)
    runs = sorted((user / "logs" / "demo" / "runs").glob("*/")) if (user / "logs" / "demo" / "runs").is_dir() else []
    record = json.loads((runs[-1] / ".vase-run.json").read_text()) if runs and (runs[-1] / ".vase-run.json").is_file() else {}
    cache = sorted(p.name for p in (user / ".cache").iterdir()) if (user / ".cache").is_dir() else []
    results_table = sorted(str(p.relative_to(user)) for p in runs[-1].glob("results*.md")) if runs else []
    unchanged = tree_digest(package) == before
    results["demo"] = {"passed": (rc == 0 and len(runs) == 1 and record.get("status") == "finished"
                                  and not (record.get("code") or {}).get("commit") and {"models", "data"} <= set(cache)
                                  and bool(results_table) and unchanged),
                       "rc": rc, "run": str(runs[-1]) if runs else None, "status": record.get("status"),
                       "cache_under_user_folder": cache, "results_tables": results_table,
                       "package_unchanged": unchanged, "log": str(work / "demo.log")}
    seconds["demo"] = round(time.time() - t)
    return results, seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.checks.wheel_check", description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="the wheel to install (default: built from a copy of this checkout)")
    a = ap.parse_args(argv)
    if a.wheel and not Path(a.wheel).is_file():
        print(f"error: --wheel {a.wheel}: no such file", file=sys.stderr)
        return 2
    started = time.time()
    work = Path(run_dir(str(log_root(ROOT) / "wheel_check"), "never"))
    wheel = Path(a.wheel).resolve() if a.wheel else build_wheel(work)
    print(f"wheel check: {wheel.name} into a new environment, then the demo from an empty folder ({work})", flush=True)
    results, seconds = check(wheel, work)
    for name, r in results.items():
        print(f"{'PASS' if r['passed'] else 'FAIL'}  {name}  "
              + json.dumps({k: v for k, v in r.items() if k != "passed"}, default=str)[:600])
    ok = len(results) == 4 and all(r["passed"] for r in results.values())
    print("seconds per part: " + ", ".join(f"{k} {v}" for k, v in seconds.items()))
    atomic_write_json(work / "wheel_check.json", {"machine": machine_stamp(), "wheel": wheel.name,
                                                  "results": results, "seconds": seconds})
    atomic_write_text(work / "wheel_check.md", f"# Wheel check: {wheel.name}\n\n" + md.table_text(
        ["part", "result", "seconds"], [[n, "PASS" if r["passed"] else "FAIL", seconds.get(n, "")]
                                        for n, r in results.items()]))
    print(f"{'PASS' if ok else 'FAIL'}: wheel check, {time.time() - started:.0f} s ({work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
