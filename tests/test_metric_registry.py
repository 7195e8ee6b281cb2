"""The caption-metric registry (vase.metrics.registry): one entry makes a metric scored, paired per vase, shown in the
results table and the loggers' table, accepted as a hypothesis move, and listed in the glossary; ROUGE-L is the worked
example, a metric from a user's own module the other."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, run_python
from tests.test_paired_metrics import _BagOfWords, _captions
from vase.errors import ConfigError
from vase.metrics.caption_metrics import TABLE_COLUMNS, CaptionScorer, markdown_table
from vase.metrics.paired import compare_captions, format_comparison, per_vase_scores
from vase.metrics.registry import CAPTION_METRICS, PER_VASE, extra_metrics, paired_keys, rouge_l_terms


def _runs(n: int = 60) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    refs, junk = _captions(n, 0), _captions(n, 1)
    ids = [f"v{i}" for i in range(n)]
    good = {i: refs[k] if k % 3 else junk[k] for k, i in enumerate(ids)}  # two in three exact
    return good, dict(zip(ids, junk)), dict(zip(ids, refs))


@pytest.mark.parametrize("name, key, title", [("rouge_l", "rouge_l", "ROUGE-L"),
                                              ("tests.custom_metrics:RECALL", "word_recall", "Recall")])
def test_an_extra_metric_is_scored_paired_and_shown_from_its_entry_alone(name: str, key: str, title: str) -> None:
    enc = _BagOfWords()
    scorer = CaptionScorer(enc, enc, extra=extra_metrics([name]))
    good, bad, ref = _runs()
    preds, refs = list(bad.values()), list(ref.values())
    preds[:7] = refs[:7]
    whole = scorer.score(preds, refs)
    per, _, _ = per_vase_scores(scorer, preds, refs)
    assert whole[key] == pytest.approx(float(per[key].mean()), abs=1e-6)  # the set's value is its terms' mean
    assert 0 < whole[key] < 1
    # paired: an interval of its own, in comparison order (before the overall score), and held where it should be
    comp = compare_captions(scorer, good, bad, ref)
    assert list(comp) == ["fid_score", "clip_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity", key,
                          "overall_score"]
    assert comp[key]["lo"] > 0 and comp[key]["n"] == 60
    assert f"| {key} |" in format_comparison(comp)
    # the results table: its column between Lexical and Overall, only where a row has it
    table = markdown_table({"run": whole})
    head = table.splitlines()[0]
    assert head.index("Lexical") < head.index(title) < head.index("Overall")
    plain = CaptionScorer(enc, enc).score(preds, refs)
    assert title not in markdown_table({"run": plain}).splitlines()[0]
    assert markdown_table({"run": plain}).splitlines()[0].count("|") == len(TABLE_COLUMNS) + 3  # Model, the paper's, N


def test_rouge_l_is_torchmetrics_rouge_l_f_measure() -> None:
    from torchmetrics.text.rouge import ROUGEScore

    preds, refs = _captions(12, 3), _captions(12, 4)
    m = ROUGEScore(rouge_keys="rougeL")
    m.update(preds, refs)
    assert float(rouge_l_terms(preds, refs).mean()) == pytest.approx(float(m.compute()["rougeL_fmeasure"]), abs=1e-6)
    # order counts for ROUGE-L, not for the lexical similarity
    assert rouge_l_terms(["red black vase"], ["vase black red"])[0] < 1.0


def test_the_paper_s_metrics_stay_as_they_were() -> None:
    assert PER_VASE == ("clip_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity", "overall_score")
    assert [k for k, _ in TABLE_COLUMNS] == ["fid_score", "clip_score", "r_at_10", "r_at_5", "r_at_1",
                                             "lexical_similarity", "overall_score", "image_clip_score"]
    assert extra_metrics(None) == ()  # every run scores the paper's; an extra only where asked
    assert paired_keys(["overall_score", "rouge_l", "clip_score", "fid_score"]) == ("clip_score", "rouge_l",
                                                                                  "overall_score")


@pytest.mark.parametrize("name, says", [("rogue_l", "'rogue_l' is no caption metric; choose from fid_score"),
                                        ("mypkg_missing.metrics:X", "'mypkg_missing.metrics:X' does not import: No "
                                                                    "module named 'mypkg_missing'"),
                                        ("tests.custom_metrics:NOT_A_METRIC", "is a int, not a CaptionMetric"),
                                        ("clip_score", "one of the paper's metrics, which every run scores")])
def test_a_bad_extra_metric_is_one_line_naming_it(name: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        extra_metrics([name])
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_bad_extra_metric_is_refused_before_the_model_loads(tmp_path) -> None:

    p = run_python(["train.py", "metrics.extra=[rogue_l]", "logger=none", "debug=fast", f"paths.log_dir={tmp_path}",
                    f"paths.cache_dir={tmp_path / 'cache'}"], cwd=ROOT, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "metrics.extra: 'rogue_l' is no caption metric" in p.stderr.strip().splitlines()[-1]
    assert "loading model" not in p.stderr


def test_every_caption_metric_of_the_registry_is_in_the_glossary_and_a_hypothesis_move() -> None:
    from vase.reports.hypothesis import measured_moves

    glossary = (ROOT / "docs" / "glossary.md").read_text()
    moves = measured_moves({})
    for key, m in CAPTION_METRICS.items():
        assert f"| `{key}` | {m.title} |" in glossary, "run python -m vase.docsgen.config_reference"
        assert (f"heldout/{key}" in moves) == m.paired


def test_evaluate_scores_rouge_l_from_its_conf_line(tmp_path, session_dirs: dict) -> None:
    """The user's path: ``evaluate.py action=score metrics.extra=[rouge_l]`` on two caption files writes ROUGE-L (the
    mean of torchmetrics' per-pair F-measures) into results and its table, beside the paper's metrics unchanged."""
    import json

    from tests.test_eval_suite import CAPS, GENS

    ids = [f"v{i}" for i in range(len(CAPS))]
    gt, gen = tmp_path / "gt.jsonl", tmp_path / "gen.jsonl"
    for path, caps in ((gt, CAPS), (gen, GENS)):
        path.write_text("".join(json.dumps({"id": i, "caption": c}) + "\n" for i, c in zip(ids, caps)))
    results = {}
    for extra in ("[]", "[rouge_l]"):
        out = tmp_path / extra.strip("[]") / "OUT.json"
        p = run_python(["evaluate.py", "action=score", f"generated={gen}", f"ground_truth={gt}", f"output={out}",
                        "logger=none", f"metrics.extra={extra}", f"paths.cache_dir={session_dirs['cache']}",
                        f"hydra.run.dir={out.parent / 'run'}"], cwd=ROOT, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results[extra] = (json.loads(out.read_text()), out.with_suffix(".md").read_text())
    (plain, plain_md), (rouge, rouge_md) = results["[]"], results["[rouge_l]"]
    assert "rouge_l" not in plain and "ROUGE-L" not in plain_md
    assert rouge["rouge_l"] == pytest.approx(float(rouge_l_terms(GENS, CAPS).mean()), abs=1e-6)
    assert "ROUGE-L" in rouge_md.splitlines()[0]
    for k in CAPTION_METRICS:  # the paper's metrics, to the digit
        assert rouge.get(k) == plain.get(k) or k == "rouge_l", k
