"""Time to a verdict: a sweep typed as a user types it, from empty caches, with vase's code at an earlier commit and
with the current tree, side by side in one run on this machine, and the ratio of their times.

    python benchmarks/quick_sweep.py                                   # experiment=ablation_quick against 2b860c6
    python benchmarks/quick_sweep.py --against 2b860c6 -- debug=fast   # any overrides after --
    python benchmarks/quick_sweep.py --no-write                        # printed only, RESULTS.md untouched

Each side runs ``python <tree>/train.py -m experiment=<name> <overrides>`` in a new empty folder (so its caches,
the tiny model, the synthetic vases, their renders, the shared SFT, start out empty, and its logs stay apart), with
that tree's vase first on the import path of every process it starts (``PYTHONPATH``). The earlier code is a
detached git worktree in a temporary folder, removed at the end. The two run one after the other, never together
(two torch jobs on 2 cores would slow each other), the earlier first. Wall time is from the command's start to its
exit (the sweep's end has printed its verdict then). What each sweep decided is read back and the two compared: its
targets from ablation.json ((i), (ii), the dose-response: held, not held or not decided, as `verdict_rows` reads them
for the dashboards), which must be the same on both sides (a speed-up that changes what the sweep decides is not a
speed-up), and every measure's direction from verdict.json, whose differences are listed beside them (a cheaper form
can move a measure that is not a target: the page that states its results says which).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import commit_label, update_results  # noqa: E402
from benchmarks._results import machine as describe_machine  # noqa: E402
from benchmarks.grpo_phases import worktree  # noqa: E402
from vase.reports.ablation import verdict_rows  # noqa: E402

BASE = "2b860c6"
"""The code the issue measured its 7 min 21 s against (2026-12-03)."""


def decided(verdict: dict[str, Any]) -> dict[str, dict[str, str]]:
    """What a sweep's verdict.json decides: for each setting and measure (pooled over the replicates), its direction
    and, said in points, its change and interval: ``{"<within> <setting> <measure>": {"direction": "up", "said": "up
    +17.1 [+12.5, +21.7]"}}``."""
    out = {}
    for within, settings in (verdict.get("blocks") or {}).items():
        for setting, measures in (settings or {}).items():
            for measure, found in (measures or {}).items():
                p = (found or {}).get("pooled") or {}
                direction = str(p.get("direction") or "not measured")
                said = direction if p.get("diff") is None else \
                    f"{direction} {100 * p['diff']:+.1f} [{100 * p['lo']:+.1f}, {100 * p['hi']:+.1f}]"
                out[f"{within} {setting} {measure}"] = {"direction": direction, "said": said}
    return out


def same_decision(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]) -> list[str]:
    """The settings and measures whose direction differs between two `decided` (the intervals may move with the
    code's arithmetic; what is decided must not)."""
    return [k for k in sorted(set(a) | set(b)) if (a.get(k) or {}).get("direction") != (b.get(k) or {}).get("direction")]


def targets(ablation: dict[str, Any]) -> dict[str, str]:
    """What a sweep's ablation.json decides on each target, as its dashboards show it (`verdict_rows`: (i), (ii),
    (iii), the dose-response, ...): ``{"(i)": "held", "(ii)": "not decided", "dose": "held"}``, a result without the
    reason its rule adds after a colon (target (ii) outside the grid)."""
    return {target: result.split(":")[0] for target, _asks, result in verdict_rows(ablation)}


def run_side(tree: Path, work: Path, experiment: str, overrides: list[str]) -> dict[str, Any]:
    """One sweep from an empty folder with ``tree``'s code: its wall seconds, exit code, folder and decisions."""
    work.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "WANDB_MODE": "offline", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("VASE_LOG_DIR", None)
    cmd = [sys.executable, str(tree / "train.py"), "-m", f"experiment={experiment}", *overrides]
    print(f"{tree}: {' '.join(cmd[1:])} (in {work})", flush=True)
    t = time.perf_counter()
    with open(work / "sweep.log", "w") as log:
        rc = subprocess.run(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t
    verdicts = sorted(work.glob("logs/*/multiruns/*/verdict.json"))
    verdict = json.loads(verdicts[-1].read_text()) if verdicts else {}
    ablation = verdicts[-1].parent / "ablation.json" if verdicts else None
    print(f"  rc {rc}, {wall:.0f} s, {len(verdicts)} verdict", flush=True)
    return {"rc": rc, "wall": wall, "sweep": str(verdicts[-1].parent) if verdicts else None,
            "decided": decided(verdict), "log": str(work / "sweep.log"),
            "targets": targets(json.loads(ablation.read_text())) if ablation and ablation.is_file() else {}}


def _said(side: dict, key: str) -> str:
    return (side["decided"].get(key) or {}).get("said", "-")


def _clock(s: float) -> str:
    return f"{int(s // 60)} min {s % 60:02.0f} s"


def section(then: dict, now: dict, base: str, commit: str, experiment: str, overrides: list[str]) -> str:
    ratio = now["wall"] / then["wall"] if then["wall"] else float("nan")
    changed = same_decision(then["decided"], now["decided"])
    t_then, t_now = then.get("targets") or {}, now.get("targets") or {}
    moved = [k for k in sorted(set(t_then) | set(t_now)) if t_then.get(k) != t_now.get(k)]
    typed = " ".join(["python train.py -m", f"experiment={experiment}", *overrides])

    def said_targets(t: dict[str, str]) -> str:
        return ", ".join(f"{k} {v}" for k, v in t.items()) or "no ablation.json"

    out = [f"### Time to a verdict: `{typed}` from empty caches, {base} vs {commit} (cpu, {describe_machine('cpu')}, "
           f"{time.strftime('%Y-%m-%d')})\n",
           f"`python benchmarks/quick_sweep.py --against {base}` (method in its docstring): each side from a new empty "
           "folder, one after the other in one run, alone on the machine.\n",
           "| code | exit | wall | targets | measures |\n|---|---|---|---|---|",
           f"| {base} | {then['rc']} | {_clock(then['wall'])} | {said_targets(t_then)} | "
           f"{len(then['decided'])} decided |",
           f"| {commit} | {now['rc']} | {_clock(now['wall'])} | {said_targets(t_now)} | "
           f"{len(now['decided'])} decided |",
           f"| **ratio now / then** | | **{ratio:.2f}x** | "
           f"{'the same targets' if not moved else f'{len(moved)} targets differ'} | "
           f"{'the same decisions' if not changed else f'{len(changed)} decisions differ'} |\n"]
    if moved:
        out.append("Targets that differ: " + "; ".join(f"{k}: {t_then.get(k, '-')} then, {t_now.get(k, '-')} now"
                                                       for k in moved) + "\n")
    if changed:
        out.append("Decisions that differ: " + "; ".join(
            f"{k}: {_said(then, k)} then, {_said(now, k)} now" for k in changed) + "\n")
    shown = list(now["decided"].items())[:8]
    if shown:
        out.append("Now: " + "; ".join(f"{k}: {v['said']} (then {_said(then, k)})" for k, v in shown) + "\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default=BASE, help=f"the earlier commit (default {BASE})")
    ap.add_argument("--experiment", default="ablation_quick")
    ap.add_argument("--keep", help="keep both sides' folders here (default: a temporary folder, removed)")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("overrides", nargs="*", help="overrides for both sides, after --")
    args = ap.parse_args(argv)
    commit = commit_label(ROOT)
    with contextlib.ExitStack() as stack:
        base = Path(args.keep) if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        tree = stack.enter_context(worktree(args.against))
        then = run_side(tree, base / "then", args.experiment, args.overrides)
        now = run_side(ROOT, base / "now", args.experiment, args.overrides)
        text = section(then, now, args.against, commit, args.experiment, args.overrides)
    print(text)
    if then["rc"] or now["rc"]:
        print(f"a side failed: its log is {then['log'] if then['rc'] else now['log']}"
              + ("" if args.keep else " (removed: run with --keep DIR to keep it)"), file=sys.stderr)
        return 1
    if not args.no_write:
        marker = "quick_sweep " + args.experiment + ("" if not args.overrides else " " + " ".join(args.overrides))
        update_results(args.results, marker, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
