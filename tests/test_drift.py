"""Drift, the lemon list (ocibench.history.drift): the rule on constructed series, over a
real SQLite history, repeat offenders from the node's events, and the sweep's verdict
and action (rerun, then drain if it persists; unjudged never drains)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocibench.history import drift
from ocibench.history.store import History, Record
from ocibench.metrics import Action, NodeVerdict
from ocibench.sweep import actions, plan, verdicts
from ocibench.sweep import run as sweeping
from ocibench.sweep.plan import PAIRS
from ocibench.sweep.verdicts import JobResult
from test_sweep import PAIR_CASE, UNJUDGED_REASON, local, names, pair_jobs  # noqa: F401

#: 21 sweeps of a quiet figure: 99, 100, 101, ... (MAD 1, scaled 1.48: 3 x MAD = 4.4 %).
QUIET = [99.0, 100.0, 101.0] * 7


# --------------------------------------------------------------------------- the rule

def test_a_sustained_drop_is_flagged():
    found = drift.flags(QUIET + [90.0, 90.0], 100.0, True)
    assert found is not None
    assert found.baseline == 100.0 and found.recent == 90.0
    assert found.drop == pytest.approx(0.10)
    assert found.threshold == pytest.approx(3 * drift.MAD_SCALE * 0.01)
    # one low sweep is half of the recent median (the last 2 sweeps): 8 % below is 3.5 %
    assert drift.flags(QUIET + [92.0], 100.0, True) is None
    assert drift.flags(QUIET + [92.0, 92.0], 100.0, True) is not None
    # 12 % below in one sweep moves the median of 2 (k = 2) 5.5 %: flagged at once
    assert drift.flags(QUIET + [88.0], 100.0, True) is not None


def test_noise_within_three_scaled_mads_is_not_flagged():
    # 4 % below: more than 3 unscaled MADs (3 %) and the 3 % floor, less than 3 scaled
    # MADs (4.4 %): noise for this figure
    assert drift.flags(QUIET + [96.0, 96.0], 100.0, True) is None
    assert drift.flags(QUIET + [95.0, 95.0], 100.0, True) is not None


def test_a_flat_figure_needs_the_three_percent_floor():
    flat = [100.0] * 21            # MAD 0: any dip would be "3 MADs"
    assert drift.flags(flat + [97.5, 97.5], 100.0, True) is None
    assert drift.flags(flat + [96.5, 96.5], 100.0, True) is not None


def test_a_node_low_but_equal_to_the_cluster_median_is_not_flagged():
    series = QUIET + [90.0, 90.0]
    assert drift.flags(series, 90.0, True) is None     # the whole cluster moved
    assert drift.flags(series, 89.0, True) is None     # the node is above the cluster
    assert drift.flags(series, None, True) is None     # no other node to compare with
    assert drift.flags(series, 95.0, True) is not None


def test_latency_drifts_upwards():
    latency = [1.98, 2.0, 2.02] * 7
    assert drift.flags(latency + [2.3, 2.3], 2.0, False) is not None
    assert drift.flags(latency + [2.3, 2.3], 2.0, True) is None     # a rate that rose
    assert drift.flags(latency + [1.7, 1.7], 2.0, False) is None    # a latency that fell
    assert drift.higher_is_better("us") is False
    assert drift.higher_is_better("GB/s") is True
    assert drift.higher_is_better("MB/s") is True
    assert drift.higher_is_better("furlongs") is None


def test_too_short_a_history_has_no_baseline():
    short = QUIET[:drift.MIN_BASELINE - 1] + [50.0, 50.0]
    assert drift.assess(short, True) is None
    assert drift.flags(short, 100.0, True) is None


def test_the_figure_mad_pools_nodes_at_their_own_levels():
    # a flat node at 10 and one at 1000 +- 3 %: each value is taken around its own node's
    # baseline, so the pool's deviations are 20 x 0 and 20 x 3 %: a MAD of 1.5 %
    flat = [10.0] * 20 + [0.0, 0.0]
    wide = [970.0, 1030.0] * 10 + [0.0, 0.0]
    assert drift.figure_mad([flat]) == 0.0
    assert drift.figure_mad([flat, wide]) == pytest.approx(drift.MAD_SCALE * 0.015)
    assert drift.figure_mad([flat[:5]]) is None          # too short a baseline


def test_offences_and_persistence_from_events():
    cycle = [(1.0, "flagged", "x"), (2.0, "drained", "y"), (3.0, "resumed", "z")]
    assert drift.offences(cycle) == 1
    assert drift.offences(cycle, before=3.0) == 0
    assert drift.offences([(1.0, "drained", "a"), (2.0, "resumed", "b")]) == 0  # no flag
    assert drift.offences(cycle + [(4.0, "flagged", "x")] + cycle) == 2
    assert drift.flagged_since(cycle + [(4.0, "flagged", "x")], 3.5)
    assert not drift.flagged_since(cycle, 0.5)       # drained and resumed since
    assert not drift.flagged_since(cycle, None)


# --------------------------------------------------------------------------- the history

NODES = [f"gpu-{i}" for i in range(1, 9)]
KEY = ("osu_bw", "buffers=D-D nodes=1", 268435456, "bandwidth")


def wobble(node: str, sweep: int) -> float:
    """A quiet figure near 390 GB/s: +-0.5 % by node and sweep, deterministic."""
    return 390.0 * (1 + 0.005 * (((NODES.index(node) * 7 + sweep * 3) % 5) - 2) / 2)


def rec(node: str, sweep: int, value: float, verdict: str = "pass") -> Record:
    check, variant, size, figure = KEY
    return Record(node=node, check=check, variant=variant, size=size, figure=figure,
                  value=value, unit="GB/s", verdict=verdict, time=1000.0 * sweep,
                  session=f"s{sweep}")


def fill(history: History, sweeps: int, low: dict[str, tuple[int, float]] | None = None,
         verdict: str = "pass") -> None:
    """``sweeps`` sweeps of every node; ``low``: node -> (first sweep, factor)."""
    low = low or {}
    for sweep in range(1, sweeps + 1):
        records = []
        for node in NODES:
            value = wobble(node, sweep)
            start, factor = low.get(node, (sweeps + 1, 1.0))
            if sweep >= start:
                value *= factor
            records.append(rec(node, sweep, value, verdict if sweep >= start else "pass"))
        history.add(records)


def test_drifting_names_the_node_whose_figure_fell(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        fill(history, 22, {"gpu-3": (21, 0.93)})
        found = drift.drifting(history, "gpu-3")
        assert [(d.node, d.check, d.figure) for d in found] == [("gpu-3", "osu_bw", "bandwidth")]
        (d,) = found
        assert d.drop == pytest.approx(0.07, abs=0.01)
        assert d.threshold == drift.MIN_DROP         # a quiet figure: the 3 % floor
        assert d.cluster_median == pytest.approx(390.0, rel=0.01)
        assert d.previous == 21000.0 and not d.repeat_offender
        assert "below its baseline" in d.reason and "cluster median" in d.reason
        for node in set(NODES) - {"gpu-3"}:
            assert drift.drifting(history, node) == [], node
        # as of sweep 20, before the drop: nothing
        assert drift.drifting(history, "gpu-3", now=20000.0) == []
        assert drift.drifting(history, "gpu-3", session="s21") == []   # not its newest


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
    assert reason.startswith(f"{actions.REASON_PREFIX} osu_bw buffers=D-D size 268435456 ")
    assert "7.0 % below its baseline 390.00 GB/s" in reason and len(reason) <= 200
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


def sweep_history(path: Path, sweeps: int) -> History:
    """The pair case's figure of 8 loopback nodes, ``sweeps`` sweeps; node3 23 %
    slower from sweep 21 (a latency: higher is worse)."""
    history = History(path)
    for sweep in range(1, sweeps + 1):
        history.add([Record(node=n, check="osu_latency", variant="buffers=H-H nodes=2",
                            size=1, figure="latency", unit="us", verdict="pass",
                            value=41.0 * (1.3 if n == "node3" and sweep >= 21 else 1.0)
                            * (1 + 0.002 * ((i + sweep) % 3)),
                            time=1000.0 * sweep, session=f"s{sweep}")
                     for i, n in enumerate(names(8))])
    return history


def test_the_sweep_flags_then_drains_a_drift_that_persists(tmp_path: Path, local):  # noqa: F811
    with sweep_history(tmp_path / "h.sqlite", 22) as history:
        first = sweeping.mark_drift(passing_nodes(local), history, "s22", 22500.0)
        assert first["node3"].verdict is NodeVerdict.DRIFTING
        assert first["node3"].action is Action.RERUN
        assert [k for _, k, _ in history.events("node3")] == ["flagged"]
        assert {n for n, r in first.items() if r.verdict is NodeVerdict.DRIFTING} == {"node3"}
        history.add([Record(node=n, check="osu_latency", variant="buffers=H-H nodes=2",
                            size=1, figure="latency", unit="us", verdict="pass",
                            value=53.3 if n == "node3" else 41.0, time=23000.0,
                            session="s23") for n in names(8)])
        second = sweeping.mark_drift(passing_nodes(local), history, "s23", 23500.0)
        assert second["node3"].action is Action.DRAIN
        assert second["node3"].drain_reason.startswith(
            "ocibench: osu_latency buffers=H-H nodes=2 size 1 latency 53.30 us ")
        assert "above its baseline" in second["node3"].drain_reason
        assert [k for _, k, _ in history.events("node3")] == ["flagged", "flagged"]


def test_the_sweep_never_drains_a_drifting_node_it_could_not_judge(tmp_path: Path):
    with sweep_history(tmp_path / "h.sqlite", 22) as history:
        history.add_event("node3", "flagged", 21500.0, "drifting", "s21")
        jobs = [JobResult(PAIR_CASE, p, PAIRS, failed=UNJUDGED_REASON)
                for p in plan.ring_pairs(names(8))]
        nodes = sweeping.judge_nodes(plan.make_plan(names(8), [PAIR_CASE]), jobs, 3.5, {})
        marked = sweeping.mark_drift(nodes, history, "s22", 22500.0)
        assert marked["node3"].verdict is NodeVerdict.UNJUDGED
        assert marked["node3"].action is Action.RERUN
        assert sweeping.drain_wanted(marked) == {}
        assert [k for _, k, _ in history.events("node3")] == ["flagged"]   # none added


def test_the_sweep_keeps_its_figures_then_judges_drift_before_the_drains(tmp_path: Path,
                                                                          local):  # noqa: F811
    path = tmp_path / "h.sqlite"
    with History(path) as history:   # 20 earlier sweeps: every pair at 41 us (+- 1 %)
        for sweep in range(1, 21):
            history.add([Record(node=n, check="osu_latency", variant="", size=1,
                                figure="latency", unit="us", verdict="no reference",
                                value=41.0 * (1 + 0.01 * ((i + sweep) % 3 - 1)),
                                time=1000.0 * sweep, session=f"s{sweep}")
                         for i, n in enumerate(names(8))])
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


def test_many_nodes_are_judged_as_each_alone(tmp_path: Path):
    with History(tmp_path / "h.sqlite") as history:
        fill(history, 22, {"gpu-3": (21, 0.93), "gpu-6": (21, 0.9)})
        together = drift.drifting_nodes(history, NODES)
        assert {n for n, d in together.items() if d} == {"gpu-3", "gpu-6"}
        for node in NODES:
            assert together[node] == drift.drifting(history, node), node
