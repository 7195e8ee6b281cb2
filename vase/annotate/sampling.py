"""Sampling a vase's six dimensions with archaeologically plausible correlations (white-ground lekythoi are Athenian
and fifth century, Corinthian wares carry animal friezes, ...). The synthetic generator builds meshes from these
records, and the tiny model's tokenizer learns from their captions: both import it from here, so the model builders
never import the data package.
"""

from __future__ import annotations

import uuid

import numpy as np

from vase.annotate.records import VaseRecord, annotate

_TECHNIQUE_RULES: dict[str, dict] = {
    "black-figure": {
        "fabric": {"Athenian": 6, "Corinthian": 2, "Laconian": 1, "Chalcidian": 1, "Boeotian": 1},
        "dating": (-620, -480),
        "attribution": ["Exekias", "the Amasis Painter", "Lydos", "the Antimenes Painter", "unattributed"],
        "shape": ["amphora", "hydria", "lekythos", "kylix", "oinochoe", "krater", "skyphos", "alabastron"],
        "decoration": ["Herakles and the Nemean lion", "Herakles and the Erymanthian boar", "Athena Promachos",
                       "Achilles and Ajax playing dice", "a chariot race", "Dionysos with satyrs and maenads",
                       "an animal frieze"],
    },
    "red-figure": {
        "fabric": {"Athenian": 6, "Apulian": 2, "Lucanian": 1, "Campanian": 1},
        "dating": (-520, -340),
        "attribution": ["Euphronios", "the Berlin Painter", "the Kleophrades Painter", "the Niobid Painter",
                        "the Darius Painter", "unattributed"],
        "shape": ["krater", "pelike", "kylix", "hydria", "stamnos", "amphora", "oinochoe", "skyphos"],
        "decoration": ["a symposium scene", "Theseus and the Minotaur", "a warrior departing",
                       "Dionysos with satyrs and maenads", "Athena Promachos"],
    },
    "white-ground": {
        "fabric": {"Athenian": 1},
        "dating": (-470, -400),
        "attribution": ["the Achilles Painter", "the Reed Painter", "unattributed"],
        "shape": ["lekythos", "lekythos", "lekythos", "alabastron", "kylix"],
        "decoration": ["a woman at a grave stele", "a warrior departing"],
    },
    "black-glaze": {
        "fabric": {"Athenian": 3, "Campanian": 1, "Etruscan": 1},
        "dating": (-450, -300),
        "attribution": ["unattributed"],
        "shape": ["skyphos", "kylix", "oinochoe", "stamnos"],
        "decoration": ["palmettes and lotus buds"],
    },
}
_TECHNIQUE_WEIGHTS = {"black-figure": 4, "red-figure": 4, "white-ground": 2, "black-glaze": 1}


def _choice(rng: np.random.Generator, options: list[str] | dict[str, float]) -> str:
    if isinstance(options, dict):
        keys = list(options)
        p = np.array([options[k] for k in keys], dtype=float)
        return keys[int(rng.choice(len(keys), p=p / p.sum()))]
    return options[int(rng.integers(len(options)))]


def sample_record(rng: np.random.Generator, index: int) -> VaseRecord:
    """Sample one vase's six dimensions with archaeologically plausible correlations."""
    technique = _choice(rng, _TECHNIQUE_WEIGHTS)
    rule = _TECHNIQUE_RULES[technique]
    fabric = _choice(rng, rule["fabric"])
    lo, hi = rule["dating"]
    span = int(rng.choice([25, 50]))
    start = int(rng.integers(lo // 25, (hi - span) // 25 + 1)) * 25
    decoration = _choice(rng, rule["decoration"])
    if fabric == "Corinthian":
        decoration = "an animal frieze"
    attribution = _choice(rng, rule["attribution"])
    if fabric != "Athenian" and attribution not in ("the Darius Painter", "unattributed"):
        attribution = "unattributed"
    if fabric == "Apulian":
        attribution = _choice(rng, ["the Darius Painter", "unattributed"])
    vid = f"{uuid.UUID(bytes=rng.bytes(16), version=4)}_{index}"
    rec = VaseRecord(id=vid, fabric=fabric, technique=technique, shape=_choice(rng, rule["shape"]),
                     dating=(start, start + span), decoration=decoration, attribution=attribution,
                     model=f"models/{vid}.glb")
    return annotate(rec)
