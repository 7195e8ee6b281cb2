"""Trust, round 5 (issue 49): no flag overwrites a user's file, a broken checkpoint is named in one line, no verdict
from a bad number, config gaps closed before any model loads, the render cache keyed by every render setting, the
paired bootstrap fast, and the small ones. Each test failed on the code before its fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

# ------------------------------------------------------------------ 1: no flag overwrites a user's file


def test_the_dataset_check_never_writes_its_report_over_a_file_it_did_not_write(tmp_path: Path,
                                                                                synthetic_root: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("my notes")
    cmd = [sys.executable, "-m", "vase.data.check", str(synthetic_root), "--no-models", "--report"]
    p = subprocess.run([*cmd, str(notes)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and notes.read_text() == "my notes"
    assert p.stderr.strip() == (f"error: --report {notes}: the file exists and vase.data.check did not write it; vase "
                                f"never replaces such a file: choose another path, or add --force to replace it")
    ours = tmp_path / "check.json"
    for _ in range(2):  # its own report, written and then rewritten
        p = subprocess.run([*cmd, str(ours)], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and json.loads(ours.read_text())["written_by"] == "vase.data.check"
    p = subprocess.run([*cmd, str(notes), "--force"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and json.loads(notes.read_text())["ok"] is True


@pytest.mark.parametrize("tool", ["render", "sanity", "config_reference"])
def test_every_out_flag_refuses_a_user_s_folder_or_file(tmp_path: Path, synthetic_root: Path, tool: str) -> None:
    """python -m vase.render --out, python -m vase.sanity --out and the configuration reference's --out: a folder (or
    page) holding what vase did not write is refused in one line, before anything runs, and left as it was."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("my notes")
    target = mine / "page.md" if tool == "config_reference" else mine
    if tool == "config_reference":
        target.write_text("# my page\n")
    args = {"render": ["-m", "vase.render", "--root", str(synthetic_root), "--out", str(mine)],
            "sanity": ["-m", "vase.sanity", "--out", str(mine)],
            "config_reference": ["-m", "vase.reports.config_reference", "--out", str(target)]}[tool]
    p = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    assert p.stderr.startswith(f"error: --out {target}: ")
    assert sorted(x.name for x in mine.iterdir()) == sorted(["notes.md"] + (["page.md"] if tool == "config_reference" else []))
    assert (mine / "notes.md").read_text() == "my notes"


def test_render_out_takes_a_new_folder_and_its_own_again(tmp_path: Path, synthetic_root: Path) -> None:
    import shutil

    bare = tmp_path / "bare"  # the synthetic set without its views: a dataset that ships none
    shutil.copytree(synthetic_root, bare, ignore=shutil.ignore_patterns("images"))
    out = tmp_path / "renders"
    cmd = [sys.executable, "-m", "vase.render", "--root", str(bare), "--out", str(out), "--resolution", "32",
           "--views", "front"]
    for expect in ("rendered", "cached"):  # a new folder, then the same folder it rendered into (its cache file)
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        assert json.loads(p.stdout)[expect] == 8


# ------------------------------------------------------------------ 3: no verdict from a bad number


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
