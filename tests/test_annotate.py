"""The six-dimension vocabulary, dating parser, captions and QA pairs."""

from __future__ import annotations

import pytest

from vase.annotate import (
    DIMENSIONS,
    VaseRecord,
    annotate,
    canonical,
    dating_iou,
    format_dating,
    parse_dating,
    parse_raw_metadata,
    raw_metadata,
)
from vase.errors import DataError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("-525 to -475", (-525, -475)),
        ("Date: -450 to -400", (-450, -400)),
        ("c. 525–475 BCE", (-525, -475)),
        ("525-475 B.C.", (-525, -475)),
        ("ca. 510 BC", (-520, -500)),
        ("late 6th century BC", (-533, -500)),
        ("second quarter of the 5th century BC", (-475, -450)),
        ("first half of the 4th century BCE", (-400, -350)),
        ("5th century BC", (-500, -400)),
    ],
)
def test_parse_dating_forms(text: str, expected: tuple[int, int]) -> None:
    assert parse_dating(text) == expected


def test_parse_dating_none_when_absent() -> None:
    assert parse_dating("a lovely vase") is None


def test_dating_iou_by_hand() -> None:
    # [-450,-400] and [-475,-425]: overlap 25 years, union 50 years
    assert dating_iou((-450, -400), (-475, -425)) == pytest.approx(25 / 75)
    assert dating_iou((-500, -450), (-450, -400)) == 0.0
    assert dating_iou((-500, -400), (-500, -400)) == 1.0


def test_format_dating_round_trips() -> None:
    assert format_dating(-525, -475) == "c. 525–475 BCE"
    assert parse_dating(format_dating(-525, -475)) == (-525, -475)


def test_synonyms_map_to_canonical() -> None:
    assert canonical("fabric", "Attic") == "Athenian"
    assert canonical("technique", "black figure") == "black-figure"
    assert canonical("shape", "calyx-krater") == "krater"
    assert canonical("attribution", "Berlin Painter") == "the Berlin Painter"
    assert canonical("fabric", "Martian") is None
    with pytest.raises(KeyError):
        canonical("dating", "c. 500 BCE")


def _rec() -> VaseRecord:
    return annotate(
        VaseRecord(
            id="0000_1",
            fabric="Athenian",
            technique="black-figure",
            shape="lekythos",
            dating=(-525, -475),
            decoration="Herakles and the Erymanthian boar",
            attribution="the Amasis Painter",
        )
    )


def test_caption_and_qa() -> None:
    r = _rec()
    assert r.caption == (
        "Athenian black-figure lekythos, c. 525–475 BCE, depicting Herakles and the Erymanthian "
        "boar; attributed to the Amasis Painter."
    )
    assert [q["dimension"] for q in r.qa] == list(DIMENSIONS)
    assert r.qa[0] == {"dimension": "fabric", "question": "What is the fabric of the vase?", "answer": "Athenian."}
    assert r.qa[3]["answer"] == "C. 525–475 BCE."


def test_raw_metadata_round_trip() -> None:
    r = _rec()
    line = raw_metadata(r)
    assert line.startswith("Fabric: ATHENIAN; Technique: BLACK-FIGURE; Shape: LEKYTHOS; Date: -525 to -475")
    back = parse_raw_metadata(line, r.id)
    assert (back.fabric, back.technique, back.shape, back.dating) == (
        "Athenian",
        "black-figure",
        "lekythos",
        (-525, -475),
    )
    with pytest.raises(DataError, match="0000_1"):
        parse_raw_metadata("Fabric: ATHENIAN", "0000_1")


def test_from_json_names_file_and_id() -> None:
    with pytest.raises(DataError, match=r"ann\.json.*'v1'.*\['shape'\]"):
        VaseRecord.from_json(
            {
                "id": "v1",
                "fabric": "Athenian",
                "technique": "red-figure",
                "dating": [-500, -450],
                "decoration": "x",
                "attribution": "y",
            },
            "ann.json",
        )


def test_record_without_caption_gets_the_museum_caption() -> None:
    obj = {"id": "v_1", "fabric": "Corinthian", "technique": "black-figure", "shape": "alabastron",
           "dating": "c. 600–575 BCE", "decoration": "an animal frieze", "attribution": "unattributed"}
    rec = VaseRecord.from_json(obj, "ann.json")
    assert rec.dating == (-600, -575)
    assert rec.caption == "Corinthian black-figure alabastron, c. 600–575 BCE, depicting an animal frieze."
