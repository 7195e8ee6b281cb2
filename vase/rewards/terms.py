"""Reward terms: each part of the GRPO reward is one small class and one YAML entry under ``reward.terms``.

``conf/reward/vase6d.yaml`` builds the paper's reward from them: six `Similarity` terms (one per dimension,
weight ``reward.weights.<dim>``, thresholded at tau), a `FormatPenalty`, a `SequenceBonus`, and the
optional `InvRender` and `Learned` terms (weight 0 unless asked for). The total is
``sum(term.weight * term(...))`` over the terms; each term's value (before its weight) is logged as
``train/reward/<name>``, ``<name>`` being its key under ``reward.terms``.

A term is any callable ``(completions, targets, **batch) -> list[float]`` whose constructor takes ``weight``.
``targets`` are the six dimensions of each completion's vase (dicts of text, dating as ``"<start> to <end>"``); the
batch also holds ``generated`` (the six dimensions read from each completion), ``reference`` (target captions),
``images`` and ``ids``. A user's own term, in their own module::

    # mypkg/terms.py
    from vase.rewards.terms import RewardTerm

    class MentionsRedFigure(RewardTerm):
        def __call__(self, completions, targets, **batch):
            return [float("red-figure" in c.lower()) for c in completions]

    python train.py stage=grpo +reward.terms.red._target_=mypkg.terms.MentionsRedFigure +reward.terms.red.weight=0.5

A term answers captions unless its class sets ``answers = "parameters"`` (`InvRender`): a batch mixing
caption prompts and inverse-rendering prompts gives each term only the completions it scores (0 elsewhere).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from typing import Any

from vase.annotate.vocab import DIMENSIONS
from vase.data.synthetic import build_from_params
from vase.prompt_tasks.invrender import MASK_BG, VaseParams, frame_of, parse_params, silhouette_ious
from vase.render.renderer import VIEW_DIRECTIONS, Renderer, RenderSettings, parts_from_scene
from vase.rewards.extract import canonical_or_none, extract_fields
from vase.rewards.similarity import PAPER_SIMILARITY, check_kind, sequence_ratio, similarities


class RewardTerm(ABC):
    """A named, weighted part of the GRPO reward (subclass it and implement ``__call__``)."""

    answers = "caption"  # or "parameters": the completions this term scores

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = float(weight)

    @abstractmethod
    def __call__(self, completions: list[str], targets: list[Any], **batch: Any) -> list[float]:
        """One value per completion (before the weight)."""

    def components(self, completions: list[str], targets: list[Any], **batch: Any) -> dict[str, list[float]]:
        """The value (key ``""``) and any further named parts to log (key = suffix of the term's name)."""
        return {"": self(completions, targets, **batch)}


def _generated(completions: list[str], batch: dict[str, Any]) -> list[dict[str, str | None]]:
    """The six dimensions read from each completion: from the batch when the reward has read them already."""
    gen = batch.get("generated")
    return list(gen) if gen is not None else [extract_fields(c) for c in completions]


class Similarity(RewardTerm):
    """One of the paper's six dimensions: ``r = sim(generated, target) if sim >= tau else 0``.

    Also logs ``<name>_sim`` (before tau) and ``<name>_pass`` (1 where it passed tau).

    >>> t = Similarity(dimension="fabric", similarity="vocabulary", tau=0.7, weight=0.2)
    >>> t(["An Attic kylix.", "A Corinthian kylix.", "A kylix."], [{"fabric": "Athenian"}] * 3)
    [1.0, 0.0, 0.0]
    """

    def __init__(self, dimension: str, similarity: str, tau: float, weight: float = 1.0,
                 embedding_model: str = "packaged:all-MiniLM-L6-v2", embedding_device: str = "cpu") -> None:
        super().__init__(weight)
        if dimension not in DIMENSIONS:
            raise ValueError(f"reward term similarity: dimension={dimension!r} must be one of {list(DIMENSIONS)}")
        self.dimension = dimension
        self.similarity = check_kind(str(similarity), f"reward.terms.{dimension}.similarity")
        self.tau = float(tau)
        self.embedding_model = str(embedding_model)
        self.embedding_device = str(embedding_device)

    def similarity_of(self, generated: str | None, target: str | None) -> float:
        """This dimension's similarity of two texts of it, in [0, 1] (before tau)."""
        return self.raw([(generated, target)])[0]

    def raw(self, pairs: list[tuple[str | None, str | None]]) -> list[float]:
        return similarities(self.dimension, self.similarity, pairs, self.embedding_model, self.embedding_device)

    def components(self, completions: list[str], targets: list[Any], **batch: Any) -> dict[str, list[float]]:
        gen = _generated(completions, batch)
        sims = self.raw([(g.get(self.dimension), t.get(self.dimension)) for g, t in zip(gen, targets)])
        passed = [float(s >= self.tau and s > 0.0) for s in sims]
        return {"": [s * p for s, p in zip(sims, passed)], "_sim": sims, "_pass": passed}

    def __call__(self, completions: list[str], targets: list[Any], **batch: Any) -> list[float]:
        return self.components(completions, targets, **batch)[""]


def repeated_ngram_fraction(words: list[str], n: int = 3) -> float:
    """Fraction of word n-grams that repeat an earlier one (0 for text shorter than n words)."""
    grams = [tuple(words[i: i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    counts = Counter(grams)
    return sum(c - 1 for c in counts.values()) / len(grams)


class FormatPenalty(RewardTerm):
    """Minus P: ``length`` when the word count falls outside [min_words, max_words], ``repetition`` times the
    fraction of repeated word 3-grams, ``irrelevance`` when no dimension is mentioned at all (values are <= 0).

    >>> FormatPenalty(min_words=5, max_words=80, length=0.1, repetition=0.2, irrelevance=0.1)(["Hello."], [{}])
    [-0.2]
    """

    def __init__(self, min_words: int, max_words: int, length: float, repetition: float, irrelevance: float,
                 weight: float = 1.0) -> None:
        super().__init__(weight)
        if not 0 <= int(min_words) <= int(max_words):
            raise ValueError(f"reward term penalty: min_words={min_words} must lie in [0, max_words={max_words}]")
        self.min_words, self.max_words = int(min_words), int(max_words)
        self.length, self.repetition, self.irrelevance = float(length), float(repetition), float(irrelevance)

    def __call__(self, completions: list[str], targets: list[Any], **batch: Any) -> list[float]:
        out = []
        for text, g in zip(completions, _generated(completions, batch)):
            words = text.split()
            p = 0.0 if self.min_words <= len(words) <= self.max_words else self.length
            p += self.repetition * repeated_ngram_fraction([w.lower() for w in words])
            if all(v is None for v in g.values()):
                p += self.irrelevance
            out.append(-p if p else 0.0)
        return out


class SequenceBonus(RewardTerm):
    """B: difflib's ratio of the completion against the target caption (0 where the batch has none).

    >>> SequenceBonus(weight=0.1)(["abc"], [{}], reference=["abd"])
    [0.6666666666666666]
    """

    def __call__(self, completions: list[str], targets: list[Any], **batch: Any) -> list[float]:
        ref = batch.get("reference")
        return [sequence_ratio(c, ref[k]) if ref is not None and ref[k] else 0.0 for k, c in enumerate(completions)]


class Keyword(RewardTerm):
    """1 when the completion names the vase's true term of ``dimension`` (synonyms count), else 0: a simple,
    binary, verifiable reward that shows whether GRPO moves the policy at all (``make grpo-sanity``).

    >>> Keyword(dimension="shape")(["A red-figure kylix.", "An amphora."], [{"shape": "kylix"}] * 2)
    [1.0, 0.0]
    """

    def __init__(self, dimension: str = "shape", weight: float = 1.0) -> None:
        super().__init__(weight)
        if dimension not in DIMENSIONS:
            raise ValueError(f"reward term keyword: dimension={dimension!r} must be one of {list(DIMENSIONS)}")
        self.dimension = dimension

    def __call__(self, completions: list[str], targets: list[Any], **batch: Any) -> list[float]:
        out = []
        for g, target in zip(_generated(completions, batch), targets):
            want = target.get(self.dimension)
            term = canonical_or_none(self.dimension, want) if want else None  # None: nothing to name
            said = g.get(self.dimension)
            out.append(float(term is not None and bool(said) and canonical_or_none(self.dimension, said) == term))
        return out


class InvRender(RewardTerm):
    """Inverse rendering (``data.mix=invrender``): the silhouette IoU (mean over ``views``) of the vase built from
    the parameters a completion answers against the true vase; 0 for an answer that parses to no valid parameters.
    Its targets are the true generator parameters of each prompt."""

    answers = "parameters"

    def __init__(self, weight: float = 1.0, views: list[str] | tuple[str, ...] = ("front", "left", "top"),
                 resolution: int = 64) -> None:
        super().__init__(weight)
        self.views = [str(v) for v in views]
        self.resolution = int(resolution)
        self._renderer: Any = None
        self._targets: dict[str, Any] = {}  # true parameters -> (frame, renders)

    def __getstate__(self) -> dict[str, Any]:  # a worker builds its own renderer
        return {**self.__dict__, "_renderer": None, "_targets": {}}

    def score(self, text: str, true_params: dict) -> float:
        pred = parse_params(text)
        if pred is None:
            return 0.0
        if self._renderer is None:
            self._renderer = Renderer(RenderSettings(resolution=self.resolution))
        dirs = [VIEW_DIRECTIONS[v] for v in self.views]
        key = json.dumps(true_params, sort_keys=True)
        if key not in self._targets:  # a group's G completions share one target: build and render it once
            true_parts = parts_from_scene(build_from_params(VaseParams(**true_params)))
            frame = frame_of(true_parts)
            self._targets[key] = (frame, self._renderer.render_parts(true_parts, dirs, background=MASK_BG, frame=frame))
        frame, a = self._targets[key]
        b = self._renderer.render_parts(parts_from_scene(build_from_params(pred)), dirs, background=MASK_BG, frame=frame)
        ious = silhouette_ious(b, a)
        return sum(ious) / len(ious)

    def __call__(self, completions: list[str], targets: list[Any], **batch: Any) -> list[float]:
        if self.weight == 0.0:
            return [0.0] * len(completions)  # off: no renderer is built
        return [self.score(c, t) for c, t in zip(completions, targets)]

    def components(self, completions: list[str], targets: list[Any], **batch: Any) -> dict[str, list[float]]:
        """The IoU, and ``_shape``: 1 where the answer parses and names the true shape family (needs no renderer)."""
        parsed = [parse_params(c) for c in completions]
        return {"": self(completions, targets, **batch),
                "_shape": [float(p is not None and p.shape == t.get("shape")) for p, t in zip(parsed, targets)]}


class Learned(RewardTerm):
    """Agreement with the six-head classifier (``attribute_heads.pt``, written by ``python evaluate.py
    action=attributes``) that predicts the dimensions from the vase's views: per completion, the mean over dimensions
    of its similarity to the prediction (0 where it states a dimension not at all). A verifier that needs no
    targets; predictions are cached per vase id."""

    def __init__(self, weight: float = 1.0, checkpoint: str | None = None,
                 embedding_model: str = "packaged:all-MiniLM-L6-v2", embedding_device: str = "cpu",
                 heads: dict | None = None) -> None:
        super().__init__(weight)  # heads: how checkpoint=train trains the classifier (vase.pipeline.learned reads it)
        if self.weight > 0 and not checkpoint:
            raise ValueError("reward.terms.learned.weight > 0 needs reward.terms.learned.checkpoint (attribute_heads.pt, "
                             "or train)")
        if self.weight > 0 and checkpoint == "train":
            raise ValueError("reward.terms.learned.checkpoint=train is resolved by a GRPO run (train.py) before the "
                             "reward is built; elsewhere name the attribute_heads.pt to use")
        self.checkpoint = checkpoint
        self.embedding_model, self.embedding_device = str(embedding_model), str(embedding_device)
        self._predictor: Any = None
        self._predicted: dict[str, dict[str, str]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_predictor": None, "_predicted": {}}

    def __call__(self, completions: list[str], targets: list[Any], **batch: Any) -> list[float]:
        if self.weight == 0.0 or not completions:
            return [0.0] * len(completions)
        images, ids = batch.get("images"), batch.get("ids")
        if images is None:
            raise ValueError("reward.terms.learned needs the vase's images in the batch (`images`)")
        if self._predictor is None:
            # lazy: torch, torchmetrics, pytorch_lightning
            from vase.metrics.attributes import AttributePredictor

            self._predictor = AttributePredictor(self.checkpoint)
        preds = []
        for k, imgs in enumerate(images):
            key = ids[k].split("#")[0] if ids is not None else None  # one prediction per vase, not per question
            if key is None or key not in self._predicted:
                p = self._predictor.predict(list(imgs))
                if key is not None:
                    self._predicted[key] = p
            preds.append(self._predicted[key] if key is not None else p)
        gen = _generated(completions, batch)
        per_dim = {d: similarities(d, PAPER_SIMILARITY[d], [(g.get(d), p.get(d)) for g, p in zip(gen, preds)],
                                   self.embedding_model, self.embedding_device) for d in DIMENSIONS}
        return [sum(per_dim[d][k] for d in DIMENSIONS) / len(DIMENSIONS) for k in range(len(completions))]
