"""Per-dimension VQA accuracy, the runner. What each protocol asks and how it judges an answer belong to its task
(``vase.prompt_tasks.VQA``): open-ended answers (``qa.OPEN``) pass at the reward's similarity >= tau; multiple choice (as
CiQi-Bench does, distractors drawn deterministically from each dimension's vocabulary) is answered either by
generating the option's letter (``mc.LETTER``) or by the likelihood of each option as the answer (``mc.LIKELIHOOD``:
no generation, cheap enough for hundreds of held-out vases, and blind to answer-format luck).

``protocol`` is ``open``, ``mc``, ``ll``, ``both`` (open and mc) or several joined by ``+`` (``open+ll``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vase import markdown as md
from vase.annotate.vocab import DIMENSIONS
from vase.choices import PROTOCOL_LABELS, VQA_PROTOCOLS
from vase.config import Decoding
from vase.eval.generate import GenerationItem, generate_rows, option_loglik_rows, prompt_context, visuals_of
from vase.eval.stats import bootstrap_ci
from vase.eval.zoom import zoom_rows
from vase.io import atomic_write_json, atomic_write_text
from vase.models.loading import pixel_bounds
from vase.prompt_tasks import VQA

PROTOCOLS = VQA_PROTOCOLS


def protocols_of(protocol: str) -> list[str]:
    """The protocols a ``vqa`` setting names.

    >>> protocols_of("both"), protocols_of("open+ll")
    (['open', 'mc'], ['open', 'll'])
    """
    parts = ["open", "mc"] if protocol == "both" else [p.strip() for p in str(protocol).split("+")]
    bad = [p for p in parts if p not in PROTOCOLS]
    if bad or not parts:
        raise ValueError(f"vqa protocol {protocol!r}: use open, mc, ll, both, or several joined by '+' (open+ll)")
    return parts


ITEM_ORDER = ("ll", "open", "mc")
"""The order of a dimension's questions (answer files resume by id; batches follow this order)."""


def vqa_items(dataset: Any, protocol: str = "both", num_choices: int = 4) -> list[GenerationItem]:
    """The questions of each protocol, six per vase and protocol, asked as the protocol's task asks them
    (`vase.prompt_tasks.VQA`)."""
    wanted = protocols_of(protocol)
    items = []
    for i, rec in enumerate(dataset.records):
        views = visuals_of(dataset, i)
        for dim in DIMENSIONS:
            ctx = prompt_context(dataset, i, dim)
            for name in (p for p in ITEM_ORDER if p in wanted):
                prompt, reference, extra = VQA[name].question(rec, dim, num_choices)
                items.append(GenerationItem(f"{rec.id}#{name}#{dim}", views, ctx + prompt, reference,
                                            {"dimension": dim, "protocol": name, **extra}))
    return items


def score_vqa(rows: list[dict[str, Any]], reward: Any, tau: float) -> dict[str, Any]:
    """Accuracy per protocol and dimension, and the mean over dimensions, each answer judged by its protocol's task
    (open answers pass at the reward's similarity >= tau; choices by the option picked).

    Multiple choice also reports, per dimension, how many answers named no option (``unparsed``: counted wrong, and
    a sign the model was never taught the format) and the chance level (1 / number of options).
    """
    out: dict[str, Any] = {}
    for protocol in PROTOCOLS:
        sel = [r for r in rows if r.get("protocol") == protocol]
        if not sel:
            continue
        per_dim: dict[str, list[float]] = {d: [] for d in DIMENSIONS}
        items: dict[str, dict[str, float]] = {d: {} for d in DIMENSIONS}  # per question: what paired intervals need
        unparsed: dict[str, int] = {d: 0 for d in DIMENSIONS}
        chance: dict[str, list[float]] = {d: [] for d in DIMENSIONS}
        judged = VQA[protocol]
        for r in sel:
            ok, named_none = judged.correct(r, reward.dimension_similarity, tau)
            if judged.choice:
                unparsed[r["dimension"]] += int(named_none)
                chance[r["dimension"]].append(1.0 / len(r["options"]))
            per_dim[r["dimension"]].append(float(ok))
            if "id" in r:  # generated rows always carry it; rows built by hand may not
                items[r["dimension"]][str(r["id"])] = float(ok)
        acc = {d: float(np.mean(v)) for d, v in per_dim.items() if v}
        out[protocol] = {"accuracy": acc, "mean": float(np.mean(list(acc.values()))), "n": len(sel),
                         "ci": {d: list(bootstrap_ci(v)) for d, v in per_dim.items() if v},
                         "items": {d: v for d, v in items.items() if v}}
        if judged.choice:
            out[protocol]["unparsed"] = {d: unparsed[d] for d in acc}
            out[protocol]["chance"] = {d: float(np.mean(chance[d])) for d in acc}
        if all("pick_mean" in r for r in sel):
            out[protocol]["length"] = length_report(sel)
    return out


def length_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Multiple choice by likelihood, read for length bias: accuracy per dimension when each option is scored by its
    per-token mean log-probability instead of its sum, the options' token counts (mean and largest spread within a
    question), and how often each rule picks the shortest option (a sum favours it; chance is about 1 / options).

    >>> r = {"dimension": "shape", "answer_index": 1, "pick": 0, "pick_mean": 1, "tokens": [2, 5]}
    >>> rep = length_report([r]); rep["accuracy_mean"]["shape"], rep["shortest_share"]["sum"]
    (1.0, 1.0)
    """
    per_dim: dict[str, list[float]] = {}
    spreads, short_sum, short_mean = [], [], []
    for r in rows:
        per_dim.setdefault(r["dimension"], []).append(float(r["pick_mean"] == r["answer_index"]))
        t = r["tokens"]
        spreads.append(max(t) - min(t))
        shortest = {i for i, x in enumerate(t) if x == min(t)}
        short_sum.append(float(r["pick"] in shortest))
        short_mean.append(float(r["pick_mean"] in shortest))
    acc = {d: float(np.mean(v)) for d, v in per_dim.items()}
    return {"accuracy_mean": acc, "mean_mean": float(np.mean(list(acc.values()))),
            "ci_mean": {d: list(bootstrap_ci(v)) for d, v in per_dim.items()},
            "token_spread": {"mean": float(np.mean(spreads)), "max": int(max(spreads))},
            "shortest_share": {"sum": float(np.mean(short_sum)), "mean": float(np.mean(short_mean))},
            "picks_differ": float(np.mean([r["pick"] != r["pick_mean"] for r in rows]))}


def vqa_table(scores: dict[str, Any], name: str) -> str:
    """Markdown: one row per protocol, one column per dimension, then the mean; multiple-choice cells also say how
    many answers named no option, and a row gives the chance level."""
    lines = md.table(["Model", "Protocol", *(d.capitalize() for d in DIMENSIONS), "Mean", "N"])
    notes = []
    for protocol, s in scores.items():
        cells = []
        for d in DIMENSIONS:
            if d not in s["accuracy"]:
                cells.append("–")
                continue
            cell = f"{100 * s['accuracy'][d]:.1f} %"
            if s.get("unparsed", {}).get(d):
                cell += f" ({s['unparsed'][d]} unparsed)"
            cells.append(cell)
        lines.append(md.row([name, PROTOCOL_LABELS.get(protocol, protocol), *cells, f"{100 * s['mean']:.1f} %", s["n"]]))
        if "chance" in s:  # a choice protocol
            ch = [f"{100 * s['chance'][d]:.1f} %" if d in s["chance"] else "–" for d in DIMENSIONS]
            mean = float(np.mean(list(s["chance"].values())))
            lines.append(md.row(["chance", PROTOCOL_LABELS[protocol], *ch, f"{100 * mean:.1f} %", ""]))
        if "length" in s:  # option likelihood: the per-token rule beside the summed one, and the length bias
            n = s["length"]
            cells = [f"{100 * n['accuracy_mean'][d]:.1f} %" if d in n["accuracy_mean"] else "–" for d in DIMENSIONS]
            lines.append(md.row([name, f"{PROTOCOL_LABELS[protocol]}, per-token mean", *cells,
                                 f"{100 * n['mean_mean']:.1f} %", s["n"]]))
            notes.append(f"Option likelihood: the options of a question differ by {n['token_spread']['mean']:.1f} "
                         f"tokens on average (up to {n['token_spread']['max']}); the summed log-probability picks "
                         f"the shortest option in {100 * n['shortest_share']['sum']:.0f} % of questions, the per-token "
                         f"mean in {100 * n['shortest_share']['mean']:.0f} %; the two rules differ on "
                         f"{100 * n['picks_differ']:.0f} %.")
    return "\n".join(lines) + "\n" + "".join(f"\n{x}\n" for x in notes)


def evaluate_vqa(model: Any, processor: Any, dataset: Any, reward: Any, tau: float, out: Any, name: str,
                 protocol: str = "both", num_choices: int = 4, batch_size: int = 8, max_new_tokens: int = 24,
                 extra: dict[str, Any] | None = None, zoom: bool = False, zoom_calls: int = 1,
                 decoding: Decoding | None = None) -> dict[str, Any]:
    """Ask every vase of ``dataset`` its six questions, score them, and write ``out`` (JSON, with the decoding of the
    generated answers), a markdown table beside it and the answers as resumable JSONL (``answers_<stem>.jsonl``);
    returns the scores."""
    decoding = decoding or Decoding()
    out = Path(out)
    items = vqa_items(dataset, protocol, num_choices)
    gen = [it for it in items if it.extra["protocol"] != "ll"]
    ll = [it for it in items if it.extra["protocol"] == "ll"]
    rows = []
    if gen:
        rows += generate_rows(model, processor, gen, out.parent / f"answers_{out.stem}.jsonl", batch_size=batch_size,
                              max_new_tokens=max_new_tokens, decoding=decoding, desc="answering questions")
    if ll:
        rows += option_loglik_rows(model, processor, ll, out.parent / f"answers_{out.stem}_ll.jsonl",
                                   batch_size=max(1, batch_size // num_choices), desc="scoring options")
    scores = score_vqa(rows, reward, tau)
    if zoom:  # the open questions again, now with the zoom-in tool (vase.eval.zoom): accuracy with and without it
        zrows = zoom_rows(model, processor, vqa_items(dataset, "open", num_choices), tuple(dataset.views), zoom_calls,
                          out.parent / f"answers_{out.stem}_zoom.jsonl", batch_size=batch_size,
                          max_new_tokens=max(max_new_tokens, 64), decoding=decoding)  # room for a call: ~40 tokens
        z = score_vqa(zrows, reward, tau)["open"]
        z["calls"] = {d: sum(1 for r in zrows if r["dimension"] == d and r.get("calls")) for d in DIMENSIONS}
        scores["open+zoom"] = z
    atomic_write_json(out, {"name": name, "vqa": scores, "decoding": decoding.record(), "pixels": pixel_bounds(processor),
                            **(extra or {})})
    table = vqa_table(scores, name)
    atomic_write_text(out.with_suffix(".md"), table)
    return scores
