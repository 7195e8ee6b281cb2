"""The verifiable reward of VaseVQA-3D: a weighted sum of reward terms (``vase.rewards.terms``).

The paper's reward (``conf/reward/vase6d.yaml``), with g_i the generated and t_i the target content of dimension i::

    r_i = sim_i(g_i, t_i) if sim_i >= tau else 0
    R   = sum_i w_i * r_i - P + B

is six `Similarity` terms, a `FormatPenalty` (-P) and a
`SequenceBonus` (B, weight 0.1), each one entry under ``reward.terms``; inverse rendering,
the learned verifier and a user's own terms are further entries. ``sim_i`` is chosen per dimension (see
``vase.rewards.similarity``); a dimension the completion does not mention scores 0.

The class is a plain picklable callable ``(completions, **batch) -> list[float]`` (TRL's reward-function form); the
sentence encoder runs on its own device (CPU by default), outside any DeepSpeed partitioning, is loaded lazily and
is not pickled, and target embeddings are cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from vase.annotate.vocab import DIMENSIONS
from vase.config import load_option
from vase.rewards.extract import extract_fields
from vase.rewards.terms import RewardTerm, Similarity


def _text(completion: Any) -> str:
    """A completion as text: TRL passes strings, or chat messages for conversational data; nothing (None) is the
    empty answer, never the text "None".

    >>> _text(None), _text([{"role": "assistant", "content": "Kylix."}])
    ('', 'Kylix.')
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        if isinstance(content, list):
            return " ".join(c.get("text", "") for c in content if isinstance(c, dict))
        return str(content)
    return str(completion)


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


def _built(name: str, term: Any) -> RewardTerm:
    """A reward term as given: built already (Hydra instantiates ``_target_`` nodes), or a config dict to build."""
    if isinstance(term, dict) or hasattr(term, "keys"):
        if "_target_" not in term:
            raise ValueError(f"reward.terms.{name} needs a _target_ (a class such as vase.rewards.terms.Keyword)")
        term = instantiate(dict(term))
    if not callable(term) or not hasattr(term, "weight"):
        raise ValueError(f"reward.terms.{name}: {type(term).__name__} must be callable and have a weight")
    return term


def _is_dimension_term(node: Any) -> bool:
    target = str(node.get("_target_", "")) if hasattr(node, "get") else ""
    if target == "vase.rewards.terms.Similarity":
        return True
    try:
        return issubclass(get_class(target), Similarity)
    except Exception:  # an unimportable target is reported by the config check, not here
        return False


def effective_weights(reward_cfg: Any) -> dict[str, float]:
    """The weights the dimension terms of a ``reward`` config really carry, after ``normalize_weights``: what
    config.yaml, W&B and the sweep summary show beside the weights as given. Builds no term."""
    terms = reward_cfg.get("terms") or {}
    weights = {str(t["dimension"]): float(t.get("weight", 1.0)) for t in terms.values()
               if t is not None and _is_dimension_term(t)}
    return normalized_weights(weights, reward_cfg.get("normalize_weights"))


def reward_from_config(option: str = "vase6d", **overrides: Any) -> VaseReward:
    """The reward that ``conf/reward/<option>.yaml`` defines, with ``overrides`` merged in (nested dicts merge
    key by key, e.g. ``terms={"penalty": {"length": 0.0}}``), for use outside Hydra (tests, benchmarks, notebooks)."""
    return reward_from_node(OmegaConf.merge(load_option("reward", option), OmegaConf.create(overrides)))


def reward_from_node(cfg: Any) -> VaseReward:
    """The reward a ``reward`` config node defines (interpolations such as ``${...weights.shape}`` resolved)."""
    node = OmegaConf.to_container(cfg, resolve=True)
    node.pop("_target_", None)
    return VaseReward(**node)


@dataclass
class RewardOutput:
    """Totals and named parts, each a list aligned with the completions."""

    total: list[float]
    components: dict[str, list[float]] = field(default_factory=dict)


class VaseReward:
    """R = sum over ``terms`` of weight x value (the paper's R = sum_i w_i r_i - P + B by default).

    Every value comes from the config (``conf/reward/vase6d.yaml`` is the one place that holds the paper's weights,
    similarities and penalties); `reward_from_config` builds the configured reward outside Hydra.

    Args:
        tau: the threshold of the dimension terms (each term carries it; ``${...tau}`` in the YAML).
        terms: name -> term (built, or a ``{_target_, weight, ...}`` dict); ``None`` entries are switched off.
        weights: ``reward.weights``, the six dimension terms' weights as given; each dimension term's weight must
            equal it (the YAML interpolates them), so the two can never disagree silently.
        normalize_weights: ``None`` keeps the dimension weights; ``True`` rescales them to sum to 1; a list of
            dimensions holds those and rescales the rest (`normalized_weights`).

    Targets come from the batch: ``targets`` (dicts with the six dimensions, dating as text or [start, end]) and/or
    ``reference`` (target captions; fields are extracted from them where ``targets`` is absent).

    Examples:
        >>> r = reward_from_config(terms={"decoration": {"similarity": "sequence"}, "penalty": {"length": 0.0},
        ...                               "bonus": {"weight": 0.0}})
        >>> t = {"fabric": "Athenian", "technique": "red-figure", "shape": "kylix", "dating": [-480, -470],
        ...      "decoration": "a symposium scene", "attribution": "Douris"}
        >>> [round(x, 6) for x in r(["Attic red-figure kylix, c. 480–470 BCE, depicting a symposium scene; attributed to Douris."], targets=[t])]
        [1.0]
    """

    def __init__(self, tau: float, terms: dict[str, Any], weights: dict[str, float] | None = None,
                 normalize_weights: Any = None, embedding_model: str = "packaged:all-MiniLM-L6-v2",
                 embedding_device: str = "cpu", effective_weights: Any = None) -> None:
        self.tau = float(tau)
        # embedding_model / embedding_device / effective_weights: the YAML's shared keys, which the terms read by
        # interpolation (``${...embedding_model}``) and the pipeline writes for people; the reward itself needs none
        self.terms = {str(name): _built(name, t) for name, t in (terms or {}).items() if t is not None}
        if not self.terms:
            raise ValueError("reward.terms is empty: the reward needs at least one term")
        dims = {name: t for name, t in self.terms.items() if isinstance(t, Similarity)}
        seen: dict[str, str] = {}
        for name, t in dims.items():
            if t.dimension in seen:
                raise ValueError(f"reward.terms.{name} and reward.terms.{seen[t.dimension]} both score dimension "
                                 f"{t.dimension!r}; keep one")
            seen[t.dimension] = name
            if weights is not None:
                if t.dimension not in weights:
                    raise ValueError(f"reward.weights is missing {t.dimension!r} (reward.terms.{name} scores it)")
                if abs(float(weights[t.dimension]) - t.weight) > 1e-12:
                    raise ValueError(f"reward.terms.{name}.weight={t.weight} but reward.weights.{t.dimension}="
                                     f"{weights[t.dimension]}: set reward.weights.{t.dimension} (the term's weight "
                                     f"follows it)")
        unknown = [d for d in (weights or {}) if d not in DIMENSIONS]
        if unknown:
            raise ValueError(f"reward.weights has unknown keys {unknown}; the keys are {list(DIMENSIONS)}")
        # the weights the dimension terms really carry (normalize_weights rescales them here, once)
        self.weights = normalized_weights({t.dimension: t.weight for t in dims.values()}, normalize_weights)
        for t in dims.values():
            t.weight = self.weights[t.dimension]
        self._by_dimension = {t.dimension: t for t in dims.values()}

    @property
    def __name__(self) -> str:  # TRL names reward functions by __name__
        return "vase6d"

    def dimension_similarity(self, dimension: str, generated: str, target: str) -> float:
        """The configured similarity of one dimension between two texts of it, in [0, 1] (before tau)."""
        if dimension not in self._by_dimension:
            raise ValueError(f"the reward has no term for dimension {dimension!r} (reward.terms lists "
                             f"{sorted(self._by_dimension)})")
        return self._by_dimension[dimension].similarity_of(generated, target)

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
        """Totals and components: each term's value by its name (before its weight) and its further parts
        (``<dim>_sim``, ``<dim>_pass`` for the dimension terms), and ``weighted`` (sum of w_i r_i)."""
        texts = [_text(c) for c in completions]
        n = len(texts)
        if targets is not None and len(targets) != n:
            raise ValueError(f"{n} completions but {len(targets)} targets")
        if reference is not None and len(reference) != n:
            raise ValueError(f"{n} completions but {len(reference)} reference captions")
        # inverse-rendering prompts answer generator parameters, not captions: only "parameters" terms score them
        params = [targets[k].get("invrender") if targets is not None and isinstance(targets[k], dict) else None
                  for k in range(n)]
        tgt = [None if params[k] is not None else
               self._target_fields(targets[k] if targets is not None else None,
                                   reference[k] if reference is not None else None) for k in range(n)]
        gen = [None if params[k] is not None else extract_fields(texts[k]) for k in range(n)]
        comp: dict[str, list[float]] = {}
        totals, weighted = [0.0] * n, [0.0] * n
        for name, term in self.terms.items():
            on_params = getattr(term, "answers", "caption") == "parameters"
            idx = [k for k in range(n) if (params[k] is not None) == on_params]

            def sub(xs: Any, idx: list[int] = idx) -> Any:
                return None if xs is None else [xs[k] for k in idx]

            parts = term.components if isinstance(term, RewardTerm) else (lambda *a, t=term, **b: {"": t(*a, **b)})
            got = parts([texts[k] for k in idx], [params[k] if on_params else tgt[k] for k in idx],
                        reference=sub(reference), images=sub(images), ids=sub(ids), generated=sub(gen))
            for suffix, values in got.items():
                values = [float(v) for v in values]
                if len(values) != len(idx):
                    raise ValueError(f"reward.terms.{name} returned {len(values)} values for {len(idx)} completions")
                full = [0.0] * n
                for k, v in zip(idx, values):
                    full[k] = v
                comp[f"{name}{suffix}"] = full
            for k in range(n):
                totals[k] += term.weight * comp[name][k]
                if isinstance(term, Similarity):
                    weighted[k] += term.weight * comp[name][k]
        comp["weighted"] = weighted
        return RewardOutput(totals, comp)

    def __call__(self, completions: list[Any], **batch: Any) -> list[float]:
        return self.compute(completions, **batch).total
