"""The zoom-in tool: calls parse, the frieze box is where the generator paints it, training data teaches the call,
and a call round trip hands the crop back to the model before it answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY_TRAIN, compose_cfg
from vase.eval.zoom import zoom_rows
from vase.prompt_tasks.zoom import TOOL_NOTE, crop, decoration_box, parse_zoom, zoom_call


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

    cfg = train_cfg(["data.mix=both", "data.zoom=true", "val.heldout=true", "val.heldout_mix=qa",
                     "val.heldout_zoom_calls=1", "val.heldout_max_new_tokens=6", "data.limit_val=1"])
    run_training(cfg)
    adapter = Path(cfg.paths.output_dir) / "adapter"
    # held out: the six questions with the tool offered, and the same adapter again without it
    held = json.loads((Path(cfg.paths.output_dir) / "heldout_reward.json").read_text())
    plain = json.loads((Path(cfg.paths.output_dir) / "heldout_without_tool.json").read_text())
    assert held["zoom"]["max_calls"] == 1 and held["zoom"]["answers"] == 6 and held["n"] == plain["n"] == 6
    assert set(held["items"]) == set(plain["items"]) and "zoom" not in plain
    data = [o for o in TINY_TRAIN if o.startswith(("data.", "render."))]
    out = tmp_path / "vqa.json"
    ecfg = compose_cfg("evaluate", ["action=vqa", "logger=none", *data, f"adapter={adapter}", "vqa.protocol=open",
                                    "vqa.zoom=true", "vqa.max_new_tokens=6", "data.limit_val=1", f"output={out}"],
                       tmp_path / "eval", session_dirs)
    run_evaluation(ecfg)
    res = json.loads(out.read_text())["vqa"]
    assert set(res) == {"open", "open+zoom"} and res["open+zoom"]["n"] == 6
    assert "open-ended with the zoom tool" in out.with_suffix(".md").read_text()


def test_a_scenes_attribute_is_below_the_models_input_and_a_crop_resolves_it() -> None:
    """Fine detail (data.synthetic.detail): every figural subject has its own attribute, each with the same ink. At
    the crop's scale (up to 2 texture pixels per pixel) every two attributes differ by the full contrast somewhere; at
    the model's input (about 3.2 texture pixels per pixel for a 112-pixel view) they blur: on average half of it."""
    import itertools

    from PIL import Image, ImageDraw

    from vase.annotate.vocab import terms
    from vase.data.synthetic import SUBJECT_GLYPHS, _draw_glyph, glyph_cells

    figural = [d for d in terms("decoration")
               if d not in ("an animal frieze", "palmettes and lotus buds", "a chariot race")]
    assert sorted(SUBJECT_GLYPHS) == sorted(figural) and len(set(SUBJECT_GLYPHS.values())) == len(figural)
    assert {len(glyph_cells(s)) for s in figural} == {4} and glyph_cells("a chariot race") == []

    def seen(subject: str, texture_px_per_px: float) -> np.ndarray:
        im = Image.new("L", (48, 48), 0)
        _draw_glyph(ImageDraw.Draw(im), subject, 18, 18, 255, 0)
        s = round(48 / texture_px_per_px)
        return np.asarray(im.resize((s, s), Image.Resampling.BOX), dtype=float) / 255

    def gaps(scale: float) -> list[float]:
        return [float(np.abs(seen(a, scale) - seen(b, scale)).max()) for a, b in itertools.combinations(figural, 2)]

    assert min(gaps(1.0)) == 1.0 and min(gaps(2.0)) == 1.0
    assert np.mean(gaps(3.2)) < 0.55 and min(gaps(3.2)) < 0.2


def test_a_detail_set_is_the_same_draw_with_the_attributes_and_side_a_in_front(tmp_path: Path) -> None:
    """detail=true draws the same records (and a manifest that says so, so it is never mistaken for the plain set);
    the plain set's manifest has no detail key (every earlier set, render and adapter keeps its key); in a detail
    texture a figural scene's first group is centred on u = 0, the front view."""
    import json

    from vase.data.synthetic import SHAPE_SPECS, generate, paint_texture, sample_record

    plain = generate(tmp_path / "plain", num=4, seed=3, progress=False)
    fine = generate(tmp_path / "fine", num=4, seed=3, progress=False, detail=True)
    assert [r.to_json() for r in plain["train"]] == [r.to_json() for r in fine["train"]]
    assert "detail" not in json.loads((tmp_path / "plain" / "synthetic.json").read_text())
    assert json.loads((tmp_path / "fine" / "synthetic.json").read_text())["detail"] is True
    assert (tmp_path / "plain" / plain["train"][0].model).read_bytes() != (tmp_path / "fine" / fine["train"][0].model
                                                                          ).read_bytes()
    rng = np.random.default_rng(0)
    rec = next(r for r in (sample_record(rng, i) for i in range(200)) if r.decoration == "a warrior departing")
    band = SHAPE_SPECS[rec.shape].band
    rows = slice(int((1 - band[1]) * 255) + 2, int((1 - band[0]) * 255) - 2)

    def ink_near_front(detail: bool) -> float:
        a = np.asarray(paint_texture(rec, np.random.default_rng(1), detail=detail), dtype=float)[rows]
        ground = np.median(a.reshape(-1, 3), axis=0)
        ink = np.abs(a - ground).max(axis=2) > 40
        return float(np.concatenate([ink[:, :24], ink[:, -24:]], axis=1).mean())

    assert ink_near_front(True) > 2 * ink_near_front(False) and ink_near_front(True) > 0.05


def test_a_narrower_call_covers_the_centre_of_the_frieze(synthetic_root: Path) -> None:
    """data.zoom_width=0.5: the taught call covers the centre half of the frieze (side A's scene in a detail set),
    the same rows; the crop magnifies it twice as much."""
    from vase.data.synthetic import SHAPE_SPECS

    ds, ex = _front(synthetic_root)
    band = SHAPE_SPECS[ex.record.shape].band
    whole, half = decoration_box(ex.images[0], band), decoration_box(ex.images[0], band, width=0.5)
    assert (half[1], half[3]) == (whole[1], whole[3])
    assert half[2] - half[0] == pytest.approx((whole[2] - whole[0]) / 2, abs=0.01)
    assert (half[0] + half[2]) / 2 == pytest.approx((whole[0] + whole[2]) / 2, abs=0.01)


def test_fewer_direct_questions_rotate_over_the_vases(synthetic_root: Path, tmp_path: Path,
                                                      session_dirs: dict) -> None:
    """data.zoom_direct=1: one of the five other questions per vase is taught with the tool offered, a rotation by
    the vase's id so that every question keeps a share; the decoration call and answer are always there. The defaults
    (the whole frieze, all five) leave the SFT's cache key as it was before the keys existed."""
    from vase.data.datamodule import VaseDataModule, samples_for
    from vase.data.dataset import VaseDataset
    from vase.errors import ConfigError
    from vase.pipeline.sft_cache import sft_key

    ds = VaseDataset(synthetic_root, "train")
    asked = []
    for i in range(len(ds)):
        ex = ds[i]
        five = [s for s in samples_for(ex, "qa", zoom=True, views=ds.views) if s.id.endswith("#tool")]
        one = samples_for(ex, "qa", zoom=True, views=ds.views, zoom_direct=1)
        tool = [s for s in one if s.id.endswith("#tool")]
        assert len(five) == 5 and len(tool) == 1 and tool[0].prompt.endswith(TOOL_NOTE)
        assert [s.id.split("#")[-1] for s in one[-2:]] == ["zoom-call", "zoom-answer"]
        asked.append(tool[0].dimension)
    assert len(set(asked)) >= 3  # not the same question for every vase
    for bad in ({"zoom_width": 0.0}, {"zoom_width": 1.5}, {"zoom_direct": 6}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            VaseDataModule(str(synthetic_root), render={"enabled": False}, **bad)

    def key(*extra: str) -> tuple[str, dict]:
        return sft_key(compose_cfg("train", ["experiment=beyond_zoom", *extra], tmp_path, session_dirs))

    default = key("data.zoom_width=1.0", "data.zoom_direct=5")
    assert "zoom_width" not in default[1]["data"] and "zoom_direct" not in default[1]["data"]
    assert key()[0] != default[0] and key()[1]["data"]["zoom_width"] == 0.5


class _Tower:
    """A stand-in vision tower: each 2 x 2 block of grey pixels is a visual token (its four values)."""

    dtype = None

    def __call__(self, pixel_values, grid_thw=None):
        import torch

        x = pixel_values[0, 0]
        h, w = (x.shape[0] // 2) * 2, (x.shape[1] // 2) * 2
        blocks = x[:h, :w].reshape(h // 2, 2, w // 2, 2).permute(0, 2, 1, 3).reshape(-1, 4)
        return torch.sort(blocks, dim=1).values  # what a block holds, not where it sits


class _Processor:
    """Fits each image to 112 x 112 pixels' area, as the tiny model's processor does, and hands it over as grey."""

    class image_processor:  # noqa: N801 - the attribute name the real processor has
        def __new__(cls, images, return_tensors="pt"):
            import torch
            from PIL import Image

            im = images[0].convert("L")
            s = min(1.0, (112 * 112 / (im.size[0] * im.size[1])) ** 0.5)
            im = im.resize((max(2, round(im.size[0] * s)), max(2, round(im.size[1] * s))), Image.Resampling.BOX)
            return {"pixel_values": torch.tensor(np.asarray(im), dtype=torch.float32)[None, None] / 255,
                    "image_grid_thw": None}


def test_the_zoom_probe_reads_fine_detail_from_the_crop_not_the_view() -> None:
    """On views whose scene is told apart only by a 1-pixel checker in the frieze's centre (against a flat patch of
    its mean grey), a probe on features of the 112-pixel view does no better than the majority, one on the crop's
    reads it."""
    from types import SimpleNamespace

    from PIL import Image

    from vase.eval.zoom_probe import format_probe, probe

    def view(scene: int, k: int) -> Image.Image:
        a = np.full((224, 224), 128, dtype=np.uint8)
        a[20:204, 40:184] = 40 + (k % 7)  # the vase
        yy, xx = np.mgrid[0:40, 0:40]
        a[92:132, 92:132] = np.where((xx + yy) % 2 == 0, 250, 40) if scene == 0 else 145
        return Image.fromarray(a).convert("RGB")

    class Set:
        def __init__(self, n: int, offset: int) -> None:
            scenes = ["Athena Promachos", "a symposium scene"]
            self.records = [SimpleNamespace(decoration=scenes[i % 2], shape="amphora") for i in range(n)]
            self.views, self.root, self._offset = ("front",), Path("set"), offset

        def __getitem__(self, i: int):
            return SimpleNamespace(record=self.records[i], images=[view(i % 2, i + self._offset)])

    model = SimpleNamespace(visual=_Tower(), dtype=None)
    model.__dict__["model"] = SimpleNamespace(visual=model.visual)
    res = probe(model, _Processor, Set(24, 0), Set(24, 100), lambda shape: (0.3, 0.7), width=0.3)
    assert res["heldout"] == 24 and res["scenes"] == 2 and res["majority"]["accuracy"] == 0.5
    assert res["view"]["accuracy"] <= 0.6 and res["crop"]["accuracy"] == 1.0
    assert "| crop | 100.0 %" in format_probe(res)


def test_the_zoom_probe_writes_its_result_with_the_draw_and_the_command_for_the_findings_table(tmp_path: Path) -> None:
    """``zoom_probe.json`` (atomic) in the run directory carries what the table needs to key and trust a row."""
    from vase.eval.zoom_probe import write_probe

    result = {"train": 40, "heldout": 38, "scenes": 9, "width": 0.5, "majority": {"accuracy": 0.2, "ci": [0.1, 0.3]},
              "view": {"accuracy": 0.25, "ci": [0.1, 0.4]}, "crop": {"accuracy": 0.35, "ci": [0.2, 0.5]}}
    out = write_probe(tmp_path, result, 5, ["experiment=beyond_zoom", "data.synthetic.seed=5"])
    saved = json.loads(out.read_text())
    assert out == tmp_path / "zoom_probe.json" and list(tmp_path.iterdir()) == [out]  # no temporary file left
    assert saved["data_seed"] == 5 and saved["overrides"] == ["experiment=beyond_zoom", "data.synthetic.seed=5"]
    assert saved["crop"]["accuracy"] == 0.35 and saved["machine"]["code"] and saved["machine"]["cpus"]
