"""The caption metrics, one entry each: the one list the scorer, the results table, the paired intervals, the loggers,
the question moves (``heldout/<metric>``), the glossary and the tests read.

An entry says what a metric is called (its results key and its column title), which way is better, whether it is shown
in percent, and whether it is a mean of per-vase terms (then every comparison of two runs on the same vases gets a
paired interval for it). The paper's metrics (the first eight) are computed together by `CaptionScorer` from one
encoding of each caption; a metric added here brings its own per-vase ``terms`` and is scored when a ``metrics`` config
names it under ``extra`` (``metrics.extra=[rouge_l]``), or always with ``default=True``. A metric of your own package:
``metrics.extra=[mypkg.metrics:MY_METRIC]`` (a `CaptionMetric` object), nothing in vase to edit.

This module imports no torch: the reports and the config check read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from vase.errors import ConfigError


@dataclass(frozen=True)
class CaptionMetric:
    """One caption metric.

    Attributes:
        key: its name in results files, dashboards and question moves (``heldout/<key>``).
        title: its column in the results table.
        meaning: its line in the glossary.
        column: where the results table shows it (sorted; the paper's Table 3 order first, gaps left for new ones).
        higher_is_better: its direction (FID: lower).
        percent: shown in percent (R@k) in tables and differences.
        paired: a mean of per-vase terms, so two runs on the same vases compare on a paired interval; False for a
            statistic of the whole set (FID: resampled instead) or one that needs more than the text (CLIP-I).
        terms: each vase's term from (generated captions, references), for a metric added here; None for the
            paper's metrics, which `CaptionScorer` computes together.
        default: scored by every run; False: only where ``metrics.extra`` names it.
    """

    key: str
    title: str
    meaning: str
    column: int
    higher_is_better: bool = True
    percent: bool = False
    paired: bool = True
    terms: Callable[[list[str], list[str]], np.ndarray] | None = None
    default: bool = True


def rouge_l_terms(preds: list[str], refs: list[str]) -> np.ndarray:
    """Each pair's ROUGE-L F-measure (torchmetrics' ``rouge_score``, no stemming): the longest common word
    subsequence of caption and reference, so word order counts, where the lexical similarity (a set overlap) does not.

    >>> rouge_l_terms(["a red vase with birds"], ["a red amphora with birds painted"]).round(4).tolist()
    [0.7273]
    """
    # lazy: torchmetrics, torch
    from torchmetrics.functional.text.rouge import rouge_score

    return np.array([float(rouge_score(p, r, rouge_keys="rougeL")["rougeL_fmeasure"]) for p, r in zip(preds, refs)],
                    dtype=float)


_ENTRIES = (
    CaptionMetric("fid_score", "FID ↓", "Fréchet distance between the sentence embeddings of all captions and of all "
                  "references (lower is better)", 10, higher_is_better=False, paired=False),
    CaptionMetric("clip_score", "CLIP", "mean cosine similarity of the CLIP text embeddings of each caption and its "
                  "reference (text to text, as the paper's scorer does)", 20),
    CaptionMetric("r_at_1", "R@1", "retrieval: the share of captions whose own reference is the reference most similar "
                  "to it (CLIP text embeddings)", 50, percent=True),
    CaptionMetric("r_at_5", "R@5", "retrieval: the share of captions whose own reference is among the 5 references "
                  "most similar to it", 40, percent=True),
    CaptionMetric("r_at_10", "R@10", "retrieval: the share of captions whose own reference is among the 10 references "
                  "most similar to it", 30, percent=True),
    CaptionMetric("lexical_similarity", "Lexical", "mean Jaccard similarity of the lower-cased word sets of caption "
                  "and reference", 60),
    CaptionMetric("rouge_l", "ROUGE-L", "mean ROUGE-L F-measure of caption and reference (longest common word "
                  "subsequence: word order counts), beyond the paper; scored with `metrics.extra=[rouge_l]`", 65,
                  terms=rouge_l_terms, default=False),
    CaptionMetric("overall_score", "Overall", "the paper's weighted sum: 0.25 CLIP + 0.25 semantic (the CLIP score "
                  "again) + 0.20 R@10 + 0.15 lexical + 0.10 R@5 + 0.05 R@1", 70),
    CaptionMetric("image_clip_score", "CLIP-I", "CLIPScore (0 to 100) of the caption against the vase's own views (image to "
                  "text), beyond the paper", 80, paired=False),
)
CAPTION_METRICS: dict[str, CaptionMetric] = {m.key: m for m in _ENTRIES}
"""Every caption metric by key, in the order comparisons list them (FID first, then the per-vase metrics)."""


def caption_metric(name: str) -> CaptionMetric:
    """The entry named ``name``: a key of `CAPTION_METRICS`, or ``module:attribute`` naming a `CaptionMetric` of
    your own package.

    Raises:
        ConfigError: an unknown key, a module that does not import, or an attribute that is no `CaptionMetric`.
    """
    if ":" not in name:
        if name not in CAPTION_METRICS:
            raise ConfigError(f"metrics.extra: {name!r} is no caption metric; choose from "
                              f"{', '.join(CAPTION_METRICS)}, or name your own as module:attribute")
        return CAPTION_METRICS[name]
    module, attr = name.split(":", 1)
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"metrics.extra: {name!r} does not import: {e}") from e
    if not isinstance(found, CaptionMetric) or found.terms is None:
        raise ConfigError(f"metrics.extra: {name!r} is a {type(found).__name__}, not a CaptionMetric with its terms "
                          f"(vase.metrics.registry.CaptionMetric)")
    return known(found)


def extra_metrics(names: Iterable[str] | None) -> tuple[CaptionMetric, ...]:
    """The metrics a run scores beyond the paper's: every ``default`` entry with its own terms, then ``names``
    (``metrics.extra``), each once."""
    out = [m for m in CAPTION_METRICS.values() if m.default and m.terms is not None]
    for n in names or ():
        m = caption_metric(str(n))
        if m.terms is None:
            raise ConfigError(f"metrics.extra: {n!r} is one of the paper's metrics, which every run scores")
        if m not in out:
            out.append(m)
    return tuple(out)


def metric_info(key: str) -> CaptionMetric | None:
    """The entry for a results key, if it is a caption metric (registered here or named as an extra before)."""
    return CAPTION_METRICS.get(key) or _SEEN.get(key)


_SEEN: dict[str, CaptionMetric] = {}
"""Metrics of other packages met through `caption_metric`, by key, so tables and intervals know them too."""


def known(m: CaptionMetric) -> CaptionMetric:
    """Remember ``m`` by its key (see `metric_info`) and return it."""
    if m.key not in CAPTION_METRICS:
        _SEEN[m.key] = m
    return m


def table_columns(present: Iterable[str] | None = None) -> tuple[tuple[str, str], ...]:
    """(key, title) of the results table's columns in order: every default metric, and the others where ``present``
    (the keys the rows hold) has them; None: every registered metric."""
    have = None if present is None else set(present)
    shown = [m for m in [*CAPTION_METRICS.values(), *_SEEN.values()]
             if have is None or m.default or m.key in have]
    return tuple((m.key, m.title) for m in sorted(shown, key=lambda m: m.column))


PER_VASE = tuple(m.key for m in _ENTRIES if m.paired and m.default)
"""The paper's per-vase metrics, in comparison order: a comparison also pairs any extra it finds (`paired_keys`)."""
LOWER_IS_BETTER = frozenset(m.key for m in _ENTRIES if not m.higher_is_better)


def paired_keys(have: Iterable[str]) -> tuple[str, ...]:
    """The per-vase metrics among ``have`` (a run's per-vase terms), in comparison order: the paper's, then extras."""
    have = list(have)
    paper = [k for k in PER_VASE if k in have]
    extra = [k for k in have if k not in paper and (m := metric_info(k)) is not None and m.paired]
    overall = [k for k in paper if k == "overall_score"]
    return tuple([k for k in paper if k != "overall_score"] + extra + overall)


def is_percent(key: str) -> bool:
    """Whether ``key`` is shown in percent (R@k)."""
    m = metric_info(key)
    return bool(m and m.percent)
