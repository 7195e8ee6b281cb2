"""Exceptions that name the file, key or id at fault, so a user knows what to fix."""

from __future__ import annotations


class VaseError(Exception):
    """Base class for every error vase raises on purpose."""


class ConfigError(VaseError):
    """A configuration value is invalid; the message names the key."""


class DataError(VaseError):
    """A data file (GLB, image, annotation JSON) is missing or malformed; the message names the file."""


class MetricError(VaseError):
    """A metric could not be computed; raised instead of silently reporting 0.0."""
