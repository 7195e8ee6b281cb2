"""A multirun's summary: one row per job with its overrides, mean reward per dimension, VQA accuracy per dimension
and caption metrics, written next to the jobs as ``summary.json``, ``summary.csv`` and ``summary.md`` when the sweep
ends (a Hydra callback, registered in ``conf/hydra/default.yaml``), and logged as a W&B table in the sweep's group.

    python train.py -m sweep=reward_weights          # logs/train/multiruns/<time>/summary.md
    python -m vase.reports.sweep_summary logs/train/multiruns/<time>    # (re)write it by hand, e.g. after a crash
    python evaluate.py task=leaderboard runs=[logs/train/multiruns/<time>]
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from vase.annotate.vocab import DIMENSIONS
from vase.choices import PROTOCOL_LABELS
from vase.config import wandb_offline
from vase.eval.stats import paired_difference
from vase.io import atomic_write_json, atomic_write_text, read_json, save_figure
from vase.runs import finish_sweep, machine_stamp, note_multirun

log = logging.getLogger("vase")
CAPTION_KEYS = ("overall_score", "clip_score", "fid_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity")
LAST_STEPS = 20  # the reward of a job: the mean over its last steps (where training has got to)


def _job_dirs(sweep_dir: Path) -> list[Path]:
    jobs = [d for d in sweep_dir.iterdir() if d.is_dir() and (d / ".hydra" / "overrides.yaml").is_file()]
    return sorted(jobs, key=lambda d: (not d.name.isdigit(), int(d.name) if d.name.isdigit() else 0, d.name))


def _last_history(job: Path) -> tuple[str | None, list[dict[str, float]]]:
    """The history of the job's last stage (a GRPO follow-up's if it had one)."""
    follow = sorted(job.glob("train_history_*.json"))
    path = follow[-1] if follow else job / "train_history.json"
    if not path.is_file():
        return None, []
    stage = path.stem.removeprefix("train_history_") if follow else None
    return stage, read_json(path)


def job_row(job: Path) -> dict[str, Any]:
    """One job's row: overrides, status, mean reward (overall and per dimension), VQA accuracy, caption metrics."""
    overrides = [str(o) for o in OmegaConf.load(job / ".hydra" / "overrides.yaml")]
    row: dict[str, Any] = {"job": job.name, "overrides": " ".join(overrides), "status": "done", "metrics": {}}
    stage, hist = _last_history(job)
    if not hist:
        row["status"] = "no history (failed or still running)"
    rewards = [h for h in hist if "reward" in h][-LAST_STEPS:]
    config = job / "config.yaml"
    weights = OmegaConf.select(OmegaConf.load(config), "reward.effective_weights") if config.is_file() else None
    for d, w in (weights or {}).items():  # the weights the reward used (after reward.normalize_weights)
        row[f"w/{d}"] = float(w)
    if rewards:
        row["reward"] = sum(h["reward"] for h in rewards) / len(rewards)
        # every part of the reward the history kept (dimensions, configured terms) and how often groups tied
        names = [k for k in rewards[-1] if k.startswith("reward/") or k == "frac_reward_zero_std"]
        for name in names:
            vals = [h[name] for h in rewards if name in h]
            row[name] = sum(vals) / len(vals)
    vqa_files = sorted(job.glob("vqa_*.json"))
    if vqa_files:
        vqa = read_json(vqa_files[-1]).get("vqa", {})  # the last stage's
        for protocol, s in vqa.items():
            for d, acc in s.get("accuracy", {}).items():
                row[f"vqa/{protocol}/{d}"] = acc
            row[f"vqa/{protocol}/mean"] = s.get("mean")
            if s.get("n"):  # items asked per dimension: what an interval of the accuracy needs
                row[f"vqa/{protocol}/n_per_dimension"] = int(s["n"]) // len(DIMENSIONS)
    if (job / "results.json").is_file():
        results = read_json(job / "results.json")
        if results:
            last = list(results.values())[-1]
            row["metrics"] = {k: last[k] for k in (*CAPTION_KEYS, "n_pairs") if k in last}
            row.update({k: last[k] for k in CAPTION_KEYS if k in last})
    return row


def write_sweep_summary(sweep_dir: str | Path) -> dict[str, Path]:
    """Summarise every job under ``sweep_dir`` into summary.json, summary.csv and summary.md; returns the paths."""
    sweep_dir = Path(sweep_dir)
    rows = [job_row(j) for j in _job_dirs(sweep_dir)]
    columns = ["job", "overrides", "status"]
    for r in rows:
        columns += [k for k in r if k not in columns and k != "metrics"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)

    def cell(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))

    short = [c for c in columns if c != "status"]
    md = ["| " + " | ".join(short) + " |", "|" + "---|" * len(short)]
    md += ["| " + " | ".join(cell(r.get(c)) for c in short) + " |" for r in rows]
    plot = sweep_plot(sweep_dir / "sweep.png", rows, {r["job"]: _overrides(sweep_dir / r["job"]) for r in rows})
    if plot is not None:
        md.append(f"\n![the swept settings against reward and accuracy]({plot.name})")
    paths = {"json": atomic_write_json(sweep_dir / "summary.json", {"sweep_dir": str(sweep_dir), "columns": columns,
                                                                     "jobs": rows}),
             "csv": atomic_write_text(sweep_dir / "summary.csv", buf.getvalue()),
             "md": atomic_write_text(sweep_dir / "summary.md", "\n".join(md) + "\n")}
    if plot is not None:
        paths["png"] = plot
    return paths


def wilson_interval(k: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion k / n (``(nan, nan)`` for n = 0).

    >>> [round(x, 4) for x in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def sweep_plot(path: Path, rows: list[dict[str, Any]], overrides: dict[str, dict[str, str]]) -> Path | None:
    """One row of panels per swept key (seeds aside): the key's values against the training reward of each term
    (mean of the jobs at that value, bars: their range over seeds and other keys) and, when VQA ran, held-out
    accuracy per dimension (bars: 95 % Wilson interval over the pooled items). None when nothing was swept or
    there is nothing to plot."""
    keys = sorted(k for k in {k for o in overrides.values() for k in o}
                  if k != "seed" and len({o.get(k) for o in overrides.values()}) > 1)
    rows = [r for r in rows if r.get("status") == "done"]
    if not keys or not rows:
        return None
    # lazy: matplotlib: slow to import, and only this path needs it
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib: slow to import, and only this path needs it
    import matplotlib.pyplot as plt

    terms = sorted({c for r in rows for c in r if c.startswith("reward/") and c not in ("reward/weighted",)})
    proto = next((p for p in ("ll", "open", "mc") if any(f"vqa/{p}/mean" in r for r in rows)), "open")
    dims = [d for d in DIMENSIONS if any(f"vqa/{proto}/{d}" in r for r in rows)]
    panels = [p for p, show in (("reward", terms), ("vqa", dims)) if show]
    if not panels:  # e.g. a sweep of SFT runs without VQA: no reward, no accuracy to plot
        return None
    fig, axes = plt.subplots(len(keys), len(panels), figsize=(6.5 * len(panels), 3.8 * len(keys)), dpi=110,
                             squeeze=False)
    for i, key in enumerate(keys):
        values = sorted({overrides[r["job"]].get(key) for r in rows}, key=_sort_value)
        xs = [_sort_value(v)[1] if _sort_value(v)[0] == 0 else n for n, v in enumerate(values)]
        at = {v: [r for r in rows if overrides[r["job"]].get(key) == v] for v in values}
        for ax, panel in zip(axes[i], panels):
            series = terms if panel == "reward" else [f"vqa/{proto}/{d}" for d in dims]
            for k, col in enumerate(series):
                mean, lo, hi = [], [], []
                for v in values:
                    got = [r[col] for r in at[v] if r.get(col) is not None]
                    if panel == "reward":
                        mean.append(sum(got) / len(got) if got else math.nan)
                        lo.append(min(got) if got else math.nan)
                        hi.append(max(got) if got else math.nan)
                    else:  # pooled items of every job at this value
                        n = sum(int(r.get(f"vqa/{proto}/n_per_dimension") or 0) for r in at[v] if r.get(col) is not None)
                        hits = sum(r[col] * int(r.get(f"vqa/{proto}/n_per_dimension") or 0) for r in at[v]
                                   if r.get(col) is not None)
                        a, b = wilson_interval(hits, n)
                        mean.append(100 * hits / n if n else math.nan)
                        lo.append(100 * a)
                        hi.append(100 * b)
                err = [[max(0.0, m - a) for m, a in zip(mean, lo)], [max(0.0, b - m) for m, b in zip(mean, hi)]]
                ax.errorbar([x + 0.01 * k * (max(xs) - min(xs) or 1) for x in xs], mean, yerr=err, marker="o",
                            capsize=3, label=col.split("/")[-1], color=f"C{k % 10}")
            ax.set_xlabel(key)
            if all(_sort_value(v)[0] == 1 for v in values):
                ax.set_xticks(xs, [str(v) for v in values])
            if panel == "reward":
                ax.set_ylabel("training reward, last steps (bars: range)")
            else:
                ax.set_ylabel(f"held-out VQA accuracy, {PROTOCOL_LABELS[proto]}, % (bars: 95 % CI)", fontsize=8)
                ax.set_ylim(0, 100)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return save_figure(fig, path)


def _sort_value(v: Any) -> tuple[int, Any]:
    try:
        return 0, float(v)
    except (TypeError, ValueError):
        return 1, str(v)


def _log_to_wandb(config: DictConfig, sweep_dir: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    """The summary as a W&B table in a run named ``summary`` of the sweep's group (offline unless configured)."""
    node = OmegaConf.select(config, "logger.wandb")
    if node is None or os.environ.get("WANDB_MODE", "").lower() == "disabled":
        return
    # lazy: wandb: slow to import, and only this path needs it
    import wandb

    choices = OmegaConf.select(config, "hydra.runtime.choices") or {}
    group = f"{choices.get('sweep') or 'multirun'}-{sweep_dir.name}"
    plain = {k: v for k, v in OmegaConf.to_container(config, resolve=False).items() if k != "hydra"}
    tags = [str(t) for t in (config.get("tags") or [])] + [f"sweep:{choices.get('sweep') or 'multirun'}"]
    run = wandb.init(project=str(node.get("project", "vase")), group=group, name=f"{group}-summary",
                     job_type="summary", dir=str(sweep_dir), mode="offline" if wandb_offline() else "online",
                     reinit="create_new", config=plain, tags=tags)
    try:
        run.log({"sweep/summary": wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in rows])})
        for name in ("sweep", "ablation"):
            if (sweep_dir / f"{name}.png").is_file():
                run.log({f"sweep/{name}": wandb.Image(str(sweep_dir / f"{name}.png"))})
    finally:
        run.finish()


def _overrides(job: Path) -> dict[str, str]:
    out = {}
    for o in OmegaConf.load(job / ".hydra" / "overrides.yaml"):
        k, _, v = str(o).partition("=")
        out[k.lstrip("+~")] = v
    return out


def _sft_vqa(job: Path) -> dict[str, Any] | None:
    """The held-out VQA of the SFT adapter this job started from (written beside the shared adapter)."""
    lineage = job / "adapter" / "vase_lineage.json"
    if not lineage.is_file():
        return None
    for adapter in read_json(lineage).get("merged_adapters", []):
        f = Path(adapter).parent / "vqa_sft.json"
        if f.is_file():
            return read_json(f).get("vqa")
    return None


def write_ablation_report(sweep_dir: str | Path) -> dict[str, Any] | None:
    """For a sweep over one reward weight (and seeds): ``ablation.md`` and ``ablation.png`` with held-out VQA
    accuracy per dimension against the weight (mean over seeds; SFT's as the baseline), and the verdict on the
    targets: (i) on every seed, the swept dimension's open-ended accuracy at the largest weight beats that at weight 0
    and SFT's; (ii) at the paper's weights no dimension falls below SFT's by more than one held-out item.
    Returns the verdicts, or None when the sweep is not such an ablation."""
    sweep_dir = Path(sweep_dir)
    jobs = [j for j in _job_dirs(sweep_dir) if sorted(j.glob("vqa_*.json"))]
    if not jobs:
        return None
    ov = {j: _overrides(j) for j in jobs}
    swept = sorted({k for o in ov.values() for k in o if k.startswith("reward.weights.")})
    if len(swept) != 1:
        return None
    key = swept[0]
    dim = key.rsplit(".", 1)[-1]
    vqa = {j: read_json(sorted(j.glob("vqa_*.json"))[-1])["vqa"] for j in jobs}
    sft_of = {j: _sft_vqa(j) for j in jobs}  # each job's own SFT (one shared by all, or one per seed)
    distinct = [v for k, v in enumerate(sft_of.values()) if v and v not in list(sft_of.values())[:k]]
    sft = _mean_vqa(distinct) if distinct else None
    xs = sorted({float(o[key]) for o in ov.values()})
    seeds = sorted({o.get("seed", "-") for o in ov.values()})
    protocols = [p for p in ("ll", "open", "mc") if any(p in v for v in vqa.values())]
    # the targets are decided on one protocol: option likelihood where the jobs have it (the cheap one that scales
    # to hundreds of held-out vases), else open-ended answers
    decide = "ll" if "ll" in protocols else "open"

    def acc(j: Path, protocol: str, d: str) -> float | None:
        return vqa[j].get(protocol, {}).get("accuracy", {}).get(d)

    def mean_at(x: float, protocol: str, d: str) -> float | None:
        vals = [a for j in jobs if float(ov[j][key]) == x and (a := acc(j, protocol, d)) is not None]
        return sum(vals) / len(vals) if vals else None

    n_items = max((v.get(decide, {}).get("n", 0) for v in vqa.values()), default=0) // max(1, len(DIMENSIONS))
    verdict: dict[str, Any] = {"swept": key, "weights": xs, "seeds": seeds, "protocol": decide}
    # dose-response on the training prompts: the swept dimension's own reward over the last steps, at the largest
    # weight against weight 0, per seed (does GRPO push toward what the weight asks, where it trains?)
    dose = {}
    for seed in seeds:
        at = {float(ov[j][key]): job_row(j).get(f"reward/{dim}") for j in jobs if ov[j].get("seed", "-") == seed}
        if at.get(max(xs)) is not None and at.get(min(xs)) is not None:
            dose[seed] = {"at_max": at[max(xs)], "at_0": at[min(xs)]}
    if dose:
        verdict["dose_response"] = all(v["at_max"] > v["at_0"] for v in dose.values())
        verdict["dose_response_per_seed"] = dose
    def items(v: dict[str, Any] | None, d: str) -> dict[str, float] | None:
        return ((v or {}).get(decide) or {}).get("items", {}).get(d)

    if sft and decide in sft:
        lo, hi = min(xs), max(xs)
        per_seed = {}
        for seed in seeds:
            at = {float(ov[j][key]): j for j in jobs if ov[j].get("seed", "-") == seed}
            own = next((sft_of[j] for j in jobs if ov[j].get("seed", "-") == seed and sft_of[j]), sft)
            jmax, j0 = at.get(hi), at.get(lo)
            row = {"at_max": acc(jmax, decide, dim) if jmax else None, "at_0": acc(j0, decide, dim) if j0 else None,
                   "sft": own[decide]["accuracy"].get(dim)}
            a, b, c = (items(vqa[jmax], dim) if jmax else None), (items(vqa[j0], dim) if j0 else None), items(own, dim)
            if a and b and c:  # item-level answers: decide on paired intervals, not on points
                row["max_minus_0"] = paired_difference(a, b)
                row["max_minus_sft"] = paired_difference(a, c)
            per_seed[seed] = row

        def held(v: dict[str, Any]) -> bool:
            if "max_minus_0" in v:
                return v["max_minus_0"]["lo"] > 0 and v["max_minus_sft"]["lo"] > 0
            return (v["at_max"] is not None and v["at_0"] is not None and v["at_max"] > v["at_0"]
                    and v["at_max"] > v["sft"])

        verdict["i"] = all(held(v) for v in per_seed.values())
        verdict["i_rule"] = ("paired 95 % bootstrap intervals exclude 0" if all("max_minus_0" in v for v in
                             per_seed.values()) else "point estimates (no item-level answers to pair)")
        verdict["i_per_seed"] = per_seed
        paper = 0.15 if 0.15 in xs else None  # the paper's weight of shape; the others are then the paper's too
        if paper is not None and n_items:
            worst: dict[str, float] = {}
            fell: dict[str, bool] = {}
            for j in jobs:
                if float(ov[j][key]) != paper:
                    continue
                base = sft_of[j] or sft
                for d in DIMENSIONS:
                    a, b = acc(j, decide, d), base[decide]["accuracy"].get(d)
                    if a is not None and b is not None:
                        worst[d] = min(worst.get(d, 1.0), a - b)
                    ia, ib = items(vqa[j], d), items(base, d)
                    if ia and ib:  # fell below SFT by more than its interval: the whole interval under 0
                        fell[d] = fell.get(d, False) or paired_difference(ia, ib)["hi"] < 0
            verdict["ii"] = (not any(fell.values()) if fell else
                             all(v >= -1.0 / n_items - 1e-9 for v in worst.values()))
            verdict["ii_rule"] = ("no dimension's paired 95 % interval lies wholly below SFT" if fell
                                  else "no dimension below SFT by more than one held-out item")
            verdict["ii_worst_drop"] = worst
    # table
    lines = [f"# Reward ablation: held-out VQA accuracy against `{key}` (mean over seeds {', '.join(seeds)})\n"]
    for protocol in protocols:
        lines.append(f"\n## {PROTOCOL_LABELS[protocol]}\n")
        lines.append("| run | " + " | ".join(d.capitalize() for d in DIMENSIONS) + " | Mean |")
        lines.append("|---|" + "---|" * (len(DIMENSIONS) + 1))
        if sft and protocol in sft:
            a = sft[protocol]["accuracy"]
            lines.append("| SFT | " + " | ".join(f"{100 * a[d]:.1f} %" for d in DIMENSIONS if d in a)
                         + f" | {100 * sft[protocol]['mean']:.1f} % |")
        for x in xs:
            vals = [mean_at(x, protocol, d) for d in DIMENSIONS]
            ok = [v for v in vals if v is not None]
            lines.append(f"| GRPO, {dim} weight {x:g} | " + " | ".join("–" if v is None else f"{100 * v:.1f} %"
                                                                        for v in vals)
                         + f" | {100 * sum(ok) / max(1, len(ok)):.1f} % |")
    if "i" in verdict:
        lines.append(f"\n**Target (i)**, {PROTOCOL_LABELS[decide]}: {dim} accuracy at weight {max(xs):g} above weight {min(xs):g} and above SFT on "
                     f"every seed, decided on {verdict['i_rule']}: **{'held' if verdict['i'] else 'not held'}** ("
                     + "; ".join(f"seed {s}: {_pct(v['at_max'])} vs {_pct(v['at_0'])} and SFT {_pct(v['sft'])}"
                                 + _diffs(v) for s, v in verdict["i_per_seed"].items()) + ").")
    if "dose_response" in verdict:
        lines.append(f"\n**Dose-response** on the training prompts, {dim} reward over the last {LAST_STEPS} steps at weight "
                     f"{max(xs):g} above weight {min(xs):g} on every seed: **{'held' if verdict['dose_response'] else 'not held'}** ("
                     + "; ".join(f"seed {s}: {v['at_max']:.3f} vs {v['at_0']:.3f}"
                                 for s, v in verdict["dose_response_per_seed"].items()) + ").")
    if "ii" in verdict:
        drops = ", ".join(f"{d} {100 * v:+.1f}" for d, v in verdict["ii_worst_drop"].items())
        lines.append(f"\n**Target (ii)**, at the paper's weights: {verdict['ii_rule']} ({100 / n_items:.1f} points "
                     f"an item): **{'held' if verdict['ii'] else 'not held'}** (worst change per dimension, points: "
                     f"{drops}).")
    lines.append("\n![ablation](ablation.png)\n")
    atomic_write_text(sweep_dir / "ablation.md", "\n".join(lines) + "\n")
    verdict["machine"] = machine_stamp()
    # what make readme-tables puts into the README (its headings in bold: the README has its own)
    verdict["table"] = "\n".join(f"**{line[3:].strip()}**" if line.startswith("## ") else line
                                  for line in "\n".join(lines[1:-1]).splitlines()).strip()
    atomic_write_json(sweep_dir / "ablation.json", verdict)
    _ablation_plot(sweep_dir / "ablation.png", xs, protocols, mean_at, sft, dim)
    return verdict


def _mean_vqa(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of several VQA score dicts (several SFT baselines, one per seed), per protocol and dimension."""
    out: dict[str, Any] = {}
    for protocol in {p for s in scores for p in s}:
        sel = [s[protocol] for s in scores if protocol in s]
        dims = {d for s in sel for d in s["accuracy"]}
        acc = {d: sum(s["accuracy"][d] for s in sel if d in s["accuracy"]) / sum(d in s["accuracy"] for s in sel)
               for d in dims}
        out[protocol] = {"accuracy": acc, "mean": sum(acc.values()) / max(1, len(acc))}
    return out


def _diffs(v: dict[str, Any]) -> str:
    if "max_minus_0" not in v:
        return ""
    a, b = v["max_minus_0"], v["max_minus_sft"]
    return (f" (differences, points, 95 % CI: {100 * a['diff']:+.1f} [{100 * a['lo']:+.1f}, {100 * a['hi']:+.1f}] "
            f"and {100 * b['diff']:+.1f} [{100 * b['lo']:+.1f}, {100 * b['hi']:+.1f}], {a['n']} items)")


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f} %"


def _ablation_plot(path: Path, xs: list[float], protocols: list[str], mean_at: Any, sft: Any, dim: str) -> None:
    # lazy: matplotlib: slow to import, and only this path needs it
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib: slow to import, and only this path needs it
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(protocols), figsize=(6 * len(protocols), 4), dpi=110, squeeze=False)
    for ax, protocol in zip(axes[0], protocols):
        for k, d in enumerate(DIMENSIONS):
            ys = [mean_at(x, protocol, d) for x in xs]
            color = f"C{k}"
            ax.plot(xs, [100 * y if y is not None else float("nan") for y in ys], "o-", color=color, label=d,
                    linewidth=2.5 if d == dim else 1.2)
            if sft and protocol in sft and d in sft[protocol]["accuracy"]:
                ax.axhline(100 * sft[protocol]["accuracy"][d], color=color, linestyle="--", linewidth=0.8)
        ax.set_xlabel(f"{dim} weight (others rescaled)")
        ax.set_ylabel("held-out accuracy (%)")
        ax.set_ylim(0, 100)  # an all-zero panel reads as 0 %, not as a -0.04..0.04 range
        ax.set_title(PROTOCOL_LABELS[protocol])
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, title="dashed: SFT" if sft else "no SFT baseline found")
    fig.tight_layout()
    save_figure(fig, path)


class SweepSummary(Callback):
    """Hydra callback: say at once when a sweep's job fails (Hydra itself keeps the error until every job has run),
    and at the end of a multirun, write the sweep's summary and log it to W&B."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        note_multirun(list(config.hydra.overrides.task), str(config.hydra.sweeper.get("_target_", "")))

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if getattr(job_return, "status", None) != JobStatus.FAILED:
            return
        if str(OmegaConf.select(config, "hydra.mode", default="")).rsplit(".", 1)[-1] != RunMode.MULTIRUN.name:
            return  # a single run says its own error; it is no sweep's job
        err = job_return._return_value  # the exception; reading .return_value would raise it here
        job = OmegaConf.select(config, "hydra.job.num", default="?")
        where = OmegaConf.select(config, "hydra.runtime.output_dir", default="")
        print(f"error: sweep job #{job} ({' '.join(OmegaConf.select(config, 'hydra.overrides.task') or [])}) failed: "
              f"{type(err).__name__}: {err}; its folder: {where}. The other jobs go on; Hydra raises it at the end.",
              file=sys.stderr, flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not sweep_dir.is_dir():
            return
        if not finish_sweep(sweep_dir):
            print(f"the sweep in {sweep_dir} is not complete; the same command (resume=auto) takes it up again: "
                  f"finished jobs are kept, the others resume or run", file=sys.stderr)
        paths = write_sweep_summary(sweep_dir)
        if write_ablation_report(sweep_dir) is not None:
            print(f"ablation report: {sweep_dir / 'ablation.md'}")
        data = read_json(paths["json"])
        try:
            _log_to_wandb(config, sweep_dir, data["jobs"], data["columns"])
        except Exception as e:  # noqa: BLE001 - the summary files are written; W&B is a copy of them
            log.warning("the sweep summary was written to %s but could not be logged to W&B: %s", paths["md"], e)
        print(f"sweep summary: {paths['md']}")


def _main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m vase.reports.sweep_summary <multirun directory>", file=sys.stderr)
        return 2
    print(write_sweep_summary(argv[0])["md"])
    if write_ablation_report(argv[0]) is not None:
        print(Path(argv[0]) / "ablation.md")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
