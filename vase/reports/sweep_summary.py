"""A multirun's summary: one row per job with its overrides, mean reward per dimension, VQA accuracy per dimension
and caption metrics, written next to the jobs as ``summary.json``, ``summary.csv`` and ``summary.md`` when the sweep
ends (a Hydra callback, registered in ``conf/hydra/default.yaml``), and logged as a W&B table in the sweep's group.

    python train.py -m sweep=reward_weights          # logs/train/multiruns/<time>/summary.md
    python -m vase.reports.sweep_summary logs/train/multiruns/<time>    # (re)write it by hand, e.g. after a crash
    python evaluate.py action=leaderboard runs=[logs/train/multiruns/<time>]
"""

from __future__ import annotations

import csv
import io
import logging
import math
import sys
from pathlib import Path
from typing import Any

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from vase import markdown
from vase.annotate.vocab import DIMENSIONS
from vase.choices import DATA_MIXES, PROTOCOL_LABELS
from vase.config import check_only, sweep_keys_of, sweep_values_of, wandb_offline
from vase.config.renames import both_given
from vase.errors import ConfigError, VaseError, config_exit
from vase.eval.stats import format_heldout, heldout_difference, mix_of, wilson_interval
from vase.io import atomic_write_json, atomic_write_text, read_json, save_figure, write_markdown
from vase.metrics.registry import is_percent
from vase.reports.hypothesis import caption_moves, check_hypothesis, hypothesis_of, notice
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
from vase.reports.sweep_dashboards import (
    log_to_mlflow,
    log_to_tensorboard,
    log_to_wandb,
    wandb_sync_command,
)
from vase.reports.sweep_end import SweepEnd
from vase.reports.verdict import decide_sweep
from vase.reports.verdict_view import verdict_text
from vase.runs import RUN_FILE, hold_sweep_dir, note_multirun, reading_records, sweep_jobs_finished

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
    lines = ["", f"## Held-out reward ({any_held['n']} answers on {any_held['vases']} held-out vases, mix "
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
    for term in dict.fromkeys(t for r in rows for t in r.get("term_weights", {})):  # a term's weight the sweep varied
        given = {r.get("term_weights", {}).get(term) for r in rows}
        if len(given) > 1 and not any(f"w/{term}" in r for r in rows):  # (a dimension's is there already)
            for r in rows:
                r[f"w/{term}"] = r.get("term_weights", {}).get(term)
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
            extra = OmegaConf.select(config, "metrics.extra", default=None)
            captions = caption_moves([str(m) for m in extra] if extra else None)  # the user's own ones too
            check_hypothesis(q, swept, named, values,
                             OmegaConf.to_container(terms, resolve=False) if isinstance(terms, DictConfig) else None,
                             captions)
            _check_captions_answered(config, q, captions)
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


def _check_captions_answered(config: DictConfig, q: dict[str, Any], captions: tuple[str, ...]) -> None:
    """A hypothesis's caption-metric move needs captions among the held-out answers (the stage's mix, or
    ``val.heldout_mix``): ConfigError naming the move and the mix where there are none."""
    asked = [m for m in q["moves"] if m.startswith("heldout/") and m.split("/", 1)[1] in captions]
    mix = str(OmegaConf.select(config, "val.heldout_mix", default=None)
              or OmegaConf.select(config, "data.mix", default="caption"))
    if asked and "caption" not in DATA_MIXES.get(mix, ("caption",)):
        raise ConfigError(f"hypothesis.moves: {asked[0]!r} scores the held-out captions, and this sweep's held-out "
                          f"answers hold none (mix {mix}: val.heldout_mix, else data.mix); set val.heldout_mix=both "
                          f"(or caption), or leave the caption metrics out of the moves")


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
        try:  # an old name beside its new one: refused here, once, not by each job after the sweep's folder is made
            both_given(config, list(config.hydra.overrides.task), config.hydra)
        except ConfigError as e:
            config_exit(e)
        note_multirun(list(config.hydra.overrides.task), str(config.hydra.sweeper.get("_target_", "")), config)
        given = OmegaConf.to_container(config.hydra.sweep, resolve=False).get("dir")
        if not str(given).startswith("${vase.run_dir:"):  # a folder the user chose: its record, as vase's own get
            try:
                hold_sweep_dir(str(config.hydra.sweep.dir), str(config.get("resume") or "auto"))
            except ConfigError as e:
                config_exit(e)
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
        if check_only():  # nothing ran: no summary; its folders were vase's scratch (`scratch_sweep_dir`), removed
            jobs = sum(1 for d in sweep_dir.iterdir() if (d / ".hydra").is_dir())
            print(f"config ok: the sweep's {jobs} job(s) checked, nothing trained, no folder kept")
            return
        complete, failed = sweep_jobs_finished(sweep_dir), failed_jobs(sweep_dir)
        if not complete and not failed:
            print(f"the sweep in {sweep_dir} is not complete; the same command (resume=auto) takes it up again: "
                  f"finished jobs are kept, the others resume or run", file=sys.stderr)
        end = SweepEnd(sweep_dir)
        try:
            with end.ctrl_c:
                end.begin()
                write_end(config, sweep_dir, end)
                end.close(complete, failed)
        except KeyboardInterrupt:  # Ctrl-C while the end is written: the record says so, one line, exit 130
            end.interrupted()


def write_end(config: DictConfig, sweep_dir: Path, end: SweepEnd) -> None:
    """The parts of a sweep's end (`vase.reports.sweep_end`), in order: the summary files, the verdict (printed where
    the user tails the log, then the pages that show it), then each dashboard (W&B, TensorBoard, MLflow) that an
    earlier end of the same jobs did not write."""
    ok, paths = end.run("summary", lambda: write_sweep_summary(sweep_dir))
    if ok:
        ok, answered = end.run("verdict", lambda: decide_sweep(sweep_dir))
        if answered is not None:
            print(verdict_text(answered))
    if end.stopped():
        return
    data = read_json(paths["json"])
    if end.todo("wandb"):
        end.run("wandb", lambda: log_to_wandb(config, sweep_dir, data["jobs"], data["columns"]))
    sync = wandb_sync_command(sweep_dir) if wandb_offline() else None
    if sync:
        print(f"W&B (offline): push the whole sweep later with: {sync}")
    if end.todo("tensorboard"):
        written = end.done.get("tensorboard")
        ok, board = end.run("tensorboard", lambda: log_to_tensorboard(config, sweep_dir, written or []))
        if ok and board is not None and board["lost"]:
            end.fail("tensorboard", "; ".join(board["lost"]), done=board["written"])
        if ok and board is not None and board.get("missing"):
            end.without["tensorboard"] = "; ".join(board["missing"])
        if ok and board is not None and board["command"]:
            print(f"TensorBoard: the jobs side by side, named by their swept values: {board['command']}")
    if end.todo("mlflow"):
        ok, links = end.run("mlflow", lambda: log_to_mlflow(config, sweep_dir, data["jobs"], data["columns"]))
        if links and links.get("kept"):
            print(links["kept"], file=sys.stderr, flush=True)
            end.unsent["mlflow"] = links["kept"]
        elif links:
            if links.get("missing"):
                end.without["mlflow"] = "; ".join(links["missing"])
            print(f"MLflow: the sweep's jobs, with the swept values and the hypothesis's measures: {links['jobs']}")
            print(f"MLflow: the sweep is run {links['parent']}, its answer: {links['answer']}")
    print(f"sweep summary: {paths['md']}")


def _main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m vase.reports.sweep_summary <multirun directory>", file=sys.stderr)
        return 2
    try:
        with reading_records():
            print(write_sweep_summary(argv[0])["md"])
            answered = decide_sweep(argv[0])
    except (VaseError, OSError) as e:  # a record that is not one, a report kind nothing registered: one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    if answered is not None:
        print(verdict_text(answered))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
