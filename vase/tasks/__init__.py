"""Tasks: what is specific to each thing a model is asked (its prompt, its answer, how its samples are built, how an
answer is parsed and compared), below data, rewards and evaluation, which all use the same task code.

``data.task`` names the tasks a run trains on (`DATA_TASKS`); each task is one module here with a
``samples(example, ctx)`` function, listed once in `SAMPLES`. Adding a task: a module and a line in each.
`VQA` names the ways evaluation asks and judges held-out questions (``evaluate.vqa``), each a task's
`EvalProtocol`.
"""

from __future__ import annotations

from vase.tasks import caption, invrender, mc, qa

SAMPLES = {"caption": caption.samples, "qa": qa.samples, "mc": mc.samples, "invrender": invrender.samples}
"""Each task's sample builder: ``(example, ctx) -> list[ChatSample]`` (zoom, which adds tool samples to QA, is
``vase.tasks.zoom.samples``)."""

DATA_TASKS = {"caption": ("caption",), "qa": ("qa",), "both": ("caption", "qa"), "all": ("caption", "qa", "mc"),
              "invrender": ("invrender",)}
"""``data.task``: the tasks each setting trains on, in order (``all`` adds multiple choice to teach its format)."""

VQA = {"open": qa.OPEN, "mc": mc.LETTER, "ll": mc.LIKELIHOOD}
"""``evaluate.vqa``'s protocols: how each asks a question about a dimension and judges the answer."""
