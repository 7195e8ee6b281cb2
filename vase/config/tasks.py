"""The tasks each entry point takes (``evaluate.py task=...``, ``python -m vase.filter task=...``) and their help."""

from __future__ import annotations

EVAL_TASKS = {
    "generate": "caption a split with a model (and adapter) and score the captions (the default)",
    "score": "score caption files: generated=G.json ground_truth=T.json output=OUT.json",
    "vqa": "per-dimension VQA accuracy, open-ended and/or multiple choice by letter or by option likelihood (vqa.protocol=open|mc|ll|both|open+ll)",
    "leaderboard": "gather runs and results files into one table and plot: runs=[dir,file,...]",
    "export": "merge an adapter into its base and save a Hugging Face checkpoint: adapter=... output=<new dir>",
    "check": "list every problem of a dataset before a long run: data.root=...",
    "vaseeval": "score 3D reconstructions against ground-truth GLBs: gt_dir=... 'methods={name: dir}'",
    "attributes": "the six-head attribute baseline on frozen CLIP view features",
    "invrender": "inverse rendering: predictor=model|oracle|random answers generator parameters, rendered and scored",
}
"""``evaluate.py task=...``: each task with its one line (``python evaluate.py --help`` lists them)."""
FILTER_TASKS = {
    "run": "filter a photo folder: quality classifier (if given), CLIP fragment filter, best view (the default)",
    "train_quality": "train the ResNet-50 good/bad classifier on a labelled folder (0/ bad, 1/ good)",
    "synthetic": "make synthetic museum photos, train the classifier on them, filter them",
}
"""``python -m vase.filter task=...``: the curation tasks. conf/task holds every entry point's task files; each entry
point takes only its own names (`vase.config.preflight.preflight_overrides`)."""


def tasks_help(tasks: dict[str, str] = EVAL_TASKS, command: str = "python evaluate.py") -> str:
    """An entry point's tasks, one line each."""
    width = max(map(len, tasks))
    return f"Tasks ({command} task=<name>):\n" + "".join(f"  {name:<{width}}  {what}\n" for name, what in tasks.items())
