"""``ocibench history --html``: a node's page, or the cluster's, as one self-contained
page (docs/history.md).

**A node's page** (``--node``) opens with its verdict: the figures that fail (or could
not be judged) in its newest runs, the figures that drift, the sweeps that flagged,
drained or returned it, its software changes with how far its figures and the fleet's
median moved at each, and what the fleet did: the cluster events, and where the node's
newest values lie in the fleet (its worst tenth, the worst node).  Drift and the cluster
events are what one pass over the fleet finds (``drift.of_node``: the node's published
snapshot of a writer's pass while the history has not moved since, else a pass now).
Then one chart per figure, the ones named above first: the node's values, the cluster's
median per session with its quartiles and 10th-90th percentile band, the documented
figure and the floor, and a mark at each software change, each sweep that flagged or
drained it, and each cluster event.

**The cluster's page** (no ``--node``) is the fleet's aggregate, never every node's
point: per figure, the median and the bands per session (the history's summaries),
the software changes of the fleet (the most common image and driver), the cluster
events and the sessions where nodes failed; its verdict names the failing nodes (at
most :data:`MOST_NAMED`), the newest sweep's flags and drains, and the fleet's
software.  It reads the sweeps' recorded flags rather than judging drift again: a
fleet's drift is the sweep's work (docs/drift.md) and costs more than the page may.

The page is the Jinja2 template ``pages/templates/history.html`` with autoescape on;
the charts are inline SVG (:mod:`ocibench.report.timechart`, ``chart.html``).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ocibench.history import drift
from ocibench.history.store import Event, History, Record, Summary
from ocibench.pages import html
from ocibench.report import timechart
from ocibench.report.timechart import Mark
from ocibench.results.model import size_text

Key = tuple[str, str, int | None, str]   # check, variant, size, figure

#: Most nodes, figures or events a list of the page names; the rest are counted.
MOST_NAMED = 20
#: Values either side of a software change whose medians say how far a figure moved.
AROUND = 3
#: A figure moved "at a change" when its median moved by more than this fraction.
MOVED = 0.03
#: Verdicts that say a figure could not be judged (never a pass, never a fail).
NOT_JUDGED = ("unjudged",)


@dataclass(frozen=True)
class Page:
    text: str
    figures: int
    nodes: int


def when(time: float) -> str:
    return datetime.fromtimestamp(time, timezone.utc).isoformat(timespec="seconds")


def title(key: Key) -> str:
    check, variant, size, figure = key
    parts = [check, variant, figure] + ([size_text(size)] if size is not None else [])
    return " ".join(p for p in parts if p)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _named(items: Sequence[Any], most: int = MOST_NAMED) -> tuple[list[Any], int]:
    """The first ``most`` of ``items``, and how many more there are."""
    return list(items[:most]), max(0, len(items) - most)


def _software(image: str | None, driver: str | None) -> str:
    return f"image {image or 'unknown'}, driver {driver or 'unknown'}"


def _change(before: tuple[str | None, str | None], after: tuple[str | None, str | None]) -> str:
    """What changed between two (image, driver) pairs, in words."""
    parts = [f"{name} {old or 'unknown'} → {new or 'unknown'}"
             for name, old, new in (("image", before[0], after[0]),
                                    ("driver", before[1], after[1])) if old != new]
    return "; ".join(parts)


def _short(before: tuple[str | None, str | None], after: tuple[str | None, str | None]) -> str:
    """A change's label on a chart: the new driver, else "new image"."""
    if before[1] != after[1]:
        return f"driver {after[1] or 'unknown'}"
    return "new image"


def _moved(before: Sequence[float], after: Sequence[float]) -> float | None:
    """How far the median of the first AROUND values ``after`` lies from that of the
    last AROUND ``before``, as a fraction of the latter."""
    if not before or not after:
        return None
    old, new = statistics.median(before[-AROUND:]), statistics.median(after[:AROUND])
    return (new - old) / abs(old) if old else None


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:+.1f} %"


def _cluster_events(events: Iterable[Any], check: str | None,
                    since: float | None) -> list[Any]:
    """The drift module's cluster events (a shift most nodes share, said once) of one
    check, since ``since``, newest first."""
    found = [e for e in events
             if (check is None or e.check == check) and (since is None or e.time >= since)]
    return sorted(found, key=lambda e: e.time, reverse=True)


def _event_key(event: Any) -> Key:
    return (event.check, event.variant, event.size, event.figure)


def _flag_prefix(key: Key) -> str:
    """How a drift reason names a figure (drift.Drift.reason: "check variant size N
    figure: drifting ...", drift._figure_name), whitespace collapsed as the reason's
    is.  A flag whose reason names none of the node's figures is marked on all."""
    check, variant, size, figure = key
    return " ".join(f"{check} {variant}{'' if size is None else f' size {size}'} "
                    f"{figure}:".split())


def _event_marks(events: Iterable[Event], keys: Iterable[Key]) -> dict[Key, list[Mark]]:
    """Each figure's marks of the node's events: a flag on the figures its reason names
    (on every figure where it names none of them), a drain or a return on every one."""
    keys = list(keys)
    prefixes = {key: _flag_prefix(key) for key in keys}
    found: dict[Key, list[Mark]] = {key: [] for key in keys}
    for event in events:
        mark = Mark(event.time, event.kind, event.kind,
                    f"{event.kind} by {event.session or 'a run'} at {when(event.time)}: "
                    f"{event.reason}")
        named = [k for k in keys if event.kind == "flagged" and prefixes[k] in event.reason]
        for key in named or keys:
            found[key].append(mark)
    return found


def _software_changes(points: Iterable[tuple[float, str, tuple[str | None, str | None]]]
                      ) -> list[tuple[float, str, tuple, tuple]]:
    """(time, session, before, after) where the software of consecutive sessions
    differs; ``points`` are (time, session, (image, driver)), any order."""
    by_session: dict[str, tuple[float, Counter]] = {}
    for time, session, software in points:
        start, counts = by_session.setdefault(session, (time, Counter()))
        by_session[session] = (min(start, time), counts)
        counts[software] += 1
    found, previous = [], None
    for session, (time, counts) in sorted(by_session.items(), key=lambda item: item[1][0]):
        software = counts.most_common(1)[0][0]
        if previous is not None and software != previous:
            found.append((time, session, previous, software))
        previous = software
    return found


def _fleet_split(summaries: Sequence[Summary], session: str,
                 time: float) -> tuple[list[float], list[float]]:
    """The fleet's medians before and from ``session`` (by its place, else by time)."""
    names = [s.session for s in summaries]
    at = names.index(session) if session in names else \
        next((i for i, s in enumerate(summaries) if s.time >= time), len(summaries))
    return [s.median for s in summaries[:at]], [s.median for s in summaries[at:]]


def _bands(summaries: Sequence[Summary]) -> dict[str, Any]:
    return {"median": [(s.time, s.median) for s in summaries],
            "inner": [(s.time, s.q1, s.q3) for s in summaries],
            "outer": [(s.time, s.low, s.high) for s in summaries]}


def _newest_row(r: Record) -> dict[str, str]:
    return {"node": r.node, "time": when(r.time), "value": _number(r.value), "unit": r.unit,
            "documented": _number(r.documented), "floor": _number(r.floor),
            "verdict": r.verdict, "session": r.session, "image": r.image or "-",
            "driver": r.driver or "-"}


# --------------------------------------------------------------------------- a node

def node_page(history: History, node: str, check: str | None, since: float | None,
              source: Path) -> Page:
    """The page of one node (of one check; since ``since``)."""
    records = history.history(node, check, since)
    by_key: dict[Key, list[Record]] = {}
    for r in records:
        by_key.setdefault(r.key, []).append(r)
    newest = {r.key: r for r in history.latest(node) if r.key in by_key}
    summaries = history.summaries(check, since)
    events = history.event_log(node, since)
    # drift: what the fleet's one pass finds for the node and the fleet (drift.of_node:
    # the node's snapshot where the history has not moved since a writer's pass)
    found = drift.of_node(history, node)
    drifts = [d for d in found.drifts if d.key in by_key]
    drifting = {d.key for d in drifts}
    flagged = {key for key in by_key if any(
        e.kind == "flagged" and _flag_prefix(key) in e.reason for e in events)}
    cluster = [e for e in _cluster_events(found.events, check, since)
               if _event_key(e) in by_key]
    changes = _software_changes((r.time, r.session, (r.image, r.driver)) for r in records)
    marks = _event_marks(events, by_key)
    for time, session, before, after in changes:
        for key in by_key:
            marks[key].append(Mark(time, "software", _short(before, after),
                                   f"{_change(before, after)} from {session} "
                                   f"({when(time)})"))
    for event in cluster:
        marks[_event_key(event)].append(Mark(event.time, "event", "cluster event", event.text))

    figures, worst, moved = [], [], {i: [] for i in range(len(changes))}
    tenth = judged = 0   # figures in the fleet's worst tenth, of those with a fleet to judge
    for key, mine in by_key.items():
        fleet = summaries.get(key, [])
        latest = newest.get(key, mine[-1])
        steps = []
        for index, (time, session, before, after) in enumerate(changes):
            values = [r.value for r in mine]
            split = next((i for i, r in enumerate(mine) if r.time >= time), len(mine))
            step = _moved(values[:split], values[split:])
            fleet_step = _moved(*_fleet_split(fleet, session, time))
            steps.append(f"at {_change(before, after)} ({session}): this node "
                         f"{_percent(step)}, the fleet's median {_percent(fleet_step)}")
            if step is not None and abs(step) > MOVED:
                moved[index].append((title(key), _percent(step), _percent(fleet_step)))
        band = next((s for s in reversed(fleet) if s.session == latest.session), None)
        place = _place(latest, band)
        if place is not None:
            tenth += place != "within"
            judged += 1
            if place == "worst":
                worst.append({"title": title(key), "value": _number(latest.value),
                              "unit": latest.unit, "median": _number(band.median),
                              "nodes": band.nodes, "session": band.session})
        status = "fail" if latest.verdict == "fail" else \
            "drifting" if key in drifting else \
            "unjudged" if latest.verdict in NOT_JUDGED else \
            "flagged" if key in flagged else \
            "worst" if place == "worst" else "pass"
        chart = timechart.build(timechart.Series(
            title=title(key), unit=latest.unit,
            line=[(r.time, r.value) for r in mine], line_label=node,
            documented=latest.documented, floor=latest.floor, marks=marks[key],
            dots=[(r.time, r.value, r.verdict, f"{r.verdict}: {r.value:,.2f} {r.unit} in "
                   f"{r.session} ({when(r.time)})")
                  for r in mine if r.verdict in ("fail", "suspicious", *NOT_JUDGED)],
            **_bands(fleet)))
        figures.append({"title": title(key), "status": status, "chart": chart,
                        "steps": steps, "rows": [_newest_row(latest)]})
    order = ("fail", "drifting", "unjudged", "flagged", "worst", "pass")
    figures.sort(key=lambda f: order.index(f["status"]))

    latest_all = sorted(newest.values(), key=lambda r: r.time)
    verdict = {
        "fails": [_finding(r) for r in latest_all if r.verdict == "fail"],
        "unjudged": [_finding(r) for r in latest_all if r.verdict in NOT_JUDGED],
        "suspicious": [_finding(r) for r in latest_all if r.verdict == "suspicious"],
        "drifts": [d.text for d in drifts],
        "drift_judged": "now" if found.published is None else
        f"by the pass published {when(found.published)}, the history unchanged since",
        "flags": [{"time": when(e.time), "kind": e.kind, "session": e.session or "-",
                   "reason": e.reason} for e in reversed(events)][:MOST_NAMED],
        "flag_count": len(events),
        "software": _software(latest_all[-1].image, latest_all[-1].driver)
        if latest_all else None,
        "changes": [{"time": when(time), "session": session, "text": _change(before, after),
                     "moved": _named(moved[i])}
                    for i, (time, session, before, after) in enumerate(changes)],
        "cluster": _named([{"time": when(e.time), "session": e.session, "text": e.text}
                           for e in cluster]),
        "worst": _named(worst), "tenth": tenth, "judged": judged,
        "newest": (latest_all[-1].session, when(latest_all[-1].time)) if latest_all else None,
    }
    text = html.template("history.html").render(
        page="node", generated=when(datetime.now(timezone.utc).timestamp()),
        source=str(source), node=node, check=check,
        since=when(since) if since is not None else None, verdict=verdict,
        figures=figures, count=len(figures))
    return Page(text, len(figures), 1 if figures else 0)


def _place(record: Record, band: Summary | None) -> str | None:
    """Where a node's value lies in its session's fleet: "worst" (no other node worse),
    "tenth" (worse than the fleet's 10th percentile, on the side that is worse), else
    "within"; None without a fleet of at least 3 nodes, or for a unit of no direction."""
    higher = drift.higher_is_better(record.unit)
    if band is None or band.nodes < 3 or higher is None:
        return None
    if (record.value <= band.least) if higher else (record.value >= band.most):
        return "worst"
    if (record.value < band.low) if higher else (record.value > band.high):
        return "tenth"
    return "within"


def _finding(r: Record) -> dict[str, str]:
    return {"title": title(r.key), "value": _number(r.value), "unit": r.unit,
            "floor": _number(r.floor), "verdict": r.verdict, "session": r.session,
            "time": when(r.time)}


# --------------------------------------------------------------------------- the cluster

def cluster_page(history: History, check: str | None, since: float | None,
                 source: Path) -> Page:
    """The cluster's page (of one check; since ``since``): aggregates only."""
    summaries = history.summaries(check, since)
    newest = [r for r in history.newest(check) if since is None or r.time >= since]
    by_key: dict[Key, list[Record]] = {}
    for r in newest:
        by_key.setdefault(r.key, []).append(r)
    cluster = _cluster_events(drift.cluster_events(history), check, since)
    events = history.event_log(since=since)

    figures = []
    for key, fleet in sorted(summaries.items()):
        mine = by_key.get(key, [])
        reference = Counter((r.documented, r.floor) for r in mine).most_common(1)
        documented, floor = reference[0][0] if reference else (None, None)
        changes = _software_changes((s.time, s.session, (s.image, s.driver)) for s in fleet)
        marks = [Mark(time, "software", _short(before, after),
                      f"the fleet's most common software: {_change(before, after)} from "
                      f"{session} ({when(time)})")
                 for time, session, before, after in changes]
        steps = [f"at {_change(before, after)} ({session}): the fleet's median "
                 f"{_percent(_moved(*_fleet_split(fleet, session, time)))}"
                 for time, session, before, after in changes]
        marks += [Mark(e.time, "event", "cluster event", e.text)
                  for e in cluster if _event_key(e) == key]
        higher = drift.higher_is_better(fleet[-1].unit) is not False
        failing = sorted(r.node for r in mine if r.verdict == "fail")
        last = fleet[-1]
        figures.append({
            "title": title(key), "status": "fail" if failing else "pass",
            "chart": timechart.build(timechart.Series(
                title=title(key), unit=last.unit, documented=documented, floor=floor,
                marks=marks, dots=[(s.time, s.least if higher else s.most, "fail",
                                    f"{s.fails} of {s.nodes} nodes failed in {s.session} "
                                    f"({when(s.time)})") for s in fleet if s.fails],
                **_bands(fleet))),
            "newest": {"session": last.session, "time": when(last.time), "nodes": last.nodes,
                       "median": _number(last.median), "low": _number(last.low),
                       "high": _number(last.high), "least": _number(last.least),
                       "most": _number(last.most), "unit": last.unit,
                       "fails": last.fails, "software": last.softwares},
            "failing": _named(failing), "steps": steps,
        })
    figures.sort(key=lambda f: f["status"] != "fail")

    failing_nodes: dict[str, list[str]] = {}
    unjudged: set[str] = set()
    for r in newest:
        if r.verdict == "fail":
            failing_nodes.setdefault(r.node, []).append(title(r.key))
        elif r.verdict in NOT_JUDGED:
            unjudged.add(r.node)
    # each node once: the software of its newest record
    software = Counter(pair for _node, (_time, pair) in {
        r.node: (r.time, (r.image, r.driver)) for r in sorted(newest, key=lambda r: r.time)
    }.items())
    swept = [e for e in events if e.session]
    last_sweep = swept[-1].session if swept else None
    decided = [e for e in swept if e.session == last_sweep]
    newest_summary = max((s for fleet in summaries.values() for s in fleet),
                         key=lambda s: s.time, default=None)
    verdict = {
        "nodes": len({r.node for r in newest}),
        "newest": (newest_summary.session, when(newest_summary.time), newest_summary.nodes)
        if newest_summary else None,
        "failing": _named([{"node": n, "figures": _named(f, 3)}
                           for n, f in sorted(failing_nodes.items())]),
        "unjudged": _named(sorted(unjudged)),
        "sweep": {"session": last_sweep, "time": when(decided[-1].time),
                  **{kind: _named(sorted({e.node for e in decided if e.kind == kind}))
                     for kind in ("flagged", "drained", "resumed")}} if decided else None,
        "cluster": _named([{"time": when(e.time), "session": e.session, "text": e.text}
                           for e in cluster]),
        "software": _named([{"text": _software(*pair), "nodes": n}
                            for pair, n in software.most_common()], 5),
    }
    text = html.template("history.html").render(
        page="cluster", generated=when(datetime.now(timezone.utc).timestamp()),
        source=str(source), node=None, check=check,
        since=when(since) if since is not None else None, verdict=verdict,
        figures=figures, count=len(figures))
    return Page(text, len(figures), verdict["nodes"])
