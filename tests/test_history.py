"""The per-node results store (ocibench.history.store) on real SQLite files, the sweep
and ``ocibench history add`` writing to it, and ``ocibench history`` reading it."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ocibench import cli, paths
from ocibench.history import current, store
from ocibench.history.store import History, HistoryError, Record
from ocibench.metrics import NodeVerdict
from ocibench.reframe.runreport import SESSION_EXTRA
from ocibench.sweep import plan
from ocibench.sweep import run as sweeping
from ocibench.sweep.plan import GROUPS, SINGLE
from ocibench.sweep.verdicts import JobResult
from test_drift import earlier_sweeps
from test_report import TINY_CHECK, reframe_report  # noqa: F401  (a fixture: a real run)
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


def test_events_in_the_order_they_were_kept(tmp_path: Path) -> None:
    # the newest event is the one kept last, whatever its clock said (issue 30 item 3)
    with History(tmp_path / "h.sqlite") as history:
        history.add_event("gpu-1", "drained", 20.0, "ocibench: slow")
        history.add_event("gpu-1", "flagged", 10.0, "drifting")
        history.add_event("gpu-2", "flagged", 5.0, "drifting")
        assert history.events("gpu-1") == [(20.0, "drained", "ocibench: slow"),
                                           (10.0, "flagged", "drifting")]
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


#: A time no clock should show: the year 3000 (a node or login node with a bad clock).
YEAR_3000 = 32503680000.0


def test_a_record_stamped_ahead_of_the_clock_is_refused_with_one_line(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        with pytest.raises(HistoryError) as err:
            history.add([rec("gpu-1", 1.0, 1.0, "s"), rec("gpu-2", 1.0, YEAR_3000, "s"),
                         rec("gpu-3", 1.0, YEAR_3000, "s")])
        message = str(err.value)
        assert "\n" not in message
        assert message.startswith("record 1.time: 32503680000.0 (3000-01-01 00:00:00 UTC) "
                                  "of gpu-2 osu_bw bandwidth, session s (and 1 more): ")
        assert "ahead of this machine's clock" in message and "nothing added" in message
        assert history.nodes() == []           # all or nothing
        # the skew allowed, and not a second more, against the clock given
        allowed = 1000.0 + store.MAX_SKEW_S
        assert history.add([rec("gpu-1", 1.0, allowed, "s1")], now=1000.0) == 1
        with pytest.raises(HistoryError, match=r"record 0\.time: 1301\.0 .* 301 s ahead "
                                               r".* the 300 s allowed"):
            history.add([rec("gpu-1", 1.0, allowed + 1, "s2")], now=1000.0)
        with pytest.raises(HistoryError, match=r"event time .* of gpu-1: .* ahead"):
            history.add_event("gpu-1", "flagged", YEAR_3000, "drifting")
        assert history.events("gpu-1") == []


def test_the_newest_record_is_the_last_to_arrive_not_the_largest_time(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        history.add([rec("gpu-1", 99.0, 1000.0, "s1")])
        # kept before the skew was refused (or by a machine whose clock said 3000)
        history.add([rec("gpu-1", 80.0, YEAR_3000, "bad-clock", verdict="fail")],
                    now=YEAR_3000)
        history.add([rec("gpu-1", 98.0, 2000.0, "s3")])
        assert [r.value for r in history.latest("gpu-1")] == [98.0]
        series = history.series("gpu-1", "osu_bw", VARIANT, 8192, "bandwidth")
        assert [(r.value, r.session) for r in series] == \
            [(99.0, "s1"), (80.0, "bad-clock"), (98.0, "s3")]
        # its time cannot be trusted: read as the newest time that came before it
        assert series[1].time == 1000.0
        assert [r.value for r in history.history("gpu-1")] == [99.0, 80.0, 98.0]


def test_a_run_from_the_year_3000_neither_drains_forever_nor_undoes_a_resume(
        tmp_path: Path) -> None:
    import time

    from ocibench import shapes
    from ocibench.health import probes
    from ocibench.health.state import FAIL, PASS

    db = tmp_path / "h.sqlite"

    def history_probe(since: float = 0.0) -> tuple[str, str]:
        ctx = probes.Context(root=tmp_path, shape=shapes.load("BM.GPU4.8"), node="gpu-1",
                             deadline=time.monotonic() + 20, tool_timeout=1.0,
                             previous=None, history_db=db, history_since=since)
        (finding,) = probes.probe_history(ctx)
        return finding.state, finding.evidence

    with History(db) as history:
        history.add([rec("gpu-1", 99.0, 1000.0, "s1")])
        with pytest.raises(HistoryError, match="ahead of this machine's clock"):
            history.add([rec("gpu-1", 80.0, YEAR_3000, "bad", verdict="fail")])
    current.publish_all(db)                    # what the healthcheck reads (history.current)
    assert history_probe()[0] == PASS          # refused: nothing held against the node
    with History(db) as history:               # a history that holds one all the same
        history.add([rec("gpu-1", 80.0, YEAR_3000, "bad", verdict="fail")], now=YEAR_3000)
    current.publish_all(db)
    state, evidence = history_probe()
    assert state == FAIL, evidence             # the node's latest run failed
    resumed = time.time()                      # a person resumes the node
    state, evidence = history_probe(since=resumed)
    assert state == PASS and "failed before a person resumed" in evidence, evidence
    with History(db) as history:               # the next sweep is the node's latest
        history.add([rec("gpu-1", 98.0, resumed + 60, "s3")], now=resumed + 60)
    current.publish_all(db)
    assert history_probe()[0] == PASS


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
    with pytest.raises(HistoryError, match=f"schema {store.SCHEMA_VERSION + 1}, written by a newer ocibench"):
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


# --------------------------------------------------------------------------- the command

def history_cli(*argv: str) -> tuple[int, str, str]:
    """`ocibench history ...` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(["history", *argv])
        except SystemExit as exit_:   # argparse's usage errors
            status = exit_.code
    return status, out.getvalue(), err.getvalue()


def test_history_add_of_a_real_reframe_run(reframe_report, tmp_path):  # noqa: F811
    db = tmp_path / "h.sqlite"
    status, out, err = history_cli("add", "--db", str(db), str(reframe_report))
    assert status == 0, err
    session = json.loads(reframe_report.read_text())["session_info"]["uuid"]
    assert "5 added, 0 already kept" in out
    # the same run again adds nothing
    status, out, _ = history_cli("add", "--db", str(db), str(reframe_report))
    assert status == 0 and "0 added, 5 already kept" in out
    host = json.loads(reframe_report.read_text())["runs"][0]["testcases"][0]["job_nodelist"][0]
    with History(db, readonly=True) as history:
        assert history.nodes() == [host]
        bw = [r for r in history.latest(host) if r.check == "osu_bw"]
    # osu_bw as on BM.Optimized3.36 (test_report.TINY_CHECK): judged against the
    # documented 12,254.16 MB/s, its floor the tolerance's lower bound
    assert [(r.variant, r.size, r.figure, r.value, r.unit, r.verdict, r.documented,
             r.session) for r in bw] == [("buffers=H-H nodes=2", 268435456, "bandwidth",
                                          12000.0, "MB/s", "pass", 12254.16, session)]
    assert bw[0].floor is not None and bw[0].floor < 12000.0
    assert bw[0].image is not None and ", kernel " in bw[0].image   # from provenance.json


def test_the_table_and_its_filters(tmp_path):
    db = tmp_path / "h.sqlite"
    day = 86400.0
    with History(db) as history:
        history.add([rec("gpu-1", 99.0, 10 * day, "s1"), rec("gpu-1", 97.0, 20 * day, "s2"),
                     rec("gpu-2", 98.0, 20 * day, "s2"),
                     rec("gpu-2", 4.0, 20 * day, "s2", check="stream", variant="threads=96",
                         size=None, figure="Triad", unit="GB/s", documented=None, floor=None)])
    status, out, err = history_cli("--db", str(db))
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:6] == ["node", "check", "variant", "size", "figure", "value"]
    # each node's newest figures: gpu-1's 97 (not its older 99), gpu-2's two
    assert [line.split()[:2] + [line.split()[-8]] for line in lines[1:]] == [
        ["gpu-1", "osu_bw", "97.00"], ["gpu-2", "osu_bw", "98.00"],
        ["gpu-2", "stream", "4.00"]]
    status, out, _ = history_cli("--db", str(db), "--node", "gpu-1")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["gpu-1", "gpu-1"]
    assert "99.00" in out and "97.00" in out
    status, out, _ = history_cli("--db", str(db), "--node", "gpu-1", "--since", "1970-01-15")
    assert "99.00" not in out and "97.00" in out
    status, out, _ = history_cli("--db", str(db), "--check", "stream")
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [["gpu-2", "stream"]]


def test_the_page_shows_each_figure_over_time(tmp_path):
    db, page = tmp_path / "h.sqlite", tmp_path / "out" / "history.html"
    with History(db) as history:
        history.add([rec(f"gpu-{n}", 95.0 + n, t * 86400.0, f"s{t}", image="OL8 <b>")
                     for n in range(3) for t in range(1, 5)])
    status, out, err = history_cli("--db", str(db), "--node", "gpu-1", "--html", str(page))
    assert status == 0, err
    text = page.read_text()
    assert "<h1>gpu-1: its figures over time</h1>" in text
    assert "osu_bw buffers=D-D nodes=2 bandwidth 8 KiB" in text
    assert text.count("<svg") == 1
    assert "OL8 &lt;b&gt;" in text and "OL8 <b>" not in text   # escaped
    assert "cluster&#39;s\nmedian per session" in text or "median per session" in text


@pytest.mark.parametrize("argv, words", [
    (["--node", "gpu-9"], "--node gpu-9: no such node in"),
    (["--check", "osu_nope"], "--check osu_nope: unknown check"),
    (["--since", "last tuesday"], "'last tuesday' is neither a date"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, argv, words):
    db = tmp_path / "h.sqlite"
    with History(db) as history:
        history.add([rec("gpu-1", 99.0, 10.0, "s1")])
    status, out, err = history_cli("--db", str(db), *argv)
    assert status == 2 and words in err, err
    assert "Traceback" not in err and out == ""


def test_an_unreadable_history_is_one_line_and_exit_2(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("x" * 4096)
    for db, words in ((text, "not an ocibench history"),
                      (tmp_path / "absent.sqlite", "no history there")):
        status, _, err = history_cli("--db", str(db))
        assert status == 2 and words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("node", ["\x1b]0;owned\x07gpu-1", "gpu 1", "../gpu-1", "-x"])
def test_a_node_name_that_is_no_host_name_is_refused_at_the_door(tmp_path, node):
    """A run report's node list, the history's records: a name is a host name, shown
    escaped where it is refused (a terminal escape is never printed raw)."""
    db, report = tmp_path / "h.sqlite", tmp_path / "run.json"
    case = {"name": "osu_bw_check", "result": "pass", "check_name": "osu_bw",
            "job_nodelist": ["gpu-2", node], "perfvalues": {}}
    report.write_text(json.dumps({"session_info": {"data_version": "4.2"},
                                  "runs": [{"testcases": [case]}]}))
    status, out, err = history_cli("add", "--db", str(db), str(report))
    assert status == 2 and len(err.splitlines()) == 1, err
    assert f"runs[0].testcases[0].job_nodelist[1]: {ascii(node)} is not a host name" in err
    assert "\x1b" not in err + out and "\x07" not in err + out
    assert not db.exists()
    with pytest.raises(HistoryError, match=r"record 0\.node: .* is not a host name"), \
            History(db) as history:
        history.add([rec(node, 99.0, 10.0, "s1")])
    status, out, err = history_cli("--db", str(db), f"--node={node}")
    assert status == 2 and "is not a host name" in err and "\x1b" not in err, err


def _hot_journal(db: Path) -> None:
    """A writer that dies mid-commit (os._exit in its transaction, after SQLite wrote
    the original pages to the journal): the journal is left hot."""
    code = ("import os, sqlite3\n"
            f"db = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "db.execute('PRAGMA cache_size = 1')\n"   # spill the changed pages to the file
            "db.execute('BEGIN IMMEDIATE')\n"
            "db.execute('UPDATE results SET value = value * 2')\n"
            "db.execute('DELETE FROM sessions')\n"
            "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert Path(f"{db}-journal").stat().st_size > 0


def test_a_history_a_writer_died_in_is_read_as_it_was(tmp_path):
    """A read-only open cannot roll a hot journal back (SQLITE_READONLY_ROLLBACK): its
    readers called the history "not an ocibench history".  A reader that may write
    rolls it back, as the next writer would, and reads the history as committed."""
    db = tmp_path / "h.sqlite"
    with History(db) as history:
        history.add([rec("gpu-1", 90.0 + i, 10.0 * i, f"s{i}") for i in range(300)])
    _hot_journal(db)
    with History(db, readonly=True) as history:
        assert [r.value for r in history.latest("gpu-1")] == [389.0]
    assert not Path(f"{db}-journal").exists()
    status, out, err = history_cli("--db", str(db), "--node", "gpu-1")
    assert status == 0 and out.count("gpu-1") == 300, err


def test_a_hot_journal_a_reader_may_not_roll_back_is_named():
    """Where the reader may not write the history's directory (a node's user, the
    history on shared storage): one line that says what happened and who mends it,
    the journal left for the next writer."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("runs the reader as nobody: needs root and setpriv")
    src = Path(store.__file__).resolve().parents[2]
    shared = Path(tempfile.mkdtemp(prefix="ocibench-journal-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        db = shared / "h.sqlite"
        with History(db) as history:
            history.add([rec("gpu-1", 90.0 + i, 10.0 * i, f"s{i}") for i in range(300)])
        _hot_journal(db)
        reader = ("from pathlib import Path\n"
                  "from ocibench.history.store import History, HistoryError\n"
                  "try:\n"
                  f"    History(Path({str(db)!r}), readonly=True)\n"
                  "except HistoryError as err:\n"
                  "    print(err)\n")
        done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup",
                               "--clear-groups", "/usr/bin/python3", "-c", reader],
                              capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(src)})
        if "No module named" in done.stderr or "Permission denied" in done.stderr:
            pytest.skip(f"nobody cannot run this checkout here: {done.stderr[-300:]}")
        assert "a writer stopped mid-commit and left its journal h.sqlite-journal" \
            in done.stdout, done.stdout + done.stderr
        assert "not an ocibench history" not in done.stdout
        assert Path(f"{db}-journal").exists()   # left for its next writer
    finally:
        shutil.rmtree(shared)


def test_history_add_of_a_bad_report_adds_nothing(tmp_path):
    db, bad = tmp_path / "h.sqlite", tmp_path / "bad.json"
    bad.write_text('{"session_info": {"data_version": "3.1"}, "runs": []}')
    status, _, err = history_cli("add", "--db", str(db), str(bad))
    assert status == 2 and "data_version '3.1'" in err and len(err.splitlines()) == 1, err
    assert not db.exists()


def test_a_sweeps_step_report_is_kept_under_the_sweeps_session(tmp_path):
    """The sweep tags each ReFrame session with its own (--session-extras, as
    ocibench.sweep.rfm.run_step does): adding a step's run report later keeps its
    figures under the sweep's session, so the sweep's figures are not kept twice."""
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not installed (pip install 'ocibench[test]')")
    (tmp_path / "tiny_osu.py").write_text(TINY_CHECK)
    report = tmp_path / "step.json"
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "src")}
    done = subprocess.run(
        [exe, "-c", str(tmp_path / "tiny_osu.py"), "-n", "osu_bw", "-r", "--prefix",
         str(tmp_path / "rfm"), "--report-file", str(report),
         f"--session-extras={SESSION_EXTRA}=sweep-1234"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    db = tmp_path / "h.sqlite"
    status, _, err = history_cli("add", "--db", str(db), str(report))
    assert status == 0, err
    with History(db, readonly=True) as history:
        assert {r.session for n in history.nodes() for r in history.latest(n)} == \
            {"sweep-1234"}


def test_the_sweep_command_adds_its_nodes_and_names_a_history_it_cannot_write(
        local, tmp_path, capsys):  # noqa: F811
    from ocibench.commands import sweep as command

    the_plan = plan.make_plan(names(5), [SINGLE_CASE])
    result = sweeping.Sweep(the_plan)
    result.jobs = [JobResult(SINGLE_CASE, (n,), SINGLE, rows=[latency_row(local, v, nodes=1)],
                             params={"buffers": "H-H", "nodes": 1, "sizes": "1:1"})
                   for n, v in zip(the_plan.nodes, [1.0, 1.01, 0.99, 1.0, 1.02])]
    result.nodes = sweeping.judge_nodes(the_plan, result.jobs, 3.5, {})
    args = argparse.Namespace(json=tmp_path / "sweep.json", html=None, drain=False,
                              no_history=False, history=tmp_path / "h.sqlite")
    assert command._report(args, result) == 0
    assert f"history: 5 figure(s) of 5 node(s) added to {args.history}" in \
        capsys.readouterr().err
    with History(args.history, readonly=True) as history:
        assert history.nodes() == names(5)
    assert json.loads(args.json.read_text())["session"] == result.session
    # a file that is no history: one line, exit 2, the JSON written all the same
    args.history = tmp_path / "sweep.json"
    args.json = tmp_path / "again.json"
    assert command._report(args, result) == 2
    err = capsys.readouterr().err
    assert "ocibench sweep: history: " in err and "not an ocibench history" in err
    assert args.json.is_file()


# --------------------------------------------------------------------------- snapshots
# Every writer publishes its nodes' snapshots for the healthcheck (ocibench.history.
# current); tests/test_healthcheck.py reads them.


def test_the_sweep_publishes_its_nodes_once_done_with_the_history(local, tmp_path):  # noqa: F811
    path = tmp_path / "h.sqlite"
    earlier_sweeps(path)   # 20 earlier sweeps: every pair at 41 us (+- 1 %)
    assert current.publish_all(path) == 8
    before = current.read(path, "node3")
    assert before.drift_judged == 1 and not before.drifting   # 20 sweeps: judged, steady
    # this sweep: node3's two pairs 20 % slower
    jobs = pair_jobs(local, [41.0, 49.2, 49.2, 41.0, 41.0, 41.0, 41.0, 41.0])
    the_plan = plan.make_plan(names(8), [PAIR_CASE])
    result = sweeping.Sweep(the_plan, jobs=jobs, outlier_k=1e6,
                            nodes=sweeping.judge_nodes(the_plan, jobs, 1e6, {}))
    sweeping._drift(result, path)
    assert result.errors == [] and result.nodes["node3"].verdict is NodeVerdict.DRIFTING
    # kept and flagged, not yet published: every swept node is being written
    with pytest.raises(current.NotPublished, match="has not published node3's snapshot"):
        current.read(path, "node3")
    sweeping._publish(result)
    assert result.errors == [] and result.publishing is None
    after = current.read(path, "node3")
    assert after.session == result.session and after.figures == 1
    assert after.drift_judged == 1 and len(after.drifting) == 1
    assert not after.drifting[0].persists     # flagged once: rerun, then drain if it persists
    assert "drifting" in after.drifting[0].reason
    assert current.read(path, "node1").drifting == ()
    assert not list((current.directory(path) / "writing").iterdir())


def test_history_add_and_publish_write_the_snapshots(tmp_path):
    db = tmp_path / "h.sqlite"
    report = tmp_path / "run.json"
    case = {"name": "osu_bw_check", "result": "fail", "check_name": "osu_bw",
            "shape": "BM.Optimized3.36", "buffers": "H-H", "nodes": 2,
            "sizes": "268435456:268435456", "job_nodelist": ["node1", "node2"],
            "job_completion_time_unix": 1790000000.0,
            "perfvalues": {"generic:default:bandwidth_268435456":
                           [9000.0, 0, None, None, "MB/s", "fail"]}}
    report.write_text(json.dumps({"session_info": {"data_version": "4.2", "uuid": "u-1"},
                                  "runs": [{"testcases": [case]}]}))
    status, out, err = history_cli("add", "--db", str(db), str(report))
    assert status == 0, err
    snap = current.read(db, "node2")
    assert snap.figures == 1 and [f.session for f in snap.failed] == ["u-1"]
    assert "osu_bw buffers=H-H nodes=2 268435456 B bandwidth 9000 MB/s" in snap.failed[0].figure
    # the snapshots gone (a new checkout's first run, a copy of the history): rewritten
    shutil.rmtree(current.directory(db))
    status, out, err = history_cli("publish", "--db", str(db))
    assert status == 0 and "2 node snapshot(s) published" in out, err
    assert current.read(db, "node1").failed == snap.failed
    assert oct(current.snapshot_path(db, "node1").stat().st_mode & 0o777) == "0o644"
    status, out, err = history_cli("publish", "--db", str(db), "node1\x1b[2J")
    assert status == 2 and "is not a host name" in err and "\x1b" not in err


def test_a_runs_rows_as_records():
    from ocibench.figures.judge import Row
    from ocibench.history import rows
    from ocibench.metrics import Verdict

    # nccl-tests' busbw column: the size its values are at (the run's largest, -e)
    nccl = rows.records("gpu-1", "nccl_all_reduce_perf",
                        {"nodes": 1, "gpus_per_node": 8, "begin": "8", "end": "1G",
                         "factor": 2, "step": "1M"},
                        [Row("busbw", "out_of_place", 480.0, "GB/s", Verdict.PASS,
                             reference=482.0, lower=433.8, floor=450.0)],
                        time=1.0, session="s")
    assert [(r.variant, r.size, r.figure, r.floor) for r in nccl] == [
        ("gpus_per_node=8 nodes=1", 2**30, "out_of_place", 450.0)]
    # a latency's worst passing value is the lower of its ceiling and floor; a row the
    # run never measured is not kept
    lat = rows.records("gpu-1", "osu_latency", {"buffers": "H-H", "nodes": 2, "sizes": "1:8"},
                       [Row("latency", 1, 2.0, "us", Verdict.PASS, upper=2.5, floor=3.0),
                        Row("latency", 8, None, "us", Verdict.FAIL)], time=1.0, session="s")
    assert [(r.variant, r.size, r.figure, r.floor) for r in lat] == [
        ("buffers=H-H nodes=2", 1, "latency", 2.5)]
