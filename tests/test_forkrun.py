"""tests/forkrun.py and tests/forkserver.py run each job as ``python <argv>`` would: its argv, its output, its exit
status, its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_python


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


def test_a_forked_job_is_the_command_python_would_run_with_its_own_env_cwd_streams_and_threads(tmp_path: Path) -> None:
    """tests.forkserver (behind tests.conftest.run_python): each job gets its argv, its environment exactly, its
    folder, stdout and stderr apart, its exit status, its torch threads from OMP_NUM_THREADS, nothing an earlier job
    set; a job past its timeout is killed; one that needs what the libraries read as they load is not forked."""
    script = tmp_path / "job.py"
    script.write_text("import os, sys, torch, json\nprint('argv', sys.argv[1:], os.getcwd())\n"
                      "print('env', os.environ.get('MINE'), 'HOME' in os.environ, torch.get_num_threads())\n"
                      "json.seen = getattr(json, 'seen', 0) + 1; print('seen', json.seen)\n"
                      "print('to stderr', file=sys.stderr)\n"
                      "if sys.argv[1] == 'sleep': import time; time.sleep(60)\n"
                      "sys.exit(int(sys.argv[1]) if sys.argv[1].isdigit() else None)\n")
    env = {"MINE": "1", "OMP_NUM_THREADS": "1", "PATH": os.environ["PATH"]}
    for _ in range(2):
        p = run_python([str(script), "3"], cwd=tmp_path, env=env)
        assert p.returncode == 3 and p.stdout == f"argv ['3'] {tmp_path}\nenv 1 False 1\nseen 1\n", p
        assert p.stderr == "to stderr\n"
    p = run_python(["-m", "json.tool", "--no-such-flag"], cwd=tmp_path, env=env)
    assert p.returncode == 2 and "usage:" in p.stderr and "json.tool" in p.stderr
    p = run_python(["-c", "import sys; print(sys.argv); raise ValueError('boom')", "x"], cwd=tmp_path, env=env)
    assert p.returncode == 1 and p.stdout == "['-c', 'x']\n" and "ValueError: boom" in p.stderr
    with pytest.raises(subprocess.TimeoutExpired):
        run_python([str(script), "sleep"], cwd=tmp_path, env=env, timeout=3)
    from tests.conftest import _FORKS  # the server that ran them

    assert _FORKS and _FORKS[0].fork_ok(["train.py"], {**_FORKS[0].env, "OMP_NUM_THREADS": "1"})
    assert not _FORKS[0].fork_ok(["train.py", "cpu_kernels=portable"], _FORKS[0].env)
    assert not _FORKS[0].fork_ok(["train.py"], {**_FORKS[0].env, "MKL_CBWR": "COMPATIBLE"})
