"""Which CPU kernels compute a run's numbers, pinned where a table must travel, and recorded with every result.

``cpu_kernels: portable`` sets `PORTABLE_KERNELS` before torch loads, so that the fp32 operations a tiny run takes
go through code paths chosen by the pins, not by the CPU. Each pin answers one way the same command printed another
table elsewhere:

- ``ATEN_CPU_CAPABILITY=avx2``: torch's own vectorised kernels (softmax, GELU, reductions) take their AVX2 path, not
  AVX-512's, whose other lane widths round sums differently.
- ``MKL_CBWR=COMPATIBLE,STRICT``: MKL's matrix products take its one code branch that Intel documents as giving the
  same results on Intel and non-Intel processors, and ``STRICT`` makes them independent of how a buffer is aligned.
  ``MKL_CBWR=AVX2`` (vase's pin until 2026-12-01) is honoured on Intel CPUs only: on an AMD CPU MKL ignores it and
  runs its ``AUTO`` branch without a word (`mkl_branch` reads which one ran), so a table made on an AMD machine and
  one made on an Intel machine with AMX differed in their GRPO row.
- `PORTABLE_THREADS` torch threads (`apply_portable_threads`, once torch has loaded): MKL's products under that
  branch split their sums by thread, so the same product on 2 threads and on 16 gives other bits (measured on
  2026-12-01); torch's default is one thread per core, which differs from machine to machine.
- ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN, which runs the vision tower's patch convolution, takes its AVX2 kernels. In
  the demo only that convolution's forward runs (``python -m vase.checks.kernel_probe`` lists no
  ``convolution_backward``: the patch embedding is not trained), a direct convolution whose every output is one
  fixed sum. oneDNN's backward kernels (``brgconv``) size their blocks from the CPU's caches, which nothing pins: a
  run that trains the patch embedding is not covered.

`cpu_record` says which CPU ran and which kernels it took (the CPU model, the flags that change numbers, torch's
capability, MKL's branch as MKL reports it, oneDNN's instruction cap, threads); `kernels_label` names that in one line, so
a report whose jobs ran on different CPUs or kernels can say so (`vase.reports.jobs`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
from pathlib import Path
from typing import Any

from vase.allocator import cpu_allocator_held
from vase.choices import CPU_KERNELS
from vase.errors import ConfigError

PORTABLE_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE,STRICT"}
"""The environment ``cpu_kernels: portable`` sets before torch loads (the module's docstring says why each)."""
PORTABLE_THREADS = 2
"""The torch (and MKL) threads ``cpu_kernels: portable`` runs with, whatever the cores: MKL's products split their sums
by thread, so 2 threads and 16 give other bits (`apply_portable_threads`)."""
KERNEL_ENV = (*PORTABLE_KERNELS, "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_MAX_CPU_ISA")
"""Every environment variable that moves a CPU kernel choice: what a test clears to start from a clean machine."""
NUMBER_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
                "amx_bf16", "amx_int8")
"""The CPU flags that can change what the kernels compute (wider lanes, other instructions), as /proc/cpuinfo names
them; a results file records which of them the CPU had."""
_MKL_BRANCHES = {0: "OFF", 1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2",
                 9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}
"""MKL's ``MKL_CBWR_*`` branch constants (its mkl_cbwr.h), as `mkl_branch` reads them back."""
_MKL_STRICT = 0x10000


def portable_pinned() -> bool:
    """Whether this process's environment pins `PORTABLE_KERNELS` (``cpu_kernels: portable``)."""
    return all(os.environ.get(k) == v for k, v in PORTABLE_KERNELS.items())


def pin_cpu_kernels(mode: str) -> str | None:
    """Apply ``cpu_kernels`` (``native``: the CPU's widest kernels, the fastest; ``portable``: `PORTABLE_KERNELS`,
    numbers that travel between x86 CPUs with AVX2). Pins take effect only before torch loads: returns a one-line
    warning when torch was loaded before with other kernels (a multirun's later jobs keep the first job's), else None.
    `apply_portable_threads` does the part that needs torch loaded.

    >>> pin_cpu_kernels("native") is None
    True
    """
    if mode not in CPU_KERNELS:
        raise ConfigError(f"cpu_kernels={mode!r} must be one of {list(CPU_KERNELS)}")
    if mode == "native":
        return None
    loaded = "torch" in sys.modules
    if loaded and portable_pinned():
        return None  # pinned when torch loaded (an earlier job of this process)
    os.environ.update(PORTABLE_KERNELS)
    if not loaded and _fewer_threads_asked() and "OMP_WAIT_POLICY" not in os.environ:
        # the user asked for fewer threads than portable takes (OMP_NUM_THREADS=1: jobs side by side on few cores);
        # OpenMP's threads then sleep at a barrier instead of spinning, so two such jobs share 2 cores rather than
        # each spinning on the other's time (measured: tests/test_cpu_kernels.py's two demos side by side). The
        # numbers are the same: the wait policy changes no arithmetic
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    if loaded:
        return ("cpu_kernels=portable: torch was loaded before vase could pin its CPU kernels, so this process keeps "
                "the machine's own (its numbers may differ in the last bits on another CPU)")
    return None


def _fewer_threads_asked() -> bool:
    """Whether the environment asks for fewer OpenMP or MKL threads than `PORTABLE_THREADS`."""
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        try:
            if int(os.environ.get(key, "0")) in range(1, PORTABLE_THREADS):
                return True
        except ValueError:
            continue
    return False


def apply_portable_threads() -> None:
    """What ``cpu_kernels: portable`` sets once torch has loaded: `PORTABLE_THREADS` intra-op threads, however many
    cores the machine has (torch's default is one per core). Does nothing unless `PORTABLE_KERNELS` are pinned."""
    if not portable_pinned():
        return
    # lazy: torch (the pins above must be set before it loads)
    import torch

    torch.set_num_threads(PORTABLE_THREADS)


def _torch_lib() -> Path | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    return lib if lib.is_file() else None


def mkl_branch() -> str | None:
    """The code branch MKL runs its products on in this process, as MKL itself reports it (``AUTO`` where it ignored
    ``MKL_CBWR``: any branch but ``AUTO`` and ``COMPATIBLE`` on a non-Intel CPU), with ``,STRICT`` when strict; None
    where torch is not loaded or carries no MKL."""
    lib = _torch_lib()
    if lib is None:
        return None
    try:
        mkl = ctypes.CDLL(str(lib))
        get = mkl.mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    whole = int(get(-1))  # MKL_CBWR_ALL: branch and mode
    name = _MKL_BRANCHES.get(whole & 0xFFFF, str(whole & 0xFFFF))
    return name + (",STRICT" if whole & _MKL_STRICT else "")


@functools.lru_cache(maxsize=1)
def cpu_identity() -> dict[str, Any]:
    """The CPU: its model and vendor, and which of `NUMBER_FLAGS` it has (Linux's /proc/cpuinfo; elsewhere the
    platform's name alone)."""
    model, vendor, flags = platform.processor() or platform.machine(), "", set()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and value.strip():
            model = value.strip()
        elif key == "vendor_id":
            vendor = value.strip()
        elif key == "flags":
            flags = set(value.split())
        if model and vendor and flags:
            break
    return {"cpu": model, "vendor": vendor, "flags": [f for f in NUMBER_FLAGS if f in flags]}


def cpu_record() -> dict[str, Any]:
    """Which CPU ran and which kernels it took, for a results file's machine: `cpu_identity`, ``cpu_kernels``,
    ``cpu_allocator`` (what it changes is time, not numbers), torch's capability, MKL's branch (`mkl_branch`),
    oneDNN's instruction cap, and torch's thread count."""
    out: dict[str, Any] = {**cpu_identity(), "cpu_kernels": "portable" if portable_pinned() else "native",
                           "cpu_allocator": cpu_allocator_held()}
    torch = sys.modules.get("torch")
    if torch is not None:
        out.update(cpu_capability=str(torch.backends.cpu.get_cpu_capability()),
                   mkl_branch=mkl_branch(),
                   onednn_isa=os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "widest",
                   threads=int(torch.get_num_threads()))
    return out


def kernels_label(record: dict[str, Any] | None) -> str:
    """One line naming a `cpu_record`: the CPU, its number-changing flags and the kernels that ran.

    >>> kernels_label({"cpu": "AMD EPYC", "flags": ["avx2", "avx512f"], "cpu_kernels": "portable",
    ...                "cpu_capability": "AVX2", "mkl_branch": "COMPATIBLE,STRICT", "onednn_isa": "AVX2", "threads": 2})
    'AMD EPYC (avx2 avx512f), portable kernels: torch AVX2, MKL COMPATIBLE,STRICT, oneDNN AVX2; 2 torch threads'
    >>> kernels_label(None)
    'unrecorded'
    """
    if not record:
        return "unrecorded"
    flags = f" ({' '.join(record['flags'])})" if record.get("flags") else ""
    parts = [f"torch {record['cpu_capability']}" if record.get("cpu_capability") else "",
             f"MKL {record['mkl_branch']}" if record.get("mkl_branch") else "",
             f"oneDNN {record['onednn_isa']}" if record.get("onednn_isa") else ""]
    kernels = ", ".join(p for p in parts if p)
    return (f"{record.get('cpu', '?')}{flags}, {record.get('cpu_kernels', '?')} kernels" + (f": {kernels}" if kernels
                                                                                           else "")
            + f"; {threads_label(record)}")


def threads_label(record: dict[str, Any]) -> str:
    """How many threads split a result's products (a product's sums split by thread: another count, other bits).

    >>> threads_label({"threads": 1}), threads_label({})
    ('1 torch thread', 'torch threads not recorded')
    """
    n = record.get("threads")
    return f"{n} torch thread{'s' * (n != 1)}" if isinstance(n, int) else "torch threads not recorded"
