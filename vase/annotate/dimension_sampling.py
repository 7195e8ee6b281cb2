"""Sampling a vase's six dimensions with archaeologically plausible correlations (white-ground lekythoi are Athenian
and fifth century, Corinthian wares carry animal friezes, ...). The synthetic generator builds meshes from these
records, and the tiny model's tokenizer learns from their captions: both import it from here, so the model builders
never import the data package.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Painter:
    """A named painter as the Beazley Archive knows one: active for a few decades (not the technique's centuries),
    working in a workshop that favoured some shapes and subjects, and recognisable by a hand: the ornament under
    the frieze, added colour, line weight, whether the frieze is framed at all, how figures stand. The synthetic
    vases paint that hand (vase.data.synthetic) so that what the views show narrows attribution and date."""

    career: tuple[int, int]          # active years, BCE negative (Beazley's dates, rounded)
    shapes: tuple[str, ...]          # the workshop's favoured shapes
    decorations: tuple[str, ...]     # the subjects the painter returned to
    ornament: str                    # the band under the frieze: key | tongues | dots | zigzag | checker | meander | waves | none
    accent: str | None = None        # added colour on the figures: purple | white | None
    stroke: int = 2                  # line weight of limbs
    framed: bool = True              # border lines above and below the frieze
    staggered: bool = False          # figures on several ground levels


# Careers and workshop habits follow Beazley's attributions (ABV, ARV2, RVAp), simplified to this vocabulary.
PAINTERS: dict[str, Painter] = {
    "Exekias": Painter((-545, -525), ("amphora", "kylix", "krater"),
                       ("Achilles and Ajax playing dice", "Dionysos with satyrs and maenads", "Herakles and the Nemean lion"),
                       "tongues", accent="purple", stroke=1),
    "the Amasis Painter": Painter((-560, -515), ("amphora", "oinochoe", "lekythos", "kylix"),
                                  ("Dionysos with satyrs and maenads", "Athena Promachos"), "dots", accent="white", stroke=1),
    "Lydos": Painter((-560, -540), ("krater", "hydria", "amphora"),
                     ("Dionysos with satyrs and maenads", "Herakles and the Nemean lion", "an animal frieze"),
                     "zigzag", accent="purple", stroke=3),
    "the Antimenes Painter": Painter((-530, -505), ("hydria", "amphora"),
                                     ("a chariot race", "Herakles and the Erymanthian boar"), "checker", stroke=2),
    "Euphronios": Painter((-520, -500), ("krater", "kylix", "pelike"),
                          ("a symposium scene", "a warrior departing"), "meander", stroke=1),
    "the Berlin Painter": Painter((-500, -460), ("amphora", "hydria", "oinochoe"),
                                  ("Athena Promachos", "a warrior departing"), "none", stroke=1, framed=False),
    "the Kleophrades Painter": Painter((-505, -475), ("amphora", "krater", "hydria", "pelike", "stamnos"),
                                       ("Dionysos with satyrs and maenads", "a warrior departing"), "dots", stroke=3),
    "the Niobid Painter": Painter((-475, -450), ("krater", "hydria", "amphora"),
                                  ("a warrior departing", "Athena Promachos"), "zigzag", stroke=2, staggered=True),
    "the Darius Painter": Painter((-340, -320), ("krater", "amphora", "hydria"),
                                  ("a warrior departing", "Dionysos with satyrs and maenads"), "waves", accent="white"),
    "the Achilles Painter": Painter((-460, -430), ("lekythos", "amphora"),
                                    ("a woman at a grave stele", "a warrior departing"), "meander", stroke=1),
    "the Reed Painter": Painter((-420, -400), ("lekythos",), ("a woman at a grave stele",), "none", accent="purple",
                                stroke=3, framed=False),
}
UNATTRIBUTED_HAND = Painter((0, 0), (), (), "key")  # the anonymous vases' plain workshop look
FAVOURED = 0.8  # how often a painter's vase has one of the workshop's shapes, and one of the painter's subjects


def hand(attribution: str) -> Painter:
    """The hand a vase is painted in: its painter's, or the anonymous workshops' for an unattributed vase."""
    return PAINTERS.get(attribution, UNATTRIBUTED_HAND)


def _dating(rng: np.random.Generator, window: tuple[int, int], painter: Painter | None) -> tuple[int, int]:
    """A museum-style date on the 25-year grid: inside the technique's window, or, for a named painter, the quarter
    or half century around a year of the career (Exekias: 550 to 525 BC, or 575 to 525 BC)."""
    span = int(rng.choice([25, 50]))
    if painter is None:
        lo, hi = window
        start = int(rng.integers(lo // 25, (hi - span) // 25 + 1)) * 25
    else:
        year = float(rng.uniform(*painter.career))
        start = int(round((year - span / 2) / 25)) * 25
    return start, start + span


def _choice(rng: np.random.Generator, options: list[str] | dict[str, float]) -> str:
    if isinstance(options, dict):
        keys = list(options)
        p = np.array([options[k] for k in keys], dtype=float)
        return keys[int(rng.choice(len(keys), p=p / p.sum()))]
    return options[int(rng.integers(len(options)))]


def sample_record(rng: np.random.Generator, index: int) -> VaseRecord:
    """Sample one vase's six dimensions with archaeologically plausible correlations: technique, fabric, then the
    painter (a named painter only on the fabrics they worked in), whose career dates the vase and whose workshop's
    shapes and subjects it favours."""
    technique = _choice(rng, _TECHNIQUE_WEIGHTS)
    rule = _TECHNIQUE_RULES[technique]
    fabric = _choice(rng, rule["fabric"])
    attribution = _choice(rng, rule["attribution"])
    if fabric != "Athenian" and attribution not in ("the Darius Painter", "unattributed"):
        attribution = "unattributed"
    if fabric == "Apulian":
        attribution = _choice(rng, ["the Darius Painter", "unattributed"])
    elif attribution == "the Darius Painter":
        attribution = "unattributed"  # an Apulian painter: not on Athenian or Campanian vases
    painter = PAINTERS.get(attribution)
    favoured = painter is not None and rng.random() < FAVOURED
    shape = _choice(rng, list(painter.shapes) if favoured else rule["shape"])
    subjects = [d for d in painter.decorations if d in rule["decoration"]] if painter is not None else []
    decoration = _choice(rng, subjects if subjects and rng.random() < FAVOURED else rule["decoration"])
    if fabric == "Corinthian":
        decoration = "an animal frieze"
    dating = _dating(rng, rule["dating"], painter)
    vid = f"{uuid.UUID(bytes=rng.bytes(16), version=4)}_{index}"
    rec = VaseRecord(id=vid, fabric=fabric, technique=technique, shape=shape, dating=dating, decoration=decoration,
                     attribution=attribution, model=f"models/{vid}.glb")
    return annotate(rec)


def sample_tokenizer_record(rng: np.random.Generator, index: int) -> VaseRecord:
    """The record mix the tiny model's tokenizer is trained on (``vase.models.tiny._corpus``), frozen as the
    generator's version 1 sampled it (no painters' careers or workshops), draw for draw: the tokenizer only needs the
    vocabulary's words in captions, and freezing its corpus keeps the tiny model, its cache key and every result
    measured with it unchanged when the generator's structure changes."""
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
