"""Exceptions that name the file, key or id at fault, so a user knows what to fix."""

from __future__ import annotations

import errno
import sys
from typing import NoReturn


class VaseError(Exception):
    """Base class for every error vase raises on purpose."""


class ConfigError(VaseError):
    """A configuration value is invalid; the message names the key."""


def config_exit(e: ConfigError) -> NoReturn:
    """Say a config error in one line on stderr and exit 2, from where an exception would come out as Hydra's
    traceback or warning (a resolver while Hydra makes the run's folder, a sweeper, a multirun callback): SystemExit
    passes through their handlers."""
    print(f"config error: {e}", file=sys.stderr, flush=True)
    raise SystemExit(2) from e


class DataError(VaseError):
    """A data file (GLB, image, annotation JSON) is missing or malformed; the message names the file."""


class Interrupted(Exception):  # noqa: N818 - not an error: the user (or the scheduler) asked for it
    """A run stopped on a signal after saving what a rerun resumes from; its record says ``interrupted``."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


class MetricError(VaseError):
    """A metric could not be computed; raised instead of silently reporting 0.0."""


def first_line(e: BaseException, limit: int | None = None) -> str:
    """The first line of ``e``'s message (at most ``limit`` characters; ``""`` when it has none): what a one-line
    report quotes of another library's error.

    >>> first_line(OSError("HTTPConnectionPool: Max retries exceeded\\n  caused by ..."))
    'HTTPConnectionPool: Max retries exceeded'
    """
    lines = str(e).strip().splitlines()
    return lines[0][:limit] if lines else ""


def out_refused(out: object, e: OSError) -> str:
    """A command's ``--out`` that is taken or cannot be written, in the one line it prints (naming the path)."""
    return f"error: --out {e}" if isinstance(e, FileExistsError) else f"error: --out {out}: {e.strerror or e}"


STORAGE_ERRNOS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
                  errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied"}
"""Where a run cannot write: what the user must fix on their machine, not a bug in vase."""


def storage_problem(e: OSError) -> str | None:
    """An OSError of the storage (a full disk, a read-only or forbidden folder) as one line naming the path and what to
    do; None for any other error (its traceback is the report).

    >>> storage_problem(OSError(errno.ENOSPC, "No space left on device", "/runs/a/generations.jsonl"))
    'no space left on the device writing /runs/a/generations.jsonl: free space there, or write elsewhere (paths.log_dir=..., paths.cache_dir=...)'
    """
    what = STORAGE_ERRNOS.get(e.errno)
    if what is None:
        return None
    where = f" writing {e.filename}" if e.filename else ""
    todo = "free space there" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "choose a folder you can write"
    return f"{what}{where}: {todo}, or write elsewhere (paths.log_dir=..., paths.cache_dir=...)"
