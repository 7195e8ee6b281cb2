"""The six-dimension verifiable reward of VaseVQA-3D, configurable per dimension.

For each dimension i, with g_i the generated and t_i the target content::

    r_i = sim_i(g_i, t_i) if sim_i >= tau else 0
    R   = sum_i w_i * r_i - P + B

``sim_i`` is chosen per dimension: ``embedding`` (cosine of sentence embeddings, all-MiniLM-L6-v2 by default),
``sequence`` (difflib ratio), ``vocabulary`` (1 when both name the same vocabulary term, synonyms included, 0 when
they name different terms, the sequence ratio when either is outside the vocabulary) or ``year_iou`` (intersection
over union of the year ranges). A dimension the completion does not mention scores 0.

P adds a length penalty (word count outside [min_words, max_words]), a repetition penalty (times the fraction of
repeated word 3-grams) and an irrelevance penalty (no dimension mentioned at all). B is a sequence-matching bonus
(times difflib's ratio against the target caption).

The class is a plain picklable callable ``(completions, **batch) -> list[float]`` (TRL's reward-function form); the
sentence encoder runs on its own device (CPU by default), outside any DeepSpeed partitioning, is loaded lazily and
is not pickled, and target embeddings are cached.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from vase.annotate.vocab import DIMENSIONS, dating_iou, parse_dating
from vase.config import SIMILARITIES
from vase.rewards.extract import canonical_or_none, extract_fields

PENALTY_KEYS = ("min_words", "max_words", "length", "repetition", "irrelevance")
BONUS_KEYS = ("sequence",)


def sequence_ratio(a: str, b: str) -> float:
    """difflib's ratio of the lower-cased strings.

    >>> sequence_ratio("Athenian", "athenian")
    1.0
    """
    return difflib.SequenceMatcher(None, a.lower().strip(), b.lower().strip()).ratio()


def vocabulary_similarity(dim: str, a: str, b: str) -> float:
    """1 for the same vocabulary term (synonyms count: Attic = Athenian), 0 for different terms, else sequence ratio.

    >>> vocabulary_similarity("fabric", "Attic", "Athenian")
    1.0
    >>> vocabulary_similarity("fabric", "Corinthian", "Athenian")
    0.0
    """
    ca, cb = canonical_or_none(dim, a), canonical_or_none(dim, b)
    if ca is not None and cb is not None:
        return float(ca == cb)
    return sequence_ratio(a, b)


def year_iou(a: str, b: str) -> float:
    """IoU of the year ranges the two datings parse to (0 when either does not parse).

    >>> year_iou("-450 to -400", "c. 475–425 BCE")
    0.3333333333333333
    """
    ra, rb = parse_dating(a), parse_dating(b)
    if ra is None or rb is None:
        return 0.0
    return dating_iou(ra, rb)


def repeated_ngram_fraction(words: list[str], n: int = 3) -> float:
    """Fraction of word n-grams that repeat an earlier one (0 for text shorter than n words)."""
    grams = [tuple(words[i: i + n]) for i in range(len(words) - n + 1)]
    if not grams:
        return 0.0
    counts = Counter(grams)
    return sum(c - 1 for c in counts.values()) / len(grams)


def _text(completion: Any) -> str:
    """A completion as text: TRL passes strings, or chat messages for conversational data."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        if isinstance(content, list):
            return " ".join(c.get("text", "") for c in content if isinstance(c, dict))
        return str(content)
    return str(completion)


def _complete(key: str, values: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """``values`` as a dict holding every one of ``names`` (and no other); an error names what is missing.

    >>> _complete("reward.bonus", {"sequence": 0.1}, ("sequence",))
    {'sequence': 0.1}
    """
    values = dict(values or {})
    missing = [n for n in names if n not in values]
    unknown = [k for k in values if k not in names]
    if missing:
        raise ValueError(f"{key} is missing {missing}: each needs a value (0 turns a term off)")
    if unknown:
        raise ValueError(f"{key} has unknown keys {unknown}; the keys are {list(names)}")
    return {n: values[n] for n in names}


def normalized_weights(weights: dict[str, float], normalize: Any) -> dict[str, float]:
    """``reward.normalize_weights``: ``None``/``False`` keeps the weights; ``True`` scales them to sum to 1; a list
    of dimensions holds those as given and rescales the others so that all sum to 1, so a sweep over one weight
    keeps the rest in the paper's proportions.

    >>> w = {"fabric": .2, "technique": .2, "decoration": .2, "shape": .15, "dating": .15, "attribution": .1}
    >>> r = normalized_weights({**w, "shape": 0.6}, ["shape"])
    >>> round(r["shape"], 6), round(r["fabric"], 6), round(sum(r.values()), 6)
    (0.6, 0.094118, 1.0)
    """
    if normalize is None or normalize is False:
        return dict(weights)
    fixed = [] if normalize is True else [str(d) for d in normalize]
    unknown = [d for d in fixed if d not in weights]
    if unknown:
        raise ValueError(f"reward.normalize_weights names {unknown}, which are not dimensions {list(weights)}")
    held = sum(weights[d] for d in fixed)
    rest = sum(v for d, v in weights.items() if d not in fixed)
    if held > 1.0 + 1e-9:
        raise ValueError(f"reward.normalize_weights: the weights held fixed ({fixed}) sum to {held} > 1")
    if rest <= 0:
        raise ValueError("reward.normalize_weights: the weights to rescale sum to 0; nothing to rescale")
    scale = (1.0 - held) / rest
    return {d: (v if d in fixed else v * scale) for d, v in weights.items()}


def _built(name: str, term: Any) -> Any:
    """A reward term as given: built already (Hydra instantiates ``_target_`` nodes), or a config dict to build."""
    if isinstance(term, dict) or hasattr(term, "keys"):
        if "_target_" not in term:
            raise ValueError(f"reward.terms.{name} needs a _target_ (a class such as vase.rewards.terms.Keyword)")
        from hydra.utils import instantiate

        term = instantiate(dict(term))
    if not callable(term) or not hasattr(term, "weight"):
        raise ValueError(f"reward.terms.{name}: {type(term).__name__} must be callable and have a weight")
    return term


def reward_from_config(option: str = "vase6d", **overrides: Any) -> VaseReward:
    """The reward that ``conf/reward/<option>.yaml`` defines, with ``overrides`` merged in (nested dicts merge
    key by key), for use outside Hydra (tests, benchmarks, notebooks)."""
    from omegaconf import OmegaConf

    from vase.config import load_option

    cfg = OmegaConf.merge(load_option("reward", option), OmegaConf.create(overrides))
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("_target_", None)
    return VaseReward(**node)


@dataclass
class RewardOutput:
    """Totals and named parts, each a list aligned with the completions."""

    total: list[float]
    components: dict[str, list[float]] = field(default_factory=dict)


class VaseReward:
    """R = sum_i w_i r_i - P + B over the six dimensions (see the module docstring).

    Every value comes from the config (``conf/reward/vase6d.yaml`` is the one place that holds the paper's
    weights and the default similarities and penalties); nothing is defaulted here, and a dimension missing from
    ``weights`` or ``similarity`` is an error naming it, never a silent 0.0. :func:`reward_from_config` builds the
    configured reward outside Hydra.

    Args:
        tau: threshold under which a dimension's similarity counts as 0.
        weights: a weight for each of the six dimensions (0 ignores one).
        similarity: each dimension's similarity kind (``embedding``, ``sequence``, ``vocabulary``, ``year_iou``).
        penalty: ``min_words``, ``max_words``, ``length``, ``repetition``, ``irrelevance``.
        bonus: ``sequence``: weight of difflib's ratio against the target caption.
        embedding_model: a sentence-transformers path or id, or ``packaged:all-MiniLM-L6-v2``.
        embedding_device: where the sentence encoder runs (kept off the policy's devices by default).

    Targets come from the batch: ``targets`` (dicts with the six dimensions, dating as text or [start, end]) and/or
    ``reference`` (target captions; fields are extracted from them where ``targets`` is absent).

    >>> r = reward_from_config(similarity={"decoration": "sequence"}, penalty={"length": 0.0}, bonus={"sequence": 0.0})
    >>> t = {"fabric": "Athenian", "technique": "red-figure", "shape": "kylix", "dating": [-480, -470],
    ...      "decoration": "a symposium scene", "attribution": "Douris"}
    >>> [round(x, 6) for x in r(["Attic red-figure kylix, c. 480–470 BCE, depicting a symposium scene; attributed to Douris."], targets=[t])]
    [1.0]
    """

    def __init__(self, tau: float, weights: dict[str, float], similarity: dict[str, str], penalty: dict[str, float],
                 bonus: dict[str, float], embedding_model: str = "packaged:all-MiniLM-L6-v2",
                 embedding_device: str = "cpu", normalize_weights: Any = None, invrender: dict | None = None,
                 learned: dict | None = None, terms: dict[str, Any] | None = None, **_: Any) -> None:
        self.tau = float(tau)
        # further terms (vase.rewards.terms): name -> a callable with a weight, built by Hydra from reward.terms
        self.terms = {str(name): _built(name, t) for name, t in (terms or {}).items() if t is not None}
        # inverse rendering (vase.eval.invrender): for prompts whose target carries generator parameters, add
        # weight x the silhouette IoU of the answered parameters' vase against the true one
        self.invrender = {"weight": 0.0, "views": ["front", "left", "top"], "resolution": 64, **dict(invrender or {})}
        self._renderer: Any = None
        self._targets: dict[str, Any] = {}  # true parameters -> (frame, renders)
        # a learned term: agreement of the completion's dimensions with the six-head classifier's predictions from
        # the vase's views (a verifier that needs no targets); weight 0 (the default) leaves the reward as it was
        self.learned = {"weight": 0.0, "checkpoint": None, **dict(learned or {})}
        self._predictor: Any = None
        self._predicted: dict[str, dict[str, str]] = {}
        self.weights = normalized_weights(
            {d: float(v) for d, v in _complete("reward.weights", weights, DIMENSIONS).items()}, normalize_weights)
        self.similarity = {d: str(v) for d, v in _complete("reward.similarity", similarity, DIMENSIONS).items()}
        for d, kind in self.similarity.items():
            if kind not in SIMILARITIES:
                raise ValueError(f"reward.similarity.{d}={kind!r} is not a known similarity; use one of {SIMILARITIES}")
        self.embedding_model = embedding_model
        self.embedding_device = embedding_device
        self.penalty = {k: float(v) for k, v in _complete("reward.penalty", penalty, PENALTY_KEYS).items()}
        self.bonus = {k: float(v) for k, v in _complete("reward.bonus", bonus, BONUS_KEYS).items()}
        self._encoder: Any = None
        self._cache: dict[str, Any] = {}

    # pickling: the encoder and its cache stay behind (a worker loads its own)
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_encoder"] = None
        state["_cache"] = {}
        state["_renderer"] = None
        state["_targets"] = {}
        state["_predictor"] = None
        state["_predicted"] = {}
        return state

    def learned_scores(self, gen: list[dict[str, str | None]], images: list[Any] | None,
                       ids: list[str] | None) -> list[float]:
        """Per completion: the mean over dimensions of its similarity to the classifier's prediction (0 where it
        states a dimension not at all). Predictions are cached per vase id."""
        if images is None:
            raise ValueError("reward.learned needs the vase's images in the batch (`images`)")
        if self._predictor is None:
            from vase.models.attributes import AttributePredictor

            if not self.learned.get("checkpoint"):
                raise ValueError("reward.learned.weight > 0 needs reward.learned.checkpoint (attribute_heads.pt)")
            self._predictor = AttributePredictor(self.learned["checkpoint"])
        preds = []
        for k, imgs in enumerate(images):
            key = ids[k].split("#")[0] if ids is not None else None  # one prediction per vase, not per question
            if key is None or key not in self._predicted:
                p = self._predictor.predict(list(imgs))
                if key is not None:
                    self._predicted[key] = p
            preds.append(self._predicted[key] if key is not None else p)
        pairs = [(k, d, gen[k][d], preds[k].get(d)) for k in range(len(gen)) for d in DIMENSIONS]
        sims = self._similarities(pairs)
        return [sum(sims[(k, d)] for d in DIMENSIONS) / len(DIMENSIONS) for k in range(len(gen))]

    def invrender_score(self, text: str, true_params: dict) -> float:
        """Silhouette IoU (mean over ``invrender.views``) of the vase built from the parameters in ``text`` against
        the vase built from ``true_params``; 0.0 for an answer that parses to no valid parameters."""
        from vase.eval.invrender import MASK_BG, VaseParams, build_from_params, frame_of, parse_params, silhouette_ious
        from vase.render.renderer import VIEW_DIRECTIONS, Renderer, RenderSettings, parts_from_scene

        pred = parse_params(text)
        if pred is None:
            return 0.0
        if self._renderer is None:
            self._renderer = Renderer(RenderSettings(resolution=int(self.invrender["resolution"])))
        dirs = [VIEW_DIRECTIONS[v] for v in self.invrender["views"]]
        key = json.dumps(true_params, sort_keys=True)
        if key not in self._targets:  # a group's G completions share one target: build and render it once
            true_parts = parts_from_scene(build_from_params(VaseParams(**true_params)))
            frame = frame_of(true_parts)
            self._targets[key] = (frame, self._renderer.render_parts(true_parts, dirs, background=MASK_BG, frame=frame))
        frame, a = self._targets[key]
        b = self._renderer.render_parts(parts_from_scene(build_from_params(pred)), dirs, background=MASK_BG, frame=frame)
        ious = silhouette_ious(b, a)
        return sum(ious) / len(ious)

    @property
    def __name__(self) -> str:  # TRL names reward functions by __name__
        return "vase6d"

    def _embed(self, texts: list[str]) -> dict[str, Any]:
        """Embeddings of the distinct texts, batched in one call; cached (targets repeat across steps)."""
        import torch

        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            if self._encoder is None:
                from vase.metrics.encoders import cached_sentence_encoder

                self._encoder = cached_sentence_encoder(self.embedding_model, self.embedding_device)
            emb = torch.nn.functional.normalize(self._encoder.encode(todo), dim=-1)
            for t, e in zip(todo, emb):
                self._cache[t] = e
            if len(self._cache) > 50_000:  # completions are rarely seen twice: keep the cache bounded
                self._cache = dict(list(self._cache.items())[-25_000:])
        return {t: self._cache[t] for t in texts}

    def _similarities(self, pairs: list[tuple[int, str, str | None, str | None]]) -> dict[tuple[int, str], float]:
        out: dict[tuple[int, str], float] = {}
        emb_texts = []
        for k, dim, g, t in pairs:
            if g is None or t is None or not g.strip():
                out[(k, dim)] = 0.0
            elif self.similarity[dim] == "embedding":
                emb_texts += [g, t]
        emb = self._embed(emb_texts) if emb_texts else {}
        for k, dim, g, t in pairs:
            if (k, dim) in out:
                continue
            kind = self.similarity[dim]
            if kind == "embedding":
                s = float((emb[g] * emb[t]).sum())
            elif kind == "sequence":
                s = sequence_ratio(g, t)
            elif kind == "vocabulary":
                s = vocabulary_similarity(dim, g, t)
            else:
                s = year_iou(g, t)
            out[(k, dim)] = max(0.0, min(1.0, s))
        return out

    def dimension_similarity(self, dimension: str, generated: str, target: str) -> float:
        """The configured similarity of one dimension between two texts of it, in [0, 1] (before tau)."""
        return self._similarities([(0, dimension, generated, target)])[(0, dimension)]

    @staticmethod
    def _target_fields(target: Any, reference: str | None) -> dict[str, str | None]:
        if target is None:
            if reference is None:
                raise ValueError("the reward needs `targets` (six-dimension dicts) or `reference` captions in the batch")
            return extract_fields(reference)
        out: dict[str, str | None] = {}
        for d in DIMENSIONS:
            v = target.get(d) if isinstance(target, dict) else getattr(target, d, None)
            if d == "dating" and isinstance(v, (list, tuple)):
                v = f"{int(v[0])} to {int(v[1])}"
            out[d] = None if v is None else str(v)
        return out

    def compute(self, completions: list[Any], targets: list[Any] | None = None,
                reference: list[str] | None = None, images: list[Any] | None = None,
                ids: list[str] | None = None, **_: Any) -> RewardOutput:
        """Totals and components: ``<dim>`` (thresholded), ``<dim>_sim`` (raw), ``<dim>_pass``, ``penalty``, ``bonus``."""
        texts = [_text(c) for c in completions]
        n = len(texts)
        if targets is not None and len(targets) != n:
            raise ValueError(f"{n} completions but {len(targets)} targets")
        if reference is not None and len(reference) != n:
            raise ValueError(f"{n} completions but {len(reference)} reference captions")
        tgt = [self._target_fields(targets[k] if targets is not None else None,
                                   reference[k] if reference is not None else None) for k in range(n)]
        gen = [extract_fields(t) for t in texts]
        inv = [targets[k].get("invrender") if targets is not None and isinstance(targets[k], dict) else None
               for k in range(n)]
        # inverse-rendering answers are parameters, not captions: no dimension similarities to compute for them
        pairs = [(k, d, gen[k][d], tgt[k][d]) for k in range(n) if inv[k] is None for d in DIMENSIONS]
        sims = self._similarities(pairs)
        comp: dict[str, list[float]] = {f"{d}{s}": [] for d in DIMENSIONS for s in ("", "_sim", "_pass")}
        comp.update({"penalty": [], "bonus": [], "weighted": [], "invrender": [], "learned": []})
        learned_w = float(self.learned.get("weight", 0.0) or 0.0)
        learned = self.learned_scores(gen, images, ids) if learned_w > 0 else [0.0] * n
        extra = {name: [float(x) for x in term(texts, tgt, reference=reference, images=images, ids=ids)]
                 for name, term in self.terms.items()}
        for name, values in extra.items():
            if len(values) != n:
                raise ValueError(f"reward.terms.{name} returned {len(values)} values for {n} completions")
            comp[name] = [0.0 if inv[k] is not None else v for k, v in enumerate(values)]
        totals = []
        for k in range(n):
            if inv[k] is not None:  # an inverse-rendering prompt: its answer is parameters, not a caption
                iou = self.invrender_score(texts[k], inv[k])
                for d in DIMENSIONS:
                    comp[d].append(0.0)
                    comp[f"{d}_sim"].append(0.0)
                    comp[f"{d}_pass"].append(0.0)
                comp["penalty"].append(0.0)
                comp["bonus"].append(0.0)
                comp["weighted"].append(0.0)
                comp["invrender"].append(iou)
                comp["learned"].append(0.0)
                totals.append(float(self.invrender["weight"]) * iou)
                continue
            comp["invrender"].append(0.0)
            comp["learned"].append(learned[k])
            weighted = 0.0
            for d in DIMENSIONS:
                s = sims[(k, d)]
                passed = s >= self.tau and s > 0.0
                r = s if passed else 0.0
                comp[d].append(r)
                comp[f"{d}_sim"].append(s)
                comp[f"{d}_pass"].append(float(passed))
                weighted += self.weights[d] * r
            words = texts[k].split()
            p = 0.0
            if not self.penalty["min_words"] <= len(words) <= self.penalty["max_words"]:
                p += self.penalty["length"]
            p += self.penalty["repetition"] * repeated_ngram_fraction([w.lower() for w in words])
            if all(v is None for v in gen[k].values()):
                p += self.penalty["irrelevance"]
            b = 0.0
            ref = reference[k] if reference is not None else None
            if self.bonus.get("sequence", 0.0) and ref:
                b = self.bonus["sequence"] * sequence_ratio(texts[k], ref)
            comp["penalty"].append(p)
            comp["bonus"].append(b)
            comp["weighted"].append(weighted)
            totals.append(weighted - p + b + learned_w * learned[k]
                          + sum(t.weight * comp[name][k] for name, t in self.terms.items()))
        return RewardOutput(totals, comp)

    def __call__(self, completions: list[Any], **batch: Any) -> list[float]:
        return self.compute(completions, **batch).total
