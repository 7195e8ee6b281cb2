"""Reward terms beyond the six dimensions: each a small class, added to the reward by one YAML entry.

``reward.terms`` maps a name to ``{_target_: <class>, weight: <w>, ...}``; every term's value (one float per
completion) is logged as ``train/reward/<name>`` and ``weight x value`` is added to the total. A term is any callable
``(completions, targets, **batch) -> list[float]`` whose constructor takes ``weight``; ``targets`` are the six
dimensions of each completion's vase (dicts of text, dating as ``"<start> to <end>"``). A user's own term::

    # mypkg/terms.py
    class MentionsRedFigure(RewardTerm):
        def __call__(self, completions, targets, **batch):
            return [float("red-figure" in c.lower()) for c in completions]

    python train.py stage=grpo +reward.terms.red._target_=mypkg.terms.MentionsRedFigure +reward.terms.red.weight=0.5
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from vase.annotate.vocab import DIMENSIONS
from vase.rewards.extract import canonical_or_none, extract_fields


class RewardTerm(ABC):
    """A named, weighted part of the GRPO reward (subclass it and implement ``__call__``)."""

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = float(weight)

    @abstractmethod
    def __call__(self, completions: list[str], targets: list[dict[str, str | None]], **batch: Any) -> list[float]:
        """One value per completion (before the weight)."""


class Keyword(RewardTerm):
    """1 when the completion names the vase's true term of ``dimension`` (synonyms count), else 0: a simple,
    binary, verifiable reward that shows whether GRPO moves the policy at all (``make grpo-sanity``).

    >>> Keyword(dimension="shape")(["A red-figure kylix.", "An amphora."], [{"shape": "kylix"}] * 2)
    [1.0, 0.0]
    """

    def __init__(self, dimension: str = "shape", weight: float = 1.0) -> None:
        super().__init__(weight)
        if dimension not in DIMENSIONS:
            raise ValueError(f"reward term keyword: dimension={dimension!r} must be one of {list(DIMENSIONS)}")
        self.dimension = dimension

    def __call__(self, completions: list[str], targets: list[dict[str, str | None]], **batch: Any) -> list[float]:
        out = []
        for text, target in zip(completions, targets):
            want = target.get(self.dimension)
            term = canonical_or_none(self.dimension, want) if want else None  # None: nothing to name
            said = extract_fields(text).get(self.dimension)
            out.append(float(term is not None and bool(said) and canonical_or_none(self.dimension, said) == term))
        return out
