"""Inverse rendering: the true parameters rebuild the vase exactly, random ones do not, bad answers are counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.conftest import TINY_TRAIN, compose_cfg


def test_oracle_rebuilds_each_vase_and_random_parameters_do_not(synthetic_root: Path) -> None:
    from vase.data.dataset import VaseDataset
    from vase.eval.invrender import run_invrender

    ds = VaseDataset(synthetic_root, "train", check_views=False)
    views = ("front", "left", "top")
    oracle = run_invrender(ds, synthetic_root, "oracle", views, resolution=96)
    rand = run_invrender(ds, synthetic_root, "random", views, resolution=96, seed=0)
    assert oracle["summary"]["iou"] >= 0.99 and oracle["summary"]["unparseable"] == 0
    assert oracle["summary"]["chamfer_distance"] < 1e-9
    assert rand["summary"]["iou"] < 0.8 and rand["summary"]["chamfer_distance"] > 100 * oracle["summary"]["chamfer_distance"] + 1e-4
    for rec in ds.records:
        assert all(v >= 0.99 for v in oracle["items"][rec.id]["iou_per_view"].values())


def test_a_proportion_change_lowers_the_score_in_proportion(synthetic_root: Path) -> None:
    from dataclasses import replace

    from vase.data.dataset import VaseDataset
    from vase.eval.invrender import score_params
    from vase.prompt_tasks.invrender import VaseParams
    from vase.render.renderer import Renderer, RenderSettings

    rec = VaseDataset(synthetic_root, "train", check_views=False).records[0]
    true = VaseParams.of_record(rec)
    with Renderer(RenderSettings(resolution=96)) as r:
        ious = [score_params(replace(true, height=h), synthetic_root / rec.model, r, ("front",))["iou"]
                for h in (1.0, 1.1, 1.3, 1.5)]
    assert ious[0] >= 0.99 and list(np.argsort(ious)[::-1]) == [0, 1, 2, 3]


def test_model_answers_are_parsed_and_unparseable_ones_counted(tmp_path: Path, session_dirs: dict) -> None:
    from vase.pipeline.evaluate import run_evaluation

    out = tmp_path / "inv.json"
    data = [o for o in TINY_TRAIN if o.startswith(("data.", "render."))]
    cfg = compose_cfg("evaluate", ["action=invrender", "logger=none", *data, f"output={out}", "data.limit_val=2",
                                   "invrender.max_new_tokens=8", "invrender.resolution=64"], tmp_path, session_dirs)
    run_evaluation(cfg)
    res = json.loads(out.read_text())
    assert res["summary"]["n"] == 2 and res["summary"]["unparseable"] == 2 and res["summary"]["iou"] == 0.0
    assert all("answer" in x for x in res["items"].values())
    assert (tmp_path / "answers_invrender.jsonl").is_file()


def test_the_reward_scores_inverse_rendering_answers_by_silhouette(synthetic_root: Path) -> None:
    import json as _json
    from dataclasses import asdict, replace

    from vase.data.dataset import VaseDataset
    from vase.prompt_tasks.invrender import VaseParams
    from vase.rewards.reward import reward_from_config

    rec = VaseDataset(synthetic_root, "train", check_views=False).records[0]
    true = VaseParams.of_record(rec)
    other = next(s for s in ("kylix", "lekythos") if s != true.shape)
    target = {"fabric": None, "invrender": asdict(true)}
    r = reward_from_config(terms={"invrender": {"weight": 2.0, "views": ["front", "left"], "resolution": 48}})
    texts = [_json.dumps(asdict(true)), _json.dumps(asdict(replace(true, height=1.4))),
             _json.dumps(asdict(replace(true, shape=other))), "a lovely amphora"]
    out = r.compute(texts, targets=[target] * 4, reference=[""] * 4)
    iou = out.components["invrender"]
    assert iou[0] == 1.0 and 0.0 < iou[2] < iou[1] < 1.0 and iou[3] == 0.0
    assert out.total == [2.0 * x for x in iou]
    assert out.components["invrender_shape"] == [1.0, 1.0, 0.0, 0.0]  # the shape the answer names, where it parses
    # a caption prompt in the same batch is scored as before, with no inverse-rendering part
    cap = r.compute([rec.caption], targets=[{d: getattr(rec, d) for d in ("fabric", "technique", "shape", "dating",
                                                                           "decoration", "attribution")}],
                    reference=[rec.caption])
    assert cap.components["invrender"] == [0.0] and cap.total[0] > 0.5


def test_grpo_trains_on_inverse_rendering_prompts(train_cfg) -> None:
    from vase.pipeline import run_training

    cfg = train_cfg(["stage=grpo", "data.mix=invrender", "reward.terms.invrender.weight=1.0",
                     "stage.module.max_completion_length=8", "stage.module.num_generations=2"])
    run_training(cfg)
    history = json.loads((Path(cfg.paths.output_dir) / "train_history.json").read_text())
    assert history and all("reward/invrender" in h and 0.0 <= h["reward/invrender"] <= 1.0 for h in history)
