"""Scoring speed against the real peer: the paper's own ``eval/compare.py`` and ``evaluate.py action=score``, side by
side on the same files and the same encoders, each as a user runs it (a fresh process: imports, model loading,
scoring, writing the result).

The paper's scorer is fetched at benchmark time from its public repository (AIGeeksGroup/VaseVQA-3D) and never
committed; pass its path:

    python benchmarks/score_speed.py --paper-scorer /path/to/VaseVQA-3D/eval/compare.py
    python benchmarks/score_speed.py --paper-scorer ... --pairs 500 --files 2      # a quick look

Encoders: both load them by path. compare.py reads ``./models/openai/clip-vit-base-patch32`` and
``./models/sentence-transformers/all-mpnet-base-v2`` relative to its working directory; those names are pointed at a
tiny random transformers CLIP (built here) and the packaged all-MiniLM-L6-v2 (real weights), which ``evaluate.py``
gets as ``metrics.clip.model`` and ``metrics.text_encoder.model``. Under transformers 5 ``get_text_features``
returns an output object and compare.py's CLIP metrics silently become 0.0; the benchmark runs it with a shim that
returns the pooled tensor (as transformers 4 did) and changes nothing else.

Two measurements:
1. one generated file against the references (vase's embedding cache empty: a cold start);
2. ``--files`` generated files (different models' captions) against the same references: the paper's workflow
   (compare.sh runs compare.py once per file) against one ``evaluate.py action=score generated=[...]`` that loads the
   encoders once and reuses the reference embeddings from its disk cache.
Every metric must agree within 1e-4. Results go to benchmarks/RESULTS.md with the machine and date.
"""

from __future__ import annotations

import argparse
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

METRICS = ("clip_score", "fid_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity", "overall_score")

# Runs compare.py unchanged; only get_text_features returns the pooled tensor, as under transformers 4.
SHIM = '''import runpy, sys
import torch
from transformers import CLIPModel
_orig = CLIPModel.get_text_features
def _tensor(self, *a, **k):
    out = _orig(self, *a, **k)
    return out if isinstance(out, torch.Tensor) else out.pooler_output
CLIPModel.get_text_features = _tensor
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
'''


def make_pairs(n: int, seed: int = 0, gen_seed: int = 0) -> tuple[list[str], list[str]]:
    """References from ``seed`` (synthetic museum captions with an accession number: unique, as a museum's are)
    and generations perturbed with ``gen_seed`` (fields swapped or dropped, generic repeats as weak models write)."""
    import numpy as np

    from vase.annotate import make_caption
    from vase.annotate.dimension_sampling import sample_record

    rng = np.random.default_rng(seed)
    records = [sample_record(rng, i) for i in range(n)]
    refs = [f"{r.caption} Inv. {10000 + i}." for i, r in enumerate(records)]
    g = np.random.default_rng([seed, gen_seed])
    gens = []
    for rec in records:
        r = g.random()
        if r < 0.3:
            gens.append(f"{rec.fabric} {rec.technique} vase.")
        elif r < 0.6:
            rec.shape = ["amphora", "kylix", "hydria", "lekythos"][int(g.integers(4))]
            gens.append(make_caption(rec))
        else:
            words = rec.caption.split()
            gens.append(" ".join(words[: max(3, int(len(words) * g.uniform(0.4, 1.0)))]))
    return gens, refs


def write_paper_json(path: Path, captions: list[str]) -> None:
    """The paper's caption file: a JSON list of {"images": ["<uuid>_<n>_ac001001.jpg"], "caption"}."""
    items = [{"images": [f"{i:08x}-5a5e-4d0e-8c1a-{i:012x}_{i % 5}_ac001001.jpg"], "caption": c}
             for i, c in enumerate(captions)]
    path.write_text(json.dumps(items, ensure_ascii=False))


def run(cmd: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"})
    elapsed = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper-scorer", required=True, help="path to the paper's eval/compare.py (fetched, not committed)")
    ap.add_argument("--pairs", type=int, default=5000)
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "bench"))
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args()
    scorer = Path(args.paper_scorer).resolve()
    if not scorer.is_file():
        sys.exit(f"{scorer}: not found; fetch the paper's repository (AIGeeksGroup/VaseVQA-3D) and pass eval/compare.py")

    import torch
    import transformers

    from vase.models.tiny_clip import build_tiny_clip, packaged_minilm_path

    clip_dir = build_tiny_clip(Path(args.cache) / "tiny-clip")
    minilm = packaged_minilm_path()
    work = Path(tempfile.mkdtemp(prefix="vase-score-bench-"))
    try:
        (work / "models" / "openai").mkdir(parents=True)
        (work / "models" / "sentence-transformers").mkdir(parents=True)
        (work / "models" / "openai" / "clip-vit-base-patch32").symlink_to(clip_dir)
        (work / "models" / "sentence-transformers" / "all-mpnet-base-v2").symlink_to(minilm)
        (work / "shim.py").write_text(SHIM)
        gt = work / "groundTruth.json"
        gens = []
        for k in range(args.files):
            g, refs = make_pairs(args.pairs, gen_seed=k)
            gens.append(work / f"image_model{k}.json")
            write_paper_json(gens[-1], g)
        write_paper_json(gt, refs)

        def paper(gen: Path) -> float:
            return run([sys.executable, str(work / "shim.py"), str(scorer), "--generated", str(gen),
                        "--ground_truth", str(gt), "--output", str(work / f"paper_{gen.stem}.json")], work)

        def ours(files: list[Path], out: Path, cache: Path) -> float:
            listed = str(files[0]) if len(files) == 1 else "[" + ",".join(str(f) for f in files) + "]"
            return run([sys.executable, str(ROOT / "evaluate.py"), "action=score", f"generated={listed}",
                        f"ground_truth={gt}", f"output={out}", "logger=none", "metrics.clip.backend=hf",
                        f"metrics.clip.model={clip_dir}", "metrics.clip.build_tiny=false",
                        f"metrics.text_encoder.model={minilm}", f"metrics.embedding_cache={cache}",
                        f"hydra.run.dir={work / 'hydra'}"], ROOT)

        t_paper1 = paper(gens[0])
        t_ours1 = ours(gens[:1], work / "ours_one.json", work / "cache-one")
        t_paper_n = t_paper1 + sum(paper(g) for g in gens[1:])
        t_ours_n = ours(gens, work / "ours_many.json", work / "cache-many")

        disagree = []
        ours_one = json.loads((work / "ours_one.json").read_text())
        ours_many = json.loads((work / "ours_many.json").read_text())["results"]
        rows = []
        for k, g in enumerate(gens):
            theirs = json.loads((work / f"paper_{g.stem}.json").read_text())
            mine = ours_one if k == 0 else ours_many[g.stem]
            for m in METRICS:
                if abs(mine[m] - theirs[m]) > 1e-4:
                    disagree.append(f"{g.stem} {m}: vase {mine[m]:.6f}, paper {theirs[m]:.6f}")
            if k == 0:
                rows = [f"| {m} | {mine[m]:.6f} | {theirs[m]:.6f} |" for m in METRICS]
        for m in METRICS:  # the first file scored alone and in the batch must agree too
            if abs(ours_many[gens[0].stem][m] - ours_one[m]) > 1e-6:
                disagree.append(f"{gens[0].stem} {m}: alone {ours_one[m]:.6f}, in the batch {ours_many[gens[0].stem][m]:.6f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    machine = (f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
               f"transformers {transformers.__version__}")
    table = (
        f"### Caption scoring: `evaluate.py action=score` vs the paper's own eval/compare.py "
        f"(cpu, {machine}, {time.strftime('%Y-%m-%d')})\n\n"
        f"{args.pairs} pairs per file; the same encoders for both (tiny random transformers CLIP, packaged "
        f"all-MiniLM-L6-v2 in the place of all-mpnet-base-v2); wall time of each command as a user runs it, "
        f"imports and model loading included. compare.py runs unchanged under a transformers-5 shim (its "
        f"get_text_features gets the pooled tensor). `python benchmarks/score_speed.py --paper-scorer "
        f"<VaseVQA-3D>/eval/compare.py`\n\n"
        "| | paper's compare.py (s) | vase (s) | **speed-up** |\n|---|---|---|---|\n"
        f"| one file (vase's embedding cache cold) | {t_paper1:.1f} | {t_ours1:.1f} | **{t_paper1 / t_ours1:.2f}x** |\n"
        f"| {args.files} files, same references (compare.py once per file; one vase command) | {t_paper_n:.1f} | "
        f"{t_ours_n:.1f} | **{t_paper_n / t_ours_n:.2f}x** |\n\n"
        f"Every metric of every file agrees within 1e-4: **{'yes' if not disagree else 'NO'}**\n\n"
        f"| metric (first file) | vase | paper's compare.py |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    print(table)
    if disagree:
        print("\n".join(disagree))
        sys.exit("the two scorers disagree: see above")
    update_results(args.results, "score_speed", table)


if __name__ == "__main__":
    main()
