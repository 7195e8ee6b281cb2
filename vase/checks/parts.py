"""The parts of a check that runs other tools (``make cluster-check``, ``make stack-check``): each part timed, a part
that breaks is a FAIL with its reason while the others still run, one line per part as it ends, and lanes of parts
that run side by side (their tools are separate processes: what one lane waits on, the other uses)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

Part = Callable[[], dict[str, Any]]


class Parts:
    """Runs a check's parts and keeps their results (``results``, in the order the parts were named)."""

    def __init__(self, order: Sequence[str] = ()) -> None:
        self.order = list(order)
        self.results: dict[str, dict[str, Any]] = {}
        self.starts: dict[str, float] = {}
        self.ends: dict[str, float] = {}
        self._lock = threading.Lock()
        self._ended: dict[str, threading.Event] = {}

    def _event(self, name: str) -> threading.Event:
        with self._lock:
            return self._ended.setdefault(name, threading.Event())

    def result_of(self, name: str, timeout: float = 3600) -> dict[str, Any] | None:
        """Another part's result, once it has ended (a part in another lane that compares with it waits); None when
        it has not ended within ``timeout`` or was never run."""
        if name not in self.order and name not in self.starts:
            return None
        self._event(name).wait(timeout)
        return self.results.get(name)

    def run(self, name: str, part: Part, note: str = "", say_beside: bool = False) -> dict[str, Any]:
        """Run one part; prints ``PASS  name  (seconds s[, note][, beside a, b])`` (and a FAIL's details) when it
        ends; with ``say_beside`` the parts that ran while it did are named (and kept in its result)."""
        t0 = self.starts[name] = time.time()
        try:
            result = part()
        except Exception as e:  # noqa: BLE001 - a part that breaks is a FAIL with its reason; the others still run
            result = {"passed": False, "error": f"{type(e).__name__}: {e}"}
        self.ends[name] = time.time()
        result["seconds"] = round(self.ends[name] - t0, 1)
        extra = [note] if note else []
        with self._lock:
            if say_beside:
                result["beside"] = self.overlapping(name)
                extra += [f"beside {', '.join(result['beside'])}"] if result["beside"] else []
            self.results[name] = result
            said = ", ".join([f"{result['seconds']} s", *extra])
            print(f"{'PASS' if result['passed'] else 'FAIL'}  {name}  ({said})", flush=True)
            if not result["passed"]:
                print(json.dumps(result, indent=1, default=str), flush=True)
        self._event(name).set()
        return result

    def overlapping(self, name: str) -> list[str]:
        """The parts that ran at some moment while ``name`` did (``name`` ended)."""
        t0, t1 = self.starts[name], self.ends[name]
        return [n for n, s in self.starts.items() if n != name and s < t1 and self.ends.get(n, t1) > t0]

    @staticmethod
    def lanes(*lanes: Sequence[Callable[[], Any]]) -> None:
        """Each lane's steps (e.g. ``lambda: parts.run(...)``) one after another, the lanes side by side; returns when
        every lane has ended."""
        # daemon threads: a kill of the check unwinds in the main thread (its clusters and servers stopped there)
        # without waiting for a lane's part to end
        threads = [threading.Thread(target=lambda lane=lane: [step() for step in lane], name=f"lane-{i}", daemon=True)
                   for i, lane in enumerate(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def ordered(self) -> dict[str, dict[str, Any]]:
        """The results in the parts' order (lanes end in any order), then any part not named in it."""
        return {**{n: self.results[n] for n in self.order if n in self.results}, **self.results}
