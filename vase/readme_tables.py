"""README tables written from results files, never by hand (``make readme-tables``).

    python -m vase.readme_tables                       # the newest results under logs/ into README.md
    python -m vase.readme_tables --check               # exit 1 when the README differs from the results

Each table sits between ``<!-- vase:table NAME -->`` and ``<!-- vase:end -->`` in the README; this rewrites the
lines between them from the newest finished results of that kind and notes the machine and date they were made on:

- ``results``: ``logs/demo/runs/*/results.json`` (``make demo``; the table it prints: README, the home page and
  Getting started);
- ``demo``: the same run's ``paired_captions.json`` (GRPO against SFT, paired over the validation vases);
- ``sanity``: ``logs/grpo_sanity/*/sanity.json`` (``make grpo-sanity``; the newest plain check and the newest of
  each negative control, one row per seed);
- ``ablation``: ``logs/ablation_demo/multiruns/*/ablation.json`` (``make ablation-demo``; its tables and verdicts);
- ``quick``: ``logs/ablation_quick/multiruns/*/ablation.json`` (``make ablation-quick``, ``DRAW=5``; target (i) per
  draw);
- ``gdpo``: the ablation demo's grid under both GRPO aggregations (`GDPO_COMMAND`; docs/findings/gdpo.md);
- ``claim``: the search for the paper's claim, the ablation demo at the paper's weights with each setting tried;
- ``beyond``: ``logs/beyond_<idea>/multiruns/*/compare.json`` (``make beyond-demo``; each idea's comparison);
- ``retrieval_format``, ``learned_alone``: an idea's ``compare.json`` as it ships and under each probe of it
  (``python train.py -m experiment=beyond_<idea> <overrides>``, the findings page's "what was tried");
- ``zoom_probe``: ``logs/beyond_zoom/runs/*/zoom_probe.json`` (``python -m vase.eval.zoom_probe``; per draw and crop);
- ``search``: ``logs/search_claim/multiruns/*/search_confirm.json`` (``python train.py -m sweep=search_claim``; its
  verdict and its best settings, searched and confirmed).

A table whose results are missing is left as it is, and said so.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from yaml import YAMLError

from vase import markdown as md
from vase.io import atomic_write_bytes, atomic_write_text, read_json
from vase.kernels import threads_label
from vase.metrics.caption_metrics import markdown_table
from vase.metrics.paired import format_comparison
from vase.metrics.paired import held as paired_held
from vase.provenance import code_label
from vase.reports.ablation import caption_cell, pooled_points
from vase.reports.compare import SHOWN, probe_against
from vase.reports.hypothesis import hypothesis_of
from vase.reports.jobs import job_dirs
from vase.runs import log_root, read_status

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"(<!-- vase:table (\w+) -->\n)(.*?)(<!-- vase:end -->)", re.DOTALL)


def _machine(m: dict[str, Any] | None) -> str:
    if not m:
        return "machine not recorded"
    code = f", code {code_label(m['code'])}" if m.get("code") else ""  # results made before vase recorded it: none
    where = ([f"{m['cpus']} CPU cores"] if m.get("cpus") else []) + ([str(m["system"])] if m.get("system") else [])
    return ", ".join([*where, f"torch {m.get('torch')}", str(m.get("date"))]) + code + f"; {_kernels(m)}"


def _kernels(m: dict[str, Any]) -> str:
    """What a table says of the CPU and kernels that made it: portable kernels travel between x86 CPUs; native ones
    make numbers that depend on the CPU (sampling turns last bits into other tokens).

    >>> _kernels({"cpu": "AMD EPYC", "cpu_kernels": "native", "threads": 2})
    'AMD EPYC, 2 torch threads, cpu_kernels native: sampled numbers depend on the CPU (another prints others; cpu_kernels=portable does not)'
    >>> _kernels({"cpu_kernels": "portable", "mkl_branch": "COMPATIBLE,STRICT"})
    'torch threads not recorded, cpu_kernels portable (MKL COMPATIBLE,STRICT)'
    """
    cpu = f"{m['cpu']}, " if m.get("cpu") else ""
    cpu += f"{threads_label(m)}, "
    if m.get("cpu_kernels") == "portable":
        branch = f" (MKL {m['mkl_branch']})" if m.get("mkl_branch") else " (MKL branch not recorded)"
        return f"{cpu}cpu_kernels portable{branch}"
    return (f"{cpu}cpu_kernels {m.get('cpu_kernels', 'native')}: sampled numbers depend on the CPU (another prints "
            f"others; cpu_kernels=portable does not)")


def _newest(paths: list[Path]) -> Path | None:
    return max(paths, key=lambda p: (p.parent.name, p.stat().st_mtime)) if paths else None


def _newest_each(found: list[tuple[Any, Path]]) -> dict[Any, Path]:
    """Per key, the newest of the results files found under it (``found``: (key, path) pairs)."""
    out: dict[Any, Path] = {}
    for key, path in found:
        if key not in out or _newest([out[key], path]) == path:
            out[key] = path
    return out


def sanity_table(log_dir: Path) -> str | None:
    """One row per seed of the newest plain learning check and of the newest run of each negative control."""
    control = "stage.module.negative_control="
    found = []
    for path in sorted(log_dir.glob("grpo_sanity/*/sanity.json")):
        v = read_json(path)
        nc = v.get("negative_control") or next((o.split("=", 1)[1] for o in v.get("overrides", [])
                                                if o.startswith(control)), None)
        # a check run with other settings (the GDPO aggregation) is its own row, never taken for the plain check
        kind = ", ".join([f"`{nc}`"] * bool(nc) + [f"`{o}`" for o in v.get("overrides", []) if not o.startswith(control)])
        found.append((kind, path))
    by_kind = _newest_each(found)
    if "" not in by_kind:
        return None
    rows = md.table(["run", "reward, first 20 steps", "last 20", "rise", "groups with no spread",
                     "held-out reward, before -> after", "held-out rise (95 % CI)", "verdict"], align="lrrrrrr")
    machines = []
    for kind in ["", *sorted(k for k in by_kind if k)]:
        v = read_json(by_kind[kind])
        machines.append(_machine(v.get("machine")))
        for seed, s in v["seeds"].items():
            label = f"seed {seed}" + (f", {kind}" if kind else "")
            h = s.get("heldout")
            held = (f"{h['start']:.3f} -> {h['end']:.3f} | {h['rise']['diff']:+.3f} [{h['rise']['lo']:+.3f}, "
                    f"{h['rise']['hi']:+.3f}]" if h else "– | –")
            rows.append(f"| {label} | {s['first']:.3f} | {s['last']:.3f} | {s['rise']:+.3f} | "
                        f"{100 * s['frac_reward_zero_std']:.0f} % | {held} | {'PASS' if s['passed'] else 'FAIL'} |")
    src = ", ".join(f"`{by_kind[k].parent.relative_to(log_dir.parent)}`" for k in ["", *sorted(k for k in by_kind if k)])
    return "\n".join(rows) + f"\n\nFrom {src} ({'; '.join(sorted(set(machines)))}).\n"


def _shipped(log_dir: Path, task: str, commands: list[list[str]], results: str = "ablation.json") -> Path | None:
    """The newest ``results`` file of a sweep under ``logs/<task>/multiruns/`` whose command line gave exactly one of
    ``commands`` (Hydra's ``multirun.yaml``): a probe of the same experiment with other settings is never taken."""
    return _newest([p for p in sorted(log_dir.glob(f"{task}/multiruns/*/{results}"))
                    if _command_overrides(p.parent) in commands])


def _shipped_ablation(log_dir: Path) -> Path | None:
    """The newest ``ablation.json`` of ``make ablation-demo`` as it ships (no override but the experiment)."""
    return _shipped(log_dir, "ablation_demo", [["experiment=ablation_demo"]])


GDPO_COMMAND = ["experiment=ablation_demo", "stage.module.multi_objective_aggregation=sum_then_normalize,normalize_then_sum"]
"""The GDPO measurement (docs/findings/gdpo.md): the ablation demo's grid under both aggregations."""

QUICK_DRAWS = ("0", "5")
"""The draws the first sweep's page shows (``make ablation-quick`` and ``DRAW=5``)."""


def gdpo_table(log_dir: Path) -> str | None:
    """The newest GDPO measurement (``python train.py -m`` + `GDPO_COMMAND`): its ``ablation.json``'s verdict per
    aggregation, each aggregation against the sum job by job, and the tables behind them."""
    path = _shipped(log_dir, "ablation_demo", [GDPO_COMMAND])
    if path is None:
        return None
    v = read_json(path)
    return v["table"] + f"\n\nFrom `{path.parent.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))}).\n"


def quick_table(log_dir: Path) -> str | None:
    """The first sweep (``experiment=ablation_quick``) on each of `QUICK_DRAWS`: its target (i) per draw, the newest
    run of each as it ships (``make ablation-quick``, ``DRAW=5``; the draw-0 one also without the draw named)."""
    rows, sources = [], []
    for draw in QUICK_DRAWS:
        commands = [["experiment=ablation_quick", f"data.synthetic.seed={draw}"]]
        if draw == "0":  # the default draw: the command the page shows first names none
            commands.append(["experiment=ablation_quick"])
        path = _shipped(log_dir, "ablation_quick", commands)
        if path is None:
            return None
        v = read_json(path)
        name = f"{draw}{' (the default)' if draw == '0' else ''}"
        pooled = v.get("i_pooled")  # since verdict format 2: the decision is the runs', each run's row decides nothing
        for group, g in v["i_per_seed"].items():
            a, b = g["max_minus_0"], g["max_minus_sft"]
            said = ("one run: its vases only" if pooled else
                    "**held**" if a["lo"] > 0 and b["lo"] > 0 else "not held")
            rows.append(f"| {name}, GRPO seed {group} | {_points(a)} ({100 * g['at_max']:.1f} % vs "
                        f"{100 * g['at_0']:.1f} %) | {_points(b)} (SFT {100 * g['sft']:.1f} %) | {said} |")
        if pooled:
            a, b = pooled["max_minus_0"], pooled["max_minus_sft"]
            said = "not decided" if v.get("i") is None else "held" if v["i"] else "not held"
            rows.append(f"| {name}, **pooled over {a.get('runs')} run(s)** | {pooled_points(a)} | {pooled_points(b)} | "
                        f"**{said}**{' (' + a['direction'] + ')' if a.get('undecided') else ''} |")
        sources.append(f"`{path.parent.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))})")
    w = v["weights"]
    head = md.table(["data draw", f"shape right: weight {max(w):g} against {min(w):g}, points [95 %]",
                     "against the SFT start", "target (i)"])
    return "\n".join([*head, *rows]) + f"\n\nFrom {'; '.join(sources)}.\n"


PAPER_SETTING = "reward.weights.shape=0.15"
"""The search for the paper's claim ran the ablation demo at the paper's weights only, with this override."""


def claim_table(log_dir: Path) -> str | None:
    """The search for the paper's claim (target (iii)): GRPO's held-out captions against its SFT start on lexical
    similarity and the overall score, per draw, at the paper's weights. A row for the demo (the newest shipped
    ablation demo) and one per setting tried: each newest ``python train.py -m experiment=ablation_demo
    reward.weights.shape=0.15 <setting>`` (a setting swept in it, ``reward.terms.bonus.weight=0.3,0.6``, a row per
    value). None until the demo has run."""
    demo = _shipped_ablation(log_dir)
    shipped = read_json(demo) if demo is not None else {}
    if "captions" not in shipped:
        return None
    by_draw = {g.split(", ")[0]: c for g, c in shipped["captions"]["differences"].items()}  # one GRPO seed a draw
    rows: dict[str, tuple[dict[str, Any], Path]] = {
        "the demo (`make ablation-demo`)": ({"captions": {"differences": by_draw}, "machine": shipped.get("machine")},
                                            demo)}
    tried: dict[str, tuple[dict[str, Any], Path]] = {}
    for path in sorted(log_dir.glob("ablation_demo/multiruns/*/ablation.json"), key=lambda p: p.parent.name):
        given = _command_overrides(path.parent) or []
        if given[:1] != ["experiment=ablation_demo"] or PAPER_SETTING not in given:
            continue
        fixed = [o for o in given[1:] if o != PAPER_SETTING and "," not in o]
        seed_swept = any(o.startswith("seed=") and "," in o for o in given)
        v = read_json(path)
        by_setting: dict[str, dict[str, Any]] = {}
        for group, diff in (v.get("captions") or {}).get("differences", {}).items():
            # "draw 0, seed 1, reward.terms.bonus.weight=0.3": the draw, the GRPO seed, what else the sweep varied
            parts = group.split(", ")
            draw = next((p for p in parts if p.startswith("draw ")), "draw -")
            seed = next((p.split(" ", 1)[1] for p in parts if p.startswith("seed ")), parts[0])
            swept = [p for p in parts if "=" in p] + [f"seed={seed}"] * seed_swept
            label = " ".join(f"`{o}`" for o in [*fixed, *swept]) or "the demo's settings"
            by_setting.setdefault(label, {})[draw] = diff
        for label, diffs in by_setting.items():
            tried[label] = ({"captions": {"differences": diffs}, "machine": v.get("machine")}, path)  # newest wins
    rows.update(sorted(tried.items()))
    draws = sorted({d for v, _ in rows.values() for d in v["captions"]["differences"]} - {"draw -"})
    targets = ["lexical_similarity", "overall_score"]
    out = md.table(["setting at the paper's weights", *(f"{d}: {m.split('_')[0]}" for d in draws for m in targets),
                    "held on"])
    for label, (v, _) in rows.items():
        diffs = v["captions"]["differences"]
        cells, held_on = [], []
        for d in draws:
            c = diffs.get(d)
            cells += [caption_cell(m, c[m]) if c else "–" for m in targets]
            if c and all(paired_held(c[m], m) for m in targets):
                held_on.append(d)
        out.append(f"| {label} | " + " | ".join(cells) + f" | {', '.join(held_on) or 'neither'} |")
    made = {p: v.get("machine") for v, p in rows.values()}  # a sweep of two settings is one source
    sources = "; ".join(f"`{p.parent.relative_to(log_dir.parent)}` ({_machine(m)})" for p, m in made.items())
    return "\n".join(out) + f"\n\nFrom {sources}.\n"


def _points(c: dict[str, float]) -> str:
    return f"{100 * c['diff']:+.1f} [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}]"


def _shipped_search(log_dir: Path) -> Path | None:
    """The newest ``search_confirm.json`` of ``python train.py -m sweep=search_claim`` as it ships."""
    def command(sweep: Path) -> list[str] | None:  # Hydra's multirun.yaml, else the search's own record of it
        given = _command_overrides(sweep)
        if given is None and (sweep / "search.json").is_file():
            given = read_json(sweep / "search.json").get("fixed")
        return given

    return _newest([p for p in sorted(log_dir.glob("search_claim/multiruns/*/search_confirm.json"))
                    if command(p.parent) == ["sweep=search_claim"]])


def search_table(log_dir: Path) -> str | None:
    """The newest shipped search-then-confirm run's verdict and best settings, as its ``search_confirm.md`` states
    them."""
    path = _shipped_search(log_dir)
    if path is None:
        return None
    v = read_json(path)
    jobs = ", ".join(v.get("code") or {}) or "unrecorded"  # the code that trained, beside the report's own
    return v["table"] + (f"\n\nFrom `{path.parent.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))}; "
                         f"every job by {jobs}).\n")


def figures(log_dir: Path) -> dict[Path, Path]:
    """The plots the docs pages show beside their tables: page image -> the results file it is copied from."""
    out: dict[Path, Path] = {}
    search = _shipped_search(log_dir)
    if search is not None and (search.parent / "search_confirm.png").is_file():
        out[ROOT / "docs" / "img" / "search_confirm.png"] = search.parent / "search_confirm.png"
    ablation = _shipped_ablation(log_dir)
    if ablation is not None and (ablation.parent / "ablation.png").is_file():
        out[ROOT / "docs" / "img" / "ablation.png"] = ablation.parent / "ablation.png"
    return out


def ablation_table(log_dir: Path) -> str | None:
    """The newest ablation demo's tables and verdicts, as its own ``ablation.md`` states them: a run of
    ``make ablation-demo`` as it ships (no override but the experiment), never a probe run with other settings."""
    path = _shipped_ablation(log_dir)
    if path is None:
        return None
    v = read_json(path)
    if "table" not in v:
        return None
    return v["table"] + f"\n\nFrom `{path.parent.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))}).\n"


def _command_overrides(sweep: Path) -> list[str] | None:
    """The overrides a sweep's command line gave (Hydra's ``multirun.yaml``), or None when it cannot be read."""
    try:
        return list(OmegaConf.load(sweep / "multirun.yaml").hydra.overrides.task)
    except (OSError, YAMLError, OmegaConfBaseException):  # missing or torn: not a run to take a table from
        return None


def _run_overrides(run: Path) -> list[str] | None:
    """The overrides a single run's command line gave (Hydra's ``.hydra/overrides.yaml``)."""
    try:
        return [str(o) for o in OmegaConf.load(run / ".hydra" / "overrides.yaml")]
    except (OSError, YAMLError, OmegaConfBaseException, TypeError):
        return None


def demo_table(log_dir: Path) -> str | None:
    """The newest ``make demo``'s GRPO-against-SFT captions, paired over its validation vases (its
    ``paired_captions.json``): a run of ``python train.py experiment=demo`` as it ships, nothing else."""
    path = _newest([p for p in sorted(log_dir.glob("demo/runs/*/paired_captions.json"))
                    if _run_overrides(p.parent) == ["experiment=demo"]])
    if path is None:
        return None
    v = read_json(path)
    return (format_comparison(v["metrics"], v["run"], v["start"]) +
            f"\nFrom `{path.parent.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))}).\n")


def results_table(log_dir: Path) -> str | None:
    """The table ``make demo`` prints (untrained, SFT and GRPO on the validation vases), from the newest demo run's
    ``results.json``, as it ships (``python train.py experiment=demo``, nothing else)."""
    path = _newest([p for p in sorted(log_dir.glob("demo/runs/*/results.json"))
                    if _run_overrides(p.parent) == ["experiment=demo"]])
    if path is None:
        return None
    paired = path.parent / "paired_captions.json"
    machine = read_json(paired).get("machine") if paired.is_file() else None
    return (markdown_table(read_json(path)) +
            f"\nFrom `{path.parent.relative_to(log_dir.parent)}` ({_machine(machine)}).\n")


def beyond_table(log_dir: Path) -> str | None:
    """Per beyond-the-paper experiment (``experiments/beyond_<idea>.yaml``, its hypothesis of the ``idea`` kind), the
    newest ``compare.json`` of ``make beyond-demo`` as it ships (``experiment=beyond_<idea>``, no other override):
    its table and verdicts."""
    parts = []
    for name in sorted(p.stem.removeprefix("beyond_") for p in (ROOT / "experiments").glob("beyond_*.yaml")):
        path = _newest([p for p in sorted(log_dir.glob(f"beyond_{name}/multiruns/*/compare.json"))
                        if _command_overrides(p.parent) == [f"experiment=beyond_{name}"]])
        if path is None:
            continue
        v = read_json(path)
        label = str(v.get("idea") or (hypothesis_of(OmegaConf.load(ROOT / "experiments" / f"beyond_{name}.yaml")) or
                                      {}).get("label") or name)
        parts.append(f"**{label[0].upper() + label[1:]}** (`python train.py -m experiment=beyond_{name}`)\n\n"
                     f"{v['table']}\n\n"
                     + (f"The same adapters with the part used at answer time against without it "
                        f"(`{v.get('within_file')}.json`):\n\n{v['within_table']}\n\n" if v.get("within_table") else "")
                     + f"From `{path.parent.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))}).\n")
    return "\n".join(parts) if parts else None


def _probe_results(log_dir: Path, name: str) -> list[tuple[list[str], Path, dict[str, Any]]]:
    """``experiment=beyond_<name>`` as it ships, then each probe of it (the same command with more overrides), the
    newest finished sweep of each: its overrides beyond the experiment, its folder, and its comparison (its own
    ``compare.json``, or, for a probe that ran only the idea's side, `probe_against` the shipped sweep)."""
    sweeps = [(tuple(given[1:]), path / "multirun.yaml") for path in sorted(log_dir.glob(f"beyond_{name}/multiruns/*"))
              if (given := _command_overrides(path) or [])[:1] == [f"experiment=beyond_{name}"]]
    shipped = _newest_each([(k, p) for k, p in sweeps if not k and (p.parent / "compare.json").is_file()]).get(())
    if shipped is None:
        return []
    q = hypothesis_of(OmegaConf.load(ROOT / "experiments" / f"beyond_{name}.yaml")) or {}
    found = []
    for key, path in sweeps:
        if (path.parent / "compare.json").is_file():
            found.append((key, path, read_json(path.parent / "compare.json")))
        elif key and (v := probe_against(shipped.parent, path.parent, q)) is not None:
            found.append((key, path, {**v, "against": shipped.parent.name, "machine": _sweep_machine(path.parent)}))
    newest = _newest_each([(k, p) for k, p, _ in found])
    return sorted(((list(k), p.parent, v) for k, p, v in found if newest[k] == p), key=lambda r: (len(r[0]), r[0]))


def _sweep_machine(sweep: Path) -> dict[str, Any] | None:
    """When and by which code a sweep's last job finished (its run record; the machine itself is not recorded)."""
    records = [r for r in map(read_status, job_dirs(sweep)) if r.get("ended")]
    if not records:
        return None
    last = max(records, key=lambda r: r["ended"])
    return {"date": time.strftime("%Y-%m-%d", time.localtime(last["ended"])), "code": last.get("code"),
            "torch": (last.get("code") or {}).get("torch")}


def probes_table(log_dir: Path, name: str) -> str | None:
    """An idea's comparison as it ships and under each probe of it (``python train.py -m experiment=beyond_<name>
    <overrides>``), side by side: per draw and seed, each target's with - without (paired 95 % interval), and the other
    dimensions the idea helped or hurt there. None until the shipped comparison and one probe have run."""
    sweeps = _probe_results(log_dir, name)
    if len(sweeps) < 2:
        return None
    parts, sources = [], []
    for extra, path, v in sweeps:
        targets = [d for d, r in v["dimensions"].items() if r["target"]]
        others = {d: r for d, r in v["dimensions"].items() if not r["target"]}
        head = " ".join(f"`{o}`" for o in extra) or "as it ships"
        against = (f"the shipped sweep's `{v['key']}={v['off']}` jobs ({v['against']}, the same held-out vases)"
                   if v.get("against") else f"`{v['key']}={v['off']}`")
        rows = [f"**{head}**: `{v['key']}={v['on']}` against {against}", "",
                *md.table(["draw, seed", *(f"{SHOWN.get(t, t)}: without -> with, points [95 % CI]" for t in targets),
                           "other dimensions, interval above / below 0"])]
        for g in v["groups"]:
            cells = []
            for t in targets:
                s_ = v["dimensions"][t]["groups"].get(g)
                cells.append("–" if s_ is None else f"{100 * s_['off']:.1f} -> {100 * s_['on']:.1f}: {_points(s_)}")
            up = [d for d, r in others.items() if r["groups"].get(g, {}).get("lo", 0) > 0]
            down = [d for d, r in others.items() if r["groups"].get(g, {}).get("hi", 0) < 0]
            rows.append(f"| {g} | " + " | ".join(cells) + f" | {', '.join(up) or 'none'} / {', '.join(down) or 'none'} |")
        rows.append(f"\nVerdict on the targets: **{'held' if v['held'] else 'not held'}**.")
        parts.append("\n".join(rows))
        sources.append(f"`{path.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))})")
    return "\n\n".join(parts) + f"\n\nFrom {'; '.join(sources)}.\n"


ZOOM_PROBE_KEYS = ("data.synthetic.seed=", "data.zoom_width=")
"""What a run of the zoom probe may name beside ``experiment=beyond_zoom`` to be a row of its table."""


def zoom_probe_table(log_dir: Path) -> str | None:
    """The zoom probe (``python -m vase.eval.zoom_probe experiment=beyond_zoom``, with another draw or crop width):
    per draw and width, the newest ``zoom_probe.json``'s held-out accuracy of the majority scene and of a linear probe
    on the view's and on the crop's vision features."""
    found, read = [], {}
    for path in sorted(log_dir.glob("beyond_zoom/runs/*/zoom_probe.json")):
        v = read[path] = read_json(path)
        given = v.get("overrides", [])
        if given[:1] == ["experiment=beyond_zoom"] and all(o.startswith(ZOOM_PROBE_KEYS) for o in given[1:]):
            found.append(((int(v["data_seed"]), float(v["width"])), path))
    newest = _newest_each(found)
    if not newest:
        return None
    rows = md.table(["draw, crop", "figural vases: training / held out", "majority", "view", "crop",
                     "crop - view, points"], align="lrrrrr")
    machines = []
    for (draw, width), path in sorted(newest.items()):
        v = read[path]  # read once above
        crop = "side A's scene" if width < 1 else "the whole frieze"
        cells = [f"{100 * v[k]['accuracy']:.1f} % [{100 * v[k]['ci'][0]:.1f}, {100 * v[k]['ci'][1]:.1f}]"
                 for k in ("majority", "view", "crop")]
        rows.append(f"| draw {draw}, {crop} (`data.zoom_width={width:g}`) | {v['train']} / {v['heldout']} | "
                    + " | ".join(cells) + f" | {100 * (v['crop']['accuracy'] - v['view']['accuracy']):+.1f} |")
        machines.append(f"`{path.parent.relative_to(log_dir.parent)}` ({_machine(v.get('machine'))})")
    return "\n".join(rows) + f"\n\nFrom {'; '.join(machines)}.\n"


TABLES = {"results": results_table, "demo": demo_table, "sanity": sanity_table, "ablation": ablation_table,
          "quick": quick_table, "gdpo": gdpo_table,
          "claim": claim_table, "beyond": beyond_table, "search": search_table,
          "retrieval_format": partial(probes_table, name="retrieval"), "learned_alone": partial(probes_table, name="learned"),
          "zoom_probe": zoom_probe_table}


def _rows_of(body: str) -> set[str]:
    """The labelled kinds of a table's rows (a negative control's name in backticks, ``seed 1, `flip_advantages```)."""
    return set(re.findall(r"^\| [^|]*?`(\w+)` \|", body, re.M))


def rewrite(text: str, log_dir: Path) -> tuple[str, dict[str, str]]:
    """The README text with every table block rebuilt; and, per block, what happened to it."""
    report: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in TABLES:
            report[name] = f"unknown table (known: {sorted(TABLES)})"
            return m.group(0)
        body = TABLES[name](log_dir)
        if body is None:
            report[name] = "no results found: left as it is"
            return m.group(0)
        lost = _rows_of(m.group(3)) - _rows_of(body)
        if lost:  # a negative control run on another machine: its rows stay until its results are here too
            report[name] = f"no results here for the rows {sorted(lost)}: left as it is"
            return m.group(0)
        report[name] = "unchanged" if body == m.group(3) else "rewritten"
        return m.group(1) + body + m.group(4)

    return _BLOCK.sub(sub, text), report


def pages() -> list[Path]:
    """The README and every page of the documentation site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", action="append", help="a page to rewrite (repeatable; default: README.md and docs/)")
    ap.add_argument("--logs", default=str(log_root(ROOT)),
                    help="where make grpo-sanity / ablation-demo wrote (default: $VASE_LOG_DIR, else logs)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table is out of date")
    a = ap.parse_args(argv)
    files = [Path(p) for p in a.readme] if a.readme else pages()
    stale, blocks = False, 0
    for page in files:
        text = page.read_text()
        new, report = rewrite(text, Path(a.logs).resolve())
        blocks += len(report)
        for name, what in report.items():
            print(f"{page.name if page.parent != ROOT / 'docs' else page.relative_to(ROOT)}: {name}: {what}")
        stale |= new != text
        if new != text and not a.check:
            atomic_write_text(page, new)  # the project's own page, written whole or not at all
    if not blocks:
        print(f"{', '.join(map(str, files))}: no <!-- vase:table NAME --> blocks", file=sys.stderr)
        return 2
    if not a.readme:  # the plots beside the docs' tables
        for dest, src in figures(Path(a.logs).resolve()).items():
            same = dest.is_file() and dest.read_bytes() == src.read_bytes()
            print(f"{dest.relative_to(ROOT)}: {'unchanged' if same else 'rewritten'} (from {src})")
            stale |= not same
            if not same and not a.check:
                dest.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(dest, src.read_bytes())
    return int(stale) if a.check else 0


if __name__ == "__main__":
    sys.exit(main())
