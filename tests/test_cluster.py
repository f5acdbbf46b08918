"""Multi-node checks through a real Slurm cluster on this machine (docs/cluster.md).

The module fixture starts the loopback cluster with scripts/cluster/up.sh (munged,
slurmctld and 8 slurmd, one network namespace per node; tests/cluster_support.py) and tears it down with
scripts/cluster/down.sh; the last test checks that nothing is left.  Every command runs
with a timeout.  Needs root, `ip netns`, Slurm and munge: otherwise SKIPPED with the
reason.  The ReFrame benchmark runs also need the local shape's Lmod tree (openmpi,
omb, imb from `make install`); without it they are SKIPPED, while the Slurm/MPI tests
still run with the distribution's Open MPI.

Results (ReFrame stage/output, perflogs, JSON reports) go to $OCIBENCH_CLUSTER_RESULTS,
else to pytest's temporary directory; `make test-cluster` keeps them in output/cluster.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cluster_support import (
    CLUSTER_DIR,
    NODES,
    SCRIPTS,
    SHAPE,
    cases_of,
    local_tree_problem,
    run,
    started_cluster,
    text,
)
from ocibench import paths, shapes

pytestmark = pytest.mark.cluster

def test_make_test_cluster_imports_this_checkouts_ocibench(tmp_path):
    """Issue 20: `make test-cluster` died with "No module named 'ocibench'" where the
    project was not pip-installed (it never is): scripts/cluster/test.sh did not put
    the checkout's src/ on PYTHONPATH as scripts/test.sh does.  Run from outside the
    checkout with no PYTHONPATH, it must collect the cluster tests.  It runs first in
    this file, before the cluster fixture takes the machine-wide lock; holding that lock
    here keeps test.sh's clean-up (down.sh) from touching any cluster."""
    import fcntl

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "OCIBENCH_CLUSTER_LOCK_HELD")}
    probe = subprocess.run(["python3", "-c", "import ocibench"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip("ocibench is importable outside the checkout here (pip-installed?)")
    lock_path = Path(os.environ.get("OCIBENCH_CLUSTER_LOCK", "/run/lock/ocibench-cluster.lock"))
    try:
        lock = open(lock_path, "a")
    except OSError as err:
        pytest.skip(f"cannot open the cluster lock {lock_path}: {err.strerror}")
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pytest.skip(f"another loopback-cluster session holds {lock_path}")
        env.update(OCIBENCH_CLUSTER_LOCK_WAIT_S="0",
                   OCIBENCH_CLUSTER_RESULTS=str(tmp_path / "results"))
        done = subprocess.run(["bash", SCRIPTS / "test.sh", "--collect-only", "-q",
                               "-p", "no:cacheprovider"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    out = text(done)
    assert "ModuleNotFoundError" not in out, out[-3000:]
    assert done.returncode == 0, out[-3000:]
    assert "test_faulty_nodes_named_drained_and_returned" in done.stdout, out[-3000:]


#: The checks of the issue, as ReFrame names them (-n): 2-node point-to-point and
#: alltoall within a node (about 2 minutes together, bound by the time-limit check) ...
CHECKS = {
    "osu_latency %buffers=H-H %nodes=2": "osu_latency%buffers=H-H%nodes=2",
    "imb_pingpong %mpi=openmpi %nodes=2": "imb_pingpong%mpi=openmpi%nodes=2",
    "osu_alltoall": "osu_alltoall",
}
#: ... osu_bw at the seeds' single size of 256 MiB (64-message window, 20 iterations:
#: 343 GB through one veth pair, 3-5 minutes on 2 shared cores) ...
BANDWIDTH = {
    "osu_bw %buffers=H-H %nodes=2": "osu_bw%buffers=H-H%nodes=2",
}
#: ... and the 4-node x ranks-per-node collectives, which run every size up to 256 MiB
#: as the seeds do: 8 ranks on 2 shared cores over TCP take about 6 more minutes.
COLLECTIVES = {
    "osu_allreduce": "osu_allreduce",
    "imb_allreduce %mpi=openmpi %nodes=4": "imb_allreduce%mpi=openmpi%nodes=4",
}

#: OCIBENCH_CLUSTER_PROFILE: "quick" (the default under `make test`: neither the 256 MiB
#: osu_bw nor the 4-node collective runs, which are SKIPPED saying so) or "full"
#: (`make test-cluster`).
PROFILE = os.environ.get("OCIBENCH_CLUSTER_PROFILE", "quick")
PROFILES = ("quick", "full")

#: Seconds: the ReFrame session of the checks, a blocked job.
CHECKS_TIMEOUT_S = {"quick": 600, "full": 1500}
BLOCKED_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    chosen = os.environ.get("OCIBENCH_CLUSTER_RESULTS")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("cluster")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def cluster(results):
    with started_cluster(results) as running:
        yield running


@pytest.fixture(scope="module")
def module_tree():
    why = local_tree_problem()
    if why:
        pytest.skip(f"ReFrame benchmark runs need the local Lmod tree: {why}")


@pytest.fixture
def drained(cluster):
    """node3 drained with a reason, resumed afterwards."""
    if NODES < 4:
        pytest.skip(f"the drained-node test pins a job to node1..node4 ({NODES} nodes)")
    node = f"node{min(3, NODES)}"
    proc = cluster.head("scontrol", "update", f"NodeName={node}", "State=DRAIN",
                        "Reason=ocibench-test")
    assert proc.returncode == 0, text(proc)
    try:
        yield node
    finally:
        cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")


@pytest.fixture(scope="module")
def suite(cluster, module_tree, tmp_path_factory):
    """One ReFrame session: the profile's checks and the time-limit check, so that the
    1-minute wait for Slurm's kill overlaps the benchmarks on the other nodes."""
    if PROFILE not in PROFILES:
        pytest.fail(f"OCIBENCH_CLUSTER_PROFILE must be one of {PROFILES}, got {PROFILE!r}")
    limit_check = tmp_path_factory.mktemp("checks") / "cluster_time_limit.py"
    limit_check.write_text(TIME_LIMIT_CHECK)
    wanted = dict(CHECKS, **(dict(BANDWIDTH, **COLLECTIVES) if PROFILE == "full" else {}))
    args = ["-c", paths.CHECKS_DIR, "-c", limit_check, "-n", "cluster_time_limit"]
    for name in wanted.values():
        args += ["-n", name]
    (cluster.results / "figures.txt").unlink(missing_ok=True)
    start = time.monotonic()
    proc, report = cluster.reframe("checks", args + ["-r"], CHECKS_TIMEOUT_S[PROFILE])
    return proc, cases_of(report), time.monotonic() - start, set(wanted)


# --------------------------------------------------------------------------- the cluster

def test_shape_is_never_detected(monkeypatch):
    monkeypatch.delenv(shapes.SHAPE_ENV, raising=False)
    assert shapes.detect() != SHAPE
    monkeypatch.setenv(shapes.SHAPE_ENV, SHAPE)
    assert shapes.detect() == SHAPE


def test_nodes_idle_each_in_its_namespace(cluster):
    sinfo = cluster.head("sinfo", "-h", "-N", "-o", "%N %t %c")
    assert sinfo.returncode == 0, text(sinfo)
    rows = sorted(line.split() for line in sinfo.stdout.splitlines())
    assert [r[0] for r in rows] == sorted(f"node{i}" for i in range(1, NODES + 1))
    assert {r[1] for r in rows} == {"idle"}, sinfo.stdout
    assert {int(r[2]) for r in rows} == {cluster.shape.cores}
    dev = cluster.shape.ucx_net_devices["mpi"]
    step = cluster.head("srun", "-N", NODES, "--ntasks-per-node=1", "--time=1",
                        "bash", "-c", f'echo "$(hostname) $(ip -br -4 addr show {dev})"',
                        timeout=120)
    assert step.returncode == 0, text(step)
    lines = sorted(step.stdout.split("\n")[:-1])
    assert [line.split()[0] for line in lines] == sorted(f"node{i}" for i in range(1, NODES + 1))
    addrs = {line.split()[-1] for line in lines}
    assert len(addrs) == NODES, f"each node has its own {dev} address: {lines}"


def test_mpi_job_across_all_nodes(cluster):
    """sbatch, then mpirun over the allocation's hosts with ranks per node."""
    if not shutil.which("mpicc"):
        pytest.skip("no mpicc (Debian: libopenmpi-dev)")
    ppn = cluster.shape.cores
    proc = run(["bash", SCRIPTS / "smoke.sh", "-N", NODES, "-p", ppn], 300)
    out = text(proc)
    assert proc.returncode == 0, out
    hosts = re.findall(r"smoke rank=\d+ size=(\d+) host=(\S+)", out)
    assert len(hosts) == NODES * ppn and {int(s) for s, _ in hosts} == {NODES * ppn}, out
    per_host = {h: sum(1 for _, x in hosts if x == h) for _, h in hosts}
    assert per_host == {f"node{i}": ppn for i in range(1, NODES + 1)}, per_host
    assert re.search(r"smoke allreduce sum=(\d+) expected=\1\b", out), out
    lat = float(re.search(r"latency_us=([\d.]+)", out).group(1))
    bw = float(re.search(r"bandwidth_MBps=([\d.]+)", out).group(1))
    assert lat > 0 and bw > 0
    (cluster.results / "smoke.txt").write_text(out)


# --------------------------------------------------------------------------- ReFrame

def _assert_recorded(cluster, suite, names: set[str], label: str) -> None:
    proc, cases, took, _ = suite
    missing = names - set(cases)
    assert not missing, f"not run: {sorted(missing)}:\n{text(proc)[-4000:]}"
    failed = {n: cases[n].get("fail_reason") for n in names if cases[n]["result"] != "pass"}
    assert not failed, f"{failed}\n{text(proc)[-6000:]}"
    summary = [f"# {label}: {len(names)} checks on {SHAPE} ({NODES} nodes), "
               f"session of {took:.0f}s (profile {PROFILE})"]
    for name in sorted(names):
        case = cases[name]
        perf = case.get("perfvalues") or {}
        assert perf, f"{name}: no performance values recorded"
        assert all(v[0] > 0 for v in perf.values()), f"{name}: {perf}"
        part = case["partition"]
        assert part == ("single" if name == "osu_alltoall" else "multi"), (name, part)
        summary += [f"{name} @{case['system']}:{part}+{case['environ']} "
                    f"{key.split(':')[-1]} = {v[0]} {v[4]}" for key, v in sorted(perf.items())]
    logs = {p.name.split(".")[0] for p in (cluster.results / "checks" / "perflogs").rglob("*.log*")}
    unlogged = {n.split()[0] for n in names} - logs
    assert not unlogged, f"no perflog for {sorted(unlogged)}"
    with open(cluster.results / "figures.txt", "a") as out:
        out.write("\n".join(summary) + "\n")
    print("\n".join(summary))


def test_reframe_two_node_checks_and_alltoall(cluster, suite):
    """osu_latency, osu_bw, IMB PingPong across 2 nodes and osu_alltoall in a node,
    through the same ReFrame partitions and launcher as the OCI shapes; every
    performance value is recorded in the perflog and the run report."""
    _assert_recorded(cluster, suite, set(CHECKS), "2-node point-to-point, alltoall")


def test_reframe_two_node_bandwidth(cluster, suite):
    """osu_bw across 2 nodes at the seeds' 256 MiB."""
    if PROFILE != "full":
        pytest.skip("osu_bw moves 343 GB at 256 MiB (3-5 min on 2 cores): "
                    "make test-cluster, or OCIBENCH_CLUSTER_PROFILE=full")
    _assert_recorded(cluster, suite, set(BANDWIDTH), "2-node bandwidth")


def test_reframe_four_node_collectives(cluster, suite):
    """osu_allreduce and IMB Allreduce on 4 nodes x ranks per node."""
    if PROFILE != "full":
        pytest.skip("4-node collectives run every size to 256 MiB (about 6 min on 2 "
                    "cores): make test-cluster, or OCIBENCH_CLUSTER_PROFILE=full")
    _assert_recorded(cluster, suite, set(COLLECTIVES), "4-node collectives")


# --------------------------------------------------------------------------- faults

def test_drained_node_fails_four_node_check_with_reason(cluster, drained):
    """A 4-node job that needs a drained node cannot start: ReFrame cancels it and
    names the node, never waits.  The job asks for node1..node4 as `ocibench sweep`
    pins its jobs (the checks' sweep_nodes, sbatch --nodelist): on 9 nodes, Slurm
    would otherwise run it on 4 others."""
    group = "+".join(f"node{i}" for i in range(1, 5))
    args = ["-c", paths.CHECKS_DIR, "-n", COLLECTIVES["osu_allreduce"],
            "-S", f"sweep_nodes={group}", "-r"]
    start = time.monotonic()
    proc, report = cluster.reframe("drained", args, BLOCKED_TIMEOUT_S)
    took = time.monotonic() - start
    case = cases_of(report)["osu_allreduce"]
    assert case["result"] == "fail", case
    reason = case["fail_reason"] or ""
    assert "blocked" in reason and (drained in reason or "DRAINED" in reason), reason
    assert took < BLOCKED_TIMEOUT_S
    sinfo = cluster.head("sinfo", "-h", "-R", "-o", "%n %E")
    assert f"{drained} ocibench-test" in sinfo.stdout, sinfo.stdout
    squeue = cluster.head("squeue", "-h", "-t", "PD,R")
    assert squeue.stdout.strip() == "", f"the blocked job was left queued: {squeue.stdout}"


TIME_LIMIT_CHECK = '''
import reframe as rfm
from reframe.core.builtins import sanity_function
import reframe.utility.sanity as sn


@rfm.simple_test
class cluster_time_limit(rfm.RunOnlyRegressionTest):
    """Runs past its 1-minute limit: Slurm must kill it and ReFrame report it."""
    valid_systems = ["+multinode"]
    valid_prog_environs = ["+omb"]
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = "1m"
    executable = "sleep"
    executable_opts = ["600"]

    @sanity_function
    def ended_normally(self):
        return sn.assert_true(
            self.job.state == "COMPLETED" and self.job.exitcode == 0,
            msg=f"job {self.job.jobid} ended {self.job.state} "
                f"with exit code {self.job.exitcode}")
'''


def test_time_limit_kills_job_and_is_reported(cluster, request, tmp_path):
    """A job past its time limit is killed by Slurm (TIMEOUT) and ReFrame says so.
    Through ReFrame when the module tree exists (the environment loads it); else the
    same limit through sbatch --time."""
    if local_tree_problem() is None:
        proc, cases, _, _ = request.getfixturevalue("suite")
        case = cases.get("cluster_time_limit")
        assert case, f"the time-limit check did not run:\n{text(proc)[-4000:]}"
        assert case["result"] == "fail", case
        reason = case["fail_reason"] or ""
        assert "Slurm ended job" in reason and "TIMEOUT" in reason, reason
        assert "Reason=TimeLimit" in reason and "TimeLimit=00:01:00" in reason, reason
        stderr = Path(case["stagedir"] or "", "rfm_job.err")
        if stderr.is_file():  # kept: a failed check's stage directory stays
            assert "DUE TO TIME LIMIT" in stderr.read_text()
        # time_run counts from submission: the job may have waited for its nodes
        took = case["time_run"]
        assert took > 55, f"ended after {took:.0f}s, before its 1-minute limit"
        return
    start = time.monotonic()
    out = tmp_path / "sleep.out"
    sub = cluster.head("sbatch", "--parsable", "-N1", "--time=1", "-o", out,
                       "--wrap", "sleep 600")
    assert sub.returncode == 0, text(sub)
    jobid = sub.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 240
    while cluster.head("squeue", "-h", "-j", jobid, "-o", "%T").stdout.strip():
        if time.monotonic() > deadline:
            cluster.head("scancel", jobid)
            pytest.fail(f"job {jobid} outlived its 1-minute limit by 3 minutes")
        time.sleep(2)
    info = cluster.head("scontrol", "show", "job", "-o", jobid).stdout
    assert "JobState=TIMEOUT" in info, info
    assert "DUE TO TIME LIMIT" in out.read_text()
    took = time.monotonic() - start
    assert 55 < took < 240, f"killed after {took:.0f}s for a 1-minute limit"


def test_unknown_ucx_device_fails_naming_it(cluster):
    """mpirun -x UCX_NET_DEVICES=nosuchdev0 across 2 nodes: a failure naming it."""
    if not shutil.which("mpicc"):
        pytest.skip("no mpicc (Debian: libopenmpi-dev)")
    proc = run(["bash", SCRIPTS / "smoke.sh", "-N", 2, "-d", "nosuchdev0"], 300)
    out = text(proc)
    assert proc.returncode != 0, out
    assert re.search(r"network device 'nosuchdev0' is not available", out), out
    assert "JobState=FAILED" in out


def test_unknown_ucx_device_fails_reframe_check(cluster, module_tree, tmp_path):
    """The 2-node osu_latency with a shape whose ucx_net_devices.mpi does not exist on
    the nodes: the check fails and its reason names the device."""
    config = tmp_path / "bad_device_config.py"
    config.write_text(
        "import ocibench.reframe.launchers  # noqa: F401\n"
        "from ocibench.reframe.site import build\n"
        "site_configuration = build()\n"
        "for system in site_configuration['systems']:\n"
        f"    if system['name'] == {SHAPE!r}:\n"
        "        for part in system['partitions']:\n"
        "            part['extras']['ucx_net_devices'] = {'mpi': 'nosuchdev0'}\n")
    args = ["-c", paths.CHECKS_DIR, "-n", CHECKS["osu_latency %buffers=H-H %nodes=2"], "-r"]
    proc, report = cluster.reframe("bad-device", args, 300, config=config)
    case = cases_of(report)["osu_latency %buffers=H-H %nodes=2"]
    assert case["result"] == "fail", case
    assert "nosuchdev0" in (case["fail_reason"] or ""), case["fail_reason"]


def test_missing_hostfile_fails_naming_it(cluster):
    if not shutil.which("mpicc"):
        pytest.skip("no mpicc (Debian: libopenmpi-dev)")
    missing = CLUSTER_DIR / "no-such-hostfile.txt"
    proc = run(["bash", SCRIPTS / "smoke.sh", "-N", 2, "-f", missing], 300)
    out = text(proc)
    assert proc.returncode != 0, out
    assert "unable to open the hostfile" in out and str(missing) in out, out


def test_bad_input_is_a_clear_error():
    for env, value, words in (("OCIBENCH_CLUSTER_NODES", "0", "must be 1..32"),
                              ("OCIBENCH_CLUSTER_NET", "8.8.8", "private range"),
                              ("OCIBENCH_CLUSTER_DIR", "relative/dir", "absolute path")):
        proc = run(["bash", SCRIPTS / "up.sh"], 30, env={**os.environ, env: value})
        assert proc.returncode != 0 and words in proc.stderr, (env, text(proc))


# --------------------------------------------------------------------------- teardown

def test_down_leaves_nothing_running(cluster):
    pids = set()
    for pidfile in (CLUSTER_DIR / "run").glob("*.pid"):
        pids.add(int(pidfile.read_text().split()[0]))
    munge = CLUSTER_DIR / "munge" / "munged.pid"
    if munge.is_file():
        pids.add(int(munge.read_text().split()[0]))
    assert pids, "no daemon pid files: was the cluster up?"
    down = run(["bash", SCRIPTS / "down.sh"], 120)
    assert down.returncode == 0, text(down)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not re.search(r"^ocb-", netns, re.M), netns
    alive = [p for p in pids if Path(f"/proc/{p}").exists()]
    assert not alive, f"still running after down.sh: {alive}"
    again = run(["bash", SCRIPTS / "down.sh"], 60)
    assert again.returncode == 0, text(again)
