"""A reward term as a user would write it in their own module (tests that vase takes it by _target_ alone)."""

from __future__ import annotations

from typing import Any

from vase.rewards.terms import RewardTerm


class SaysAmphora(RewardTerm):
    def __call__(self, completions: list[str], targets: list[dict], **batch: Any) -> list[float]:
        return [float("amphora" in c.lower()) for c in completions]
