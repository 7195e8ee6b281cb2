"""The orchestration layer: what the entry points run. ``train.py`` composes and validates the config and calls
`run_training` (``vase.pipeline.train``), which builds each stage's objects (``build``), shares one SFT adapter
across a sweep's jobs (``sft_cache``), evaluates after training and writes the report (``report``). ``reach`` is what
``VASE_CHECK_CONFIG=1`` checks beyond the config (the dataset, the checkpoint, a tracking server), without torch.
Nothing below this package imports it."""

from typing import Any

__all__ = ["objective", "run_training"]


def __getattr__(name: str) -> Any:  # lazy: vase.pipeline.reach must not load torch through this package's import
    if name in __all__:
        from vase.pipeline import train

        return getattr(train, name)
    raise AttributeError(f"module 'vase.pipeline' has no attribute {name!r}")
