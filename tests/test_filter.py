"""The photo filter: bad inputs, each stage's decisions against an independent computation, kill + resume, and the
user's photos left untouched."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.conftest import ROOT, compose_cfg, run_python
from vase.errors import ConfigError, DataError
from vase.filter.synthetic_photos import BAD_REASONS, generate_photos
from vase.images import open_photo

SMALL_Q = ["filter.quality.layers=[1,1,1,1]", "filter.quality.width_per_group=8", "filter.quality.image_size=48",
           "filter.quality.max_epochs=2", "filter.quality.num_workers=0", "filter.quality.batch_size=16"]


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("photos") / "collection"
    generate_photos(root, objects=10, photos_per_object=3, seed=3, classifier_set=40, progress=False)
    return root


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _cfg(tmp_path: Path, session_dirs: dict, extra: list[str]):
    return compose_cfg("curate", ["filter.num_workers=0", "filter.batch_size=4", *extra], tmp_path, session_dirs)


def _decisions(out: Path) -> list[dict]:
    with open(out / "decisions.csv", newline="") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------------------------------------ decoding


def test_every_planted_bad_input_gets_its_reason_or_is_converted(photos: Path) -> None:
    for name, expected in BAD_REASONS.items():
        d = open_photo(photos / "photos" / name)
        if expected is None:
            assert d.image is not None and d.image.mode == "RGB" and d.note, name
            rejected = open_photo(photos / "photos" / name, unusual_modes="reject")
            assert rejected.image is None and "filter.unusual_modes=reject" in rejected.reason
        else:
            assert d.image is None and expected in d.reason, (name, d.reason)


def test_conversions_keep_the_picture(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (80, 96, 3), dtype=np.uint8))
    gray = np.asarray(rgb.convert("L"), dtype=np.float64)
    # 16-bit PNG: scaled down by 257, not clipped to white
    Image.fromarray((gray * 257).astype(np.uint16)).save(tmp_path / "deep.png")
    d = open_photo(tmp_path / "deep.png")
    assert np.abs(np.asarray(d.image.convert("L"), dtype=np.float64) - gray).max() <= 1
    # palette PNG with a transparent colour: transparency over white
    p = Image.new("P", (70, 70), 0)
    p.putpalette([10, 20, 30] + [200, 0, 0] * 255)
    p.paste(1, (0, 0, 35, 70))
    p.info["transparency"] = 0
    p.save(tmp_path / "pal.png", transparency=0)
    d = open_photo(tmp_path / "pal.png")
    assert d.image.getpixel((60, 10)) == (255, 255, 255) and d.image.getpixel((5, 10)) == (200, 0, 0)
    # CMYK JPEG: colours come back (PIL handles the Adobe inversion)
    rgb.convert("CMYK").save(tmp_path / "cmyk.jpg", quality=95)
    d = open_photo(tmp_path / "cmyk.jpg")
    assert np.abs(np.asarray(d.image, dtype=float) - np.asarray(rgb.convert("CMYK").convert("RGB"), dtype=float)).mean() < 20


def test_draft_decoding_covers_the_model_input(tmp_path: Path) -> None:
    Image.new("RGB", (2000, 1500), (90, 60, 30)).save(tmp_path / "big.jpg")
    d = open_photo(tmp_path / "big.jpg", draft_size=224)
    assert min(d.image.size) >= 224 and d.image.size[0] < 2000


def test_generator_is_deterministic_and_refuses_foreign_folders(photos: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    generate_photos(again, objects=10, photos_per_object=3, seed=3, classifier_set=40, progress=False)
    assert _digests(again) == _digests(photos)
    labels = json.loads((photos / "labels.json").read_text())
    kinds = {v["kind"] for v in labels.values()}
    assert {"whole", "shard", "bad"} <= kinds
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "x.jpg").write_bytes(b"mine")

    with pytest.raises(DataError, match="did not write"):
        generate_photos(tmp_path / "theirs", objects=2, progress=False)


# ------------------------------------------------------------------------------------------------ stages


def _by_hand_scores(cfg, files: list[Path]) -> dict[str, tuple[float, float]]:
    """CLIP fragment score and view similarity computed one photo at a time, straight from open_clip."""
    from vase.metrics.encoders import build_clip_encoder

    enc = build_clip_encoder(cfg.filter.clip)

    def mean_dir(texts: list[str]) -> torch.Tensor:
        m = enc.encode(texts).mean(0)
        return m / m.norm()

    good, bad = mean_dir(list(cfg.filter.clip.good_prompts)), mean_dir(list(cfg.filter.clip.bad_prompts))
    view = mean_dir([cfg.filter.clip.view_description])
    out = {}
    for f in files:
        img = open_photo(f, draft_size=224).image
        with torch.no_grad():
            feat = enc.model.encode_image(enc.preprocess(img)[None]).float()[0]
        feat = feat / feat.norm()
        out[f.name] = (float(feat @ good - feat @ bad), float(feat @ view))
    return out


def test_clip_and_best_view_decisions_match_a_by_hand_computation(photos: Path, tmp_path: Path,
                                                                   session_dirs: dict) -> None:
    from vase.filter.runner import run_filter

    before = _digests(photos)
    out = tmp_path / "out"
    cfg = _cfg(tmp_path, session_dirs, [f"filter.input={photos / 'photos'}", f"filter.output={out}",
                                        "filter.keep=link"])
    report = run_filter(cfg.filter, progress=False)
    assert _digests(photos) == before  # the user's photos: not one byte changed, nothing moved
    rows = {r["file"]: r for r in _decisions(out)}
    labels = json.loads((photos / "labels.json").read_text())
    # decoding: exactly the planted failures are out; the unusual encodings are converted and go on
    unreadable = {f for f, r in rows.items() if r["clip"] == ""}
    assert unreadable == {n for n, why in BAD_REASONS.items() if why is not None}
    assert report["stages"][0] == {"stage": "readable image", "in": len(labels), "out": len(labels) - 4,
                                   "retention_pct": round(100 * (len(labels) - 4) / len(labels), 1)}
    # CLIP: every score equals the one-photo-at-a-time computation; threshold = 25th percentile of all (n < 500)
    readable = sorted(f for f in rows if f not in unreadable)
    hand = _by_hand_scores(cfg, [photos / "photos" / f for f in readable])
    for f in readable:
        assert float(rows[f]["clip"]) == pytest.approx(hand[f][0], abs=2e-5), f
        assert float(rows[f]["view"]) == pytest.approx(hand[f][1], abs=2e-5), f
    thr = float(np.percentile([hand[f][0] for f in readable], 25))
    assert report["clip_threshold"] == pytest.approx(thr, abs=2e-5)
    passed = [f for f in readable if float(rows[f]["clip"]) >= report["clip_threshold"]]
    assert report["stages"][1]["in"] == len(readable) and report["stages"][1]["out"] == len(passed)
    # best view: per object (file-name rule), the passed photo with the highest view similarity
    groups: dict[str, list[str]] = {}
    for f in passed:
        groups.setdefault(f.rsplit("_", 1)[0], []).append(f)
    expected = sorted(max(fs, key=lambda f: (hand[f][1], [-ord(c) for c in f])) for fs in groups.values())
    assert (out / "kept.txt").read_text().split() == expected
    assert report["overall"]["out"] == len(expected) == len(groups)
    # outputs: links to the originals, the Table 1 report, the histogram
    for f in expected:
        link = out / "kept" / f
        assert link.is_symlink() and link.resolve() == (photos / "photos" / f).resolve()
    md = (out / "report.md").read_text()
    assert "| Stage | In | Out | Retention |" in md and "| overall |" in md
    assert json.loads((out / "report.json").read_text())["overall"] == report["overall"]
    assert Image.open(out / "clip_scores.png").format == "PNG"


def test_group_by_metadata_column_equals_the_file_name_rule(photos: Path, tmp_path: Path, session_dirs: dict) -> None:
    from vase.filter.runner import run_filter

    a, b = tmp_path / "a", tmp_path / "b"
    common = [f"filter.input={photos / 'photos'}"]
    run_filter(_cfg(tmp_path, session_dirs, [*common, f"filter.output={a}"]).filter, progress=False)
    run_filter(_cfg(tmp_path, session_dirs, [*common, f"filter.output={b}", "filter.best_view.group_by=metadata",
                                             f"filter.best_view.metadata={photos / 'metadata.csv'}"]).filter,
               progress=False)
    assert (a / "kept.txt").read_text() == (b / "kept.txt").read_text()


def test_thresholds_redecide_from_the_manifest_without_rescoring(photos: Path, tmp_path: Path,
                                                                session_dirs: dict) -> None:
    from vase.filter.runner import run_filter

    out = tmp_path / "out"
    base = [f"filter.input={photos / 'photos'}", f"filter.output={out}", "filter.best_view.enabled=false"]
    run_filter(_cfg(tmp_path, session_dirs, base).filter, progress=False)
    manifest = (out / "manifest.jsonl").read_bytes()
    scores = sorted(float(r["clip"]) for r in _decisions(out) if r["clip"])
    thr = scores[len(scores) // 2]
    report = run_filter(_cfg(tmp_path, session_dirs, [*base, f"filter.clip.threshold={thr}"]).filter, progress=False)
    assert (out / "manifest.jsonl").read_bytes() == manifest
    assert report["stages"][1]["out"] == sum(s >= thr for s in scores)
    # a setting that changes the scores cannot resume into the same manifest
    with pytest.raises(ConfigError, match="other settings"):
        run_filter(_cfg(tmp_path, session_dirs, [*base, "filter.min_side=100"]).filter, progress=False)


def test_output_must_not_overlap_the_input_or_take_a_foreign_folder(photos: Path, tmp_path: Path,
                                                                   session_dirs: dict) -> None:
    from vase.filter.runner import run_filter

    with pytest.raises(ConfigError, match="overlap"):
        run_filter(_cfg(tmp_path, session_dirs, [f"filter.input={photos / 'photos'}",
                                                 f"filter.output={photos / 'photos' / 'out'}"]).filter)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no manifest"):
        run_filter(_cfg(tmp_path, session_dirs, [f"filter.input={photos / 'photos'}",
                                                 f"filter.output={theirs}"]).filter)
    assert not (photos / "photos" / "out").exists() and (theirs / "notes.txt").read_text() == "mine"


def test_default_output_is_keyed_by_the_input(photos: Path, tmp_path: Path, session_dirs: dict) -> None:
    cfg = _cfg(tmp_path, session_dirs, [f"filter.input={photos / 'photos'}"])
    out = Path(cfg.filter.output)
    assert out.parent == ROOT / "filtered" and out.name.startswith("photos-")
    assert _cfg(tmp_path, session_dirs, [f"filter.input={photos / 'photos'}"]).filter.output == cfg.filter.output


# ------------------------------------------------------------------------------------------------ kill + resume


def _cli(args: list[str], cache: Path) -> list[str]:
    return [sys.executable, "-m", "vase.filter", f"paths.cache_dir={cache}", "filter.num_workers=0",
            "filter.batch_size=2", *args]


@pytest.mark.slow  # heavy (a whole run or sweep in subprocesses): make test-slow; the default suite stays under 15 minutes
def test_killed_run_resumes_to_the_same_final_manifest(photos: Path, tmp_path: Path, session_dirs: dict) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the killed run and its rerun share a run folder (the rerun takes it up); a finished run's is never reused
    common = [f"filter.input={photos / 'photos'}", f"hydra.run.dir={tmp_path / 'hydra'}"]
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    subprocess.run(_cli([f"filter.input={photos / 'photos'}", f"hydra.run.dir={tmp_path / 'hydra-ref'}",
                         f"filter.output={ref}"], session_dirs["cache"]), env=env, check=True,
                   capture_output=True, cwd=ROOT)
    n_files = sum(1 for _ in (ref / "manifest.jsonl").open()) - 1
    proc = subprocess.Popen(_cli([*common, f"filter.output={killed}"], session_dirs["cache"]), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    manifest = killed / "manifest.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if manifest.is_file() and sum(1 for _ in manifest.open()) >= 5:
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = sum(1 for _ in manifest.open()) - 1
    assert 4 <= partial < n_files, "the kill must land mid-run"
    assert not (killed / "report.json").exists()
    subprocess.run(_cli([*common, f"filter.output={killed}"], session_dirs["cache"]), env=env, check=True,
                   capture_output=True, cwd=ROOT)
    for name in ("decisions.csv", "kept.txt", "report.md"):
        assert (killed / name).read_text() == (ref / name).read_text(), name
    ref_rep, got = json.loads((ref / "report.json").read_text()), json.loads((killed / "report.json").read_text())
    ref_rep.pop("input"), got.pop("input")
    assert got == ref_rep


# ------------------------------------------------------------------------------------------------ quality classifier


def test_quality_classifier_trains_exports_and_scores_as_it_validated(photos: Path, tmp_path: Path,
                                                                      session_dirs: dict) -> None:
    from vase.filter.quality import QualityClassifier, QualityScorer, labelled_files, train_quality

    cfg = _cfg(tmp_path, session_dirs, [*SMALL_Q, f"filter.quality.train_dir={photos / 'quality'}"])
    path = train_quality(cfg.filter.quality, tmp_path / "q")
    blob = torch.load(path, weights_only=True)
    assert 0.0 <= blob["metrics"]["best_val_auroc"] <= 1.0
    assert {"val/acc", "val/precision", "val/recall", "val/auroc"} <= set(blob["metrics"]["last_epoch"])
    best = torch.load(tmp_path / "q" / "checkpoints" / "best.ckpt", weights_only=False)
    module = QualityClassifier.load_from_checkpoint(tmp_path / "q" / "checkpoints" / "best.ckpt").eval()
    assert best["callbacks"]  # the best checkpoint, not the last, is what was exported
    scorer = QualityScorer(path)
    files = [p for p, _ in labelled_files(photos / "quality")][:6]
    px = torch.stack([scorer.transform(open_photo(f, min_side=32).image) for f in files])
    with torch.no_grad():
        assert torch.allclose(scorer(px), torch.sigmoid(module(px)), atol=1e-6)
    # filtering with it: photos below the threshold stop before CLIP, with their probability in the reason
    out = tmp_path / "out"
    cfg = _cfg(tmp_path, session_dirs, [f"filter.input={photos / 'photos'}", f"filter.output={out}",
                                        f"filter.quality.checkpoint={path}", "filter.quality.threshold=0.5"])
    report = __import__("vase.filter.runner", fromlist=["run_filter"]).run_filter(cfg.filter, progress=False)
    rows = _decisions(out)
    q_in = [r for r in rows if r["quality"] != ""]
    assert report["stages"][1] == {"stage": "quality classifier", "in": len(q_in),
                                   "out": sum(float(r["quality"]) >= 0.5 for r in q_in),
                                   "retention_pct": report["stages"][1]["retention_pct"]}
    for r in q_in:
        assert (r["clip"] != "") == (float(r["quality"]) >= 0.5)


def test_imagenet_weights_load_from_a_local_file_and_misfits_are_named(tmp_path: Path) -> None:
    from torchvision.models import resnet50

    from vase.filter.quality import ResNetSpec

    torch.manual_seed(0)
    ref = resnet50()
    torch.save(ref.state_dict(), tmp_path / "resnet50.pth")
    net = ResNetSpec().build(str(tmp_path / "resnet50.pth"))
    assert torch.equal(net.conv1.weight, ref.conv1.weight) and net.fc.out_features == 1
    with pytest.raises(ConfigError, match="fits a ResNet-50"):
        ResNetSpec(layers=(1, 1, 1, 1)).build(str(tmp_path / "resnet50.pth"))
    with pytest.raises(ConfigError, match="no such file"):
        ResNetSpec().build(str(tmp_path / "missing.pth"))
    io_buf = io.BytesIO()
    torch.save({"conv1.weight": torch.zeros(1)}, io_buf)
    (tmp_path / "bad.pth").write_bytes(io_buf.getvalue())
    with pytest.raises(ConfigError, match="not ResNet-50 weights"):
        ResNetSpec().build(str(tmp_path / "bad.pth"))


@pytest.mark.slow
def test_synthetic_task_runs_end_to_end_from_one_command(tmp_path: Path, session_dirs: dict) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = run_python(["-m", "vase.filter", "action=synthetic", f"paths.cache_dir={tmp_path / 'c'}",
                       f"hydra.run.dir={tmp_path / 'run'}", "synthetic.objects=6"], cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rep = json.loads((tmp_path / "run" / "filtered" / "report.json").read_text())
    assert [s["stage"] for s in rep["stages"]] == ["readable image", "quality classifier", "CLIP fragment filter",
                                                   "best view per object"]
    assert (tmp_path / "run" / "quality_classifier.pt").is_file()


def test_a_torn_manifest_line_is_redone_not_glued_to_the_next_batch(photos: Path, tmp_path: Path,
                                                                     session_dirs: dict) -> None:
    from vase.filter.runner import run_filter

    ref, torn = tmp_path / "ref", tmp_path / "torn"
    base = [f"filter.input={photos / 'photos'}"]
    run_filter(_cfg(tmp_path, session_dirs, [*base, f"filter.output={ref}"]).filter, progress=False)
    lines = (ref / "manifest.jsonl").read_text().splitlines(keepends=True)
    torn.mkdir()
    # the header, one whole batch of 4, and half of the next line: what a kill in the middle of a write leaves
    (torn / "manifest.jsonl").write_text("".join(lines[:5]) + lines[5][: len(lines[5]) // 2])
    run_filter(_cfg(tmp_path, session_dirs, [*base, f"filter.output={torn}"]).filter, progress=False)
    assert (torn / "decisions.csv").read_text() == (ref / "decisions.csv").read_text()
    assert sum(1 for _ in (torn / "manifest.jsonl").open()) - 1 == sum(1 for _ in (ref / "manifest.jsonl").open()) - 1


def test_the_filter_rejects_a_symlink_loop_with_its_reason(tmp_path: Path) -> None:
    from vase.images import iter_files, open_photo

    d = tmp_path / "photos"
    d.mkdir()
    (d / "ok.txt").write_text("x")
    os.symlink("b.jpg", d / "a.jpg")
    os.symlink("a.jpg", d / "b.jpg")
    os.symlink("nowhere.jpg", d / "dangling.jpg")
    os.symlink(d, d / "loop")  # a folder that contains itself: never followed
    files = sorted(p.name for p in iter_files(d))
    assert files == ["a.jpg", "b.jpg", "dangling.jpg", "loop", "ok.txt"]
    assert open_photo(d / "a.jpg").reason.startswith("symbolic link loop")
    assert open_photo(d / "dangling.jpg").reason.startswith("dangling symbolic link")
    assert open_photo(d / "loop").reason.startswith("symbolic link loop")


def test_the_filter_names_symlink_loops_and_dangling_links(tmp_path: Path) -> None:
    from vase.images import open_photo

    d = tmp_path / "photos"
    (d / "sub").mkdir(parents=True)
    os.symlink("b.jpg", d / "a.jpg")
    os.symlink("a.jpg", d / "b.jpg")
    os.symlink("nowhere.jpg", d / "dangling.jpg")
    os.symlink(d, d / "sub" / "loop")  # a folder link that leads back above itself
    os.symlink(d / "sub", d / "folder")
    assert open_photo(d / "a.jpg").reason.startswith("symbolic link loop")
    assert open_photo(d / "dangling.jpg").reason == "dangling symbolic link (its target 'nowhere.jpg' does not exist)"
    assert open_photo(d / "sub" / "loop").reason.startswith("symbolic link loop (a link to a folder that holds it)")
    assert open_photo(d / "folder").reason == "symbolic link to a folder, not to an image file"


def test_hidden_photos_are_named_when_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from PIL import Image

    from vase.reconstruct.base import objects_in

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    Image.new("RGB", (8, 8)).save(tmp_path / ".b.png")
    with caplog.at_level("WARNING", logger="vase"):
        assert list(objects_in(tmp_path)) == ["a"]
    assert ".b.png" in caplog.text and "hidden" in caplog.text
