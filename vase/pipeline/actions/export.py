"""``evaluate.py action=export``: an adapter merged into its base, saved as a Hugging Face checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vase.config import Decoding, EvalAction
from vase.errors import DataError
from vase.io import atomic_directory, atomic_write_json
from vase.models.checkpoint import LINEAGE_FILE
from vase.models.loading import load_model_and_processor, pixel_bounds, resolve_model_path
from vase.pipeline.actions.common import adapter_trained

ACTION = EvalAction("merge an adapter into its base and save a Hugging Face checkpoint: adapter=... output=<new dir>",
                loads_model=True, writes=())  # refuses any existing output itself


def run(cfg: DictConfig) -> dict[str, Any]:
    """A standalone merged Hugging Face checkpoint (base + the adapter and every adapter under it, with the processor)
    that transformers loads without peft: ``python evaluate.py action=export adapter=<run>/adapter output=<new dir>``."""
    if not cfg.get("adapter"):
        raise DataError("action=export needs adapter=<run>/adapter (the adapter to merge into the base model)")
    out = Path(str(cfg.output))
    if out.suffix == ".json":
        raise DataError(f"action=export writes a checkpoint directory: pass output=<new directory>, not {out}")
    if out.exists():
        raise DataError(f"{out}: already exists; export writes a new directory and never replaces one")
    base = resolve_model_path(cfg.model)
    model, processor = load_model_and_processor(cfg.model, adapter=str(cfg.adapter), merge=True)
    lineage = Path(str(cfg.adapter)) / LINEAGE_FILE
    merged = json.loads(lineage.read_text()).get("merged_adapters", []) if lineage.is_file() else []
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        # also the layout older tools read (transformers < 5, ms-swift, vLLM): the image processor's own
        # preprocessor_config.json and chat_template.json, beside transformers 5's processor_config.json
        processor.image_processor.save_pretrained(tmp)
        template = getattr(processor, "chat_template", None) or getattr(processor.tokenizer, "chat_template", None)
        if template and not (tmp / "chat_template.json").is_file():
            atomic_write_json(tmp / "chat_template.json", {"chat_template": template})
        # generation_config.json is the base's (the hub's sampling settings): vase's own decoding and pixel bounds,
        # which its evaluations used, are recorded here
        atomic_write_json(tmp / "vase_export.json", {
            "base": base, "adapters": [*merged, str(cfg.adapter)], "trained": adapter_trained(cfg),
            "decoding": Decoding.of(cfg.generation).record(),
            "pixels": pixel_bounds(processor),
            "generation_config": "the base checkpoint's, unchanged; vase evaluates with the decoding above"})
    print(f"merged checkpoint written to {out}")
    return {"output": str(out)}
