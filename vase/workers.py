"""Work spread over this machine's cores, in order: what the synthetic set's meshes and the renderer's views use.

``ordered_map(fn, items, workers)`` is ``map(fn, items)`` with ``workers`` processes doing the calls: results come
back in the items' order, one by one, so a caller that writes each result as it comes (and records it, for a resume)
keeps doing so. The processes are spawned (never forked: the caller may hold torch's thread pools or an EGL context),
so ``fn`` and ``initializer`` are module-level functions and the items and results pickle. ``workers_for`` turns the
setting (``auto`` or a count) into a count: one process per core the process may run on, but only for enough items
to repay the processes' start (each imports its module: about a second).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_ITEMS_PER_WORKER = 32
"""``auto`` gives each process at least this many items (32 vases: about 1-3 s of work against a second's start)."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; a container's or a SLURM job's share)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS has no affinity call
        return max(1, os.cpu_count() or 1)


def workers_for(setting: Any, n_items: int, key: str = "render.workers") -> int:
    """The processes for ``n_items`` at ``setting``: ``auto`` (or None) gives one per usable core, at most one per
    `MIN_ITEMS_PER_WORKER` items (so fewer than twice that run in this process); a positive integer is taken as is
    (never more than the items). Anything else raises, naming ``key``."""
    if is_auto(setting):
        return max(1, min(usable_cores(), n_items // MIN_ITEMS_PER_WORKER))
    return max(1, min(positive_count(setting, key, "processes"), n_items))


def is_auto(setting: Any) -> bool:
    """Whether a count setting is ``auto`` (or unset)."""
    return setting is None or str(setting).strip().lower() == "auto"


def positive_count(setting: Any, key: str, what: str) -> int:
    """A count setting that is not ``auto``, as a positive integer (``3`` or ``3.0``); anything else raises,
    naming ``key``: ``<key>=<value> must be 'auto' or a positive number of <what>``."""
    try:
        count = int(setting)
    except (TypeError, ValueError):
        count = 0
    if count < 1 or str(setting).strip() not in (str(count), f"{count}.0"):
        raise ValueError(f"{key}={setting!r} must be 'auto' or a positive number of {what}")
    return count


@contextlib.contextmanager
def callers_script_hidden() -> Iterator[None]:
    """While the workers start, the caller's ``__main__`` names no file or module: a spawned process then does not
    run the caller's script again (which, without an ``if __name__ == "__main__":`` guard, would start the work once
    more in every worker and fail). The workers run only vase's own functions, so they never need it."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    try:
        main.__dict__.pop("__file__", None)
        if "__spec__" in main.__dict__:
            main.__spec__ = None
        yield
    finally:
        main.__dict__.update(saved)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int, *,
                initializer: Callable[..., None] | None = None, initargs: tuple = (),
                chunksize: int = 4) -> Iterator[R]:
    """``fn`` over ``items``, results in the items' order as each is ready. ``workers`` 1 calls ``fn`` here (after
    ``initializer``); more spawns that many processes, each running ``initializer(*initargs)`` once, and stops them
    when the iteration ends, fails or is abandoned (a Ctrl-C or SIGTERM leaves no process behind)."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        if initializer is not None:
            initializer(*initargs)
        for item in items:
            yield fn(item)
        return
    ctx = multiprocessing.get_context("spawn")
    with callers_script_hidden():
        pool = ctx.Pool(processes=workers, initializer=initializer, initargs=initargs)
    try:
        yield from pool.imap(fn, items, chunksize=max(1, chunksize))
        pool.close()
        pool.join()
    finally:
        pool.terminate()  # a no-op once joined; on an error or an abandoned iterator, stops the processes now
