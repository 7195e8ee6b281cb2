"""Scoring speed on 5,000 caption pairs: vase.metrics against the paper's method as a plain per-metric loop.

Both use the same tiny local encoders (a random transformers CLIP and a random sentence-transformers BERT, built
here and loaded by path), the same pairs, in one process; the numbers must agree (1e-4; R@k within 1/N where
ties exist) and the times are compared. The pairs are synthetic museum captions and, as generations, perturbed
copies (fields swapped or dropped, deterministic), with repeats as real model outputs have; each reference carries
an accession number, so references are unique, as a museum's are.

    python benchmarks/score_speed.py              # 5,000 pairs, best of 3, writes benchmarks/RESULTS.md
    python benchmarks/score_speed.py --pairs 500 --repeats 1
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import update_results  # noqa: E402


def make_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    import numpy as np

    from vase.annotate import make_caption
    from vase.data.synthetic import sample_record

    rng = np.random.default_rng(seed)
    refs, gens = [], []
    for i in range(n):
        rec = sample_record(rng, i)
        refs.append(f"{rec.caption} Inv. {10000 + i}.")  # an accession number: museum captions are unique
        r = rng.random()
        if r < 0.3:  # a generic caption, as weak models repeat themselves
            gens.append(f"{rec.fabric} {rec.technique} vase.")
        elif r < 0.6:
            rec.shape = ["amphora", "kylix", "hydria", "lekythos"][int(rng.integers(4))]
            gens.append(make_caption(rec))
        else:
            words = rec.caption.split()
            gens.append(" ".join(words[: max(3, int(len(words) * rng.uniform(0.4, 1.0)))]))
    return gens, refs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "bench"))
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = ap.parse_args()

    import torch

    from benchmarks import paper_method
    from vase.metrics import CaptionScorer
    from vase.metrics.encoders import HFCLIPEncoder, SentenceEncoder
    from vase.models.tiny_clip import build_tiny_clip, build_tiny_sentence_encoder

    cache = Path(args.cache)
    clip = HFCLIPEncoder(str(build_tiny_clip(cache / "tiny-clip")))
    sent = SentenceEncoder(str(build_tiny_sentence_encoder(cache / "tiny-sentence")))
    gens, refs = make_pairs(args.pairs)

    def timed(fn):
        best, out = float("inf"), None
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t)
        return best, out

    t_ours, ours = timed(lambda: CaptionScorer(clip, sent).score(gens, refs))
    t_paper, paper = timed(lambda: paper_method.score(clip, sent, gens, refs))
    n = len(gens)
    agree = all(abs(ours[k] - paper[k]) <= 1e-4 for k in ("clip_score", "fid_score", "lexical_similarity"))
    agree &= all(abs(ours[k] - paper[k]) <= 1 / n + 1e-12 for k in ("r_at_1", "r_at_5", "r_at_10"))
    keys = ["clip_score", "fid_score", "r_at_1", "r_at_5", "r_at_10", "lexical_similarity", "overall_score"]
    rows = "\n".join(f"| {k} | {ours[k]:.6f} | {paper[k]:.6f} |" for k in keys)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
    table = (
        f"### Caption scoring: vase.metrics vs the paper's per-metric loop (cpu, {machine}, {time.strftime('%Y-%m-%d')})\n\n"
        f"{n} pairs, tiny local encoders (random CLIP, random sentence BERT), best of {args.repeats}.\n\n"
        "| | seconds |\n|---|---|\n"
        f"| vase CaptionScorer | {t_ours:.2f} |\n| paper's method | {t_paper:.2f} |\n"
        f"| **speed-up** | **{t_paper / t_ours:.1f}x** |\n\n"
        f"Numbers agree (1e-4; R@k within 1/N): **{'yes' if agree else 'NO'}**\n\n"
        f"| metric | vase | paper's method |\n|---|---|---|\n{rows}\n"
    )
    print(table)
    update_results(args.results, "score_speed", table)
    if not agree:
        sys.exit("the two scorers disagree: see the table above")


if __name__ == "__main__":
    main()
