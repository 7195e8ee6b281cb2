"""tests/forkrun.py runs each job as ``python <argv>`` would: its argv, its output, its exit status, its own process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_each_forked_job_gets_its_argv_output_and_exit_status_as_python_would_give(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text("import os, sys\nprint('argv', sys.argv[1:], sys.path[0] == os.path.dirname(__file__))\n"
                      "globals().setdefault('seen', 0)\nimport json; json.seen = getattr(json, 'seen', 0) + 1\n"
                      "print('seen', json.seen)\n"
                      "if sys.argv[1] == 'boom': raise ValueError('boom')\n"
                      "if sys.argv[1] == 'sleep': import time; time.sleep(60)\n"
                      "sys.exit(int(sys.argv[1]) if sys.argv[1].isdigit() else None)\n")
    jobs = [{"argv": [str(script), a], "out": str(tmp_path / f"{i}.log"), "timeout": 3 if a == "sleep" else 60}
            for i, a in enumerate(["3", "done", "boom", "sleep"])]
    jobs.append({"argv": ["-m", "json.tool", "--no-such-flag"], "out": str(tmp_path / "m.log")})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([sys.executable, "-m", "tests.forkrun", str(tmp_path / "jobs.json"), str(tmp_path / "codes.json"),
                    "--preload", "json"], cwd=ROOT, check=True, timeout=120)
    done = json.loads((tmp_path / "codes.json").read_text())
    assert [d["code"] for d in done] == [3, 0, 1, -9, 2] and 3 <= done[3]["seconds"] < 30
    out = [Path(j["out"]).read_text() for j in jobs]
    assert "argv ['3'] True" in out[0] and "seen 1" in out[0] and "seen 1" in out[1]  # nothing one job set is seen
    assert "ValueError: boom" in out[2] and "Traceback" in out[2]
    assert "usage:" in out[4] and "json.tool" in out[4]  # python -m's argv[0]: the module's file
