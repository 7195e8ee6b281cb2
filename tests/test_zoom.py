"""The zoom-in tool: calls parse, the frieze box is where the generator paints it, training data teaches the call,
and a call round trip hands the crop back to the model before it answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.conftest import TINY_TRAIN, compose_cfg
from vase.eval.zoom import zoom_rows
from vase.tasks.zoom import TOOL_NOTE, crop, decoration_box, parse_zoom, zoom_call


def _front(synthetic_root: Path):
    from vase.data.dataset import VaseDataset

    ds = VaseDataset(synthetic_root, "train")
    return ds, ds[0]


def test_the_frieze_box_and_its_crop(synthetic_root: Path) -> None:
    from vase.data.synthetic import SHAPE_SPECS

    ds, ex = _front(synthetic_root)
    front = ex.images[0]
    band = SHAPE_SPECS[ex.record.shape].band
    box = decoration_box(front, band, margin=0.0)
    a = np.asarray(front.convert("RGB"), dtype=int)
    fg = np.abs(a - a[1, 1]).max(axis=2) > 12
    rows = np.flatnonzero(fg.any(axis=1)) / fg.shape[0]
    height = rows[-1] - rows[0]
    assert abs((box[3] - box[1]) - (band[1] - band[0]) * height) < 0.03  # the band's share of the vase's height
    assert rows[0] - 0.01 <= box[1] < box[3] <= rows[-1] + 0.02
    c = crop(front, box)
    assert max(c.size) == max(front.size) and parse_zoom(zoom_call("front", box)) is not None


def test_training_samples_teach_the_call_and_the_answer_after_it(synthetic_root: Path) -> None:
    from vase.data.datamodule import ChatDataset, samples_for

    ds, ex = _front(synthetic_root)
    plain = samples_for(ex, "both")
    zoomed = samples_for(ex, "both", zoom=True, views=ds.views)
    direct, (call, answer) = zoomed[len(plain):-2], zoomed[-2:]
    assert len(direct) == 5 and all(s.prompt.endswith(TOOL_NOTE) and parse_zoom(s.answer) is None for s in direct)
    assert parse_zoom(call.answer) is not None and call.prompt.endswith(TOOL_NOTE)
    assert len(answer.images) == len(ex.images) + 1 and call.answer in answer.prompt
    dec = next(q for q in ex.record.qa if q["dimension"] == "decoration")
    assert answer.answer == dec["answer"] and answer.dimension == "decoration"
    assert len(ChatDataset(ds, "both", zoom=True)) == len(ds) * len(zoomed)


def test_a_call_round_trip_gives_the_crop_back(synthetic_root: Path, monkeypatch) -> None:
    import vase.eval.zoom as zoom_module
    from vase.eval.vqa import vqa_items

    ds, ex = _front(synthetic_root)
    items = [it for it in vqa_items(ds, "open") if it.extra["dimension"] in ("decoration", "shape")][:2]
    seen: list[tuple[str, int, str]] = []

    def fake_generate(model, processor, its, out_path=None, **kw):
        rows = []
        for it in its:
            imgs = it.images()
            seen.append((it.id, len(imgs), it.prompt))
            if "Zoomed view" in it.prompt:
                rows.append({"id": it.id, "caption": "Athena Promachos.", "reference": it.reference, **it.extra})
            elif it.extra["dimension"] == "decoration":
                rows.append({"id": it.id, "caption": 'Let me look. <zoom view="front" box="0.1,0.3,0.9,0.6"/>',
                             "reference": it.reference, **it.extra})
            else:
                rows.append({"id": it.id, "caption": "Amphora.", "reference": it.reference, **it.extra})
        return rows

    monkeypatch.setattr(zoom_module, "generate_rows", fake_generate)
    rows = zoom_rows(None, None, items, ds.views, max_calls=1)
    dec = next(r for r in rows if r["dimension"] == "decoration")
    other = next(r for r in rows if r["dimension"] != "decoration")
    assert dec["caption"] == "Athena Promachos." and dec["calls"] == ['<zoom view="front" box="0.10,0.30,0.90,0.60"/>']
    assert other["calls"] == [] and other["caption"] == "Amphora."
    second = [s for s in seen if "Zoomed view" in s[2]]
    assert len(second) == 1 and second[0][1] == len(ds.views) + 1  # the crop came back as the last image


def test_sft_with_zoom_data_and_vqa_with_the_tool_run(train_cfg, tmp_path: Path, session_dirs: dict) -> None:
    import json

    from vase.pipeline import run_training
    from vase.pipeline.evaluate import run_evaluation

    cfg = train_cfg(["data.task=both", "data.zoom=true"])
    run_training(cfg)
    adapter = Path(cfg.paths.output_dir) / "adapter"
    data = [o for o in TINY_TRAIN if o.startswith(("data.", "render."))]
    out = tmp_path / "vqa.json"
    ecfg = compose_cfg("evaluate", ["task=vqa", "logger=none", *data, f"adapter={adapter}", "vqa.protocol=open",
                                    "vqa.zoom=true", "vqa.max_new_tokens=6", "data.limit_val=1", f"output={out}"],
                       tmp_path / "eval", session_dirs)
    run_evaluation(ecfg)
    res = json.loads(out.read_text())["vqa"]
    assert set(res) == {"open", "open+zoom"} and res["open+zoom"]["n"] == 6
    assert "open-ended with the zoom tool" in out.with_suffix(".md").read_text()
