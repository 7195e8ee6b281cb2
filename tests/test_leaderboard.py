"""The leaderboard: a missing or NaN metric is named and shown as missing, never as a number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_a_nan_metric_in_a_leaderboard_row_is_named_and_shown_missing(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """A NaN lexical score once showed as "nan [0.167, 0.605]" with the overall score unchanged and a bare NaN token
    in leaderboard.json: now one warning names the file, the table says "–" with no interval, the overall score is
    marked missing, and the JSON is standard."""
    from vase.reports.leaderboard import build_leaderboard, write_leaderboard

    row = {"clip_score": 0.8, "fid_score": 0.4, "r_at_1": 0.1, "r_at_5": 0.3, "r_at_10": 0.5,
           "lexical_similarity": float("nan"), "overall_score": 0.55, "n_pairs": 3,
           "per_vase": {"clip_score": [0.7, 0.8, 0.9], "lexical_similarity": [0.1, float("nan"), 0.3]}}
    good = {**row, "lexical_similarity": 0.2, "per_vase": {"clip_score": [0.7, 0.8, 0.9]}}
    (tmp_path / "bad.json").write_text(json.dumps({"m": row}))
    (tmp_path / "good.json").write_text(json.dumps({"g": good}))
    rows = build_leaderboard([str(tmp_path / "bad.json"), str(tmp_path / "good.json")], include_paper=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {tmp_path / 'bad.json'}: m: lexical_similarity=nan is not a number; shown as missing, "
                   f"and the overall score with it"]
    assert rows["m"]["lexical_similarity"] is None and rows["m"]["overall_score"] is None
    assert "lexical_similarity" not in rows["m"]["ci"] and rows["m"]["ci"]["clip_score"]
    assert rows["g"]["overall_score"] == 0.55 and "lexical_similarity" in rows["g"]  # a sound row is left as it is
    paths = write_leaderboard(rows, tmp_path)
    text = paths["json"].read_text()
    assert "NaN" not in text and json.loads(text)["m"]["lexical_similarity"] is None
    line = next(ln for ln in paths["md"].read_text().splitlines() if ln.startswith("| m |"))
    assert "nan" not in line.lower() and "| – |" in line
