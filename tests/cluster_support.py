"""What the loopback-cluster tests share (tests/test_cluster.py, tests/test_sweep_cluster.py):
starting and stopping the cluster under the machine-wide lock, commands on its head
node, ReFrame sessions there, and whether the nodes can load the benchmarks.

The cluster is real (scripts/cluster/up.sh: munged, slurmctld, one slurmd per network
namespace; docs/cluster.md); nothing here stands in for a part of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ocibench import paths, shapes

SCRIPTS = paths.REPO_ROOT / "scripts" / "cluster"
SHAPE = "loopback-cluster"
#: As scripts/cluster/lib.sh: 9, so that the sweep's test, with one node down, sweeps
#: an even ring of 8 (2 waves of pairs, not 3: docs/sweep.md).
NODES = int(os.environ.get("OCIBENCH_CLUSTER_NODES", "9"))
CLUSTER_DIR = Path(os.environ.get("OCIBENCH_CLUSTER_DIR")
                   or Path(os.environ.get("TMPDIR", "/tmp")) / "ocibench-cluster")

#: Seconds: starting the cluster.
UP_TIMEOUT_S = 180
#: Seconds to wait for another session's cluster (a concurrent `make test`) to finish.
SESSION_LOCK_WAIT_S = int(os.environ.get("OCIBENCH_CLUSTER_SESSION_WAIT_S", "1800"))


def run(argv, timeout, **kw) -> subprocess.CompletedProcess:
    """Run a command; a timeout is a test failure with what it printed so far."""
    try:
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                              timeout=timeout, **kw)
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) \
            else (err.stdout or "")
        pytest.fail(f"{' '.join(map(str, argv))} did not finish in {timeout}s:\n{out[-3000:]}")


def text(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


class Cluster:
    """The running cluster: commands on its head node, ReFrame sessions, faults."""

    def __init__(self, results: Path):
        self.results = results
        self.shape = shapes.load(SHAPE)

    def head(self, *argv, timeout=60, cwd=None) -> subprocess.CompletedProcess:
        return run(["bash", SCRIPTS / "exec.sh", *argv], timeout, cwd=cwd)

    def fault(self, *argv, timeout=60) -> subprocess.CompletedProcess:
        """scripts/cluster/fault.sh; a failure fails the test."""
        proc = run(["bash", SCRIPTS / "fault.sh", *argv], timeout)
        assert proc.returncode == 0, f"fault.sh {' '.join(map(str, argv))}:\n{text(proc)}"
        return proc

    def node_states(self) -> dict[str, tuple[str, str]]:
        """node -> (sinfo's short state, Slurm's reason) for every node."""
        proc = self.head("sinfo", "-h", "-N", "-o", "%N|%t|%E")
        assert proc.returncode == 0, text(proc)
        rows = (line.split("|", 2) for line in proc.stdout.splitlines() if line.strip())
        return {node: (state, reason) for node, state, reason in rows}

    def wait_idle(self, timeout: int = 60) -> dict[str, tuple[str, str]]:
        """Until every node is idle and answering: a node just resumed is `idle*` (not
        responding) until slurmctld's next ping."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.node_states()
            if {s for s, _ in states.values()} == {"idle"}:
                return states
            if time.monotonic() > deadline:
                pytest.fail(f"nodes not idle after {timeout}s: {states}")
            time.sleep(1)

    def reframe(self, name: str, args: list[str], timeout: int,
                config: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
        """One ReFrame session on the head node; returns (process, JSON run report)."""
        where = self.results / name
        reports = where / "reports"
        shutil.rmtree(where, ignore_errors=True)
        reports.mkdir(parents=True)
        config = config or paths.SITE_DIR / "reframe_config.py"
        proc = self.head(
            "env", f"OCIBENCH_REPORT_DIR={reports}",
            f"OCIBENCH_PERFLOG_DIR={where / 'perflogs'}",
            "reframe", "-C", config, "--prefix", where, "--system", SHAPE, *args,
            timeout=timeout, cwd=where)
        found = sorted(reports.glob("run-report-*.json"))
        assert found, f"ReFrame wrote no run report in {reports}:\n{text(proc)[-4000:]}"
        return proc, json.loads(found[-1].read_text())


def cases_of(report: dict) -> dict[str, dict]:
    """Display name (without the hash) -> the last run's test case."""
    cases = {}
    for case in report["runs"][-1]["testcases"]:
        cases[re.sub(r"\s*/[0-9a-f]{8}$", "", case["display_name"])] = case
    return cases


def local_tree_problem() -> str | None:
    """Why the nodes cannot load openmpi, omb and imb from the local tree, or None."""
    from ocibench.reframe.site import find_lmod

    _, init = find_lmod()
    if init is None:
        return "Lmod is not installed (Debian: apt-get install lmod)"
    root = paths.module_root("local")
    dirs = sorted(glob.glob(str(root / "Core")) + glob.glob(str(root / "*" / "Core")))
    if not dirs:
        return f"no local module tree at {root} (make install builds it)"
    script = f"source {init}; " + "; ".join(f"module use {d}" for d in dirs) + \
        "; module load openmpi omb imb && command -v osu_latency IMB-MPI1"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        why = " ".join((proc.stderr or proc.stdout).split())[:300]
        return f"`module load openmpi omb imb` fails with the local tree {root}: {why}"
    return None


def take_session_lock():
    """The machine-wide cluster lock (scripts/cluster/lib.sh), held for the whole
    module: namespace names are machine-wide, so a second session (another checkout's
    `make test`) waits for this one instead of tearing its cluster down."""
    path = Path(os.environ.get("OCIBENCH_CLUSTER_LOCK", "/run/lock/ocibench-cluster.lock"))
    handle = open(path, "a+")
    deadline = time.monotonic() + SESSION_LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.seek(0)
                holder = handle.read(200).strip()
                handle.close()
                pytest.skip(f"another loopback-cluster session holds {path} ({holder}) "
                            f"after {SESSION_LOCK_WAIT_S}s (OCIBENCH_CLUSTER_SESSION_WAIT_S)")
            time.sleep(2)
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}: pytest {paths.REPO_ROOT}\n")
    handle.flush()
    return handle


@contextlib.contextmanager
def started_cluster(results: Path) -> Iterator[Cluster]:
    """The cluster, up for the block, torn down after it; SKIPPED where this machine
    cannot run it.  The block holds the machine-wide lock."""
    check = run(["bash", SCRIPTS / "up.sh", "--check"], 60)
    if check.returncode != 0:
        pytest.skip(f"cannot run the loopback cluster here: {text(check).strip()}")
    lock = take_session_lock()
    held = os.environ.get("OCIBENCH_CLUSTER_LOCK_HELD")
    os.environ["OCIBENCH_CLUSTER_LOCK_HELD"] = "1"  # up.sh, down.sh: we hold it
    try:
        # A cluster left by a killed earlier session would make up.sh refuse to start;
        # holding the lock, it can only be such a leftover.
        run(["bash", SCRIPTS / "down.sh"], 120)
        up = run(["bash", SCRIPTS / "up.sh"], UP_TIMEOUT_S)
        assert up.returncode == 0, f"up.sh failed:\n{text(up)}"
        yield Cluster(results)
    finally:
        run(["bash", SCRIPTS / "down.sh"], 120)
        if held is None:
            os.environ.pop("OCIBENCH_CLUSTER_LOCK_HELD", None)
        else:
            os.environ["OCIBENCH_CLUSTER_LOCK_HELD"] = held
        lock.close()


def results_dir(tmp_path_factory, name: str) -> Path:
    """$OCIBENCH_CLUSTER_RESULTS/<name> (make test-cluster keeps them), else a
    temporary directory."""
    chosen = os.environ.get("OCIBENCH_CLUSTER_RESULTS")
    path = Path(chosen) / name if chosen else tmp_path_factory.mktemp(name)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def modules_that_do_not_load(where: Path):
    """The nodes' module tree replaced by one whose openmpi and omb stop Lmod (a broken
    install: their prefixes gone), so that every job's `module load` fails in Lmod (the
    sweep's action: fix-software, a drain) without running a benchmark.  Not a tree
    without them: software that is not installed is skipped, naming the install step
    (checks/base.py)."""
    link = CLUSTER_DIR / "modules" / SHAPE
    before = os.readlink(link) if link.is_symlink() else None
    for name in ("openmpi", "omb"):
        (where / "broken-tree" / "Core" / name).mkdir(parents=True, exist_ok=True)
        (where / "broken-tree" / "Core" / name / "1.0.lua").write_text(
            f'LmodError("{name}: its installation prefix is gone")\n')
    tmp = link.with_name(link.name + ".test")
    tmp.symlink_to(where / "broken-tree")
    os.replace(tmp, link)
    try:
        yield
    finally:
        if before is not None:
            tmp.symlink_to(before)
            os.replace(tmp, link)
