"""Six-dimension records: raw museum metadata in, museum-style caption and QA pairs out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vase.annotate.vocab import DIMENSIONS, QUESTIONS, format_dating, parse_dating
from vase.errors import DataError


@dataclass
class VaseRecord:
    """One vase: its id, its six dimensions, and the texts derived from them.

    ``dating`` is a (start, end) pair of years, BCE negative, as in the raw metadata ("-525 to -475").
    """

    id: str
    fabric: str
    technique: str
    shape: str
    dating: tuple[int, int]
    decoration: str
    attribution: str
    model: str = ""
    caption: str = ""
    qa: list[dict[str, str]] = field(default_factory=list)

    def dimension_text(self, dim: str) -> str:
        """The dimension's value as text (dating in museum style)."""
        if dim == "dating":
            return format_dating(*self.dating)
        return str(getattr(self, dim))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; ``metadata`` holds the raw museum line as the real dataset has it."""
        d = asdict(self)
        d["dating"] = list(self.dating)
        d["metadata"] = raw_metadata(self)
        return d

    @classmethod
    def from_json(cls, obj: Any, source: str) -> VaseRecord:
        """Build a record from parsed JSON, raising a DataError naming ``source`` and the id or key at fault."""
        if not isinstance(obj, dict):
            raise DataError(f"{source}: expected an object per vase, got {type(obj).__name__}")
        vid = obj.get("id", "<no id>")
        missing = [k for k in ("id", *DIMENSIONS) if k not in obj]
        if missing:
            raise DataError(f"{source}: vase {vid!r} lacks key(s) {missing}")
        dating = obj["dating"]
        if isinstance(dating, str):
            parsed = parse_dating(dating)
            if parsed is None:
                raise DataError(f"{source}: vase {vid!r} has an unreadable dating {dating!r}")
            dating = parsed
        if not (isinstance(dating, (list, tuple)) and len(dating) == 2 and all(isinstance(x, int) for x in dating)):
            raise DataError(f"{source}: vase {vid!r} key 'dating' must be [start, end] years, got {dating!r}")
        for k in ("id", "fabric", "technique", "shape", "decoration", "attribution"):
            if not isinstance(obj[k], str):
                raise DataError(f"{source}: vase {vid!r} key {k!r} must be a string, got {obj[k]!r}")
        rec = cls(id=obj["id"], fabric=obj["fabric"], technique=obj["technique"], shape=obj["shape"],
                  dating=(int(dating[0]), int(dating[1])), decoration=obj["decoration"],
                  attribution=obj["attribution"], model=str(obj.get("model", "")), qa=list(obj.get("qa") or []))
        # a record without a caption gets the museum-style one its six dimensions make
        rec.caption = str(obj.get("caption") or make_caption(rec))
        return rec


def raw_metadata(rec: VaseRecord) -> str:
    """The raw museum line: ``Fabric: ATHENIAN; Technique: BLACK-FIGURE; Shape: LEKYTHOS; Date: -525 to -475; ...``."""
    return (
        f"Fabric: {rec.fabric.upper()}; Technique: {rec.technique.upper()}; Shape: {rec.shape.upper()}; "
        f"Date: {rec.dating[0]} to {rec.dating[1]}; Decoration: {rec.decoration}; Attribution: {rec.attribution}"
    )


_RAW_KEYS = {
    "fabric": "fabric",
    "technique": "technique",
    "shape": "shape",
    "date": "dating",
    "dating": "dating",
    "decoration": "decoration",
    "attribution": "attribution",
}


def parse_raw_metadata(line: str, vase_id: str) -> VaseRecord:
    """Parse a raw museum metadata line into a record (the inverse of :func:`raw_metadata`)."""
    found: dict[str, str] = {}
    for part in line.split(";"):
        if ":" not in part:
            continue
        key, value = part.split(":", 1)
        dim = _RAW_KEYS.get(key.strip().lower())
        if dim:
            found[dim] = value.strip()
    missing = [d for d in DIMENSIONS if d not in found]
    if missing:
        raise DataError(f"metadata of vase {vase_id!r} lacks {missing}: {line!r}")
    dating = parse_dating(found["dating"])
    if dating is None:
        raise DataError(f"metadata of vase {vase_id!r} has an unreadable date {found['dating']!r}")

    def title(s: str) -> str:
        return s.title() if s.isupper() else s

    return VaseRecord(
        id=vase_id,
        fabric=title(found["fabric"]),
        technique=found["technique"].lower(),
        shape=found["shape"].lower(),
        dating=dating,
        decoration=found["decoration"],
        attribution=found["attribution"],
    )


def make_caption(rec: VaseRecord) -> str:
    """Museum-style caption, e.g. "Athenian black-figure lekythos, c. 525–475 BCE, depicting Herakles and the boar;
    attributed to the Amasis Painter."."""
    text = f"{rec.fabric} {rec.technique} {rec.shape}, {format_dating(*rec.dating)}, depicting {rec.decoration}"
    if rec.attribution.lower() != "unattributed":
        text += f"; attributed to {rec.attribution}"
    return text + "."


def make_qa(rec: VaseRecord) -> list[dict[str, str]]:
    """One "What is the <dimension> of the vase?" pair per dimension, answers as short museum phrases."""
    out = []
    for dim in DIMENSIONS:
        answer = rec.dimension_text(dim)
        out.append({"dimension": dim, "question": QUESTIONS[dim], "answer": answer[0].upper() + answer[1:] + "."})
    return out


def annotate(rec: VaseRecord) -> VaseRecord:
    """Fill caption and QA pairs from the six dimensions."""
    rec.caption = make_caption(rec)
    rec.qa = make_qa(rec)
    return rec
