"""Six-dimension records: raw museum metadata in, museum-style caption and QA pairs out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vase.annotate.vocab import DIMENSIONS, QUESTIONS, format_dating, parse_dating
from vase.errors import DataError


@dataclass
class VaseRecord:
    """One vase: its id, its six dimensions, and the texts derived from them.

    ``dating`` is a (start, end) pair of years, BCE negative, as in the raw metadata ("-525 to -475"). A dimension a
    dataset does not state is None (an ms-swift caption file, the paper's evaluation folder): such records train
    captions; rewards and per-dimension questions need the dimensions and say so.
    ``images`` / ``videos`` are explicit media files (layouts that list them); otherwise the views are looked up
    by id under ``images/<view>/``. ``prompt`` is the dataset's own caption instruction, when it has one; ``system``
    its system prompt (every sample of the vase is asked under it).
    """

    id: str
    fabric: str | None
    technique: str | None
    shape: str | None
    dating: tuple[int, int] | None
    decoration: str | None
    attribution: str | None
    model: str = ""
    caption: str = ""
    qa: list[dict[str, str]] = field(default_factory=list)
    prompt: str = ""
    images: list[str] = field(default_factory=list)
    videos: list[str] = field(default_factory=list)
    system: str = ""  # the dataset's own system prompt (an ms-swift conversation's system message), when it has one
    # where it was read, for messages that name it: an ms-swift JSONL's "file:line" (and how its id was made)
    source: str = ""

    def where(self) -> str:
        """``"<source>: "`` for a record read from a line of a file, else ""."""
        return f"{self.source}: " if self.source else ""

    def missing_dimensions(self) -> list[str]:
        return [d for d in DIMENSIONS if getattr(self, d) is None]

    @property
    def has_dimensions(self) -> bool:
        return not self.missing_dimensions()

    def dimension_text(self, dim: str) -> str:
        """The dimension's value as text (dating in museum style); a DataError if the dataset does not state it."""
        value = getattr(self, dim)
        if value is None:
            raise DataError(f"vase {self.id!r} has no {dim} (its dataset does not state it)")
        if dim == "dating":
            return format_dating(*value)
        return str(value)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; ``metadata`` holds the raw museum line as the real dataset has it."""
        d = asdict(self)
        del d["source"]  # where it was read is not part of the vase
        d["dating"] = list(self.dating) if self.dating is not None else None
        for k in ("prompt", "images", "videos", "system"):
            if not d[k]:
                del d[k]
        if self.has_dimensions:
            d["metadata"] = raw_metadata(self)
        return d

    @classmethod
    def from_json(cls, obj: Any, source: str, problems: list | None = None) -> VaseRecord:
        """Build a record from parsed JSON, raising a DataError naming ``source`` and the id or key at fault.

        With ``problems`` (a list), each fault is appended as ``(kind, id, message)`` instead and the record is
        built with what could be read (a missing or unreadable dimension becomes None): the dataset checker's mode.
        """
        if not isinstance(obj, dict):
            raise DataError(f"{source}: expected an object per vase, got {type(obj).__name__}")
        vid = obj.get("id", "<no id>")
        if not isinstance(vid, str):
            raise DataError(f"{source}: vase id {vid!r} must be a string")

        def fault(kind: str, message: str) -> None:
            if problems is None:
                raise DataError(message)
            problems.append((kind, vid, message))

        if "id" not in obj:
            raise DataError(f"{source}: a vase has no 'id' key (keys: {sorted(obj)[:8]})")
        missing = [k for k in DIMENSIONS if k not in obj or obj[k] is None]
        if missing:
            fault("missing_dimension", f"{source}: vase {vid!r} lacks key(s) {missing}")
        values: dict[str, Any] = {d: obj.get(d) for d in DIMENSIONS}
        dating = values["dating"]
        if isinstance(dating, str):
            parsed = parse_dating(dating)
            if parsed is None:
                fault("bad_date", f"{source}: vase {vid!r} has an unreadable dating {dating!r}")
            dating = parsed
        if dating is not None and not (isinstance(dating, (list, tuple)) and len(dating) == 2
                                       and all(isinstance(x, int) for x in dating)):
            fault("bad_date", f"{source}: vase {vid!r} key 'dating' must be [start, end] years, got {dating!r}")
            dating = None
        values["dating"] = (int(dating[0]), int(dating[1])) if dating is not None else None
        for k in ("fabric", "technique", "shape", "decoration", "attribution"):
            if values[k] is not None and not isinstance(values[k], str):
                fault("missing_dimension", f"{source}: vase {vid!r} key {k!r} must be a string, got {values[k]!r}")
                values[k] = None
        rec = cls(id=vid, **values, model=str(obj.get("model", "")), qa=list(obj.get("qa") or []),
                  prompt=str(obj.get("prompt") or ""), images=list(obj.get("images") or []),
                  videos=list(obj.get("videos") or []), system=str(obj.get("system") or ""))
        # a record without a caption gets the museum-style one its six dimensions make
        rec.caption = str(obj.get("caption") or (make_caption(rec) if rec.has_dimensions else ""))
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


def parse_raw_metadata(line: str, vase_id: str, problems: list | None = None) -> VaseRecord:
    """Parse a raw museum metadata line into a record (the inverse of `raw_metadata`).

    >>> r = parse_raw_metadata("Fabric: ATHENIAN; Technique: BLACK-FIGURE; Shape: AMPHORA, NECK; "
    ...                        "Date: -525 to -475; Decoration: Herakles; Attribution: Unattributed", "v1")
    >>> r.fabric, r.technique, r.shape, r.dating
    ('Athenian', 'black-figure', 'amphora, neck', (-525, -475))

    With ``problems`` a missing dimension or unreadable date is appended as ``(kind, id, message)`` and left None.
    """
    found: dict[str, str] = {}
    for part in line.split(";"):
        if ":" not in part:
            continue
        key, value = part.split(":", 1)
        dim = _RAW_KEYS.get(key.strip().lower())
        if dim:
            found[dim] = value.strip()

    def fault(kind: str, message: str) -> None:
        if problems is None:
            raise DataError(message)
        problems.append((kind, vase_id, message))

    missing = [d for d in DIMENSIONS if d not in found]
    if missing:
        fault("missing_dimension", f"metadata of vase {vase_id!r} lacks {missing}: {line!r}")
    dating = parse_dating(found["dating"]) if "dating" in found else None
    if "dating" in found and dating is None:
        fault("bad_date", f"metadata of vase {vase_id!r} has an unreadable date {found['dating']!r}")

    def title(s: str | None) -> str | None:
        return s.title() if s is not None and s.isupper() else s

    def lower(s: str | None) -> str | None:
        return s.lower() if s is not None else None

    return VaseRecord(
        id=vase_id,
        fabric=title(found.get("fabric")),
        technique=lower(found.get("technique")),
        shape=lower(found.get("shape")),
        dating=dating,
        decoration=found.get("decoration"),
        attribution=found.get("attribution"),
    )


def make_caption(rec: VaseRecord) -> str:
    """Museum-style caption, e.g. "Athenian black-figure lekythos, c. 525–475 BCE, depicting Herakles and the boar;
    attributed to the Amasis Painter."."""
    text = f"{rec.fabric} {rec.technique} {rec.shape}, {format_dating(*rec.dating)}, depicting {rec.decoration}"
    if rec.attribution.lower() != "unattributed":
        text += f"; attributed to {rec.attribution}"
    return text + "."


def answer_phrase(text: str) -> str:
    """A dimension's value as a QA answer says it: a short phrase, capitalised, with a full stop.

    >>> answer_phrase("the Reed Painter")
    'The Reed Painter.'
    """
    return text[0].upper() + text[1:] + "." if text else text


def make_qa(rec: VaseRecord) -> list[dict[str, str]]:
    """One "What is the <dimension> of the vase?" pair per dimension, answers as short museum phrases."""
    return [{"dimension": dim, "question": QUESTIONS[dim], "answer": answer_phrase(rec.dimension_text(dim))}
            for dim in DIMENSIONS]


def annotate(rec: VaseRecord) -> VaseRecord:
    """Fill caption and QA pairs from the six dimensions."""
    rec.caption = make_caption(rec)
    rec.qa = make_qa(rec)
    return rec
