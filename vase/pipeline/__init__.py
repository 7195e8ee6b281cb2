"""The orchestration layer: what the entry points run. ``train.py`` composes and validates the config and calls
`run_training` (``vase.pipeline.train``), which builds each stage's objects (``build``), shares one SFT adapter
across a sweep's jobs (``sft_cache``), evaluates after training and writes the report (``report``); ``reach`` is what
``VASE_CHECK_CONFIG=1`` checks beyond the config (the dataset, the checkpoint, a tracking server). Nothing below this
package imports it."""

from vase.pipeline.train import objective, run_training

__all__ = ["objective", "run_training"]
