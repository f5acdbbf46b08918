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
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from cluster_support import (
    CLUSTER_DIR,
    NODES,
    modules_that_do_not_load,
    results_dir,
    started_cluster,
    text,
)
from health_fakes import SHAPE, FakeNode
from ocibench import paths
from ocibench.history import current, drift
from ocibench.history.store import History, Record
from test_root_owns import (  # noqa: F401  (the fixtures: request.getfixturevalue)
    _state_text,
    as_nobody,
    shared,
)

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
#: The drain budget of the tests that are not about it: above the 4 nodes the first
#: test's health loop drains at once (a person's drain does not count).
ROOMY_BUDGET = "9"

#: A reason as `ocibench sweep --drain` writes it: the same prefix, another's drain.
SWEEP_REASON = ("ocibench: osu_bw %buffers=H-H %nodes=2 9.10 GB/s < 11.20 GB/s "
                "(the sweep's drain)")

WRAPPER = """#!/bin/sh
# slurmd's {program} on the loopback cluster (tests/test_healthcheck_cluster.py): slurmd
# runs it with no arguments, so this names the node's own fake hardware (the prolog's
# own where the test gives it one), its state file and its history.
node=${{SLURMD_NODENAME:-$(hostname)}}
here={fakes}/$node
hw={fakes}/{hardware}$node
[ -d "$hw" ] || hw=$here
PATH=$hw/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SLURM_CONF={conf}
OCIBENCH_HEALTH_STATE=$here/state.json
# the cluster's history, as on shared storage (none but in the fleet's test: the history
# probes are unknown), never root's default, which another test or the admin's own
# sweeps may have written
OCIBENCH_HISTORY_DB={fakes}/history.sqlite
# root's lock directory (/run/ocibench on a node): one for the nodes sharing this
# machine, each node's lock named after its state file
OCIBENCH_RUN_DIR={fakes}/run
# the Python with ocibench's requirements (bin/ocibench runs it)
OCIBENCH_PYTHON={python}
# ocibench's drain budget, as a site sets it for every node (the test changes it)
OCIBENCH_DRAIN_BUDGET=$(cat {fakes}/drain-budget)
export PATH SLURM_CONF OCIBENCH_HEALTH_STATE OCIBENCH_HISTORY_DB OCIBENCH_RUN_DIR OCIBENCH_PYTHON \\
  OCIBENCH_DRAIN_BUDGET
echo "--- $(date +%s.%N) {program} SLURMD_NODENAME=${{SLURMD_NODENAME:-unset}}" >>"$here/log"
exec {ocibench} healthcheck {options}--shape {shape} --root "$hw/root" --node "$node" \\
  >>"$here/log" 2>&1
"""


def remove_history(path: Path) -> None:
    """The history, its journal and its published snapshots, gone."""
    for file in (path, path.with_name(path.name + "-journal")):
        file.unlink(missing_ok=True)
    shutil.rmtree(current.directory(path), ignore_errors=True)


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
    remove_history(where / "history.sqlite")    # a leftover of a session killed midway
    (where / "drain-budget").write_text(ROOMY_BUDGET)
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
                       and "resume: ocibench: [HPCGPU-0008-0001] rdma mlx5_4:1" in log_of(fakes[flap_node]),
                       3 * INTERVAL_S + RUN_SLACK_S)
    log = log_of(fakes[flap_node])
    # the check that failed first in the reason, then what held
    assert f"{flap_node}: drain: ocibench: [HPCGPU-0008-0001] rdma mlx5_4:1 (link_downed rose from 0 to 3 " \
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
    assert f"{node}: would drain: ocibench: [HPCGPU-0001-0001] gpu_count (7x" in proc.stdout, text(proc)
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
        assert states[node][1].startswith("ocibench: [HPCGPU-0001-0001] gpu_count (7x"), states[node]
        # the GPUs back: the health loop resumes the prolog's drain
        shutil.rmtree(broken.where)
        _, took = wait_for(cluster, lambda s: s[node] == ("idle", "")
                           or s[node][0] in ("alloc", "mix"), 2 * INTERVAL_S + RUN_SLACK_S)
        print(f"prolog's drain resumed by the health check in {took:.0f} s")
    finally:
        cluster.head("scancel", job) if "job" in locals() else None
        shutil.rmtree(broken.where, ignore_errors=True)


def test_a_state_file_another_user_wrote_never_resumes_a_persons_drain(cluster, fakes,
                                                                      request):
    """A person drains a healthy node.  In a state directory anyone can write, the user
    `nobody` writes a state file that records that drain as the healthcheck's own (its
    exact reason: the record by which a run resumes its drains).  root's healthcheck on
    the node refuses the directory, takes nothing from it, and the person's drain stays.
    Without the fix it resumed the node (tests/test_root_owns.py has the rest)."""
    user, top = request.getfixturevalue("nobody"), request.getfixturevalue("shared")
    node = nodes()[-1]
    state_dir = top / "state"
    state_dir.mkdir()
    state_dir.chmod(0o777)
    path = state_dir / "healthcheck.json"
    as_nobody(user, "import sys; open(sys.argv[1], 'w').write(sys.argv[2])", str(path),
              _state_text(node, PERSON_REASON))
    proc = cluster.head("scontrol", "update", f"NodeName={node}", "State=DRAIN",
                        f"Reason={PERSON_REASON}")
    assert proc.returncode == 0, text(proc)
    try:
        proc = cluster.head(
            "env", f"PATH={fakes[node].bin}:/usr/sbin:/usr/bin:/sbin:/bin",
            f"OCIBENCH_PYTHON={sys.executable}", f"OCIBENCH_HEALTH_STATE={path}",
            f"OCIBENCH_RUN_DIR={top / 'run'}",
            paths.REPO_ROOT / "bin" / "ocibench", "healthcheck", "--shape", SHAPE,
            "--root", fakes[node].root, "--node", node)
        out = text(proc)
        assert node_states(cluster)[node] == ("drain", PERSON_REASON), out
        assert f"{state_dir}: directory writable by group and others" in proc.stdout, out
        assert f"{node}: resume" not in proc.stdout, out
    finally:
        cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")


# ------------------------------------------------------------------ the drain budget

def budget_of(fakes: dict[str, FakeNode], value: str) -> None:
    """Every node's $OCIBENCH_DRAIN_BUDGET from the next run on (the wrapper reads it)."""
    (CLUSTER_DIR / "health" / "drain-budget").write_text(value)


def ocibench_drains(states: dict[str, tuple[str, str]]) -> list[str]:
    """The nodes the drain budget counts: drained or draining with an ocibench: reason."""
    return sorted(n for n, (state, reason) in states.items()
                  if state.rstrip("*~#!%@^-$") in ("drain", "drng")
                  and reason.startswith("ocibench:"))


def settled(cluster, fakes, faulty: list[str], since: float, budget: int,
            timeout: float) -> tuple[list[str], int, float]:
    """Until exactly ``budget`` of ``faulty`` are drained by ocibench and every other
    one's last run (after ``since``) said "would drain (budget spent)": (the drained,
    the most ocibench drains Slurm listed meanwhile, seconds)."""
    began, most = time.monotonic(), 0
    while True:
        states = node_states(cluster)
        drained = ocibench_drains(states)
        most = max(most, len(drained))
        runs = {n: state_of(fakes[n]) for n in faulty if n not in drained}
        if len(drained) == budget and set(drained) <= set(faulty) and all(
                s and s["time"] > since and s["action"] == "would drain (budget spent)"
                for s in runs.values()):
            return drained, most, time.monotonic() - began
        if time.monotonic() - began > timeout:
            pytest.fail(f"not settled in {timeout}s: ocibench drains {drained}, "
                        f"runs {({n: s and (s['time'] > since, s['action']) for n, s in runs.items()})}")
        time.sleep(0.5)


def test_the_drain_budget_drains_exactly_its_worth_and_the_next_when_one_returns(
        cluster, fakes):
    """Five nodes lose a GPU at once, with a budget of 2: slurmd starts every node's
    health check together, each counts the same room, and still exactly 2 stay
    drained; the other 3 say "would drain (budget spent)" at every run.  One of the 2
    repaired, the health loop resumes it, and one of the 3 takes its place."""
    names = nodes()
    faulty = names[1:6]
    budget_of(fakes, "2")
    try:
        wait_for(cluster, lambda s: all(v == ("idle", "") for v in s.values()),
                 2 * INTERVAL_S + RUN_SLACK_S)
        for node in faulty:
            fakes[node].gpus(7)
        faulted = time.time()
        drained, most, took = settled(cluster, fakes, faulty, faulted, 2,
                                      3 * INTERVAL_S + RUN_SLACK_S)
        undone = [n for n in faulty if "drained, then resumed" in log_of(fakes[n])]
        print(f"5 faulty nodes, budget 2: {drained} drained in {took:.0f} s; at most "
              f"{most} ocibench drains listed meanwhile; drained into the same room and "
              f"undone: {undone}")
        spent = [n for n in faulty if n not in drained]
        for node in spent:
            log = log_of(fakes[node])
            # said by a run that counted the room spent (in the moment of a race it
            # may count drains about to be undone: "holds 4"), or by one that drained
            # into the same room as others and ranked beyond it ("drained, then resumed")
            assert re.search(r"would drain, drain budget spent: partition compute holds "
                             r"\d ocibench drain\(s\) of at most 2 of its 9 nodes \(budget "
                             r"2, \$OCIBENCH_DRAIN_BUDGET\)", log), log[-2000:]
        # a whole round later: still exactly 2, the others still spent
        again = time.time()
        runs_since(fakes, again, faulty, 2 * INTERVAL_S + RUN_SLACK_S)
        states = node_states(cluster)
        assert ocibench_drains(states) == drained, states
        assert all(state_of(fakes[n])["action"] == "would drain (budget spent)"
                   for n in spent), {n: state_of(fakes[n])["action"] for n in spent}

        # one drained node repaired: resumed by its own health check, then one of the
        # spent nodes is drained in its place, and the budget is full again
        back = drained[0]
        fakes[back].gpus(8)
        repaired = time.time()
        _, took = wait_for(cluster, lambda s: s[back] == ("idle", "")
                           and len(ocibench_drains(s)) == 2, 3 * INTERVAL_S + RUN_SLACK_S)
        states = node_states(cluster)
        newly = sorted(set(ocibench_drains(states)) - set(drained))
        print(f"{back} repaired: resumed, and {newly} drained in its place in {took:.0f} s")
        assert len(newly) == 1 and newly[0] in spent, states
        assert states[newly[0]][1].startswith("ocibench: [HPCGPU-0001-0001] gpu_count (7x"), states
        assert state_of(fakes[back])["time"] > repaired
    finally:
        for node in faulty:
            fakes[node].gpus(8)
        budget_of(fakes, ROOMY_BUDGET)
        wait_for(cluster, lambda s: not ocibench_drains(s), 2 * INTERVAL_S + RUN_SLACK_S)


def test_the_sweep_counts_the_healthchecks_drains(cluster, fakes, tmp_path):
    """Budget 3 for both: the health loop drains its 2 broken nodes; a sweep that wants
    3 more (their modules do not load; --force past its own 25 % cap) drains only 1,
    and reports the other 2 "budget spent"."""
    names = nodes()
    broken, swept = names[1:3], names[5:8]
    budget_of(fakes, "3")
    where = cluster.results / "sweep-budget"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    try:
        for node in broken:
            fakes[node].gpus(7)
        wait_for(cluster, lambda s: ocibench_drains(s) == broken, 2 * INTERVAL_S + RUN_SLACK_S)
        with modules_that_do_not_load(tmp_path):
            proc = cluster.head(
                "env", "OCIBENCH_DRAIN_BUDGET=3", sys.executable, "-m", "ocibench.cli",
                "sweep", "-n", "osu_latency%buffers=H-H%nodes=1", "--nodes",
                ",".join(swept), "--drain", "--force", "--no-history",
                "--json", where / "sweep.json", "--prefix", where / "reframe",
                "--state", where / "drained.json", timeout=600, cwd=where)
        out = text(proc)
        (where / "sweep.txt").write_text(out)
        result = json.loads((where / "sweep.json").read_text())
        drain = result["drain"]
        assert {r["action"] for r in result["nodes"].values()} == {"fix-software"}, out
        assert drain["budget"] == "3, $OCIBENCH_DRAIN_BUDGET", drain
        assert drain["drained"] == [swept[0]], drain
        assert sorted(drain["budget_spent"]) == swept[1:], drain
        for node in swept[1:]:
            why = drain["budget_spent"][node]
            assert why.startswith("drain budget spent: partition ") and "holds 3" in why, why
            assert f"{node}: would drain, drain budget spent" in proc.stdout, out
        assert proc.returncode == 1, out
        states = node_states(cluster)
        assert ocibench_drains(states) == sorted(broken + [swept[0]]), states
    finally:
        states = node_states(cluster)
        for node in swept:
            if states[node][0].startswith("drain"):
                cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")
        for node in broken:
            fakes[node].gpus(8)
        budget_of(fakes, ROOMY_BUDGET)
        wait_for(cluster, lambda s: not ocibench_drains(s), 2 * INTERVAL_S + RUN_SLACK_S)


XID_79 = "NVRM: Xid (PCI:0000:20:00): 79, pid=0, name=python, GPU has fallen off the bus."
XID_48 = "NVRM: Xid (PCI:0000:30:00): 48, pid=0, name=python, DBE (double-bit error)"


def test_an_xid_drain_lasts_until_a_person_resumes_the_node(cluster, fakes):
    """/dev/kmsg gives an Xid's record to every new reader (`dmesg --clear` changes
    nothing there: the fake's file is what a fresh reader gets).  The health loop
    drains the node for it and keeps it drained, round after round; a person's resume
    acknowledges the records the drain was judged on, and the node stays up (it was
    drained again at once before); a new Xid drains it again."""
    if NODES < 7:
        pytest.skip(f"needs a 7th node ({NODES}: OCIBENCH_CLUSTER_NODES)")
    node = nodes()[6]
    fake = fakes[node]
    base = ((1, "Linux version 6.8.0"), (2, "nvidia: loading"))
    try:
        fake.kernel_records(*base, (3, XID_79))
        states, took = wait_for(cluster, lambda s: s[node][0] == "drain"
                                and s[node][1].startswith("ocibench: [HPCGPU-0016-0001] xid (Xid 79"),
                                2 * INTERVAL_S + RUN_SLACK_S)
        print(f"{node} drained for its Xid in {took:.0f} s: {states[node][1]!r}")
        runs_since(fakes, time.time(), [node], 2 * INTERVAL_S + RUN_SLACK_S)
        assert node_states(cluster)[node][0] == "drain", node_states(cluster)
        proc = cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")
        assert proc.returncode == 0, text(proc)
        resumed = time.time()
        runs_since(fakes, resumed, [node], 2 * INTERVAL_S + RUN_SLACK_S)
        runs_since(fakes, time.time(), [node], 2 * INTERVAL_S + RUN_SLACK_S)
        assert node_states(cluster)[node] == ("idle", ""), node_states(cluster)
        written = state_of(fake)
        assert written and written["kernel_seq_passed"] == 3, written
        log = log_of(fake)
        assert log.count(f"{node}: drain: ocibench: [HPCGPU-0016-0001] xid") == 1, log[-3000:]
        # a new Xid: drained again, for it alone
        fake.kernel_records(*base, (3, XID_79), (4, XID_48))
        states, _ = wait_for(cluster, lambda s: s[node][0] == "drain"
                             and s[node][1].startswith("ocibench: [HPCGPU-0016-0001] xid (Xid 48"),
                             2 * INTERVAL_S + RUN_SLACK_S)
        assert "Xid 79" not in states[node][1], states[node]
    finally:
        # acknowledged by the resume; the log as a fresh boot's
        cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")
        fake.kernel_log()


#: A GID OCI's images never give (an IPv6 address's RoCE GID), at an index beyond OCI's
#: 0-3 (its node doctor's gid_index_check threshold [0, 1, 2, 3]; ocibench.node.rdma).
GID_BEYOND = "fd00:0000:0000:0000:0a00:01ff:fe00:0001"


def test_a_gid_index_out_of_range_drains_the_node_with_its_fault_code(cluster, fakes):
    """One node's cluster-network port (mlx5_0:1, the shape's network.rdma_nics) holds
    a GID at index 4, beyond OCI's 0-3: slurmd's health loop drains that node alone,
    and Slurm's reason (sinfo -R, scontrol show node) leads with the rdma entry's
    fault code on the action ladder (its rdma:gid entry: OCI's gid_index_check,
    HPCGPU-0005-0001).  BM.GPU4.8 declares no node_doctor.rdma_settings,
    so its MTU is not judged here (tests/test_node_doctor.py's H100 node is).  Seen
    failing without the codes: the reason was 'ocibench: rdma mlx5_0:1 (...'."""
    if NODES < 8:
        pytest.skip(f"needs an 8th node ({NODES}: OCIBENCH_CLUSTER_NODES)")
    node, port = nodes()[7], "mlx5_0:1"
    fake = fakes[node]
    healthy_gids = dict(fake.ports[port].gids)
    want = "ocibench: [HPCGPU-0005-0001] rdma mlx5_0:1 (gid: "
    try:
        fake.port(port, gids={**healthy_gids, 4: GID_BEYOND})
        states, took = wait_for(cluster, lambda s: s[node][0] == "drain"
                                and s[node][1].startswith(want),
                                2 * INTERVAL_S + RUN_SLACK_S)
        print(f"{node} drained for its GID index in {took:.0f} s: {states[node][1]!r}")
        # the ladder's code is its finer rdma:gid entry's (OCI's gid_index_check), which
        # the port's evidence names too
        assert "GIDs beyond OCI's indexes 0-3: 4 (fd00:" in states[node][1] \
            and "HPCGPU-0005-0001" in states[node][1], states[node]
        assert ocibench_drains(states) == [node], states
        shown = cluster.head("scontrol", "show", "node", node)
        assert f"Reason={want}" in shown.stdout, text(shown)
        listed = cluster.head("sinfo", "-R", "-h", "-n", node, "-o", "%50E")
        assert listed.stdout.strip().startswith(want), text(listed)
    finally:
        # repaired, and resumed as a person would (the health loop's own resume of a
        # drain with a coded reason is the first test's); idle for the tests after
        fake.port(port, gids=healthy_gids)
        cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")
        wait_for(cluster, lambda s: s[node] == ("idle", ""), 2 * INTERVAL_S + RUN_SLACK_S)


# ------------------------------------------------------------ Slurm not answering

def test_a_hung_scontrol_ends_the_run_within_its_slurm_time(cluster, fakes, tmp_path):
    """A node whose GPUs went missing, and an `scontrol` that never answers (first on
    PATH; Slurm's own sinfo answers): the drain is killed once the run's Slurm time
    is spent (--deadline 2, --slurm-time 6: 8 s from the start), the run re-counts the
    budget to see whether the drain was made, drains nothing, and its state says why.
    Seen failing without the fix: the drain waited its own 10 s timeout (the command
    took 10.6 s), and the state recorded a drain Slurm never made, saying nothing of
    Slurm."""
    node = nodes()[0]
    broken = FakeNode(tmp_path / "fake")
    broken.gpus(7)
    hung = tmp_path / "hung"
    hung.mkdir()
    (hung / "scontrol").write_text("#!/bin/sh\nexec sleep 60\n")
    (hung / "scontrol").chmod(0o755)
    path = tmp_path / "state.json"
    began = time.monotonic()
    proc = cluster.head(
        "env", f"PATH={hung}:{broken.bin}:/usr/sbin:/usr/bin:/sbin:/bin",
        f"OCIBENCH_PYTHON={sys.executable}", f"OCIBENCH_HEALTH_STATE={path}",
        f"OCIBENCH_HISTORY_DB={tmp_path / 'no-history.sqlite'}",
        f"OCIBENCH_DRAIN_BUDGET={ROOMY_BUDGET}",
        paths.REPO_ROOT / "bin" / "ocibench", "healthcheck", "--shape", SHAPE,
        "--root", broken.root, "--node", node, "--deadline", "2", "--slurm-time", "6")
    took = time.monotonic() - began
    out = text(proc)
    print(f"a hung scontrol: the run took {took:.1f} s with Python's start")
    assert proc.returncode == 1, out
    written = json.loads(path.read_text())
    assert written["action"] == "none" and written["drained_reason"] == "", (written, out)
    assert written["duration_s"] < 2 + 6 + 0.5, (written["duration_s"], out)
    error = written["slurm_error"]
    assert f"scontrol update NodeName={node} State=DRAIN" in error, error
    assert "Slurm did not answer within" in error and error.endswith("not drained"), error
    assert "Slurm did not answer within" in proc.stdout, out
    assert node_states(cluster)[node] == ("idle", ""), node_states(cluster)


# --------------------------------------------------------- a fleet-wide driver update

OLD_DRIVER, NEW_DRIVER = "550.127.08", "560.35.03"
#: Sessions on the old driver (drift needs 15 for a baseline, and 3 recent), then on
#: the new one.
BEFORE, AFTER = 20, 3


def fleet_records(names: list[str], faulty: str, now: float) -> list[list[Record]]:
    """Each session's records: one osu_bw figure near 390 GB/s on every node (+-0.5 %
    by node and session); from session BEFORE + 1 on, every node on the new driver and
    10 % lower; ``faulty`` 30 % lower again in the last 2 sessions (its own fault).
    The newest session is stamped ``now``, each older one a minute before."""
    sessions = []
    total = BEFORE + AFTER
    for sweep in range(1, total + 1):
        records = []
        for index, node in enumerate(names):
            value = 390.0 * (1 + 0.005 * (((index * 7 + sweep * 3) % 5) - 2) / 2)
            driver = OLD_DRIVER
            if sweep > BEFORE:
                value, driver = value * 0.90, NEW_DRIVER
            if node == faulty and sweep > total - 2:
                value *= 0.70
            records.append(Record(
                node=node, check="osu_bw", variant="buffers=D-D nodes=2", size=268435456,
                figure="bandwidth", value=value, unit="GB/s", verdict="pass",
                time=now - 60.0 * (total - sweep), session=f"sweep-{sweep}",
                image="OL8", driver=driver))
        sessions.append(records)
    return sessions


def test_a_driver_update_moving_every_node_drains_only_the_broken_one(cluster, fakes):
    """The history of the cluster's sweeps (the real writer, ocibench.history.store):
    at a driver update every node's figure moved 10 % down (the new sessions recorded
    with the new driver), and one node, besides, fell 30 % behind its peers in 2 of
    the last 3 sessions.  Published as an admin does (`ocibench history publish` on
    the head node), slurmd's health loop drains that node alone, for its drift; every
    other node is judged (history and drift pass) and left up, and the move is one
    cluster event.  Seen failing with the fleet-aware rule disabled (each node's
    residual against its own past level, not its session's peers): every node was
    flagged, and the health loop drained all 9."""
    names = nodes()
    faulty = names[0]
    db = CLUSTER_DIR / "health" / "history.sqlite"
    try:
        with History(db) as history:
            for records in fleet_records(names, faulty, time.time()):
                history.add(records)
        proc = cluster.head("env", f"OCIBENCH_PYTHON={sys.executable}",
                            paths.REPO_ROOT / "bin" / "ocibench", "history", "publish",
                            "--db", db)
        assert proc.returncode == 0, text(proc)
        assert f"{len(names)} node snapshot(s) published" in proc.stdout, text(proc)
        published = time.time()

        # the move every node made is one event of the fleet, with the driver's name
        with History(db, readonly=True) as history:
            events = drift.cluster_events(history)
        assert len(events) == 1, [e.text for e in events]
        (event,) = events
        assert event.worse and event.shift == pytest.approx(-0.10, abs=0.01), event.text
        assert (event.moved, event.measured) == (len(names), len(names)), event.text
        assert f"with driver {NEW_DRIVER} (was {OLD_DRIVER})" in event.text, event.text
        print(f"cluster event: {event.text}")

        states, took = wait_for(cluster, lambda s: s[faulty][0] == "drain"
                                and s[faulty][1].startswith("ocibench: [OCIBENCH-FIG-0099] drift"),
                                2 * INTERVAL_S + RUN_SLACK_S)
        print(f"{faulty} drained for its drift in {took:.0f} s: {states[faulty][1]!r}")
        runs = runs_since(fakes, published, names, 2 * INTERVAL_S + RUN_SLACK_S)
        states = node_states(cluster)
        assert ocibench_drains(states) == [faulty], states
        for node in names[1:]:
            judged = {p["name"]: (p["state"], p["evidence"]) for p in runs[node]["probes"]}
            assert judged["history"][0] == "pass", (node, judged["history"])
            assert judged["drift"][0] == "pass", (node, judged["drift"])
            assert f"no figure of {node} drifting" in judged["drift"][1], judged["drift"]
            assert runs[node]["action"] == "none", (node, runs[node]["action"])
            assert current.read(db, node).drifting == (), node
        (flag,) = current.read(db, faulty).drifting
        assert flag.persists and "below its peers' median" in flag.reason, flag
    finally:
        remove_history(db)
        if node_states(cluster)[faulty][0].startswith("drain"):
            cluster.head("scontrol", "update", f"NodeName={faulty}", "State=RESUME")
