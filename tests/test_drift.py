"""Drift, the lemon list (ocibench.history.drift): the rule on constructed residual
series, over real SQLite histories (a node against its peers, a fleet-wide shift as one
cluster event, baselines that start again at a node's own software change), repeat
offenders from the node's events, and the sweep's verdict and action (rerun, drain when
it persists; unjudged never drains)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ocibench.cluster.reason import REASON_PREFIX
from ocibench.history import drift
from ocibench.history.store import History, Record
from ocibench.metrics import Action, NodeVerdict
from ocibench.sweep import actions, plan, verdicts
from ocibench.sweep import run as sweeping
from ocibench.sweep.plan import PAIRS
from ocibench.sweep.verdicts import JobResult
from test_sweep import PAIR_CASE, UNJUDGED_REASON, local, names, pair_jobs  # noqa: F401

#: 21 sweeps of a node level with its peers, give or take 1 % (positive: worse).
QUIET = [-0.01, 0.0, 0.01] * 7
#: The scaled MAD of QUIET: 1.48 %, so 3 x MAD = 4.4 %.
MAD = drift.residual_mad([QUIET + [0.0, 0.0, 0.0]])


# --------------------------------------------------------------------------- the rule

def test_the_pooled_mad_is_the_scaled_median_deviation():
    assert MAD == pytest.approx(drift.MAD_SCALE * 0.01)
    # a node 5 % below its peers pools with a level one: each around its own median
    slow = [0.05] * 20 + [0.0] * 3
    wide = [-0.03, 0.03] * 10 + [0.0] * 3
    assert drift.residual_mad([slow]) == 0.0
    assert drift.residual_mad([slow, wide]) == pytest.approx(drift.MAD_SCALE * 0.015)
    assert drift.residual_mad([slow[:10]]) is None           # too short a baseline


def test_the_peers_median_leaves_the_node_out():
    ordered = [1.0, 2.0, 3.0, 10.0]
    assert [drift.median_without(ordered, i) for i in range(4)] == [3.0, 3.0, 2.0, 2.0]
    ordered = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert [drift.median_without(ordered, i) for i in range(5)] == [3.5, 3.5, 3.0, 2.5, 2.5]


def test_a_sustained_drop_is_flagged_and_persists_at_its_second_low_sweep():
    first = drift.flags(QUIET + [0.0, 0.10], MAD)      # one low sweep: median of 2 is 5 %
    assert first is not None and first.low == 1 and not first.persists
    assert first.recent == pytest.approx(0.05) and first.threshold == pytest.approx(3 * MAD)
    second = drift.flags(QUIET + [0.0, 0.10, 0.10], MAD)
    assert second is not None and second.low == 2 and second.persists
    assert second.drop == pytest.approx(0.10) and second.reference == 0.0


def test_one_low_sweep_among_normal_ones_never_persists():
    # the median of two values is their mean: one 30 % low sweep moves it 15 %; it is
    # flagged (the sweep reruns it) but never drained for it
    found = drift.flags(QUIET + [0.0, 0.30], MAD)
    assert found is not None and not found.persists
    assert drift.flags(QUIET + [0.30, 0.0], MAD) is not None   # the next sweep is normal
    assert not drift.assess(QUIET + [0.30, 0.0, 0.0], MAD).persists
    # two separate low sweeps, even with a normal one between: it persists
    found = drift.flags(QUIET + [0.30, 0.0, 0.30], MAD)
    assert found is not None and found.persists


def test_noise_within_three_scaled_mads_is_not_flagged():
    assert drift.flags(QUIET + [0.0, 0.04, 0.04], MAD) is None
    assert drift.flags(QUIET + [0.0, 0.05, 0.05], MAD) is not None


def test_a_flat_figure_needs_the_three_percent_floor():
    flat = [0.0] * 21                       # MAD 0: any dip would be "3 MADs"
    assert drift.flags(flat + [0.025, 0.025], 0.0) is None
    assert drift.flags(flat + [0.035, 0.035], 0.0) is not None


def test_a_return_to_normal_after_an_improvement_is_not_drift():
    # 8 sweeps level with its peers, then 12 sweeps 10 % better, then level again: its
    # baseline median is the better level, its peers' level is not a drop
    improved = [0.0] * 8 + [-0.10] * 12
    for back in range(1, 4):
        assert drift.flags(improved + [0.0] * back, MAD) is None, back
    # a node usually 5 % below its peers, better for 12 sweeps, back where it was
    slow = [0.05] * 30 + [0.0] * 12
    for back in range(1, 4):
        assert drift.flags(slow + [0.05] * back, MAD) is None, back
    # the same node falling further than its usual place: drift
    assert drift.flags(slow + [0.05, 0.12, 0.12], MAD).persists


def test_a_node_better_than_its_peers_is_never_flagged_for_it():
    better = [-0.10] * 21
    assert drift.flags(better + [-0.01, -0.01, -0.01], MAD) is None
    # sometimes 10 % better, otherwise level: never
    rng = random.Random(7)
    bimodal = [(-0.10 if rng.random() < 0.4 else 0.0) + rng.gauss(0, 0.005) for _ in range(60)]
    assert not any(drift.flags(bimodal[:t], MAD) for t in range(18, 61))


def test_a_node_always_below_its_peers_that_has_not_moved_is_no_drift():
    slow = [0.05 + v for v in QUIET]
    assert drift.flags(slow + [0.05, 0.05, 0.05], MAD) is None
    assert drift.flags(slow + [0.05, 0.12, 0.12], MAD) is not None


def test_too_short_a_baseline_is_no_flag():
    short = QUIET[:drift.MIN_BASELINE - 1] + [0.5, 0.5, 0.5]
    assert drift.assess(short, MAD) is None
    assert drift.assess(QUIET[:drift.MIN_BASELINE] + [0.5, 0.5, 0.5], MAD) is not None


def test_the_fleet_shift_is_signed_and_either_way():
    medians = [100.0, 100.5, 99.5] * 6
    assert not drift.fleet_shift(medians + [100.0, 100.0, 100.0]).beyond
    down = drift.fleet_shift(medians + [100.0, 90.0, 90.0])
    assert down.beyond and down.shift == pytest.approx(-0.10)
    up = drift.fleet_shift(medians + [100.0, 110.0, 110.0])
    assert up.beyond and up.shift == pytest.approx(0.10)
    assert drift.fleet_shift(medians[:10]) is None


def test_directions_of_units():
    assert drift.higher_is_better("us") is False
    assert drift.higher_is_better("GB/s") is True
    assert drift.higher_is_better("MB/s") is True
    assert drift.higher_is_better("furlongs") is None
    assert drift.worse_by(90.0, 100.0, True) == pytest.approx(0.10)
    assert drift.worse_by(110.0, 100.0, False) == pytest.approx(0.10)


def test_offences_from_events():
    cycle = [(1.0, "flagged", "x"), (2.0, "drained", "y"), (3.0, "resumed", "z")]
    assert drift.offences(cycle) == 1
    assert drift.offences(cycle, before=3.0) == 0
    assert drift.offences([(1.0, "drained", "a"), (2.0, "resumed", "b")]) == 0  # no flag
    assert drift.offences(cycle + [(4.0, "flagged", "x")] + cycle) == 2
    assert drift.flagged_since(cycle + [(4.0, "flagged", "x")], 3.5)
    assert not drift.flagged_since(cycle, 0.5)
    assert not drift.flagged_since(cycle, None)


# --------------------------------------------------------------------------- the history

NODES = [f"gpu-{i}" for i in range(1, 9)]
KEY = ("osu_bw", "buffers=D-D nodes=1", 268435456, "bandwidth")


def wobble(node: str, sweep: int) -> float:
    """A quiet figure near 390 GB/s: +-0.5 % by node and sweep, deterministic."""
    return 390.0 * (1 + 0.005 * (((NODES.index(node) * 7 + sweep * 3) % 5) - 2) / 2)


def rec(node: str, sweep: int, value: float, verdict: str = "pass", *, image: str = "OL8",
        driver: str = "550.127.08") -> Record:
    check, variant, size, figure = KEY
    return Record(node=node, check=check, variant=variant, size=size, figure=figure,
                  value=value, unit="GB/s", verdict=verdict, time=1000.0 * sweep,
                  session=f"s{sweep}", image=image, driver=driver)


def fill(history: History, sweeps: int, low: dict[str, tuple[int, float]] | None = None,
         verdict: str = "pass", first: int = 1) -> None:
    """Sweeps ``first`` .. ``sweeps`` of every node; ``low``: node -> (first sweep, factor)."""
    low = low or {}
    for sweep in range(first, sweeps + 1):
        records = []
        for node in NODES:
            value = wobble(node, sweep)
            start, factor = low.get(node, (sweeps + 1, 1.0))
            if sweep >= start:
                value *= factor
            records.append(rec(node, sweep, value, verdict if sweep >= start else "pass"))
        history.add(records)


def test_drifting_names_the_node_that_fell_behind_its_peers(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        fill(history, 22, {"gpu-3": (21, 0.93)})
        found = drift.drifting(history, "gpu-3")
        assert [(d.node, d.check, d.figure) for d in found] == [("gpu-3", "osu_bw", "bandwidth")]
        (d,) = found
        assert d.drop == pytest.approx(0.07, abs=0.01) and d.persists
        assert d.threshold == drift.MIN_DROP         # a quiet figure: the 3 % floor
        assert d.cluster_median == pytest.approx(390.0, rel=0.01)
        assert d.recent == pytest.approx(0.93 * 390.0, rel=0.01)
        assert d.previous == 21000.0 and not d.repeat_offender
        assert "below its peers' median" in d.reason and "persists" in d.reason
        for node in set(NODES) - {"gpu-3"}:
            assert drift.drifting(history, node) == [], node
        # as of sweep 20, before the drop: nothing; at sweep 21, one low sweep: rerun
        assert drift.drifting(history, "gpu-3", now=20000.0) == []
        (once,) = drift.drifting(history, "gpu-3", now=21000.0)
        assert not once.persists and "low in 1 of its last 3 sweeps" in once.reason
        assert drift.drifting(history, "gpu-3", session="s21") == []   # not its newest
        assert drift.cluster_events(history) == []


def test_failed_values_are_the_sweeps_finding_not_drift(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        fill(history, 22, {"gpu-3": (21, 0.5)}, verdict="fail")
        assert drift.drifting(history, "gpu-3") == []


def test_a_repeat_offender_is_named_as_one(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        fill(history, 22, {"gpu-3": (21, 0.93)})
        history.add_event("gpu-3", "flagged", 500.0, "drifting", "s0")
        history.add_event("gpu-3", "drained", 600.0, "ocibench: drifting", "s0")
        (d,) = drift.drifting(history, "gpu-3")
        assert not d.repeat_offender                 # drained, not yet returned
        history.add_event("gpu-3", "resumed", 700.0, "", "s0")
        (d,) = drift.drifting(history, "gpu-3")
        assert d.repeat_offender and d.offences == 1
        assert "repeat offender: flagged, drained and resumed 1 time before" in d.reason


def test_many_nodes_are_judged_as_each_alone(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        fill(history, 22, {"gpu-3": (21, 0.93), "gpu-6": (21, 0.9)})
        together = drift.drifting_nodes(history, NODES)
        assert {n for n, d in together.items() if d} == {"gpu-3", "gpu-6"}
        for node in NODES:
            assert together[node] == drift.drifting(history, node), node


def test_a_node_with_too_few_peers_is_not_judged(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        for sweep in range(1, 23):       # 3 nodes: 2 peers each, fewer than MIN_PEERS
            history.add([rec(n, sweep, wobble(n, sweep) * (0.8 if n == "gpu-3" and sweep > 20
                                                            else 1.0)) for n in NODES[:3]])
        assert drift.drifting_nodes(history, NODES[:3]) == {n: [] for n in NODES[:3]}
        assert drift.cluster_events(history) == []


def test_a_change_of_software_the_node_made_alone_starts_its_baseline_again(tmp_path: Path):
    ten = [f"gpu-{i}" for i in range(1, 11)]
    batch = ten[3:7]     # re-imaged together from sweep 21: a minority, 3 peers each

    def history_of(path: Path, image: str) -> History:
        # gpu-5 10 % behind its peers from sweep 21; the others level (+- 0.5 %)
        history = History(path)
        for sweep in range(1, 23):
            history.add([rec(n, sweep, 390.0 * (1 + 0.005 * ((i + sweep) % 3 - 1))
                             * (0.9 if n == "gpu-5" and sweep > 20 else 1.0),
                             image=image if n in batch and sweep > 20 else "OL8")
                         for i, n in enumerate(ten)])
        return history

    # on the image the fleet runs: drift
    with history_of(tmp_path / "same.sqlite", "OL8") as history:
        found = drift.drifting_nodes(history, ten)
        assert [n for n, d in found.items() if d] == ["gpu-5"]
    # the batch re-imaged: gpu-5's place among its peers (the batch) is new, its
    # baseline starts again: no flag until it has one
    with history_of(tmp_path / "own.sqlite", "OL9") as history:
        assert drift.drifting_nodes(history, ten) == {n: [] for n in ten}


# --------------------------------------------------------------------------- the fleet

FLEET = [f"node{i:03d}" for i in range(100)]
OLD, NEW = "550.127.08", "560.35.03"


def fleet_history(path: Path, sweeps: int, faulty: dict[str, float] | None = None,
                  change: int = 21, shift: float = 0.90, new_driver: str = NEW) -> History:
    """100 nodes, one osu_bw figure near 390 GB/s with 1 % noise per node and sweep
    (seeded); from sweep ``change``, every node on ``new_driver`` and ``shift`` times its
    value; ``faulty``: node -> a further factor from sweep ``change`` + 1."""
    rng = random.Random(30)
    history = History(path)
    levels = {n: 390.0 * (1 + rng.gauss(0, 0.01)) for n in FLEET}
    for sweep in range(1, sweeps + 1):
        records = []
        for node in FLEET:
            value = levels[node] * (1 + rng.gauss(0, 0.01))
            driver = OLD
            if sweep >= change:
                value, driver = value * shift, new_driver
            if sweep > change and node in (faulty or {}):
                value *= faulty[node]
            records.append(rec(node, sweep, value, driver=driver))
        history.add(records)
    return history


def test_a_driver_change_that_moves_every_node_is_one_cluster_event(tmp_path: Path):
    with fleet_history(tmp_path / "h.sqlite", 26) as history:
        for sweep in range(21, 27):       # every sweep after the change: no node drifts
            found = drift.drifting_nodes(history, FLEET, now=1000.0 * sweep)
            assert [n for n, d in found.items() if d] == [], sweep
        (event,) = drift.cluster_events(history)
        assert (event.check, event.figure, event.session) == ("osu_bw", "bandwidth", "s21")
        assert event.shift == pytest.approx(-0.10, abs=0.01) and event.worse
        assert (event.moved, event.measured) == (100, 100)
        assert event.software == f"driver {NEW} (was {OLD})"
        assert f"moved {100 * event.shift:+.1f} % (worse" in event.text
        assert f"with driver {NEW} (was {OLD})" in event.text
        assert "on 100 of 100 nodes since session s21" in event.text


def test_a_fleet_shift_with_no_software_change_is_one_event_too(tmp_path: Path):
    with fleet_history(tmp_path / "h.sqlite", 24, new_driver=OLD) as history:
        assert [n for n, d in drift.drifting_nodes(history, FLEET).items() if d] == []
        (event,) = drift.cluster_events(history)
        assert event.software is None and "no image or driver change" in event.text


def test_a_real_fault_in_the_same_window_is_still_found(tmp_path: Path):
    with fleet_history(tmp_path / "h.sqlite", 24, {"node042": 0.85}) as history:
        found = drift.drifting_nodes(history, FLEET)
        assert [n for n, d in found.items() if d] == ["node042"]
        (d,) = found["node042"]
        assert d.persists and d.drop == pytest.approx(0.15, abs=0.03)
        (event,) = drift.cluster_events(history)
        assert (event.moved, event.measured) == (100, 100)


# --------------------------------------------------------------------------- the sweep

def passing_nodes(shape) -> dict[str, verdicts.NodeResult]:
    jobs = pair_jobs(shape, [41.0, 40.0, 42.0, 40.5, 41.5, 39.0, 40.7, 41.9])
    nodes = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs, 3.5, {})
    assert {n.verdict for n in nodes.values()} == {NodeVerdict.PASS}
    return nodes


def a_drift(node: str) -> drift.Drift:
    return drift.Drift(node, "osu_bw", "buffers=D-D", 268435456, "bandwidth", 390.0, 362.7,
                       389.0, 0.07, 0.03, False, "osu_bw ...: drifting: 7.0 % below", "GB/s")


def test_a_passing_node_that_drifts_is_rerun_then_drained(local):  # noqa: F811
    nodes = passing_nodes(local)
    first = verdicts.mark_drifting(nodes, {"node3": [a_drift("node3")]})
    assert first["node3"].verdict is NodeVerdict.DRIFTING
    assert first["node3"].action is Action.RERUN and first["node3"].drain_reason is None
    assert sweeping.drain_wanted(first) == {}
    assert all(first[n] is nodes[n] for n in nodes if n != "node3")
    again = verdicts.mark_drifting(nodes, {"node3": [a_drift("node3")]}, {"node3"})
    assert again["node3"].action is Action.DRAIN
    reason = again["node3"].drain_reason
    assert reason.startswith(f"{REASON_PREFIX} osu_bw buffers=D-D size 268435456 ")
    assert "7.0 % below its baseline 390.00 GB/s" in reason and len(reason) <= 200
    assert "low in 2+ of its last 3 sweeps" in reason
    assert sweeping.drain_wanted(again) == {"node3": reason}
    result = sweeping.Sweep(plan.make_plan(names(8), [PAIR_CASE]), nodes=first)
    assert result.exit_status() == sweeping.EXIT_FINDING


def test_a_failed_or_unjudged_node_keeps_its_verdict(local):  # noqa: F811
    nodes = passing_nodes(local)
    jobs = [JobResult(PAIR_CASE, p, PAIRS, failed=UNJUDGED_REASON)
            for p in plan.ring_pairs(names(8))]
    unjudged = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs, 3.5, {})
    failed = dict(nodes, node4=verdicts.NodeResult(NodeVerdict.FAIL, "too slow", Action.DRAIN,
                                                   {}, "ocibench: too slow"))
    for before in (unjudged, failed):
        marked = verdicts.mark_drifting(before, {n: [a_drift(n)] for n in before},
                                        set(before))
        for node, result in marked.items():
            if before[node].verdict is not NodeVerdict.PASS:
                assert result is before[node], node
    marked = verdicts.mark_drifting(unjudged, {"node3": [a_drift("node3")]}, {"node3"})
    assert marked["node3"].verdict is NodeVerdict.UNJUDGED
    assert sweeping.drain_wanted(marked) == {}       # unjudged never drains


def latency(history: History, sweep: int, slow: dict[str, float]) -> None:
    """One sweep of the pair case's figure of 8 loopback nodes; ``slow``: node ->
    factor (a latency: higher is worse)."""
    history.add([Record(node=n, check="osu_latency", variant="buffers=H-H nodes=2",
                        size=1, figure="latency", unit="us", verdict="pass",
                        value=41.0 * slow.get(n, 1.0) * (1 + 0.002 * ((i + sweep) % 3)),
                        time=1000.0 * sweep, session=f"s{sweep}")
                 for i, n in enumerate(names(8))])


def test_the_sweep_reruns_one_low_sweep_and_drains_two(tmp_path: Path, local):  # noqa: F811
    with History(tmp_path / "h.sqlite") as history:
        for sweep in range(1, 21):
            latency(history, sweep, {})
        latency(history, 21, {"node3": 1.3})
        first = sweeping.mark_drift(passing_nodes(local), history, "s21", 21500.0)
        assert {n for n, r in first.items() if r.verdict is NodeVerdict.DRIFTING} == {"node3"}
        assert first["node3"].action is Action.RERUN
        assert [k for _, k, _ in history.events("node3")] == ["flagged"]
        latency(history, 22, {"node3": 1.3})
        second = sweeping.mark_drift(passing_nodes(local), history, "s22", 22500.0)
        assert second["node3"].action is Action.DRAIN
        assert second["node3"].drain_reason.startswith(
            "ocibench: osu_latency buffers=H-H nodes=2 size 1 latency 53.")
        assert "above its baseline" in second["node3"].drain_reason
        assert [k for _, k, _ in history.events("node3")] == ["flagged", "flagged"]


def test_one_low_sweep_then_a_normal_one_is_never_drained(tmp_path: Path, local):  # noqa: F811
    with History(tmp_path / "h.sqlite") as history:
        for sweep in range(1, 21):
            latency(history, sweep, {})
        latency(history, 21, {"node3": 2.0})         # one very slow sweep
        first = sweeping.mark_drift(passing_nodes(local), history, "s21", 21500.0)
        assert first["node3"].action is Action.RERUN
        latency(history, 22, {})                     # and a normal one: the mean of the
        second = sweeping.mark_drift(passing_nodes(local), history, "s22", 22500.0)
        assert second["node3"].action is not Action.DRAIN   # two is still 50 % worse
        assert sweeping.drain_wanted(second) == {}


def test_the_sweep_never_drains_a_drifting_node_it_could_not_judge(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        for sweep in range(1, 23):
            latency(history, sweep, {"node3": 1.3} if sweep > 20 else {})
        history.add_event("node3", "flagged", 21500.0, "drifting", "s21")
        jobs = [JobResult(PAIR_CASE, p, PAIRS, failed=UNJUDGED_REASON)
                for p in plan.ring_pairs(names(8))]
        nodes = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs, 3.5, {})
        marked = sweeping.mark_drift(nodes, history, "s22", 22500.0)
        assert marked["node3"].verdict is NodeVerdict.UNJUDGED
        assert marked["node3"].action is Action.RERUN
        assert sweeping.drain_wanted(marked) == {}
        assert [k for _, k, _ in history.events("node3")] == ["flagged"]   # none added


def earlier_sweeps(path: Path) -> None:
    """20 sweeps of the figure the sweep's pair jobs keep: every pair at 41 us (+- 1 %)."""
    with History(path) as history:
        for sweep in range(1, 21):
            history.add([Record(node=n, check="osu_latency", variant="", size=1,
                                figure="latency", unit="us", verdict="no reference",
                                value=41.0 * (1 + 0.01 * ((i + sweep) % 3 - 1)),
                                time=1000.0 * sweep, session=f"s{sweep}")
                         for i, n in enumerate(names(8))])


def test_the_sweep_keeps_its_figures_then_judges_drift_before_the_drains(tmp_path: Path,
                                                                          local):  # noqa: F811
    path = tmp_path / "h.sqlite"
    earlier_sweeps(path)
    # this sweep: node3's two pairs 20 % slower; outliers off, as on the loopback cluster
    jobs = pair_jobs(local, [41.0, 49.2, 49.2, 41.0, 41.0, 41.0, 41.0, 41.0])
    the_plan = plan.make_plan(names(8), [PAIR_CASE])
    result = sweeping.Sweep(the_plan, jobs=jobs, outlier_k=1e6,
                            nodes=sweeping.judge_nodes(the_plan, jobs, 1e6, {}))
    assert result.nodes["node3"].verdict is NodeVerdict.PASS
    sweeping._drift(result, path)
    assert result.errors == [] and result.kept is not None
    assert result.nodes["node3"].verdict is NodeVerdict.DRIFTING, result.nodes["node3"]
    assert result.nodes["node3"].action is Action.RERUN
    assert result.cluster_events == [] and result.to_dict()["cluster_events"] == []
    with History(path) as history:
        assert [k for _, k, _ in history.events("node3")] == ["flagged"]
    # what the sweep drains and returns becomes the node's events
    result.drain = actions.DrainDecision(2, {"node3": "ocibench: x"}, None)
    result.drained, result.undrained = ["node3"], ["node5"]
    sweeping._keep_events(result, path)
    with History(path) as history:
        assert [(k, r) for _, k, r in history.events("node3")][1:] == \
            [("drained", "ocibench: x")]
        assert [k for _, k, _ in history.events("node5")] == ["resumed"]
    # a history that is no history: an error of the sweep, and no drift
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    result = sweeping.Sweep(the_plan, jobs=jobs, outlier_k=1e6,
                            nodes=sweeping.judge_nodes(the_plan, jobs, 1e6, {}))
    sweeping._drift(result, bad)
    assert len(result.errors) == 1 and "drift not judged" in result.errors[0]
    assert result.nodes["node3"].verdict is NodeVerdict.PASS


def test_the_sweep_shows_a_fleet_shift_once_and_drifts_no_node(tmp_path: Path,
                                                                local):  # noqa: F811
    path = tmp_path / "h.sqlite"
    earlier_sweeps(path)             # then every node 20 % slower
    jobs = pair_jobs(local, [49.2] * 8)
    the_plan = plan.make_plan(names(8), [PAIR_CASE])
    result = sweeping.Sweep(the_plan, jobs=jobs, outlier_k=1e6,
                            nodes=sweeping.judge_nodes(the_plan, jobs, 1e6, {}))
    sweeping._drift(result, path)
    assert result.errors == []
    assert {r.verdict for r in result.nodes.values()} == {NodeVerdict.PASS}
    (line,) = result.cluster_events
    assert line.startswith("osu_latency") and "(worse" in line and "on 8 of 8 nodes" in line


def test_the_latest_flag_is_the_last_sweeps_word(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        fill(history, 22)
        assert drift.latest_flag(history, "gpu-3") is None
        history.add_event("gpu-3", "flagged", 22500.0, "drifting: x", "s22")
        assert drift.latest_flag(history, "gpu-3") == (22500.0, "drifting: x")
        history.add([rec(n, 23, wobble(n, 23)) for n in NODES])   # a sweep that found none
        assert drift.latest_flag(history, "gpu-3") is None
        history.add_event("gpu-3", "flagged", 23500.0, "drifting: y", "s23")
        history.add_event("gpu-3", "drained", 23600.0, "ocibench: y", "s23")
        assert drift.latest_flag(history, "gpu-3") is None

