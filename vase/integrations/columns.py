"""vase's reward on the columns of a dataset row, as ms-swift and TRL hand them to reward functions.

Both pass a batch's completions and every dataset column as a list aligned with them. A row carries its targets as

* the six dimension columns (``fabric`` ... ``attribution``, dating as [start, end]; null: not expected of this
  answer), as ``python -m vase.data.export --to swift-grpo`` writes them;
* or a ``metadata`` column (the raw museum line of the released dataset and of ``--to swift`` exports);
* or only a ``solution`` (the reference caption: the six dimensions are read from it, as vase does for a caption-
  only batch).

``solution`` is the reference answer (the sequence bonus compares with it). The reward is the one a ``reward=``
config defines: ``VASE_REWARD`` names an option of ``conf/reward`` (default ``vase6d``) or a YAML file (a reward
node, or a run's ``config.yaml``, whose ``reward`` is taken); ``VASE_REWARD_OVERRIDES`` adds dotted overrides
(``"tau=0.6 weights.shape=0.6"``), as on ``train.py``'s command line.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vase.annotate.records import parse_raw_metadata
from vase.annotate.vocab import DIMENSIONS
from vase.config import load_option, reward_keys, validate_reward
from vase.errors import ConfigError, DataError
from vase.prompt_tasks.base import fields_of
from vase.rewards.reward import RewardOutput, VaseReward, reward_from_node

ENV_REWARD = "VASE_REWARD"
ENV_OVERRIDES = "VASE_REWARD_OVERRIDES"


def load_reward(spec: str | None = None, overrides: str | list[str] | None = None) -> VaseReward:
    """The reward that ``spec`` (an option of ``conf/reward`` or a YAML path; default ``$VASE_REWARD``, else
    ``vase6d``) defines, with ``overrides`` (a dotlist; default ``$VASE_REWARD_OVERRIDES``) merged in."""
    spec = spec or os.environ.get(ENV_REWARD) or "vase6d"
    over = os.environ.get(ENV_OVERRIDES, "") if overrides is None else overrides
    dotlist = over.split() if isinstance(over, str) else list(over)
    path = Path(spec).expanduser()
    if path.suffix in (".yaml", ".yml") or os.sep in spec:
        if not path.is_file():
            raise ConfigError(f"{ENV_REWARD}={spec!r}: no such file (give a reward YAML, a run's config.yaml, or "
                              f"an option of conf/reward such as vase6d)")
        node = OmegaConf.load(path)
        if "terms" not in node and "reward" in node:
            node = node.reward
        if "terms" not in node:
            raise ConfigError(f"{path}: neither a reward config (it has no 'terms') nor a run's config.yaml (no "
                              f"'reward' section)")
    else:
        node = load_option("reward", spec)
    where = f"{ENV_OVERRIDES}={' '.join(dotlist)!r} (on {ENV_REWARD}={spec})"
    try:
        merged = OmegaConf.merge(node, OmegaConf.from_dotlist(dotlist))
        # the checks train.py makes of reward.* (tau in [0, 1], weights >= 0, known keys), before anything is scored
        validate_reward(OmegaConf.create(OmegaConf.to_container(merged, resolve=True)))
        return reward_from_node(merged)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}; valid keys: {reward_keys(node)}") from None
    except (ValueError, OmegaConfBaseException) as e:
        raise ConfigError(f"{where}: {str(e).splitlines()[0]}; valid keys: {reward_keys(node)}") from None


def _dating(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return [int(value[0]), int(value[1])]
    return value


def batch_from_columns(n: int, columns: dict[str, Any]) -> dict[str, Any]:
    """What `VaseReward.compute` needs for ``n`` completions, from a batch's dataset columns."""

    def column(name: str) -> list[Any] | None:
        values = columns.get(name)
        if values is None:
            return None
        values = list(values)
        if len(values) != n:
            raise DataError(f"column {name!r} has {len(values)} values for {n} completions")
        return values

    solution, ids = column("solution"), column("id")
    batch: dict[str, Any] = {}
    if all(d in columns for d in DIMENSIONS):
        cols = {d: column(d) for d in DIMENSIONS}
        batch["targets"] = [{d: (_dating(cols[d][k]) if d == "dating" else cols[d][k]) for d in DIMENSIONS}
                            for k in range(n)]
    elif (meta := column("metadata")) is not None:
        batch["targets"] = [fields_of(parse_raw_metadata(m, str(ids[k]) if ids else f"row {k}"))
                            for k, m in enumerate(meta)]
    elif solution is None:
        raise DataError(f"vase's reward needs each row's targets: the six dimension columns {list(DIMENSIONS)} "
                        f"(python -m vase.data.export --to swift-grpo), a 'metadata' column (raw museum line) or a "
                        f"'solution' column (the reference caption); the batch has {sorted(columns)}")
    if solution is not None:
        batch["reference"] = [str(s) for s in solution]
    if ids is not None:
        batch["ids"] = [str(i) for i in ids]
    return batch


class ColumnReward:
    """One configured reward scoring batches of completions with their columns; a batch scored once serves the
    total and every per-term function (ms-swift and TRL call each reward function on the same batch)."""

    def __init__(self, reward: VaseReward | None = None) -> None:
        self.reward = reward if reward is not None else load_reward()
        self._last: tuple[str, RewardOutput] | None = None

    @property
    def terms(self) -> dict[str, float]:
        """The terms that count (non-zero weight), name -> weight: the per-term functions and their weights."""
        return {name: float(t.weight) for name, t in self.reward.terms.items() if float(t.weight) != 0.0}

    def score(self, completions: list[Any], columns: dict[str, Any]) -> RewardOutput:
        batch = batch_from_columns(len(completions), columns)
        key = hashlib.sha256(json.dumps([[str(c) for c in completions], batch], sort_keys=True,
                                        default=str).encode()).hexdigest()
        if self._last is None or self._last[0] != key:
            self._last = (key, self.reward.compute(list(completions), **batch))
        return self._last[1]

    def total(self, completions: list[Any], columns: dict[str, Any]) -> list[float]:
        return [float(x) for x in self.score(completions, columns).total]

    def term(self, name: str, completions: list[Any], columns: dict[str, Any]) -> list[float]:
        """One term's value before its weight (the total is the sum of weight x value over `terms`)."""
        return [float(x) for x in self.score(completions, columns).components[name]]
