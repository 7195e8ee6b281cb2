"""A wheel of this checkout installed into a fresh virtual environment outside it: what tests/test_wheel.py and the
demo from the wheel (tests/test_end_to_end.py) run vase's commands from, as a user who ran ``pip install <wheel>``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.conftest import ROOT
from tests.test_user_paths import tree_hash

ENV = {**{k: v for k, v in os.environ.items() if k != "VASE_LOG_DIR"}, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
"""A user's shell: no $VASE_LOG_DIR (the suite's own points runs elsewhere), so runs go where the user is."""


def source_copy(dest: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore), links kept as links: the wheel is built
    there, so the build leaves nothing in the checkout."""
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for name in names:
        src, dst = ROOT / name, dest / name
        if not (src.exists() or src.is_symlink()):
            continue  # deleted in the work tree, not yet in git
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
    return dest


def install_wheel(work: Path) -> dict[str, Path]:
    """Build the wheel from a copy of the checkout and install it into a virtual environment under ``work`` (its
    dependencies are this environment's, named by a .pth line; vase itself only from the wheel): the wheel, the
    environment's bin folder and the installed package's folder."""
    src = source_copy(work / "src")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(work / "dist"), str(src)], check=True, capture_output=True, timeout=600)
    (wheel,) = (work / "dist").glob("vase-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "vase-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True, capture_output=True, timeout=600)
    return {"wheel": wheel, "bin": venv / "bin", "package": purelib / "vase"}


def package_tree(folder: Path) -> dict[str, str]:
    """The package's files and their hashes (`tree_hash`), less Python's own bytecode cache."""
    return {k: v for k, v in tree_hash(folder).items() if "__pycache__" not in Path(k).parts}
