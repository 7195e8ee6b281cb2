"""A wheel of this checkout installed into a fresh virtual environment outside it: what tests/test_wheel.py and the
demo from the wheel (tests/test_end_to_end.py) run vase's commands from, as a user who ran ``pip install <wheel>``."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from vase.checks.wheel_check import build_wheel

ENV = {**{k: v for k, v in os.environ.items() if k != "VASE_LOG_DIR"}, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
"""A user's shell: no $VASE_LOG_DIR (the suite's own points runs elsewhere), so runs go where the user is."""


def install_wheel(work: Path) -> dict[str, Path]:
    """Build the wheel from a copy of the checkout and install it into a virtual environment under ``work`` (its
    dependencies are this environment's, named by a .pth line; vase itself only from the wheel): the wheel, the
    environment's bin folder and the installed package's folder."""
    wheel = build_wheel(work)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "vase-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True, capture_output=True, timeout=600)
    return {"wheel": wheel, "bin": venv / "bin", "package": purelib / "vase"}

