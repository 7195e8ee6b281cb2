"""A multirun's summary: one row per job with its overrides, mean reward per dimension, VQA accuracy per dimension
and caption metrics, written next to the jobs as ``summary.json``, ``summary.csv`` and ``summary.md`` when the sweep
ends (a Hydra callback, registered in ``conf/hydra/default.yaml``), and logged as a W&B table in the sweep's group.

    python train.py -m sweep=reward_weights          # logs/train/multiruns/<time>/summary.md
    python -m vase.reports.sweep_summary logs/train/multiruns/<time>    # (re)write it by hand, e.g. after a crash
    python evaluate.py action=leaderboard runs=[logs/train/multiruns/<time>]
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import math
import os
import shlex
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from vase import markdown
from vase.annotate.vocab import DIMENSIONS
from vase.choices import PROTOCOL_LABELS
from vase.config import (
    check_only,
    group_name,
    sweep_keys_of,
    sweep_values_of,
    view_order,
    wandb_offline,
)
from vase.errors import ConfigError, config_exit
from vase.eval.stats import dashboard_columns, format_heldout, heldout_difference, mix_of, wilson_interval
from vase.io import atomic_write_json, atomic_write_text, inert_markdown, read_json, save_figure, write_markdown
from vase.loggers import (
    dashboard_key,
    finish_wandb,
    mlflow_link,
    param_value,
    prepare_mlflow,
    tensorboard_sweep_columns,
    tensorboard_tags,
)
from vase.metrics.registry import is_percent
from vase.reports.ablation import verdict_rows
from vase.reports.jobs import (
    code_lines,
    code_of_jobs,
    heldout_of,
    job_dirs,
    job_row,
    machines_of_jobs,
    overrides_of,
    unfinished,
)
from vase.reports.verdict import (
    check_hypothesis,
    decide_sweep,
    hypothesis_columns,
    hypothesis_of,
    job_comparison,
    notice,
    read_verdict,
    short_verdict,
    verdict_metrics,
    verdict_table,
    verdict_text,
)
from vase.runs import RUN_FILE, finish_sweep, note_multirun, set_status

log = logging.getLogger("vase")


def heldout_section(sweep_dir: Path, rows: list[dict[str, Any]]) -> list[str]:
    """summary.md's held-out table: every job's answers on the held-out vases scored by its own reward terms (each
    dimension right, %, and the weighted reward, 95 % intervals), each starting point once, and every job's change
    from its start with a paired interval."""
    results: dict[str, dict[str, Any]] = {}
    changes = []
    for r in rows:
        held, start = heldout_of(sweep_dir / r["job"])
        if not held:
            continue
        if start:
            key = f"start of job {r['job']}"
            same = next((k for k, v in results.items() if k.startswith("start") and v["items"] == start["items"]),
                        None)  # jobs from one shared SFT share their starting answers: shown once
            if same is None:
                results[key] = start
            dims = [d for d in DIMENSIONS if d in held["pass"]]
            parts = []
            for d in dims:
                c = heldout_difference(held, start, f"{held['term_of_dimension'][d]}_pass")
                parts.append(f"{100 * c['diff']:+.1f} [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]")
            changes.append(f"| job {r['job']} ({r['overrides']}) | " + " | ".join(parts) + " |")
        results[f"job {r['job']} ({r['overrides']})"] = held
    if not results:
        return []
    any_held = next(v for k, v in results.items() if not k.startswith("start"))
    lines = ["", f"## Held-out reward ({any_held['n']} answers on {any_held['vases']} held-out vases, task "
                 f"{mix_of(any_held)}, scored by each run's own terms; 95 % bootstrap intervals)", "",
             format_heldout(results).rstrip()]
    if changes:
        dims = [d for d in DIMENSIONS if d in any_held["pass"]]
        lines += ["", "Change from each job's start (its adapter off), points, paired 95 % interval:", "",
                  *markdown.table(["job", *(d.capitalize() for d in dims)]), *changes]
    captions = [(r, (heldout_of(sweep_dir / r["job"])[0] or {}).get("captions_vs_start")) for r in rows]
    captions = [(r, c) for r, c in captions if c]
    if captions:
        metrics = list(captions[0][1])
        lines += ["", "The held-out captions on the paper's metrics, change from each job's start, paired 95 % "
                      "interval (R@k in points; FID lower is better):", "",
                  *markdown.table(["job", *metrics])]
        f = {m: 100.0 if is_percent(m) else 1.0 for m in metrics}
        lines += [markdown.row([f"job {r['job']} ({r['overrides']})", *(
            f"{f[m] * c[m]['diff']:+.3f} [{f[m] * c[m]['lo']:+.3f}, {f[m] * c[m]['hi']:+.3f}]" for m in metrics)])
            for r, c in captions]
    return lines


def split_overrides(per_job: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """The overrides every job shares (in the first job's order) and, per job, the ones that vary: what tells the
    jobs apart. A single job keeps all of its own.

    >>> split_overrides([["cluster=slurm", "lora.r=4", "debug=fast"], ["cluster=slurm", "lora.r=8", "debug=fast"]])
    (['cluster=slurm', 'debug=fast'], [['lora.r=4'], ['lora.r=8']])
    """
    if len(per_job) < 2:
        return [], [list(o) for o in per_job]
    shared = [o for o in per_job[0] if all(o in other for other in per_job[1:])]
    return shared, [[o for o in job if o not in shared] for job in per_job]


def write_sweep_summary(sweep_dir: str | Path) -> dict[str, Path]:
    """Summarise every job under ``sweep_dir`` into summary.json, summary.csv and summary.md; returns the paths. The
    overrides column shows what differs between the jobs; the overrides they share are listed once above the table
    (and kept per job as ``all_overrides`` in the JSON)."""
    sweep_dir = Path(sweep_dir)
    jobs = job_dirs(sweep_dir)
    code = code_of_jobs(jobs)
    rows = [job_row(j) for j in jobs]
    shared, varying = split_overrides([r.pop("override_list") for r in rows])
    for r, own in zip(rows, varying):
        r["all_overrides"], r["overrides"] = r["overrides"], " ".join(own)
    columns = ["job", "overrides", "status"]
    for r in rows:
        columns += [k for k in r if k not in columns and k not in ("metrics", "term_weights")]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)

    def cell(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))

    short = [c for c in columns if c not in ("status", "all_overrides")]
    head, tail = code_lines(code, machines_of_jobs(jobs))
    md = list(head)
    md += [f"All jobs: `{' '.join(shared)}`", ""] if shared else []
    md += markdown.table(short, [[cell(r.get(c)) for c in short] for r in rows])
    md += [f"\n**Job {r['job']} did not finish** ({r['status']}): it is in no comparison below; the same command "
           f"runs it again." for r in rows if r["status"].startswith(("failed", "killed", "interrupted"))]
    md += heldout_section(sweep_dir, rows)
    plot = sweep_plot(sweep_dir / "sweep.png", rows, {r["job"]: overrides_of(sweep_dir / r["job"]) for r in rows})
    if plot is not None:
        md.append(f"\n![the swept settings against reward and accuracy]({plot.name})")
    md += tail
    paths = {"json": atomic_write_json(sweep_dir / "summary.json", {"sweep_dir": str(sweep_dir), "columns": columns,
                                                                     "jobs": rows, "code": code}),
             "csv": atomic_write_text(sweep_dir / "summary.csv", buf.getvalue()),
             "md": write_markdown(sweep_dir / "summary.md", "\n".join(md) + "\n")}
    if plot is not None:
        paths["png"] = plot
    return paths


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
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    terms = plotted_terms(rows)
    proto = next((p for p in ("ll", "open", "mc") if any(f"vqa/{p}/mean" in r for r in rows)), "open")
    dims = [d for d in DIMENSIONS if any(f"vqa/{proto}/{d}" in r for r in rows)]
    held = [d for d in DIMENSIONS if any(f"heldout/{d}_right" in r for r in rows)]
    panels = [p for p, show in (("reward", terms), ("heldout", held), ("vqa", dims)) if show]
    if not panels:  # e.g. a sweep of SFT runs without VQA: no reward, no accuracy to plot
        return None
    # one colour per dimension or term in every panel
    colour = {n: f"C{i % 10}" for i, n in enumerate([*DIMENSIONS, *(t.removeprefix("reward/") for t in terms
                                                                     if t.removeprefix("reward/") not in DIMENSIONS)])}
    fig, axes = plt.subplots(len(keys), len(panels), figsize=(6.5 * len(panels), 3.8 * len(keys)), dpi=110,
                             squeeze=False)
    for i, key in enumerate(keys):
        values = sorted({overrides[r["job"]].get(key) for r in rows}, key=_sort_value)
        xs = [_sort_value(v)[1] if _sort_value(v)[0] == 0 else n for n, v in enumerate(values)]
        at = {v: [r for r in rows if overrides[r["job"]].get(key) == v] for v in values}
        for ax, panel in zip(axes[i], panels):
            series = {"reward": terms, "heldout": [f"heldout/{d}_right" for d in held],
                      "vqa": [f"vqa/{proto}/{d}" for d in dims]}[panel]
            for k, col in enumerate(series):
                mean, lo, hi = [], [], []
                for v in values:
                    got = [r[col] * (100 if panel == "heldout" else 1) for r in at[v] if r.get(col) is not None]
                    if panel in ("reward", "heldout"):
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
                name = col.split("/")[-1].removesuffix("_right")
                ax.errorbar([x + 0.01 * k * (max(xs) - min(xs) or 1) for x in xs], mean, yerr=err, marker="o",
                            capsize=3, label=name, color=colour[name])
            ax.set_xlabel(key)
            if all(_sort_value(v)[0] == 1 for v in values):
                ax.set_xticks(xs, [str(v) for v in values])
            if panel == "reward":
                ax.set_ylabel("training reward per term,\nlast steps (bars: range)", fontsize=8)
            elif panel == "heldout":
                ax.set_ylabel("held-out answers with the dimension\nright, % (bars: range over jobs)", fontsize=8)
                ax.set_ylim(0, 100)
            else:
                ax.set_ylabel(f"held-out VQA accuracy, %\n{PROTOCOL_LABELS[proto]} (bars: 95 % CI)", fontsize=8)
                ax.set_ylim(0, 100)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return save_figure(fig, path)


def plotted_terms(rows: list[dict[str, Any]]) -> list[str]:
    """The reward columns a sweep plot draws: every term the jobs logged, less those weighted 0 in every job (they
    add nothing to R); where a job's weights are unknown, all are kept."""
    weighted = {t for r in rows for t, w in r.get("term_weights", {}).items() if w != 0}
    unknown = any(not r.get("term_weights") for r in rows)
    return sorted({c for r in rows for c in r if c.startswith("reward/") and c != "reward/weighted"
                   and (unknown or c.removeprefix("reward/") in weighted)})


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
    # lazy: wandb
    import wandb

    choices = OmegaConf.select(config, "hydra.runtime.choices") or {}
    group = _group(config, sweep_dir)
    tags = [str(t) for t in (config.get("tags") or [])] + [f"sweep:{choices.get('sweep') or 'multirun'}"]
    run = wandb.init(project=str(node.get("project", "vase")), group=group, name=f"{group}-summary",
                     job_type="summary", dir=str(sweep_dir), mode="offline" if wandb_offline() else "online",
                     reinit="create_new", config=sweep_params(config), tags=tags)
    try:
        run.log({"sweep/summary": wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in rows])})
        for name in ("sweep", "ablation"):
            if (sweep_dir / f"{name}.png").is_file():
                run.log({f"sweep/{name}": wandb.Image(str(sweep_dir / f"{name}.png"))})
        verdict = _verdict(sweep_dir)
        if verdict:
            run.log({"sweep/ablation_verdict": wandb.Table(columns=list(VERDICT_COLUMNS), data=verdict)})
        answer = read_verdict(sweep_dir)
        if answer:  # the verdict in the summary run's summary (the runs table's columns), each job's comparison a table
            run.summary.update({"verdict": short_verdict(answer) or "no measure decided",
                                **{dashboard_key(k): v for k, v in verdict_metrics(answer).items()}})
            columns, data = comparison_table(answer, rows)
            if data:
                run.log({"sweep/vs_baseline": wandb.Table(columns=columns, data=data)})
        for name in SWEEP_FILES:  # the files themselves, as the run's files
            if (sweep_dir / name).is_file():
                run.save(str(sweep_dir / name), base_path=str(sweep_dir), policy="now")
    finally:
        finish_wandb(run)


def comparison_table(verdict: dict[str, Any], rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Each job against the baseline job of its replicate (`job_comparison`), as a table: the job, what tells it
    apart (its overrides), then each ``vs_baseline/<move>`` with its bounds; baseline jobs and jobs the verdict does
    not hold are left out."""
    per_job = [(r, job_comparison(verdict, str(r["job"]))) for r in rows]
    per_job = [(r, c) for r, c in per_job if c]
    keys = list(dict.fromkeys(k for _, c in per_job for k in c))
    return ["job", "overrides", *keys], [[r["job"], r.get("overrides", ""), *(c.get(k) for k in keys)]
                                         for r, c in per_job]


def wandb_sync_command(sweep_dir: Path) -> str | None:
    """The one command that pushes a sweep's offline W&B runs (every job's and the summary's) once a login exists;
    None when the sweep wrote none. The globs are the shell's: the sweep's folder is quoted, its runs are not."""
    runs = [*sweep_dir.glob("*/wandb/offline-run-*"), *sweep_dir.glob("wandb/offline-run-*")]
    if not runs:
        return None
    where = shlex.quote(str(sweep_dir))
    return f"wandb sync {where}/*/wandb/offline-run-* {where}/wandb/offline-run-*"


BOARD = "tensorboard"
"""A sweep's TensorBoard folder: one link per job, named by its swept values, to the job's own TensorBoard run."""


def board_runs(sweep_dir: Path) -> list[tuple[str, Path]]:
    """Each job's TensorBoard run (a folder with events) and the name TensorBoard shows it by: its swept values
    (``w_shape=0.6``: its folder's name less the stage in front), with the job's number in front where two would
    read the same; in the order of the jobs."""
    runs = sorted((p for p in sweep_dir.glob("*/tensorboard/*") if p.is_dir() and any(p.glob("events.out.*"))),
                  key=lambda p: (len(p.parts[-3]), p.parts[-3]))
    names = [p.name.split("-", 1)[-1] for p in runs]
    if len(set(names)) != len(names):
        names = [f"{p.parts[-3]}-{n}" for p, n in zip(runs, names)]
    return list(zip(names, runs))


def tensorboard_command(sweep_dir: Path, here: Path | None = None) -> str | None:
    """The command that shows a sweep's jobs side by side in TensorBoard, and the page to open: ``tensorboard
    --logdir <sweep>/tensorboard``, a folder of links (one per job, named by its swept values, to the job's own
    run), so TensorBoard names each run ``w_shape=0.6`` rather than by its path (``0/tensorboard/grpo-w_shape=0.6``,
    which its tables cut to ``0/tensorboard/...``). The folder is relative to ``here`` (the current one) when the
    sweep is under it. The page opens on the training curves (TensorBoard sorts its charts by name, so the one-point
    end metrics ``hp/*`` would come first). None when the sweep wrote no TensorBoard run; where links cannot be made,
    the jobs' folders as a ``--logdir_spec``."""
    runs = board_runs(sweep_dir)
    if not runs:
        return None
    board = sweep_dir / BOARD
    try:
        board.mkdir(exist_ok=True)
        for name, run in runs:
            link, target = board / name, os.path.relpath(run, board)
            if link.is_symlink() and os.readlink(link) == target:
                continue
            tmp = board / f".{name}.tmp"
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            tmp.symlink_to(target, target_is_directory=True)
            os.replace(tmp, link)  # a link made by an earlier end of the same sweep is replaced whole
    except OSError:  # a filesystem without links: the jobs' folders by name
        if any("," in str(p) or ":" in n for n, p in runs):
            return None  # names TensorBoard's spec cannot hold: `tensorboard --logdir <sweep>` still shows them
        spec = shlex.quote(",".join(f"{n}:{p}" for n, p in runs))
        return f"tensorboard --logdir_spec {spec}, then http://localhost:6006/?tagFilter={CURVES}#timeseries"
    here = (here or Path.cwd()).resolve()
    where = board.resolve()
    shown = where.relative_to(here) if where.is_relative_to(here) else where
    return f"tensorboard --logdir {shlex.quote(str(shown))}, then http://localhost:6006/?tagFilter={CURVES}#timeseries"


def _log_to_tensorboard(config: DictConfig, sweep_dir: Path) -> str | None:
    """The sweep's TensorBoard view: each job's comparison with the baseline and the hparams columns
    (`vase.loggers.tensorboard_sweep_columns`), then the folder of named links; returns the command that shows it
    (`tensorboard_command`), None when no job logged to TensorBoard."""
    runs = board_runs(sweep_dir)
    if not runs:
        return None
    verdict = read_verdict(sweep_dir)
    q = verdict.get("hypothesis") or hypothesis_of(config) or {}
    swept = sweep_keys_of(config.hydra.overrides.task, config.hydra.sweeper.get("params"))
    params, comparisons = [], []
    for _, run in runs:
        job, given = run.parents[1], overrides_of(run.parents[1])
        params.append({f"sweep/{dashboard_key(k)}": param_value(given[k]) for k in swept if k in given})
        comparisons.append({dashboard_key(k): v for k, v in job_comparison(verdict, job.name).items()})
    folders = [r for _, r in runs]
    logged = dict.fromkeys(tensorboard_tags(folders), 0.0)
    tensorboard_sweep_columns(folders, params, [f"sweep/{dashboard_key(k)}" for k in q.get("compare") or []],
                              dashboard_columns(logged, hypothesis_columns(q)), comparisons)
    return tensorboard_command(sweep_dir)


CURVES = urllib.parse.quote("train/(reward|loss|kl)$", safe="")
"""TensorBoard's tag filter (a regular expression) for a sweep's headline training curves."""


VERDICT_COLUMNS = ("target", "asks", "result")


def _verdict(sweep_dir: Path) -> list[list[str]]:
    """The ablation's verdict as table rows (none without ablation.json)."""
    path = sweep_dir / "ablation.json"
    return verdict_rows(read_json(path)) if path.is_file() else []


def sweep_params(config: DictConfig) -> dict[str, Any]:
    """What a sweep's summary run shows as its parameters: each swept key with the values it took
    (``sweep/<key>``), and the sweep's name."""
    given = {o.partition("=")[0].lstrip("+~"): o.partition("=")[2] for o in config.hydra.overrides.task}
    params = dict(config.hydra.sweeper.get("params") or {})
    out: dict[str, Any] = {"sweep": (OmegaConf.select(config, "hydra.runtime.choices") or {}).get("sweep") or "multirun"}
    for key in sweep_keys_of(config.hydra.overrides.task, params):
        out[f"sweep/{key}"] = str(given.get(key, params.get(key, "")))
    return out


def _group(config: DictConfig, sweep_dir: Path) -> str:
    """The sweep's name and launch time, as its jobs' ``${vase.sweep_group:}`` gives it."""
    return group_name(OmegaConf.select(config, "hydra.runtime.choices"), sweep_dir)


SWEEP_FILES = ("summary.md", "summary.json", "summary.csv", "sweep.png", "ablation.md", "ablation.json",
               "ablation.png", "compare.md", "compare.json", "verdict.md", "verdict.json")


def _log_to_mlflow(config: DictConfig, sweep_dir: Path, rows: list[dict[str, Any]],
                   columns: list[str]) -> dict[str, str] | None:
    """The sweep as an MLflow parent run (its summary table, the ablation's verdict table, sweep.png and the reports
    attached, the swept keys as its parameters; the hypothesis's answer as its metrics ``verdict/...``, in its
    description and, shortened, in its name), with every job's run (tagged with the sweep's group) made its child,
    and a view of the jobs saved on the experiment (`jobs_view`). Returns the links to print (``jobs``: the view,
    ``answer``: the parent run), or None without logger=mlflow."""
    node = OmegaConf.select(config, "logger.mlflow")
    if node is None:
        return None
    # lazy: mlflow
    from mlflow.tracking import MlflowClient

    group = _group(config, sweep_dir)
    verdict = read_verdict(sweep_dir)
    short = short_verdict(verdict) if verdict else ""
    said = [line.replace("**", "") for line in verdict.get("lines") or []]
    prepare_mlflow(str(node.tracking_uri), str(node.experiment_name), node.get("artifact_location"))
    client = MlflowClient(str(node.tracking_uri))
    exp_id = client.get_experiment_by_name(str(node.experiment_name)).experiment_id
    table = verdict_table(verdict) if verdict else []
    note = "\n\n".join([*said, *(["\n".join(table)] if table else []),
                         f"**sweep {group}**: {len(rows)} jobs. The files: sweep/verdict.md, sweep/summary.md (and the "
                         f"report kind's own) in Artifacts; on the machine that ran it, {sweep_dir}."])
    name = f"{group}-summary" + (f": {short}" if short else "")
    parent = client.create_run(exp_id, run_name=name[:250], tags={"sweep_group": group, "job_type": "sweep",
                                                                   "mlflow.note.content": inert_markdown(note)}
                               ).info.run_id  # MLflow renders the description as Markdown
    try:
        client.log_dict(parent, {"columns": columns, "data": [[r.get(c) for c in columns] for r in rows]},
                        "tables/sweep_summary.json")
        table = _verdict(sweep_dir)
        if table:
            client.log_dict(parent, {"columns": list(VERDICT_COLUMNS), "data": table}, "tables/ablation_verdict.json")
        for key, value in sweep_params(config).items():
            client.log_param(parent, key, value)
        for key, value in verdict_metrics(verdict).items():
            client.log_metric(parent, dashboard_key(key), value)
        for name in SWEEP_FILES:
            if (sweep_dir / name).is_file():
                client.log_artifact(parent, str(sweep_dir / name), artifact_path="sweep")
        for run in client.search_runs([exp_id], filter_string=f"tags.sweep_group = '{group}'", max_results=10000):
            if run.info.run_id != parent:
                client.set_tag(run.info.run_id, "mlflow.parentRunId", parent)
                job = Path(str(run.data.tags.get("vase.run_dir", ""))).name
                for key, value in job_comparison(verdict, job).items():  # its setting against the baseline's job
                    client.log_metric(run.info.run_id, dashboard_key(key), value)
        q = verdict.get("hypothesis") or hypothesis_of(config) or {}
        swept = sweep_keys_of(config.hydra.overrides.task, config.hydra.sweeper.get("params"))
        key = jobs_view(client, exp_id, group, [f"sweep/{dashboard_key(k)}" for k in view_order(swept, q)],
                        view_metrics(q, verdict) or hypothesis_columns(q))
    finally:
        client.set_terminated(parent)
    uri = str(node.tracking_uri)
    return {"jobs": mlflow_link(uri, exp_id) + f"?viewStateShareKey={urllib.parse.quote(key)}",
            "answer": mlflow_link(uri, exp_id, parent), "parent": parent}


SHARED_VIEW_TAG = "mlflow.sharedViewState."
"""Where MLflow's UI (3.x) reads a shared view of an experiment's runs (``?viewStateShareKey=<key>`` in the link)."""


def view_metrics(q: dict[str, Any], verdict: dict[str, Any]) -> list[str]:
    """The metric columns a runs table shows for a hypothesis's answer (`job_comparison`'s names): each job against the
    baseline on the hypothesis's first measure with its interval's bounds, then on its next measures (four columns in
    all, what a laptop's first screen holds beside the run names and the swept keys); [] before a verdict.

    >>> view_metrics({"moves": ["heldout/total", "kl"]}, {"jobs": {"1": {}}})
    ['vs_baseline/heldout/total', 'vs_baseline/heldout/total_low', 'vs_baseline/heldout/total_high', 'vs_baseline/kl']
    """
    moves = list(q.get("moves") or [])
    if not moves or not verdict.get("jobs"):
        return []
    first = f"vs_baseline/{moves[0]}"
    return [dashboard_key(m) for m in [first, f"{first}_low", f"{first}_high", *(f"vs_baseline/{m}" for m in moves[1:])]][:4]


def jobs_view(client: Any, exp_id: str, group: str, params: list[str], metrics: list[str]) -> str:
    """A view of a sweep's jobs saved on its experiment, as MLflow's UI shares views: the jobs alone (not collapsed
    under their parent run), sorted by the first of ``metrics``, with its columns (the swept keys, then ``metrics``:
    the hypothesis's comparison) shown. Returns its key. MLflow's runs page shows no parameter or metric column by
    default, and a client cannot change that default: the link vase prints opens this view."""
    def col(kind: str, name: str) -> str:
        return f"{kind}.`{name}`"

    # each column wide enough for its name's telling end: all of them on a laptop's first screen beside the names
    shown = [col("params", k) for k in params] + [col("metrics", m) for m in metrics[:4]]
    view = {"searchFilter": f"tags.sweep_group = '{group}' and tags.job_type != 'sweep'",
            "orderByKey": col("metrics", metrics[0]) if metrics else "attributes.start_time", "orderByAsc": False,
            "selectedColumns": shown, "columnOrder": shown,
            "columnWidths": {c: 170 if c.startswith("params.") else 165 for c in shown}}
    key = f"vase-{group}"
    client.set_experiment_tag(exp_id, SHARED_VIEW_TAG + key, json.dumps(view))
    return key


def report_notices(config: DictConfig) -> list[str]:
    """What a sweep says when it starts about the report its end will write: its hypothesis's (``hypothesis:``, with its
    report kind), or why it gets summary.md alone. A hypothesis that cannot be answered (a key the sweep does not vary,
    a report kind that cannot decide it) stops the sweep here, in one line (exit 2)."""
    params = config.hydra.sweeper.get("params")
    swept = sweep_keys_of(config.hydra.overrides.task, params)
    named = [str(o).split("=", 1)[0].lstrip("+~") for o in config.hydra.overrides.task] + list(params or {})
    values = sweep_values_of(config.hydra.overrides.task, params)
    try:
        q = hypothesis_of(config)
        if q is not None:
            terms = OmegaConf.select(config, "reward.terms", default=None)
            check_hypothesis(q, swept, named, values,
                           OmegaConf.to_container(terms, resolve=False) if isinstance(terms, DictConfig) else None)
    except ConfigError as e:
        config_exit(e)
    if q is not None:
        ev = config.get("val") or config.get("evaluate") or {}  # "evaluate": before 0.2
        listed = [values[k] if k in values else ["one"] for k in q["replicates"]]  # a key not swept: one value
        replicates = math.prod(len(v) for v in listed) if all(v is not None for v in listed) else None
        return [notice(q, heldout=bool(ev.get("heldout")), replicates=replicates)]
    reward = [k for k in swept if k.startswith("reward.")]
    hint = (" (a reward weight or tau: hypothesis.report=ablation adds ablation.md's targets)" if reward else "")
    return [f"report: this sweep varies {', '.join(swept) or 'nothing'} and has no hypothesis, so its end writes "
            f"summary.md only; for a verdict, name what it compares: +hypothesis.compare=<key> "
            f"+hypothesis.baseline=<value> (and +hypothesis.moves=[...]){hint}, here or as a hypothesis: block in the sweep "
            f"file"]


def failed_line(num: Any, overrides: Any, err: BaseException, folder: Any) -> str:
    """The one line a failed sweep job gets, wherever it ran (in the sweep's process, or lost by a launcher)."""
    return (f"error: sweep job #{num} ({' '.join(overrides)}) failed: {type(err).__name__}: {err}; its folder: "
            f"{folder}. The other jobs go on; the sweep's report covers the finished ones, and the same command runs "
            f"the failed ones again")


def failed_jobs(sweep_dir: Path) -> list[str]:
    """The sweep's jobs that did not finish, each as ``#<n> <status>: <reason>`` (a job still running is not one)."""
    jobs = sorted((d for d in sweep_dir.iterdir() if (d / RUN_FILE).is_file()), key=lambda d: (len(d.name), d.name))
    return [f"#{job.name} {ended}" for job in jobs if (ended := unfinished(job))]


class SweepSummary(Callback):
    """Hydra callback: say at once when a sweep's job fails (Hydra itself keeps the error until every job has run),
    and at the end of a multirun, write the sweep's summary and log it to W&B and MLflow. (A SLURM sweep's checks
    before it submits are `vase.launchers.SlurmPreflight`'s, which runs first.)"""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        note_multirun(list(config.hydra.overrides.task), str(config.hydra.sweeper.get("_target_", "")), config)
        for line in report_notices(config):
            print(line, flush=True)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if getattr(job_return, "status", None) != JobStatus.FAILED:
            return
        if str(OmegaConf.select(config, "hydra.mode", default="")).rsplit(".", 1)[-1] != RunMode.MULTIRUN.name:
            return  # a single run says its own error; it is no sweep's job
        err = job_return._return_value  # the exception; reading .return_value would raise it here
        print(failed_line(OmegaConf.select(config, "hydra.job.num", default="?"),
                          OmegaConf.select(config, "hydra.overrides.task") or [], err,
                          OmegaConf.select(config, "hydra.runtime.output_dir", default="")), file=sys.stderr, flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not sweep_dir.is_dir():
            return
        try:
            self._end(config, sweep_dir)
        except KeyboardInterrupt:  # Ctrl-C while the reports are written: the sweep's record says so, one line
            with contextlib.suppress(OSError):
                set_status(sweep_dir, "interrupted", "stopped by Ctrl-C while its reports were written")
            print(f"interrupted (Ctrl-C) while the sweep's reports were written; its jobs are kept: python -m "
                  f"vase.reports.verdict {sweep_dir} writes its answer again", file=sys.stderr, flush=True)
            raise SystemExit(130) from None

    def _end(self, config: DictConfig, sweep_dir: Path) -> None:
        if check_only():  # nothing ran: no summary; its folders were vase's scratch (`scratch_sweep_dir`), removed
            jobs = sum(1 for d in sweep_dir.iterdir() if (d / ".hydra").is_dir())
            print(f"config ok: the sweep's {jobs} job(s) checked, nothing trained, no folder kept")
            return
        if not finish_sweep(sweep_dir) and not failed_jobs(sweep_dir):
            print(f"the sweep in {sweep_dir} is not complete; the same command (resume=auto) takes it up again: "
                  f"finished jobs are kept, the others resume or run", file=sys.stderr)
        paths = write_sweep_summary(sweep_dir)
        answered = decide_sweep(sweep_dir)
        if answered is not None:  # the answer where the user tails the log, then the pages that show it
            print(verdict_text(answered))
        data = read_json(paths["json"])
        try:
            _log_to_wandb(config, sweep_dir, data["jobs"], data["columns"])
        except Exception as e:  # noqa: BLE001 - the summary files are written; W&B is a copy of them
            log.warning("the sweep summary was written to %s but could not be logged to W&B: %s", paths["md"], e)
        sync = wandb_sync_command(sweep_dir) if wandb_offline() else None
        if sync:
            print(f"W&B (offline): push the whole sweep later with: {sync}")
        try:
            board = _log_to_tensorboard(config, sweep_dir)
        except Exception as e:  # noqa: BLE001 - the summary files are written; TensorBoard is a view of them
            board = None
            log.warning("the sweep summary was written to %s but TensorBoard's view of it could not be: %s",
                        paths["md"], e)
        if board:
            print(f"TensorBoard: the jobs side by side, named by their swept values: {board}")
        try:
            links = _log_to_mlflow(config, sweep_dir, data["jobs"], data["columns"])
            if links:
                print(f"MLflow: the sweep's jobs, with the swept values and the hypothesis's measures: {links['jobs']}")
                print(f"MLflow: the sweep is run {links['parent']}, its answer: {links['answer']}")
        except Exception as e:  # noqa: BLE001 - the summary files are written; MLflow is a copy of them
            log.warning("the sweep summary was written to %s but could not be logged to MLflow: %s", paths["md"], e)
        print(f"sweep summary: {paths['md']}")
        failed = failed_jobs(sweep_dir)
        if failed:
            print(f"error: {len(failed)} sweep job(s) failed ({'; '.join(failed)}); the summary covers the finished "
                  f"ones. The same command runs only the failed jobs and completes the report", file=sys.stderr,
                  flush=True)
            raise SystemExit(1)


def _main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m vase.reports.sweep_summary <multirun directory>", file=sys.stderr)
        return 2
    print(write_sweep_summary(argv[0])["md"])
    answered = decide_sweep(argv[0])
    if answered is not None:
        print(verdict_text(answered))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
