"""What names a run and a sweep: the resolvers behind W&B's run name, group and tags (``${vase.run_name:...}``,
``${vase.sweep_group:}``, ``${vase.tags:...}``, ``${vase.overrides_hash:}``), the tiny model's cache key and the launch
folder."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from vase.models.tiny import spec_fingerprint
from vase.runs import job_overrides


def tiny_key(overrides: Any = None) -> str:
    """``${vase.tiny_key:${model.tiny}}``: the tiny model's cache key, the fingerprint of its spec."""
    if overrides is not None and not isinstance(overrides, dict):
        overrides = OmegaConf.to_container(overrides, resolve=True)
    return spec_fingerprint(overrides)


def launch_dir() -> str:
    """``${vase.cwd:}``: the directory the command was launched from. Unlike ``${hydra:runtime.cwd}`` it resolves
    before Hydra sets its runtime config, which a multirun's sweep directory needs."""
    return os.getcwd()


_ABBREV = (("reward.weights.", "w_"), ("reward.", ""), ("stage.module.lora.", "lora_"), ("stage.module.", ""),
           ("stage.", ""), ("data.", ""), ("model.", "model_"))
_NOT_IN_NAMES = ("paths.", "logger", "hydra.", "sweep", "experiment", "callbacks.", "trainer.devices")


def run_name(prefix: str = "") -> str:
    """``${vase.run_name:<stage>}``: a W&B run name from the job's overrides (see :func:`name_from_overrides`)."""
    return name_from_overrides(job_overrides(), prefix)


def name_from_overrides(overrides: list[str], prefix: str = "") -> str:
    """A short run name from overrides; paths, loggers and Hydra's own settings are left out.

    >>> name_from_overrides(["reward.weights.shape=0.6", "seed=1", "paths.log_dir=/x", "stage=grpo"], "grpo")
    'grpo-w_shape=0.6-seed=1'
    >>> name_from_overrides([], "sft")
    'sft'
    """
    parts = []
    for o in overrides:
        key, _, value = o.partition("=")
        key = key.lstrip("+~")
        if any(key.startswith(p) for p in _NOT_IN_NAMES) or key in ("stage", "task"):
            continue
        for long, short in _ABBREV:
            if key.startswith(long):
                key = short + key[len(long):]
                break
        parts.append(f"{key}={value}")
    return "-".join([prefix, *parts]) if prefix else "-".join(parts) or "run"


def sweep_group() -> str | None:
    """``${vase.sweep_group:}``: in a multirun, the sweep's name and launch time (one W&B group per sweep); else null."""
    try:
        hc = HydraConfig.get()
    except ValueError:  # not inside a Hydra job
        return None
    if hc.mode != RunMode.MULTIRUN:
        return None
    name = hc.runtime.choices.get("sweep") or "multirun"
    return f"{name}-{Path(str(hc.sweep.dir)).name}"


def overrides_hash() -> str:
    """``${vase.overrides_hash:}``: a short hash of the job's overrides (what tells two jobs of a sweep apart; with
    the same code and defaults, equal overrides compose equal configs)."""
    return hashlib.sha256("\n".join(sorted(job_overrides())).encode()).hexdigest()[:8]


def run_tags(tags: Any = None) -> list[str]:
    """``${vase.tags:${tags}}``: the configured tags plus ``experiment:<name>``, ``sweep:<name>`` and ``cfg:<hash>``."""
    out = [str(t) for t in (tags or [])]
    try:
        choices = HydraConfig.get().runtime.choices
    except ValueError:  # not inside a Hydra job
        choices = {}
    for group in ("experiment", "sweep"):
        if choices.get(group):
            out.append(f"{group}:{choices[group]}")
    out.append(f"cfg:{overrides_hash()}")
    return out
