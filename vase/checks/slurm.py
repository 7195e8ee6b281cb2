"""A real one-node SLURM cluster on this machine, on the loopback only, for checks (``make cluster-check``).

Debian's ``slurm-wlm`` and ``munge`` (installed by ``make cluster-check`` when missing); everything the daemons write
(config, munge key and socket, state, spool, logs, pid files) lives in one temporary folder, and the daemons are
stopped by their own pids when the ``with`` block ends, whatever happened::

    with LocalSlurm() as slurm:                 # slurmctld + slurmd + munged, partition "debug"
        subprocess.run(["sbatch", ...], env=slurm.env)   # SLURM_CONF points the tools at it
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CONF = """\
ClusterName=vase
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket,cred_expire=10
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool-%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
# the controller answers slowly with ten parts' jobs on 2 cores: RPCs (scontrol requeue) wait 60 s, not 10
MessageTimeout=60
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
# a job step's processes may take over a minute to go after SIGKILL on 2 loaded cores (a checkpoint's fsync beside
# other jobs): at SLURM 22.05's default of 60 s the node was drained ("Kill task failed") and every later job waited
UnkillableStepTimeout=300
MinJobAge=600
FirstJobId={first_job_id}
{node_lines}
PartitionName=debug Nodes={node_list} Default=YES MaxTime=INFINITE State=UP
"""
NODE_PREFIX = "vase-n"
"""A cluster of several nodes names them vase-n1, vase-n2, ... (each its own slurmd on this machine, on its own port);
a one-node cluster's node is this machine by its own name."""


def missing_tools() -> list[str]:
    return [t for t in ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
            if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").is_file()]


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mem_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 - 1024  # leave 1 GiB to the system
    return 4096


class LocalSlurm:
    """slurmctld, slurmd and munged started on the loopback with a config of their own; stopped on exit."""

    def __init__(self, cpus: int | None = None, keep_logs_to: Path | None = None, nodes: int = 1,
                 first_job_id: int = 1) -> None:
        """``first_job_id``: where this cluster's job ids start. Lightning's DDP rendezvous port is 15000 plus the last
        four digits of ``SLURM_JOB_ID``, so two clusters on one machine at once must number their jobs apart (blocks
        of 1000 a few thousand apart), or a job of one joins the other's rendezvous and both hang."""
        if not 1 <= first_job_id <= 9999:
            raise ValueError(f"first_job_id={first_job_id}: give 1..9999 (its last four digits name the DDP port)")
        self.first_job_id = first_job_id
        self.cpus = cpus or os.cpu_count() or 1
        self.nodes = nodes
        host = socket.gethostname()
        self.node_names = [host] if nodes == 1 else [f"{NODE_PREFIX}{i + 1}" for i in range(nodes)]
        self.keep_logs_to = keep_logs_to
        self.root = Path(tempfile.mkdtemp(prefix="vase-slurm-"))
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._pids: list[int] = []
        self.events: list[dict[str, Any]] = []  # nodes the watchdog found drained, and what it did
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def _write_conf(self) -> None:
        (self.root / "state").mkdir()
        for name in self.node_names:
            (self.root / f"spool-{name}").mkdir()
        host = socket.gethostname()
        cpus, mem = max(1, self.cpus // self.nodes), _mem_mb() // self.nodes
        if self.nodes == 1:
            lines = f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN"
        else:  # several slurmd on this one machine, each on its own port (Slurm's "multiple slurmd" setup)
            lines = "\n".join(f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} CPUs={cpus} "
                              f"RealMemory={mem} State=UNKNOWN" for n in self.node_names)
        self.conf.write_text(CONF.format(root=self.root, ctld_port=free_port(), d_port=free_port(),
                                         node_lines=lines, node_list=",".join(self.node_names),
                                         first_job_id=self.first_job_id))

    def _start(self, cmd: list[str], pidfile: Path) -> int:
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd[0]} did not start: {(p.stdout + p.stderr).strip()[-1500:]}")
        for _ in range(100):
            if pidfile.is_file() and pidfile.read_text().strip():
                pid = int(pidfile.read_text().split()[0])
                self._pids.append(pid)
                return pid
            time.sleep(0.1)
        raise RuntimeError(f"{cmd[0]} wrote no pid file {pidfile}")

    def __enter__(self) -> LocalSlurm:
        try:
            self._write_conf()
            key = self.root / "munge.key"
            key.write_bytes(os.urandom(1024))
            key.chmod(0o400)
            self._start([_tool("munged"), "--force", f"--key-file={key}", f"--socket={self.root / 'munge.socket'}",
                         f"--pid-file={self.root / 'munged.pid'}", f"--log-file={self.root / 'munged.log'}",
                         f"--seed-file={self.root / 'munge.seed'}"], self.root / "munged.pid")
            self._start([_tool("slurmctld"), "-f", str(self.conf), "-c"], self.root / "slurmctld.pid")
            # a one-node cluster's node is this machine by its own name (DDP ranks find their master by it); several
            # nodes are several slurmd here, and vase takes the master's address from the allocation (NodeAddr)
            for name in self.node_names:
                self._start([_tool("slurmd"), "-f", str(self.conf), "-N", name], self.root / f"slurmd-{name}.pid")
            self.wait_idle()
            self._watchdog = threading.Thread(target=self._watch, name="slurm-watchdog", daemon=True)
            self._watchdog.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def wait_idle(self, timeout: float = 60) -> None:
        """Until the node is idle (the cluster answers and can run jobs)."""
        end = time.time() + timeout
        state = ""
        while time.time() < end:
            p = subprocess.run([_tool("sinfo"), "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self.env)
            states = p.stdout.split()
            state = " ".join(states)
            if p.returncode == 0 and len(states) == self.nodes and all(
                    s in ("idle", "mixed", "allocated") for s in states):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the SLURM node did not come up (state {state!r}); slurmctld log: "
                           f"{self.log_tail('slurmctld.log')}")

    def node_states(self) -> list[tuple[str, str, str]]:
        """Each node's name, state and reason (``sinfo -N``); [] when the controller does not answer."""
        p = self.run("sinfo", "-h", "-N", "-o", "%N|%T|%E", timeout=30)
        rows = [line.split("|", 2) for line in p.stdout.splitlines() if line.count("|") >= 2] if p.returncode == 0 else []
        return [(n, state, reason) for n, state, reason in rows]

    def check_nodes(self) -> list[dict[str, Any]]:
        """Resume a node that SLURM drained because a job step's processes outlived its kill timeout ("Kill task
        failed": the machine was slow to end them, not vase; a cluster's admin resumes such a node), so the jobs
        after it run instead of waiting for ever; any other drained or down node is recorded, not touched. Returns
        what it found this time (each also kept in ``events``)."""
        found = []
        for name, state, reason in self.node_states():
            if not any(word in state for word in ("drain", "down", "fail")):
                continue
            if any(e["node"] == name and e["reason"] == reason and not e["resumed"] for e in self.events):
                continue  # said once
            resumed = reason.startswith("Kill task failed") and self.run(
                "scontrol", "update", f"NodeName={name}", "State=RESUME", timeout=30).returncode == 0
            event = {"node": name, "state": state, "reason": reason, "resumed": resumed,
                     "at": time.strftime("%H:%M:%S")}
            self.events.append(event)
            found.append(event)
        return found

    def _watch(self, every: float = 5.0) -> None:
        while not self._stop.wait(every):
            try:
                self.check_nodes()
            except (OSError, subprocess.SubprocessError):
                continue

    def log_tail(self, name: str, chars: int = 2000) -> str:
        path = self.root / name
        return path.read_text(errors="replace")[-chars:] if path.is_file() else "(no log)"

    def run(self, *args: str, **kw: Any) -> subprocess.CompletedProcess:
        return subprocess.run([_tool(args[0]), *args[1:]], capture_output=True, text=True, env=self.env, **kw)

    def _drain(self, timeout: float = 60) -> None:
        """Cancel what is left on this cluster and wait until its jobs have gone, so no job step outlives the
        daemons it reports to."""
        if not self._pids:
            return
        self.run("scancel", "--full", "--partition=debug", timeout=30)
        end = time.time() + timeout
        while time.time() < end:
            q = self.run("squeue", "-h", "-o", "%i", timeout=30)
            if q.returncode != 0 or not q.stdout.strip():
                return
            time.sleep(1)

    def _ours(self) -> list[int]:
        """Processes started for this cluster (its daemons, job steps and their children): the ones whose
        environment names this cluster's config, which no other process has."""
        mark = f"SLURM_CONF={self.conf}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
        return found

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout=60)
        try:
            self._drain()
        except (OSError, subprocess.SubprocessError):
            pass
        for pid in reversed(self._pids):  # our daemons only, by the pids they wrote
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        deadline = time.time() + 15
        for pid in self._pids:
            while time.time() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.2)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid in self._ours():  # a job step that outlived its daemons (it would hold the CPU and the spool)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.keep_logs_to is not None:
            self.keep_logs_to.mkdir(parents=True, exist_ok=True)
            for log in ("slurmctld.log", *(f"slurmd-{n}.log" for n in self.node_names), "munged.log", "slurm.conf"):
                if (self.root / log).is_file():
                    shutil.copy2(self.root / log, self.keep_logs_to / log)
        shutil.rmtree(self.root, ignore_errors=True)  # the folder this object made, nothing else
