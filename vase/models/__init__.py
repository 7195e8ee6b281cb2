"""Model building and loading (tiny Qwen2.5-VL from config, real checkpoints by path or hub id, LoRA)."""

from vase.models.loading import load_model, load_model_and_processor, load_processor, resolve_model_path

__all__ = ["load_model", "load_model_and_processor", "load_processor", "resolve_model_path"]
