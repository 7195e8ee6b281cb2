"""Read a W&B offline run file (``run-<id>.wandb``) back as W&B's own protobuf records, to check what a W&B user sees
(the run's name, group, config, tags, history and files) without a W&B server. The file is a LevelDB-style log:
a 7-byte header (``:W&B``, magic, version), then 32 KiB blocks of chunks, each with a 7-byte header (CRC, length,
type: full, first, middle, last)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7


def records(path: str | Path) -> list[Any]:
    """Every record of a ``.wandb`` file, parsed with wandb's own ``Record`` message."""
    from wandb.proto.wandb_internal_pb2 import Record

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B run file"
    out, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        if length == 0 and kind == 0:
            break
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):  # full, or the last piece of a split record
            rec = Record()
            rec.ParseFromString(pending)
            out.append(rec)
            pending = b""
    return out


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
