"""The orchestration layer: what the entry points run. ``train.py`` composes and validates the config and calls
`run_training` (``vase.pipeline.train``), which builds each stage's objects (``build``), shares one SFT adapter
across a sweep's jobs (``sft_cache``), evaluates after training and writes the report (``report``); ``reach`` is what
``VASE_CHECK_CONFIG=1`` checks beyond the config (the dataset, the checkpoint, a tracking server). Nothing below this
package imports it. ``tasks`` holds ``evaluate.py``'s tasks, one module each.

The names below load ``vase.pipeline.train`` (and Lightning, seconds) on first use, so that the registry of
evaluation actions reads ``vase.pipeline.actions`` without it."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["objective", "run_training"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("vase.pipeline.train"), name)
    raise AttributeError(f"module 'vase.pipeline' has no attribute {name!r}")
