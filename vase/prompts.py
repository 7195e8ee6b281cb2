"""The instructions the models are given: one place, so training, GRPO and evaluation ask the same question."""

CAPTION_PROMPT = (
    "These are views of a 3D model of an ancient Greek vase. Describe it as a museum caption: "
    "fabric, technique, shape, date, decoration and attribution."
)
