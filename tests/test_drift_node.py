"""One node's drift at one node's cost (current.of_node): the node's page reads what the
fleet pass found when a writer published the node's snapshot, and finds the same as a
pass made now, on a real SQLite history with a cluster event (a driver change moving
every node 10 %) and a real drift of one node; once the history moved (a sweep its
writer did not publish, an event of the node), it makes the pass itself."""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

import pytest

from ocibench import cli
from ocibench.history import current, drift
from ocibench.history.store import History, Record

DAY = 86400.0
BW = ("osu_bw", "buffers=D-D nodes=2", 4194304, "bandwidth", "MB/s", 24000.0)
LAT = ("osu_latency", "buffers=D-D nodes=2", 8, "latency", "us", 2.5)
NODES = [f"gpu-{n}" for n in range(1, 13)]
#: The sweep from which every node runs the new driver, its bandwidth 10 % lower.
CHANGE = 20
SWEEPS = 30
#: gpu-5's bandwidth is 15 % below its peers in the last 3 sweeps: a drift that persists.
LEMON = "gpu-5"


def sweep(number: int, rng: random.Random, low: dict[str, float] | None = None,
          nodes: list[str] = NODES) -> list[Record]:
    new = number >= CHANGE
    found = []
    for node in nodes:
        for check, variant, size, figure, unit, base in (BW, LAT):
            value = base * (1 + rng.gauss(0, 0.01))
            if figure == "bandwidth":
                value *= (0.9 if new else 1.0) * (1 - (low or {}).get(node, 0.0))
            found.append(Record(node, check, variant, size, figure, value, unit, "pass",
                                number * DAY + 60, f"sweep-{number:02d}", image="OL8",
                                driver="560.2" if new else "550.1"))
    return found


@pytest.fixture
def history(tmp_path) -> Path:
    """Every sweep added as `ocibench sweep` and `history add` add them: committed, then
    the nodes' snapshots published (history.current.add)."""
    path = tmp_path / "history.sqlite"
    rng = random.Random(5)
    for number in range(SWEEPS):
        low = {LEMON: 0.15} if number >= SWEEPS - 3 else None
        if number == SWEEPS - 1:   # a repeat offender: flagged, drained, resumed before
            with History(path) as opened:
                for kind in ("flagged", "drained", "resumed"):
                    opened.add_event(LEMON, kind, number * DAY, "earlier", "sweep-x")
        current.add(path, sweep(number, rng, low), f"sweep-{number:02d}")
    return path


def pass_now(history: History, node: str) -> tuple[list[current.Seen], list[current.Seen]]:
    """What a pass made now finds for ``node``: the fleet pass, the reference."""
    fleet = drift.read(history)
    return ([current.seen_drift(d) for d in fleet.drifting([node])[node]],
             [current.seen_event(e) for e in fleet.events()])


def agree(history: History, node: str) -> current.NodeJudgement:
    found = current.of_node(history, node)
    assert (found.drifts, found.events) == pass_now(history, node), node
    return found


def test_the_published_judgement_is_the_fleet_pass(history):
    with History(history, readonly=True) as opened:
        for node in NODES:
            found = agree(opened, node)
            assert found.published is not None, node   # read from the snapshot, no pass
        lemon = current.of_node(opened, LEMON)
    # what it agrees on is real: gpu-5 drifts (and persists), and the driver change is
    # one cluster event, no node's drift
    assert [(d.figure, d.persists) for d in lemon.drifts] == [("bandwidth", True)]
    assert "repeat offender" in lemon.drifts[0].text
    assert [(e.figure, e.session) for e in lemon.events] == \
        [("bandwidth", f"sweep-{CHANGE:02d}")]
    assert "driver 560.2 (was 550.1)" in lemon.events[0].text
    with History(history, readonly=True) as opened:
        assert current.of_node(opened, "gpu-1").drifts == []


def test_a_run_of_a_few_nodes_leaves_the_judgement_standing(history):
    # a ReFrame run of 2 nodes added by a writer that publishes nothing: no sweep (too
    # few peers), so no node's drift moved
    with History(history) as opened:
        opened.add(sweep(SWEEPS, random.Random(6), nodes=["gpu-1", "gpu-2"]))
    with History(history, readonly=True) as opened:
        for node in ("gpu-3", LEMON):
            assert agree(opened, node).published is not None


def test_a_sweep_the_snapshot_has_not_seen_is_judged_now(history):
    # a sweep added without publishing (an older ocibench's writer): gpu-7 falls 30 %
    # in it; its snapshot says it does not drift, the pass now says it does
    with History(history) as opened:
        opened.add(sweep(SWEEPS, random.Random(7), {"gpu-7": 0.30}))
    with History(history, readonly=True) as opened:
        found = agree(opened, "gpu-7")
        assert found.published is None and [d.figure for d in found.drifts] == ["bandwidth"]
        assert agree(opened, "gpu-1").published is None


def test_an_event_of_the_node_is_judged_now(history):
    # gpu-5 flagged, drained and resumed again after its snapshot: its offences grew
    with History(history) as opened:
        for kind in ("flagged", "drained", "resumed"):
            opened.add_event(LEMON, kind, SWEEPS * DAY, "by hand", "admin")
    with History(history, readonly=True) as opened:
        found = agree(opened, LEMON)
        assert found.published is None and "2 times before" in found.drifts[0].text
        assert agree(opened, "gpu-1").published is not None   # another node's event


def test_the_nodes_page_says_whose_judgement_it_shows(history, tmp_path):
    def verdict() -> str:
        target = tmp_path / "page.html"
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            assert cli.main(["history", "--db", str(history), "--node", LEMON,
                             "--html", str(target)]) == 0
        text = target.read_text()
        return text[text.index('id="verdict"'):text.index("</section>")]

    published = verdict()
    assert "<b>Drifts</b>: 1 figure(s), judged by the pass published " in published
    assert "15.5 % worse" in published and "repeat offender" in published
    with History(history) as opened:   # a sweep no writer published: judged now
        opened.add(sweep(SWEEPS, random.Random(8), {LEMON: 0.15}))
    assert "<b>Drifts</b>: 1 figure(s), judged now:" in verdict()
