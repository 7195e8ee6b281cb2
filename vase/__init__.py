"""vase: reproduce and go past VaseVQA-3D (3D VLMs on ancient Greek pottery).

Data flow: synthetic or real GLB vases -> ``vase.render`` views -> ``vase.data`` model inputs ->
``vase.training`` (SFT with LoRA) -> ``vase.eval`` (generate, score with ``vase.metrics``).
"""

__version__ = "0.2.0"
