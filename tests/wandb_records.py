"""What a W&B user sees of an offline run (its name, group, config, tags, history and files), read from its record
(``run-<id>.wandb``) without a W&B server, with vase's reader of that file (`vase.wandb_record`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vase.wandb_record import records


def run_view(path: str | Path) -> dict[str, Any]:
    """What the W&B UI shows of a run: name, group, job type, tags, config (its latest values), the keys its history
    logged, its summary and its files."""
    view: dict[str, Any] = {"config": {}, "history": set(), "summary": {}, "files": set()}
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            view.update(name=rec.run.display_name, group=rec.run.run_group, job_type=rec.run.job_type,
                        tags=list(rec.run.tags))
            for item in rec.run.config.update:
                view["config"][item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                view["config"][item.key] = json.loads(item.value_json)
        elif kind == "history":
            view["history"] |= {item.key or item.nested_key[0] for item in rec.history.item}  # a media value: nested
        elif kind == "summary":
            for item in rec.summary.update:
                view["summary"][item.key or item.nested_key[0]] = json.loads(item.value_json)
        elif kind == "files":
            view["files"] |= {f.path for f in rec.files.files}
    view["config"] = {k: (v.get("value") if isinstance(v, dict) and "value" in v else v)
                      for k, v in view["config"].items()}
    return view
