"""An A/A check of the verdict's method: arms that differ only in their GRPO seed (the quick form's training, the
same setting on both arms), on several data draws; how often each method "decides" (any held-out measure up or
down, and target (i)'s analogue: shape right above the other arm), where a sound method decides about 1 in 20.

    python benchmarks/verdict_calibration.py                      # draws 0 1 2 3, three seeds an arm
    python benchmarks/verdict_calibration.py --draws 0 1 --seeds 3 --no-write
    python benchmarks/verdict_calibration.py --from <folder>       # count again from sweeps already run there

Each draw is one sweep as a user types it, ``python train.py -m experiment=ablation_quick
data.synthetic.seed=<draw> reward.weights.shape=0.6 seed=1,...,2k`` (one weight: nothing differs but the seed), in
a folder of its own under ``--work``; arm A is seeds 1..k, arm B seeds k+1..2k, paired by their order (A's first
against B's first). Both methods read the same jobs' held-out answers (heldout_reward.json):

- ``runs``: vase's interval (`vase.reports.verdict_stats.compare_move`), which covers another training run;
- ``within``: the interval vase 0.2.0 printed, a stratified bootstrap over the held-out vases within each run.

The counts go to benchmarks/RESULTS.md with Wilson 95 % intervals, the date, the machine, its torch threads and the
commit. Run it alone: its sweeps take about 6 minutes a draw on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import commit_label, update_results  # noqa: E402
from benchmarks._results import machine as describe_machine  # noqa: E402
from vase.annotate.vocab import DIMENSIONS  # noqa: E402
from vase.eval.stats import wilson_interval  # noqa: E402
from vase.reports.jobs import overrides_of  # noqa: E402
from vase.reports.verdict_stats import compare_move, value_of, within_runs_bootstrap  # noqa: E402

MOVES = ("heldout/total", "heldout/mean_right", *(f"heldout/{d}_right" for d in DIMENSIONS))
"""The held-out measures each A/A comparison is read on: every one a sweep's verdict can name."""


def run_draw(work: Path, draw: int, seeds: int, extra: list[str]) -> Path:
    """One draw's sweep (its ``2 * seeds`` jobs); the sweep's folder."""
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(ROOT / "train.py"), "-m", "experiment=ablation_quick", f"data.synthetic.seed={draw}",
           "reward.weights.shape=0.6", f"seed={','.join(str(s) for s in range(1, 2 * seeds + 1))}",
           "logger=none", *extra]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    env.pop("VASE_LOG_DIR", None)
    print(f"draw {draw}: {' '.join(cmd[1:])}", flush=True)
    t = time.perf_counter()
    with open(work / f"draw{draw}.log", "w") as log:
        rc = subprocess.run(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    sweeps = sorted(work.glob("logs/*/multiruns/*"))
    print(f"  rc {rc}, {time.perf_counter() - t:.0f} s", flush=True)
    if rc != 0 or not sweeps:
        raise SystemExit(f"draw {draw}: the sweep failed (rc {rc}); its log: {work / f'draw{draw}.log'}")
    return sweeps[-1]


def arms(sweep: Path, seeds: int) -> tuple[dict[str, Path], dict[str, Path]]:
    """Arm A (seeds 1..k) and arm B (k+1..2k) of one draw's sweep, keyed by their order within the arm."""
    by_seed = {int(overrides_of(j).get("seed", 0)): j for j in sweep.iterdir() if (j / ".hydra").is_dir()}
    return ({str(k): by_seed[k] for k in range(1, seeds + 1)},
            {str(k): by_seed[seeds + k] for k in range(1, seeds + 1)})


def decisions(a: dict[str, Path], b: dict[str, Path]) -> dict[str, dict[str, bool]]:
    """For each measure, whether each method decides B against A (its interval excludes 0)."""
    out = {}
    for move in MOVES:
        pooled = compare_move(move, a, b)["pooled"]
        if pooled["diff"] is None:
            continue
        per_run = []
        for k in a:
            base, other = value_of(a[k], move)[0] or {}, value_of(b[k], move)[0] or {}
            per_run.append([other[i] - base[i] for i in sorted(set(base) & set(other))])
        lo, hi = within_runs_bootstrap(per_run)
        out[move] = {"runs": pooled["direction"] in ("up", "down"), "within": lo > 0 or hi < 0,
                     "target_i_runs": move == "heldout/shape_right" and pooled["direction"] == "up",
                     "target_i_within": move == "heldout/shape_right" and lo > 0}
    return out


def rate(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n)
    return f"{k} of {n} ({100 * k / n:.1f} %, 95 % CI {100 * lo:.1f} to {100 * hi:.1f} %)" if n else "none"


def section(found: dict[int, dict[str, dict[str, bool]]], seeds: int, commit: str, threads: int) -> str:
    n = sum(len(v) for v in found.values())
    count = {m: sum(d[m] for v in found.values() for d in v.values())
             for m in ("runs", "within", "target_i_runs", "target_i_within")}
    lines = [f"## Verdict calibration: A/A comparisons ({time.strftime('%Y-%m-%d')}, {describe_machine('cpu')}, "
             f"{threads} torch threads, code {commit})", "",
             f"`python benchmarks/verdict_calibration.py --draws {' '.join(map(str, found))} --seeds {seeds}`: on "
             f"each draw of the data, `experiment=ablation_quick` at one shape weight (0.6) with GRPO seeds "
             f"1..{2 * seeds}; arm A is seeds 1..{seeds}, arm B the rest, paired by their order; each of "
             f"{len(MOVES)} held-out measures compared, B against A. Nothing differs but the seed, so every "
             f"decision is a false one; a sound method makes about 1 in 20.", "",
             "| method | measures decided (up or down) | target (i)'s analogue held (shape right, B above A) |",
             "|---|---|---|",
             f"| runs and vases (vase's interval since format 2) | {rate(count['runs'], n)} | "
             f"{rate(count['target_i_runs'], len(found))} |",
             f"| within-run bootstrap over the vases (vase 0.2.0) | {rate(count['within'], n)} | "
             f"{rate(count['target_i_within'], len(found))} |", "",
             "Per draw, the measures each method decided:", ""]
    for draw, v in found.items():
        said = {key: ", ".join(m.split("/", 1)[1] for m, d in v.items() if d[key]) or "none" for key in ("runs", "within")}
        lines.append(f"- draw {draw}: runs and vases: {said['runs']}; within-run: {said['within']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--seeds", type=int, default=3, help="GRPO seeds an arm (twice as many jobs a draw)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/vase-verdict-calibration"))
    ap.add_argument("--from", dest="done", action="store_true", help="count again from the sweeps in --work")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("extra", nargs="*", help="more overrides for every sweep (after --)")
    a = ap.parse_args(argv)
    found = {}
    for draw in a.draws:
        folder = a.work / f"draw{draw}"
        sweep = sorted(folder.glob("logs/*/multiruns/*"))[-1] if a.done else run_draw(folder, draw, a.seeds, a.extra)
        found[draw] = decisions(*arms(sweep, a.seeds))
        print(json.dumps({m: d for m, d in found[draw].items() if d["runs"] or d["within"]}), flush=True)
    import torch  # lazy: only to name the threads the sweeps ran with

    text = section(found, a.seeds, commit_label(ROOT), torch.get_num_threads())
    print(text)
    if not a.no_write:
        update_results(a.results, "verdict-calibration", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
