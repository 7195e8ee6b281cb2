"""submitit's status poll on a cluster without SLURM accounting (``sacct``): its "Bypassing sacct error" warning shown
once with what it means, and the polled command's stderr kept off the console. ``train.py`` installs it before Hydra
starts (`quiet_sacct_warnings`); it imports submitit's logger only, not Hydra's plugins (which Hydra loads itself)."""

from __future__ import annotations

import logging
import subprocess
from typing import Any

from submitit.core import core as submitit_core
from submitit.core import logger as submitit_logger


class _SacctOnce(logging.Filter):
    """submitit's "Bypassing sacct error" (a cluster without SLURM accounting), which it repeats at every poll: shown
    once, with what it means, then dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "Bypassing sacct error" not in message:
            return True
        if self.seen:
            return False
        self.seen = True
        record.msg, record.args = (f"{message}\n  (vase) this cluster has no SLURM accounting (sacct), so submitit "
                                   f"cannot read job states and waits for each job's result file instead; the jobs "
                                   f"run as usual (shown once, not at every poll)"), ()
        return True


class _QuietCheckOutput:
    """``subprocess`` as submitit's status poll uses it, with the polled command's stderr dropped: without accounting,
    ``sacct`` prints "Slurm accounting storage is disabled" at every poll; the failure itself still reaches
    `_SacctOnce` as the exception submitit logs."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def check_output(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        return subprocess.check_output(*args, **kwargs)


def quiet_sacct_warnings() -> None:
    """Install `_SacctOnce` on submitit's logger (after submitit configured it) and keep its status poll's
    stderr off the console."""
    log = submitit_logger.get_logger()
    if not any(isinstance(f, _SacctOnce) for f in log.filters):
        log.addFilter(_SacctOnce())
    if getattr(submitit_core, "subprocess", None) is subprocess:  # the module submitit's poll calls check_output on
        submitit_core.subprocess = _QuietCheckOutput()
