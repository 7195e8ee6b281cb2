"""The GRPO learning check: does GRPO raise a simple reward it is given? (``make grpo-sanity``)

    python -m vase.sanity                                      # seeds 1 and 2; PASS or FAIL, exit 1 on FAIL
    python -m vase.sanity --seeds 1 --negative-control flip_advantages   # a broken learner: must FAIL
    python -m vase.sanity -- stage.module.optimizer.lr=5e-4   # any train.py override after --

For each seed it runs ``python train.py experiment=grpo_sanity seed=<s>`` (from the demo's SFT, GRPO with one binary
term: does the caption name the vase's true shape) and compares the mean training reward of the last ``--window``
steps with that of the first: PASS when it rose by at least ``--min-rise`` on every seed. It also reports how many
groups had nothing to learn from (``frac_reward_zero_std``), and beside the training rise the held-out one: the same
reward on captions of the 24 validation vases, greedy, before GRPO (its adapter off) and after, with a paired 95 %
interval (the verdict stays on the training rise). Writes ``sanity.json``, ``sanity.md`` and ``sanity.png``
(reward per step and its running mean, per seed) under ``logs/grpo_sanity/<time>/``; each seed's run is beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from vase import markdown as md
from vase.errors import ConfigError
from vase.eval.stats import heldout_difference
from vase.io import atomic_write_json, atomic_write_text, read_json, save_figure, user_output_dir
from vase.provenance import machine_stamp
from vase.runs import log_root, run_dir

ROOT = Path(__file__).resolve().parents[1]


def verdict(histories: dict[int, list[dict[str, float]]], window: int, min_rise: float) -> dict[str, Any]:
    """Per seed: the first and last ``window``-step mean reward, the rise, the mean share of zero-spread groups;
    ``passed`` when every seed rose by at least ``min_rise``.

    >>> h = [{"reward": 0.1, "frac_reward_zero_std": 0.5}] * 20 + [{"reward": 0.5, "frac_reward_zero_std": 0.2}] * 20
    >>> v = verdict({1: h}, 20, 0.3); v["passed"], round(v["seeds"][1]["rise"], 6)
    (True, 0.4)
    """
    seeds = {}
    for seed, h in histories.items():
        r = [x["reward"] for x in h]
        if len(r) < 2 * window:
            raise ValueError(f"seed {seed}: {len(r)} GRPO steps, fewer than two windows of {window}")
        first, last = statistics.mean(r[:window]), statistics.mean(r[-window:])
        zero = [x.get("frac_reward_zero_std", float("nan")) for x in h]
        seeds[seed] = {"steps": len(r), "first": first, "last": last, "rise": last - first,
                       "passed": last - first >= min_rise, "frac_reward_zero_std": statistics.mean(zero)}
    return {"window": window, "min_rise": min_rise, "passed": all(s["passed"] for s in seeds.values()),
            "seeds": seeds}


def heldout_rise(run: Path) -> dict[str, Any] | None:
    """The reward on held-out captions before GRPO (the start: adapter off) and after, and the paired difference."""
    end, start = run / "heldout_reward.json", run / "heldout_reward_start.json"
    if not (end.is_file() and start.is_file()):
        return None
    a, b = read_json(end), read_json(start)
    return {"start": b["total"]["mean"], "end": a["total"]["mean"], "n": a["n"],
            "rise": heldout_difference(a, b, "total")}


def table(v: dict[str, Any]) -> str:
    """The verdict as markdown, one row per seed."""
    w = v["window"]
    held = any(s.get("heldout") for s in v["seeds"].values())
    rows = md.table(["seed", "steps", f"reward, first {w}", f"reward, last {w}", "rise", "groups with no spread",
                     *(["held-out reward, before -> after (rise, 95 % CI)"] if held else []), "verdict"], align="lrrrrr")
    for seed, s in v["seeds"].items():
        h = s.get("heldout")
        cell = (f"{h['start']:.3f} -> {h['end']:.3f} ({h['rise']['diff']:+.3f} [{h['rise']['lo']:+.3f}, "
                f"{h['rise']['hi']:+.3f}], {h['n']} vases) | " if h else "– | ") if held else ""
        rows.append(f"| {seed} | {s['steps']} | {s['first']:.3f} | {s['last']:.3f} | {s['rise']:+.3f} | "
                    f"{100 * s['frac_reward_zero_std']:.0f} % | {cell}{'PASS' if s['passed'] else 'FAIL'} |")
    return "\n".join(rows) + f"\n\nPASS needs a rise of at least {v['min_rise']} on every seed: " \
                             f"**{'PASS' if v['passed'] else 'FAIL'}**\n"


def plot(histories: dict[int, list[dict[str, float]]], window: int, path: Path) -> Path:
    # lazy: matplotlib
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=120)
    for seed, h in histories.items():
        y = np.array([x["reward"] for x in h], dtype=float)
        (line,) = ax.plot(y, lw=0.7, alpha=0.35)
        ax.plot(np.arange(window - 1, len(y)), np.convolve(y, np.ones(window) / window, mode="valid"), lw=2,
                color=line.get_color(), label=f"seed {seed}, mean of {window}")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward of the step's groups")
    ax.set_title("GRPO learning check: does the caption name the true shape?")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--window", type=int, default=20, help="steps averaged at the start and at the end")
    ap.add_argument("--min-rise", type=float, default=0.3, help="the rise in mean reward each seed must show")
    ap.add_argument("--negative-control", choices=["flip_advantages", "shuffle_rewards"],
                    help="break the learner on purpose (the check must then FAIL)")
    ap.add_argument("--out", help="where the runs and the verdict go (default logs/grpo_sanity/<time>)")
    ap.add_argument("overrides", nargs="*", help="train.py overrides, after --")
    a = ap.parse_args(argv)
    if a.out:
        try:  # a folder the user named: a new one, or one an earlier check wrote (its sanity.json), never theirs
            out = user_output_dir(Path(a.out).resolve(), "--out", "vase.sanity", "sanity.json")
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        out.mkdir(parents=True, exist_ok=True)
    else:  # a new folder of its own (a second check started in the same second gets <time>_1)
        out = Path(run_dir(str(log_root(ROOT) / "grpo_sanity"), "never"))
    extra = list(a.overrides)
    if a.negative_control:
        extra.append(f"stage.module.negative_control={a.negative_control}")
    histories = {}
    for seed in a.seeds:
        run = out / f"seed-{seed}"
        cmd = [sys.executable, str(ROOT / "train.py"), "experiment=grpo_sanity", f"seed={seed}", "logger=none",
               f"hydra.run.dir={run}", *extra]
        print(f"seed {seed}: {' '.join(cmd[1:])}", flush=True)
        p = subprocess.run(cmd, cwd=ROOT)
        if p.returncode != 0:
            print(f"error: seed {seed}'s run failed (exit {p.returncode}); its log: {run}/grpo_sanity.log",
                  file=sys.stderr)
            return 2
        histories[seed] = json.loads((run / "train_history.json").read_text())
    v = verdict(histories, a.window, a.min_rise)
    for seed in a.seeds:  # reported beside the training rise; the verdict stays on that
        v["seeds"][seed]["heldout"] = heldout_rise(out / f"seed-{seed}")
    v["overrides"] = extra
    v["negative_control"] = a.negative_control
    v["machine"] = machine_stamp()
    atomic_write_json(out / "sanity.json", v)
    text = table(v)
    atomic_write_text(out / "sanity.md", "# GRPO learning check\n\n" + text + "\n![reward](sanity.png)\n")
    plot(histories, a.window, out / "sanity.png")
    print("\n" + text + f"\nwritten to {out}/sanity.md")
    return 0 if v["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
