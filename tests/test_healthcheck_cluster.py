"""`ocibench healthcheck` as slurmd's own HealthCheckProgram on the loopback cluster.

The cluster is real (scripts/cluster/up.sh); slurm.conf gains HealthCheckProgram,
HealthCheckInterval and HealthCheckNodeState=ANY, and slurmctld then asks every slurmd
to run the health check each interval, as on a production cluster.  Nothing here
drains or resumes a node for the healthcheck: only slurmd's runs of it do.

The nodes share this machine's filesystem but not its hardware, so each has a fake
GPU node (tests/health_fakes.py: 8 GPUs, their PCIe links, NVLink, RDMA ports, a
kernel log) in a directory of its own.  The program Slurm runs is a wrapper that picks
the node's directory by its name ($SLURMD_NODENAME, which slurmd sets, else the host
name of the node's UTS namespace) and puts that node's fake nvidia-smi first on PATH.

Needs root, `ip netns`, Slurm and munge (else SKIPPED); one cluster per machine
(the lock in tests/cluster_support.py).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from cluster_support import CLUSTER_DIR, NODES, results_dir, started_cluster, text
from health_fakes import SHAPE, FakeNode
from ocibench import paths

pytestmark = pytest.mark.cluster

#: Seconds between slurmd's runs of the health check.  slurmctld sends the request from
#: its background loop once a ping round is done (pings every SlurmdTimeout/3: about
#: 7 s here); nine nodes starting Python at once on two shared cores take several
#: seconds, so 20 s keeps the runs from overlapping.
INTERVAL_S = 20
#: What a run itself may add to "within 2 intervals" on this loaded machine (the
#: request reaches the node, Python starts, the drain reaches slurmctld).
RUN_SLACK_S = 15

PERSON_REASON = "reseating the cables (a person's drain)"
#: A reason as `ocibench sweep --drain` writes it: the same prefix, another's drain.
SWEEP_REASON = ("ocibench: osu_bw %buffers=H-H %nodes=2 9.10 GB/s < 11.20 GB/s "
                "(the sweep's drain)")

WRAPPER = """#!/bin/sh
# slurmd's {program} on the loopback cluster (tests/test_healthcheck_cluster.py): slurmd
# runs it with no arguments, so this names the node's own fake hardware (the prolog's
# own where the test gives it one) and its state file.
node=${{SLURMD_NODENAME:-$(hostname)}}
here={fakes}/$node
hw={fakes}/{hardware}$node
[ -d "$hw" ] || hw=$here
PATH=$hw/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SLURM_CONF={conf}
OCIBENCH_HEALTH_STATE=$here/state.json
# the Python with ocibench's requirements (bin/ocibench runs it)
OCIBENCH_PYTHON={python}
export PATH SLURM_CONF OCIBENCH_HEALTH_STATE OCIBENCH_PYTHON
echo "--- $(date +%s.%N) {program} SLURMD_NODENAME=${{SLURMD_NODENAME:-unset}}" >>"$here/log"
exec {ocibench} healthcheck {options}--shape {shape} --root "$hw/root" --node "$node" \\
  >>"$here/log" 2>&1
"""


def nodes() -> list[str]:
    return [f"node{i}" for i in range(1, NODES + 1)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if NODES < 6:
        pytest.skip(f"the healthcheck's test needs 6 nodes ({NODES}: OCIBENCH_CLUSTER_NODES)")
    with started_cluster(results_dir(tmp_path_factory, "healthcheck")) as running:
        yield running


@pytest.fixture(scope="module")
def fakes(cluster) -> dict[str, FakeNode]:
    """Every node a healthy fake GPU node; slurmd's health check and the prolog on."""
    where = CLUSTER_DIR / "health"
    made = {node: FakeNode(where / node) for node in nodes()}
    wrapper, prolog = where / "healthcheck.sh", where / "prolog.sh"
    for path, program, hardware, options in (
            (wrapper, "HealthCheckProgram", "", ""),
            (prolog, "Prolog", "prolog/", "--prolog ")):
        path.write_text(WRAPPER.format(
            program=program, fakes=where, hardware=hardware, options=options,
            conf=CLUSTER_DIR / "etc" / "slurm.conf",
            ocibench=paths.REPO_ROOT / "bin" / "ocibench", shape=SHAPE,
            python=sys.executable))
        path.chmod(0o755)
    conf = CLUSTER_DIR / "etc" / "slurm.conf"
    with conf.open("a") as out:
        out.write(f"HealthCheckProgram={wrapper}\nHealthCheckInterval={INTERVAL_S}\n"
                  f"HealthCheckNodeState=ANY\nProlog={prolog}\n")
    proc = cluster.head("scontrol", "reconfigure")
    assert proc.returncode == 0, text(proc)
    shown = cluster.head("scontrol", "show", "config").stdout
    assert str(wrapper) in shown, shown
    return made


def state_of(fake: FakeNode) -> dict | None:
    path = fake.where / "state.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def log_of(fake: FakeNode) -> str:
    path = fake.where / "log"
    return path.read_text() if path.exists() else ""


def runs_since(fakes: dict[str, FakeNode], since: float, names: list[str],
               timeout: float) -> dict[str, dict]:
    """Until each named node's state file was written by a run that started after
    ``since``: slurmd ran the healthcheck there."""
    deadline = time.monotonic() + timeout
    while True:
        states = {n: state_of(fakes[n]) for n in names}
        if all(s and s["time"] > since for s in states.values()):
            return states  # type: ignore[return-value]
        if time.monotonic() > deadline:
            logs = {n: (fakes[n].where / "log").read_text()[-1500:]
                    if (fakes[n].where / "log").exists() else "no log" for n in names}
            pytest.fail(f"no healthcheck run after {since} on every node in {timeout}s: "
                        f"{ {n: s and s['time'] for n, s in states.items()} }\n{logs}")
        time.sleep(1)


def node_states(cluster) -> dict[str, tuple[str, str]]:
    """node -> (sinfo's state, Slurm's reason), "" for no reason (sinfo prints "none")."""
    return {node: (state, "" if reason == "none" else reason)
            for node, (state, reason) in cluster.node_states().items()}


def wait_for(cluster, want, timeout: float) -> tuple[dict[str, tuple[str, str]], float]:
    """Until ``want(states)`` holds; the states and the seconds it took."""
    began = time.monotonic()
    while True:
        states = node_states(cluster)
        if want(states):
            return states, time.monotonic() - began
        if time.monotonic() - began > timeout:
            pytest.fail(f"not reached in {timeout}s: {states}")
        time.sleep(1)


def test_slurmds_health_check_drains_the_broken_and_resumes_them(cluster, fakes):
    names = nodes()
    gpu_node, port_node, hung_node, person_node, flap_node, sweep_node = names[:6]
    healthy = [n for n in names if n not in (gpu_node, port_node, person_node, sweep_node)]
    # a first round on healthy nodes: each node's state file, with its ports' counters
    runs_since(fakes, time.time(), names, 2 * INTERVAL_S + RUN_SLACK_S)
    states = node_states(cluster)
    assert {s for s, _ in states.values()} == {"idle"}, states

    # the faults, and a person's drain on a node that is broken too
    proc = cluster.head("scontrol", "update", f"NodeName={person_node}", "State=DRAIN",
                        f"Reason={PERSON_REASON}")
    assert proc.returncode == 0, text(proc)
    fakes[gpu_node].gpus(7)
    fakes[port_node].port("mlx5_6:1", state="1: DOWN")
    fakes[hung_node].hang()
    fakes[person_node].gpus(6)
    fakes[flap_node].port("mlx5_4:1", link_downed=3)   # went down 3 times since
    fakes[sweep_node].gpus(7)
    faulted = time.time()

    def drained(states):
        return all(states[n][0] == "drain" and states[n][1].startswith("ocibench:")
                   for n in (gpu_node, port_node, sweep_node))
    states, took = wait_for(cluster, drained, 2 * INTERVAL_S + RUN_SLACK_S)
    print(f"faulted nodes drained by slurmd's health check in {took:.0f} s "
          f"(interval {INTERVAL_S} s)")
    assert "gpu_count (7x NVIDIA A100-SXM4-40GB; the shape: 8x" in states[gpu_node][1]
    assert "rdma mlx5_6:1 (port state 1: DOWN" in states[port_node][1]
    assert states[person_node] == ("drain", PERSON_REASON), states
    # the sweep drains a node the healthcheck drained: the drain is the sweep's now
    proc = cluster.head("scontrol", "update", f"NodeName={sweep_node}", "State=DRAIN",
                        f"Reason={SWEEP_REASON}")
    assert proc.returncode == 0, text(proc)

    # the hung tool's node: a run after the fault said unknown, and it is not drained
    hung = runs_since(fakes, faulted, [hung_node], 2 * INTERVAL_S + RUN_SLACK_S)[hung_node]
    gpu = next(p for p in hung["probes"] if p["name"] == "gpu_count")
    assert gpu["state"] == "unknown" and "ran past" in gpu["evidence"], gpu
    assert hung["action"] == "none" and hung["duration_s"] < 10, hung
    assert node_states(cluster)[hung_node] == ("idle", ""), node_states(cluster)

    # the flapping port: drained by the run that saw its counter rise, and resumed by a
    # later run, once the counter held still (slurmd's log of the runs: the wrapper's)
    _, took = wait_for(cluster, lambda s: s[flap_node] == ("idle", "")
                       and "resume: ocibench: rdma mlx5_4:1" in log_of(fakes[flap_node]),
                       3 * INTERVAL_S + RUN_SLACK_S)
    log = log_of(fakes[flap_node])
    # the check that failed first in the reason, then what held
    assert f"{flap_node}: drain: ocibench: rdma mlx5_4:1 (link_downed rose from 0 to 3 " \
        "since the last run" in log, log[-3000:]

    # the faults removed: the healthcheck resumes what it drained, nothing else
    for node in (gpu_node, person_node, sweep_node):
        fakes[node].gpus(8)
    fakes[port_node].port("mlx5_6:1")
    fakes[hung_node].hang(False)
    states, took = wait_for(cluster, lambda s: all(s[n] == ("idle", "") for n in healthy
                                                   + [gpu_node, port_node]),
                            2 * INTERVAL_S + RUN_SLACK_S)
    print(f"repaired nodes resumed by slurmd's health check in {took:.0f} s")
    # a whole round later, the person's drain is still theirs, and the sweep's its own
    runs_since(fakes, time.time(), [person_node, sweep_node], 2 * INTERVAL_S + RUN_SLACK_S)
    states = node_states(cluster)
    assert states[person_node] == ("drain", PERSON_REASON), states
    assert states[sweep_node] == ("drain", SWEEP_REASON), states
    for node in (person_node, sweep_node):
        cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")


def test_dry_run_on_a_node_says_and_changes_nothing(cluster, fakes, tmp_path: Path):
    """--dry-run with a node's GPUs missing: "would drain", and Slurm's state unchanged
    (a fake of its own: slurmd's runs on the node keep reading the node's healthy one)."""
    node = nodes()[0]
    broken = FakeNode(tmp_path / "fake")
    broken.gpus(7)
    proc = cluster.head(
        "env", f"PATH={broken.bin}:/usr/sbin:/usr/bin:/sbin:/bin",
        f"OCIBENCH_PYTHON={sys.executable}",
        f"OCIBENCH_HEALTH_STATE={tmp_path / 'state.json'}",
        paths.REPO_ROOT / "bin" / "ocibench", "healthcheck", "--dry-run",
        "--shape", SHAPE, "--root", broken.root, "--node", node)
    assert proc.returncode == 1, text(proc)
    assert f"{node}: would drain: ocibench: gpu_count (7x" in proc.stdout, text(proc)
    assert json.loads((tmp_path / "state.json").read_text())["action"] == "would drain"
    assert node_states(cluster)[node] == ("idle", "")


def test_the_prolog_drains_a_broken_node_before_its_job(cluster, fakes):
    """Slurm's Prolog, `ocibench healthcheck --prolog`, on a node whose GPUs went
    missing since its last health check (the prolog's own fake: the health loop still
    reads the healthy one): the job does not run there, the node is drained, and once
    the GPUs are back the health loop returns it (the drain is in the node's state
    file, shared by both)."""
    node = nodes()[2]
    broken = FakeNode(CLUSTER_DIR / "health" / "prolog" / node)
    broken.gpus(7)
    marker = CLUSTER_DIR / "health" / f"{node}.job-ran"
    try:
        proc = cluster.head("sbatch", "-w", node, "-o", "/dev/null", "--wrap",
                            f"touch {marker}")
        assert proc.returncode == 0, text(proc)
        job = proc.stdout.split()[-1]
        states, took = wait_for(cluster, lambda s: s[node][0] == "drain", 60)
        print(f"prolog: {node} drained in {took:.0f} s: {states[node][1]!r}")
        shown = cluster.head("scontrol", "show", "job", job).stdout
        print(" ".join(w for w in shown.split() if w.startswith(("JobState=", "Reason="))))
        assert "JobState=COMPLETED" not in shown and not marker.exists(), shown
        assert states[node][1].startswith("ocibench: gpu_count (7x"), states[node]
        # the GPUs back: the health loop resumes the prolog's drain
        shutil.rmtree(broken.where)
        _, took = wait_for(cluster, lambda s: s[node] == ("idle", "")
                           or s[node][0] in ("alloc", "mix"), 2 * INTERVAL_S + RUN_SLACK_S)
        print(f"prolog's drain resumed by the health check in {took:.0f} s")
    finally:
        cluster.head("scancel", job) if "job" in locals() else None
        shutil.rmtree(broken.where, ignore_errors=True)
