"""What a process does with the memory its tensors free (``cpu_allocator``).

A CPU tensor's storage comes from the C library's ``malloc``. With glibc's defaults, a block above its mmap threshold
(128 KiB, growing with what is freed) is a mapping of its own, given back when freed, and freed memory at the top of
the heap goes back to the system once more than twice that threshold is free. A training step takes and frees the
same buffers every step (activations, logits, gradients), so each step can fault the same pages in again: the quick
sweep's GRPO job (``experiment=ablation_quick``, 61 steps, 2026-12-06) took 2.0 million page faults, against 0.45
million with ``keep``.

``keep`` (the default) tells glibc, through ``mallopt``, to keep them: blocks up to 32 MiB (glibc's largest mmap
threshold) come from the heap, 4 GiB of free memory stay mapped before any goes back, and the heap grows 256 MiB at
a time. Measured on that job (benchmarks/RESULTS.md, "Time to a verdict"): alone, a step's time within this machine's
noise; two jobs side by side, as ``hydra/launcher=parallel`` runs them, 0.87x in one run and 0.98x in
another (benchmarks/overhead.py): a few percent, within this machine's drift. Nothing computed changes: the same
kernels run on the same numbers, only where their buffers live (tests/test_allocator.py compares a GRPO run's history
both ways). The cost: a process's resident memory stays near its peak instead of shrinking after it. ``system``
leaves glibc's defaults; where the C library is not glibc (macOS, musl) ``keep`` does nothing, and a run record's
machine says ``system`` (`cpu_allocator_held`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform

from vase.choices import CPU_ALLOCATORS
from vase.errors import ConfigError

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
"""glibc's ``mallopt`` parameters (its malloc.h)."""
MIB = 1 << 20
KEEP = ((M_MMAP_THRESHOLD, 32 * MIB), (M_TRIM_THRESHOLD, 4096 * MIB), (M_TOP_PAD, 256 * MIB))
"""``keep``'s settings: blocks up to 32 MiB (glibc's largest mmap threshold on 64-bit) from the heap, 4 GiB free before
any goes back, the heap grown 256 MiB at a time."""


@functools.lru_cache(maxsize=1)
def _mallopt() -> object | None:
    """glibc's ``mallopt``, or None where the C library is another."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_int]
    return fn


_applied: str | None = None


def set_cpu_allocator(mode: str) -> str:
    """Apply ``cpu_allocator`` to this process (``keep``: freed memory stays mapped for the next step; ``system``: the
    C library's defaults). Returns what holds now: ``keep``, ``system``, or ``system (the C library is not glibc)``.
    Once ``keep`` is set, ``system`` in the same process (a later job of an in-process sweep) cannot undo it: the
    thresholds glibc chose itself are gone, and the run record's machine says ``keep`` (`cpu_allocator_held`).

    >>> set_cpu_allocator("nothing")
    Traceback (most recent call last):
    ...
    vase.errors.ConfigError: cpu_allocator='nothing' must be one of ['keep', 'system']
    """
    global _applied
    if mode not in CPU_ALLOCATORS:
        raise ConfigError(f"cpu_allocator={mode!r} must be one of {list(CPU_ALLOCATORS)}")
    if mode == "system":
        return "system" if _applied != "keep" else "keep (set by an earlier job of this process: it stays)"
    mallopt = _mallopt()
    if mallopt is None:
        return "system (the C library is not glibc)"
    for param, value in KEEP:
        if not mallopt(param, value):
            return "system (glibc refused mallopt)"
    _applied = "keep"
    return "keep"


def cpu_allocator_held() -> str:
    """``keep`` once `set_cpu_allocator` set it in this process, else ``system``: what a run record's machine says."""
    return _applied or "system"
