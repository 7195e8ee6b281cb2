"""Leaderboards: gather result files and W&B runs into one table in the paper's Table 3 layout, plus a chart."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from vase.errors import DataError
from vase.eval.stats import bootstrap_ci
from vase.io import atomic_write_json, read_json, save_figure, write_markdown
from vase.metrics.caption_metrics import markdown_table, overall_score
from vase.metrics.registry import paired_keys, table_columns

# what the paper's scorer encodes with (vase.eval.scoring.encoders_label of metrics=paper)
PAPER_ENCODERS = "clip-vit-base-patch32 + all-mpnet-base-v2"
# Table 3 of the paper, all 19 rows in its groups (R@k as fractions). Reference rows only: they were scored with
# the paper's encoders, so compare them with runs scored with metrics=paper.
PAPER_TABLE3: dict[str, dict[str, Any]] = {
    "DiffuRank": {"group": "3D captioners", "fid_score": 0.421, "clip_score": 0.798, "r_at_10": 0.1667, "r_at_5": 0.0833,
             "r_at_1": 0.0208, "lexical_similarity": 0.274},
    "Cap3D": {"group": "3D captioners", "fid_score": 0.445, "clip_score": 0.792, "r_at_10": 0.1458, "r_at_5": 0.0729,
             "r_at_1": 0.0156, "lexical_similarity": 0.267},
    "LLaVA3D": {"group": "3D captioners", "fid_score": 0.494, "clip_score": 0.784, "r_at_10": 0.1042, "r_at_5": 0.0521,
             "r_at_1": 0.0104, "lexical_similarity": 0.238},
    "Gemini-2.5-flash": {"group": "closed VLMs", "fid_score": 0.325, "clip_score": 0.736, "r_at_10": 0.2857, "r_at_5": 0.1758,
             "r_at_1": 0.022, "lexical_similarity": 0.21},
    "Claude-4-sonnet": {"group": "closed VLMs", "fid_score": 0.353, "clip_score": 0.676, "r_at_10": 0.2396, "r_at_5": 0.1042,
             "r_at_1": 0.0312, "lexical_similarity": 0.188},
    "Gemini-2.5-Pro": {"group": "closed VLMs", "fid_score": 0.397, "clip_score": 0.68, "r_at_10": 0.2292, "r_at_5": 0.1458,
             "r_at_1": 0.0312, "lexical_similarity": 0.162},
    "GPT-4.1": {"group": "closed VLMs", "fid_score": 0.501, "clip_score": 0.644, "r_at_10": 0.25, "r_at_5": 0.1042,
             "r_at_1": 0.0312, "lexical_similarity": 0.128},
    "Claude-3.5-sonnet": {"group": "closed VLMs", "fid_score": 0.455, "clip_score": 0.643, "r_at_10": 0.1562, "r_at_5": 0.0833,
             "r_at_1": 0.0208, "lexical_similarity": 0.116},
    "Doubao-1.5-vision-pro-32k": {"group": "closed VLMs", "fid_score": 0.504, "clip_score": 0.606, "r_at_10": 0.1458, "r_at_5": 0.0417,
             "r_at_1": 0.0104, "lexical_similarity": 0.074},
    "GPT-4o": {"group": "closed VLMs", "fid_score": 0.582, "clip_score": 0.52, "r_at_10": 0.1354, "r_at_5": 0.0625,
             "r_at_1": 0.0208, "lexical_similarity": 0.104},
    "Claude-3.7-sonnet": {"group": "closed VLMs", "fid_score": 0.6, "clip_score": 0.339, "r_at_10": 0.1354, "r_at_5": 0.0625,
             "r_at_1": 0.0104, "lexical_similarity": 0.101},
    "InternVL": {"group": "open VLMs", "fid_score": 0.376, "clip_score": 0.771, "r_at_10": 0.1042, "r_at_5": 0.0833,
             "r_at_1": 0.0208, "lexical_similarity": 0.252},
    "Qwen2.5-VL-7B": {"group": "open VLMs", "fid_score": 0.334, "clip_score": 0.775, "r_at_10": 0.1875, "r_at_5": 0.0938,
             "r_at_1": 0.0208, "lexical_similarity": 0.217},
    "Qwen2.5-VL-3B": {"group": "open VLMs", "fid_score": 0.358, "clip_score": 0.782, "r_at_10": 0.0938, "r_at_5": 0.0625,
             "r_at_1": 0.0104, "lexical_similarity": 0.259},
    "VaseVL": {"group": "open VLMs", "fid_score": 0.493, "clip_score": 0.79, "r_at_10": 0.104, "r_at_5": 0.0625,
             "r_at_1": 0.0208, "lexical_similarity": 0.255},
    "VaseVLM-3B-SFT": {"group": "VaseVLM", "fid_score": 0.359, "clip_score": 0.788, "r_at_10": 0.1771, "r_at_5": 0.0833,
             "r_at_1": 0.0208, "lexical_similarity": 0.223},
    "VaseVLM-3B-RL": {"group": "VaseVLM", "fid_score": 0.363, "clip_score": 0.789, "r_at_10": 0.1771, "r_at_5": 0.1042,
             "r_at_1": 0.0208, "lexical_similarity": 0.245},
    "VaseVLM-7B-SFT": {"group": "VaseVLM", "fid_score": 0.332, "clip_score": 0.779, "r_at_10": 0.2083, "r_at_5": 0.1042,
             "r_at_1": 0.0312, "lexical_similarity": 0.272},
    "VaseVLM-7B-RL": {"group": "VaseVLM", "fid_score": 0.328, "clip_score": 0.792, "r_at_10": 0.2124, "r_at_5": 0.1112,
             "r_at_1": 0.0352, "lexical_similarity": 0.276},
}


def _rows_from_json(obj: Any, default_name: str, source: Path) -> dict[str, dict[str, Any]]:
    if isinstance(obj, dict) and "clip_score" in obj:
        return {str(obj.get("name") or default_name): obj}
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) and "clip_score" in v for v in obj.values()):
        return {str(k): v for k, v in obj.items()}
    raise DataError(f"{source}: not a vase results file (no clip_score, nor a mapping of model name to results)")


def _wandb_table(run_dir: Path) -> dict[str, dict[str, Any]] | None:
    tables = sorted((run_dir / "files" / "media" / "table" / "val").glob("table_*.table.json"),
                    key=lambda p: p.stat().st_mtime)
    if not tables:
        return None
    t = json.loads(tables[-1].read_text())
    cols = t["columns"]
    return {row[0]: {c: v for c, v in zip(cols[1:], row[1:]) if v is not None} for row in t["data"]}


def load_run(path: str | Path) -> dict[str, dict[str, Any]]:
    """Rows (model name -> metrics) from a results JSON, a run directory, or a W&B offline run directory."""
    p = Path(path)
    if p.is_file():
        return _rows_from_json(read_json(p), p.parent.name if p.stem == "results" else p.stem, p)
    if not p.is_dir():
        raise DataError(f"{p}: no such result file or run directory")
    if (p / "results.json").is_file():
        return load_run(p / "results.json")
    if (p / "summary.json").is_file():  # a multirun: one row per job, named by its overrides
        return {f"{row['job']}: {row['overrides'] or '(defaults)'}": row["metrics"]
                for row in read_json(p / "summary.json")["jobs"] if row.get("metrics")}
    if p.name.startswith("offline-run-") or p.name.startswith("run-"):
        rows = _wandb_table(p)
        if rows:
            return rows
    for run in sorted((p / "wandb").glob("*run-*")) if (p / "wandb").is_dir() else []:
        rows = _wandb_table(run)
        if rows:
            return rows
    raise DataError(f"{p}: holds neither results.json nor a W&B run with a val/table")


def _not_a_number(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def finite_row(metrics: dict[str, Any], source: str) -> dict[str, Any]:
    """A results row whose caption metrics are numbers: a NaN or infinite one (a scorer that failed, a file edited by
    hand) is shown as missing (null in the JSON, "–" in the table, no interval) with one warning line naming where it
    came from; the overall score, which was computed from it, is marked missing too."""
    keys = [k for k, _ in table_columns(metrics)]
    bad = [k for k in keys if _not_a_number(metrics.get(k))]
    per = metrics.get("per_vase") if isinstance(metrics.get("per_vase"), dict) else {}
    bad += [k for k in paired_keys(per) if k not in bad and isinstance(per.get(k), list)
            and any(_not_a_number(v) for v in per[k])]
    if not bad:
        return metrics
    said = ", ".join(f"{k}={metrics[k]!r}" if _not_a_number(metrics.get(k)) else f"{k} (a vase's term)" for k in bad)
    out = {**metrics, **dict.fromkeys(bad), "overall_score": None}
    if per:
        out["per_vase"] = {k: v for k, v in per.items() if k not in bad and k != "overall_score"}
    print(f"warning: {source}: {said} is not a number; shown as missing, and the overall score with it",
          file=sys.stderr)
    return out


def with_intervals(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` with a 95 % bootstrap interval (``ci``) for every metric whose per-vase terms the results file
    carries (``per_vase``: results written since vase kept them); FID, a statistic of the whole set, has none here."""
    per = metrics.get("per_vase")
    if not isinstance(per, dict):
        return metrics
    ci = {m: list(bootstrap_ci(per[m])) for m in paired_keys(per) if isinstance(per.get(m), list) and len(per[m]) > 1}
    return {**metrics, "ci": ci} if ci else metrics


def build_leaderboard(runs: list[str], include_paper: bool = True) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if include_paper:
        # the paper reports the components; its overall score follows from them with its own weights
        rows.update({f"{k} (paper, {v['group']})": {**{m: x for m, x in v.items() if m != "group"},
                                                     "overall_score": overall_score(v)}
                     for k, v in PAPER_TABLE3.items()})
    for r in runs:
        for name, metrics in load_run(r).items():
            key = name
            n = 2
            while key in rows:  # the same model name from two runs: keep both
                key = f"{name} [{n}]"
                n += 1
            rows[key] = with_intervals(finite_row(metrics, f"{r}: {name}"))
    if not rows:
        raise DataError("leaderboard: no runs given (runs=[...]) and include_paper=false")
    return rows


def bar_chart(rows: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """One horizontal panel per metric (CLIP, R@10, R@5, R@1, Lexical, Overall), a bar per model named on its own
    row: the paper's rows grey, grouped as in its Table 3, this leaderboard's runs in colour and on top. Readable
    with 25 rows and more (no legend to hide bars behind, no repeated colours to tell apart)."""
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    cols = [(k, t) for k, t in table_columns({k for r in rows.values() for k in r})
            if k not in ("fid_score", "image_clip_score")]
    paper = [n for n in rows if "(paper," in n]
    ours = [n for n in rows if n not in paper]
    names = ours + paper
    # each run named with the encoders it was scored with; the paper's rows only compare with the paper's encoders
    labels = [f"{n}  [{rows[n].get('encoders') or 'encoders unknown'}]" for n in ours] + paper
    foreign = [n for n in ours if rows[n].get("encoders") != PAPER_ENCODERS]
    colours = [f"C{i % 10}" for i in range(len(ours))] + ["0.65"] * len(paper)
    height = max(3.0, 0.26 * len(names) + 1.2)
    fig, axes = plt.subplots(1, len(cols), figsize=(2.6 * len(cols) + 3.2, height), dpi=110, sharey=True)
    y = list(range(len(names)))[::-1]
    for ax, (key, title) in zip(axes, cols):
        vals = [rows[n].get(key) for n in names]
        ax.barh(y, [float(v) if v is not None else float("nan") for v in vals], color=colours, height=0.75)  # no bar: missing
        for yy, v in zip(y, vals):
            if v is None:
                ax.text(0.01, yy, "n/a", va="center", fontsize=6, color="0.4")
        ax.set_title(title, fontsize=9)
        ax.set_xlim(0, 1)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="x", labelsize=7)
    axes[0].set_yticks(y, labels, fontsize=7)
    if ours and paper:
        for ax in axes:
            ax.axhline(y[len(ours) - 1] - 0.5, color="0.3", linewidth=0.8)
    title = "this leaderboard's runs (colour, top, [encoders they were scored with]) and the paper's Table 3 (grey); R@k as a fraction"
    if foreign and paper:
        title += (f"\n{len(foreign)} of {len(ours)} runs were not scored with the paper's encoders ({PAPER_ENCODERS}): "
                  f"their bars are NOT comparable with the grey rows")
    fig.suptitle(title, fontsize=9, color="black" if not (foreign and paper) else "darkred")
    fig.tight_layout()
    return save_figure(fig, path)


def write_leaderboard(rows: dict[str, dict[str, Any]], out_dir: str | Path) -> dict[str, Path]:
    """``leaderboard.md`` (Table 3 layout + our columns, and a VQA table where runs have one), ``.json``, ``.png``."""
    # lazy: pytorch_lightning
    from vase.eval.vqa import vqa_table

    out = Path(out_dir)
    ours = {n: m for n, m in rows.items() if "(paper," not in n}
    md = ["# Leaderboard\n", f"Rows marked (paper) are the paper's Table 3, scored with its encoders ({PAPER_ENCODERS}); "
          "compare them with runs scored with `metrics=paper` only.\n\n", markdown_table(rows)]
    if ours:
        md += ["\nEncoders each run was scored with:\n\n"] + [
            f"- {n}: {m.get('encoders') or 'unknown (results written before vase recorded them)'}"
            f"{'' if m.get('encoders') == PAPER_ENCODERS else ' (not comparable with the paper rows)'}\n"
            for n, m in ours.items()]
    vqa_rows = [vqa_table(m["vqa"], name) for name, m in rows.items() if isinstance(m.get("vqa"), dict)]
    if vqa_rows:
        md += ["\n## VQA accuracy per dimension\n"] + [r.split("\n", 2)[2] if i else r for i, r in enumerate(vqa_rows)]
    md.append("\n![leaderboard](leaderboard.png)\n")
    paths = {"md": write_markdown(out / "leaderboard.md", "".join(md)),
             "json": atomic_write_json(out / "leaderboard.json", rows),
             "png": bar_chart(rows, out / "leaderboard.png")}
    return paths
