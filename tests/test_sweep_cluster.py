"""`ocibench sweep` on a real Slurm cluster with injected faults (issue 13).

The loopback cluster (9 nodes, tests/cluster_support.py, docs/cluster.md) runs the
real sweep: real Slurm, ReFrame and Lmod, the checks of checks/.  scripts/cluster/fault.sh
breaks three nodes as a cluster's nodes break:

* SLOW: its link slowed (tc on both ends of its veth: docs/cluster.md);
* BROKEN: its module tree hidden by an empty directory, so `module load` fails there;
* DOWN: its slurmd stopped, until Slurm marks it down ("Not responding").

The sweep must name exactly those three, with the actions of docs/sweep.md (a missed
figure: drain; a module that does not load: fix-software; down: unreachable, Slurm's
reason), drain the first two with --drain and nothing else, and --undrain them once
the faults are gone, never touching a node drained for another reason.  A wrong
reference that fails every node must not drain beyond the cap.

The loopback shape documents no figures, so the test sweeps a copy of site/shapes whose
loopback-cluster.yaml carries the figures of tests/data/sweep_cluster/figures.yaml:
this cluster's own calibrated floor (a slowed link fails it), or an impossible figure.
The sweep runs osu_latency only (the 1- and 2-node variants): the 256 MiB bandwidth
runs and the 4-node collectives would take minutes per wave on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cluster_support import (
    NODES,
    SCRIPTS,
    SHAPE,
    local_tree_problem,
    modules_that_do_not_load,
    results_dir,
    run,
    started_cluster,
    text,
)
from ocibench import paths, shapes

pytestmark = pytest.mark.cluster

FIGURES = paths.REPO_ROOT / "tests" / "data" / "sweep_cluster" / "figures.yaml"

#: The faulty nodes, chosen so that no healthy node is the ring neighbour of two of
#: them (its two pairs would both fail): the ring of the 8 reachable nodes of 9 is
#: 1-2-3-4-5-6-8-9-1.
SLOW, BROKEN, DOWN = "node2", "node5", "node7"
#: Drained by an admin for a reason of their own before the re-sweep.
OTHER = "node8"
OTHER_REASON = "maintenance: BIOS update by the site admin"
#: The rate fault.sh gives SLOW's link: 2-node osu_latency at 1 byte about 2000 us
#: against the calibrated floor of 1400 us (tests/data/sweep_cluster/figures.yaml).
#: Slower is safer and longer: the seed's 11,000 round trips would take 44 s at 2000 us
#: (ITERATIONS: 2,000 round trips, 8 s).
SLOW_RATE = "160kbit"
#: No added delay, so that a kernel with netem (rate and delay) and one with tbf alone
#: (rate only; this project's test machine) slow the link alike.
SLOW_DELAY = "0ms"

#: What the sweeps run (ReFrame -n): osu_latency's 1- and 2-node variants.
LATENCY = "osu_latency%buffers=H-H"
LATENCY_ONE_NODE = "osu_latency%buffers=H-H%nodes=1"
#: The sweeps' `-S`: osu_latency with 1,000 warm-up and 1,000 measured round trips (the
#: seed's 1,000 and 10,000 spin 2 ranks per slowed pair for 44 s, on the 2 cores every
#: node shares); the size judged is the seed's 1 byte.
ITERATIONS = "osu_latency.iterations=1000"
#: Identical virtual nodes sharing 2 cores differ by up to 20x from run to run (1-node
#: osu_latency 0.21 us on six nodes and 3.93 us on the seventh of one wave; 2-node
#: 41-1002 us, figures.yaml): every outlier rule names healthy nodes here (K = 100 did).
#: The figures judge speed in this test; K = 1e6 switches outliers off.
OUTLIER_K = "1e6"
#: Seconds for one sweep: the slowed pairs take about a minute per wave.
SWEEP_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """The cluster, up for this module (whether or not the nodes can load the
    benchmarks: the Slurm actions' tests need no benchmark)."""
    if NODES < 8:
        pytest.skip(f"the fault sweep needs 8 nodes (OCIBENCH_CLUSTER_NODES={NODES})")
    with started_cluster(results_dir(tmp_path_factory, "sweep")) as up:
        yield up


@pytest.fixture
def cluster(running):
    why = local_tree_problem()
    if why:
        pytest.skip(f"the sweep runs the benchmarks through the local Lmod tree: {why}")
    return running


def shapes_with(tmp_path: Path, which: str) -> Path:
    """A copy of site/shapes whose loopback-cluster.yaml has the figures ``which``
    of figures.yaml, validated like every shape file."""
    dest = tmp_path / f"shapes-{which}"
    shutil.copytree(shapes.SHAPES_DIR, dest)
    path = dest / f"{SHAPE}.yaml"
    data = yaml.safe_load(path.read_text())
    data["figures"] = yaml.safe_load(FIGURES.read_text())[which]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    shapes.load_file(path)
    return dest


#: ocibench's drain budget for these sweeps (docs/sweep.md): above the 2 nodes a sweep
#: here drains and the person's `ocibench:` drain, which counts; the budget's own test
#: is tests/test_healthcheck_cluster.py's.
DRAIN_BUDGET = "4"


def sweep_argv(cluster, where: Path, shapes_dir: Path, checks: str, *options,
               env: tuple = ()) -> list:
    """`ocibench sweep` on the head node, its files in ``where``; every sweep of the
    module shares one record of drains (--state), as an admin's sweeps do."""
    return ["env", f"OCIBENCH_SHAPES_DIR={shapes_dir}",
            f"OCIBENCH_DRAIN_BUDGET={DRAIN_BUDGET}", *env,
            sys.executable, "-m", "ocibench.cli", "sweep", "-n", checks, "-S", ITERATIONS,
            "--outlier-k", OUTLIER_K, "--json", where / "sweep.json",
            "--html", where / "sweep.html", "--prefix", where / "reframe",
            "--state", cluster.results / "drained.json", *options]


def sweep(cluster, name: str, shapes_dir: Path, checks: str, *options: str, env=()):
    """`ocibench sweep` on the head node; (process, its JSON)."""
    where = cluster.results / name
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    out = where / "sweep.json"
    proc = cluster.head(*sweep_argv(cluster, where, shapes_dir, checks, *options, env=env),
                        timeout=SWEEP_TIMEOUT_S, cwd=where)
    assert out.is_file(), f"the sweep wrote no JSON:\n{text(proc)[-4000:]}"
    (where / "sweep.txt").write_text(text(proc))
    return proc, json.loads(out.read_text())


def not_passing(result: dict) -> dict[str, dict]:
    return {n: r for n, r in result["nodes"].items() if r["verdict"] != "pass"}


def test_wrong_reference_drains_nothing_beyond_the_cap(cluster, tmp_path):
    """A documented figure no node can meet fails every node; --drain then drains no
    more than 25 % of them (here: none, saying why in one line)."""
    wrong = shapes_with(tmp_path, "wrong_reference")
    try:
        check_cap_holds(cluster, wrong)
    finally:   # what a broken cap drained goes back, so that the next test starts clean
        for node, (state, reason) in cluster.node_states().items():
            if state.startswith("drain") and reason.startswith("ocibench:"):
                cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")
        cluster.wait_idle()


def check_cap_holds(cluster, wrong: Path) -> None:
    proc, result = sweep(cluster, "wrong-reference", wrong, LATENCY_ONE_NODE, "--drain")
    out = text(proc)
    assert proc.returncode == 1, out
    nodes = result["nodes"]
    assert len(nodes) == NODES, out
    assert {r["verdict"] for r in nodes.values()} == {"fail"}, out
    assert {r["action"] for r in nodes.values()} == {"drain"}, out
    drain = result["drain"]
    assert drain["cap"] == NODES // 4, drain
    assert len(drain["drained"]) <= drain["cap"], drain
    assert drain["refused"], drain
    refusals = [line for line in proc.stderr.splitlines() if "refus" in line]
    assert refusals == [f"ocibench sweep: {drain['refused']}"], proc.stderr
    states = cluster.node_states()
    drained = sorted(n for n, (state, _) in states.items() if state.startswith("drain"))
    assert drained == sorted(drain["drained"]), states
    assert len(drained) <= NODES // 4, states


def test_faulty_nodes_named_drained_and_returned(cluster, tmp_path):
    calibrated = shapes_with(tmp_path, "calibration")
    try:
        # DOWN first: Slurm needs SlurmdTimeout (20 s) and a ping to mark it down.
        cluster.fault("down", DOWN, "--wait", timeout=180)
        cluster.fault("slow-link", SLOW, SLOW_RATE, SLOW_DELAY)
        cluster.fault("broken-modules", BROKEN)
        listed = cluster.fault("list").stdout
        assert {line.split()[0] for line in listed.splitlines()} == {SLOW, BROKEN, DOWN}

        proc, result = sweep(cluster, "faults", calibrated, LATENCY, "--drain")
        out = text(proc)
        assert proc.returncode == 1, out
        assert result["setvars"] == [ITERATIONS], result["setvars"]
        bad = not_passing(result)
        assert set(bad) == {SLOW, BROKEN, DOWN}, out

        slow = bad[SLOW]
        assert (slow["verdict"], slow["action"]) == ("fail", "drain"), slow
        assert "osu_latency %buffers=H-H %nodes=2" in slow["reason"], slow
        assert "latency at size 1" in slow["reason"] and "1400" in slow["reason"], slow
        broken = bad[BROKEN]
        assert (broken["verdict"], broken["action"]) == ("fail", "fix-software"), broken
        assert "module(s) are unknown" in broken["reason"], broken
        down = bad[DOWN]
        assert (down["verdict"], down["action"]) == ("unreachable", None), down
        assert "Not responding" in down["reason"], down

        # Drained: the first two only, with the reasons the JSON gives.
        assert sorted(result["drain"]["drained"]) == sorted([SLOW, BROKEN]), result["drain"]
        states = cluster.node_states()
        for node in (SLOW, BROKEN):
            state, reason = states[node]
            assert state == "drain" and reason.startswith("ocibench: "), (node, states[node])
            assert reason == bad[node]["drain_reason"], (node, reason, bad[node])
        assert states[DOWN][0].startswith("down") and states[DOWN][1] == "Not responding"
        others = {n: s for n, s in states.items() if n not in (SLOW, BROKEN, DOWN)}
        assert {s for s, _ in others.values()} == {"idle"}, states

        # The faults go; an admin drains OTHER for a reason of their own; the re-sweep
        # passes and returns SLOW and BROKEN to service, and OTHER stays as it was.
        cluster.fault("clear", "all", timeout=180)
        assert cluster.fault("list").stdout.strip() == ""
        drained = cluster.head("scontrol", "update", f"NodeName={OTHER}", "State=DRAIN",
                               f"Reason={OTHER_REASON}")
        assert drained.returncode == 0, text(drained)
        proc, result = sweep(cluster, "undrain", calibrated, LATENCY, "--undrain")
        out = text(proc)
        bad = not_passing(result)
        assert set(bad) == {OTHER} and bad[OTHER]["verdict"] == "unreachable", out
        assert OTHER_REASON in bad[OTHER]["reason"], bad[OTHER]
        assert proc.returncode == 1, out   # OTHER is unreachable
        assert sorted(result["drain"]["undrained"]) == sorted([SLOW, BROKEN]), result["drain"]
        assert result["drain"]["drained"] == [], result["drain"]
        states = cluster.node_states()
        assert states[OTHER] == ("drain", OTHER_REASON), states
        others = {n: s for n, s in states.items() if n != OTHER}
        assert {s for s, _ in others.values()} == {"idle"}, states
        reservations = cluster.head("scontrol", "show", "reservation").stdout
        assert "ocibench" not in reservations, reservations
    finally:
        cluster.fault("clear", "all", timeout=180)
        states = cluster.node_states()
        for node in (SLOW, BROKEN, OTHER):
            if states.get(node, ("",))[0].startswith("drain"):
                cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")
        cluster.wait_idle()


def test_fault_bad_input_is_one_line(cluster):
    """fault.sh refuses a node, rate or delay it cannot apply, in one line, and
    changes nothing."""
    before = cluster.wait_idle()
    for argv, words in ((["slow-link", f"node{NODES + 1}"], "no node"),
                        (["down", "node01"], "no node"),
                        (["slow-link", "node1", "fast"], "rate 'fast'"),
                        (["slow-link", "node1", "1mbit", "soon"], "delay 'soon'")):
        proc = run(["bash", SCRIPTS / "fault.sh", *argv], 30)
        assert proc.returncode != 0, (argv, text(proc))
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "cluster: error:" in lines[0] and words in lines[0], \
            (argv, proc.stderr)
    assert cluster.fault("list").stdout.strip() == ""
    assert cluster.node_states() == before


# ------------------------------------------------------------------ Slurm actions (issue 21)

#: A person's drain whose reason merely starts with the sweep's prefix: never ours.
TYPED = "node8"
TYPED_REASON = "ocibench: drained by hand, ticket 42"


def test_a_sweep_that_runs_nothing_is_unjudged_and_exits_3(running):
    """`--nodes node5` with only the 2-node osu_latency, and 3 nodes with only the
    4-node collective, plan no job: each node is unjudged, saying why, exit 3 (it was
    "pass: no check ran on this node", exit 0)."""
    for name, nodes, checks, needs in (
            ("nothing-1", "node5", "osu_latency%buffers=H-H%nodes=2", "needs 2 nodes"),
            ("nothing-3", "node[1-3]", "osu_allreduce", "needs 4 nodes")):
        proc, result = sweep(running, name, shapes.SHAPES_DIR, checks, "--nodes", nodes)
        out = text(proc)
        assert proc.returncode == 3, out
        assert result["plan"]["jobs"] == 0, result["plan"]
        assert {r["verdict"] for r in result["nodes"].values()} == {"unjudged"}, out
        for node in result["nodes"].values():
            assert node["reason"].startswith("no check ran on this node") and \
                needs in node["reason"] and node["action"] == "rerun", node
        assert (running.results / name / "sweep.html").is_file()


def scontrol_failing_drain(where: Path, nth: int) -> Path:
    """A directory whose `scontrol` fails the ``nth`` drain (an input fault, as a
    controller that stops answering) and hands every other call to Slurm's own."""
    real = shutil.which("scontrol")
    assert real, "no scontrol"
    where.mkdir(parents=True, exist_ok=True)
    wrapper = where / "scontrol"
    wrapper.write_text(f"""#!/bin/bash
if [[ " $* " == *" State=DRAIN "* ]]; then
  count=$(( $(cat '{where}/drains' 2>/dev/null || echo 0) + 1 ))
  echo "$count" > '{where}/drains'
  if (( count == {nth} )); then
    echo "scontrol: error: Unable to contact slurm controller (injected, drain $count)" >&2
    exit 1
  fi
fi
exec '{real}' "$@"
""")
    wrapper.chmod(0o755)
    return where


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop(0))
        todo += children.get(found[-1], [])
    return found


def the_sweep_process(pid: int) -> int:
    """The Python running `ocibench sweep` below ``pid``: the deepest process with it on
    its command line (the shells of exec.sh above it have it too)."""
    found = []
    for candidate in descendants(pid):
        try:
            argv = Path(f"/proc/{candidate}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"ocibench.cli" in argv and b"sweep" in argv:
            found.append(candidate)
    assert found, f"no ocibench sweep under process {pid}"
    return found[-1]


def slow_sbatch(where: Path, seconds: int) -> Path:
    """A directory whose `sbatch` waits ``seconds`` before Slurm's own: the sweep is
    then surely between resuming its nodes and deciding them when the test signals."""
    real = shutil.which("sbatch")
    assert real, "no sbatch"
    where.mkdir(parents=True, exist_ok=True)
    (where / "sbatch").write_text(f"#!/bin/bash\nsleep {seconds}\nexec '{real}' \"$@\"\n")
    (where / "sbatch").chmod(0o755)
    return where


def stop_undrain_with(cluster, tmp_path, signum: int, node: str, old_reason: str) -> dict:
    """`--undrain` of ``node`` (and TYPED), stopped by ``signum`` once ``node`` is back
    in service inside the sweep's reservation; the sweep's JSON."""
    where = cluster.results / f"undrain-{signal.Signals(signum).name}"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    slow = slow_sbatch(tmp_path / "slow-bin", 15)
    argv = ["bash", SCRIPTS / "exec.sh", *sweep_argv(
        cluster, where, shapes.SHAPES_DIR, LATENCY_ONE_NODE, "--undrain", "--nodes",
        f"{node},{TYPED}", env=(f"PATH={slow}:{os.environ['PATH']}",))]
    proc = subprocess.Popen([str(a) for a in argv], cwd=where, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            reserved = "ocibench-sweep" in cluster.head("scontrol", "show",
                                                        "reservation").stdout
            if reserved and not cluster.node_states()[node][0].startswith("drain"):
                break
            assert time.monotonic() < deadline, cluster.node_states()
            time.sleep(0.5)
        os.kill(the_sweep_process(proc.pid), signum)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, out
    assert f"stopped by {signal.Signals(signum).name}" in out, out
    states = cluster.node_states()
    # drained again, as it was.  sinfo's "*" says slurmd has not answered slurmctld's
    # ping since the resume (node1 was back in service for a few seconds): Slurm's flag
    # of the moment, not what the sweep did
    state, said = states[node]
    assert (state.rstrip("*"), said) == ("drain", old_reason), (states, out)
    assert states[TYPED] == ("drain", TYPED_REASON), states         # never touched
    reservations = cluster.head("scontrol", "show", "reservation").stdout
    assert "ocibench" not in reservations, reservations
    result = json.loads((where / "sweep.json").read_text())
    assert (where / "sweep.html").is_file()
    assert result["stopped"] == f"stopped by {signal.Signals(signum).name}", result
    assert "not drained by a sweep" in result["nodes"][TYPED]["reason"], result["nodes"]
    return result


def test_slurm_actions_are_all_or_nothing_or_recorded(running, tmp_path):
    """Issue 21: a drain that fails midway, SIGTERM and SIGHUP during --undrain, and a
    person's drain whose reason starts with `ocibench:`."""
    cluster = running
    record = cluster.results / "drained.json"
    record.unlink(missing_ok=True)
    try:
        typed = cluster.head("scontrol", "update", f"NodeName={TYPED}", "State=DRAIN",
                             f"Reason={TYPED_REASON}")
        assert typed.returncode == 0, text(typed)
        # Three nodes whose modules do not load: each asks for a drain; scontrol fails
        # on the second.  The first stays drained and recorded; the files are written.
        wrapper = scontrol_failing_drain(tmp_path / "bin", 2)
        with modules_that_do_not_load(tmp_path):
            proc, result = sweep(cluster, "failed-drain", shapes.SHAPES_DIR, LATENCY_ONE_NODE,
                                 "--nodes", "node[1-3]", "--drain", "--force",
                                 env=(f"PATH={wrapper}:{os.environ['PATH']}",))
        out = text(proc)
        assert proc.returncode == 2, out
        assert (cluster.results / "failed-drain" / "sweep.html").is_file()
        assert {r["action"] for r in result["nodes"].values()} == {"fix-software"}, out
        drain = result["drain"]
        assert drain["drained"] == ["node1"], drain
        assert "injected, drain 2" in drain["not_drained"]["node2"], drain
        assert drain["not_drained"]["node3"] == "not tried: the drain of node2 failed", drain
        assert any("injected, drain 2" in e for e in result["errors"]), result["errors"]
        assert "ocibench sweep: scontrol update NodeName=node2" in proc.stderr, proc.stderr
        reason = result["nodes"]["node1"]["drain_reason"]
        states = cluster.node_states()
        assert states["node1"] == ("drain", reason), states
        assert states["node2"][0] == states["node3"][0] == "idle", states
        assert json.loads(record.read_text())["nodes"]["node1"]["reason"] == reason

        # --undrain stopped by SIGTERM, then by SIGHUP, as Ctrl-C is: node1 drained again
        # with its reason, the reservation gone, TYPED left alone.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            stop_undrain_with(cluster, tmp_path, signum, "node1", reason)
    finally:
        states = cluster.node_states()
        for node in ("node1", "node2", "node3", TYPED):
            if states.get(node, ("",))[0].startswith("drain"):
                cluster.head("scontrol", "update", f"NodeName={node}", "State=RESUME")
        for line in cluster.head("scontrol", "show", "reservation").stdout.split():
            if line.startswith("ReservationName=ocibench"):
                cluster.head("scontrol", "delete", line)
        record.unlink(missing_ok=True)
        cluster.wait_idle()
