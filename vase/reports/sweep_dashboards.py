"""A sweep's dashboards, written at its end from its files (summary.json, verdict.json): a W&B summary run of the
sweep's group, TensorBoard's side-by-side view of the jobs (each job's hparams columns and a folder of links named by
the swept values), and an MLflow parent run with every job its child. Each is a view of the files, never their only
copy: the sweep's end (`vase.reports.sweep_summary.SweepSummary`) runs each as a part of its own, and one that fails
costs that view alone (TensorBoard: one job's folder that cannot be written costs that job's columns; MLflow: what it
did not take is kept and sent later by ``python -m vase.mlflow_journal <sweep>``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import urllib.parse
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from vase.config import group_name, name_from_overrides, sweep_keys_of, view_order, wandb_offline
from vase.errors import VaseError, first_line
from vase.eval.stats import dashboard_columns
from vase.io import atomic_write_json, inert_markdown, read_json, shown_path
from vase.loggers import (
    dashboard_key,
    dashboard_keys,
    finish_wandb,
    link_name,
    mlflow_link,
    param_value,
    swept_param,
)
from vase.mlflow_store import prepare_mlflow
from vase.reports.ablation import verdict_rows
from vase.reports.hypothesis import hypothesis_of
from vase.reports.jobs import job_dirs, overrides_of
from vase.reports.verdict_view import (
    hypothesis_columns,
    job_cells,
    job_comparison,
    job_comparisons,
    read_verdict,
    short_verdict,
    verdict_metrics,
    verdict_table,
)
from vase.runs import read_status
from vase.runs.describe import raw_yaml
from vase.tensorboard_sweep import tensorboard_sweep_columns, tensorboard_tags

log = logging.getLogger("vase")


def log_to_wandb(config: DictConfig, sweep_dir: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
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
                                **dashboard_keys(verdict_metrics(answer))})
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


def wandb_sync_command(sweep_dir: Path, here: Path | None = None) -> str | None:
    """The one command that pushes a sweep's offline W&B runs (every job's and the summary's) once a login exists;
    None when the sweep wrote none. The globs are the shell's: the sweep's folder is quoted (relative to ``here``
    when under it, `shown_path`), its runs are not."""
    runs = [*sweep_dir.glob("*/wandb/offline-run-*"), *sweep_dir.glob("wandb/offline-run-*")]
    if not runs:
        return None
    where = shown_path(sweep_dir, here)
    return f"wandb sync {where}/*/wandb/offline-run-* {where}/wandb/offline-run-*"


BOARD = "tensorboard"
"""A sweep's TensorBoard folder: one link per job, named by its swept values, to the job's own TensorBoard run."""


def board_runs(sweep_dir: Path) -> list[tuple[str, Path]]:
    """Each job's TensorBoard run (a folder with events) and the name TensorBoard shows it by: the values its sweep
    gave it (``w_shape=0.6-seed=1``: the keys whose values differ between the jobs, as the dashboards name runs), as
    written where a folder name can hold them (``note=Κεραμεικός``; `vase.loggers.link_name`), with the job's number
    in front where two would read the same; in the order of the jobs."""
    runs = sorted((p for p in sweep_dir.glob("*/tensorboard/*") if p.is_dir() and any(p.glob("events.out.*"))),
                  key=lambda p: (len(p.parts[-3]), p.parts[-3]))
    given = {p: overrides_of(p.parents[1]) if (p.parents[1] / ".hydra" / "overrides.yaml").is_file() else {}
             for p in runs}
    varied = [k for k in dict.fromkeys(k for o in given.values() for k in o)
              if len({o.get(k) for o in given.values()}) > 1]
    names = [link_name(name_from_overrides([f"{k}={given[p][k]}" for k in varied if k in given[p]])
                       if varied else p.name.split("-", 1)[-1]) for p in runs]
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
    return f"tensorboard --logdir {shown_path(board, here)}, then http://localhost:6006/?tagFilter={CURVES}#timeseries"


def log_to_tensorboard(config: DictConfig, sweep_dir: Path, written: list[str] | None = None) -> dict[str, Any] | None:
    """The sweep's TensorBoard view: each job's comparison with the baseline and the hparams columns
    (`vase.tensorboard_sweep.tensorboard_sweep_columns`), for every job not in ``written`` (jobs an earlier end of the sweep
    wrote), then the folder of named links. Returns the command that shows it (`tensorboard_command`), the jobs whose
    columns are written and a line for each job whose folder could not take them; None when no job logged to
    TensorBoard."""
    runs = board_runs(sweep_dir)
    missing = missing_boards(sweep_dir)
    if not runs:
        return {"command": None, "written": list(written or []), "lost": [], "missing": missing} if missing else None
    verdict = read_verdict(sweep_dir)
    q = verdict.get("hypothesis") or hypothesis_of(config) or {}
    swept = sweep_keys_of(config.hydra.overrides.task, config.hydra.sweeper.get("params"))
    folders, params = [], []
    for _, run in runs:
        given = overrides_of(run.parents[1])
        params.append({swept_param(k, q): param_value(given[k]) for k in swept if k in given})
        folders.append(run)
    # the baseline job at 0 on the others' comparison: its own row, and a line in the parallel coordinates (which
    # leave out a run without the metric, and with it the baseline's value of the swept key)
    comparisons = [dashboard_keys(c) for c in job_comparisons(verdict, [run.parents[1].name for _, run in runs])]
    logged = dict.fromkeys(tensorboard_tags(folders), 0.0)
    todo = [i for i, run in enumerate(folders) if run.parents[1].name not in (written or [])]
    lost = tensorboard_sweep_columns([folders[i] for i in todo], [params[i] for i in todo],
                                     [swept_param(k, q) for k in q.get("compare") or []],
                                     dashboard_columns(logged, hypothesis_columns(q)), [comparisons[i] for i in todo],
                                     every=params, verdict=short_verdict(verdict) or None)
    failed = {str(run) for run, _ in lost}
    done = [*(written or []), *(folders[i].parents[1].name for i in todo if str(folders[i]) not in failed)]
    return {"command": tensorboard_command(sweep_dir), "written": done, "missing": missing,
            "lost": [f"job {Path(run).parents[1].name}'s columns not written ({why})" for run, why in lost]}


def missing_boards(sweep_dir: Path) -> list[str]:
    """The finished jobs that logged to TensorBoard (``logger.tensorboard`` in their config) whose events are gone
    from their folder (deleted since, or never written): each a line naming the job and the folder. The board shows
    the others; without this line a missing baseline was only missing."""
    out = []
    for job in job_dirs(sweep_dir):
        config = job / ".hydra" / "config.yaml"
        if read_status(job).get("status") != "finished" or not config.is_file():
            continue
        saved = raw_yaml(config)
        loggers = saved.get("logger") if isinstance(saved, dict) else None
        if isinstance(loggers, dict) and "tensorboard" in loggers and not any(job.glob("tensorboard/*/events.out.*")):
            out.append(f"job {job.name}'s TensorBoard run (no events file in {job / 'tensorboard'})")
    return out


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


def mlflow_plan(config: DictConfig, sweep_dir: Path, rows: list[dict[str, Any]],
                columns: list[str]) -> dict[str, Any] | None:
    """What the sweep sends to MLflow, as one record (`vase.mlflow_journal.send_sweep` sends it; kept in the sweep's
    folder where MLflow does not take it): a parent run (its summary table, the ablation's verdict table, sweep.png and
    the reports attached, the swept keys as its parameters; the hypothesis's verdict as its metrics ``verdict/...``,
    in its description and, shortened, in its name), every job's comparison with the baseline (the job's run, tagged
    with the sweep's group, becomes the parent's child), and a view of the jobs saved on the experiment
    (`jobs_view`). None without logger=mlflow."""
    node = OmegaConf.select(config, "logger.mlflow")
    if node is None:
        return None
    group = _group(config, sweep_dir)
    verdict = read_verdict(sweep_dir)
    short = short_verdict(verdict) if verdict else ""
    said = [line.replace("**", "") for line in [*([verdict["too_short"]] if verdict.get("too_short") else []),
                                                 *(verdict.get("lines") or [])]]
    table = verdict_table(verdict) if verdict else []
    note = "\n\n".join([*said, *(["\n".join(table)] if table else []),
                         f"**sweep {group}**: {len(rows)} jobs. The files: sweep/verdict.md, sweep/summary.md (and the "
                         f"report kind's own) in Artifacts; on the machine that ran it, the sweep's folder "
                         f"{Path(sweep_dir).parent.name}/{Path(sweep_dir).name} under its log folder."])
    name = f"{group}-summary" + (f": {short}" if short else "")
    tables = {"tables/sweep_summary.json": {"columns": columns, "data": [[r.get(c) for c in columns] for r in rows]}}
    ablation = _verdict(sweep_dir)
    if ablation:
        tables["tables/ablation_verdict.json"] = {"columns": list(VERDICT_COLUMNS), "data": ablation}
    q = verdict.get("hypothesis") or hypothesis_of(config) or {}
    swept = sweep_keys_of(config.hydra.overrides.task, config.hydra.sweeper.get("params"))
    jobs = [j.name for j in job_dirs(sweep_dir)]  # each job's comparison, the baseline's at 0 (job_comparisons)
    # the same comparison as text a person reads, one column per measure: the difference, both bounds, the unit
    cells = [dashboard_keys(c) for c in job_cells(verdict, jobs, list(q.get("moves") or [])[:VIEW_CELLS])]
    key, state = jobs_view(group, [swept_param(k, q) for k in view_order(swept, q)],
                           view_metrics(q, verdict) or hypothesis_columns(q),
                           list(dict.fromkeys(k for c in cells for k in c)))
    return {"tracking_uri": str(node.tracking_uri), "experiment_name": str(node.experiment_name),
            "artifact_location": node.get("artifact_location"), "group": group, "run_name": inert_markdown(name)[:250],
            "tags": {"sweep_group": group, "job_type": "sweep", "mlflow.note.content": inert_markdown(note)},
            "tables": tables, "params": sweep_params(config),
            "metrics": dashboard_keys(verdict_metrics(verdict)),
            "files": [n for n in SWEEP_FILES if (sweep_dir / n).is_file()],
            "children": dict(zip(jobs, (dashboard_keys(c) for c in job_comparisons(verdict, jobs)))),
            "children_tags": {j: c for j, c in zip(jobs, cells) if c},
            "view": {"key": key, "state": state}}


def log_to_mlflow(config: DictConfig, sweep_dir: Path, rows: list[dict[str, Any]],
                  columns: list[str]) -> dict[str, str] | None:
    """The sweep's `mlflow_plan`, sent; returns the links to print (``jobs``: the view, ``answer``: the parent run,
    ``parent``), or None without logger=mlflow. Where MLflow does not take it (its server gone, its store unusable), the
    plan is kept in the sweep's folder (`vase.mlflow_journal.SWEEP_JOURNAL`) and the returned ``kept`` line says so and
    names the command that sends it; an OSError writing that record propagates (nothing was kept)."""
    plan = mlflow_plan(config, sweep_dir, rows, columns)
    if plan is None:
        return None
    # lazy: vase.mlflow_journal builds on Lightning's logger (torch), which a sweep's start and the config check,
    # importing this module through the sweep's callback, must not load
    from vase.mlflow_journal import SWEEP_JOURNAL, bound_mlflow_retries, send_sweep

    uri = plan["tracking_uri"]
    bound_mlflow_retries()  # a server gone at the end costs seconds, not MLflow's minutes of retries
    try:
        prepare_mlflow(uri, plan["experiment_name"], plan["artifact_location"])
        sent = send_sweep(plan, sweep_dir)
    except Exception as e:  # noqa: BLE001 - whatever MLflow says, the plan is kept and the line names the server
        # vase's own probe says what is wrong after the key it names, then what to do: the first of those is the why
        why = (first_line(e).split(": ", 1)[-1].split("; ")[0] if isinstance(e, VaseError)
               else f"{type(e).__name__}: {first_line(e, 160)}")
        journal = atomic_write_json(sweep_dir / SWEEP_JOURNAL, {**plan, "error": why})
        return {"kept": f"MLflow: {uri} did not take the sweep's parent run and its jobs' comparisons ({why}); kept in "
                        f"{journal}; once it answers: python -m vase.mlflow_journal {shown_path(sweep_dir)}"}
    exp_id, key = sent["experiment_id"], plan["view"]["key"]
    return {"jobs": mlflow_link(uri, exp_id) + f"?viewStateShareKey={urllib.parse.quote(key)}",
            "answer": mlflow_link(uri, exp_id, sent["parent"]), "parent": sent["parent"],
            "missing": [f"job {job}'s MLflow run (none of the sweep's group at {uri} names {sweep_dir / job})"
                        for job in sent.get("missing") or []]}


VIEW_CELLS = 3
"""The measures whose comparison the jobs view shows as text (`job_cells`), the hypothesis's first ones."""


def column_width(title: str) -> int:
    """Pixels a column of MLflow's runs table needs to show ``title`` whole (its header's font, about 7 px a
    character, and the cell's padding and sort icon), measured on MLflow 3.17's page in Chromium: the swept key and the
    comparison's title, whole, beside the run names on a 1,400-px screen with MLflow's Assistant panel open.

    >>> column_width("sweep/reward.weights.shape"), column_width("Δ shape_right in points"), column_width("x")
    (210, 189, 120)
    """
    return max(120, 7 * len(title) + 28)


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


def jobs_view(group: str, params: list[str], metrics: list[str], cells: list[str] | tuple[str, ...] = ()
              ) -> tuple[str, str]:
    """A view of a sweep's jobs, as MLflow's UI shares views, saved on its experiment when the sweep is sent: the
    jobs alone (not collapsed under their parent run), sorted by the first of ``metrics``, with its columns (the swept
    keys, then ``cells``: each job against the baseline as one text with both bounds and the unit in the title
    (`vase.reports.verdict_view.job_cells`, the jobs' tags), then ``metrics``: the same numbers, sortable, then the
    replicates' keys, ``sweep_replicate/...``, which the runs' names say too) shown,
    each as wide as its title. Returns its key and its state (the tag's value under
    `vase.mlflow_journal.SHARED_VIEW_TAG`). MLflow's runs page shows no parameter or metric column by default, and a
    client cannot change that default: the link vase prints opens this view.

    >>> state = json.loads(jobs_view("g", ["sweep/reward.weights.shape"], ["vs_baseline/heldout/shape_right"],
    ...                              ["Δ shape_right in points"])[1])
    >>> state["columnOrder"]
    ['params.`sweep/reward.weights.shape`', 'tags.`Δ shape_right in points`', 'metrics.`vs_baseline/heldout/shape_right`']
    >>> list(state["columnWidths"].values())
    [210, 189, 245]
    >>> json.loads(jobs_view("g", ["sweep_replicate/seed", "sweep/x"], ["vs_baseline/m"])[1])["columnOrder"]
    ['params.`sweep/x`', 'metrics.`vs_baseline/m`', 'params.`sweep_replicate/seed`']
    """
    def col(kind: str, name: str) -> str:
        return f"{kind}.`{name}`"

    # a replicate's column (sweep_replicate/seed) last: the run's name says it, and before the answer it pushed each
    # job's comparison off a laptop's first screen (three seeds a weight, 2026-12-07)
    replicates = [k for k in params if k.startswith("sweep_replicate/")]
    shown = [col("params", k) for k in params if k not in replicates] + [col("tags", c) for c in cells] + \
        [col("metrics", m) for m in metrics[:4]] + [col("params", k) for k in replicates]
    view = {"searchFilter": f"tags.sweep_group = '{group}' and tags.job_type != 'sweep'",
            "orderByKey": col("metrics", metrics[0]) if metrics else "attributes.start_time", "orderByAsc": False,
            "selectedColumns": shown, "columnOrder": shown,
            "columnWidths": {c: column_width(c.split(".", 1)[1].strip("`")) for c in shown}}
    return f"vase-{group}", json.dumps(view)
