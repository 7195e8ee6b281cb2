"""A callback that signals its own process at a given optimizer step, so kill tests stop a run at a known place.

Configured by the environment, so the command line (which decides which run a rerun resumes) stays the same:
``VASE_TEST_SIGNAL_AT=<step>:<signal number>``; unset, it does nothing.
"""

from __future__ import annotations

import os
from typing import Any

import pytorch_lightning as pl


class SignalAt(pl.Callback):
    def __init__(self) -> None:
        step, _, signum = os.environ.get("VASE_TEST_SIGNAL_AT", "").partition(":")
        self.step, self.signum = (int(step), int(signum)) if step else (None, None)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.step is not None and trainer.global_step == self.step:
            self.step = None
            os.kill(os.getpid(), self.signum)
