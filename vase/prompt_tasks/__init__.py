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

from collections.abc import Callable
from typing import Any

from vase.choices import DATA_MIXES
from vase.config.renames import old_name
from vase.prompt_tasks import caption, invrender, mc, qa

__all__ = ["DATA_MIXES", "SAMPLES", "VQA", "register_data_mix", "register_prompt_task"]

SAMPLES = {"caption": caption.samples, "qa": qa.samples, "mc": mc.samples, "invrender": invrender.samples}
"""Each task's sample builder: ``(example, ctx) -> list[ChatSample]`` (zoom, which adds tool samples to QA, is
``vase.prompt_tasks.zoom.samples``)."""

VQA = {"open": qa.OPEN, "mc": mc.LETTER, "ll": mc.LIKELIHOOD}
"""``val.vqa``'s protocols: how each asks a question about a dimension and judges the answer."""


def register_prompt_task(name: str, samples: Callable[..., Any], replace: bool = False) -> None:
    """Add a prompt task of your own: ``samples(example, ctx) -> list[ChatSample]`` (as `caption.samples`), from a
    module your project lists in its conf/plugins.yaml; a training mix names it (`register_data_mix`). A name taken
    is refused unless ``replace``."""
    if name in SAMPLES and not replace:
        raise ValueError(f"prompt task {name!r} exists already; pass replace=True")
    SAMPLES[name] = samples


def register_data_mix(name: str, tasks: tuple[str, ...] | list[str], replace: bool = False) -> None:
    """Add a training mix (``data.mix=<name>``): the prompt tasks it trains on, in order, each one of `SAMPLES`."""
    unknown = [t for t in tasks if t not in SAMPLES]
    if unknown or not tasks:
        raise ValueError(f"data mix {name!r}: {unknown or 'no tasks'} not prompt tasks ({', '.join(SAMPLES)}); "
                         f"register_prompt_task first")
    if name in DATA_MIXES and not replace:
        raise ValueError(f"data mix {name!r} exists already; pass replace=True")
    DATA_MIXES[name] = tuple(tasks)


def __getattr__(name: str) -> object:  # DATA_TASKS, the name 0.2 changed, for one release
    return old_name(__name__, globals(), name)
