"""Field extraction: read the six dimensions out of a generated caption or answer.

Two forms are understood, and mixed text too:

- structured: ``Fabric: Athenian; Technique: red-figure; Shape: calyx-krater; Date: -460 to -450; ...``
- museum prose: ``Athenian red-figure calyx-krater, c. 460–450 BCE, attributed to the Niobid Painter; depicting ...``

Categorical dimensions are found through the shared vocabulary (``vase.annotate.vocab``), so a synonym such as
"Attic" is read as "Athenian". A dimension that is not there comes back as None.
"""

from __future__ import annotations

import re

from vase.annotate.vocab import DIMENSIONS, VOCABULARY, canonical, parse_dating

_KEYS = {
    "fabric": "fabric", "ware": "fabric", "technique": "technique", "shape": "shape", "form": "shape",
    "date": "dating", "dating": "dating", "period": "dating", "decoration": "decoration", "subject": "decoration",
    "scene": "decoration", "iconography": "decoration", "attribution": "attribution", "painter": "attribution",
    "artist": "attribution",
}
_STRUCT = re.compile(r"(?i)\b(" + "|".join(sorted(_KEYS, key=len, reverse=True)) + r")\s*[:=]\s*([^;\n]+)")
_DECORATION = re.compile(r"(?i)\b(?:depicting|showing|decorated with|with a scene of|scene of|shows)\s+([^;.]+)")
_ATTRIBUTION = re.compile(r"(?i)\b(?:attributed to|by|painted by|manner of|workshop of|near)\s+([^;,.]+)")
_UNATTRIBUTED = re.compile(r"(?i)\b(unattributed|not attributed|anonymous|unknown painter)\b")


def _vocab_patterns() -> dict[str, list[tuple[re.Pattern[str], str]]]:
    out: dict[str, list[tuple[re.Pattern[str], str]]] = {}
    for dim, terms in VOCABULARY.items():
        forms = [(f, t.canonical) for t in terms for f in t.forms() if len(f) > 2 or f.isalpha()]
        forms.sort(key=lambda x: len(x[0]), reverse=True)  # "calyx-krater" before "krater"
        out[dim] = [(re.compile(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])", re.IGNORECASE), c) for f, c in forms]
    return out


_VOCAB_RE = _vocab_patterns()


def find_term(dimension: str, text: str) -> str | None:
    """The earliest vocabulary term of ``dimension`` in ``text``, in canonical form."""
    best: tuple[int, str] | None = None
    for pat, canon in _VOCAB_RE[dimension]:
        m = pat.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), canon)
    return best[1] if best else None


def extract_fields(text: str) -> dict[str, str | None]:
    """The six dimensions of ``text`` as strings (dating as written), None where absent.

    >>> f = extract_fields("Attic red-figure calyx-krater, c. 460–450 BCE, attributed to the Niobid Painter.")
    >>> f["fabric"], f["technique"], f["shape"], f["dating"], f["attribution"]
    ('Attic', 'red-figure', 'calyx-krater', 'c. 460–450 BCE', 'the Niobid Painter')
    """
    text = text or ""
    out: dict[str, str | None] = dict.fromkeys(DIMENSIONS)
    # 1. structured "Key: value" pairs win where present
    for m in _STRUCT.finditer(text):
        dim = _KEYS[m.group(1).lower()]
        value = m.group(2).strip().rstrip(".")
        if value and out[dim] is None:
            out[dim] = value
    # 2. prose: vocabulary terms as written, dating by the parser, decoration and attribution by their phrases
    for dim in ("fabric", "technique", "shape"):
        if out[dim] is None:
            out[dim] = _surface(dim, text)
    if out["dating"] is None:
        # the first clause that reads as a dating ("c. 525–475 BCE", "late 6th century BC", "ca. 510 BC")
        for clause in re.split(r"[,;\n]", text):
            if parse_dating(clause) is not None:
                out["dating"] = clause.strip().rstrip(".")
                break
    if out["decoration"] is None:
        m = _DECORATION.search(text)
        if m:
            out["decoration"] = m.group(1).strip()
        else:
            out["decoration"] = find_term("decoration", text)
    if out["attribution"] is None:
        m = _ATTRIBUTION.search(text)
        # "attributed to X" names a painter whatever X is; a bare "by X" only when X looks like one
        named = m is not None and (
            m.group(0).lower().startswith("attributed")
            or find_term("attribution", m.group(1)) is not None
            or re.search(r"(?i)\b(painter|group|workshop)\b", m.group(1)) is not None
        )
        if m and named:
            out["attribution"] = m.group(1).strip()
        elif _UNATTRIBUTED.search(text):
            out["attribution"] = "unattributed"
        else:
            out["attribution"] = find_term("attribution", text)
    return out


def _surface(dim: str, text: str) -> str | None:
    """The vocabulary form of ``dim`` as it is written in ``text`` (earliest occurrence)."""
    best: tuple[int, str] | None = None
    for pat, _ in _VOCAB_RE[dim]:
        m = pat.search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), m.group(0))
    return best[1] if best else None


def canonical_or_none(dimension: str, value: str | None) -> str | None:
    """Canonical vocabulary term for an extracted value (searching inside it), None if it names none."""
    if value is None:
        return None
    return canonical(dimension, value) or find_term(dimension, value)
