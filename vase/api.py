"""What a project built on vase may rely on. The names below keep their meaning and their signatures within a minor
version; one changes or goes only with a CHANGELOG line and the minor version that says so (the CHANGELOG's rule),
its old form accepted until the next minor version with one line naming the new one. Everything else in vase may
change in any version.

    from vase.api import RewardTerm, CaptionMetric, EvalAction, register_eval_action

docs/api/public.md lists these with the config keys and the entry-point groups a project may rely on;
tests/test_api.py keeps a snapshot of every name's signature (`snapshot`) and fails when one disappears or changes
without a CHANGELOG line naming it (``python -m vase.api > tests/api_snapshot.json`` writes the snapshot again).
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

from vase import testing
from vase.config.entry_actions import PLUGIN_GROUP, PROJECT_PLUGINS, EvalAction, register_eval_action
from vase.config.renames import STRICT_ENV
from vase.config.validate import validate
from vase.eval.generate import generate_captions
from vase.metrics.registry import CaptionMetric, caption_metric
from vase.pipeline.actions.common import dataset_and_model
from vase.prompt_tasks import SAMPLES, register_data_mix, register_prompt_task
from vase.prompt_tasks.base import ChatSample, fields_of, only
from vase.provenance import machine_stamp
from vase.reports.hypothesis import REPORT_KINDS, ReportKind, check_hypothesis, hypothesis, register_report_kind
from vase.reports.verdict import decide_sweep
from vase.reports.verdict_view import read_verdict
from vase.rewards.terms import RewardTerm
from vase.runs.describe import describe_run, load_record

__all__ = [
    "RewardTerm", "CaptionMetric", "caption_metric", "EvalAction", "register_eval_action", "ReportKind",
    "register_report_kind", "REPORT_KINDS", "SAMPLES", "register_prompt_task", "register_data_mix",
    "ChatSample", "fields_of", "only", "hypothesis", "check_hypothesis", "decide_sweep",
    "read_verdict", "generate_captions", "dataset_and_model", "validate", "describe_run", "load_record", "machine_stamp",
    "ENTRY_POINT_GROUPS", "ENVIRONMENT", "PROJECT_PLUGINS",
]

ENTRY_POINT_GROUPS = {PLUGIN_GROUP: "modules an installed package names there are imported by every vase command "
                                    "before it runs: they register evaluation actions, report kinds, reward terms"}
"""The entry-point groups vase reads from installed packages (a project's own modules: its conf/plugins.yaml,
`PROJECT_PLUGINS`)."""
ENVIRONMENT = {STRICT_ENV: "error: every old name is refused instead of accepted with a deprecation line",
               "VASE_LOG_DIR": "where runs go (paths.log_dir's default)",
               "VASE_CHECK_CONFIG": "1: check the config (and all: what the run reaches) and stop before any model "
                                    "loads"}
"""The environment variables a project may set."""


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def describe(name: str, obj: Any) -> dict[str, Any]:
    """One public name as the snapshot keeps it: where it lives, its kind, its signature, and for a class the
    signatures of its public methods and the fields of a dataclass."""
    out: dict[str, Any] = {"module": getattr(obj, "__module__", None) if callable(obj) else None}
    if inspect.isclass(obj):
        out["kind"] = "class"
        out["signature"] = _signature(obj)
        out["methods"] = {m: _signature(f) for m, f in sorted(vars(obj).items())
                          if callable(f) and (not m.startswith("_") or m == "__call__")}
    elif callable(obj):
        out["kind"] = "function"
        out["signature"] = _signature(obj)
    else:
        out["kind"] = type(obj).__name__
        out["keys"] = sorted(map(str, obj)) if isinstance(obj, dict) else None
    return out


TESTING = ("compose", "run", "sweep_of", "CACHE_ENV")
"""The test helpers a project's tests use (`vase.testing`, what ``vase init`` writes tests with): public too."""


def snapshot() -> dict[str, dict[str, Any]]:
    """Every public name (`__all__`, and `vase.testing`'s `TESTING` as ``testing.<name>``) described (`describe`)."""
    module = sys.modules[__name__]
    out = {name: describe(name, getattr(module, name)) for name in __all__}
    return {**out, **{f"testing.{name}": describe(name, getattr(testing, name)) for name in TESTING}}


def main() -> int:
    print(json.dumps(snapshot(), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
