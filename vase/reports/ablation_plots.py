"""The reward ablation's plots (`vase.reports.ablation` decides, these draw): the held-out rate of each dimension
against a reward weight, one line per draw and seed with its start dashed, beside the transfer to QA where the jobs ran
it (`plot_weight`); each tau's change from its start on held-out vases (`plot_tau`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vase.annotate.vocab import DIMENSIONS
from vase.choices import PAPER_TAU, PROTOCOL_LABELS
from vase.eval.stats import heldout_difference
from vase.io import read_json, save_figure
from vase.reports.jobs import pass_field, rate_right, sft_vqa_of

MARKERS = "os^v"  # the 1st, 2nd, ... draw and seed's points, in the plots and their legends alike
START_STYLES = ("--", ":", "-.", (0, (5, 1)))  # the start (SFT) of the 1st, 2nd, ... draw and seed


def _group_handles(names: list[str], starts: bool) -> list[Any]:
    """Legend entries that say which marker is which draw and seed (and, with ``starts``, which line its start)."""
    # lazy: matplotlib: slow to import, and only the plots need it
    from matplotlib.lines import Line2D

    out = []
    for n, name in enumerate(sorted(names)):
        label = f"seed {name}" if name[:1].isdigit() else name
        out.append(Line2D([], [], color="black", marker=MARKERS[n % len(MARKERS)], linewidth=1.0, label=label))
        if starts:
            out.append(Line2D([], [], color="black", linestyle=START_STYLES[n % 4], linewidth=0.8,
                              label=f"{label}: its start (SFT)"))
    return out


def plot_weight(path: Path, dim: str, xs: list[float], groups: dict[str, dict[float, Path]],
          held: dict[Path, tuple[Any, Any]], jobs: list[Path], ov: dict[Path, dict[str, str]],
          rows: dict[str, dict[str, dict[float, Path]]] | None = None) -> None:
    """Held-out rate per dimension against the weight (one line per draw and seed; dashed: the start), and, where
    the jobs ran it, the VQA transfer (mean over seeds and draws); ``rows``: a row of such panels per setting."""
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    rows = rows or {"": groups}
    has_held = all(h[0] is not None for h in held.values())
    vqa = {j: read_json(sorted(j.glob("vqa_*.json"))[-1])["vqa"] for j in jobs if sorted(j.glob("vqa_*.json"))}
    proto = next((p for p in ("ll", "open", "mc") if any(p in v for v in vqa.values())), None)
    panels = (["heldout"] if has_held else []) + ([proto] if proto else [])
    fig, axes = plt.subplots(len(rows), len(panels), figsize=(6.2 * len(panels), 4.2 * len(rows)), dpi=110,
                             squeeze=False)
    for r, (setting, groups) in enumerate(rows.items()):
        for ax, panel in zip(axes[r], panels):
            for k, d in enumerate(DIMENSIONS):
                color = f"C{k}"
                for n, (_, at) in enumerate(sorted(groups.items())):
                    if panel == "heldout":
                        ys = [rate_right(held[at[x]][0], d) if x in at else None for x in xs]
                        start = held[next(iter(at.values()))][1]
                        base = rate_right(start, d)
                    else:
                        ys = [vqa.get(at.get(x), {}).get(panel, {}).get("accuracy", {}).get(d) for x in xs]
                        sft = sft_vqa_of(next(iter(at.values())))
                        base = (sft or {}).get(panel, {}).get("accuracy", {}).get(d)
                    ax.plot(xs, [100 * y if y is not None else float("nan") for y in ys], "-", color=color,
                            linewidth=2.5 if d == dim else 1.0, alpha=1.0 if d == dim else 0.6,
                            label=d if n == 0 else None, marker=MARKERS[n % len(MARKERS)])
                    if base is not None:  # each draw's own start: the draws' SFTs differ
                        ax.axhline(100 * base, color=color, linestyle=START_STYLES[n % 4], linewidth=0.8)
            ax.set_xlabel(f"{dim} weight (others rescaled)")
            ax.set_ylabel("held-out answers right (%)" if panel == "heldout" else "held-out accuracy (%)")
            ax.set_ylim(0, 100)
            title = "held-out reward (the verdict)" if panel == "heldout" else f"transfer: {PROTOCOL_LABELS[panel]}"
            ax.set_title(f"{setting}\n{title}" if setting else title, fontsize=10)
            ax.grid(alpha=0.3)
    # the legend where no line runs: below the transfer panel's curves (accuracies sit above 50 %), else the best spot
    handles, labels = axes[0][0].get_legend_handles_labels()
    marks = _group_handles(list(next(iter(rows.values()))), starts=True)
    where = axes[0][-1] if len(axes[0]) > 1 else axes[0][0]
    where.legend(handles + marks, labels + [h.get_label() for h in marks], fontsize=7, title="colour: dimension",
                 title_fontsize=7, loc="lower center" if where is not axes[0][0] else "best",
                 ncol=3 if where is not axes[0][0] else 1)
    fig.tight_layout()
    save_figure(fig, path)


def plot_tau(path: Path, xs: list[float], groups: dict[str, dict[float, Path]],
              held: dict[Path, tuple[Any, Any]]) -> None:
    """Each dimension's held-out change from the start against tau (one line per draw and seed, bars: the paired 95 %
    interval; 0: the start), the paper's tau marked."""
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.4), dpi=110)
    width = (max(xs) - min(xs) or 1.0) / 60
    for k, d in enumerate(DIMENSIONS):
        for n, (_, at) in enumerate(sorted(groups.items())):
            pts = []
            for x in xs:
                if x in at and d in held[at[x]][0]["pass"] and d in held[at[x]][1]["pass"]:
                    h, start = held[at[x]]
                    pts.append((x, heldout_difference(h, start, pass_field(h, d))))
            if not pts:
                continue
            px = [x + (k - 2.5) * width for x, _ in pts]
            py = [100 * c["diff"] for _, c in pts]
            err = [[100 * (c["diff"] - c["lo"]) for _, c in pts], [100 * (c["hi"] - c["diff"]) for _, c in pts]]
            ax.errorbar(px, py, yerr=err, color=f"C{k}", marker=MARKERS[n % len(MARKERS)], capsize=2, linewidth=1.2,
                        label=d if n == 0 else None)
    ax.axhline(0, color="black", linewidth=0.8)
    if PAPER_TAU in xs:
        ax.axvline(PAPER_TAU, color="grey", linestyle=":", linewidth=1.0, label=f"paper's tau {PAPER_TAU:g}")
    ax.set_xlabel("tau (a dimension is right when its similarity reaches tau)")
    ax.set_ylabel("held-out answers right: change\nfrom the start, points (95 % CI)", fontsize=9)
    ax.set_title("what each tau moved, against the job's own start")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    marks = _group_handles(sorted(groups), starts=False)
    ax.legend(handles + marks, labels + [h.get_label() for h in marks], fontsize=7, ncol=2, title="colour: dimension",
              title_fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
