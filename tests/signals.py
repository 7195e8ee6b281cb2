"""A callback that signals its own process at a given optimizer step, so kill tests stop a run at a known place.

Configured by the environment, so the command line (which decides which run a rerun resumes) stays the same:
``VASE_TEST_SIGNAL_AT=<step>:<signal number>``; unset, it does nothing. In a sweep, ``VASE_TEST_SIGNAL_JOB=<n>``
limits it to job ``n`` (the jobs of the basic launcher share one process).
"""

from __future__ import annotations

import os
from typing import Any

import pytorch_lightning as pl
from hydra.core.hydra_config import HydraConfig


class SignalAt(pl.Callback):
    def __init__(self) -> None:
        step, _, signum = os.environ.get("VASE_TEST_SIGNAL_AT", "").partition(":")
        self.step, self.signum = (int(step), int(signum)) if step else (None, None)
        job = os.environ.get("VASE_TEST_SIGNAL_JOB")
        if job is not None and str(HydraConfig.get().job.num) != job:
            self.step = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.step is not None and trainer.global_step == self.step:
            self.step = None
            os.kill(os.getpid(), self.signum)


class RaiseAt(pl.Callback):
    """Raises at the first training batch of sweep job ``VASE_TEST_RAISE_JOB`` (unset: does nothing): a job that
    fails in the sweep's own process (the basic launcher)."""

    def __init__(self) -> None:
        job = os.environ.get("VASE_TEST_RAISE_JOB")
        self.armed = job is not None and str(HydraConfig.get().job.num) == job

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.armed:
            raise RuntimeError("test failure in this job")
