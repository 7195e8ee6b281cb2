"""Where two kernel settings (or two machines) part: every op of a training step hashed, the first that differs named.

``python -m vase.checks.kernel_probe`` runs the demo's first SFT step and first GRPO step (``train.py
experiment=demo trainer.max_steps=1``, no evaluation) once per kernel setting, one after another, with `OpTrace`
recording each torch op's output as a hash, in order, with the module it ran in. Two traces are then walked side by
side: the first op whose output differs while everything before it was equal is where the settings part (its inputs
were the same, so its kernel computed other bits). Settings by default:

- ``portable``: the demo as it ships (``cpu_kernels: portable``);
- ``portable, widest asked``: the same, with the environment asking for the widest kernels this machine has
  (``ATEN_CPU_CAPABILITY=avx512``, ``ONEDNN_MAX_CPU_ISA=ALL``, ``MKL_ENABLE_INSTRUCTIONS=AVX512``, ``MKL_CBWR=AUTO``)
  the pins must win, so this trace must equal the first;
- ``portable, 16 threads forced``: the pins, then 16 torch threads forced over their 2 (a large server's default
  were the threads not pinned): parts from the first at a matrix product whose sum MKL splits by thread;
- ``native``: no pins: on a CPU with AVX-512 its trace parts from the first at an op the pins hold;
- ``the pins before 2026-12-01``: ``MKL_CBWR=AVX2``, which MKL honours on Intel CPUs only (on others it runs its
  ``AUTO`` branch): parts from the first at the first matrix product.

Traces travel: ``--compare A B`` walks two setting folders of probes made on two machines (each setting's folder
under the output folder holds its traces), which is how a difference between two CPUs is found. The probe writes ``kernel_probe.json`` (the
settings, each trace's machine: `vase.kernels.cpu_record`, and each comparison) and prints one line per comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from vase.io import atomic_write_json, atomic_write_text
from vase.kernels import KERNEL_ENV, cpu_record
from vase.provenance import machine_stamp
from vase.runs import log_root, run_dir

ROOT = Path(__file__).resolve().parents[2]
TRACE_SUFFIX = ".trace.jsonl"
WIDEST = {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "ALL", "MKL_ENABLE_INSTRUCTIONS": "AVX512",
          "MKL_CBWR": "AUTO", "OMP_WAIT_POLICY": "PASSIVE"}
"""The environment of a machine whose libraries take their widest kernels, asked for on this one."""
SERVER_THREADS = 16
"""The threads of a large server's torch, forced over the pin by "portable, 16 threads forced" (``OMP_NUM_THREADS``
cannot ask for them: torch caps it at the cores it sees)."""
SETTINGS: dict[str, tuple[list[str], dict[str, str]]] = {
    "portable": ([], {}),
    "portable, widest asked": ([], WIDEST),
    "portable, 16 threads forced": ([f"+callbacks.op_trace.threads={SERVER_THREADS}"], {}),
    "native": (["cpu_kernels=native"], {}),
    "the pins before 2026-12-01": (["cpu_kernels=native"], {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                                                            "MKL_CBWR": "AVX2"}),
}
"""Each default setting: overrides added to the probe's command, environment added to a clean one."""
PROBE_OVERRIDES = ["experiment=demo", "trainer.max_steps=1", "val.before=false", "val.after=false",
                   "logger=none", "callbacks.checkpoint.every_n_train_steps=0", "resume=never"]


def _digest(t: torch.Tensor) -> str:
    t = t.detach()
    if t.layout != torch.strided or t.device.type == "meta":  # a model being built lazily (the reward's encoder)
        return t.device.type if t.device.type == "meta" else "non-strided"
    return hashlib.blake2b(t.contiguous().cpu().view(-1).view(torch.uint8).numpy().tobytes(),
                           digest_size=8).hexdigest()


_UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "set_", "resize_",
                   "resize_as_", "_local_scalar_dense"}
"""Ops whose output is memory handed out, not computed (or a Python number): not hashed."""


class _Hashing(TorchDispatchMode):
    def __init__(self, rows: list[dict[str, Any]], where: list[str], phase: str) -> None:
        super().__init__()
        self.rows, self.where, self.phase = rows, where, phase

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.__name__.split(".")[0] in _UNINITIALISED:  # memory handed out, not computed: its bytes are noise
            return out
        tensors = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if tensors:
            self.rows.append({"phase": self.phase, "op": str(func), "module": self.where[-1] if self.where else "",
                              "shape": [list(t.shape) for t in tensors], "dtype": str(tensors[0].dtype),
                              "hash": "/".join(_digest(t) for t in tensors)})
        return out


class OpTrace(pl.Callback):
    """Hash every torch op's output during the first ``batches`` training steps of a stage (forward, backward, the
    GRPO rollout and the optimizer step alike) into ``<dirpath>/<stage>.trace.jsonl``, with the module each op ran in
    and the machine's `cpu_record` on the first line; ``threads``: run the stage with that many torch threads (a larger
    machine's partitioning of the same work). Slow (a hash per op): for `main`'s probe, not for training."""

    def __init__(self, dirpath: str, batches: int = 1, threads: int | None = None) -> None:
        self.dirpath, self.batches, self.threads = Path(dirpath), int(batches), threads
        self.rows: list[dict[str, Any]] = []
        self.where: list[str] = []
        self._mode: _Hashing | None = None
        self._hooks: list[Any] = []

    def _enter(self, pl_module: pl.LightningModule, phase: str) -> None:
        names = {id(m): n for n, m in pl_module.named_modules()}

        def push(module: Any, args: Any) -> None:
            self.where.append(names.get(id(module), type(module).__name__))

        def pop(module: Any, args: Any, out: Any) -> None:
            if self.where:
                self.where.pop()

        self._hooks = [torch.nn.modules.module.register_module_forward_pre_hook(push),
                       torch.nn.modules.module.register_module_forward_hook(pop)]
        self._mode = _Hashing(self.rows, self.where, phase)
        self._mode.__enter__()

    def _exit(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for h in self._hooks:
            h.remove()
        self._hooks, self.where[:] = [], []

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.threads:
            torch.set_num_threads(int(self.threads))

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if batch_idx < self.batches:
            self._enter(pl_module, f"{_stage(pl_module)} step {batch_idx + 1}")

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._exit()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._exit()
        lines = [json.dumps({"machine": cpu_record()}), *(json.dumps(r) for r in self.rows)]
        atomic_write_text(self.dirpath / f"{_stage(pl_module)}{TRACE_SUFFIX}", "\n".join(lines) + "\n")


def _stage(pl_module: pl.LightningModule) -> str:
    return type(pl_module).__name__.removesuffix("Module").lower()


def read_trace(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A probe's traces in a folder: (the machine of its first trace, every op of every stage in the order they ran:
    SFT's, then GRPO's)."""
    machine: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    files = sorted(Path(folder).rglob(f"*{TRACE_SUFFIX}"), key=lambda p: (p.name != f"sft{TRACE_SUFFIX}", p.name))
    if not files:
        raise FileNotFoundError(f"{folder}: no *{TRACE_SUFFIX} (a probe's trace folder holds one per stage)")
    for f in files:
        lines = f.read_text().splitlines()
        machine = machine or json.loads(lines[0])["machine"]
        rows += [json.loads(x) for x in lines[1:] if x.strip()]
    return machine, rows


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Walk two traces op by op: ``{"same": True, "ops": n}`` when every op ran and gave the same bits; else where
    they part: ``"output"`` (the same op on the same inputs computed other bits: its kernel differs) or ``"path"``
    (another op ran: the code took another branch), with the op, its module and phase on both sides.

    >>> r = {"phase": "sft step 1", "op": "aten.mm.default", "module": "m", "shape": [[2, 2]], "hash": "a"}
    >>> first_difference([r, r], [r, r])
    {'same': True, 'ops': 2}
    >>> first_difference([r, r], [r, {**r, "hash": "b"}])["kind"]
    'output'
    """
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if (x["op"], x["shape"]) != (y["op"], y["shape"]):
            return {"same": False, "kind": "path", "index": i, "a": x, "b": y}
        if x["hash"] != y["hash"]:
            return {"same": False, "kind": "output", "index": i, "a": x, "b": y}
    if len(a) != len(b):
        return {"same": False, "kind": "path", "index": min(len(a), len(b)), "a": None, "b": None}
    return {"same": True, "ops": len(a)}


def describe(name_a: str, name_b: str, diff: dict[str, Any]) -> str:
    """One line for a comparison (`first_difference`)."""
    if diff["same"]:
        return f"{name_a} = {name_b}: all {diff['ops']:,} ops gave the same bits"
    x = diff["a"] or {}
    where = f"op {diff['index']:,} ({x.get('phase', 'the end of one trace')})"
    if diff["kind"] == "output":
        return (f"{name_a} vs {name_b}: first difference at {where}: {x['op']} in {x['module'] or '(no module)'}, "
                f"output {x['shape']}: same inputs, other bits")
    y = diff["b"] or {}
    return (f"{name_a} vs {name_b}: paths part at {where}: {x.get('op', '(ended)')} in {x.get('module', '')} against "
            f"{y.get('op', '(ended)')} in {y.get('module', '')}")


def run_setting(name: str, overrides: list[str], env: dict[str, str], out: Path, timeout: float = 1800) -> Path:
    """Run the probe's step under one setting (a clean kernel environment plus ``env``); its traces go to a folder
    of ``out`` named after the setting."""
    folder = out / name.replace(",", "").replace(" ", "_")
    clean = {k: v for k, v in os.environ.items() if k not in (*KERNEL_ENV, "OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    cmd = [sys.executable, str(ROOT / "train.py"), *PROBE_OVERRIDES, f"hydra.run.dir={folder / 'run'}",
           "+callbacks.op_trace._target_=vase.checks.kernel_probe.OpTrace",
           f"+callbacks.op_trace.dirpath={folder / 'run' / 'traces'}", *overrides]
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"setting {name!r} failed (rc {p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    print(f"  {name}: {time.time() - t0:.0f} s", flush=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    """``python -m vase.checks.kernel_probe``: the demo's first SFT and GRPO steps under each kernel setting, every
    op hashed, and where each setting parts from the first (``--compare A B``: two trace folders, e.g. from two
    machines)."""
    ap = argparse.ArgumentParser(prog="python -m vase.checks.kernel_probe", description=main.__doc__.splitlines()[0])
    ap.add_argument("--compare", nargs=2, metavar="TRACES", help="compare two trace folders and stop")
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS),
                    help="which settings to run (the first is the one the others are compared with)")
    ap.add_argument("--out", default=None, help="output folder (default: a new one under <log dir>/kernel_probe)")
    a = ap.parse_args(argv)
    if a.compare:
        (ma, ra), (mb, rb) = read_trace(Path(a.compare[0])), read_trace(Path(a.compare[1]))
        print(f"A: {a.compare[0]} ({ma.get('cpu')})\nB: {a.compare[1]} ({mb.get('cpu')})")
        print(describe("A", "B", first_difference(ra, rb)))
        return 0
    out = Path(a.out) if a.out else Path(run_dir(str(log_root() / "kernel_probe")))
    if a.out and out.exists() and any(out.iterdir()):
        print(f"error: --out {out} is not empty: give a new folder (a probe never writes over another)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    print(f"kernel probe: the demo's first SFT and GRPO steps under {len(a.settings)} settings -> {out}", flush=True)
    traces = {name: read_trace(run_setting(name, *SETTINGS[name], out)) for name in a.settings}
    first = a.settings[0]
    comparisons = []
    for name in a.settings[1:]:
        diff = first_difference(traces[first][1], traces[name][1])
        comparisons.append({"a": first, "b": name, **diff})
        print(describe(first, name, diff))
    atomic_write_json(out / "kernel_probe.json", {
        "machine": machine_stamp(), "settings": {n: {"overrides": SETTINGS[n][0], "env": SETTINGS[n][1],
                                                     "machine": traces[n][0], "ops": len(traces[n][1])}
                                                 for n in a.settings},
        "comparisons": comparisons})
    print(f"written: {out / 'kernel_probe.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
