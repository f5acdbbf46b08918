"""The per-node results store (ocibench.history.store) on real SQLite files, the sweep
and ``ocibench history add`` writing to it, and ``ocibench history`` reading it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ocibench import paths
from ocibench.history import store
from ocibench.history.store import History, HistoryError, Record
from ocibench.metrics import NodeVerdict
from ocibench.sweep import plan
from ocibench.sweep import run as sweeping
from ocibench.sweep.plan import GROUPS, SINGLE
from ocibench.sweep.verdicts import JobResult
from test_sweep import (  # the sweep's own jobs and shape fixture
    GROUP_CASE,
    PAIR_CASE,
    SINGLE_CASE,
    latency_row,
    local,  # noqa: F401  (a fixture)
    names,
    pair_jobs,
)

VARIANT = "buffers=D-D nodes=2"


def rec(node: str, value: float, time: float, session: str, **kw) -> Record:
    fields = dict(check="osu_bw", variant=VARIANT, size=8192, figure="bandwidth",
                  unit="MB/s", verdict="pass", documented=100.0, floor=90.0)
    fields.update(kw)
    return Record(node=node, value=value, time=time, session=session, **fields)


def test_add_and_read_back(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        added = history.add([rec("gpu-1", 99.0, 10.0, "s1", image="OL8", driver="550.1"),
                             rec("gpu-1", 97.0, 20.0, "s2"),
                             rec("gpu-1", 4.1, 20.0, "s2", check="stream", variant="",
                                 size=None, figure="Triad", unit="GB/s")])
        assert added == 3
        series = history.series("gpu-1", "osu_bw", VARIANT, 8192, "bandwidth")
        assert [(r.value, r.session, r.image, r.driver) for r in series] == \
            [(99.0, "s1", "OL8", "550.1"), (97.0, "s2", None, None)]
        assert history.series("gpu-1", "osu_bw", VARIANT, 8192, "bandwidth", since=15.0) \
            == series[1:]
        latest = history.latest("gpu-1")
        assert sorted((r.check, r.value, r.size) for r in latest) == \
            [("osu_bw", 97.0, 8192), ("stream", 4.1, None)]
        assert history.nodes() == ["gpu-1"]
    # reopened read-only: the same records
    with History(tmp_path / "h.sqlite", readonly=True) as history:
        assert history.latest("gpu-1") == latest


def test_the_same_session_twice_adds_nothing(tmp_path: Path) -> None:
    records = [rec(f"gpu-{i}", 90.0 + i, 10.0, "sweep-1") for i in range(3)]
    with History(tmp_path / "h.sqlite") as history:
        assert history.add(records) == 3
        assert history.add(records) == 0
        assert len(history.series("gpu-0", "osu_bw", VARIANT, 8192, "bandwidth")) == 1


def test_cluster_median_counts_each_node_once(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        # gpu-1 swept three times (old values 10): only its newest (95) counts
        history.add([rec("gpu-1", 10.0, t, f"s{t}") for t in (1.0, 2.0)])
        history.add([rec("gpu-1", 95.0, 3.0, "s3"), rec("gpu-2", 99.0, 3.0, "s3"),
                     rec("gpu-3", 100.0, 3.0, "s3")])
        assert history.cluster_median("osu_bw", VARIANT, 8192, "bandwidth") == 99.0
        assert history.cluster_median("osu_bw", VARIANT, 8192, "latency") is None
        assert history.cluster_medians("osu_bw", VARIANT, 8192, "bandwidth") == \
            [(1.0, 10.0), (2.0, 10.0), (3.0, 99.0)]


def test_events_in_time_order(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        history.add_event("gpu-1", "drained", 20.0, "ocibench: slow")
        history.add_event("gpu-1", "flagged", 10.0, "drifting")
        history.add_event("gpu-2", "flagged", 5.0, "drifting")
        assert history.events("gpu-1") == [(10.0, "flagged", "drifting"),
                                           (20.0, "drained", "ocibench: slow")]
        with pytest.raises(HistoryError, match="event kind 'rebooted'"):
            history.add_event("gpu-1", "rebooted", 30.0, "")


def test_a_value_in_another_unit_is_kept_in_the_series_unit(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        history.add([rec("gpu-1", 1000.0, 1.0, "s1")])
        history.add([rec("gpu-1", 8.0, 2.0, "s2", unit="Gb/s", documented=None, floor=None)])
        assert [(r.value, r.unit) for r in history.series(
            "gpu-1", "osu_bw", VARIANT, 8192, "bandwidth")] == [(1000.0, "MB/s"),
                                                               (1000.0, "MB/s")]


def test_a_malformed_record_adds_nothing(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        with pytest.raises(HistoryError, match=r"record 1\.value: nan"):
            history.add([rec("gpu-1", 1.0, 1.0, "s"), rec("gpu-2", float("nan"), 1.0, "s")])
        assert history.nodes() == []


def test_not_a_history_is_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database at all\n" * 100)
    with pytest.raises(HistoryError, match="notes.sqlite: not an ocibench history "
                       r"\(file is not a database\)"):
        History(text)
    assert text.read_text().startswith("not a database")   # never changed
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(HistoryError, match="other.sqlite: not an ocibench history"):
        History(other)
    with pytest.raises(HistoryError, match="no history there"):
        History(tmp_path / "absent.sqlite", readonly=True)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    History(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match="schema 2, written by a newer ocibench"):
        History(path, readonly=True)


def test_history_db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCIBENCH_HISTORY_DB", str(tmp_path / "x.sqlite"))
    assert paths.history_db() == tmp_path / "x.sqlite"
    monkeypatch.delenv("OCIBENCH_HISTORY_DB")
    monkeypatch.setenv("OCIBENCH_CACHE", str(tmp_path / "cache"))
    assert paths.history_db() == tmp_path / "cache" / "history.sqlite"


# --------------------------------------------------------------------------- the sweep



def test_a_sweep_keeps_each_nodes_figure_from_the_job_its_verdict_comes_from(
        local, tmp_path):  # noqa: F811
    # node3's link adds 4 ms: both its pairs are slow and the sweep pins them on it;
    # node2 and node4 pass on their other pairs, and those are the values they keep.
    values = [41.0, 4040.0, 4052.0, 40.0, 42.5, 39.0, 40.7, 41.9]
    the_plan = plan.make_plan(names(8), [PAIR_CASE])
    result = sweeping.Sweep(the_plan)
    result.jobs = pair_jobs(local, values)
    for job in result.jobs:
        job.params = {"buffers": "H-H", "nodes": 2, "sizes": "1:1"}
    result.nodes = sweeping.judge_nodes(the_plan, result.jobs, 3.5, {})
    assert result.nodes["node3"].verdict is NodeVerdict.OUTLIER
    assert result.keep(tmp_path / "h.sqlite") == (8, 8)
    with History(tmp_path / "h.sqlite", readonly=True) as history:
        kept = {n: history.latest(n) for n in history.nodes()}
    assert {n: [r.value for r in found] for n, found in kept.items()} == {
        "node1": [41.0], "node2": [41.0], "node3": [4040.0], "node4": [40.0],
        "node5": [40.0], "node6": [42.5], "node7": [39.0], "node8": [40.7]}
    record = kept["node3"][0]
    assert (record.check, record.variant, record.size, record.figure, record.unit,
            record.session, record.time) == ("osu_latency", "buffers=H-H nodes=2", 1,
                                             "latency", "us", result.session,
                                             result.started)
    # the same sweep kept again adds nothing
    assert result.keep(tmp_path / "h.sqlite") == (0, 8)


def test_a_group_failure_pinned_on_another_node_is_not_kept_for_its_members(
        local, tmp_path):  # noqa: F811
    the_plan = plan.make_plan(names(8), [SINGLE_CASE, GROUP_CASE])
    singles = [JobResult(SINGLE_CASE, (n,), SINGLE, rows=[latency_row(local, 9.0 if n == "node5"
                                                                      else 1.0, nodes=1)])
               for n in names(8)]
    # node5's group printed its figure, then failed
    groups = [JobResult(GROUP_CASE, g, GROUPS, rows=[latency_row(local, 90.0 if "node5" in g
                                                                 else 30.0, nodes=4)],
                        failed="benchmark crashed" if "node5" in g else None)
              for g in the_plan.groups[4]]
    result = sweeping.Sweep(the_plan)
    result.jobs = singles + groups
    result.nodes = sweeping.judge_nodes(the_plan, result.jobs, 3.5, {})
    # node5 is slow on its own; its group (node5..node8) is pinned on it
    assert result.nodes["node5"].verdict is NodeVerdict.FAIL
    assert result.nodes["node6"].verdict is NodeVerdict.PASS
    assert "group node5+node6+node7+node8 did not" in result.nodes["node6"].reason
    result.keep(tmp_path / "h.sqlite")
    with History(tmp_path / "h.sqlite", readonly=True) as history:
        assert sorted((r.check, r.value) for r in history.latest("node5")) == \
            [("osu_allreduce", 90.0), ("osu_latency", 9.0)]
        assert sorted((r.check, r.value) for r in history.latest("node6")) == \
            [("osu_latency", 1.0)]
        assert sorted((r.check, r.value) for r in history.latest("node1")) == \
            [("osu_allreduce", 30.0), ("osu_latency", 1.0)]
