"""Any sweep's hypothesis, answered: a sweep names what it compares in a ``hypothesis:`` block (in its sweep file, or
``+hypothesis.compare=...`` on the command line) and its end writes ``verdict.md`` / ``verdict.json``: a verdict line
first, then, for each thing the hypothesis says the key should move, the difference from the baseline per replicate
and pooled over replicates, with paired 95 % intervals.

    hypothesis:
      compare: stage.module.beta      # the swept key (or a list of keys) whose values are compared
      baseline: 0.0                   # the value the others are compared with
      moves: [heldout/total, kl, heldout/shape_right]   # what it should move (MOVES); the first decides
      replicates: [seed]              # swept keys whose values are repeats of one comparison, not settings

How the numbers are made:

- a held-out measure (``heldout/...``, each job's ``heldout_reward.json``: ``val.heldout=true``) is paired over
  the same held-out vases: a job at a compared value against the job at the baseline with the same replicate values;
  pooled over replicates, every vase's difference of every replicate is resampled within its replicate (a stratified
  bootstrap over vases, 2,000 draws), so a seed is one more draw of the same comparison and never a setting;
- a training measure (``kl``, ``reward``, ``loss``, ``reward/<term>``: the mean of a job's last 20 steps) has one
  number per job: its difference is paired over replicates, and its interval is a bootstrap over replicates when there
  are at least three (with fewer, the report says there is none);
- any other swept key (neither compared nor a replicate) keeps its jobs apart: each of its settings gets its own
  verdict, and no verdict pools jobs of different settings.

A verdict says ``up`` or ``down`` where the interval excludes 0, and ``no clear change`` where it holds 0.

A hypothesis may also name a ``report:`` kind (`REPORT_KINDS`) that writes more beside verdict.md: ``ablation`` (a
reward weight's or tau's targets (i)-(iii), its dose-response and plot: ablation.md) and ``idea`` (a beyond-the-paper
idea with against without it on its target dimensions: compare.md, where ``label`` names the idea and ``within`` a
second held-out result its own jobs write). `decide_sweep` is the one path a sweep's end takes to all of them.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, ListConfig, OmegaConf

from vase import markdown as md
from vase.config.entry_actions import REGISTERS, load_plugins
from vase.config.renames import deprecation, say_deprecated
from vase.errors import ConfigError
from vase.eval.stats import bootstrap_ci
from vase.io import atomic_write_json, read_json, write_markdown
from vase.metrics.registry import CAPTION_METRICS, extra_metrics, is_percent, paired_keys
from vase.reports.jobs import (
    LAST_STEPS,
    code_lines,
    code_of_jobs,
    heldout_of,
    job_dirs,
    last_history,
    machines_of_jobs,
    overrides_of,
)
from vase.runs import machine_stamp, project_conf_of, status_of

TRAINING_MOVES = ("kl", "reward", "loss", "frac_reward_zero_std", "reward_std_in_group", "frac_sum_ties_terms_differ")
"""What a job's training history holds per step that a hypothesis may ask about (``reward/<term>`` and
``reward_spread/<term>`` too)."""
MOVES_HELP = ("heldout/total, heldout/<dim>_right (share right), heldout/<term> (a term's value), "
              + ", ".join(TRAINING_MOVES) + ", reward/<term>, reward_spread/<term>")
N_BOOT = 2000
MIN_REPLICATES = 3
"""A training measure (one number a job) gets an interval from this many replicates up (a bootstrap over them)."""


FIELDS = ("compare", "baseline", "moves", "replicates", "report", "label", "within")
START = "start"  # a baseline that is each job's own start (the SFT it began from), not a swept value


@dataclass(frozen=True)
class ReportKind:
    """What a hypothesis's ``report:`` kind writes beside verdict.md, and how (``write`` as ``"module:function"``,
    imported when a sweep ends, called with the sweep's folder and its hypothesis: a dict with ``lines``, the verdict
    lines printed at the sweep's end, and ``files``, the files it wrote, or None when it had nothing to decide on).
    ``verdict_first``: vase writes verdict.md and verdict.json (the ``verdict`` kind) before ``write`` is called, so
    that it can read them (`read_verdict`), and prints their lines before the kind's; False for a kind that writes
    verdict.md itself (vase's own)."""

    help: str
    write: str
    check: Callable[[dict[str, Any]], None] | None = None  # at the sweep's start: ConfigError naming the key
    verdict_first: bool = True


def _check_ablation(q: dict[str, Any]) -> None:
    key = q["compare"][0]
    if len(q["compare"]) != 1 or not (key.startswith("reward.weights.") or key == "reward.tau"):
        raise ConfigError(f"hypothesis.report: ablation decides one reward weight (reward.weights.<dim>) or reward.tau; "
                          f"this hypothesis compares {', '.join(q['compare'])} (report: verdict answers any key)")


def _check_idea(q: dict[str, Any]) -> None:
    if len(q["compare"]) != 1:
        raise ConfigError(f"hypothesis.report: idea compares one switch; this hypothesis compares {', '.join(q['compare'])}")
    bad = [m for m in q["moves"] if not m.startswith("heldout/")]
    if bad:
        raise ConfigError(f"hypothesis.moves: {bad[0]!r}: an idea is judged on held-out answers (heldout/<dim>_right, "
                          f"heldout/mean_right, heldout/<term>)")


PAIRED_CAPTION_METRICS = paired_keys(CAPTION_METRICS)
"""Every caption metric a held-out comparison can pair (an extra one where the run's ``metrics.extra`` names it)."""


def _check_search(q: dict[str, Any]) -> None:
    bad = [m for m in q["moves"] if not (m.startswith("heldout/") and m.split("/", 1)[1] in PAIRED_CAPTION_METRICS)]
    if bad or q["baseline"] != START:
        raise ConfigError(f"hypothesis.moves: {bad[0]!r}: search_confirm judges the held-out captions against each "
                          f"job's start on the paper's caption metrics: heldout/<{'|'.join(PAIRED_CAPTION_METRICS)}>" if bad else
                          "hypothesis.baseline: search_confirm compares each job with its own start: baseline: start")


REPORT_KINDS: dict[str, ReportKind] = {
    "verdict": ReportKind("verdict.md: the compared key against its baseline on each move, per replicate and pooled",
                           "vase.reports.verdict:write_verdict", verdict_first=False),
    "ablation": ReportKind("ablation.md/json/png: a reward weight's or tau's held-out targets (i)-(iii), its "
                           "dose-response and plot, with verdict.md pooling the seeds",
                           "vase.reports.ablation:write_ablation_verdict", _check_ablation, verdict_first=False),
    "idea": ReportKind("compare.md/json: a beyond-the-paper idea with against without it on its target dimensions, "
                       "every draw and seed, with verdict.md pooling them", "vase.reports.compare:write_idea_verdict",
                       _check_idea, verdict_first=False),
    "search_confirm": ReportKind("search_confirm.md/json/png: the search's best settings re-run on vases and data "
                                 "draws it never saw, the search's estimate beside the confirmed one, and whether "
                                 "any held the claim on every confirmation draw",
                                 "vase.reports.search_confirm:write_search_verdict", _check_search,
                                 verdict_first=False),
}
"""Every report a sweep's hypothesis can ask for, by its ``report:`` name (``verdict`` when it names none)."""


def register_report_kind(name: str, kind: ReportKind) -> None:
    """Add a report kind (a package's own, from a module ``evaluate.py``/``train.py`` import); a name taken by another
    is a ConfigError."""
    if name in REPORT_KINDS and REPORT_KINDS[name] != kind:
        raise ConfigError(f"hypothesis.report: the report kind {name!r} is registered already")
    REPORT_KINDS[name] = kind


RENAMED_BLOCK = "question"
"""The block's name before vase 0.2 (`vase.config.renames.RENAMED`), read in a sweep folder made then."""
RENAMED_KINDS = {"question": "verdict"}
"""Report kinds renamed in 0.2, accepted until 0.3 with one deprecation line."""
def _block(config: Any, name: str) -> Any:
    return OmegaConf.select(config, name, default=None) if isinstance(config, DictConfig) else \
        (config or {}).get(name)


def read_verdict(sweep_dir: str | Path) -> dict[str, Any]:
    """A sweep's ``verdict.json`` ({} when it has none), its hypothesis under ``hypothesis``; a sweep folder made before
    vase 0.2 has ``question.json``, its hypothesis under ``question``."""
    for name, block in (("verdict.json", "hypothesis"), ("question.json", RENAMED_BLOCK)):
        path = Path(sweep_dir) / name
        if path.is_file():
            found = read_json(path)
            found.setdefault("hypothesis", found.pop(block, None))
            return found
    return {}


def hypothesis_of(config: Any) -> dict[str, Any] | None:
    """The normalised ``hypothesis:`` block of a config (None when it has none); ConfigError naming the key for a block
    that is not one."""
    node = _block(config, "hypothesis")
    if node is None:  # a job's config saved before vase 0.2 (its own run said the deprecation line)
        node = _block(config, RENAMED_BLOCK)
    if node is None:
        return None
    q = OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node
    if not isinstance(q, dict) or not q.get("compare"):
        raise ConfigError("hypothesis: give at least hypothesis.compare (the swept key whose values are compared)")
    unknown = sorted(set(q) - set(FIELDS))
    if unknown:
        raise ConfigError(f"hypothesis.{unknown[0]}: no such field; a hypothesis has {', '.join(FIELDS)}")
    compare = [str(k) for k in _listed(q["compare"])]
    if q.get("moves") is not None and not _listed(q["moves"]):
        raise ConfigError(f"hypothesis.moves: [] names nothing to decide on; name at least one ({MOVES_HELP}), or leave "
                          f"moves out for heldout/total")
    moves = [str(m) for m in _listed(q.get("moves") or ["heldout/total"])]
    for m in moves:
        if not _known_move(m):
            raise ConfigError(f"hypothesis.moves: {m!r} is not something vase measures; choose from {MOVES_HELP}")
    report = str(q.get("report") or "verdict")
    if report in RENAMED_KINDS:
        say_deprecated(deprecation(f"hypothesis.report: {report}", f"hypothesis.report: {RENAMED_KINDS[report]}"))
        report = RENAMED_KINDS[report]
    if report not in REPORT_KINDS:
        raise ConfigError(f"hypothesis.report: {report!r} is no report kind; choose from {', '.join(REPORT_KINDS)}, "
                          f"or, for a kind of your own, {REGISTERS} (register_report_kind)")
    out = {"compare": compare, "baseline": None if q.get("baseline") is None else str(q["baseline"]),
           "moves": moves, "replicates": [str(k) for k in _listed(q.get("replicates") or ["seed"])],
           "report": report, "label": q.get("label"), "within": q.get("within")}
    if REPORT_KINDS[report].check is not None:
        REPORT_KINDS[report].check(out)
    return out


def hypothesis(**fields: Any) -> dict[str, Any]:
    """A hypothesis from its fields, checked as a sweep file's block is (``hypothesis(compare="reward.tau",
    report="ablation")``)."""
    q = hypothesis_of({"hypothesis": fields})
    assert q is not None
    return q


def _listed(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _known_move(m: str) -> bool:
    """
    >>> [_known_move(m) for m in ("kl", "heldout/total", "heldout/shape_right", "reward/bonus", "speed")]
    [True, True, True, True, False]
    """
    return m in TRAINING_MOVES or m.startswith(("heldout/", "reward/", "reward_spread/")) and len(m.split("/", 1)[1]) > 0


def check_hypothesis(q: dict[str, Any], swept: Iterable[str], named: Iterable[str] = (),
                   values: dict[str, list[str] | None] | None = None, terms: Any = None,
                   captions: Iterable[str] | None = None) -> None:
    """At a sweep's start, before any job: the compared keys are swept (one line naming the key otherwise); the
    baseline is one of the values the sweep gives each compared key (``values``, `sweep_values_of`; a key searched
    over an interval is not listed, so not checked); each move is something the run measures (``terms``: the reward's
    ``reward.terms``, whose names and dimensions the held-out and reward moves name). A hypothesis whose baseline
    is each job's own start (``baseline: start``) compares within each job, so its key need only be ``named`` by the
    sweep (one value given on the command line or in ``hydra.sweeper.params``), for the comparison to find the idea's
    jobs."""
    swept, named = list(swept), set(named)
    for key in q["compare"]:
        if key not in swept and not (q["baseline"] == START and key in named):
            raise ConfigError(f"hypothesis.compare: {key} is not swept by this sweep (it varies {', '.join(swept) or 'nothing'});"
                              f" sweep it (hydra.sweeper.params or {key}=a,b on the command line) or compare another key")
        given = (values or {}).get(key)
        if q["baseline"] not in (None, START) and given is not None and not any(
                _same_setting(f"k={v}", f"k={q['baseline']}") for v in given):
            raise ConfigError(f"hypothesis.baseline: {q['baseline']} is not among the values this sweep gives {key} "
                              f"({', '.join(given)}), so no job would run it and no verdict could come; set "
                              f"hypothesis.baseline to one of them, or add it to the sweep")
    captions = PAIRED_CAPTION_METRICS if captions is None else tuple(captions)
    if isinstance(terms, dict) and terms:
        dims = _dimensions(terms)
        for move in q["moves"]:
            if not _measured(move, terms, captions):
                raise ConfigError(f"hypothesis.moves: {move!r} is nothing this run measures; choose from heldout/total, "
                                  f"heldout/mean_right, heldout/<dim>_right ({', '.join(dims) or 'no dimension term'}),"
                                  f" heldout/<term>, reward/<term> or reward_spread/<term> ({', '.join(terms)}), "
                                  f"heldout/<caption metric> ({', '.join(captions)}; another with metrics.extra), "
                                  f"{', '.join(TRAINING_MOVES)}")


def measured_moves(terms: dict[str, Any], captions: Iterable[str] = PAIRED_CAPTION_METRICS) -> list[str]:
    """The moves a run whose reward has ``terms`` (``reward.terms``: name -> its config) measures; ``captions``: the
    per-vase caption metrics it scores (`caption_moves`: the registry's and its ``metrics.extra``)."""
    return (["heldout/total", "heldout/mean_right", *[f"heldout/{d}_right" for d in _dimensions(terms)],
             *[f"heldout/{n}" for n in terms], *[f"heldout/{m}" for m in captions], *TRAINING_MOVES,
             *[f"reward/{n}" for n in terms], *[f"reward_spread/{n}" for n in terms]])


def caption_moves(extra: Iterable[str] | None) -> tuple[str, ...]:
    """The per-vase caption metrics a run scores whose ``metrics.extra`` is ``extra``: the registry's, and the
    user's own (``mypkg.metrics:MINE``, imported here: ConfigError naming it when it does not)."""
    return paired_keys(dict.fromkeys([*CAPTION_METRICS, *(m.key for m in extra_metrics(extra))]))


def _dimensions(terms: dict[str, Any]) -> list[str]:
    """The dimensions the reward's ``terms`` score (a dimension term's ``dimension``)."""
    return [str(t.get("dimension")) for t in terms.values() if isinstance(t, dict) and t.get("dimension")]


def _measured(move: str, terms: dict[str, Any], captions: Iterable[str] = PAIRED_CAPTION_METRICS) -> bool:
    """Whether a run with these reward ``terms`` measures ``move`` (a term's further parts, ``<term>_<part>``, too).

    >>> terms = {"shape": {"dimension": "shape"}, "inverse": {}}
    >>> [_measured(m, terms) for m in ("heldout/shape_right", "heldout/inverse_shape", "reward/shape", "heldout/colour",
    ...                                "reward_spread/inverse", "heldout/clip_score", "kl", "reward/colour_right")]
    [True, True, True, False, True, True, True, False]
    """
    if move in measured_moves(terms, captions):
        return True
    kind, _, name = move.partition("/")
    return kind in ("heldout", "reward") and any(name.startswith(f"{n}_") for n in terms)


def notice(q: dict[str, Any], heldout: bool = True, replicates: int | None = None) -> str:
    """What a sweep with a hypothesis says when it starts (``heldout``: whether its jobs answer the held-out vases;
    ``replicates``: how many replicates each setting gets, where the sweep lists them). A first measure that cannot
    get an interval (a training measure, one number a job, on fewer than `MIN_REPLICATES` replicates) is said here,
    before any job runs, not first in the verdict at the end."""
    base = (" against each job's own start" if q["baseline"] == START else
            f" against {q['baseline']}" if q["baseline"] is not None else " against its first value")
    kind = q["report"]
    line = (f"hypothesis: this sweep compares {', '.join(q['compare'])}{base} on {', '.join(q['moves'])} "
            f"(replicates: {', '.join(q['replicates'])}); at its end "
            + ("verdict.md gives the verdict" if kind == "verdict" else REPORT_KINDS[kind].help))
    first = q["moves"][0]
    if not first.startswith("heldout/") and replicates is not None and replicates < MIN_REPLICATES:
        line += (f" - but its first measure, {first}, is one number a job: on {replicates} replicate(s) it gets no "
                 f"interval ({MIN_REPLICATES} needed), so its verdict cannot be decided; lead hypothesis.moves with a "
                 f"heldout/ measure (paired over the held-out vases) or give {', '.join(q['replicates'])} "
                 f"{MIN_REPLICATES} values")
    if not heldout and (kind != "verdict" or any(m.startswith("heldout/") for m in q["moves"])):
        line += (" - but val.heldout is off, so no held-out measure will be there to decide on: add "
                 "val.heldout=true (each job answers the validation vases; about 13 s a job on the tiny model)")
    return line


def _value_of(job: Path, move: str) -> tuple[dict[str, float] | None, float | None]:
    """A job's measure: per held-out vase (``heldout/...``), or one number (training's last steps)."""
    if move.startswith("heldout/"):
        held, _ = heldout_of(job)
        if not held:
            return None, None
        name = move.split("/", 1)[1]
        if name == "mean_right":  # per answer, the mean over the dimensions it was scored on of whether they passed
            per = {i: float(np.mean(p)) for i, v in held.get("items", {}).items()
                   if (p := [x for k, x in v.items() if k.endswith("_pass")])}
            return (per or None), None
        dim = name[:-6]  # a dimension's term may have its own name (the paper's terms: reward.terms.<name>.dimension)
        field = f"{held.get('term_of_dimension', {}).get(dim, dim)}_pass" if name.endswith("_right") else name
        per = {i: float(v[field]) for i, v in held.get("items", {}).items() if field in v}
        if not per:  # a caption metric: each held-out caption's term (`vase.metrics.paired.caption_terms`)
            per = {i: float(x) for i, x in (held.get("caption_terms") or {}).get(name, {}).items()}
        return (per or None), None
    _, rows = last_history(job)
    vals = [float(r[move]) for r in rows[-LAST_STEPS:] if isinstance(r.get(move), (int, float))]
    return None, (float(np.mean(vals)) if vals else None)


def _stratified(diffs: list[list[float]], seed: int = 0) -> tuple[float, float]:
    """The 95 % interval of the mean of every difference, resampling within each replicate."""
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(d, dtype=float) for d in diffs if d]
    n = sum(len(a) for a in arrays)
    if n < 2:
        return float("nan"), float("nan")
    means = np.empty(N_BOOT)
    for b in range(N_BOOT):
        means[b] = sum(rng.choice(a, size=len(a), replace=True).sum() for a in arrays) / n
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _direction(d: dict[str, Any]) -> str:
    """
    >>> _direction({"lo": 0.1, "hi": 0.3}), _direction({"lo": -0.1, "hi": 0.3}), _direction({"lo": None, "hi": None, "diff": -1})
    ('up', 'no clear change', 'down, with no interval to tell it from noise')
    """
    lo, hi = d.get("lo"), d.get("hi")
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        diff = d.get("diff")
        if diff is None or diff == 0:
            return "no change"
        return f"{'up' if diff > 0 else 'down'}, with no interval to tell it from noise"
    return "up" if lo > 0 else "down" if hi < 0 else "no clear change"


def _compare(move: str, base: dict[str, Path], other: dict[str, Path],
             value: Callable[[Path, str], tuple[dict[str, float] | None, float | None]] = _value_of) -> dict[str, Any]:
    """``other`` against ``base`` on one measure, per replicate (the jobs sharing replicate values) and pooled;
    ``value`` reads a job's measure (`_value_of`, or a report's cached copy of it)."""
    per: dict[str, Any] = {}
    diffs: list[list[float]] = []
    singles: list[float] = []
    for rep in sorted(set(base) & set(other)):
        a_items, a_val = value(other[rep], move)
        b_items, b_val = value(base[rep], move)
        if a_items is not None and b_items is not None:
            common = sorted(set(a_items) & set(b_items))
            d = [a_items[i] - b_items[i] for i in common]
            if not d:
                continue
            lo, hi = bootstrap_ci(d, N_BOOT, 0)
            per[rep] = {"diff": float(np.mean(d)), "lo": lo, "hi": hi, "n": len(d),
                        "base": float(np.mean([b_items[i] for i in common])),
                        "value": float(np.mean([a_items[i] for i in common]))}
            diffs.append(d)
        elif a_val is not None and b_val is not None:
            per[rep] = {"diff": a_val - b_val, "lo": None, "hi": None, "n": 1, "base": b_val, "value": a_val}
            singles.append(a_val - b_val)
    pooled: dict[str, Any] = {"diff": None, "lo": None, "hi": None, "n": 0, "replicates": len(per)}
    if diffs:
        flat = [x for d in diffs for x in d]
        lo, hi = _stratified(diffs)
        pooled.update(diff=float(np.mean(flat)), lo=lo, hi=hi, n=len(flat),
                      method="stratified bootstrap over held-out vases within each replicate")
    elif singles:
        pooled.update(diff=float(np.mean(singles)), n=len(singles), method="mean over replicates")
        if len(singles) >= MIN_REPLICATES:
            lo, hi = bootstrap_ci(singles, N_BOOT, 0)
            pooled.update(lo=lo, hi=hi, method="bootstrap over replicates")
    pooled["direction"] = _direction(pooled) if pooled["diff"] is not None else \
        "not measured (the jobs' results hold no such value)"
    return {"per_replicate": per, "pooled": pooled}


def _fmt(x: float | None, pct: bool) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:+.1f}" if pct else f"{x:+.3g}"  # 3 significant digits, as people read them


def _cell(d: dict[str, Any], pct: bool) -> str:
    if d.get("diff") is None:
        return "–"
    if d.get("lo") is None or (isinstance(d["lo"], float) and math.isnan(d["lo"])):
        reps = d.get("replicates")
        return f"{_fmt(d['diff'], pct)}" + (f" (no interval: {reps} replicate{'s' * (reps != 1)}, {MIN_REPLICATES} "
                                            f"needed)"
                                           if reps is not None else "")
    return f"{_fmt(d['diff'], pct)} [{_fmt(d['lo'], pct)}, {_fmt(d['hi'], pct)}]"


def _is_share(move: str) -> bool:
    """A share, said in points: a dimension right, or a caption metric shown in percent (R@k)."""
    return move.endswith("_right") or (move.startswith("heldout/") and is_percent(move.split("/", 1)[1]))


def _label(move: str) -> str:
    """
    >>> _label("heldout/shape_right"), _label("kl"), _label("heldout/total")
    ('held-out shape right, points', 'KL (last 20 steps)', 'held-out total reward')
    """
    if move.startswith("heldout/"):
        name = move.split("/", 1)[1]
        if name.endswith("_right"):
            return f"held-out {name[:-6]} right, points"
        return "held-out total reward" if name == "total" else f"held-out {name}"
    return {"kl": "KL", "reward": "training reward", "loss": "training loss"}.get(move, move) + \
        f" (last {LAST_STEPS} steps)"


def sweep_hypothesis(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The hypothesis a sweep's jobs were run with (their ``.hydra/config.yaml``); None when none has one."""
    for j in job_dirs(Path(sweep_dir)):
        if (j / ".hydra" / "config.yaml").is_file():
            return hypothesis_of(OmegaConf.load(j / ".hydra" / "config.yaml"))
    return None


def decide_sweep(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The one path from a finished sweep to its answer: the hypothesis its jobs ran with, answered by its report kind.
    Returns ``{"report", "lines", "files"}`` (the verdict lines to print first, the files written), or None when the
    sweep has no hypothesis or nothing to decide on."""
    q = sweep_hypothesis(sweep_dir)
    if q is None:
        return None
    kind = REPORT_KINDS[q["report"]]
    pooled = write_verdict_report(sweep_dir, q) if kind.verdict_first else None
    module, _, name = kind.write.partition(":")
    got = getattr(importlib.import_module(module), name)(Path(sweep_dir), q)
    if kind.verdict_first and pooled is not None:  # verdict.md's lines and file first, then the kind's own
        got = {"lines": [*(pooled.get("lines") or []), *((got or {}).get("lines") or [])],
               "files": [Path(sweep_dir) / "verdict.md", *((got or {}).get("files") or [])]}
    return None if got is None else {"report": q["report"], **got}


def write_verdict(sweep_dir: Path, q: dict[str, Any]) -> dict[str, Any] | None:
    """The ``verdict`` kind: verdict.md alone."""
    return joined_verdict(sweep_dir, write_verdict_report(sweep_dir, q))


def joined_verdict(sweep_dir: Path, pooled: dict[str, Any] | None, lines: list[str] | None = None,
                  page: str | None = None) -> dict[str, Any] | None:
    """A report kind's answer: verdict.md's verdict lines (``pooled``, when it was written), then the kind's own
    ``lines`` and its ``page`` (a file beside it); None when neither was written."""
    if pooled is None and page is None:
        return None
    return {"lines": [*((pooled or {}).get("lines") or []), *(lines or [])],
            "files": [*([sweep_dir / "verdict.md"] if pooled is not None else []),
                      *([sweep_dir / page] if page is not None else [])]}


def write_verdict_report(sweep_dir: str | Path, q: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``verdict.md`` and ``verdict.json`` for a sweep over ``q`` (by default the hypothesis in its jobs' config);
    None when it has none (or no job finished). A baseline of ``start`` (each job against its own start) is no
    swept value: there is nothing to write here, the report kind compares each job with its start."""
    sweep_dir = Path(sweep_dir)
    jobs = job_dirs(sweep_dir)  # every folder with its .hydra/overrides.yaml
    if not jobs:
        return None
    q = q if q is not None else sweep_hypothesis(sweep_dir)
    if q is None or q["baseline"] == START:
        return None
    ov = {j: overrides_of(j) for j in jobs}
    swept = [k for k in sorted({k for o in ov.values() for k in o}) if len({o.get(k) for o in ov.values()}) > 1]
    apart = [k for k in swept if k not in q["compare"] and k not in q["replicates"]]

    def values(j: Path, keys: list[str]) -> str:
        return ", ".join(f"{k}={ov[j].get(k, '-')}" for k in keys)

    settings = sorted({values(j, q["compare"]) for j in jobs}, key=_sort_key)
    baseline = (", ".join(f"{k}={q['baseline']}" for k in q["compare"]) if q["baseline"] is not None
                else settings[0])
    found_base = [s for s in settings if _same_setting(s, baseline)]
    verdict: dict[str, Any] = {"hypothesis": q, "apart": apart, "baseline": baseline, "blocks": {}, "jobs": {},
                               "machine": machine_stamp(), "code": code_of_jobs(jobs),
                               "machines": machines_of_jobs(jobs)}
    value = functools.cache(_value_of)  # each job's files read once for this report, whatever it is compared with
    title = f"# Does `{', '.join(q['compare'])}` move {', '.join(_label(m) for m in q['moves'])}?"
    lines = [title, ""]
    head_code, tail_code = code_lines(verdict["code"], verdict["machines"])
    lines += head_code
    head: list[str] = []
    body: list[str] = []
    if not found_base:
        head.append(f"**No verdict**: no job ran the baseline {baseline} (the sweep ran {'; '.join(settings)}); "
                    f"set hypothesis.baseline to one of them.")
    blocks: dict[str, list[Path]] = {}
    for j in jobs:
        blocks.setdefault(values(j, apart) if apart else "", []).append(j)
    for block, members in sorted(blocks.items()):
        by_setting: dict[str, dict[str, Path]] = {}
        for j in members:
            by_setting.setdefault(values(j, q["compare"]), {})[values(j, q["replicates"]) or "-"] = j
        base = next((by_setting[s] for s in by_setting if _same_setting(s, baseline)), None)
        if base is None:
            continue
        where = f" ({block})" if block else ""
        for setting, runs in sorted(by_setting.items(), key=lambda kv: _sort_key(kv[0])):
            for rep, j in runs.items():  # where each job sits in the verdict: its own run shows its comparison
                verdict["jobs"][j.name] = {"block": block or "all", "setting": setting, "replicate": rep}
            if _same_setting(setting, baseline):
                continue
            found = {m: _compare(m, base, runs, value) for m in q["moves"]}
            verdict["blocks"].setdefault(block or "all", {})[setting] = found
            said = "; ".join(f"{_label(m)}: {r['pooled']['direction']}, {_cell(r['pooled'], _is_share(m))}"
                             for m, r in found.items())
            head.append(f"**{setting}{where} against {baseline}**: {said}.")
            body += [f"## {setting}{where} against {baseline}", "", *_measure_tables(found)]
    if not verdict["blocks"] and found_base:
        head.append("**No verdict**: no job at another value shares replicate values with a baseline job.")
    lines += head + [""]
    if apart:
        lines += [f"Kept apart (never pooled): {', '.join(apart)}.", ""]
    lines += body
    lines += ["How: a held-out measure is paired over the same held-out vases, per replicate; pooled, every vase's "
              "difference is resampled within its replicate (stratified bootstrap, 2,000 draws), so replicates "
              f"({', '.join(q['replicates'])}) are repeats of one comparison, not settings. A training measure has one "
              "number per job (its last 20 steps); its interval needs at least three replicates.", ""]
    lines += tail_code
    verdict["lines"] = head
    write_markdown(sweep_dir / "verdict.md", "\n".join(lines) + "\n")
    atomic_write_json(sweep_dir / "verdict.json", verdict)
    return verdict


def _measure_tables(found: dict[str, Any]) -> list[str]:
    """verdict.md's tables for one setting: per measure, each replicate's difference from the baseline, then the
    pooled one."""
    body: list[str] = []
    for m, r in found.items():
        pct = _is_share(m)
        scale = 100 if pct else 1
        p = r["pooled"]
        rows = [[rep, f"{scale * d['base']:.4g}", f"{scale * d['value']:.4g}", _cell(d, pct), d["n"]]
                for rep, d in r["per_replicate"].items()]
        rows.append([f"**pooled over {p['replicates']} replicate(s)**", "", "", f"**{_cell(p, pct)}**", p["n"]])
        body += [f"**{_label(m)}** ({r['pooled'].get('method', 'not measured')})", "",
                 *md.table(["replicate", "baseline", "this setting", "difference [95 % interval]", "n"], rows,
                           align="lrrlr"), ""]
    return body


def _same_setting(a: str, b: str) -> bool:
    """Whether two ``k=v, ...`` settings name the same values (``0`` and ``0.0`` are one number).

    >>> _same_setting("stage.module.beta=0", "stage.module.beta=0.0"), _same_setting("a=x", "a=y")
    (True, False)
    """
    def parts(s: str) -> list[tuple[str, Any]]:
        out = []
        for p in s.split(", "):
            k, _, v = p.partition("=")
            try:
                out.append((k, float(v)))
            except ValueError:
                out.append((k, v.lower()))
        return out

    return parts(a) == parts(b)


def _sort_key(setting: str) -> tuple[Any, ...]:
    out = []
    for p in setting.split(", "):
        v = p.partition("=")[2]
        try:
            out.append((0, float(v), ""))
        except ValueError:
            out.append((1, 0.0, v))
    return tuple(out)


def main(argv: list[str] | None = None) -> int:
    """``python -m vase.reports.verdict <sweep folder>``: (re)write a finished sweep's answer (verdict.md, and what
    its hypothesis's report kind writes beside it) from the hypothesis its jobs ran with, and print its verdict lines."""
    prog = sys.argv[0] if sys.argv[0].startswith("vase ") else "python -m vase.reports.verdict"  # as typed
    ap = argparse.ArgumentParser(prog=prog, description=main.__doc__.splitlines()[0])
    ap.add_argument("sweep", help="a sweep's folder (logs/train/multiruns/<time>)")
    args = ap.parse_args(argv)
    try:
        load_plugins(project_conf_of(args.sweep))  # its report kind may be a package's or the sweep's project's
        answer = decide_sweep(args.sweep)
    except (ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if answer is None:
        print(f"error: {args.sweep}: no job there has a hypothesis: block, or none finished with something to decide "
              f"on", file=sys.stderr)
        return 1
    print(verdict_text(answer))
    return 0


def verdict_metrics(verdict: dict[str, Any]) -> dict[str, float]:
    """verdict.json's pooled verdict as a dashboard's metrics: ``verdict/[<within>/]<setting>/<move>/effect``, ``low``
    and ``high`` (a share's in points, as verdict.md says them, to 3 significant digits); a value not measured is
    left out, never 0.0.

    >>> v = {"blocks": {"all": {"reward.weights.shape=0.6": {"heldout/shape_right": {"pooled": {
    ...     "diff": 0.171, "lo": 0.125, "hi": 0.217}}, "kl": {"pooled": {"diff": 0.01, "lo": None, "hi": None}}}}}}
    >>> {k: round(x, 2) for k, x in verdict_metrics(v).items()}  # doctest: +NORMALIZE_WHITESPACE
    {'verdict/reward.weights.shape=0.6/heldout/shape_right/effect': 17.1,
     'verdict/reward.weights.shape=0.6/heldout/shape_right/low': 12.5,
     'verdict/reward.weights.shape=0.6/heldout/shape_right/high': 21.7, 'verdict/reward.weights.shape=0.6/kl/effect': 0.01}
    """
    out: dict[str, float] = {}
    for within, settings in (verdict.get("blocks") or {}).items():
        for setting, moves in settings.items():
            head = "verdict/" + ("" if within == "all" else f"{within}/") + setting
            for move, found in moves.items():
                pooled, scale = found.get("pooled") or {}, 100.0 if _is_share(move) else 1.0
                for name, key in (("effect", "diff"), ("low", "lo"), ("high", "hi")):
                    x = pooled.get(key)
                    if isinstance(x, (int, float)) and not math.isnan(x):  # 3 significant digits, as the title
                        out[f"{head}/{move}/{name}"] = float(f"{scale * float(x):.3g}")
    return out


def job_comparison(verdict: dict[str, Any], job: str) -> dict[str, float]:
    """One job's own comparison with the baseline job of its replicate, as metrics its dashboard run can show:
    ``vs_baseline/<move>`` with ``_low`` and ``_high`` (a share's in points, as the title says it), to 3 significant
    digits, as people read them (MLflow shows a metric's every digit; verdict.json keeps them all); {} for a baseline
    job or a job the verdict does not hold.

    >>> v = {"jobs": {"1": {"block": "all", "setting": "w=0.6", "replicate": "seed=1"}}, "blocks": {"all": {"w=0.6": {
    ...     "heldout/shape_right": {"per_replicate": {"seed=1": {"diff": 0.2, "lo": 0.1, "hi": 0.3}}}}}}}
    >>> job_comparison(v, "1")
    {'vs_baseline/heldout/shape_right': 20.0, 'vs_baseline/heldout/shape_right_low': 10.0, 'vs_baseline/heldout/shape_right_high': 30.0}
    """
    where = (verdict.get("jobs") or {}).get(job)
    if not where:
        return {}
    found = ((verdict.get("blocks") or {}).get(where["block"]) or {}).get(where["setting"]) or {}
    return _comparison_metrics({m: (r.get("per_replicate") or {}).get(where["replicate"]) or {}
                                for m, r in found.items()})


def _comparison_metrics(per_move: dict[str, dict[str, Any]]) -> dict[str, float]:
    """``vs_baseline/<move>``, ``_low``, ``_high`` from each move's difference (``diff``, ``lo``, ``hi``), a share's in
    points, to 3 significant digits; a value not measured is left out, never 0.0."""
    out: dict[str, float] = {}
    for move, d in per_move.items():
        scale = 100.0 if _is_share(move) else 1.0
        for suffix, key in (("", "diff"), ("_low", "lo"), ("_high", "hi")):
            x = d.get(key)
            if isinstance(x, (int, float)) and not math.isnan(x):
                out[f"vs_baseline/{move}{suffix}"] = float(f"{scale * float(x):.3g}")
    return out


def comparison_at_job_end(sweep_dir: str | Path, job: str | Path, q: dict[str, Any] | None,
                          swept: Iterable[str]) -> dict[str, float]:
    """A sweep's job against the baseline job of its replicate, as it ends (the same numbers `job_comparison` reads
    from verdict.json at the sweep's end): found when the baseline job, the one whose every other swept value
    (``swept``: the keys the sweep varies) is this job's and whose compared value is the hypothesis's baseline, has
    finished before it, as in a sweep run one job after another with the baseline first in its grid. {} for a
    baseline job, a hypothesis without a swept baseline, or a baseline not finished yet (jobs run side by side): the
    sweep's end then adds it to the dashboards that can take it late (MLflow, TensorBoard). W&B can take it only here:
    an offline W&B run cannot be resumed to add it later."""
    job, sweep_dir = Path(job), Path(sweep_dir)
    if not q or q.get("baseline") in (None, START) or not (job / ".hydra" / "overrides.yaml").is_file():
        return {}  # no swept baseline, or a folder that is no job of a sweep (Hydra writes every job's overrides)
    mine = overrides_of(job)
    compared = list(q["compare"])
    others = [k for k in swept if k not in compared]
    baseline = ", ".join(f"{k}={q['baseline']}" for k in compared)
    if _same_setting(", ".join(f"{k}={mine.get(k, '-')}" for k in compared), baseline):
        return {}
    base = None
    for other in job_dirs(sweep_dir):
        if other.resolve() == job.resolve() or status_of(other) != "finished":
            continue
        theirs = overrides_of(other)
        if all(theirs.get(k) == mine.get(k) for k in others) and _same_setting(
                ", ".join(f"{k}={theirs.get(k, '-')}" for k in compared), baseline):
            base = other
            break
    if base is None:
        return {}
    return _comparison_metrics({m: (_compare(m, {"-": base}, {"-": job})["per_replicate"].get("-") or {})
                                for m in q["moves"]})


def short_verdict(verdict: dict[str, Any]) -> str:
    """The verdict in one short line, for a run's name: each setting against the baseline on the hypothesis's first
    measure (its change, interval and direction); "" when nothing was decided.

    >>> short_verdict({"hypothesis": {"moves": ["heldout/shape_right"]}, "baseline": "reward.weights.shape=0",
    ...   "blocks": {"all": {"reward.weights.shape=0.6": {"heldout/shape_right": {"pooled": {"diff": 0.171,
    ...   "lo": 0.125, "hi": 0.217, "direction": "up"}}}}}})
    'reward.weights.shape=0.6 vs 0: held-out shape right, points +17.1 [+12.5, +21.7] up'
    """
    moves = (verdict.get("hypothesis") or {}).get("moves") or []
    baseline = str(verdict.get("baseline") or "")
    said = []
    for within, settings in (verdict.get("blocks") or {}).items():
        for setting, found in settings.items():
            first = next((m for m in moves if m in found and (found[m].get("pooled") or {}).get("diff") is not None),
                         None)
            if first is None:
                continue
            p = found[first]["pooled"]
            base = baseline.partition("=")[2] if baseline.partition("=")[0] == setting.partition("=")[0] else baseline
            where = "" if within == "all" else f" ({within})"
            said.append(f"{setting}{where} vs {base or 'start'}: {_label(first)} {_cell(p, _is_share(first))} "
                        f"{p.get('direction', '')}".strip() + _the_rest(found, moves, first))
    return "; ".join(said)


def _the_rest(found: dict[str, Any], moves: list[str], first: str) -> str:
    """`` and N more: k up, m down, j unclear`` for the measures after the first, so a title holds the whole verdict.

    >>> found = {m: {"pooled": {"diff": 1, "direction": d}} for m, d in (("a", "up"), ("b", "up"), ("c", "down"),
    ...                                                                     ("d", "no clear change"))}
    >>> _the_rest(found, ["a", "b", "c", "d"], "a"), _the_rest(found, ["a"], "a")
    (' and 3 more: 1 up, 1 down, 1 unclear', '')
    """
    rest = [str(found[m]["pooled"].get("direction", "")) for m in moves
            if m != first and m in found and (found[m].get("pooled") or {}).get("diff") is not None]
    if not rest:
        return ""
    up = sum(d == "up" for d in rest)
    down = sum(d == "down" for d in rest)
    counts = [f"{n} {w}" for n, w in ((up, "up"), (down, "down"), (len(rest) - up - down, "unclear")) if n]
    return f" and {len(rest)} more: {', '.join(counts)}"


def verdict_table(verdict: dict[str, Any]) -> list[str]:
    """The verdict as a Markdown table, each setting against the baseline on each measure (its change, interval and
    direction): what a dashboard's description opens with. [] when nothing was decided."""
    moves = (verdict.get("hypothesis") or {}).get("moves") or []
    rows = []
    for within, settings in (verdict.get("blocks") or {}).items():
        for setting, found in settings.items():
            where = "" if within == "all" else f" ({within})"
            for m in moves:
                p = (found.get(m) or {}).get("pooled") or {}
                if p.get("diff") is not None:
                    rows.append([f"{setting}{where}", _label(m), _cell(p, _is_share(m)), p.get("direction")])
    if not rows:
        return []
    base = verdict.get("baseline") or "each job's start"
    return md.table([f"against {base}", "measure", "change [95 % interval]", "verdict"], rows)


def job_metric(move: str) -> str | None:
    """The end metric (``hp/...``) in which each job's dashboard run holds ``move``, where one does.

    >>> job_metric("heldout/shape_right"), job_metric("heldout/total"), job_metric("reward"), job_metric("kl")
    ('hp/heldout/shape_right', 'hp/heldout/reward', 'hp/train_reward_last20', None)
    """
    if move.startswith("heldout/"):
        name = move.split("/", 1)[1]
        return "hp/heldout/reward" if name == "total" else f"hp/heldout/{name}"
    return {"reward": "hp/train_reward_last20"}.get(move)


def hypothesis_columns(q: dict[str, Any] | None) -> list[str]:
    """The jobs' end metrics a hypothesis asks about, for a dashboard's first columns: the key's own reward dimension
    first (``reward.weights.shape`` asks about shape), then each measure of ``moves``, a held-out share's change from
    the start (``hp/heldout/<dim>_vs_start``) beside the share itself.

    >>> hypothesis_columns({"compare": ["reward.weights.shape"], "moves": ["heldout/fabric_right", "heldout/total"]})
    ['hp/heldout/shape_vs_start', 'hp/heldout/shape_right', 'hp/heldout/fabric_vs_start', 'hp/heldout/fabric_right', 'hp/heldout/reward']
    """
    if not q:
        return []
    own = [k.rsplit(".", 1)[-1] for k in q.get("compare") or [] if k.startswith("reward.weights.")]
    moves = [*(f"heldout/{d}_right" for d in own), *(q.get("moves") or [])]
    out: list[str] = []
    for m in moves:
        if m.startswith("heldout/") and m.endswith("_right"):
            out.append(f"hp/heldout/{m[8:-6]}_vs_start")
        if job_metric(m):
            out.append(job_metric(m))
    return list(dict.fromkeys(out))


def verdict_text(answer: dict[str, Any]) -> str:
    """What a sweep's end prints: its verdict lines (no markup), then where each file it wrote lies."""
    return "\n".join([*(line.replace("**", "") for line in answer["lines"]),
                      *(f"{Path(f).stem}: {f}" for f in answer["files"])])


if __name__ == "__main__":
    # the module vase and a plugin import (python -m runs a second copy, whose registries a plugin never reaches)
    from vase.reports import verdict

    sys.exit(verdict.main())
