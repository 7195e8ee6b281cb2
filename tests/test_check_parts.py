"""The parts of the checks that run other tools (vase.checks.parts): lanes side by side, a broken part a FAIL
with its reason, what ran beside a part, a part in one lane waiting for another's result."""

from __future__ import annotations

import time

from vase.checks.parts import Parts


def test_lanes_run_side_by_side_and_a_part_that_breaks_is_a_fail_with_its_reason(capsys) -> None:
    parts = Parts(["slow", "waits", "broken", "after"])

    def slow() -> dict:
        time.sleep(0.6)
        return {"passed": True}

    def broken() -> dict:
        raise RuntimeError("the tool is missing")

    def waits() -> dict:
        time.sleep(0.6)
        other = parts.result_of("slow")  # in the other lane: waits until it ended
        return {"passed": other is not None and other["passed"]}

    t0 = time.time()
    parts.lanes([lambda: parts.run("slow", slow, say_beside=True)],
                [lambda: parts.run("waits", waits), lambda: parts.run("broken", broken),
                 lambda: parts.run("after", lambda: {"passed": True})])
    took = time.time() - t0
    assert took < 1.1, took  # the lanes overlapped (one after another, the two 0.6 s parts take 1.2 s)
    res = parts.ordered()
    assert list(res) == ["slow", "waits", "broken", "after"]
    assert res["waits"]["passed"] and res["after"]["passed"]  # a broken part does not stop its lane
    assert res["broken"] == {"passed": False, "error": "RuntimeError: the tool is missing",
                             "seconds": res["broken"]["seconds"]}
    assert "waits" in res["slow"]["beside"]
    out = capsys.readouterr().out
    assert "FAIL  broken  (" in out and '"error": "RuntimeError: the tool is missing"' in out
    assert any(line.startswith("PASS  slow  (") and "beside waits" in line for line in out.splitlines())
    assert parts.result_of("never-named") is None  # not a part of this check: no wait
