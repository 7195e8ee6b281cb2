"""The paper's caption metrics per vase and paired between two runs (vase.metrics.paired), and the power figure
(vase.reports.power): on fabricated captions with a toy encoder, a known difference is found, a null one's interval
holds 0, and the detectable difference is the closed form's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from vase.metrics.caption_metrics import CaptionScorer
from vase.metrics.paired import METRICS, compare_captions, held, minimal_detectable, per_vase_scores
from vase.metrics.registry import paired_keys

WORDS = ["red", "black", "amphora", "kylix", "lekythos", "herakles", "athenian", "corinthian", "boar", "lion",
         "figure", "krater", "hydria", "painter", "vase", "attic"]


class _BagOfWords:
    """An independent toy text encoder: word counts over a fixed vocabulary."""

    def encode(self, texts: list[str]) -> torch.Tensor:
        return torch.tensor([[t.lower().split().count(w) + 0.01 for w in WORDS] for t in texts])


def _captions(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=6)) for _ in range(n)]


def test_per_vase_terms_average_to_the_scorers_metrics() -> None:
    enc = _BagOfWords()
    scorer = CaptionScorer(enc, enc)
    refs, preds = _captions(40, 0), _captions(40, 1)
    preds[:10] = refs[:10]  # some exact
    per, _, _ = per_vase_scores(scorer, preds, refs)
    whole = scorer.score(preds, refs)
    assert tuple(per) == ("clip_score", "lexical_similarity", "r_at_1", "r_at_5", "r_at_10", "overall_score")
    for m in paired_keys(per):  # every per-vase metric of the registry this scorer scores
        assert float(per[m].mean()) == pytest.approx(whole[m], abs=1e-6), m


def test_a_known_difference_is_found_and_a_null_ones_interval_holds_zero() -> None:
    enc = _BagOfWords()
    scorer = CaptionScorer(enc, enc)
    n = 60
    refs, junk = _captions(n, 0), _captions(n, 1)
    ids = [f"v{i}" for i in range(n)]
    ref = dict(zip(ids, refs))
    good = {i: refs[k] if k % 3 else junk[k] for k, i in enumerate(ids)}  # two in three exact
    bad = dict(zip(ids, junk))
    comp = compare_captions(scorer, good, bad, ref)
    assert set(comp) == set(METRICS)
    lex = comp["lexical_similarity"]
    assert lex["lo"] > 0 and held(lex, "lexical_similarity") and lex["n"] == n
    assert comp["overall_score"]["lo"] > 0 and comp["fid_score"]["hi"] < 0 and held(comp["fid_score"], "fid_score")
    # exact on one half in one run and on the other half in the other: no difference, an interval around 0
    half_a = {i: refs[k] if k < n // 2 else junk[k] for k, i in enumerate(ids)}
    half_b = {i: junk[k] if k < n // 2 else refs[k] for k, i in enumerate(ids)}
    null = compare_captions(scorer, half_a, half_b, ref)
    for m in ("clip_score", "lexical_similarity", "overall_score", "fid_score"):
        assert null[m]["lo"] <= 0 <= null[m]["hi"], (m, null[m])
        assert not held(null[m], m)
    # the standard deviation is of the per-vase differences: the power figure is the closed form on it
    a, _, _ = per_vase_scores(scorer, [half_a[i] for i in ids], refs)
    b, _, _ = per_vase_scores(scorer, [half_b[i] for i in ids], refs)
    sd = float(np.std(a["lexical_similarity"] - b["lexical_similarity"], ddof=1))
    assert null["lexical_similarity"]["sd"] == pytest.approx(sd)


def test_the_detectable_difference_is_the_closed_form_and_holds_its_power() -> None:
    """(z_0.975 + z_0.8) sd / sqrt(n); simulated, a true difference of that size is found about 80 % of the time."""
    assert minimal_detectable(0.2, 96) == pytest.approx((1.959964 + 0.841621) * 0.2 / np.sqrt(96), rel=1e-5)
    rng = np.random.default_rng(0)
    n, sd = 96, 0.2
    delta = minimal_detectable(sd, n)
    found = 0
    for _ in range(2000):
        d = rng.normal(delta, sd, n)
        found += abs(d.mean()) / (d.std(ddof=1) / np.sqrt(n)) > 1.959964
    assert 0.76 < found / 2000 < 0.84


def test_the_power_command_reads_a_runs_paired_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from vase.reports.power import main, paper_gains

    comp = {m: {"run": 0.5, "start": 0.45, "diff": 0.05, "lo": 0.01, "hi": 0.09, "sd": 0.2, "n": 240} for m in METRICS}
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "heldout_reward.json").write_text(json.dumps({"captions_vs_start": comp}))
    assert main([str(tmp_path), "--n", "96", "--json", str(tmp_path / "power.json")]) == 0
    out = capsys.readouterr().out
    assert "detectable at n=96" in out
    written = json.loads((tmp_path / "power.json").read_text())
    assert (written["written_by"], written["n"]) == ("vase.reports.power", 96)
    (fig,) = written["figures"].values()
    assert fig["lexical_similarity"]["detectable_at_96"] == pytest.approx(minimal_detectable(0.2, 96))
    assert fig["lexical_similarity"]["detectable"] == pytest.approx(minimal_detectable(0.2, 240))
    assert paper_gains()["3B"]["lexical_similarity"] == pytest.approx(0.022)
    # the paper's +0.022 lexical is below what 96 vases detect at this spread (0.057)
    assert "+0.022 (below it)" in out
    assert main([str(tmp_path / "nothing")]) == 2


def test_the_leaderboard_shows_intervals_where_a_results_file_carries_per_vase_terms(tmp_path: Path) -> None:
    from vase.eval.stats import bootstrap_ci
    from vase.reports.leaderboard import build_leaderboard, write_leaderboard

    lex = [1.0, 0.0] * 20
    with_terms = {"clip_score": 0.8, "fid_score": 0.4, "r_at_1": 0.1, "r_at_5": 0.3, "r_at_10": 0.5,
                  "lexical_similarity": 0.5, "overall_score": 0.6, "n_pairs": 40,
                  "per_vase": {"ids": [f"v{i}" for i in range(40)], "lexical_similarity": lex}}
    old = {k: v for k, v in with_terms.items() if k != "per_vase"}
    (tmp_path / "a.json").write_text(json.dumps({"new": with_terms}))
    (tmp_path / "b.json").write_text(json.dumps({"old": old}))
    rows = build_leaderboard([str(tmp_path / "a.json"), str(tmp_path / "b.json")], include_paper=False)
    assert rows["new"]["ci"]["lexical_similarity"] == list(bootstrap_ci(lex)) and "ci" not in rows["old"]
    md = write_leaderboard(rows, tmp_path / "out")["md"].read_text()
    lo, hi = bootstrap_ci(lex)
    assert "| new | 0.400 | 0.800 |" in md and f"0.500 [{lo:.3f}, {hi:.3f}]" in md
    assert "| old |" in md and "0.500 [" not in md.split("| old |")[1].split("\n")[0]


def test_the_fid_resamples_agree_with_the_exact_fid_of_each_resample() -> None:
    """The FID interval's resamples from the Gram matrices (trace 5): each resample's FID against the paper's exact
    formula (eps on both diagonals, scipy's matrix square root) within 5e-3, and a difference of two FIDs on one
    reference set within 1e-3; wide embeddings and two-vase sets (where the old eigenvalue route took over a second a
    resample) are no special case."""
    from vase.metrics.caption_metrics import frechet_distance
    from vase.metrics.paired import fid_resamples

    rng = np.random.default_rng(3)
    for n, d in ((40, 96), (2, 256)):
        ref = rng.normal(size=(n, d)) * 0.1
        a, b = ref + rng.normal(size=(n, d)) * 0.05, ref + rng.normal(size=(n, d)) * 0.08
        boot = rng.integers(0, n, size=(6, n))
        boot[:, :2] = [0, 1] if n > 2 else boot[:, :2]  # at least two distinct vases: a covariance to compare
        exact_a = np.array([frechet_distance(a[i], ref[i]) for i in boot])
        exact_b = np.array([frechet_distance(b[i], ref[i]) for i in boot])
        fast_a, fast_b = fid_resamples(a, ref, boot), fid_resamples(b, ref, boot)
        assert np.abs(fast_a - exact_a).max() < 5e-3
        assert np.abs((fast_a - fast_b) - (exact_a - exact_b)).max() < 1e-3


def test_power_refuses_bad_numbers_and_a_file_it_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--n below 2, a JSON list, an entry without sd, a NaN: one line each and exit 2, never a nan verdict; --json over
    a user's file is refused (its bytes kept), over its own earlier file rewritten, and --force replaces."""
    from vase.reports.power import main

    comp = {m: {"run": 0.5, "start": 0.45, "diff": 0.05, "lo": 0.01, "hi": 0.09, "sd": 0.2, "n": 240} for m in METRICS}
    good = tmp_path / "heldout_reward.json"
    good.write_text(json.dumps({"captions_vs_start": comp}))
    bad_sd = tmp_path / "no_sd" / "heldout_reward.json"
    bad_sd.parent.mkdir()
    bad_sd.write_text(json.dumps({"captions_vs_start": {"fid_score": {"diff": 0.1, "n": 20}}}))
    nan = tmp_path / "nan" / "heldout_reward.json"
    nan.parent.mkdir()
    nan.write_text(json.dumps({"captions_vs_start": {"fid_score": {"diff": float("nan"), "sd": 1.0, "n": 20}}}))
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    cases = [([str(good), "--n", "-5"], "error: --n -5: a test-set size must be at least 2"),
             ([str(good), "--n", "0"], "error: --n 0: a test-set size must be at least 2"),
             ([str(listed)], f"error: {listed}: holds a JSON list, not a results object"),
             ([str(bad_sd)], f"error: {bad_sd}: metric 'fid_score' has sd=None; it must be a finite number >= 0"),
             ([str(nan)], f"error: {nan}: metric 'fid_score' has diff=nan; it must be a finite number")]
    for args, line in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [line] or (len(err) == 1 and err[0].startswith(line)), (args, err)
    notes = tmp_path / "notes.md"
    notes.write_text("my notes")
    assert main([str(good), "--json", str(notes)]) == 2
    assert "the file exists and vase.reports.power did not write it" in capsys.readouterr().err
    assert notes.read_text() == "my notes"
    assert main([str(good), "--json", str(tmp_path / "p.json")]) == 0
    assert main([str(good), "--json", str(tmp_path / "p.json")]) == 0  # its own file: rewritten
    assert main([str(good), "--json", str(notes), "--force"]) == 0 and "figures" in json.loads(notes.read_text())
