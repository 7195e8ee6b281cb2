"""Held-out reward: what the reward asks, measured on vases the model never saw.

After a stage, the model answers the prompts of the task it trained (``data.mix``: captions, QA pairs, or both;
the same prompts, targets and ids as training, from ``vase.prompt_tasks``) for every held-out vase, greedily, and the run's
own reward terms score the answers: each term's mean value, the share of answers that get each dimension right
(its similarity reaches tau: the term's ``<name>_pass``), the weighted total, each with a bootstrap 95 % interval,
and every answer's values by id, so that two runs on the same vases compare by paired intervals
(`heldout_difference`). Term values are kept before their weights; a sweep's shared start (the SFT) is
answered once and each job scores those answers with its own terms and weights."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from vase.annotate.vocab import VOCABULARY
from vase.config import Decoding
from vase.errors import DataError
from vase.eval.generate import GenerationItem, generate_rows, prompt_context, visuals_of
from vase.eval.stats import bootstrap_ci, format_heldout
from vase.eval.zoom import zoom_rows
from vase.io import atomic_write_json, atomic_write_text
from vase.models.loading import pixel_bounds
from vase.prompt_tasks import DATA_MIXES, SAMPLES
from vase.rewards.extract import find_term
from vase.rewards.terms import Similarity

SCORE_CHUNK = 32  # answers scored at once (their views are loaded for terms that read them)
COLLAPSED = 2.0   # a value named this many times more often than the commonest true value: a collapsed model

log = logging.getLogger("vase")

SPLITS = ("all", "search", "confirm")
"""``val.heldout_split``: every held-out vase, or one of two disjoint halves of them (`split_vases`)."""


def split_vases(ids: list[str], which: str, salt: str = "vase") -> set[str]:
    """The held-out vases of ``which`` half: ``search`` and ``confirm`` split ``ids`` in two disjoint halves (the
    search's half holds the extra one of an odd count), each vase's half decided by a salted hash of its id alone, so
    the split is the same on every machine, in every job and for every order of the ids; ``all`` is every vase.

    >>> ids = [f"v{i}" for i in range(9)]
    >>> s, c = split_vases(ids, "search"), split_vases(ids, "confirm")
    >>> len(s), len(c), s & c, s | c == set(ids)
    (5, 4, set(), True)
    >>> split_vases(ids[::-1], "search") == s, split_vases(ids, "search", salt="other") == s
    (True, False)
    """
    if which not in SPLITS:
        raise DataError(f"val.heldout_split={which!r} must be one of {list(SPLITS)}")
    unique = sorted(set(ids))
    if which == "all":
        return set(unique)
    ranked = sorted(unique, key=lambda i: hashlib.sha256(f"{salt}\0{i}".encode()).hexdigest())
    half = (len(ranked) + 1) // 2
    return set(ranked[:half] if which == "search" else ranked[half:])


def heldout_items(dataset: Any, data_mix: str, vases: set[str] | None = None
                  ) -> tuple[list[GenerationItem], dict[str, dict[str, Any]]]:
    """The prompts of ``data_mix`` for every held-out vase (of ``vases``, when given) that states its six dimensions,
    and each prompt's reward target by id; samples whose target expects no dimension (a letter, generator parameters)
    are left out."""
    if data_mix not in DATA_MIXES:
        raise DataError(f"data.mix={data_mix!r} must be one of {list(DATA_MIXES)}")
    items, targets = [], {}
    for i, rec in enumerate(dataset.records):
        if not rec.has_dimensions or (vases is not None and rec.id not in vases):
            continue
        ctx = prompt_context(dataset, i)
        asked = dataset.asked_of(i) if hasattr(dataset, "asked_of") else {}
        for name in DATA_MIXES[data_mix]:
            # the task's own samples (prompt, target, id), built without reading the views: they are loaded when
            # the item is answered
            for s in SAMPLES[name](SimpleNamespace(record=rec, images=None, context=ctx, asked=asked), ctx):
                if s.target is None or all(v is None for v in s.target.values()):
                    continue
                items.append(GenerationItem(s.id, visuals_of(dataset, i), s.prompt, s.answer, {"task": name},
                                            system=rec.system))
                targets[s.id] = s.target
    return items, targets


def score_answers(rows: list[dict[str, Any]], targets: dict[str, dict[str, Any]], reward: Any,
                  images: dict[str, Any] | None = None) -> dict[str, dict[str, float]]:
    """Each answer's value of every term (before its weight), its ``<term>_pass`` for the dimension terms its target
    states and its weighted ``total``, by id. ``images``: id -> a loader of the item's views, for terms that read them."""
    out: dict[str, dict[str, float]] = {}
    dims = {name: t.dimension for name, t in reward.terms.items() if isinstance(t, Similarity)}
    for start in range(0, len(rows), SCORE_CHUNK):
        chunk = rows[start: start + SCORE_CHUNK]
        ids = [r["id"] for r in chunk]
        got = reward.compute([r["caption"] for r in chunk], targets=[targets[i] for i in ids], ids=ids,
                             images=[images[i]() for i in ids] if images else None)
        for k, i in enumerate(ids):
            row = {name: got.components[name][k] for name in reward.terms}
            # a parameter term's further parts (the inverse-rendering term's ``_shape``)
            row.update({c: v[k] for name, t in reward.terms.items() if getattr(t, "answers", "") == "parameters"
                        for c, v in got.components.items() if c.startswith(f"{name}_")})
            # a dimension's share right counts the answers asked for it (a QA answer states one dimension)
            row.update({f"{name}_pass": got.components[f"{name}_pass"][k] for name, d in dims.items()
                        if targets[i].get(d) is not None})
            row["total"] = got.total[k]
            out[i] = row
    return out


def summarize(items: dict[str, dict[str, float]], reward: Any) -> dict[str, Any]:
    """Means with bootstrap 95 % intervals: every term, the total, and each dimension term's pass rate."""
    def stat(key: str) -> dict[str, float]:
        vals = [v[key] for v in items.values() if key in v]
        lo, hi = bootstrap_ci(vals)
        return {"mean": sum(vals) / len(vals) if vals else float("nan"), "lo": lo, "hi": hi, "n": len(vals)}

    dim_terms = {name: t.dimension for name, t in reward.terms.items() if isinstance(t, Similarity)}
    return {"terms": {name: stat(name) for name in reward.terms}, "total": stat("total"),
            "pass": {dim: stat(f"{name}_pass") for name, dim in dim_terms.items()},
            "term_of_dimension": {dim: name for name, dim in dim_terms.items()},
            "weights": {name: float(t.weight) for name, t in reward.terms.items()}}


def named_values(rows: list[dict[str, Any]], targets: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per categorical dimension, which values the answers name and how often, beside the truth: ``top`` (the value
    named most) and its ``top_share`` of the answers asked for that dimension, ``distinct`` values named, and
    ``true_top_share`` (the commonest true value's share). A model that names one value for most vases (``top_share``
    over `COLLAPSED` times ``true_top_share``) is a weak start for GRPO: its reward teaches it to say that value
    less, everywhere, rather than to read the views (docs/findings/ablation-search.md, "Why the QA transfer went down")."""
    out: dict[str, dict[str, Any]] = {}
    for dim in VOCABULARY:
        asked = [r for r in rows if targets[r["id"]].get(dim) is not None]
        if not asked:
            continue
        named = Counter(find_term(dim, r["caption"] or "") for r in asked)
        named.pop(None, None)
        truth = Counter(str(targets[r["id"]][dim]) for r in asked)
        top, count = named.most_common(1)[0] if named else (None, 0)
        out[dim] = {"top": top, "top_share": count / len(asked), "distinct": len(named), "n": len(asked),
                    "true_top_share": truth.most_common(1)[0][1] / len(asked), "true_distinct": len(truth)}
    return out


def collapsed(named: dict[str, dict[str, Any]]) -> list[str]:
    """The dimensions whose answers collapsed onto one value, each as a sentence."""
    return [f"{dim}: {100 * v['top_share']:.0f} % of answers name {v['top']!r} (the commonest true value: "
            f"{100 * v['true_top_share']:.0f} %; {v['distinct']} values named of {v['true_distinct']} true)"
            for dim, v in named.items() if v["top"] is not None and v["top_share"] > COLLAPSED * v["true_top_share"]]


def answers_file(out: str | Path) -> Path:
    """Where a held-out result ``out`` keeps its answers, one JSON line each (the file a killed run resumes from):
    ``heldout_reward_answers.jsonl`` beside ``heldout_reward.json``. A run made before 2026-12-02 named it
    ``heldout_heldout_reward.jsonl``; that file is still read when it is the only one.

    >>> answers_file("run/heldout_reward_start.json").name
    'heldout_reward_start_answers.jsonl'
    """
    out = Path(out)
    new, old = out.with_name(f"{out.stem}_answers.jsonl"), out.with_name(f"heldout_{out.stem}.jsonl")
    return old if old.is_file() and not new.is_file() else new


def heldout_reward(model: Any, processor: Any, dataset: Any, reward: Any, data_mix: str, out: str | Path,
                   label: str, batch_size: int = 8, max_new_tokens: int = 64,
                   answers: str | Path | None = None, progress: bool = True, zoom_calls: int = 0,
                   decoding: Decoding | None = None, extra: dict[str, Any] | None = None,
                   split: str = "all", split_salt: str = "vase") -> dict[str, Any]:
    """Answer ``data_mix``'s prompts for every vase of ``dataset`` (decoded by ``decoding``, default greedy; resumable through ``answers``, default
    ``heldout_<out stem>.jsonl`` beside ``out``), score them with ``reward``'s terms and write ``out`` (JSON) with a
    markdown table beside it; returns the result. ``zoom_calls`` > 0: every prompt is asked with the zoom-in tool
    offered, up to that many calls (`vase.eval.zoom.zoom_rows`); the result counts the calls per dimension. ``split``
    (``search`` | ``confirm``) answers one half of the held-out vases only (`split_vases`); the result names the split
    and its vases (``split``, ``vase_ids``), so that a comparison can check two results never shared a vase."""
    out = Path(out)
    decoding = decoding or Decoding()
    vases = split_vases([r.id for r in dataset.records], split, split_salt)
    if split != "all" and len(vases) < 2:
        raise DataError(f"val.heldout_split={split} leaves {len(vases)} of the {len(dataset.records)} held-out "
                        f"vases: a paired comparison needs at least 2 in each half; hold out more vases "
                        f"(data.limit_val, data.synthetic.val_fraction) or val.heldout_split=all")
    items, targets = heldout_items(dataset, data_mix, vases)
    if not items:
        raise DataError(f"no held-out vase states its six dimensions (data.mix={data_mix}): the held-out reward "
                        f"has nothing to score (val.heldout=false turns it off)")
    answers = Path(answers) if answers is not None else answers_file(out)
    zoom = None
    if zoom_calls > 0:
        rows = zoom_rows(model, processor, items, tuple(dataset.views), zoom_calls, answers, batch_size=batch_size,
                         max_new_tokens=max_new_tokens, decoding=decoding, progress=progress)
        zoom = {"max_calls": zoom_calls, "called": dict(Counter(r["id"].split("#")[-1] for r in rows if r.get("calls"))),
                "answers": len(rows)}
    else:
        rows = generate_rows(model, processor, items, answers, batch_size=batch_size, max_new_tokens=max_new_tokens,
                             decoding=decoding, progress=progress, desc="held-out answers")
    scored = score_answers(rows, targets, reward, {it.id: it.images for it in items}
                           if any(_reads_images(t) for t in reward.terms.values()) else None)
    named = named_values(rows, targets)
    result = {"label": label, "mix": data_mix, "n": len(scored), "vases": len(vases),
              "split": {"name": split, "salt": split_salt, "of": len(dataset.records)},
              "vase_ids": sorted(r.id for r in dataset.records if r.id in vases and r.has_dimensions),
              "max_new_tokens": max_new_tokens, "decoding": decoding.record(), "pixels": pixel_bounds(processor),
              **summarize(scored, reward), "named": named, "items": scored, **(extra or {})}
    if zoom is not None:
        result["zoom"] = zoom
    captions = [r for r in rows if r.get("task") == "caption"]
    if captions:  # what the paper's caption metrics score (vase.metrics.paired: this run against its start)
        result["caption_answers"] = {r["id"]: r["caption"] for r in captions}
        result["caption_references"] = {r["id"]: r["reference"] for r in captions}
    atomic_write_json(out, result)
    warn = collapsed(named)
    for line in warn:
        log.warning("held-out answers of %s collapsed onto one value: %s", label, line)
    atomic_write_text(out.with_suffix(".md"), format_heldout({label: result})
                      + "".join(f"\nCollapsed onto one value: {line}.\n" for line in warn))
    return result


def _reads_images(term: Any) -> bool:
    """A term that scores against the vase's views (the learned verifier) and carries weight."""
    return float(getattr(term, "weight", 0.0)) != 0.0 and getattr(term, "checkpoint", None) is not None
