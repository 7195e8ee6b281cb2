"""The six archaeological dimensions and their vocabulary: the one place that knows what a fabric or a dating is.

The synthetic generator samples from these lists, the reward and the VQA metrics parse against them, so they
can never disagree. Each entry has a canonical form (what captions say) and synonyms (what people also write).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

DIMENSIONS: tuple[str, ...] = ("fabric", "technique", "shape", "dating", "decoration", "attribution")
"""The six dimensions, in the paper's order."""

QUESTIONS: dict[str, str] = {dim: f"What is the {dim} of the vase?" for dim in DIMENSIONS}


@dataclass(frozen=True)
class Term:
    """One vocabulary entry: the canonical spelling and the other ways people write it."""

    canonical: str
    synonyms: tuple[str, ...] = ()

    def forms(self) -> tuple[str, ...]:
        """All spellings, canonical first."""
        return (self.canonical, *self.synonyms)


FABRICS: tuple[Term, ...] = (
    Term("Athenian", ("Attic",)),
    Term("Corinthian", ("Protocorinthian",)),
    Term("Laconian", ("Spartan",)),
    Term(
        "Boeotian",
    ),
    Term(
        "Chalcidian",
    ),
    Term("East Greek", ("Ionian",)),
    Term("Apulian", ("South Italian",)),
    Term(
        "Lucanian",
    ),
    Term(
        "Campanian",
    ),
    Term(
        "Etruscan",
    ),
)

TECHNIQUES: tuple[Term, ...] = (
    Term("black-figure", ("black figure", "blackfigure", "b.f.", "bf")),
    Term("red-figure", ("red figure", "redfigure", "r.f.", "rf")),
    Term("white-ground", ("white ground", "whiteground", "outline on white ground")),
    Term("black-glaze", ("black glaze", "black-gloss", "black gloss")),
)

SHAPES: tuple[Term, ...] = (
    Term("amphora", ("neck-amphora", "neck amphora", "belly amphora", "amphorae")),
    Term("hydria", ("kalpis", "hydriai")),
    Term("lekythos", ("lekythoi",)),
    Term("kylix", ("cup", "kylikes", "stemmed cup")),
    Term("krater", ("calyx-krater", "column-krater", "volute-krater", "bell-krater", "crater")),
    Term("oinochoe", ("jug", "oinochoai", "olpe")),
    Term("pelike", ("pelikai",)),
    Term("alabastron", ("alabastra",)),
    Term(
        "stamnos",
    ),
    Term("skyphos", ("skyphoi",)),
)

DECORATIONS: tuple[Term, ...] = (
    Term("Herakles and the Nemean lion", ("Heracles and the lion", "Herakles wrestling the lion")),
    Term("Herakles and the Erymanthian boar", ("Herakles and the boar",)),
    Term("Dionysos with satyrs and maenads", ("Dionysus with satyrs", "Dionysiac scene")),
    Term("Athena Promachos", ("Athena striding", "Athena")),
    Term("a warrior departing", ("warrior's departure", "departure of a warrior")),
    Term("a symposium scene", ("symposion", "banqueters reclining")),
    Term("Theseus and the Minotaur", ("Theseus slaying the Minotaur",)),
    Term("Achilles and Ajax playing dice", ("Achilles and Aias gaming",)),
    Term("a woman at a grave stele", ("mourner at a tomb", "woman at a tomb")),
    Term("an animal frieze", ("animal frieze", "frieze of animals", "lions and goats")),
    Term("palmettes and lotus buds", ("palmettes", "lotus and palmette")),
    Term("a chariot race", ("chariot", "quadriga")),
)

ATTRIBUTIONS: tuple[Term, ...] = (
    Term("Exekias", ("Exechias",)),
    Term("the Amasis Painter", ("Amasis Painter", "Amasis")),
    Term("Lydos", ("Lydus",)),
    Term("the Antimenes Painter", ("Antimenes Painter",)),
    Term("Euphronios", ("Euphronius",)),
    Term("the Berlin Painter", ("Berlin Painter",)),
    Term("the Kleophrades Painter", ("Kleophrades Painter", "Cleophrades Painter")),
    Term("the Niobid Painter", ("Niobid Painter",)),
    Term("the Achilles Painter", ("Achilles Painter",)),
    Term("the Reed Painter", ("Reed Painter", "Group R")),
    Term("the Darius Painter", ("Darius Painter",)),
    Term("the Corinthian Animal Painter", ("Corinthian Animal Painter",)),
    Term("unattributed", ("unknown", "not attributed", "anonymous")),
)

VOCABULARY: dict[str, tuple[Term, ...]] = {
    "fabric": FABRICS,
    "technique": TECHNIQUES,
    "shape": SHAPES,
    "decoration": DECORATIONS,
    "attribution": ATTRIBUTIONS,
}
"""Categorical dimensions; dating is numeric and handled by `parse_dating`."""


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


_LOOKUP: dict[str, dict[str, str]] = {
    dim: {_norm(form): term.canonical for term in terms for form in term.forms()} for dim, terms in VOCABULARY.items()
}


def canonical(dimension: str, text: str) -> str | None:
    """Map a spelling to its canonical vocabulary term, or None when it is not in the vocabulary.

    >>> canonical("fabric", "Attic")
    'Athenian'
    >>> canonical("technique", "Red figure")
    'red-figure'
    """
    if dimension not in _LOOKUP:
        raise KeyError(f"unknown categorical dimension {dimension!r}; expected one of {sorted(_LOOKUP)}")
    return _LOOKUP[dimension].get(_norm(text))


def terms(dimension: str) -> tuple[str, ...]:
    """Canonical terms of a categorical dimension, in vocabulary order."""
    return tuple(t.canonical for t in VOCABULARY[dimension])


# ---------------------------------------------------------------- dating
# Years are integers, negative for BCE (the paper's raw metadata writes "-525 to -475").

_DASH = r"\s*(?:-|–|—|to|until)\s*"
_BC = r"\s*(?:b\.?\s?c\.?\s?e?\.?|bce)"
_ORDINAL = {
    "1st": 1,
    "first": 1,
    "2nd": 2,
    "second": 2,
    "3rd": 3,
    "third": 3,
    "4th": 4,
    "fourth": 4,
    "5th": 5,
    "fifth": 5,
    "6th": 6,
    "sixth": 6,
    "7th": 7,
    "seventh": 7,
    "8th": 8,
    "eighth": 8,
}
_QUARTER = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3, "last": 3}
_ORD_RE = "|".join(sorted(_ORDINAL, key=len, reverse=True))
_QUART_RE = "|".join(sorted(_QUARTER, key=len, reverse=True))
_CIRCA_SPREAD = 10  # "ca. 510 BC" is read as 520-500 BC: a single year with the usual +/- a decade


def parse_dating(text: str) -> tuple[int, int] | None:
    """Parse a dating into (start, end) years, BCE negative; None if no dating is found.

    Accepts the forms people write: "-525 to -475", "c. 525–475 BCE", "525-475 B.C.", "ca. 510 BC",
    "late 6th century BC", "second quarter of the 5th century BC".

    >>> parse_dating("c. 525–475 BCE")
    (-525, -475)
    >>> parse_dating("-450 to -400")
    (-450, -400)
    >>> parse_dating("second quarter of the 5th century BC")
    (-475, -450)
    """
    t = _norm(text)
    # signed numeric range, as in the raw metadata
    m = re.search(rf"(-\s?\d{{2,4}}){_DASH}(-\s?\d{{2,4}})", t)
    if m:
        a, b = (int(x.replace(" ", "")) for x in m.groups())
        return (min(a, b), max(a, b))
    # "525-475 BCE", "c. 525 – 475 b.c."
    m = re.search(rf"(\d{{2,4}}){_DASH}(\d{{2,4}}){_BC}", t)
    if m:
        a, b = (-int(x) for x in m.groups())
        return (min(a, b), max(a, b))
    # quarter / third / half of a century
    m = re.search(rf"({_QUART_RE})\s+quarter\s+of\s+the\s+({_ORD_RE})\s+century", t)
    if m:
        start = -100 * _ORDINAL[m.group(2)]
        q = _QUARTER[m.group(1)]
        return (start + 25 * q, start + 25 * (q + 1))
    m = re.search(
        rf"(early|mid|middle|late|first half of the|second half of the)[\s-]+(?:the\s+)?({_ORD_RE})\s+century", t
    )
    if m:
        start = -100 * _ORDINAL[m.group(2)]
        part = m.group(1)
        span = {
            "early": (0, 33),
            "mid": (33, 67),
            "middle": (33, 67),
            "late": (67, 100),
            "first half of the": (0, 50),
            "second half of the": (50, 100),
        }[part]
        return (start + span[0], start + span[1])
    m = re.search(rf"({_ORD_RE})\s+century", t)
    if m:
        start = -100 * _ORDINAL[m.group(1)]
        return (start, start + 100)
    # a single year: "ca. 510 BC", "510 bce"
    m = re.search(rf"(\d{{2,4}}){_BC}", t)
    if m:
        y = -int(m.group(1))
        return (y - _CIRCA_SPREAD, y + _CIRCA_SPREAD)
    m = re.search(r"(-\d{2,4})\b", t)
    if m:
        y = int(m.group(1))
        return (y - _CIRCA_SPREAD, y + _CIRCA_SPREAD)
    return None


def format_dating(start: int, end: int) -> str:
    """Museum-style dating for BCE years: (-525, -475) -> "c. 525–475 BCE"."""
    if start >= 0 or end > 0:
        raise ValueError(f"format_dating handles BCE years only, got ({start}, {end})")
    return f"c. {-start}–{-end} BCE"


def dating_iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Intersection over union of two year ranges (the 2D predecessor's dating similarity).

    >>> dating_iou((-450, -400), (-475, -425))
    0.3333333333333333
    """
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else float(a == b)


def sequence_ratio(a: str, b: str) -> float:
    """difflib's ratio of the lower-cased strings.

    >>> sequence_ratio("Athenian", "athenian")
    1.0
    """
    return difflib.SequenceMatcher(None, a.lower().strip(), b.lower().strip()).ratio()
