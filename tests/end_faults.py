"""A Hydra callback that provokes one fault in a sweep's end, for the tests of `vase.reports.sweep_end`: add it with
``+hydra.callbacks.end_fault._target_=tests.end_faults.EndFault`` (a ``hydra.`` override: the same run to vase) and
name the fault in ``VASE_TEST_END_FAULT=<fault>:<part>``, the part one of `vase.reports.sweep_end.PARTS`:

- ``full``: as the part starts, a file takes every free byte of the sweep folder's file system (a small tmpfs);
- ``readonly``: as the part starts, the sweep's folder is bind-mounted read-only (needs a mount namespace);
- ``readonly-job1``: as the part starts, job 1's TensorBoard run folder is bind-mounted read-only;
- ``ctrl-c``: as the part starts, SIGINT to the sweep's process, as Ctrl-C in its terminal;
- ``swallowed``: the same, the KeyboardInterrupt then swallowed inside the part, as a library may do it;
- ``fails``: the part raises RuntimeError (a dashboard whose library breaks);
- ``gone-job0``: as the part starts, job 0's TensorBoard events files are deleted (a user tidying a folder);
- ``kill``: as the part starts, SIGKILL to the process group ``VASE_TEST_KILL_GROUP`` (a tracking server), and the
  part waits until the group is gone.

Without the variable it does nothing, so the same command runs clean.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

import vase.reports.sweep_summary as end

FUNCTIONS = {"summary": "write_sweep_summary", "verdict": "decide_sweep", "wandb": "log_to_wandb",
             "tensorboard": "log_to_tensorboard", "mlflow": "log_to_mlflow"}
FILLER = "filler.bin"


def fill(folder: Path) -> None:
    """Take every free byte of ``folder``'s file system with ``<folder>/../filler.bin``."""
    with open(folder.parent / FILLER, "wb", buffering=0) as f:  # unbuffered: nothing left to fail at close
        for size in (65536, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass


class EndFault(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        spec = os.environ.get("VASE_TEST_END_FAULT")
        if not spec:
            return
        fault, part = spec.split(":")
        name = FUNCTIONS[part]
        original = getattr(end, name)
        sweep_dir = Path(str(config.hydra.sweep.dir))

        def faulty(*args: Any, **kw: Any) -> Any:
            if fault == "full":
                fill(sweep_dir)
            elif fault.startswith("readonly"):
                folders = [sweep_dir] if fault == "readonly" else list(sweep_dir.glob("1/tensorboard/*/"))
                for folder in folders:
                    subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], check=True)
            elif fault == "gone-job0":
                for events in sweep_dir.glob("0/tensorboard/*/events.out.*"):
                    events.unlink()
            elif fault == "fails":
                raise RuntimeError(f"{part} broke (the test's fault)")
            elif fault == "kill":
                group = int(os.environ["VASE_TEST_KILL_GROUP"])
                os.killpg(group, signal.SIGKILL)
                deadline = time.time() + 30
                while time.time() < deadline:
                    try:
                        os.killpg(group, 0)
                    except ProcessLookupError:
                        break
                    time.sleep(0.1)
            elif fault in ("ctrl-c", "swallowed"):
                try:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(1.0)  # the handler runs here, in the part
                except KeyboardInterrupt:
                    if fault == "ctrl-c":
                        raise
            return original(*args, **kw)

        setattr(end, name, faulty)
