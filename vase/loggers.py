"""Loggers for every entry point: building them from config (W&B honours WANDB_MODE=disabled) after checking that
their stores answer, what a dashboard compares (`run_params`: the swept keys, the effective reward weights and a few
settings, with the full config attached as a file), evaluation rows, tables and end metrics, and closing W&B even when
a job fails."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from PIL import Image

from vase import markdown as md
from vase.config import swept_keys, view_order
from vase.errors import ConfigError
from vase.io import atomic_write_text, inert_markdown, shown_store
from vase.metrics.registry import table_columns
from vase.mlflow_store import prepare_mlflow
from vase.provenance import code_stamp
from vase.runs import job_overrides
from vase.wandb_record import wait_until_complete

log = logging.getLogger("vase")


def finish_wandb(run: Any = None) -> None:
    """Close the W&B run (``run``, else the current one) even when the job failed, and wait until W&B's service has
    written its whole record: ``wandb.finish()`` returns before that (`vase.wandb_record`), and a run read or synced
    in between has no metrics."""
    wandb = sys.modules.get("wandb")  # imported only when a W&B logger was built
    run = run if run is not None else (wandb.run if wandb is not None else None)
    if run is None:
        return
    record = run.settings.sync_file
    run.finish()
    if record:
        wait_until_complete(record)


def build_loggers(cfg: DictConfig) -> list[Any]:
    """The run's loggers. ``WANDB_MODE=disabled`` drops the W&B logger altogether: no run, online or offline."""
    nodes = cfg.get("logger")
    if not nodes:
        return []
    disabled = os.environ.get("WANDB_MODE", "").strip().lower() == "disabled"
    out = []
    for node in nodes.values():
        if not (isinstance(node, DictConfig) and "_target_" in node):
            continue
        if disabled and "wandb" in str(node._target_).lower():
            log.info("WANDB_MODE=disabled: no W&B run is written")
            continue
        node = node.copy()  # the run's config keeps its node
        tags = node.get("tags")
        if isinstance(tags, DictConfig):  # a tag that does not apply is absent: MLflow's server refuses a None value
            node.tags = {k: str(v) for k, v in OmegaConf.to_container(tags, resolve=True).items() if v is not None}
        if str(node._target_) in LIGHTNING_MLFLOW:  # a server that stops answering mid-run does not end the run
            out_dir = OmegaConf.select(cfg, "paths.output_dir", default=None, throw_on_resolution_failure=False)
            with open_dict(node):  # the journal in the run's folder (outside a Hydra job: the logger's save_dir)
                node._target_ = "vase.mlflow_journal.JournaledMLFlowLogger"
                node.journal = str(Path(out_dir) / "mlflow_unsent.jsonl") if out_dir else None
        out.append(instantiate(node))
    return out


def say_unsent(loggers: list[Any], run_dir: str | Path | None = None) -> list[str]:
    """Print (to stderr) and return the line of every MLflow logger whose server stopped answering during the run:
    what was not logged and the command that sends it (`vase.mlflow_journal`)."""
    lines = [line for lg in loggers if hasattr(lg, "unsent_line") for line in [lg.unsent_line(run_dir)] if line]
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    return lines


LIGHTNING_MLFLOW = ("pytorch_lightning.loggers.MLFlowLogger", "pytorch_lightning.loggers.mlflow.MLFlowLogger",
                    "lightning.pytorch.loggers.MLFlowLogger")


def kind(lg: Any) -> str:
    """wandb | tensorboard | mlflow | csv | other: which dashboard a Lightning logger writes to."""
    name = type(lg).__name__.lower()
    return next((k for k in ("wandb", "tensorboard", "mlflow", "csv") if k in name), "other")


def _markdown(columns: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return (f"{v:.4g}" if isinstance(v, float) else str(v)).replace("|", "\\|").replace("\n", " ")

    return "\n".join(md.table(columns, [[cell(v) for v in r] for r in rows]))


def log_table(loggers: list[Any], key: str, columns: list[str], rows: list[list[Any]], step: int | None = None) -> None:
    """A table in every dashboard: a W&B table, a TensorBoard text panel (markdown), an MLflow artifact
    ``tables/<key>.json`` (columns and rows; the MLflow UI shows it)."""
    for lg in loggers:
        k = kind(lg)
        if k == "wandb":
            lg.log_table(key=key, columns=columns, data=rows)
        elif k == "tensorboard":
            lg.experiment.add_text(key, inert_markdown(_markdown(columns, rows)), global_step=step or 0)
        elif k == "mlflow":
            data = {"columns": columns, "data": [[v if isinstance(v, (int, float, str, type(None))) else str(v)
                                                  for v in r] for r in rows]}
            lg.experiment.log_dict(lg.run_id, data, f"tables/{key.replace('/', '_')}.json")


def log_images(loggers: list[Any], key: str, paths: list[Any], step: int | None = None) -> None:
    """Image files in every dashboard: W&B images, TensorBoard images (``<key>/<file name>``), MLflow artifacts under
    ``<key>/``."""
    paths = [Path(p) for p in paths if Path(p).is_file()]
    if not paths:
        return
    for lg in loggers:
        k = kind(lg)
        if k == "wandb":
            lg.log_image(key=key, images=[str(p) for p in paths])
        elif k == "tensorboard":
            for p in paths:
                with Image.open(p) as im:
                    lg.experiment.add_image(f"{key}/{p.stem}", np.asarray(im.convert("RGB")), global_step=step or 0,
                                            dataformats="HWC")
        elif k == "mlflow":
            for p in paths:
                lg.experiment.log_artifact(lg.run_id, str(p), artifact_path=key)


IDENTITY = (("stage", "stage.name"), ("model", "model.label"), ("seed", "seed"), ("reward.tau", "reward.tau"),
            ("data.mix", "data.mix"))
"""Settings every run's parameters carry beside its overrides (name, config key)."""
_NOT_PARAMS = ("hydra.", "paths.", "logger", "callbacks.", "resume")  # where files go, not what the run is
_PARAM_UNSAFE = re.compile(r"[^\w\-.:/ ]")  # \w of any script: MLflow's own rule takes letters of every alphabet
_CONVENTIONAL = str.maketrans({"@": ":", "=": "_"})  # what every dashboard name has always made of these two
KEY_LIMIT = 250  # MLflow's longest parameter or metric name


def dashboard_key(name: str) -> str:
    """A name every dashboard takes as a parameter or metric key, made from any text (a swept value may hold ``../``,
    ``|``, spaces or any script): MLflow allows letters of any script, digits, ``_ - . : /`` and space, refuses a name
    that is not one plain path (``a/../b``, ``./a``, ``a//b``, a leading or trailing ``/``) or is over 250
    characters; W&B and TensorBoard take what MLflow takes. ``@`` becomes ``:`` and ``=`` ``_``, as always; where
    anything else had to change, a short hash of the whole name is added, so that two names never meet that way
    (`dashboard_keys` also parts any two that do).

    >>> dashboard_key("stage@sft"), dashboard_key("verdict/w_shape=0.6/heldout/total")
    ('stage:sft', 'verdict/w_shape_0.6/heldout/total')
    >>> dashboard_key("verdict/note=Κεραμεικός/heldout/total")
    'verdict/note_Κεραμεικός/heldout/total'
    >>> dashboard_key("verdict/note=../x/total"), dashboard_key("verdict/note=a|b/total"), dashboard_key("../x")
    ('verdict/note_../x/total', 'verdict/note_a_b/total-b475c058', '__/x-d6b96a97')
    """
    plain = name.translate(_CONVENTIONAL)
    safe = _PARAM_UNSAFE.sub("_", plain)
    # one plain path: no empty segment, none of dots alone, none that opens with two dots (a path that climbs)
    safe = "/".join(_segment(seg) for seg in safe.split("/"))
    if safe == plain and len(safe) <= KEY_LIMIT:
        return safe
    tag = "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return safe[: KEY_LIMIT - len(tag)].rstrip("/") + tag


def _segment(seg: str) -> str:
    """
    >>> [_segment(s) for s in ("", ".", "..", "..x", "a..b", "note_..")]
    ['_', '_', '__', '_.x', 'a..b', 'note_..']
    """
    if not seg.strip("."):
        return "_" * max(1, len(seg))
    return "_" + seg[1:] if seg.startswith("..") else seg


def dashboard_keys(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with each name made a `dashboard_key`, every one distinct: two names that would meet (``a=b`` and
    ``a_b``) are each given a hash of their own text."""
    keys = {name: dashboard_key(name) for name in values}
    met = {k for k in keys.values() if list(keys.values()).count(k) > 1}
    return {(f"{k[: KEY_LIMIT - 9]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}" if k in met else k): values[name]
            for name, k in keys.items()}


def link_name(text: str, limit: int = 120) -> str:
    """A folder or link name that shows ``text`` as written where a file name can (any script, ``=``, spaces): ``/``,
    a control character or a leading dot becomes ``_``, and a longer name keeps its start and a hash of the whole.

    >>> link_name("note=Κεραμεικός"), link_name("note=../x"), link_name("a|b c")
    ('note=Κεραμεικός', 'note=.._x', 'a|b c')
    """
    name = re.sub(r"[/\x00-\x1f\x7f]", "_", text) or "_"
    if name.startswith("."):
        name = "_" + name[1:]
    if len(name) > limit:
        name = name[: limit - 9] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return name


def param_value(text: str) -> Any:
    """An override's value as the number or flag it spells (dashboards sort and plot numbers), else the text."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def readable(value: Any) -> float:
    """A derived number (a normalised reward weight) at the precision a person reads in a dashboard's column: four
    significant digits (``0.09411764705882353`` -> ``0.09412``); the run's config file keeps the whole value.

    >>> readable(0.09411764705882353), readable(0.6), readable(12.0)
    (0.09412, 0.6, 12.0)
    """
    return float(f"{float(value):.4g}")


def swept_param(key: str, hypothesis: Any = None) -> str:
    """A swept key as a dashboard parameter: ``sweep/<key>``, or ``sweep_replicate/<key>`` for a key the hypothesis
    repeats its comparison over (a seed, a data draw). MLflow's comparison page plots the first three parameters that
    differ between the runs in the order of their names, so the compared key's axis comes before a seed's.

    >>> swept_param("stage.module.beta", {"replicates": ["seed"]}), swept_param("seed", {"replicates": ["seed"]})
    ('sweep/stage.module.beta', 'sweep_replicate/seed')
    >>> sorted(["sweep_replicate/seed", "sweep/stage.module.beta"])[0]  # as MLflow orders its first plot's axes
    'sweep/stage.module.beta'
    """
    replicates = list((hypothesis or {}).get("replicates") or [])
    return f"{'sweep_replicate' if key in replicates else 'sweep'}/{dashboard_key(key)}"


def run_params(cfg: DictConfig, overrides: list[str] | None = None, swept: list[str] | None = None) -> dict[str, Any]:
    """What a dashboard compares runs by, in this order: the keys the sweep varies (``sweep/<key>``), the run's other
    overrides (``override/<key>``), each reward term's weight as the reward uses it (``weights/<term>``: a dimension's
    after ``reward.normalize_weights``) and a few settings that say what the run is (``IDENTITY``). Paths, times and
    hashes are not here (they are tags, and the full config is a file of the run): two jobs of a sweep differ in
    these only where the sweep made them differ. A setting given on the command line is not repeated among the
    ``IDENTITY`` ones (``sweep_replicate/seed`` and no ``seed``).

    ``overrides`` and ``swept`` default to the running job's (its command line, and the keys its sweep varies).

    >>> from omegaconf import OmegaConf
    >>> cfg = OmegaConf.create({"stage": {"name": "grpo"}, "seed": 1, "reward": {"tau": 0.7,
    ...     "effective_weights": {"shape": 0.6}, "terms": {"bonus": {"weight": 0.1}}}})
    >>> run_params(cfg, ["reward.weights.shape=0.6", "seed=1", "paths.log_dir=/x"], ["reward.weights.shape"])
    {'sweep/reward.weights.shape': 0.6, 'override/seed': 1, 'weights/shape': 0.6, 'weights/bonus': 0.1, 'stage': 'grpo', 'reward.tau': 0.7}
    >>> cfg.reward.effective_weights.shape = 0.09411764705882353  # a dimension's weight after normalize_weights
    >>> run_params(cfg, [], [])["weights/shape"]
    0.09412
    """
    swept = swept_keys() if swept is None else swept
    given: dict[str, Any] = {}
    for o in job_overrides() if overrides is None else overrides:
        key, _, value = o.partition("=")
        key = key.lstrip("+~")
        if not key.startswith(_NOT_PARAMS):
            given[key] = param_value(value)
    swept = view_order([k for k in swept if k in given], OmegaConf.select(cfg, "hypothesis", default=None))
    # a name every dashboard takes (MLflow allows letters, digits and _ - . : / and space): stage@sft -> stage:sft
    given = {dashboard_key(k): v for k, v in given.items()}
    hypothesis = OmegaConf.select(cfg, "hypothesis", default=None)
    out = {swept_param(k, hypothesis): given[dashboard_key(k)] for k in swept if dashboard_key(k) in given}
    swept = [dashboard_key(k) for k in swept]
    out.update({f"override/{k}": v for k, v in given.items() if k not in swept})
    effective = OmegaConf.select(cfg, "reward.effective_weights", default=None) or {}
    out.update({f"weights/{k}": readable(v) for k, v in effective.items()})
    for name, term in (OmegaConf.select(cfg, "reward.terms", default=None) or {}).items():
        if isinstance(term, DictConfig) and name not in effective and f"weights/{term.get('dimension')}" not in out:
            out[f"weights/{name}"] = readable(term.get("weight", 1.0))
    for name, key in IDENTITY:
        v = OmegaConf.select(cfg, key, default=None)
        if isinstance(v, (int, float, str, bool)) and not {name, dashboard_key(key)} & set(given):  # no second copy
            out[name] = v
    return out


def log_config(loggers: list[Any], cfg: DictConfig, config_file: str | Path | None = None) -> None:
    """Each logger's parameters are `run_params` (what was swept, the effective reward weights, what the run is), not
    the config's hundreds of keys; the full resolved config travels as a file (``config_file``: a W&B run file, an
    MLflow artifact, a TensorBoard text panel). MLflow says where to open the run."""
    params = run_params(cfg)
    code = code_stamp()
    path = Path(config_file) if config_file is not None and Path(config_file).is_file() else None
    for lg in loggers:
        k = kind(lg)
        if k == "mlflow":  # the reward's weights as tags: derived from the swept key, they are no axis of the
            # comparison page's first plot (its first three differing parameters)
            lg.log_hyperparams({n: v for n, v in params.items() if not n.startswith("weights/")})
            for n, v in params.items():
                if n.startswith("weights/"):
                    lg.experiment.set_tag(lg.run_id, n, str(v))
        else:
            lg.log_hyperparams(params)
        log_code(lg, code)
        if path is None:
            continue
        if k == "wandb":  # as vase_config.yaml: W&B keeps its own run config in the run's config.yaml
            copy = Path(lg.experiment.dir) / "vase_config.yaml"
            atomic_write_text(copy, path.read_text())
            lg.experiment.save(str(copy), base_path=str(copy.parent), policy="now")
        elif k == "mlflow":
            lg.experiment.log_artifact(lg.run_id, str(path))
            lg.experiment.set_tag(lg.run_id, "vase.run_dir", str(path.parent))
            print(f"MLflow: {mlflow_link(str(lg._tracking_uri), lg.experiment_id, lg.run_id)}", flush=True)
        elif k == "tensorboard":
            lg.experiment.add_text("config", "    " + path.read_text().replace("\n", "\n    "), global_step=0)


def log_hypothesis_start(loggers: list[Any], keys: list[str]) -> None:
    """MLflow's comparison page plots the first metric a run logged (its store keeps a run's metrics in the order they
    came, and the page draws the first): when a job starts, before anything is measured, the comparison the verdict
    makes (``vs_baseline/<first move>``: at the start every job is the baseline's start, 0 apart; `start_comparison`)
    and each held-out change the sweep's hypothesis asks about (``hp/heldout/<dim>_vs_start``, ``keys`` in the
    hypothesis's order) are logged as 0. Their values at the sweep's end and the job's replace them, so that page plots
    the swept key against what the sweep asks, in the verdict's units. A measure with no value before training (a
    reward, a loss, KL) is not logged early. Only MLflow: TensorBoard and W&B take their columns from the hparams
    record and the run config."""
    start = {k: 0.0 for k in keys if k.endswith("_vs_start") or k.startswith("vs_baseline/")}
    for lg in loggers:
        if start and kind(lg) == "mlflow":
            lg.log_metrics(start, step=0)


TRAINING_KEYS = ("stage.", "reward.", "trainer.", "seed", "sft.")
"""Keys that change how a job trains, never the model it starts from."""


def start_comparison(hypothesis: dict[str, Any] | None) -> list[str]:
    """The verdict's comparison of a job with the baseline (``vs_baseline/<first move>``, its dashboard name), where
    it is known to be 0 when the job starts: the hypothesis compares a training setting (`TRAINING_KEYS`) against
    another value of it, so every job starts where the baseline job starts; [] otherwise.

    >>> start_comparison({"compare": ["stage.module.beta"], "baseline": 0.001, "moves": ["heldout/total", "kl"]})
    ['vs_baseline/heldout/total']
    >>> start_comparison({"compare": ["model.name_or_path"], "baseline": "a", "moves": ["heldout/total"]})
    []
    """
    q = hypothesis or {}
    moves, compare = list(q.get("moves") or []), list(q.get("compare") or [])
    if not moves or not compare or q.get("baseline") in (None, "start") or not moves[0].startswith("heldout/") \
            or not all(k.startswith(TRAINING_KEYS) for k in compare):
        return []
    return [dashboard_key(f"vs_baseline/{moves[0]}")]


def log_code(lg: Any, code: dict[str, Any]) -> None:
    """The code that made the run (`vase.provenance.code_stamp`) beside its parameters, where each dashboard keeps such
    things without making them a comparison column: W&B's run config (``code``), MLflow's tags (``vase.code.*``),
    a TensorBoard text panel (``code``), the CSV logger's hparams."""
    k = kind(lg)
    if k == "wandb":
        lg.experiment.config.update({"code": code}, allow_val_change=True)
    elif k == "mlflow":
        for name, value in code.items():
            if value is not None:
                lg.experiment.set_tag(lg.run_id, f"vase.code.{name}", str(value))
    elif k == "tensorboard":
        lg.experiment.add_text("code", "    " + "\n    ".join(f"{n}: {v}" for n, v in code.items()), global_step=0)
    else:
        lg.log_hyperparams({f"code/{n}": v for n, v in code.items() if v is not None})


def mlflow_link(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """Where MLflow's UI shows an experiment's runs (or one run): the server's page, or for a local store the command
    that serves it and the page to open."""
    page = f"#/experiments/{experiment_id}/runs" + (f"/{run_id}" if run_id else "")
    if urlparse(tracking_uri).scheme in ("http", "https"):
        return f"{tracking_uri.rstrip('/')}/{page}"
    return f"mlflow ui --backend-store-uri {shown_store(tracking_uri)}, then http://127.0.0.1:5000/{page}"


def log_end_metrics(loggers: list[Any], cfg: DictConfig, metrics: dict[str, float],
                    shown: list[str] | None = None) -> None:
    """The run's end metrics (``hp/*``: the last model's caption scores, GRPO's reward over its last steps, the
    held-out verdict per dimension against the start): plain metrics everywhere, and TensorBoard's hparams view row
    for this run, whose metric columns are ``shown`` (default: all) and whose parameter columns start with the
    swept keys (and the reward weights they move), so the jobs of a sweep compare in one table."""
    metrics = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if not metrics:
        return
    for lg in loggers:
        lg.log_metrics(metrics)
        if kind(lg) == "tensorboard":
            _tensorboard_hparams(lg, run_params(cfg), {k: metrics[k] for k in (shown or metrics) if k in metrics})


def _tensorboard_hparams(lg: Any, params: dict[str, Any], metrics: dict[str, float]) -> None:
    """TensorBoard's hparams records for this run: the session (this run's values) and, for a single run, the
    experiment (its columns, every parameter of `run_params`). A job of a sweep writes no experiment: TensorBoard keeps
    the first one a run holds, and the sweep's end writes it for every job at once (`vase.tensorboard_sweep.tensorboard_sweep_columns`), with
    the hypothesis's comparison as its first metrics and the swept keys alone as its columns."""
    # lazy: torch's TensorBoard summaries (torch): only runs with logger=tensorboard need them
    from torch.utils.tensorboard.summary import hparams

    if not metrics:
        return
    # a replicate's value too (sweep_replicate/seed): a session without a value of a column draws no line in
    # TensorBoard's parallel coordinates (empty for every sweep with seeds, 2026-12-07)
    swept = {k: v for k, v in params.items() if k.startswith(("sweep/", "sweep_replicate/"))}
    exp, ssi, sei = hparams(swept or params, metrics)
    writer = lg.experiment._get_file_writer()
    for summary in (ssi, sei) if swept else (exp, ssi, sei):
        writer.add_summary(summary)
    lg.experiment.flush()


def check_loggers(cfg: DictConfig) -> None:
    """Before any model loads: each logger's store answers. MLflow against a server: one fast probe (a server that
    does not answer is one line within seconds, not minutes of retries after the model loaded); MLflow's local SQLite
    store: created, migrated and given its experiment once, under a lock (runs started together would otherwise race
    the schema migration and break the store), and a store that cannot be opened is named in one line with what to
    do."""
    check_logger_dirs(cfg)
    node = OmegaConf.select(cfg, "logger.mlflow", default=None)
    if isinstance(node, DictConfig) and "_target_" in node:
        prepare_mlflow(str(node.tracking_uri), str(node.experiment_name), node.get("artifact_location"))
        # MLflow's own "View experiment at" link opens MLflow 3's GenAI overview; vase prints links to the runs
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


def check_logger_dirs(cfg: DictConfig) -> None:
    """A logger's ``save_dir`` that is a file (a user's notes, a typo): one line naming the key, before any model
    loads."""
    for name, lg in (cfg.get("logger") or {}).items():
        where = lg.get("save_dir") if isinstance(lg, DictConfig) else None
        if where is not None and Path(str(where)).exists() and not Path(str(where)).is_dir():
            raise ConfigError(f"logger.{name}.save_dir={str(where)!r} is a file; the logger writes a folder there: "
                              f"give a folder (or leave it: the run's own folder)")


def log_eval_rows(loggers: list[Any], name: str, scores: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    for lg in loggers:
        lg.log_metrics({f"val/{name}/{k}": float(v) for k, v in scores.items() if isinstance(v, (int, float))})
    log_table(loggers, f"val/{name}/captions", ["id", "generated", "reference"],
              [[r["id"], r["caption"], r["reference"]] for r in rows[:64]])


def log_results_table(loggers: list[Any], results: dict[str, dict[str, Any]]) -> None:
    """The evaluation table (paper's column order) in every dashboard, so runs compare side by side."""
    keys = [k for k, _ in table_columns({k for row in results.values() for k in row})] + ["n_pairs"]
    log_table(loggers, "val/table", ["model", *keys], [[name, *[row.get(k) for k in keys]] for name, row in results.items()])
