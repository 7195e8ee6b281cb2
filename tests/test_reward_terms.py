"""Pluggable reward terms, the learning diagnostics GRPO logs, and the learning check that must be able to fail."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, shipped_hypothesis
from tests.test_end_to_end import ONE_THREAD
from vase.rewards import reward_from_config

T = {"fabric": "Athenian", "technique": "red-figure", "shape": "kylix", "dating": [-480, -470],
     "decoration": "a symposium scene", "attribution": "Douris"}


def test_a_term_adds_its_weighted_value_and_names_itself() -> None:
    texts = ["Attic red-figure kylix.", "An Attic cup (kylix), c. 480 BCE.", "A black-figure amphora."]
    base = reward_from_config()
    r = reward_from_config(terms={"kw": {"_target_": "vase.rewards.terms.Keyword", "dimension": "shape",
                                         "weight": 0.5},
                                  "mine": {"_target_": "tests.custom_terms.SaysAmphora", "weight": 2.0}})
    out, plain = r.compute(texts, targets=[T] * 3), base.compute(texts, targets=[T] * 3)
    assert out.components["kw"] == [1.0, 1.0, 0.0] and out.components["mine"] == [0.0, 0.0, 1.0]
    for k in range(3):  # totals = the six-dimension reward + sum of weight x term, by hand
        want = plain.total[k] + 0.5 * out.components["kw"][k] + 2.0 * out.components["mine"][k]
        assert out.total[k] == pytest.approx(want, abs=1e-9)
    with pytest.raises(ValueError, match="reward.terms.bad needs a _target_"):
        reward_from_config(terms={"bad": {"weight": 1.0}})


def test_keyword_counts_synonyms_and_not_other_shapes() -> None:
    from vase.rewards.terms import Keyword

    kw = Keyword(dimension="fabric")
    assert kw(["An Attic cup.", "A Corinthian cup.", "A cup."], [{"fabric": "Athenian"}] * 3) == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="dimension='colour'"):
        Keyword(dimension="colour")


def test_a_users_term_trains_and_is_logged_by_its_name(train_cfg) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(["stage=grpo", "stage.batch_size=2", "stage.grad_accum=1", "trainer.max_steps=2",
                     "stage.module.max_completion_length=8", "logger=csv",
                     "+reward.terms.mine._target_=tests.custom_terms.SaysAmphora", "+reward.terms.mine.weight=1.0"])
    out = run_training(cfg)
    assert all("reward/mine" in h and "frac_reward_zero_std" in h and "reward_std_in_group" in h
               for h in out["history"])
    rows = list(csv.DictReader(open(next(Path(cfg.paths.output_dir).rglob("metrics.csv")))))
    for key in ("train/reward/mine", "train/frac_reward_zero_std", "train/reward_std_in_group"):
        assert key in rows[0], key


def test_group_spread_by_hand() -> None:
    from vase.training.grpo import group_spread

    s = group_spread(torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 2.0, 0.0, 2.0, 3.0, 3.0, 3.0, 3.0]), 4)
    assert s["frac_reward_zero_std"] == pytest.approx(2 / 3)
    assert s["reward_std_in_group"] == pytest.approx((0 + torch.tensor([0.0, 2.0, 0.0, 2.0]).std().item() + 0) / 3)


def test_negative_controls_change_only_the_advantages(train_cfg) -> None:
    """flip_advantages negates them; shuffle_rewards computes them from another completion's reward."""
    from vase.config import validate
    from vase.errors import ConfigError
    from vase.training.grpo import controlled_advantages, group_advantages

    r = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    normal = group_advantages(r, 4, "group")
    assert torch.equal(controlled_advantages(r, 4, "group"), normal)
    assert torch.equal(controlled_advantages(r, 4, "group", "flip_advantages"), -normal)
    shuffled = controlled_advantages(r, 4, "group", "shuffle_rewards", seed=3)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(3))
    assert not torch.equal(perm, torch.arange(8))
    assert torch.equal(shuffled, group_advantages(r[perm], 4, "group")) and not torch.equal(shuffled, normal)
    with pytest.raises(ConfigError, match="stage.module.negative_control='upside_down' must be null or one of"):
        validate(train_cfg(["stage=grpo", "stage.module.negative_control=upside_down"]))


def test_negative_controls_break_the_decoupled_advantages_too() -> None:
    """Under normalize_then_sum (GDPO) the controls act on what the advantages are made of: flip_advantages negates
    the decoupled advantages, shuffle_rewards moves every term's rewards with their completion's (one permutation)."""
    from vase.training.grpo import controlled_advantages, decoupled_advantages

    per_term = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.5], [0.0, 0.5], [1.0, 0.0],
                             [0.0, 0.0]])
    w = torch.tensor([0.7, 0.3])
    r = per_term @ w
    kw = {"aggregation": "normalize_then_sum", "per_term": per_term, "weights": w}
    normal = decoupled_advantages(per_term, w, 4)
    assert torch.equal(controlled_advantages(r, 4, "batch", **kw), normal)
    assert torch.equal(controlled_advantages(r, 4, "batch", "flip_advantages", **kw), -normal)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(3))
    shuffled = controlled_advantages(r, 4, "batch", "shuffle_rewards", seed=3, **kw)
    assert torch.equal(shuffled, decoupled_advantages(per_term[perm], w, 4)) and not torch.allclose(shuffled, normal)


@pytest.mark.slow
def test_grpo_sanity_passes_and_fails_when_the_learner_is_broken(tmp_path: Path) -> None:
    """make grpo-sanity on one seed; the same check with the advantage sign flipped, or the rewards shuffled across
    completions, must FAIL: the check can tell learning from noise. The three run side by side, one core's thread
    each (the shared SFT is trained once, under its lock): the same steps, in about half the time of one after another
    on two cores."""
    env = {**os.environ, **ONE_THREAD}
    runs = {name: subprocess.Popen([sys.executable, "-m", "vase.sanity", "--seeds", "1", "--out", str(tmp_path / name),
                                    *(["--negative-control", name] if name != "ok" else [])],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            for name in ("ok", "flip_advantages", "shuffle_rewards")}
    out = {name: p.communicate(timeout=2400)[0] for name, p in runs.items()}
    assert runs["ok"].returncode == 0, out["ok"][-3000:]
    v = json.loads((tmp_path / "ok" / "sanity.json").read_text())
    assert v["passed"] and v["seeds"]["1"]["rise"] >= 0.3 and (tmp_path / "ok" / "sanity.png").is_file()
    for control in ("flip_advantages", "shuffle_rewards"):
        assert runs[control].returncode == 1, (control, out[control][-2000:])  # FAIL exits 1 (2: an error)
        assert "FAIL" in out[control]


def test_the_effective_weights_are_written_where_runs_are_compared(train_cfg) -> None:
    from omegaconf import OmegaConf

    from vase.pipeline import run_training
    from vase.reports.sweep_summary import job_row

    cfg = train_cfg(["stage=grpo", "stage.batch_size=2", "stage.grad_accum=1", "trainer.max_steps=1",
                     "stage.module.max_completion_length=4", "reward.weights.shape=0.6",
                     "reward.normalize_weights=[shape]"])
    run_training(cfg)
    out = Path(cfg.paths.output_dir)
    w = OmegaConf.to_container(OmegaConf.load(out / "config.yaml").reward.effective_weights)
    assert w["shape"] == pytest.approx(0.6) and sum(w.values()) == pytest.approx(1.0)
    assert w["fabric"] == pytest.approx(0.2 * 0.4 / 0.85)  # the paper's 0.2, rescaled with the other four
    (out / ".hydra").mkdir()
    (out / ".hydra" / "overrides.yaml").write_text("- reward.weights.shape=0.6\n")
    row = job_row(out)
    assert row["w/shape"] == pytest.approx(0.6) and "frac_reward_zero_std" in row and "reward/shape" in row


def test_a_cached_sft_without_its_vqa_is_evaluated_once_when_a_sweep_needs_the_baseline(train_cfg) -> None:
    from vase.pipeline import run_training

    common = ["stage=grpo", "sft_init=true", "+stage@sft=sft", "+sft.max_steps=1", "stage.batch_size=2",
              "stage.grad_accum=1", "trainer.max_steps=1", "stage.module.max_completion_length=4",
              "val.vqa_max_new_tokens=4", "data.limit_val=1"]
    from vase.pipeline.sft_cache import sft_key

    cfg = train_cfg(common)
    run_training(cfg)
    ours = Path(cfg.paths.cache_dir) / "sft" / sft_key(cfg)[0]  # the cache holds other tests' SFTs too
    (ours / "vqa_sft.json").unlink(missing_ok=True)  # another test may have shared this SFT with VQA: start without
    out = run_training(train_cfg([*common, "val.vqa=open"]))
    baseline = json.loads((ours / "vqa_sft.json").read_text())
    assert "open" in baseline["vqa"] and out["vqa"]["grpo"]["open"]["accuracy"].keys() == \
        baseline["vqa"]["open"]["accuracy"].keys()
    # a cached baseline without a protocol the sweep now asks for gets it added; the open answers are reused
    answers = (ours / "answers_vqa_sft.jsonl").read_bytes()
    run_training(train_cfg([*common, "val.vqa=open+ll"]))
    baseline = json.loads((ours / "vqa_sft.json").read_text())
    assert set(baseline["vqa"]) == {"open", "ll"} and baseline["vqa"]["ll"]["n"] == 6
    assert (ours / "answers_vqa_sft.jsonl").read_bytes() == answers


def test_an_ablation_over_one_weight_compares_no_weight_with_itself_in_its_qa_transfer(tmp_path: Path) -> None:
    """Target (i) said "not decided" for a sweep at one weight, but the QA-transfer line still read "shape accuracy at
    weight 0.15 above weight 0.15 ... +0.0 [+0.0, +0.0]"."""
    from tests.test_heldout import _job, _ll, _result
    from vase.reports.ablation import write_ablation_report

    sweep = tmp_path / "sweep"
    for n, bonus in enumerate(("0.3", "0.6")):
        _job(sweep, n, ["reward.weights.shape=0.15", "seed=1", f"reward.terms.bonus.weight={bonus}"],
             _result({"shape": 16}), _result({"shape": 12}), _ll(14))
    v = write_ablation_report(sweep, shipped_hypothesis('sweeps/reward_weights.yaml'))
    md = (sweep / "ablation.md").read_text()
    assert v["i"] is None and v["transfer"]["i"] is None
    # bonus 0.6 against 0.3 job by job is a comparison of its own (the same results here: +0.0); outside it, no
    # weight is compared with itself
    compared = md.index("## Each setting against 0.3")
    assert "| 0.6 | seed 1 | 0.15 | +0.0 [+0.0, +0.0] | none |" in md[compared:].split("\n## ")[0]
    md = md[:compared] + "\n## ".join(md[compared:].split("\n## ")[1:])
    assert "above weight 0.15" not in md and "+0.0 [+0.0, +0.0]" not in md
    assert "**Transfer: shape accuracy**, multiple choice (option likelihood), needs two values of the swept weight; " \
           "this sweep ran shape weight 0.15 only: not decided." in md


def test_grpo_on_a_task_of_short_answers_says_the_format_penalty_would_fight_it(train_cfg, caplog) -> None:
    """A prompt task whose answers are a word or two (the QA pairs, a user's one-word task) under the default format
    penalty (``min_words: 5``): GRPO would be penalised for answering as the task does. One line before any model
    loads names the share, the bound and the override; captions, or the bound set to fit, say nothing."""
    import logging

    from vase.pipeline.build import check_training_data

    caplog.set_level(logging.WARNING, logger="vase")
    check_training_data(train_cfg(["stage=grpo", "data.mix=qa"]), "grpo")
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reward.terms.penalty:")]
    assert len(said) == 1 and "of data.mix=qa's " in said[0] and "shorter than its min_words=5" in said[0], said
    assert said[0].endswith("(or length=0)") and "set reward.terms.penalty.min_words=1" in said[0]
    for quiet in (["data.mix=caption"], ["data.mix=qa", "reward.terms.penalty.min_words=1"],
                  ["data.mix=qa", "reward.terms.penalty.weight=0"]):
        caplog.clear()
        check_training_data(train_cfg(["stage=grpo", *quiet]), "grpo")
        assert not [r for r in caplog.records if r.getMessage().startswith("reward.terms.penalty:")], quiet
