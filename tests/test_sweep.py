"""ocibench sweep: the plan's properties, verdicts, outliers, pair attribution, actions,
the drain cap and the outputs (pure and fast); the command line with Slurm's real
``scontrol`` (hostlists) and ReFrame's real --dry-run.

The Slurm path itself (sbatch, drain, resume on a real cluster) is tested end to end by
tests/test_cluster.py on the cluster of network namespaces.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ocibench import paths, shapes
from ocibench.cluster.reason import MAX_REASON
from ocibench.figures import judge, references
from ocibench.metrics import Action, NodeVerdict
from ocibench.pages import output as pages_output
from ocibench.sweep import actions, output, plan, verdicts
from ocibench.sweep import run as sweeping
from ocibench.sweep.plan import GROUPS, PAIRS, RETEST, SINGLE, Case
from ocibench.sweep.verdicts import JobResult

SINGLE_CASE = Case("osu_latency %buffers=H-H %nodes=1", "/a", "osu_latency", 1)
PAIR_CASE = Case("osu_latency %buffers=H-H %nodes=2", "/b", "osu_latency", 2)
GROUP_CASE = Case("osu_allreduce", "/c", "osu_allreduce", 4)
CASES = (SINGLE_CASE, PAIR_CASE, GROUP_CASE)


def names(count: int) -> list[str]:
    return [f"node{i}" for i in range(1, count + 1)]


# --------------------------------------------------------------------------- plan

@pytest.mark.parametrize("count", range(3, 41))
def test_ring_puts_every_node_in_two_pairs_with_two_partners(count):
    pairs = plan.ring_pairs(names(count))
    assert len(pairs) == count
    for node in names(count):
        mine = [p for p in pairs if node in p]
        assert len(mine) == 2, node
        partners = {n for p in mine for n in p if n != node}
        assert len(partners) == 2, node


def test_two_nodes_make_one_pair_and_one_node_none():
    assert plan.ring_pairs(["a", "b"]) == [("a", "b")]
    assert plan.ring_pairs(["a"]) == []
    one = plan.make_plan(["a"], CASES)
    assert set(one.not_run) == {PAIR_CASE.name, GROUP_CASE.name}
    assert "needs 2 nodes; 1 swept" in one.not_run[PAIR_CASE.name]


@pytest.mark.parametrize("count", list(range(1, 34)) + [999, 1000])
def test_no_node_in_two_jobs_of_a_wave_and_waves_do_not_grow(count):
    the_plan = plan.make_plan(names(count), CASES)
    for wave in the_plan.waves:
        seen = [n for group in wave.groups for n in group]
        assert len(seen) == len(set(seen)), wave
        assert all(len(g) == wave.size for g in wave.groups)
    pair_waves = [w for w in the_plan.waves if w.kind == PAIRS]
    if count >= 3:
        assert len(pair_waves) == (2 if count % 2 == 0 else 3)
        # every ring pair runs, once
        assert sorted(g for w in pair_waves for g in w.groups) == sorted(the_plan.pairs)
    assert len(the_plan.waves) <= 1 + 3 + 2


@pytest.mark.parametrize("count", [4, 5, 7, 8, 9, 10, 11])
def test_groups_of_four_take_every_node_and_top_up_the_leftover(count):
    the_plan = plan.make_plan(names(count), [GROUP_CASE])
    groups = the_plan.groups[4]
    assert {n for g in groups for n in g} == set(names(count))
    assert all(len(set(g)) == 4 for g in groups)
    leftover = count % 4
    assert len(the_plan.leftover[4]) == leftover
    assert len([w for w in the_plan.waves if w.kind == GROUPS]) == (2 if leftover else 1)


def test_jobs_are_groups_times_cases():
    the_plan = plan.make_plan(names(8), CASES)
    assert the_plan.jobs == 8 + 8 + 2
    assert plan.make_plan(names(7), CASES).jobs == 7 + 7 + 2


def test_a_node_listed_twice_is_an_error():
    with pytest.raises(plan.PlanError, match="node2 is listed twice"):
        plan.make_plan(["node1", "node2", "node2"], CASES)


def test_plan_of_1000_names_is_fast():
    started = time.perf_counter()
    the_plan = plan.make_plan(names(1000), CASES)
    text = plan.describe(the_plan)
    json.dumps(the_plan.to_dict())
    assert time.perf_counter() - started < 0.5
    assert the_plan.jobs == 1000 + 1000 + 250
    assert "pairs (1000, ring)" in text


def test_retest_partners_are_third_nodes_and_fit_in_disjoint_waves():
    ring = plan.ring_pairs(names(10))
    alone = [("node3", "node4"), ("node7", "node8")]
    pairs, stuck = plan.retest_pairs(alone, ring, suspects={"node3", "node4", "node7", "node8"})
    assert not stuck
    assert {p[0] for p in pairs} == {"node3", "node4", "node7", "node8"}
    near = plan.neighbours(ring)
    for node, partner in pairs:
        assert partner not in near[node] and partner not in {"node3", "node4", "node7", "node8"}
    assert len({p[1] for p in pairs}) == 4        # spread: no partner used twice
    for wave in plan.waves_of(pairs):
        seen = [n for g in wave for n in g]
        assert len(seen) == len(set(seen))


def test_a_ring_of_three_has_no_third_partner():
    ring = plan.ring_pairs(["a", "b", "c"])
    pairs, stuck = plan.retest_pairs([("a", "b")], ring)
    assert pairs == [] and stuck == ["a", "b"]


# --------------------------------------------------------------------------- verdicts

@pytest.fixture(scope="module")
def local():
    return shapes.load("local")


@pytest.fixture(scope="module")
def optimized():
    return shapes.load("BM.Optimized3.36")


def latency_row(shape, value, check="osu_latency", nodes=2):
    figures = references.matching(shape, check, {"buffers": "H-H", "nodes": nodes,
                                                 "sizes": "1:1"})
    return judge.judge(shape, figures, "latency", 1, value, "us")


def pair_jobs(shape, values, case=PAIR_CASE, kind=PAIRS):
    ring = plan.ring_pairs(names(len(values)))
    return [JobResult(case, pair, kind, rows=[latency_row(shape, v)])
            for pair, v in zip(ring, values)]


def test_spread_and_direction():
    stats = verdicts.spread([10.0, 10.5, 9.5, 10.2, 9.8])
    assert stats.median == 10.0
    assert stats.scale == pytest.approx(0.2 * verdicts.MAD_SCALE)   # deviations 0 .2 .2 .5 .5
    assert verdicts.deviation("latency", 20.0, stats) > 0      # higher latency is worse
    assert verdicts.deviation("bandwidth", 20.0, stats) < 0    # higher bandwidth is better
    assert verdicts.spread([1.0, 2.0, 3.0, 4.0]) is None        # too few to compare


def test_identical_nodes_do_not_make_a_tiny_difference_an_outlier():
    stats = verdicts.spread([10.0] * 6 + [10.01])
    assert stats.scale == pytest.approx(0.1)                    # MIN_SPREAD of the median
    assert verdicts.deviation("latency", 10.01, stats) < verdicts.OUTLIER_K
    # seen on 8 quiet loopback nodes: 0.23 us against 0.20 us is 4 robust deviations,
    # but below half the margin the policy gives a 0.20 us figure (0.10 us): no outlier
    quiet = verdicts.spread([0.20, 0.20, 0.21, 0.20, 0.19, 0.20, 0.21, 0.23])
    assert verdicts.deviation("latency", 0.23, quiet) > verdicts.OUTLIER_K
    assert not verdicts.is_outlier("latency", 0.23, quiet)
    assert verdicts.is_outlier("latency", 0.40, quiet)
    flat = verdicts.spread([12000.0] * 7)
    assert not verdicts.is_outlier("bandwidth", 11500.0, flat)  # 4 %: within half of 10 %
    assert verdicts.is_outlier("bandwidth", 11000.0, flat)


def test_slow_link_is_an_outlier_in_both_pairs_and_pinned_to_its_node(local):
    # node3 adds 2 ms: its pairs (node2,node3) and (node3,node4) are slow
    values = [41.0, 4040.0, 4052.0, 40.0, 42.5, 39.0, 40.7, 41.9]
    jobs = pair_jobs(local, values)
    nodes = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs,
                                 verdicts.OUTLIER_K, {})
    assert nodes["node3"].verdict is NodeVerdict.OUTLIER
    assert nodes["node3"].action is Action.DRAIN
    assert "in both its pairs" in nodes["node3"].reason
    assert nodes["node3"].drain_reason.startswith("ocibench: osu_latency %buffers=H-H %nodes=2 ")
    assert "cluster median" in nodes["node3"].drain_reason
    # on the action ladder: an outlier is rerun; pinned to the node, one step up
    first = nodes["node3"].next_step()
    assert first is not None and first.fault == "OCIBENCH-JOB-0052"
    assert str(first.step) == "reboot" and first.repeats == 1
    for other in set(names(8)) - {"node3"}:
        assert nodes[other].verdict is NodeVerdict.PASS, (other, nodes[other].reason)
    assert "node3 fails in both its pairs" in nodes["node2"].reason


def test_a_value_within_the_noise_is_no_outlier(local):
    values = [41.0, 45.0, 38.0, 40.0, 42.5, 39.0, 44.7, 41.9]
    jobs = pair_jobs(local, values)
    nodes = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs, 3.5, {})
    assert {n.verdict for n in nodes.values()} == {NodeVerdict.PASS}


def test_outlier_k_is_the_threshold(local):
    values = [40.0, 40.4, 39.6, 40.2, 39.8, 40.1, 39.9, 46.0]   # (node8,node1) slower
    cells = sweeping.job_cells(pair_jobs(local, values), 3.5)
    assert cells[7].verdict is NodeVerdict.OUTLIER
    cells = sweeping.job_cells(pair_jobs(local, values), 100.0)
    assert cells[7].verdict is NodeVerdict.PASS


def test_a_failed_figure_is_judged_by_judge_and_drains(optimized):
    values = [1.7, 1.68, 9.0, 9.1, 1.66, 1.69, 1.7, 1.71]          # node3-node4: 9 us
    jobs = pair_jobs(optimized, values)
    # (node3,node4) fails: documented 1.67 us, ceiling 1.15 x 1.67 + ...
    nodes = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs, 3.5, {})
    assert nodes["node4"].verdict is NodeVerdict.FAIL
    assert nodes["node4"].action is Action.DRAIN
    assert "> ceiling" in nodes["node4"].drain_reason and "002_" in nodes["node4"].drain_reason


def test_a_failed_node_shows_its_next_step_and_fault_code_first(optimized):
    """The action ladder (ocibench.ladder) on the sweep's JSON and page: the failed
    node's step, fault code and the commands that show the evidence, before the details."""
    values = [1.7, 1.68, 9.0, 9.1, 1.66, 1.69, 1.7, 1.71]          # node3-node4: 9 us
    the_plan = plan.make_plan(names(8), [PAIR_CASE])
    result = sweeping.Sweep(the_plan)
    result.nodes = sweeping.judge_nodes(the_plan, pair_jobs(optimized, values), 3.5, {})
    result.drain = actions.decide({}, len(result.nodes))
    data = json.loads(output.to_json(result))
    first = data["nodes"]["node4"]["next"]
    assert first["step"] == "reboot" and first["fault"] == "OCIBENCH-FIG-0001"
    assert data["nodes"]["node4"]["checks"][PAIR_CASE.name]["fault"] == "OCIBENCH-FIG-0001"
    assert data["nodes"]["node1"]["next"] is None
    page = output.to_html(result)
    shown = page.index("Next step: <strong>reboot</strong>, fault code <code>OCIBENCH-FIG-0001")
    assert "Drain reason" in page[shown:page.index("</section>", shown)]   # details after
    assert "<code>ibstat</code>" in page


def test_a_pair_that_fails_alone_is_retested_and_the_retest_names_the_node(optimized):
    values = [1.7, 1.68, 9.0, 1.69, 1.66, 1.69, 1.7, 1.71]          # only (node3,node4)
    jobs = pair_jobs(optimized, values)
    cells = sweeping.job_cells(jobs, 3.5)
    pairs = {j.nodes: cells[i] for i, j in enumerate(jobs)}
    assert verdicts.pair_alone(PAIR_CASE, pairs) == [("node3", "node4")]
    retests = [JobResult(PAIR_CASE, ("node3", "node6"), RETEST, rows=[latency_row(optimized, 9.2)]),
               JobResult(PAIR_CASE, ("node4", "node7"), RETEST, rows=[latency_row(optimized, 1.7)])]
    nodes = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs + retests, 3.5, {})
    assert nodes["node3"].verdict is NodeVerdict.FAIL
    assert "re-test with node6" in nodes["node3"].reason
    assert nodes["node4"].verdict is NodeVerdict.PASS
    assert "re-test with node7 passed" in nodes["node4"].reason


def test_a_group_failure_is_pinned_to_the_node_bad_on_its_own(local):
    the_plan = plan.make_plan(names(8), [SINGLE_CASE, GROUP_CASE])
    singles = [JobResult(SINGLE_CASE, (n,), SINGLE, failed="job exit code 1: Lmod has detected "
                         "the following error: The following module(s) are unknown: \"omb\"")
               if n == "node5" else JobResult(SINGLE_CASE, (n,), SINGLE,
                                              rows=[latency_row(local, 1.0, nodes=1)])
               for n in names(8)]
    groups = [JobResult(GROUP_CASE, g, GROUPS, failed=("job exit code 1: Lmod has detected ..."
                                                       if "node5" in g else None),
                        rows=[] if "node5" in g else [latency_row(local, 30.0, nodes=4)])
              for g in the_plan.groups[4]]
    nodes = sweeping.judge_nodes(the_plan, singles + groups, 3.5, {"node7": "Slurm state down*"})
    assert nodes["node5"].verdict is NodeVerdict.FAIL
    assert nodes["node5"].action is Action.FIX_SOFTWARE
    assert nodes["node6"].verdict is NodeVerdict.PASS
    assert nodes["node7"].verdict is NodeVerdict.UNREACHABLE
    assert nodes["node7"].action is None
    # an unpinned group failure: every member shares it, to be rerun
    groups[0] = JobResult(GROUP_CASE, the_plan.groups[4][0], GROUPS, failed="benchmark crashed")
    nodes = sweeping.judge_nodes(the_plan, singles + groups, 3.5, {})
    assert nodes["node1"].verdict is NodeVerdict.FAIL and nodes["node1"].action is Action.RERUN
    assert "not pinned to a node" in nodes["node1"].reason


# --------------------------------------------------------------------------- actions

@pytest.mark.parametrize("reason, action", [
    ('job exit code 1: Lmod has detected the following error: The following module(s) are '
     'unknown: "omb"', Action.FIX_SOFTWARE),
    ("job exit code 127: rfm_job.sh: line 9: mpirun: command not found", Action.FIX_SOFTWARE),
    ("ocibench: the host<->GPU placement is written for Open MPI 5.x", Action.FIX_SOFTWARE),
    ("BM.GPU4.8 requires what this node lacks: gdrdrv absent (no /dev/gdrdrv)",
     Action.FIX_SOFTWARE),
    ("BM.GPU4.8 requires what this node lacks: gpus absent (7 of 8); gdrdrv absent (x)",
     Action.DRAIN),
    ("network device 'mlx5_2:1' is not available, please use one or more of: 'lo'(tcp)",
     Action.DRAIN),
    ("job error: Slurm ended job 4: NODE_FAIL (Reason=..)", Action.DRAIN),
    ("benchmark crashed: rfm_job.sh: line 21: 4242 Segmentation fault", Action.RERUN),
    ("job error: Slurm ended job 6: TIMEOUT (Reason=TimeLimit)", Action.RERUN),
])
def test_failures_map_to_actions(reason, action):
    assert actions.for_failure(reason) is action


def test_drain_cap_refuses_the_whole_set():
    wanted = {f"node{i}": "ocibench: x" for i in range(1, 4)}
    refused = actions.decide(wanted, 8)
    assert refused.cap == 2 and refused.nodes == {}
    assert "refusing to drain 3 of the 8 nodes" in refused.refused and "\n" not in refused.refused
    assert actions.decide(dict(list(wanted.items())[:2]), 8).nodes.keys() == {"node1", "node2"}
    assert actions.decide(wanted, 8, force=True).nodes == wanted
    assert actions.decide(wanted, 8, fraction=0.5).refused is None


@pytest.mark.parametrize("fraction, swept, cap", [
    (0.25, 3, 0), (0.25, 4, 1), (0.25, 9, 2), (0.0, 100, 0), (0.29, 100, 29), (1.0, 3, 3)])
def test_the_cap_is_at_most_the_fraction_rounded_down(fraction, swept, cap):
    """docs/sweep.md: at most F of the nodes, rounded down, no minimum: 1 of 3 nodes
    (33 %) is more than 25 %, and --max-drain-fraction 0 drains nothing without
    --force.  Exactly: 0.29 x 100 is 28.999... in floating point."""
    assert actions.cap(swept, fraction) == cap
    one = actions.decide({"node1": "ocibench: x"}, swept, fraction)
    assert one.cap == cap
    assert (one.nodes == {}) == (cap == 0)
    if cap == 0:
        assert f"more than the cap of 0 ({fraction:.0%}" in one.refused, one.refused
    assert actions.decide({"node1": "x"}, swept, fraction, force=True).nodes == {"node1": "x"}


def test_drain_reason_is_one_short_line():
    text = actions.drain_reason("osu_bw %nodes=2", "9.00 us", "> ceiling 2.0 us\n", "002 " * 99)
    assert text.startswith("ocibench: osu_bw %nodes=2 9.00 us > ceiling 2.0 us (")
    assert "\n" not in text and len(text) <= MAX_REASON


# --------------------------------------------------------------------------- outputs

def a_sweep(local) -> sweeping.Sweep:
    the_plan = plan.make_plan(["node<1>", "node2", "node3", "node4", "node5"], [SINGLE_CASE],
                              {"node9": "Slurm state down*: Not responding"})
    jobs = [JobResult(SINGLE_CASE, (n,), SINGLE, rows=[latency_row(local, v, nodes=1)])
            for n, v in zip(the_plan.nodes, [1.0, 1.01, 0.99, 1.0, 9.0])]
    result = sweeping.Sweep(the_plan)
    result.nodes = sweeping.judge_nodes(the_plan, jobs, 3.5, {})
    result.drain = actions.decide({}, len(result.nodes))
    return result


def test_json_has_the_interface_fields(local):
    data = json.loads(output.to_json(a_sweep(local)))
    assert data["nodes"]["node5"]["verdict"] == "outlier"
    assert data["nodes"]["node5"]["action"] == "rerun"
    assert data["nodes"]["node5"]["next"]["step"] == "rerun"     # seen once: rerun
    assert data["nodes"]["node9"]["verdict"] == "unreachable"
    assert data["nodes"]["node9"]["reason"] == "Slurm state down*: Not responding"
    assert data["summary"] == {"pass": 4, "unjudged": 0, "drifting": 0, "outlier": 1,
                               "fail": 0, "unreachable": 1}
    cell = data["nodes"]["node2"]["checks"][SINGLE_CASE.name]
    assert cell["value"] == 1.01 and cell["unit"] == "us" and cell["jobs"] == [["node2"]]
    assert {"plan", "drain", "outlier_k"} <= set(data)


def test_the_check_variables_set_are_in_the_json_and_the_page(local):
    result = a_sweep(local)
    assert json.loads(output.to_json(result))["setvars"] == []
    assert "check variables" not in output.to_html(result)
    result.setvars = ["osu_latency.iterations=1000", "a<b=1"]
    assert json.loads(output.to_json(result))["setvars"] == result.setvars
    assert "check variables: osu_latency.iterations=1000, a&lt;b=1." in output.to_html(result)


def test_html_matrix_escapes_and_links_every_node(local, tmp_path):
    page = output.to_html(a_sweep(local))
    assert "node<1>" not in page and "node&lt;1&gt;" in page
    assert 'href="#node-node_1_"' in page and 'id="node-node_1_"' in page
    assert 'class="cell outlier" title="' in page and ">9.00 us</td>" in page
    assert "http" not in page                     # offline: nothing loaded
    out = tmp_path / "sweep.html"
    pages_output.write(out, page)
    assert out.read_text() == page


# --------------------------------------------------------------------------- command line

def ocibench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocibench.cli", "sweep", *args],
                          capture_output=True, text=True, timeout=120, cwd=paths.REPO_ROOT,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def slurm_client(tmp_path):
    """Slurm's own scontrol for hostlists; it needs a configuration, not a cluster.
    The short timeouts make the ReFrame configuration's sinfo (no controller here)
    fail at once instead of retrying for 9 s."""
    if not shutil.which("scontrol"):
        pytest.skip("no Slurm client (scontrol) on this machine")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=sweeptest\nSlurmctldHost=localhost\nMessageTimeout=1\n"
                    "TCPTimeout=1\n")
    return {"SLURM_CONF": str(conf), "OCIBENCH_SHAPE": "loopback-cluster",
            "PYTHONPATH": str(paths.REPO_ROOT / "src")}


def _cpu_seconds_of_dry_run(count: int, slurm_client, prefix) -> tuple[float, list[str]]:
    # CPU seconds of the command and its children (scontrol, ReFrame), not wall time: on
    # 2 cores shared by other work the wall time says more about the neighbours.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = ocibench("--dry-run", "--nodes", f"node[1-{count}]", "-n", "osu_latency",
                    "--prefix", str(prefix), env=slurm_client)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            done.stdout.splitlines())


def test_dry_run_of_1000_names_costs_about_what_100_do(slurm_client, tmp_path):
    """The plan of 1000 names, and no work that grows with the square of the names
    (every pair against every node, a node set rebuilt per name): ten times the names
    may cost a little more CPU than 100 do (ReFrame's start dominates both), never ten
    or a hundred times more.  A ratio, not a time limit: a machine's speed or its
    neighbours move both runs alike."""
    pytest.importorskip("reframe")
    small, _ = _cpu_seconds_of_dry_run(100, slurm_client, tmp_path / "rfm100")
    large, lines = _cpu_seconds_of_dry_run(1000, slurm_client, tmp_path / "rfm1000")
    assert lines[0] == ("1000 node(s) to sweep, 0 unreachable, 2 check case(s), 2000 job(s) "
                        "in 3 wave(s)"), lines[0]
    assert any(line.startswith("pairs (1000, ring): node1+node2 node2+node3") for line in lines)
    assert large < 2 * small + 1.0, f"1000 names: {large:.1f} s of CPU, 100: {small:.1f} s"


@pytest.fixture
def no_controller(tmp_path):
    """A host whose Slurm client cannot reach a controller: no slurm.conf (Slurm then
    looks for one in DNS, "resolve_ctls_from_dns_srv"), as on a laptop or a login node
    outside the cluster."""
    return {"SLURM_CONF": str(tmp_path / "absent" / "slurm.conf"),
            "OCIBENCH_SHAPE": "loopback-cluster", "PYTHONPATH": str(paths.REPO_ROOT / "src")}


def test_dry_run_expands_a_hostlist_without_a_slurm_controller(no_controller, tmp_path):
    """Issue 20: `--dry-run --nodes 'n[0000-0999]'` failed with "bad hostlist: scontrol:
    error: resolve_ctls_from_dns_srv" (scontrol expanded it); ClusterShell's NodeSet
    needs no controller, and keeps the zero padding."""
    pytest.importorskip("reframe")
    done = ocibench("--dry-run", "--nodes", "n[0000-0999]", "-n", "osu_latency%buffers=H-H%nodes=2",
                    "--prefix", str(tmp_path / "rfm"), env=no_controller)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1000 node(s) to sweep, 0 unreachable"), lines[0]
    assert any(line.startswith("pairs (1000, ring): n0000+n0001 n0001+n0002")
               and line.endswith(" n0999+n0000") for line in lines)


def test_hostlists_expand_in_order_and_fold():
    from ocibench.cluster import slurm
    assert slurm.expand_hostlist("gpu-[001-003],cpu7,gpu-002") == [
        "gpu-001", "gpu-002", "gpu-003", "cpu7"]
    assert slurm.expand_hostlist("node9,node[1-2]") == ["node9", "node1", "node2"]
    assert slurm.expand_hostlist("n[1-2]x[1,3]") == ["n1x1", "n1x3", "n2x1", "n2x3"]
    assert slurm.fold(["node3", "node1", "node2", "node7", "gpu1"]) == "gpu1,node[1-3,7]"


def test_a_hostlist_names_host_names_only():
    """A hostlist's names are host names as everywhere else (ocibench.hostnames): at
    most 253 characters, as DNS's longest name."""
    from ocibench.cluster import slurm
    assert slurm.expand_hostlist("n" * 253) == ["n" * 253]
    with pytest.raises(slurm.UsageError, match="bad hostlist"):
        slurm.expand_hostlist("n" * 254)


@pytest.mark.parametrize("hostlist, words", [
    ("node[1-", "missing bracket"), ("node[3-1]", "bad range"), ("node[a-b]", "bad range"),
    ("node[1-2]]", "illegal closing bracket"), ("", "empty hostlist"),
    ("a!b", "'!' is no part of a Slurm hostlist"), ("@rack1", "'@' is no part"),
    ("node 1", "' ' is no part"), ("node[0-99999999]", "more than 100000 nodes")])
def test_a_bad_hostlist_is_one_line_and_exit_2(no_controller, hostlist, words):
    done = ocibench("--dry-run", "--nodes", hostlist, env=no_controller)
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and "--nodes" in done.stderr, done.stderr
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_drain_fraction_is_checked_by_the_parser():
    done = ocibench("--dry-run", "--max-drain-fraction", "1.5")
    assert done.returncode == 2 and "not a fraction" in done.stderr


@pytest.mark.parametrize("setvar", ["iterations", "osu_latency.iterations", "=3",
                                    "a.b.c=3", "osu latency.iterations=3"])
def test_a_bad_setvar_is_one_line_and_exit_2(setvar):
    done = ocibench("--dry-run", "-S", setvar)
    assert done.returncode == 2, done
    assert f"{setvar!r} is not VAR=VALUE" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_job_cancelled_while_pending_never_started(tmp_path):
    from ocibench.sweep.rfm import never_started
    pending = {"result": "fail", "fail_phase": "run", "job_nodelist": [],
               "fail_reason": "job blocked error: ReqNodeNotAvail, UnavailableNodes:node7",
               "stagedir": str(tmp_path), "job_stdout": "rfm_job.out"}
    assert "ReqNodeNotAvail" in never_started(pending)
    # A job that failed within seconds can leave the queue before ReFrame learns its
    # nodes (the sweep once called a node with a broken module tree "unreachable"):
    # Slurm wrote its output file, so it ran.
    quick = {**pending, "fail_phase": "sanity",
             "fail_reason": "sanity error: job exit code 1: Lmod has detected the following "
                            'error: The following module(s) are unknown: "openmpi"'}
    assert never_started(quick) is not None
    (tmp_path / "rfm_job.out").write_text("")
    assert never_started(quick) is None
    assert never_started({**pending, "job_nodelist": ["node6", "node7"]}) is None  # it ran
    assert never_started({**pending, "fail_phase": "setup"}) is None
    assert never_started({**pending, "result": "pass"}) is None


@pytest.mark.parametrize("report, shown", [
    ({"session_info": {"data_version": "3.1"}, "runs": []},
     "session_info.data_version '3.1': a ReFrame run report format"),
    ({"session_info": {"data_version": "4.2"}, "runs": [{"testcases": [
        {"name": "osu_latency_check", "check_name": "osu_latency", "result": "pass",
         "sweep_nodes": "nodeA", "job_nodelist": "nodeA"}]}]},
     "runs[0].testcases[0].job_nodelist: a string (\"nodeA\") where a list is expected"),
])
def test_a_step_report_the_sweep_cannot_read_stops_it_on_one_line(tmp_path, report, shown):
    """Read by ocibench.reframe.runreport: the sweep stops with a ReframeError (one
    line, which the command prints), never a traceback."""
    from ocibench.sweep import rfm
    wave = plan.Wave(SINGLE, 1, (("nodeA",),), (SINGLE_CASE,))
    path = tmp_path / "step-001.json"
    with pytest.raises(rfm.ReframeError) as caught:
        rfm.results(report, path, wave, SINGLE_CASE)
    assert str(caught.value).startswith(f"{path}: {shown}")


def test_a_step_pins_one_real_job_per_group_and_judges_it(lmod_init, mpirun, tmp_path,
                                                          monkeypatch):
    """One wave of the single-node osu_latency on two "nodes" of the local shape, through
    ReFrame (-P sweep_nodes) and the real benchmark: every group gets its own job, read
    back by its sweep_nodes and judged (the local scheduler runs both here)."""
    from ocibench.sweep import rfm
    root = paths.module_root("local")
    if not (sorted(root.glob("Core")) + sorted(root.glob("*/Core"))):
        pytest.skip(f"no local Lmod module tree under {root} (make install builds it)")
    monkeypatch.setenv("OCIBENCH_SHAPE", "local")
    monkeypatch.setenv("PYTHONPATH", str(paths.REPO_ROOT / "src"))   # for the jobs, too
    cases, skipped = rfm.discover(["osu_latency%buffers=H-H"], [], tmp_path, None)
    assert [c.nodes for c in cases] == [1], cases
    assert "osu_latency %buffers=H-H %nodes=2" in skipped   # local runs on this machine only
    wave = plan.Wave(SINGLE, 1, (("nodeA",), ("nodeB",)), tuple(cases))
    # the sweep's -S reaches every job: 100 round trips instead of the seed's 11,000
    jobs = rfm.run_step(1, wave, cases[0], tmp_path, 60, None, None,
                        ["osu_latency.iterations=50"])
    assert [j.nodes for j in jobs] == [("nodeA",), ("nodeB",)]
    scripts = sorted(tmp_path.glob("step-001/output/**/rfm_job.sh"))  # passed: kept there
    assert len(scripts) == 2 and all(
        "osu_latency -x 50 -i 50 -m 1:1" in s.read_text() for s in scripts), scripts
    for job in jobs:
        assert job.failed is None and job.never_started is None, job
        assert [(r.metric, r.key) for r in job.rows] == [("latency", 1)]
    report = json.loads((tmp_path / "step-001.json").read_text())
    pinned = sorted(c["sweep_nodes"] for r in report["runs"] for c in r["testcases"])
    assert pinned == ["nodeA", "nodeB"]


def test_every_check_pins_its_job_to_the_sweep_nodes(slurm_client, tmp_path):
    """ReFrame's own --dry-run writes the Slurm job scripts: the group given with
    -P sweep_nodes is the job's --nodelist (checks/base.py SweepNodes), for a benchmark
    and for preflight."""
    from ocibench.sweep import rfm
    argv = rfm.reframe_argv() + [
        "--dry-run", "-n", "osu_latency%buffers=H-H%nodes=2", "-n", "preflight",
        "-P", "sweep_nodes=node1+node2,node3+node4", "--prefix", str(tmp_path)]
    # its run report and perflogs go under tmp_path, not into the checkout
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **slurm_client,
                               "OCIBENCH_REPORT_DIR": str(tmp_path / "reports"),
                               "OCIBENCH_PERFLOG_DIR": str(tmp_path / "perflogs")})
    assert done.returncode == 0, done.stdout[-2000:]
    scripts = sorted(tmp_path.glob("stage/**/rfm_job.sh"))
    nodelists = sorted(line.strip() for s in scripts for line in s.read_text().splitlines()
                       if line.startswith("#SBATCH --nodelist"))
    assert len(scripts) == 4, scripts
    assert nodelists == ["#SBATCH --nodelist=node[1-2]"] * 2 + ["#SBATCH --nodelist=node[3-4]"] * 2


def test_slurm_states_say_which_nodes_are_swept_and_why_not():
    from ocibench.cluster import slurm
    states = slurm.parse_sinfo(
        "node1|idle|none\nnode2|mix|none\nnode3|drain|ocibench: osu_bw 9.00 MB/s (x)\n"
        "node4|down*|Not responding\nnode5|drain|bad DIMM, ticket 42\nnode1|idle|none\n"
        "node6|idle~|none\n")
    assert [n for n, s in states.items() if s.sweepable] == ["node1"]
    assert states["node3"].drained and states["node5"].drained
    assert states["node2"].why_not() == "Slurm state mix (running other jobs)"
    assert states["node4"].why_not() == "Slurm state down* (not responding): Not responding"
    assert states["node5"].why_not() == "Slurm state drain: bad DIMM, ticket 42"
    assert not states["node6"].sweepable                # powered down


def test_two_nodes_share_a_failure_and_a_lone_pair_is_rerun(optimized):
    jobs = pair_jobs(optimized, [9.0, 9.0])[:1]                 # N = 2: one pair
    nodes = sweeping.judge_nodes(plan.make_plan(names(2), [PAIR_CASE]), jobs, 3.5, {})
    assert {n.verdict for n in nodes.values()} == {NodeVerdict.FAIL}
    assert "which node cannot be told" in nodes["node1"].reason
    # node4's other pair never ran (node5 went down): its failure is not pinned
    jobs = pair_jobs(optimized, [1.7, 1.7, 9.0, 1.7, 1.7, 1.7])
    jobs[3].never_started = "cancelled while pending"
    nodes = sweeping.judge_nodes(plan.make_plan(names(6), [PAIR_CASE]), jobs, 3.5,
                                 {"node5": "Slurm state down*"})
    assert nodes["node4"].verdict is NodeVerdict.FAIL and nodes["node4"].action is Action.RERUN
    assert "other pair did not run" in nodes["node4"].reason
    assert nodes["node5"].verdict is NodeVerdict.UNREACHABLE


# --------------------------------------------------------------------------- no verdict on nothing

def test_a_node_no_check_ran_on_is_unjudged_and_the_exit_status_says_so():
    """Issue 21: `--nodes node5 -n 'osu_latency%nodes=2'` planned nothing for its one
    node, and 3 nodes with only the 4-node collectives nothing for any; each node came
    out "pass: no check ran on this node" and the sweep exited 0."""
    for nodes, cases, needs in ((["node5"], [PAIR_CASE], "needs 2 nodes; 1 swept"),
                                (names(3), [GROUP_CASE], "needs 4 nodes; 3 swept")):
        the_plan = plan.make_plan(nodes, cases)
        assert the_plan.jobs == 0
        result = sweeping.Sweep(the_plan)
        result.nodes = sweeping.judge_nodes(the_plan, [], 3.5, {})
        for node in nodes:
            assert result.nodes[node].verdict is NodeVerdict.UNJUDGED, result.nodes[node]
            assert result.nodes[node].action is Action.RERUN
            assert result.nodes[node].reason.startswith("no check ran on this node (")
            assert needs in result.nodes[node].reason, result.nodes[node].reason
        assert result.exit_status() == sweeping.EXIT_UNJUDGED == 3
        assert not result.ok
        assert json.loads(output.to_json(result))["summary"]["unjudged"] == len(nodes)
        assert 'class="unjudged"' in output.to_html(result)


def test_every_job_skipped_is_no_check_ran():
    the_plan = plan.make_plan(names(2), [SINGLE_CASE])
    jobs = [JobResult(SINGLE_CASE, (n,), SINGLE, skipped="no RDMA device") for n in names(2)]
    nodes = sweeping.judge_nodes(the_plan, jobs, 3.5, {})
    assert {n.verdict for n in nodes.values()} == {NodeVerdict.UNJUDGED}
    assert "skipped: no RDMA device" in nodes["node1"].reason


def test_the_exit_status_puts_findings_before_unjudged_before_pass(local):
    result = a_sweep(local)                                  # an outlier, an unreachable
    assert result.exit_status() == sweeping.EXIT_FINDING == 1
    the_plan = plan.make_plan(names(2), [SINGLE_CASE])
    jobs = [JobResult(SINGLE_CASE, ("node1",), SINGLE, rows=[latency_row(local, 1.0, nodes=1)]),
            JobResult(SINGLE_CASE, ("node2",), SINGLE, failed=UNJUDGED_REASON)]
    result = sweeping.Sweep(the_plan)
    result.nodes = sweeping.judge_nodes(the_plan, jobs, 3.5, {})
    assert result.exit_status() == sweeping.EXIT_UNJUDGED
    result.nodes = sweeping.judge_nodes(the_plan, jobs[:1], 3.5, {})
    result.nodes.pop("node2")
    assert result.exit_status() == sweeping.EXIT_PASS
    assert sweeping.Sweep(the_plan).exit_status() == sweeping.EXIT_UNJUDGED   # no node


#: What a live check says when its run could not be judged (RunVerdict.UNJUDGED); the
#: second and third also carry words that, alone, ask for a drain.
UNJUDGED_REASON = ("osu_latency: could not judge: no documented figure for message "
                   "size 2 on this shape (figures at 8); run -m 8:8 to compare")
UNJUDGED_REASONS = (
    UNJUDGED_REASON,
    "nccl_tests: Could not judge: the format of line 12 is not known (#wrong column?)",
    "preflight: could not judge: BM.GPU4.8 requires what this node lacks: gpus absent "
    "(the probe timed out); Xid unknown",
)


def unjudged_sweeps(shape):
    """Sweeps whose runs were UNJUDGED on some or every node: single, pairs (every pair,
    one pair, a re-test), groups of 4, beside a real failure."""
    ring = names(8)
    for reason in UNJUDGED_REASONS:
        single = plan.make_plan(ring, [SINGLE_CASE])
        yield single, [JobResult(SINGLE_CASE, (n,), SINGLE, failed=reason) for n in ring]
        pairs = plan.make_plan(ring, [PAIR_CASE])
        jobs = [JobResult(PAIR_CASE, p, PAIRS, failed=reason) for p in pairs.pairs]
        yield pairs, jobs
        mixed = pair_jobs(shape, [1.7] * 8)
        mixed[2] = JobResult(PAIR_CASE, mixed[2].nodes, PAIRS, failed=reason)
        yield pairs, mixed
        retested = pair_jobs(shape, [1.7, 1.7, 9.0, 1.7, 1.7, 1.7, 1.7, 1.7])
        retested += [JobResult(PAIR_CASE, ("node3", "node6"), RETEST, failed=reason),
                     JobResult(PAIR_CASE, ("node4", "node7"), RETEST, failed=reason)]
        yield pairs, retested
        groups = plan.make_plan(ring, [SINGLE_CASE, GROUP_CASE])
        yield groups, ([JobResult(SINGLE_CASE, (n,), SINGLE, failed=reason) for n in ring]
                       + [JobResult(GROUP_CASE, g, GROUPS, failed=reason)
                          for g in groups.groups[4]])


def test_unjudged_never_maps_to_pass_or_to_drain(optimized):
    """Issues 20 and 21: a run that could not be judged is never a pass and never
    drains a node, whatever else its reason says; its action is rerun."""
    for reason in UNJUDGED_REASONS:
        assert actions.for_failure(reason) is Action.RERUN, reason
    seen = 0
    for the_plan, jobs in unjudged_sweeps(optimized):
        nodes = sweeping.judge_nodes(the_plan, jobs, 3.5, {})
        for name, node in nodes.items():
            cells = node.cells.values()
            unjudged = [c for c in cells if c.verdict is NodeVerdict.UNJUDGED]
            for cell in unjudged:
                assert cell.action is Action.RERUN, cell
            if cells and all(c.verdict is NodeVerdict.UNJUDGED for c in cells):
                seen += 1
                assert node.verdict is NodeVerdict.UNJUDGED, (name, node)
                assert node.action is Action.RERUN, (name, node)
                assert node.drain_reason is None, (name, node)
        # with every node wanted drained above any cap, none is an unjudged one's
        wanted = sweeping.drain_wanted(nodes)
        decision = actions.decide(wanted, len(nodes), 1.0, force=True)
        for name in decision.nodes:
            assert any(c.verdict in (NodeVerdict.FAIL, NodeVerdict.OUTLIER)
                       and c.action in (Action.DRAIN, Action.FIX_SOFTWARE)
                       for c in nodes[name].cells.values()), (name, nodes[name])
    assert seen >= 8 * 3 * 3   # single, every pair, groups: each node, each reason


# --------------------------------------------------------------------------- Slurm actions

def test_ours_is_what_the_record_says_not_a_prefix(tmp_path):
    """Issue 21: a person's drain whose reason merely starts with `ocibench:` was
    undrained as if it were ours.  Only a node drained with exactly the reason the
    sweep recorded for it is."""
    from ocibench.cluster import slurm
    from ocibench.sweep import state
    record = state.DrainRecord(tmp_path / "sweep" / "drained.json")
    assert record.nodes() == {}
    ours = "ocibench: osu_latency %buffers=H-H %nodes=2 2000.00 us > 1400.00 us (x)"
    record.add("node2", ours, "sweep/1")
    states = slurm.parse_sinfo(f"node2|drain|{ours}\nnode3|drain|ocibench: by hand, ticket 7\n"
                               f"node4|drain|{ours} again\n")
    found = {n: record.ours(n, s.reason) for n, s in states.items() if s.drained}
    assert found == {"node2": True, "node3": False, "node4": False}
    assert state.DrainRecord(record.path).nodes()["node2"]["reason"] == ours  # on disk
    record.remove("node2")
    assert not record.ours("node2", ours)
    assert sorted(p.name for p in record.path.parent.iterdir()) == [
        "drained.json", "drained.json.lock"]          # no temporary file left


@pytest.mark.parametrize("text, words", [
    ("{", "not the sweep's record of drains"), ("[]", "version 'list', expected 1"),
    ('{"version": 2, "nodes": {}}', "version 2, expected 1"),
    ('{"version": 1, "nodes": {"n1": "r"}}', "field 'nodes' is not node -> {reason")])
def test_a_bad_record_is_one_line_naming_the_file(tmp_path, text, words):
    from ocibench.sweep import state
    path = tmp_path / "drained.json"
    path.write_text(text)
    with pytest.raises(state.StateError) as err:
        state.DrainRecord(path).ours("n1", "r")
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value), err.value
    with pytest.raises(state.StateError):
        state.DrainRecord(path).add("n1", "r", "s")   # nothing written over it
    assert path.read_text() == text


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_every_stopping_signal_is_ctrl_c_and_waits_for_a_shielded_action(signum):
    """Issue 21: Ctrl-C was cleaned up, SIGTERM and SIGHUP were not.  Each is raised
    as a KeyboardInterrupt, and not inside a shielded block (a Slurm action and its
    record), only after it."""
    from ocibench.sweep import signals
    done = []
    with pytest.raises(KeyboardInterrupt) as err:
        with signals.as_ctrl_c():
            with signals.shielded():
                os.kill(os.getpid(), signum)
                time.sleep(0.2)
                done.append("the action ended")
            done.append("after the shield")
    assert done == ["the action ended"]
    assert signals.signum_of(err.value) == signum
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL   # handlers restored


def _one_case_report(**case) -> dict:
    """A ReFrame run report (data_version 4.2) of one passed single-node osu_latency job
    of BM.Optimized3.36, pinned to nodeA."""
    testcase = {"name": "osu_latency_check", "result": "pass", "check_name": "osu_latency",
                "shape": "BM.Optimized3.36", "buffers": "H-H", "nodes": 1, "sizes": "1:1",
                "sweep_nodes": "nodeA", "job_nodelist": ["nodeA"],
                "perfvalues": {"generic:default:latency_1": [1.5, 0, None, None, "us", "pass"]},
                **case}
    return {"session_info": {"data_version": "4.2"}, "runs": [{"testcases": [testcase]}]}


def test_an_undocumented_variant_is_recorded_and_an_unjudged_run_never_fails(tmp_path):
    """BM.Optimized3.36 documents osu_latency on 2 nodes only: a passed 1-node job is
    recorded (its node passes), as the live check itself decided; a job judged again as
    unjudged is "could not judge" (rerun), never a failure of the node.  The sweep of
    the loopback cluster once called every healthy node "fail [rerun]: failed" so."""
    from ocibench.sweep import rfm
    wave = plan.Wave(SINGLE, 1, (("nodeA",),), (SINGLE_CASE,))
    path = tmp_path / "step-001.json"
    [job] = rfm.results(_one_case_report(), path, wave, SINGLE_CASE)
    assert job.failed is None and [r.measured for r in job.rows] == [1.5], job
    assert verdicts.job_cell(job).verdict is NodeVerdict.PASS
    # the documented variant at a size no figure names: nothing compared
    pair = Case("osu_latency %buffers=H-H %nodes=2", "/b", "osu_latency", 2)
    wave = plan.Wave(PAIRS, 1, (("nodeA", "nodeB"),), (pair,))
    report = _one_case_report(nodes=2, sizes="2:2", sweep_nodes="nodeA+nodeB",
                              job_nodelist=["nodeA", "nodeB"], perfvalues={
                                  "generic:default:latency_2": [1.5, 0, None, None, "us",
                                                                "pass"]})
    [job] = rfm.results(report, path, wave, pair)
    cell = verdicts.job_cell(job)
    assert cell.verdict is NodeVerdict.UNJUDGED and cell.action is Action.RERUN, cell
    assert job.failed.startswith("could not judge: "), job.failed


def test_a_check_whose_module_is_not_installed_is_skipped_not_run(lmod_init, tmp_path,
                                                                   monkeypatch):
    """A real tree of `local` without omb: the sweep's discovery lists the single-node
    osu_latency among the cases ReFrame skips, with the reason naming the module and
    `make install`, and plans no job of it (it failed on every node before)."""
    from ocibench.sweep import rfm
    core = tmp_path / "modules" / "local" / "linux-test-x86_64" / "Core" / "openmpi"
    core.mkdir(parents=True)
    (core / "1.0.lua").write_text('whatis("an openmpi module with no omb beside it")\n')
    monkeypatch.setenv("OCIBENCH_MODULES_ROOT", str(tmp_path / "modules"))
    monkeypatch.setenv("OCIBENCH_SHAPE", "local")
    cases, skipped = rfm.discover(["osu_latency%buffers=H-H"], [], tmp_path / "sweep", None)
    assert cases == [], cases
    reason = skipped["osu_latency %buffers=H-H %nodes=1"]
    assert reason.startswith("not installed: no module omb (Spack package "
                             "osu-micro-benchmarks)") and "`make install`" in reason, reason
