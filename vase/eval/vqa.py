"""Per-dimension VQA accuracy: open-ended answers scored with the reward's similarity at tau, and a multiple-choice
protocol (as CiQi-Bench does) with distractors drawn deterministically from each dimension's vocabulary."""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np

from vase.annotate.records import VaseRecord
from vase.annotate.vocab import DIMENSIONS, QUESTIONS, canonical, format_dating, terms
from vase.eval.generate import GenerationItem, visuals_of
from vase.rewards.reward import sequence_ratio

LETTERS = "ABCDEFGH"


def _rng(vase_id: str, dim: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"{vase_id}|{dim}".encode()))


def mc_options(rec: VaseRecord, dim: str, n: int = 4) -> tuple[list[str], int]:
    """``n`` options for one question (the answer and n-1 distractors) and the answer's index; the same every run."""
    if not 2 <= n <= len(LETTERS):
        raise ValueError(f"vqa.num_choices={n} must lie in [2, {len(LETTERS)}]")
    rng = _rng(rec.id, dim)
    answer = rec.dimension_text(dim)
    if dim == "dating":
        start, end = rec.dating
        shifts = [s for s in range(-200, 201, 25) if s != 0 and end + s < 0]
        picks = rng.choice(len(shifts), size=n - 1, replace=False)
        distractors = [format_dating(start + shifts[i], end + shifts[i]) for i in picks]
    else:
        pool = [t for t in terms(dim) if t != canonical(dim, answer)]
        picks = rng.choice(len(pool), size=min(n - 1, len(pool)), replace=False)
        distractors = [pool[i] for i in picks]
    options = [answer, *distractors]
    order = rng.permutation(len(options))
    options = [options[i] for i in order]
    return options, int(np.where(order == 0)[0][0])


def mc_prompt(question: str, options: list[str]) -> str:
    lines = [question, "Options:"] + [f"{LETTERS[i]}. {o}" for i, o in enumerate(options)]
    return "\n".join(lines + ["Answer with the letter of the correct option."])


def parse_choice(answer: str, options: list[str]) -> int | None:
    """The option an answer picks: a leading letter ("B", "(B)", "B. Athenian"), else the option it best spells."""
    m = re.match(r"^\s*\(?([A-H])\)?(?:[.):\s]|$)", answer)
    if m and LETTERS.index(m.group(1)) < len(options):
        return LETTERS.index(m.group(1))
    text = answer.strip().lower()
    if not text:
        return None
    scores = [sequence_ratio(text, o) for o in options]
    best = int(np.argmax(scores))
    return best if scores[best] >= 0.6 else None


def vqa_items(dataset: Any, protocol: str = "both", num_choices: int = 4) -> list[GenerationItem]:
    """Open-ended and/or multiple-choice questions, six per vase and protocol."""
    if protocol not in ("open", "mc", "both"):
        raise ValueError(f"vqa.protocol={protocol!r} must be open, mc or both")
    items = []
    for i, rec in enumerate(dataset.records):
        views = visuals_of(dataset, i)
        for dim in DIMENSIONS:
            if protocol in ("open", "both"):
                items.append(GenerationItem(f"{rec.id}#open#{dim}", views, QUESTIONS[dim], rec.dimension_text(dim),
                                            {"dimension": dim, "protocol": "open"}))
            if protocol in ("mc", "both"):
                options, answer = mc_options(rec, dim, num_choices)
                items.append(GenerationItem(f"{rec.id}#mc#{dim}", views, mc_prompt(QUESTIONS[dim], options),
                                            LETTERS[answer], {"dimension": dim, "protocol": "mc", "options": options,
                                                              "answer_index": answer}))
    return items


def score_vqa(rows: list[dict[str, Any]], reward: Any, tau: float) -> dict[str, Any]:
    """Accuracy per protocol and dimension, and the mean over dimensions; open answers pass at similarity >= tau."""
    out: dict[str, Any] = {}
    for protocol in ("open", "mc"):
        sel = [r for r in rows if r.get("protocol") == protocol]
        if not sel:
            continue
        per_dim: dict[str, list[float]] = {d: [] for d in DIMENSIONS}
        for r in sel:
            if protocol == "open":
                ok = reward.dimension_similarity(r["dimension"], r["caption"].strip().rstrip("."), r["reference"].rstrip(".")) >= tau
            else:
                ok = parse_choice(r["caption"], r["options"]) == r["answer_index"]
            per_dim[r["dimension"]].append(float(ok))
        acc = {d: float(np.mean(v)) for d, v in per_dim.items() if v}
        out[protocol] = {"accuracy": acc, "mean": float(np.mean(list(acc.values()))), "n": len(sel)}
    return out


def vqa_table(scores: dict[str, Any], name: str) -> str:
    """Markdown: one row per protocol, one column per dimension, then the mean."""
    head = "| Model | Protocol | " + " | ".join(d.capitalize() for d in DIMENSIONS) + " | Mean | N |"
    lines = [head, "|---|---|" + "---|" * (len(DIMENSIONS) + 2)]
    for protocol, s in scores.items():
        cells = [f"{100 * s['accuracy'][d]:.1f} %" if d in s["accuracy"] else "–" for d in DIMENSIONS]
        label = "open-ended (sim ≥ τ)" if protocol == "open" else "multiple choice"
        lines.append(f"| {name} | {label} | " + " | ".join(cells) + f" | {100 * s['mean']:.1f} % | {s['n']} |")
    return "\n".join(lines) + "\n"
