"""Where ``conf/`` lies, and one option of a config group read as its YAML file defines it."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from vase.errors import ConfigError

CONF_DIR = (Path(__file__).resolve().parents[1] / "conf").resolve()
"""vase's configs: ``vase/conf`` (package data in a wheel; in a checkout a link to its ``conf/``, so the same files)."""


def load_option(group: str, option: str) -> DictConfig:
    """One option of a config group as its YAML file defines it (``conf/<group>/<option>.yaml``), for code that
    builds objects outside Hydra; the file stays the one source of its values."""
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        choices = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        raise ConfigError(f"{group}={option!r} is not a known option; choose one of {choices} (files in {path.parent})")
    return OmegaConf.load(path)

