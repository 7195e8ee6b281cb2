"""Prompt tasks: what is specific to each thing a model is asked (its prompt, its answer, how its samples are built,
how an answer is parsed and compared), below data, rewards and evaluation, which all use the same code.

Not to be confused with the three other "task"s (docs/glossary.md): ``evaluate.py task=`` is an evaluation task
(`vase.config.EVAL_TASKS`), ``data.task`` a training mix (`vase.choices.DATA_TASKS`: which prompt tasks a run trains
on) and ``task_name`` the kind of run (its log folder). Each prompt task is one module here with a
``samples(example, ctx)`` function, listed once in `SAMPLES`; a training mix that includes it is a line in
`DATA_TASKS`. `VQA` names the ways evaluation asks and judges held-out questions (``evaluate.vqa``), each a prompt
task's `EvalProtocol`.
"""

from __future__ import annotations

from vase.choices import DATA_TASKS
from vase.prompt_tasks import caption, invrender, mc, qa

__all__ = ["DATA_TASKS", "SAMPLES", "VQA"]

SAMPLES = {"caption": caption.samples, "qa": qa.samples, "mc": mc.samples, "invrender": invrender.samples}
"""Each task's sample builder: ``(example, ctx) -> list[ChatSample]`` (zoom, which adds tool samples to QA, is
``vase.prompt_tasks.zoom.samples``)."""

VQA = {"open": qa.OPEN, "mc": mc.LETTER, "ll": mc.LIKELIHOOD}
"""``evaluate.vqa``'s protocols: how each asks a question about a dimension and judges the answer."""
