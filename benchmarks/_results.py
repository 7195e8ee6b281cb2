"""Write one benchmark's block into benchmarks/RESULTS.md, replacing that benchmark's earlier block; name the machine."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def _cpu_name() -> str | None:
    """The processor's model name (``/proc/cpuinfo``), as vase's run records name it; None where it is not said."""
    try:
        from vase.provenance import cpu_record

        return cpu_record().get("cpu") or None
    except Exception:  # noqa: BLE001 - a benchmark's heading falls back to the architecture
        return None


def commit_label(root: str | Path) -> str:
    """The checkout's commit (10 hex digits), with " with changes" where tracked files differ from it; "?" outside git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short=10", "HEAD") or "?"
    return commit + (" with changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def machine(device: str) -> str:
    """The GPU's name on ``cuda``, else the processor and its core count."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"{_cpu_name() or platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def update_results(path: str | Path, marker: str, table: str) -> None:
    """Put ``table`` between ``<!-- marker -->`` lines in ``path``: in place of the old block, or at the end."""
    path = Path(path)
    start_tag, end_tag = f"<!-- {marker} -->\n", f"<!-- {marker} --> end\n"
    body = path.read_text() if path.is_file() else "# Benchmark results\n"
    block = f"{start_tag}{table}{end_tag}"
    if start_tag in body:
        start = body.index(start_tag)
        end = body.index(end_tag, start) + len(end_tag)
        body = body[:start] + block + body[end:]
    else:
        body = body.rstrip("\n") + "\n\n" + block
    path.write_text(body)
