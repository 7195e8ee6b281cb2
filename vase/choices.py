"""The named choices of vase's settings, in one place below every part that uses them (the schema in
``vase.config``, the loaders, the rewards, the evaluation). Plain data: imports nothing."""

from __future__ import annotations

STAGES = ("sft", "grpo")
DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16",
          "fp16": "float16", "auto": "auto"}
"""``model.dtype`` spellings and the torch dtype each names: the one table the schema and the loader share."""
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo")
ROLLOUT_ENGINES = ("eager", "static", "compiled")  # stage.module.rollout (vase.training.rollout)
SCALE_REWARDS = ("group", "batch", "none")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
"""How GRPO turns several reward terms into advantages (TRL's names): the weighted sum normalised within its group
(GRPO's own), or each term normalised within the group before the weighted sum, then the batch (GDPO)."""
NEGATIVE_CONTROLS = ("flip_advantages", "shuffle_rewards")
RETRIEVAL_FORMATS = ("asked", "lines")  # retrieval.format: a question's dimension only | each neighbour's whole line
VIEW_FEATURES = ("auto", "clip", "pixels")  # retrieval.features, reward.terms.learned.heads.features
"""``stage.module.negative_control``: ways to break GRPO on purpose, so that a learning check can be seen to fail."""
VQA_PROTOCOLS = ("open", "mc", "ll")  # open-ended, multiple choice by letter, multiple choice by option likelihood
PROTOCOL_LABELS = {"open": "open-ended (sim ≥ τ)", "open+zoom": "open-ended with the zoom tool",
                   "mc": "multiple choice (letter)", "ll": "multiple choice (option likelihood)"}
SIMILARITIES = ("embedding", "sequence", "vocabulary", "year_iou")
TINY_OPEN_CLIP_NAME = "vase-tiny-clip"
"""The open_clip architecture name of vase's tiny test CLIP (registered with open_clip when it is built)."""
DATA_MIXES = {"caption": ("caption",), "qa": ("qa",), "both": ("caption", "qa"), "all": ("caption", "qa", "mc"),
              "invrender": ("invrender",)}
"""``data.mix``, the training mix: each value and the prompt tasks (``vase.prompt_tasks.SAMPLES``) it trains on, in
order (``all`` adds multiple choice to teach its format). The one table the config check and the data module read."""
LAYOUTS = ("vase", "release", "paper_eval", "swift")
"""The dataset layouts ``data.layout`` names (besides ``auto``); their readers are in ``vase.data.layouts``."""
MIN_EVAL_VASES = 2
"""The fewest vases a caption evaluation scores: FID compares two sets of caption embeddings, each of at least 2."""
CPU_KERNELS = ("native", "portable")
"""``cpu_kernels``'s values: the CPU's widest kernels, or pinned ones whose numbers travel between x86 CPUs (``vase.kernels``)."""
CPU_ALLOCATORS = ("keep", "system")
"""``cpu_allocator``'s values: freed memory stays mapped for the next step, or the C library's defaults (``vase.allocator``)."""

PAPER_TAU = 0.7
"""The paper's reward threshold tau (the ablation's tau plot marks it)."""
PAPER_WEIGHT = 0.15
"""The paper's reward weight of shape and dating (the others are then the paper's too): target (ii) of a reward-weight
ablation is read at it."""
DRAW_KEY = "data.synthetic.seed"
"""The key that draws another synthetic dataset: a sweep's replicate of the data (a draw), kept apart from a seed."""

