"""The sweep on rack-scale NVLink domains (issue 33): on a 2-rack GB200 NVL72 partition
every multi-node case (the all-reduce across hosts first) is planned within each rack,
never across, as Slurm's topology/block describes the racks.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ocibench.cluster import slurm
from ocibench.sweep import plan, rfm
from ocibench.sweep.plan import GROUPS, PAIRS, SINGLE, Case

#: Two NVL72 racks of 18 hosts, as Slurm's topology/block prints them (a record per
#: block: BlockName, BlockIndex, Nodes, BlockSize; the fields of `scontrol show topo`
#: with topology/block, as Slurm's topology.conf(5) describes a block).
TOPOLOGY = ("BlockName=rack1 BlockIndex=0 Nodes=gb200-r1-[01-18] BlockSize=18\n"
            "BlockName=rack2 BlockIndex=1 Nodes=gb200-r2-[01-18] BlockSize=18\n")
RACK1 = [f"gb200-r1-{i:02d}" for i in range(1, 19)]
RACK2 = [f"gb200-r2-{i:02d}" for i in range(1, 19)]
#: The order Slurm lists a partition in need not follow the racks: interleaved.
NODES = [n for pair in zip(RACK1, RACK2) for n in pair]


def _domain(node: str) -> str:
    return "rack1" if node in RACK1 else "rack2"


@pytest.fixture(scope="module")
def gb200_cases(tmp_path_factory) -> list[Case]:
    """BM.GPU.GB200.4's all-reduce cases, as ReFrame's real dry run lists them."""
    if not shutil.which("reframe"):
        pytest.skip("reframe is not on PATH (pip install -e '.[test]')")
    prefix = tmp_path_factory.mktemp("discover")
    old = os.environ.get("OCIBENCH_SHAPE")
    os.environ["OCIBENCH_SHAPE"] = "BM.GPU.GB200.4"
    try:
        cases, _skipped = rfm.discover(["nccl_all_reduce_perf"], [], prefix, None)
    finally:
        if old is None:
            del os.environ["OCIBENCH_SHAPE"]
        else:
            os.environ["OCIBENCH_SHAPE"] = old
    return cases


def test_topology_blocks_name_each_nodes_rack() -> None:
    domains = slurm.parse_topology_blocks(TOPOLOGY)
    assert len(domains) == 36
    assert {domains[n] for n in RACK1} == {"rack1"} and {domains[n] for n in RACK2} == {"rack2"}
    # a tree topology (switches) has no blocks: no domains
    assert slurm.parse_topology_blocks("SwitchName=s0 Level=0 LinkSpeed=1 Nodes=gb200-r1-[01-18]\n") == {}


def test_a_two_rack_gb200_plan_groups_its_all_reduce_steps_by_domain(gb200_cases) -> None:
    multi = [c for c in gb200_cases if c.nodes > 1]
    assert multi and all(c.check == "nccl_all_reduce_perf" for c in multi)
    domains = slurm.parse_topology_blocks(TOPOLOGY)
    the_plan = plan.make_plan(NODES, gb200_cases, domains=domains)
    assert the_plan.domains == {"rack1": tuple(RACK1), "rack2": tuple(RACK2)}
    steps = [w for w in the_plan.waves if w.kind in (PAIRS, GROUPS)]
    assert steps and all(set(w.cases) <= set(multi) for w in steps)
    for wave in steps:
        for group in wave.groups:
            # every all-reduce job within one rack: over its NVLink, never the RoCE network
            assert len({_domain(n) for n in group}) == 1, group
        # and both racks in every step, at once
        assert {_domain(g[0]) for g in wave.groups} == {"rack1", "rack2"}
    # a ring of pairs in each rack: each node in two pairs, both partners of its rack
    near = plan.neighbours(the_plan.pairs)
    assert all(len(near[n]) == 2 and {_domain(p) for p in near[n]} == {_domain(n)}
               for n in NODES)
    assert "NVLink domains (2; multi-node cases within each)" in plan.describe(the_plan)
    # without the racks, the ring of the listed order pairs hosts of two racks
    flat = plan.make_plan(NODES, gb200_cases)
    assert any(len({_domain(n) for n in g}) == 2
               for w in flat.waves if w.kind == PAIRS for g in w.groups)


def test_per_domain_groups_of_four_and_a_small_domain() -> None:
    cases = (Case("one", "/a", "x", 1), Case("pair", "/b", "x", 2), Case("four", "/c", "x", 4))
    nodes = RACK1[:6] + RACK2[:1]
    the_plan = plan.make_plan(nodes, cases, domains={n: _domain(n) for n in nodes})
    assert [w.kind for w in the_plan.waves] == [SINGLE, PAIRS, PAIRS, GROUPS, GROUPS]
    assert the_plan.waves[0].groups == tuple((n,) for n in nodes)     # single: every node
    for wave in the_plan.waves[1:]:
        assert all(set(g) <= set(RACK1) for g in wave.groups)
    assert the_plan.groups[4] == (tuple(RACK1[:4]), tuple(RACK1[4:6] + RACK1[:2]))
    assert the_plan.not_run == {
        "pair in rack2": "needs 2 nodes of one NVLink domain; 1 swept in rack2",
        "four in rack2": "needs 4 nodes of one NVLink domain; 1 swept in rack2"}


def test_retest_partners_stay_in_the_rack() -> None:
    domains = {n: _domain(n) for n in NODES}
    the_plan = plan.make_plan(NODES, (Case("pair", "/b", "x", 2),), domains=domains)
    alone = [(RACK1[2], RACK1[3])]
    pairs, stuck = plan.retest_pairs(alone, the_plan.pairs, set(alone[0]),
                                     the_plan.domain_of())
    assert not stuck and len(pairs) == 2
    assert all(_domain(partner) == "rack1" for _node, partner in pairs)


def test_nodes_in_no_block_are_a_domain_of_their_own() -> None:
    domains = {n: "rack1" for n in RACK1[:3]}
    nodes = RACK1[:3] + ["login-gpu1", "login-gpu2"]
    the_plan = plan.make_plan(nodes, (Case("pair", "/b", "x", 2),), domains=domains)
    assert the_plan.domains[plan.NO_DOMAIN] == ("login-gpu1", "login-gpu2")
    assert ("login-gpu1", "login-gpu2") in the_plan.pairs


def test_the_sweep_reads_slurms_blocks_and_none_is_no_domain(tmp_path: Path,
                                                             monkeypatch) -> None:
    """`scontrol show topology` through the sweep's own Slurm call: a fake scontrol on
    PATH prints the blocks; one that fails (no topology plugin) gives no domains."""
    fake = tmp_path / "scontrol"
    fake.write_text(f"#!/bin/sh\n[ \"$*\" = 'show topology' ] || exit 2\ncat <<'EOF'\n{TOPOLOGY}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    domains, why = slurm.nvlink_domains()
    assert not why and domains["gb200-r2-18"] == "rack2"
    fake.write_text("#!/bin/sh\necho 'scontrol: error: no topology' >&2\nexit 1\n")
    domains, why = slurm.nvlink_domains()
    assert domains == {} and "scontrol show topology: scontrol: error: no topology" in why
