"""Training stages as Lightning modules: SFT (LoRA) and GRPO."""
