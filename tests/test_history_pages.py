"""The history at a fleet's size: the store's summaries and fleet reads, the node's and
the cluster's pages (``ocibench history --html``), and the head node's export reading
the fleet at once (docs/history.md, docs/monitoring.md).  Real SQLite files written with
the store's API; the pages are read back as the HTML and SVG they are."""

from __future__ import annotations

import contextlib
import io
import re
import sqlite3
import statistics
from pathlib import Path

import pytest

from ocibench import cli
from ocibench.health import export
from ocibench.history import drift, store
from ocibench.history.store import History, HistoryError, Record
from ocibench.report import timechart

DAY = 86400.0
VARIANT = "buffers=D-D nodes=2"
BW = ("osu_bw", VARIANT, 4194304, "bandwidth")
LAT = ("osu_latency", VARIANT, 8, "latency")
#: The session from which every node runs the new driver, and its figures are 10 %
#: lower (a fleet-wide step: the cliff the page must explain).
CHANGE = 20
SESSIONS = 30


def rec(node: str, key, value: float, session: int, *, verdict: str = "pass",
        unit: str = "MB/s", driver: str = "550.1") -> Record:
    check, variant, size, figure = key
    return Record(node=node, check=check, variant=variant, size=size, figure=figure,
                  value=value, unit=unit, verdict=verdict, time=session * DAY + 60,
                  session=f"sweep-{session:02d}", documented=24000.0 if unit == "MB/s" else 2.0,
                  floor=21600.0 if unit == "MB/s" else 3.0, image="OL8", driver=driver)


def fleet(path: Path, nodes: int = 6, sessions: int = SESSIONS, change: int | None = CHANGE,
          latency: bool = True) -> Path:
    """``nodes`` nodes swept daily: osu_bw (and osu_latency), each node at its own
    steady level; from session ``change`` on, the new driver and every bandwidth 10 %
    lower; gpu-1 fails osu_bw in the last session, gpu-3's last latency run could not
    be judged."""
    records = []
    for s in range(sessions):
        new = change is not None and s >= change
        driver = "560.2" if new else "550.1"
        for n in range(1, nodes + 1):
            node = f"gpu-{n}"
            bw = (24000.0 + 10 * n) * (0.9 if new else 1.0)
            verdict = "pass"
            if node == "gpu-1" and s == sessions - 1:
                bw, verdict = 20000.0, "fail"
            records.append(rec(node, BW, bw, s, verdict=verdict, driver=driver))
            if latency:
                records.append(rec(node, LAT, 2.5 + 0.01 * n, s, unit="us", driver=driver,
                                   verdict="unjudged" if node == "gpu-3" and s == sessions - 1
                                   else "pass"))
    with History(path) as history:
        history.add(records)
        history.add_event("gpu-1", "flagged", (SESSIONS - 3) * DAY + 90,
                          "osu_bw buffers=D-D nodes=2 size 4194304 bandwidth: drifting: "
                          "median of its last 2 sweeps ...", f"sweep-{SESSIONS - 3:02d}")
    return path


def history_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["history", *argv])
    return status, out.getvalue(), err.getvalue()


def page(db: Path, tmp_path: Path, *argv: str) -> str:
    target = tmp_path / "page.html"
    status, out, err = history_cli("--db", str(db), *argv, "--html", str(target))
    assert status == 0, err
    return target.read_text()


def sections(text: str) -> dict[str, str]:
    """Each figure's section of a page, by its title."""
    found = {}
    for part in text.split('<section class="figure')[1:]:
        found[re.search(r"<h2>([^<]+)", part)[1].strip()] = part
    return found


def xs(points: str) -> list[float]:
    return [float(p.split(",")[0]) for p in points.split()]


# --------------------------------------------------------------------------- the store

def test_summaries_are_each_sessions_median_and_bands(tmp_path):
    db = fleet(tmp_path / "h.sqlite", nodes=7)
    with History(db, readonly=True) as history:
        found = history.summaries()
        bw = found[BW]
        assert [s.session for s in bw] == [f"sweep-{s:02d}" for s in range(SESSIONS)]
        first = bw[0]
        raw = sorted(24000.0 + 10 * n for n in range(1, 8))
        deciles = statistics.quantiles(raw, n=10, method="inclusive")
        quartiles = statistics.quantiles(raw, n=4, method="inclusive")
        assert (first.nodes, first.median, first.least, first.most) == \
            (7, statistics.median(raw), raw[0], raw[-1])
        assert (first.low, first.high) == pytest.approx((deciles[0], deciles[-1]))
        assert (first.q1, first.q3) == pytest.approx((quartiles[0], quartiles[-1]))
        assert (first.driver, bw[CHANGE].driver, first.softwares) == ("550.1", "560.2", 1)
        assert bw[-1].fails == 1 and bw[-2].fails == 0
        assert history.cluster_medians(*BW)[CHANGE] == (CHANGE * DAY + 60, bw[CHANGE].median)


def test_a_session_added_in_two_parts_and_another_unit_are_summarised_whole(tmp_path):
    with History(tmp_path / "h.sqlite") as history:
        history.add([rec("gpu-1", BW, 100.0, 1), rec("gpu-2", BW, 200.0, 1)])
        # the same session again, later (a sweep's step report): one summary of all
        history.add([rec("gpu-3", BW, 0.3, 1, unit="GB/s")])
        [summary] = history.summaries()[BW]
        assert (summary.nodes, summary.unit, summary.median, summary.most) == \
            (3, "MB/s", 200.0, 300.0)


def downgrade(path: Path) -> None:
    """The file as schema 1 left it: no summaries (the schema 2 table), version 1."""
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE summaries")
        db.execute("PRAGMA user_version = 1")


def test_a_schema_1_history_is_read_as_it_is_and_upgraded_by_a_writer(tmp_path):
    db = fleet(tmp_path / "h.sqlite")
    with History(db, readonly=True) as history:
        expected = history.summaries()
    downgrade(db)
    before = db.read_bytes()
    with History(db, readonly=True) as history:   # a reader: computed, nothing written
        assert history.summaries() == expected
    assert db.read_bytes() == before
    with History(db) as history:                  # a writer: upgraded, once
        assert history.version == store.SCHEMA_VERSION
    with History(db, readonly=True) as history:
        assert history.version == 2 and history.summaries() == expected


@pytest.mark.parametrize("scan_above", [0, 10_000])
def test_the_fleets_newest_is_each_nodes_latest(tmp_path, monkeypatch, scan_above):
    """Read session by session (scan) or probed series by series: the same records as
    each node's own latest, a node missing from the newest sweeps included."""
    monkeypatch.setattr(store, "_SCAN_ABOVE", scan_above)
    db = fleet(tmp_path / "h.sqlite")
    with History(db) as history:
        history.add([rec("gpu-9", BW, 1.0, 3)])   # gone since session 3
        history.add([rec("gpu-2", BW, 5.0, SESSIONS)])
        everyone = [r for node in history.nodes() for r in history.latest(node)]
        assert history.newest() == everyone
        assert history.newest("osu_latency") == [r for r in everyone
                                                 if r.check == "osu_latency"]
    assert {r.node for r in everyone} >= {"gpu-9"}


def test_the_event_log_names_each_events_session(tmp_path):
    db = fleet(tmp_path / "h.sqlite")
    with History(db) as history:
        history.add_event("gpu-2", "drained", 5.0, "ocibench: slow", "sweep-00")
        log = history.event_log()
        # in the order they were kept, whatever their times say (docs/history.md)
        assert [(e.node, e.kind, e.session) for e in log] == [
            ("gpu-1", "flagged", f"sweep-{SESSIONS - 3:02d}"), ("gpu-2", "drained", "sweep-00")]
        assert history.event_log("gpu-2", since=6.0) == []


# --------------------------------------------------------------------------- a node

def test_a_nodes_page_opens_with_its_verdict(tmp_path):
    text = page(fleet(tmp_path / "h.sqlite"), tmp_path, "--node", "gpu-1")
    verdict = text[text.index('id="verdict"'):text.index("</section>")]
    assert text.index('id="verdict"') < text.index("<svg")   # the verdict before any chart
    assert "<b>Fails</b>: 1 figure(s) in their newest run:\nosu_bw buffers=D-D nodes=2 " \
           "bandwidth 4 MiB 20,000.00 MB/s (floor 21,600.00" in verdict
    assert f"flagged by sweep-{SESSIONS - 3:02d}" in verdict
    # what the fleet did: the cluster event of the driver change, once
    fleet_line = verdict[verdict.index("<b>The fleet</b>"):]
    assert "cluster events" in fleet_line and fleet_line.count(f"(sweep-{CHANGE:02d}, ") == 1
    # the software change, and how far the node and the fleet moved at it
    assert f"driver 550.1 → 560.2 from sweep-{CHANGE:02d}" in verdict
    assert "osu_bw buffers=D-D nodes=2 bandwidth 4 MiB (this node -10.0 %, the fleet's " \
           "median -10.0 %)" in verdict
    # the failing figure's chart first, then the others
    assert list(sections(text))[0] == "osu_bw buffers=D-D nodes=2 bandwidth 4 MiB"


def test_a_nodes_charts_mark_its_software_change_and_the_sweep_that_flagged_it(tmp_path):
    text = page(fleet(tmp_path / "h.sqlite"), tmp_path, "--node", "gpu-1")
    found = sections(text)
    bw, lat = found["osu_bw buffers=D-D nodes=2 bandwidth 4 MiB"], \
        found["osu_latency buffers=D-D nodes=2 latency 8 B"]
    line = xs(re.search(r'<polyline class="line" points="([^"]+)"', bw)[1])
    assert len(line) == SESSIONS
    software = re.findall(r'<g class="mark software"><title>([^<]+)</title><line x1="([\d.]+)"',
                          bw)
    assert [(words.split(" from ")[1].split()[0], float(x)) for words, x in software] == \
        [(f"sweep-{CHANGE:02d}", line[CHANGE])]   # at the session the driver changed
    assert "driver 550.1 → 560.2" in software[0][0]
    flagged = re.findall(r'<g class="mark flagged"><title>[^<]+</title><line x1="([\d.]+)"', bw)
    assert len(flagged) == 1 and line[SESSIONS - 3] <= float(flagged[0]) < line[SESSIONS - 2]
    # the flag names osu_bw: the latency chart has the driver's mark, not the flag's
    assert 'class="mark flagged"' not in lat and 'class="mark software"' in lat
    # the fleet's step, the drift module's cluster event, marked where it began
    event = re.findall(r'<g class="mark event"><title>[^<]+</title><line x1="([\d.]+)"', bw)
    assert [float(x) for x in event] == [line[CHANGE]]
    # the failing value is ringed, with its words
    assert re.search(r'<circle class="dot fail"[^>]*><title>fail: 20,000.00 MB/s in '
                     rf'sweep-{SESSIONS - 1:02d}', bw)
    assert "the fleet&#39;s median -10.0 %" in bw


def test_a_page_escapes_what_the_history_says(tmp_path):
    """A node's name is a host name (the store refuses any other: ocibench.hostnames);
    what else a history holds (a session's name, the image, the driver) may be markup."""
    db = tmp_path / "h.sqlite"
    with History(db) as history:
        history.add([Record("gpu-1", "osu_bw", VARIANT, 8, "bandwidth", 9.0 + s, "MB/s",
                            "pass", s * DAY, f"s<{s}>", image="OL8 <img src=x>",
                            driver="1" if s < 2 else '2"><script>')
                     for s in range(4)])
        with pytest.raises(HistoryError, match="is not a host name"):
            history.add([Record("gpu-<b>", "osu_bw", VARIANT, 8, "bandwidth", 9.0, "MB/s",
                                "pass", 5 * DAY, "s5")])
    for argv in (("--node", "gpu-1"), ()):
        text = page(db, tmp_path, *argv)
        assert "<script>" not in text and "<img src=x>" not in text
        assert "s<3>" not in text and "gpu-<b>" not in text
        assert "2&#34;&gt;&lt;script&gt;" in text


def test_a_page_that_cannot_be_written_is_one_line(tmp_path):
    """--html under a plain file: the page writer every page shares
    (ocibench.pages.output.write, the sweep's files too) says so in one line naming the
    path; no traceback, nothing written."""
    db = fleet(tmp_path / "h.sqlite")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    status, out, err = history_cli("--db", str(db), "--html", str(blocker / "pages" / "page.html"))
    assert (status, out) == (2, ""), err
    assert err.startswith(f"ocibench history: cannot write {blocker}") and err.count("\n") == 1, err
    assert blocker.read_text() == "not a directory\n"


# --------------------------------------------------------------------------- the cluster

def test_the_cluster_page_is_the_fleets_aggregate(tmp_path):
    text = page(fleet(tmp_path / "h.sqlite"), tmp_path)
    verdict = text[text.index('id="verdict"'):text.index("</section>")]
    assert text.index('id="verdict"') < text.index("<svg")
    assert "1 node(s) with a figure failing in its newest run:\ngpu-1 (osu_bw" in verdict
    assert "a figure of 1 node(s) in its newest run: gpu-3." in verdict
    assert "image OL8, driver 560.2 on 6 node(s)" in verdict
    bw = sections(text)["osu_bw buffers=D-D nodes=2 bandwidth 4 MiB"]
    # one line, the median, and its bands: never a node's own line
    assert bw.count("<polyline") == 1 and 'class="line"' not in bw
    assert 'class="outer"' in bw and 'class="inner"' in bw
    median = xs(re.search(r'<polyline class="median" points="([^"]+)"', bw)[1])
    software = re.findall(r'<g class="mark software"><title>[^<]+</title><line x1="([\d.]+)"', bw)
    assert [float(x) for x in software] == [median[CHANGE]]
    event = re.findall(r'<g class="mark event"><title>[^<]+</title><line x1="([\d.]+)"', bw)
    assert [float(x) for x in event] == [median[CHANGE]]
    assert "Failing in their newest run: gpu-1." in bw
    assert "at driver 550.1 → 560.2 (sweep-20): the fleet&#39;s median -10.0 %" in bw


def test_the_cluster_pages_size_is_bounded_whatever_the_fleet(tmp_path):
    """More nodes: the same page (nodes are counted, not drawn); more sessions than a
    chart draws: at most MAX_POINTS points per line."""
    def size(nodes: int, sessions: int) -> tuple[int, int]:
        db = fleet(tmp_path / f"h-{nodes}-{sessions}.sqlite", nodes=nodes, sessions=sessions,
                   change=None, latency=False)
        text = page(db, tmp_path)
        median = re.search(r'<polyline class="median" points="([^"]+)"', text)
        return len(text), len(median[1].split()) if median else 0

    small, points = size(4, 60)
    many, _ = size(60, 60)
    assert many < small * 1.02, (small, many)
    assert points == 60
    bound, points = size(4, timechart.MAX_POINTS)
    longer, thinned = size(4, 3 * timechart.MAX_POINTS)
    assert thinned <= timechart.MAX_POINTS and longer < bound * 1.05, (bound, longer)


# --------------------------------------------------------------------------- the export

def test_the_export_judges_the_fleets_drift_once(tmp_path, monkeypatch):
    """The head node's export reads the fleet at once: drift.drifting_nodes once, for
    every node (not node by node), and the fleet's newest records."""
    db = fleet(tmp_path / "h.sqlite")
    calls = []
    judged = drift.drifting_nodes

    def counted(history, nodes, **kw):
        calls.append(list(nodes))
        return judged(history, nodes, **kw)

    monkeypatch.setattr(drift, "drifting_nodes", counted)
    families, notes = export.from_history(db)
    assert calls == [[f"gpu-{n}" for n in range(1, 7)]] and notes == []
    values = next(f for f in families if f.name == "ocibench_figure_value_bytes_per_second")
    assert len(values.samples) == 6
