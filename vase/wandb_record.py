"""W&B's run record (``run-<id>.wandb``, the file ``wandb sync`` uploads) read back, and waited for.

``wandb.finish()`` returns once the W&B service has taken the run's last messages, not once it has written them: the
service closes the record a moment later (measured here, wandb 0.31: a run's record was 32,768 bytes, its first block,
when ``finish()`` returned and 57,022 bytes three seconds later). A run synced or read in that moment is a run
without its metrics, so `wait_until_complete` waits for the record's closing ``exit`` entry.

The file is a LevelDB-style log: a 7-byte header (``:W&B``, magic, version), then 32 KiB blocks of chunks, each with a
7-byte header (CRC, length, type: full, first, middle, last), each record a W&B ``Record`` protobuf message.
"""

from __future__ import annotations

import logging
import struct
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("vase")

BLOCK = 32 * 1024
HEADER = 7
WAIT_S = 120.0
"""How long `wait_until_complete` waits for W&B's service to close a record before saying so."""


def records(path: str | Path) -> list[Any]:
    """Every whole record of a ``.wandb`` file, parsed with wandb's own ``Record`` message (a record whose chunks
    are not all written yet is left out).

    Raises:
        ValueError: the file is not a W&B run record (names the file).
    """
    # lazy: wandb's protobuf modules load only where a W&B run was written
    from wandb.proto.wandb_internal_pb2 import Record

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run record (no ':W&B' header)")
    out, pending, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        if (length == 0 and kind == 0) or pos + HEADER + length > len(data):
            break  # zeros, or a chunk still being written
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):  # full, or the last piece of a split record
            rec = Record()
            rec.ParseFromString(pending)
            out.append(rec)
            pending = b""
    return out


def is_complete(path: str | Path) -> bool:
    """Whether the record holds its closing ``exit`` entry (W&B writes it last, after the summary)."""
    p = Path(path)
    if not p.is_file() or p.stat().st_size <= HEADER:
        return False
    return any(r.WhichOneof("record_type") == "exit" for r in records(p))


def wait_until_complete(path: str | Path, timeout_s: float = WAIT_S, poll_s: float = 0.1) -> bool:
    """Wait until W&B's service has written the whole run record; past ``timeout_s`` say in one line what that means
    for the user and return False."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if is_complete(path):
                return True
        except ValueError as e:  # not a record this reader knows: nothing to wait for
            log.warning("W&B: %s; not waiting for it", e)
            return False
        if time.monotonic() >= deadline:
            log.warning("W&B: the run record %s was still being written %.0f s after the run finished; `wandb sync "
                        "%s` may upload a run without its last metrics (sync it again once the W&B service is done)",
                        path, timeout_s, Path(path).parent)
            return False
        time.sleep(poll_s)
