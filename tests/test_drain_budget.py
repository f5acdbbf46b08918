"""The drain budget (ocibench.cluster.budget): the decision on Slurm's listing, pure.

Slurm's own side (sinfo's listing, scontrol's drains, the healthcheck under slurmd
and the sweep) is tested on the loopback cluster: tests/test_healthcheck_cluster.py.
Here: the budget's forms, the listing's parser on sinfo's output, admission, the
ranking that undoes a drain made in the same moment as others, and the protocol
played over many interleavings of deciders (the count, the drain, the re-count a
second later), against the same protocol without the re-count or without the wait.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from ocibench.cluster import budget, slurm
from ocibench.health import check
from ocibench.health.state import FAIL, PASS, HealthState, ProbeResult

PERSON = "reseating the cables"


def listed(name: str, state: str = "idle", reason: str = "", when: str = "",
           partitions: tuple[str, ...] = ("gpu",)) -> slurm.ListedNode:
    return slurm.ListedNode(name, partitions, state, reason, when)


def cluster(size: int, *special: slurm.ListedNode) -> dict[str, slurm.ListedNode]:
    """node1..node<size> idle in partition gpu, with ``special`` in their place."""
    nodes = {f"node{i}": listed(f"node{i}") for i in range(1, size + 1)}
    nodes.update({n.name: n for n in special})
    return nodes


def at(second: int) -> str:
    """sinfo's %H of a reason set ``second`` seconds after 12:00:00."""
    return f"2026-05-20T12:{second // 60:02d}:{second % 60:02d}"


# ------------------------------------------------------------------ the budget's forms

@pytest.mark.parametrize("text, size, limit", [
    ("10%", 9, 1),        # at least one node: a small partition can drain a broken node
    ("10%", 10, 1), ("10%", 100, 10), ("10%", 109, 10), ("10%", 1000, 100),
    ("29%", 100, 29),     # exactly: 0.29 * 100 is 28.999... in floating point
    ("0%", 100, 0), ("0", 100, 0),     # nothing drained: a monitor-only site
    ("2", 9, 2), ("2", 1000, 2), (" 3 ", 5, 3), ("100%", 7, 7), ("50 %", 3, 1),
])
def test_a_budget_is_nodes_or_a_percentage_of_each_partition(text, size, limit):
    assert budget.parse(text, "--drain-budget").limit(size) == limit


@pytest.mark.parametrize("text, says", [
    ("ten", "not a drain budget"), ("-1", "not a drain budget"),
    ("1.5", "not a drain budget"), ("", "not a drain budget"), ("%", "not a drain budget"),
    ("101%", "more than 100 %"), ("9999999", "more than 1000000 nodes"),
    ("10%\x1b[2J", "not a drain budget"),
])
def test_a_bad_budget_is_one_line_naming_where_it_was_given(text, says):
    with pytest.raises(budget.BudgetError) as err:
        budget.parse(text, "$OCIBENCH_DRAIN_BUDGET")
    line = str(err.value)
    assert says in line and line.startswith("$OCIBENCH_DRAIN_BUDGET") and "\n" not in line


def test_the_flag_then_the_environment_then_the_default(monkeypatch):
    monkeypatch.delenv(budget.ENV, raising=False)
    assert budget.configured().text == "10%" and budget.configured().limit(100) == 10
    monkeypatch.setenv(budget.ENV, "3")
    assert budget.configured().limit(100) == 3
    assert budget.configured().describe() == "3, $OCIBENCH_DRAIN_BUDGET"
    assert budget.configured("25%").limit(100) == 25
    monkeypatch.setenv(budget.ENV, "lots")
    with pytest.raises(budget.BudgetError, match=r"^\$OCIBENCH_DRAIN_BUDGET 'lots'"):
        budget.configured()


# ------------------------------------------------------------------ Slurm's listing

SINFO = """\
node1|gpu|idle|Unknown|none
node1|all|idle|Unknown|none
node2|gpu|drain|2026-05-20T12:00:07|ocibench: gpu_count (7x A100; the shape: 8x)
node2|all|drain|2026-05-20T12:00:07|ocibench: gpu_count (7x A100; the shape: 8x)
node3|all|drng|2026-05-20T12:00:09|ocibench: rdma mlx5_0:1 (port state 1: DOWN|odd)
node4|all|drain*|2026-05-20T11:00:00|reseating the cables
node5|all|down*|2026-05-20T12:00:01|Not responding
"""


def test_the_listing_reads_each_partition_state_reason_and_its_time():
    found = slurm.parse_listing(SINFO)
    assert found["node1"] == listed("node1", partitions=("gpu", "all"))
    assert found["node2"].partitions == ("gpu", "all")
    assert found["node2"].reason_time == "2026-05-20T12:00:07"
    assert found["node3"].reason.endswith("DOWN|odd)")   # a '|' in the reason is kept
    assert [n for n, node in found.items() if node.held_drained] == ["node2", "node3",
                                                                     "node4"]
    assert [n for n, node in found.items() if budget.holds(node)] == ["node2", "node3"]


# ------------------------------------------------------------------ admission

def test_within_the_budget_a_drain_is_admitted_and_above_it_spent():
    old = listed("node9", "drain", "ocibench: xid (Xid 79)", at(0))
    room = budget.admit(cluster(20, old), ["node3", "node1", "node2"], budget.parse("2", "x"))
    assert room.admitted == ("node3",)          # in the order given: the first fits
    assert set(room.spent) == {"node1", "node2"} and not room.unknown
    assert room.spent["node1"] == ("drain budget spent: partition gpu holds 2 ocibench "
                                   "drain(s) of at most 2 of its 20 nodes (budget 2, x): "
                                   "node3, node9")


def test_a_persons_drain_is_theirs_and_the_prefix_counts_whoever_typed_it():
    nodes = cluster(10, listed("node8", "drain", PERSON, at(0)),
                    listed("node9", "drain*", PERSON, at(0)),
                    listed("node7", "down*", "ocibench: gpu_count (0x)", at(0)))
    ten = budget.parse("10%", "the default")
    assert budget.admit(nodes, ["node1"], ten).admitted == ("node1",)
    typed = dict(nodes, node6=listed("node6", "drng", "ocibench: by hand, ticket 42", at(0)))
    assert "node1" in budget.admit(typed, ["node1"], ten).spent


def test_a_node_must_fit_every_partition_it_is_in():
    nodes = {f"a{i}": listed(f"a{i}", partitions=("small", "all")) for i in range(5)}
    nodes.update({f"b{i}": listed(f"b{i}", partitions=("all",)) for i in range(45)})
    nodes["a0"] = listed("a0", "drain", "ocibench: xid", at(0), ("small", "all"))
    room = budget.admit(nodes, ["a1", "b1"], budget.parse("10%", "x"))
    assert room.admitted == ("b1",)    # all: 2 of 5 allowed; small: 1 of 1 spent
    assert "partition small holds 1" in room.spent["a1"]


def test_no_listing_of_the_node_is_unknown_and_never_a_drain():
    room = budget.admit(cluster(4), ["node7"], budget.parse("2", "x"))
    assert room.admitted == () and "in no partition" in room.unknown["node7"]


def test_nodes_drained_again_whatever_the_budget_take_their_room_first():
    room = budget.admit(cluster(10), ["node1"], budget.parse("1", "x"), also_held=["node5"])
    assert room.admitted == () and "node5" in room.spent["node1"]


def test_a_zero_budget_drains_nothing():
    room = budget.admit(cluster(100), ["node1"], budget.parse("0", "x"))
    assert room.admitted == () and "at most 0" in room.spent["node1"]


# ------------------------------------------------------------------ the re-count

def test_drains_of_the_same_moment_rank_by_time_then_name():
    new = [listed(f"node{i}", "drain", f"ocibench: gpu_count {i}", at(10)) for i in (4, 2, 6)]
    nodes = cluster(20, listed("node9", "drain", "ocibench: xid", at(0)), *new)
    two = budget.parse("2", "x")
    verdicts = {n.name: budget.overdrawn(nodes, {n.name: n.reason}, two) for n in new}
    # node9's older drain keeps its place; of the three new ones node2 ranks first
    assert verdicts["node2"] == {}
    assert set(verdicts["node4"]) == {"node4"} and set(verdicts["node6"]) == {"node6"}
    assert "node4 ranks 3" in verdicts["node4"]["node4"]
    # an earlier second beats a smaller name
    later = dict(nodes, node2=listed("node2", "drain", "ocibench: gpu_count 2", at(11)))
    assert budget.overdrawn(later, {"node4": "ocibench: gpu_count 4"}, two) == {}


def test_a_drain_no_longer_ours_is_never_undone():
    nodes = cluster(10, listed("node1", "drain", "ocibench: xid", at(0)),
                    listed("node2", "drain", PERSON, at(5)))
    one = budget.parse("1", "x")
    # node2 was drained by us, then a person drained it again with their reason
    assert budget.overdrawn(nodes, {"node2": "ocibench: gpu_count"}, one) == {}
    # a reason without ocibench's prefix is no drain of the budget's: nothing to rank
    assert budget.overdrawn(nodes, {"node2": PERSON}, one) == {}
    # a person resumed it: nothing to undo
    assert budget.overdrawn(cluster(10), {"node3": "ocibench: gpu_count"}, one) == {}


# ------------------------------------------------------------------ the protocol, played

@dataclass
class Decider:
    """One node's healthcheck: counts at ``count_at``, drains ``drain_after`` later,
    re-counts ``recount_after`` after the drain."""

    name: str
    count_at: float
    drain_after: float
    recount_after: float
    drained_at: float | None = None
    kept: bool = False


def play(deciders: list[Decider], size: int, limit: int, recount: bool) -> int:
    """Slurm as a list of events: a drain is stamped with slurmctld's second
    (``update_node``), a listing shows every drain made before it and not undone.
    Returns how many drains stay."""
    the_budget = budget.parse(str(limit), "x")
    base = {f"node{i}": listed(f"node{i}") for i in range(1, size + 1)}
    events = [(d.count_at, 0, d) for d in deciders]
    drains: dict[str, float] = {}

    def listing() -> dict[str, slurm.ListedNode]:
        nodes = dict(base)
        for name, when in drains.items():
            nodes[name] = listed(name, "drain", f"ocibench: {name}", at(math.floor(when)))
        return nodes

    while events:
        events.sort(key=lambda e: (e[0], e[1]))
        now, step, who = events.pop(0)
        if step == 0 and budget.admit(listing(), [who.name], the_budget).admitted:
            events.append((now + who.drain_after, 1, who))
        elif step == 1:
            drains[who.name] = who.drained_at = now
            who.kept = True
            if recount:
                events.append((now + who.recount_after, 2, who))
        elif step == 2:
            undo = budget.overdrawn(listing(), {who.name: f"ocibench: {who.name}"},
                                    the_budget)
            if who.name in undo:
                del drains[who.name]
                who.kept = False
    return len(drains)


def deciders(rng: random.Random, count: int, wait: float) -> list[Decider]:
    """Health checks started together by slurmd: counts within 2 s (Python starting on
    busy cores), each drain 0-0.3 s after its count, each re-count ``wait`` (plus up to
    0.2 s) after its drain."""
    return [Decider(f"node{i}", 100 + rng.uniform(0, 2), rng.uniform(0, 0.3),
                    wait + rng.uniform(0, 0.2)) for i in range(1, count + 1)]


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_the_drains_that_stay_never_exceed_the_budget(limit):
    rng = random.Random(20260520 + limit)
    for _ in range(400):
        crowd = deciders(rng, rng.randint(limit + 1, 30), budget.RECOUNT_AFTER_S)
        assert play(crowd, 100, limit, recount=True) <= limit


def test_without_the_recount_or_its_wait_the_budget_is_overshot():
    """What the re-count is for: counting alone lets every decider of the same moment
    see the same room; re-counting at once, before a second has passed, ranks by a
    listing that misses the drains stamped in the same second."""
    rng = random.Random(7)
    alone = [play(deciders(rng, 20, budget.RECOUNT_AFTER_S), 100, 2, recount=False)
             for _ in range(50)]
    assert max(alone) > 2, alone
    hasty = [play(deciders(rng, 20, 0.01), 100, 2, recount=True) for _ in range(400)]
    assert max(hasty) > 2, hasty


def test_after_a_race_exactly_the_budget_stays():
    """Undoing is no excuse for idling: the drains ranked first are each ranked within
    the budget by every listing that shows them, so they stay, and the budget is used
    to the full (20, 5 or 3 deciders in one moment for 2 places; 50 for 10)."""
    rng = random.Random(11)
    for count, limit in ((20, 2), (5, 2), (3, 2), (50, 10)):
        kept = [play(deciders(rng, count, budget.RECOUNT_AFTER_S), 100, limit, recount=True)
                for _ in range(100)]
        assert set(kept) == {limit}, (count, limit, kept)


# ------------------------------------------------------------------ the prolog's exit

def outcome(held: bool, probe: str = FAIL) -> check.Outcome:
    state = HealthState("gpu-1", 0.0, 0.1, None, "none", "",
                        (ProbeResult("gpu_count", probe, "7x", 0.0, 0.1),))
    return check.Outcome(state, [], check.FAILED, held)


def test_the_prolog_stops_a_job_only_on_a_node_slurm_holds_drained():
    """Its exit 1 makes Slurm drain the node itself ("Prolog error"), a drain outside
    the budget: so with the budget spent, or no count, the job runs."""
    assert check.exit_code(outcome(held=True), prolog=True) == check.FAILED
    assert check.exit_code(outcome(held=False), prolog=True) == check.OK
    assert check.exit_code(outcome(held=True, probe=PASS), prolog=True) == check.OK
    assert check.exit_code(outcome(held=False), prolog=False) == check.FAILED


# ------------------------------------------------------------------ the commands

@pytest.mark.parametrize("argv, env, says", [
    (["healthcheck", "--shape", "BM.GPU4.8", "--drain-budget", "lots"], None,
     "ocibench healthcheck: --drain-budget 'lots': not a drain budget"),
    (["healthcheck", "--shape", "BM.GPU4.8"], "1O%",
     "ocibench healthcheck: $OCIBENCH_DRAIN_BUDGET '1O%': not a drain budget"),
    (["sweep", "--nodes", "node1", "--drain", "--drain-budget", "200%"], None,
     "ocibench sweep: --drain-budget '200%': more than 100 % of a partition"),
])
def test_a_bad_budget_is_one_line_and_exit_2_before_anything_runs(
        argv, env, says, capsys, monkeypatch, tmp_path):
    from ocibench import cli

    monkeypatch.setenv("OCIBENCH_HEALTH_STATE", str(tmp_path / "state.json"))
    if env is None:
        monkeypatch.delenv(budget.ENV, raising=False)
    else:
        monkeypatch.setenv(budget.ENV, env)
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(says) and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "state.json").exists()   # no probe ran, nothing written
