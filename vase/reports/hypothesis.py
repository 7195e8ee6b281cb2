"""A sweep's hypothesis: the ``hypothesis:`` block's fields and their checks (at the sweep's start, before any job),
the measures a run takes that it may name (``moves``), and the report kinds it may ask for (`REPORT_KINDS`). What
the block means and how its answer is made: `vase.reports.verdict`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from vase.config.entry_actions import REGISTERS
from vase.config.renames import deprecation, say_deprecated
from vase.errors import ConfigError
from vase.metrics.registry import CAPTION_METRICS, extra_metrics, paired_keys
from vase.reports.jobs import (
    job_dirs,
)
from vase.reports.verdict_stats import MIN_REPLICATES, same_setting

TRAINING_MOVES = ("kl", "reward", "loss", "frac_reward_zero_std", "reward_std_in_group", "frac_sum_ties_terms_differ")
"""What a job's training history holds per step that a hypothesis may ask about (``reward/<term>`` and
``reward_spread/<term>`` too)."""


MOVES_HELP = ("heldout/total, heldout/<dim>_right (share right), heldout/<term> (a term's value), "
              + ", ".join(TRAINING_MOVES) + ", reward/<term>, reward_spread/<term>")


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
                same_setting(f"k={v}", f"k={q['baseline']}") for v in given):
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


def sweep_hypothesis(sweep_dir: str | Path) -> dict[str, Any] | None:
    """The hypothesis a sweep's jobs were run with (their ``.hydra/config.yaml``); None when none has one."""
    for j in job_dirs(Path(sweep_dir)):
        if (j / ".hydra" / "config.yaml").is_file():
            return hypothesis_of(OmegaConf.load(j / ".hydra" / "config.yaml"))
    return None
