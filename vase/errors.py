"""Exceptions that name the file, key or id at fault, so a user knows what to fix."""

from __future__ import annotations


class VaseError(Exception):
    """Base class for every error vase raises on purpose."""


class ConfigError(VaseError):
    """A configuration value is invalid; the message names the key."""


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
