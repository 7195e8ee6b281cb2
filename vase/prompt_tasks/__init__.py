"""Prompt tasks: what is specific to each thing a model is asked (its prompt, its answer, how its samples are built,
how an answer is parsed and compared), below data, rewards and evaluation, which all use the same code.

"Task" means only this in vase (docs/glossary.md#words): what ``evaluate.py`` runs is an action (``action=``,
`vase.config.EVAL_ACTIONS`), which tasks a run trains on is its mix (``data.mix``, `vase.choices.DATA_MIXES`) and which
entry point made a run is its kind (``run_kind``: its log folder). Each prompt task is one module here with a
``samples(example, ctx)`` function, listed once in `SAMPLES`; a training mix that includes it is a line in
`DATA_MIXES`. `VQA` names the ways evaluation asks and judges held-out questions (``val.vqa``), each a prompt
task's `EvalProtocol`.
"""

from __future__ import annotations

from vase.choices import DATA_MIXES
from vase.config.renames import old_name
from vase.prompt_tasks import caption, invrender, mc, qa

__all__ = ["DATA_MIXES", "SAMPLES", "VQA"]

SAMPLES = {"caption": caption.samples, "qa": qa.samples, "mc": mc.samples, "invrender": invrender.samples}
"""Each task's sample builder: ``(example, ctx) -> list[ChatSample]`` (zoom, which adds tool samples to QA, is
``vase.prompt_tasks.zoom.samples``)."""

VQA = {"open": qa.OPEN, "mc": mc.LETTER, "ll": mc.LIKELIHOOD}
"""``val.vqa``'s protocols: how each asks a question about a dimension and judges the answer."""


def __getattr__(name: str) -> object:  # DATA_TASKS, the name 0.2 changed, for one release
    return old_name(__name__, globals(), name)
