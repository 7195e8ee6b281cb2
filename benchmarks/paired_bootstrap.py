"""The paired intervals of vase.metrics.paired.compare_captions, timed: the bootstrap alone (no encoders), before and
after the FID resamples moved to the Gram matrices (issue 49, trace 6).

    python benchmarks/paired_bootstrap.py                 # 240 vases (the ablation demo's held-out set), 2 vases
    python benchmarks/paired_bootstrap.py --vases 96 --dims 768

"Before" is the route compare_captions took until 2026-11-28: every FID resample recomputed from the d x d
covariances by their product's eigenvalues (`fid_by_eigenvalues`, one resample at a time); "after" is
`fid_resamples` (m x m Grams, m the distinct vases a resample drew, stacked) for the run and its start on two
threads. The per-vase metrics' 2,000 resamples are one array operation in both. The embeddings are random (what is
timed does not depend on their values); d 384 is the packaged all-MiniLM-L6-v2's width, 768 all-mpnet-base-v2's (the
paper's FID encoder). Results go to benchmarks/RESULTS.md with the machine and date.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import machine, update_results  # noqa: E402
from vase.metrics.paired import PER_VASE, fid_by_eigenvalues, fid_resamples  # noqa: E402


def per_vase(n: int, boot: np.ndarray, rng: np.random.Generator) -> float:
    a, b = ({m: rng.random(n) for m in PER_VASE} for _ in range(2))
    started = time.perf_counter()
    for m in PER_VASE:
        np.quantile((a[m] - b[m])[boot].mean(axis=1), [0.025, 0.975])
    return time.perf_counter() - started


def before(sa: np.ndarray, sb: np.ndarray, sr: np.ndarray, boot: np.ndarray) -> float:
    started = time.perf_counter()
    for idx in boot:
        fid_by_eigenvalues(sa[idx], sr[idx]) - fid_by_eigenvalues(sb[idx], sr[idx])
    return time.perf_counter() - started


def after(sa: np.ndarray, sb: np.ndarray, sr: np.ndarray, boot: np.ndarray) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(fid_resamples, e, sr, boot) for e in (sa, sb)]
        runs[0].result() - runs[1].result()
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vases", type=int, nargs="+", default=[240, 2])
    ap.add_argument("--dims", type=int, nargs="+", default=[384, 768])
    ap.add_argument("--boot", type=int, default=2000, help="per-vase resamples")
    ap.add_argument("--boot-fid", type=int, default=200, help="FID resamples")
    ap.add_argument("--before-sample", type=int, default=10,
                    help="FID resamples the old route is timed on (it is linear in them; scaled to --boot-fid)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for n in a.vases:
        for d in a.dims:
            sa, sb, sr = (rng.normal(size=(n, d)) for _ in range(3))
            boot = rng.integers(0, n, size=(a.boot, n))
            pv = per_vase(n, boot, rng)
            old = before(sa, sb, sr, boot[:a.before_sample]) * a.boot_fid / a.before_sample
            new = min(after(sa, sb, sr, boot[:a.boot_fid]) for _ in range(3))
            rows.append(f"| {n} | {d} | {pv:.3f} | {old:.1f} | {new:.2f} | {pv + new:.2f} | {old / new:.0f}x |")
            print(rows[-1], flush=True)
    table = (f"### Paired intervals of the caption metrics: the bootstrap ({machine('cpu')}, {date.today()})\n\n"
             f"`benchmarks/paired_bootstrap.py`: compare_captions' resampling alone (no encoders), {a.boot} per-vase "
             f"resamples and {a.boot_fid} FID resamples of the run and its start. Before: each FID resample from the "
             f"d x d covariances' eigenvalues, one at a time (timed on {a.before_sample}, scaled); after: from the "
             f"Gram matrices of the distinct vases drawn, stacked, run and start on two threads (best of 3).\n\n"
             "| vases | embedding width | per-vase (s) | FID before (s) | FID after (s) | total after (s) | FID speed-up |\n"
             "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    update_results(a.results, "paired_bootstrap", table)
    print(f"written to {a.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
