"""The six-head attribute baseline learns above the majority class on the synthetic set, scored like the VLMs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import compose_cfg


def test_six_head_baseline_beats_the_majority_class(tmp_path: Path, session_dirs: dict) -> None:
    from vase.eval.tasks import run_evaluation

    out = tmp_path / "attributes.json"
    cfg = compose_cfg("evaluate", ["task=attributes", "logger=none", "data.synthetic.num_vases=96",
                                   "render.resolution=64", f"output={out}"], tmp_path, session_dirs)
    run_evaluation(cfg)
    res = json.loads(out.read_text())
    ours, chance = res["vqa"]["open"], res["majority_class"]["open"]
    assert ours["n"] == chance["n"] == 24 * 6
    # technique (colour scheme) and shape (silhouette) are visible in the views: well above the majority class
    for dim in ("technique", "shape"):
        assert ours["accuracy"][dim] >= chance["accuracy"][dim] + 0.25, dim
    assert ours["mean"] > chance["mean"] + 0.1
    assert "| six-head baseline | open-ended" in out.with_suffix(".md").read_text()
