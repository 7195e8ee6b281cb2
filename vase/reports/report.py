"""A run's report: the caption table (``vase.metrics.caption_metrics.markdown_table``), the training curves, a contact sheet."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vase.io import atomic_write_bytes, save_figure, write_markdown
from vase.metrics.caption_metrics import markdown_table


def training_curves_png(histories: dict[str, list[dict[str, float]]], path: str | Path) -> Path:
    """One panel per stage: the loss (SFT) or the mean reward (GRPO) against the step, with a running mean."""
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    panels = [(stage, key) for stage, h in histories.items() if h
              for key in (("reward",) if "reward" in h[0] else ("loss",))]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 3.6), dpi=120, squeeze=False)
    for ax, (stage, key) in zip(axes[0], panels):
        y = np.array([h[key] for h in histories[stage]], dtype=float)
        x = np.arange(len(y))
        ax.plot(x, y, lw=0.8, alpha=0.45, label="per step")
        if len(y) >= 5:
            w = max(5, len(y) // 20)
            ax.plot(x[w - 1:], np.convolve(y, np.ones(w) / w, mode="valid"), lw=2, label=f"mean of {w}")
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy on answer tokens" if key == "loss" else "mean reward of the group")
        ax.set_title(f"{stage}: {key}")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return save_figure(fig, path)


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
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    return atomic_write_bytes(path, buf.getvalue())


def group_lines(stage: str, history: list[dict[str, float]], aggregation: str | None = None) -> list[str]:
    """What a GRPO stage's groups held to learn from, over its whole run: how its advantages were made, the share of
    groups with no spread, the share whose summed reward tied while their terms differed (GDPO's collapse), and each
    term's within-group spread (a term that never varies within a group teaches nothing).

    >>> group_lines("grpo", [{"frac_reward_zero_std": 0.5, "frac_sum_ties_terms_differ": 0.25,
    ...                       "reward_spread/shape": 0.4}], "sum_then_normalize")[1].strip()
    '- grpo groups: no spread in 50 % of them; the sum tied while the terms differed in 25 %'
    """
    if not history or "frac_reward_zero_std" not in history[0]:
        return []

    def mean(key: str) -> float | None:
        got = [x[key] for x in history if key in x]
        return sum(got) / len(got) if got else None

    how = {"sum_then_normalize": "the weighted sum normalised in its group (GRPO)",
           "normalize_then_sum": "each term normalised in its group, then the weighted sum, then the batch (GDPO)"}
    out = [f"- {stage} advantages: {how.get(aggregation or '', 'as configured')} "
           f"(stage.module.multi_objective_aggregation={aggregation or 'sum_then_normalize'})\n"]
    line = f"- {stage} groups: no spread in {100 * mean('frac_reward_zero_std'):.0f} % of them"
    ties = mean("frac_sum_ties_terms_differ")
    if ties is not None:
        line += f"; the sum tied while the terms differed in {100 * ties:.0f} %"
    out.append(line + "\n")
    spreads = {k.removeprefix("reward_spread/"): mean(k) for k in history[-1] if k.startswith("reward_spread/")}
    if spreads:
        out.append(f"- {stage} each term's mean spread within a group: "
                   + ", ".join(f"{n} {v:.3f}" for n, v in spreads.items() if v is not None) + "\n")
    return out


def write_report(out_dir: str | Path, rows: dict[str, dict[str, Any]],
                 histories: dict[str, list[dict[str, float]]] | None, sheet_items: list[dict[str, Any]] | None,
                 title: str = "vase run", notes: str = "", extra: str = "",
                 aggregations: dict[str, str] | None = None) -> Path:
    """``report.md`` with the table (and ``extra`` after it), the training curves (``loss.png``) and the contact sheet
    (``contact_sheet.png``)."""
    out = Path(out_dir)
    parts = [f"# {title}\n", notes + "\n" if notes else "", "## Caption metrics\n", markdown_table(rows), extra]
    histories = {k: v for k, v in (histories or {}).items() if v}
    if histories:
        training_curves_png(histories, out / "loss.png")
        parts.append("\n## Training\n")
        for stage, h in histories.items():
            key = "reward" if "reward" in h[0] else "loss"
            k = min(10, len(h))
            first = sum(x[key] for x in h[:k]) / k
            last = sum(x[key] for x in h[-k:]) / k
            parts.append(f"- {stage}: mean {key} of the first {k} steps {first:.3f}, of the last {k} {last:.3f}\n")
            parts += group_lines(stage, h, (aggregations or {}).get(stage))
        parts.append("\n![training curves](loss.png)\n")
    if sheet_items:
        contact_sheet(sheet_items, out / "contact_sheet.png")
        parts += ["\n## Vases and their captions\n", "![contact sheet](contact_sheet.png)\n"]
    return write_markdown(out / "report.md", "".join(parts))
