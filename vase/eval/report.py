"""Human-readable results: the markdown table in the paper's Table 3 order, a loss curve, a contact sheet, a report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from vase.io import atomic_write_bytes, atomic_write_text
from vase.metrics.caption import TABLE_COLUMNS


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "–"
    if key.startswith("r_at_"):
        return f"{100 * float(v):.2f} %"
    return f"{float(v):.3f}"


def markdown_table(rows: dict[str, dict[str, Any]]) -> str:
    """One row per model, columns in the paper's order (FID, CLIP, R@10, R@5, R@1, Lexical) plus Overall and N."""
    head = "| Model | " + " | ".join(title for _, title in TABLE_COLUMNS) + " | N |"
    sep = "|---|" + "---|" * (len(TABLE_COLUMNS) + 1)
    lines = [head, sep]
    for name, m in rows.items():
        cells = [_fmt(k, m.get(k)) for k, _ in TABLE_COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {m.get('n_pairs', '–')} |")
    return "\n".join(lines) + "\n"


def loss_curve_png(history: list[dict[str, float]], path: str | Path, title: str = "training loss") -> Path:
    """Plot per-batch loss and its running mean against the optimizer step."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    steps = np.arange(len(history))
    loss = np.array([h["loss"] for h in history], dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    ax.plot(steps, loss, lw=0.8, alpha=0.45, label="per batch")
    if len(loss) >= 5:
        w = max(5, len(loss) // 20)
        smooth = np.convolve(loss, np.ones(w) / w, mode="valid")
        ax.plot(steps[w - 1 :], smooth, lw=2, label=f"mean of {w}")
    ax.set_xlabel("batch")
    ax.set_ylabel("cross-entropy on answer tokens")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


_ASCII = str.maketrans({"–": "-", "—": "-", "’": "'", "‘": "'", "“": '"', "”": '"'})


def _wrap(text: str, width: int) -> list[str]:
    # PIL's built-in bitmap font has Latin-1 glyphs only: map dashes and quotes, mark anything else
    text = text.translate(_ASCII).encode("latin-1", "replace").decode("latin-1")
    words, lines, cur = text.split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width and cur:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    return lines


def contact_sheet(items: list[dict[str, Any]], path: str | Path, thumb: int = 128, text_width: int = 560) -> Path:
    """A grid: each row shows one vase's views, then its reference and each model's caption.

    ``items``: ``{"id", "images": [PIL], "lines": [(label, text), ...]}``.
    """
    font = ImageFont.load_default()
    line_h = 14
    rows = []
    for it in items:
        text_lines: list[str] = []
        for label, text in it["lines"]:
            wrapped = _wrap(f"{label}: {text}", text_width // 6)
            text_lines += wrapped or [f"{label}:"]
        h = max(thumb, line_h * len(text_lines) + 8)
        rows.append((it, text_lines, h))
    n_views = max(len(it["images"]) for it in items) if items else 0
    width = n_views * thumb + text_width
    height = sum(h for _, _, h in rows) + 4 * len(rows)
    sheet = Image.new("RGB", (max(width, 1), max(height, 1)), (250, 248, 244))
    draw = ImageDraw.Draw(sheet)
    y = 0
    for it, text_lines, h in rows:
        for j, im in enumerate(it["images"]):
            sheet.paste(im.convert("RGB").resize((thumb, thumb)), (j * thumb, y))
        ty = y + 4
        for line in text_lines:
            draw.text((n_views * thumb + 8, ty), line, fill=(20, 20, 20), font=font)
            ty += line_h
        y += h + 4
        draw.line([(0, y - 2), (width, y - 2)], fill=(200, 195, 185))
    import io

    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    return atomic_write_bytes(path, buf.getvalue())


def write_report(
    out_dir: str | Path,
    rows: dict[str, dict[str, Any]],
    history: list[dict[str, float]] | None,
    sheet_items: list[dict[str, Any]] | None,
    title: str = "vase run",
    notes: str = "",
) -> Path:
    """``report.md`` with the table, the loss curve (``loss.png``) and the contact sheet (``contact_sheet.png``)."""
    out = Path(out_dir)
    parts = [f"# {title}\n", notes + "\n" if notes else "", "## Caption metrics\n", markdown_table(rows)]
    if history:
        loss_curve_png(history, out / "loss.png")
        first = sum(h["loss"] for h in history[:5]) / min(5, len(history))
        last = sum(h["loss"] for h in history[-5:]) / min(5, len(history))
        parts += [
            "\n## Training loss\n",
            f"Mean of the first five batches {first:.3f}, of the last five {last:.3f}.\n\n",
            "![loss](loss.png)\n",
        ]
    if sheet_items:
        contact_sheet(sheet_items, out / "contact_sheet.png")
        parts += ["\n## Vases and their captions\n", "![contact sheet](contact_sheet.png)\n"]
    return atomic_write_text(out / "report.md", "".join(parts))
