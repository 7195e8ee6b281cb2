"""CLIP filter speed against the real peer: the paper's own ``Train/filter/clipfilter1.py`` (one photo at a time:
open, preprocess, encode, score, copy) and ``python -m vase.filter`` (DataLoader workers decoding, batched encoding,
resumable manifest), side by side on the same photos with the same model, each run as a user runs it.

The paper's filter is fetched at benchmark time from its public repository (AIGeeksGroup/VaseVQA-3D) and never
committed; pass its path:

    python benchmarks/filter_speed.py --paper-filter /path/to/VaseVQA-3D/Train/filter/clipfilter1.py
    python benchmarks/filter_speed.py --paper-filter ... --images 90          # a quick look

Model: clipfilter1.py loads ``./openai/clip-vit-base-patch32`` from its working directory; that name points at a
randomly initialised CLIP with the real ViT-B/32 architecture, CLIP's own BPE tokenizer and image processor (built
here: no download), which vase gets as ``filter.clip.model``. Speed does not depend on the weights' values.
Photos: synthetic museum photos (``vase.filter.synthetic_photos``), 1600x1200 JPEGs like museum downloads.
clipfilter1.py runs unchanged under a transformers-5 shim (``get_text_features`` / ``get_image_features`` return
the pooled tensor, as under transformers 4) with HOME pointed at a scratch folder (it moves files out of
``~/.cache/clip`` when given a cache directory).

Both use the same threshold and copy the photos they keep (the paper also copies the rejected ones, as its script
does by default). Agreement: each photo's score from both, and the accept/reject decisions. Results go to
benchmarks/RESULTS.md with the machine and date.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import update_results  # noqa: E402

SHIM = '''import runpy, sys
import torch
from transformers import CLIPModel
def _pooled(fn):
    def wrapped(self, *a, **k):
        out = fn(self, *a, **k)
        return out if isinstance(out, torch.Tensor) else out.pooler_output
    return wrapped
CLIPModel.get_text_features = _pooled(CLIPModel.get_text_features)
CLIPModel.get_image_features = _pooled(CLIPModel.get_image_features)
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
'''


def run(cmd: list[str], cwd: Path, env: dict | None = None) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env or {})})
    elapsed = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return elapsed


def model_ceiling(clip_dir: Path, batch: int) -> dict[str, float]:
    """ms per photo of the image tower alone: one at a time (fp32), batched (fp32 and bf16), after a warm-up."""
    import torch
    from transformers import CLIPModel

    model = CLIPModel.from_pretrained(clip_dir).eval()
    px = torch.randn(batch, 3, 224, 224)

    def ms(x: torch.Tensor, bf16: bool, reps: int) -> float:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            model.get_image_features(pixel_values=x)
            t = time.perf_counter()
            for _ in range(reps):
                model.get_image_features(pixel_values=x)
        return (time.perf_counter() - t) / (reps * len(x)) * 1000

    return {"fp32_1": ms(px[:1], False, 32), "fp32_b": ms(px, False, 3), "bf16_b": ms(px, True, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper-filter", required=True, help="the paper's Train/filter/clipfilter1.py (fetched)")
    ap.add_argument("--images", type=int, default=360)
    ap.add_argument("--workers", type=int, default=2, help="vase's filter.num_workers")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "bench"))
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args()
    peer = Path(args.paper_filter).resolve()
    if not peer.is_file():
        sys.exit(f"{peer}: not found; fetch AIGeeksGroup/VaseVQA-3D and pass Train/filter/clipfilter1.py")

    import torch
    import transformers

    from vase.filter.synthetic_photos import generate_photos
    from vase.models.tiny_clip import build_vit_b32_clip

    cache = Path(args.cache)
    clip_dir = build_vit_b32_clip(cache / "vit-b32-clip")
    objects = max(1, args.images // 3)
    photos_root = cache / f"photos-{objects * 3}-1600"
    generate_photos(photos_root, objects=objects, photos_per_object=3, seed=0, size=(1600, 1200),
                    render_resolution=384, classifier_set=0, bad_inputs=False)
    photos = photos_root / "photos"
    n = sum(1 for _ in photos.iterdir())
    work = Path(tempfile.mkdtemp(prefix="vase-filter-bench-"))
    try:
        (work / "openai").mkdir()
        (work / "openai" / "clip-vit-base-patch32").symlink_to(clip_dir)
        (work / "home").mkdir()
        (work / "shim.py").write_text(SHIM)
        def ours(out: Path, *extra: str) -> tuple[float, float]:
            wall = run([sys.executable, "-m", "vase.filter", "filter=paper", f"filter.input={photos}",
                        f"filter.output={out}", f"filter.clip.model={clip_dir}", "filter.best_view.enabled=false",
                        "filter.keep=copy", f"filter.num_workers={args.workers}", f"filter.batch_size={args.batch_size}",
                        f"hydra.run.dir={work / 'hydra'}", f"paths.cache_dir={cache}", *extra], ROOT)
            return wall, json.loads((out / "timing.json").read_text())["seconds"]

        # vase first, at the paper's rule (25th percentile of a 500-photo sample); that threshold is then given to all
        rows = {"fp32": ours(work / "fp32")}
        threshold = json.loads((work / "fp32" / "report.json").read_text())["clip_threshold"]
        t_paper = run([sys.executable, str(work / "shim.py"), str(peer), "--input_dir", str(photos), "--output_dir",
                       str(work / "paper_out"), "--threshold", repr(threshold), "--device", "cpu",
                       "--model_cache_dir", str(work / "model_cache")], work, {"HOME": str(work / "home")})
        paper_report = json.loads((work / "paper_out" / "filtering_report.json").read_text())
        stage_paper = float(paper_report["processing_time_seconds"])
        theirs = {r["filename"]: r for r in paper_report["results"]}
        rows["full"] = ours(work / "full", "filter.draft=false", f"filter.clip.threshold={threshold!r}")
        rows["bf16"] = ours(work / "bf16", "filter.clip.precision=bf16", f"filter.clip.threshold={threshold!r}")

        def agreement(out: Path) -> tuple[float, int, int]:
            with open(out / "decisions.csv", newline="") as f:
                mine = {r["file"]: r for r in csv.DictReader(f)}
            assert set(mine) == set(theirs), "the two filters saw different files"
            diff = max(abs(float(mine[k]["clip"]) - theirs[k]["quality_score"]) for k in mine)
            same = sum((mine[k]["kept"] == "1") == bool(theirs[k]["accepted"]) for k in mine)
            return diff, same, len(mine)

        agree = {k: agreement(work / k) for k in rows}
        kept_paper = sum(bool(r["accepted"]) for r in theirs.values())
    finally:
        shutil.rmtree(work, ignore_errors=True)

    ceiling = model_ceiling(clip_dir, args.batch_size)
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
               f"transformers {transformers.__version__}")
    labels = {"fp32": "vase, fp32, JPEG draft decoding (default)",
              "full": "vase, fp32, full-size decoding (`filter.draft=false`)",
              "bf16": "vase, bf16 image tower (`filter.clip.precision=bf16`), draft decoding"}
    lines = [f"| paper's clipfilter1.py (one at a time) | {n / stage_paper:.1f} | 1.00x | {t_paper:.1f} | 1.00x | - | - |"]
    for k, (wall, stage) in rows.items():
        d, same, tot = agree[k]
        lines.append(f"| {labels[k]} | {n / stage:.1f} | **{stage_paper / stage:.2f}x** | {wall:.1f} | "
                     f"{t_paper / wall:.2f}x | {d:.4f} | {same}/{tot} |")
    table = (
        f"### CLIP fragment filter: `python -m vase.filter` vs the paper's own clipfilter1.py "
        f"(cpu, {machine}, {time.strftime('%Y-%m-%d')})\n\n"
        f"{n} synthetic 1600x1200 JPEG museum photos; the same model for both (random weights, real CLIP ViT-B/32 "
        f"architecture, tokenizer and image processor), the paper's prompts, threshold {threshold:.5f} (vase's 25th "
        f"percentile, given to the paper's script). Stage: images per second of the scoring loop, model loading "
        f"excluded (the paper's own `processing_time_seconds`; vase's `timing.json`). Command: wall time as a user "
        f"runs it (imports, model loading, scoring, copying the kept photos). vase: `filter=paper`, {args.workers} "
        f"DataLoader workers, batch {args.batch_size}. "
        f"`python benchmarks/filter_speed.py --paper-filter <VaseVQA-3D>/Train/filter/clipfilter1.py`\n\n"
        "| | stage images/s | **stage speed-up** | command (s) | command speed-up | max score difference | "
        "same decision |\n|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n"
        f"Target: >= 3x images/s for the CLIP stage. fp32 (default): {stage_paper / rows['fp32'][1]:.2f}x, "
        f"**{'met' if stage_paper / rows['fp32'][1] >= 3 else 'NOT met'}**; bf16: {stage_paper / rows['bf16'][1]:.2f}x, "
        f"**{'met' if stage_paper / rows['bf16'][1] >= 3 else 'NOT met'}**. The ceiling on this machine is the image "
        f"tower itself: {ceiling['fp32_1']:.1f} ms/photo one at a time, {ceiling['fp32_b']:.1f} ms/photo in batches of "
        f"{args.batch_size} (fp32), {ceiling['bf16_b']:.1f} ms/photo (bf16), so batching alone can give at most "
        f"{ceiling['fp32_1'] / ceiling['fp32_b']:.2f}x on the model's share in fp32 and "
        f"{ceiling['fp32_1'] / ceiling['bf16_b']:.2f}x with bf16; the rest of the paper's time (decoding, "
        f"preprocessing) vase overlaps or shrinks.\n\n"
        f"The paper's filter kept {kept_paper} of {n}. Score differences come from preprocessing (torchvision's "
        f"resize in the workers vs the transformers image processor; draft decoding reads the JPEG at a reduced DCT "
        f"scale that still covers 224 px) and, for bf16, from the image tower's precision.\n"
    )
    print(table)
    update_results(args.results, "filter_speed", table)


if __name__ == "__main__":
    main()
