"""vase's reward for TRL's ``GRPOTrainer``: one reward function per term, with the weights that make their sum R.

    from trl import GRPOConfig, GRPOTrainer
    from vase.integrations.trl import grpo_dataset, reward_functions

    funcs, weights = reward_functions()                  # the vase6d reward (or reward_functions("my.yaml"))
    data = grpo_dataset("export/train.jsonl")            # python -m vase.data.export SRC export --to swift-grpo
    args = GRPOConfig(output_dir="out", reward_weights=weights, num_generations=4, ...)
    GRPOTrainer(model="<Qwen2.5-VL dir>", reward_funcs=funcs, args=args, train_dataset=data).train()

TRL logs each function by its ``__name__`` (``rewards/fabric/mean`` ...), and weighs them by ``reward_weights``: the
weighted sum is the total R that vase's own GRPO maximises (`VaseReward`, the same terms,
weights and tau). The functions read the row's targets from its columns (`vase.integrations.columns`).

``GRPOConfig(multi_objective_aggregation=...)`` and vase's ``stage.module.multi_objective_aggregation`` share names
and advantages (tests/test_grpo.py runs TRL's own code beside vase's): ``sum_then_normalize`` (both defaults)
normalises the weighted sum within its group, ``normalize_then_sum`` (GDPO) each function's rewards within the group
before the weighted sum, then the batch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datasets import Dataset, Image, Sequence

from vase.errors import DataError
from vase.integrations.columns import ColumnReward, load_reward

_TAG = re.compile(r"<(image|video)>")


def reward_functions(spec: str | None = None, overrides: str | list[str] | None = None,
                     ) -> tuple[list[Callable[..., list[float]]], list[float]]:
    """One TRL reward function per term of non-zero weight (named by the term) and their weights (for
    ``GRPOConfig.reward_weights``). ``spec``/``overrides``: the reward, as `
    load_reward` reads them (default ``$VASE_REWARD``, else ``vase6d``)."""
    scorer = ColumnReward(load_reward(spec, overrides))
    funcs = []
    for name in scorer.terms:
        def func(completions: list[Any], _name: str = name, **columns: Any) -> list[float]:
            return scorer.term(_name, completions, columns)

        func.__name__ = func.__qualname__ = name
        funcs.append(func)
    return funcs, list(scorer.terms.values())


def total_function(spec: str | None = None, overrides: str | list[str] | None = None) -> Callable[..., list[float]]:
    """The total R as one TRL reward function (named ``vase_reward``)."""
    scorer = ColumnReward(load_reward(spec, overrides))

    def vase_reward(completions: list[Any], **columns: Any) -> list[float]:
        return scorer.total(completions, columns)

    return vase_reward


def grpo_rows(path: str | Path) -> list[dict[str, Any]]:
    """The lines of a ``--to swift-grpo`` export in TRL's form: a conversational ``prompt`` (the user turn, image
    tags dropped: TRL puts one image part per entry of ``images`` before the text), ``images`` as file paths, and
    every other column as it is (the reward functions read them)."""
    rows = []
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            line = json.loads(raw)
            msgs = line.pop("messages", None)
            if not (isinstance(msgs, list) and msgs and msgs[-1].get("role") == "user" and "solution" in line):
                raise DataError(f"{path}:{n}: not a GRPO line (a last user turn and a 'solution' column; "
                                f"python -m vase.data.export SRC OUT --to swift-grpo writes them)")
            prompt = [{**m, "content": _TAG.sub("", m["content"]).strip()} if m.get("role") == "user" else m
                      for m in msgs]
            rows.append({"prompt": prompt, **line})
    return rows


def grpo_dataset(path: str | Path) -> Any:
    """`grpo_rows` as a ``datasets.Dataset`` whose ``images`` column loads the view files as PIL images."""
    data = Dataset.from_list(grpo_rows(path))
    return data.cast_column("images", Sequence(Image())) if "images" in data.column_names else data
