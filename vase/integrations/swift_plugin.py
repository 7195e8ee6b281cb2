"""vase's reward as an ms-swift plugin: the paper's command, with the plugin it never published.

    VASE_REWARD=vase6d swift rlhf --rlhf_type grpo --model <dir> --template qwen2_5_vl \
        --dataset <export>/train.jsonl --external_plugins $(python -m vase.integrations.swift_plugin --path) \
        --reward_funcs external_vase_acc ...

registers, in ms-swift's ``orms``:

* ``external_vase_acc`` (the paper's name): the total reward R of the configured reward, as vase's own GRPO computes
  it (`VaseReward`: the same terms, weights and tau);
* ``vase_<term>`` for each term of non-zero weight (``vase_fabric`` ... ``vase_penalty``, ``vase_bonus``): the term's
  value before its weight, so that ``--reward_funcs vase_fabric ... --reward_weights <w> ...`` (printed by
  ``python -m vase.integrations.swift_plugin --args``) sums to R and ms-swift logs each term by name.

The reward is chosen by ``VASE_REWARD`` / ``VASE_REWARD_OVERRIDES`` (`vase.integrations.columns`); the rows'
targets come from the columns of ``python -m vase.data.export --to swift-grpo``. ``VASE_REWARD_LOG=<file.jsonl>``
records every scored batch (completions, columns, values). In ms-swift's virtualenv, install
vase without its training stack: ``pip install --no-deps -e <vase>`` and ``pip install -r
<vase>/vase/integrations/requirements-reward.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

try:
    import vase  # noqa: F401
except ImportError:  # loaded by path (--external_plugins) from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vase.annotate.vocab import DIMENSIONS  # noqa: E402
from vase.errors import ConfigError  # noqa: E402
from vase.integrations.columns import ColumnReward  # noqa: E402

try:
    from swift.rewards import ORM, orms
except ImportError:  # outside ms-swift (vase's own tests, --args): the same classes, a registry of our own
    ORM, orms = object, {}

PAPER_NAME = "external_vase_acc"
ENV_LOG = "VASE_REWARD_LOG"  # a JSONL file: every scored batch is appended to it (for checks)
_shared: ColumnReward | None = None


def shared_reward() -> ColumnReward:
    """One configured reward per process, shared by every ORM ms-swift builds (the encoder loads once)."""
    global _shared
    if _shared is None:
        _shared = ColumnReward()
    return _shared


class VaseORM(ORM):
    """The configured reward's total R for each completion, its targets read from the row's columns."""

    term: str | None = None

    def __init__(self, args: Any = None, **kwargs: Any) -> None:
        self.args = args
        self.reward = shared_reward()
        reward_log()  # a bad VASE_REWARD_LOG fails when ms-swift builds the reward, not at the first scored batch

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float]:
        if self.term is None:
            values = self.reward.total(completions, kwargs)
        else:
            values = self.reward.term(self.term, completions, kwargs)
        if (path := reward_log()) is not None:
            log_scores(path, type(self).__name__, completions, kwargs, values)
        return values


def reward_log() -> Path | None:
    """The file ``VASE_REWARD_LOG`` names (None when unset); a folder there is a ConfigError naming the variable."""
    value = os.environ.get(ENV_LOG)
    if not value:
        return None
    path = Path(value)
    if path.is_dir():
        raise ConfigError(f"{ENV_LOG}={path} is a folder: give the JSONL file every scored batch is appended to "
                          f"(e.g. {path / 'rewards.jsonl'})")
    return path


def log_scores(path: Path, name: str, completions: list[Any], columns: dict[str, Any], values: list[float]) -> None:
    """Append what one call scored (``VASE_REWARD_LOG``): the completions, the columns the reward reads and the
    values, so the numbers ms-swift trained on can be checked against vase's own reward afterwards."""
    keep = {k: list(columns[k]) for k in ("id", "task", "solution", "metadata", *DIMENSIONS) if k in columns}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"reward": name, "completions": ["" if c is None else str(c) for c in completions],
                            "columns": keep,
                            "values": values}, ensure_ascii=False, default=str) + "\n")


def named_orm(name: str, term: str | None) -> type:
    """An ORM class named as it is registered (ms-swift logs a reward by its class name: ``rewards/<name>/mean``),
    scoring the total (``term=None``) or one term's value before its weight."""
    what = "the total reward R" if term is None else f"the reward term {term!r} (before its weight)"
    return type(name, (VaseORM,), {"term": term, "__doc__": f"vase's {what}"})


def register() -> dict[str, type]:
    """Put ``external_vase_acc`` and one ``vase_<term>`` per counted term into ms-swift's ``orms``."""
    added = {PAPER_NAME: named_orm(PAPER_NAME, None),
             **{f"vase_{name}": named_orm(f"vase_{name}", name) for name in shared_reward().terms}}
    orms.update(added)
    return added


def swift_args() -> list[str]:
    """``--reward_funcs`` and ``--reward_weights`` for the per-term form (their weighted sum is R)."""
    terms = shared_reward().terms
    return ["--reward_funcs", *[f"vase_{n}" for n in terms], "--reward_weights", *[f"{w:g}" for w in terms.values()]]


register()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vase.integrations.swift_plugin", description=__doc__.splitlines()[0])
    ap.add_argument("--path", action="store_true", help="print this file's path (for --external_plugins)")
    ap.add_argument("--args", action="store_true", help="print --reward_funcs/--reward_weights for the per-term form")
    a = ap.parse_args(argv)
    if a.args:
        print(" ".join(swift_args()))
    else:
        print(Path(__file__).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
