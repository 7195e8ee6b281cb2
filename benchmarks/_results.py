"""Write one benchmark's block into benchmarks/RESULTS.md, replacing that benchmark's earlier block."""

from __future__ import annotations

from pathlib import Path


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
