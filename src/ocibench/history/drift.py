"""Drift, the lemon list: a node slipping against its peers, named before it fails a floor;
and the moves the whole fleet makes together, named once as cluster events.

A sweep is one session of the history: every node measured the same figures under the
same conditions (the same fabric load, the same day).  So a node is judged by its place
among its **peers of the same session**, not by its raw values (docs/drift.md):

* **residual**: per node, figure and session, how much worse the node's value is than
  the median of its peers' (the other nodes of the session that measured the figure, on
  the same image and driver, at least :data:`MIN_PEERS` of them), as a fraction of that
  median: positive is worse ("worse" is lower for a rate, higher for a latency: the
  metric's direction, ``ocibench.metrics``).  A change every node shares (a driver, a
  busier fabric) moves the node and its peers together: its residual does not move.
* **reference**: the node's usual place among its peers: the median of its residuals
  over up to :data:`WINDOW` sweeps before the recent :data:`PERSIST_WINDOW` (at least
  :data:`MIN_BASELINE`), or the median of all it has since its baseline began (up to
  :data:`HORIZON` sweeps), or its peers' own level (residual 0), whichever is the
  worst: a node that falls back to where it used to be, or to where its peers are,
  after a spell of being better, has not drifted.
* **MAD**: the figure's spread of residuals: the median absolute deviation of every
  node's baseline residuals from their node's baseline median, pooled over the fleet,
  scaled by :data:`MAD_SCALE` (an estimate of the standard deviation).
* **drifting** (flagged: the sweep reruns it) when the median of its last
  :data:`RECENT_K` residuals is worse than its reference by more than the threshold
  max(:data:`MAD_K` x MAD, :data:`MIN_DROP`);
* **persists** (the sweep and the healthcheck drain it) when, besides, at least
  :data:`PERSIST_LOW` of its last :data:`PERSIST_WINDOW` residuals are *each* worse
  than the reference by more than the threshold: two separate low sweeps, never the
  mean of a low one and a normal one.

**Baselines start again** at a change of the node's image or driver that is its own: a
change the majority of its session's nodes made with it (on the majority's software
before and after) moves its peers with it, so its place among them is still comparable
and is kept; a change it made alone, or with a minority (a re-imaged node, the first
batch of a rolling upgrade), starts its baseline again.

**Cluster events** (:func:`cluster_events`): the median of each session's values of a
figure over the fleet, judged by the same rule against its own past (either direction):
a step of it is one event ("moved -10.0 % on 100 of 100 nodes since session ..., with
driver 560.35.03"), never a node's drift.

Only sane values count: a figure whose verdict is fail or unjudged is the sweep's finding
already (or no measurement to trust).  Sessions are in the order they arrived
(``History.arrivals``), never sorted by their timestamps.

The statistics (:func:`assess`, :func:`residual_mad`, :func:`fleet_shift`) work on plain
sequences of floats, so that scripts/bench-drift.py measures the code the sweep runs;
:func:`read` is the one pass over the history that :func:`drifting_nodes` and
:func:`cluster_events` share.

**One node's page** (:func:`of_node`) shows what that pass found, without making it
again: every writer of the history makes it when it publishes the nodes' snapshots
(ocibench.history.current), and keeps in each node's snapshot the node's share (its
drifting figures, the cluster events of its figures) with what the pass read
(:func:`basis`).  While the history has not moved since (:func:`still`: no sweep
arrived, no value was added to the sessions read, no event of the node was kept) the
pass would find the same: the page reads the snapshot, a few KB.  Otherwise it makes
the pass itself.
"""

from __future__ import annotations

import math
import statistics
import time as clock
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ocibench import metrics
from ocibench.history.store import History

#: Sweeps in the recent median (the flag).  2: by the second and the third sweep after a
#: drop, every value of the median is dropped: two chances to flag it within 3 sweeps.
RECENT_K = 2
#: The recent sweeps persistence looks at, and that the baseline leaves out.
PERSIST_WINDOW = 3
#: Separate low sweeps among the recent ones that make a drift persist (a drain).
PERSIST_LOW = 2
#: At most this many sweeps (before the recent ones) make the baseline: long enough that
#: its median is steady, short enough that an old level ages out.
WINDOW = 20
#: Fewer baseline sweeps than this: no baseline yet, never a flag (docs/drift.md: 5 or 10
#: flag up to 4.5 % or 1.6 % of a noisy figure's noise-only series over 52 sweeps).
MIN_BASELINE = 15
#: The newest sweeps drift reads (sessions of at least MIN_PEERS + 1 nodes): the
#: baseline, the recent ones, and the node's longer normal level.
HORIZON = 48
#: Scaled MADs of a drop that make drift (issue 23: 3).
MAD_K = 3.0
#: A drop never counts below this fraction (issue 23: 3 %): a figure that barely moves
#: would otherwise be flagged for a hair.
MIN_DROP = 0.03
#: MAD x 1.4826 estimates the standard deviation of normally distributed values
#: (Rousseeuw and Croux, JASA 88 (1993) 1273); the same constant as the sweep's outliers.
MAD_SCALE = 1.4826
#: Other nodes of the same session and software a residual needs: the smallest median
#: that one odd peer cannot move far.
MIN_PEERS = 3
#: Verdicts of values drift may use (metrics.Verdict and RunVerdict words).
SANE = frozenset({"pass", "suspicious", "no reference", "recorded"})

Key = tuple[str, str, "int | None", str]


# --------------------------------------------------------------------------- the rule

def worse_by(value: float, reference: float, higher_is_better: bool) -> float:
    """How much worse ``value`` is than ``reference``, as a fraction of ``reference``
    (negative when better); inf when the reference is 0 and the value worse."""
    delta = (reference - value) if higher_is_better else (value - reference)
    if reference == 0:
        return math.inf if delta > 0 else 0.0
    return delta / abs(reference)


def median_without(ordered: Sequence[float], index: int) -> float:
    """The median of the sorted ``ordered`` without its element at ``index``: a node's
    peers' median, from the sorted values of the session it is one of."""
    count = len(ordered) - 1

    def at(j: int) -> float:
        return ordered[j if j < index else j + 1]

    middle = count // 2
    return at(middle) if count % 2 else (at(middle - 1) + at(middle)) / 2


def relative_mad(values: Sequence[float]) -> float | None:
    """The scaled MAD of ``values`` as a fraction of their median (None for a median of
    0, where no fraction is defined)."""
    middle = statistics.median(values)
    if not middle:
        return None
    return MAD_SCALE * statistics.median(abs(v - middle) for v in values) / abs(middle)


def baseline_of(residuals: Sequence[float], window: int = WINDOW,
                persist_window: int = PERSIST_WINDOW) -> Sequence[float]:
    """The baseline: up to ``window`` residuals before the last ``persist_window``."""
    return residuals[:-persist_window][-window:] if persist_window else residuals[-window:]


def residual_mad(series: Iterable[Sequence[float]], *, window: int = WINDOW,
                 persist_window: int = PERSIST_WINDOW,
                 min_baseline: int = MIN_BASELINE) -> float | None:
    """The figure's spread: the scaled MAD of the baseline residuals of every series
    pooled, each around its own series' baseline median (so that a node that always
    sits 5 % below its peers pools with the others); series with fewer than
    ``min_baseline`` are left out.  None without any.

    Why pooled: a MAD of one node's 20 values is itself off by about 25 % (one standard
    deviation), and a threshold drawn low flags noise (docs/drift.md)."""
    pooled: list[float] = []
    for residuals in series:
        base = baseline_of(residuals, window, persist_window)
        if len(base) < min_baseline:
            continue
        middle = statistics.median(base)
        pooled += [abs(v - middle) for v in base]
    return MAD_SCALE * statistics.median(pooled) if pooled else None


@dataclass(frozen=True)
class Assessment:
    """A node's figure against its usual place among its peers: the numbers compared.
    Residuals and everything here are fractions of the peers' median, positive worse."""

    baseline: float     # median of the baseline residuals
    normal: float       # median of every residual before the recent ones
    reference: float    # max(baseline, normal, 0): its usual place, never better than peers
    recent: float       # median of the last RECENT_K residuals
    mad: float          # the figure's scaled MAD (a fraction)
    drop: float         # recent - reference
    threshold: float    # max(MAD_K x mad, MIN_DROP)
    low: int            # of the last PERSIST_WINDOW residuals, those each beyond the threshold
    count: int          # baseline sweeps
    persist_low: int = PERSIST_LOW

    @property
    def beyond(self) -> bool:
        return self.drop > self.threshold

    @property
    def persists(self) -> bool:
        return self.beyond and self.low >= self.persist_low


def assess(residuals: Sequence[float], mad: float, *, k: int = RECENT_K,
           window: int = WINDOW, persist_window: int = PERSIST_WINDOW,
           persist_low: int = PERSIST_LOW, min_baseline: int = MIN_BASELINE,
           mad_k: float = MAD_K, min_drop: float = MIN_DROP) -> Assessment | None:
    """The rule's numbers for a node's ``residuals`` (one per sweep, oldest first, since
    its baseline began), or None while its baseline has fewer than ``min_baseline``.
    ``mad`` is the figure's (:func:`residual_mad`)."""
    earlier = residuals[:-persist_window] if persist_window else residuals
    base = earlier[-window:]
    if k < 1 or len(base) < min_baseline or len(residuals) < max(k, persist_window):
        return None
    baseline, normal = statistics.median(base), statistics.median(earlier)
    reference = max(baseline, normal, 0.0)
    recent = statistics.median(residuals[-k:])
    threshold = max(mad_k * mad, min_drop)
    low = sum(1 for v in residuals[len(residuals) - persist_window:]
              if v - reference > threshold)
    return Assessment(baseline, normal, reference, recent, mad, recent - reference,
                      threshold, low, len(base), persist_low)


def flags(residuals: Sequence[float], mad: float, **rule: Any) -> Assessment | None:
    """The assessment when ``residuals`` drift (flagged), else None."""
    found = assess(residuals, mad, **rule)
    return found if found is not None and found.beyond else None


@dataclass(frozen=True)
class Shift:
    """The fleet's median of a figure against its own past: a fraction of the baseline,
    signed as the value moved (negative: lower)."""

    baseline: float
    recent: float
    shift: float
    threshold: float

    @property
    def beyond(self) -> bool:
        return abs(self.shift) > self.threshold


def fleet_shift(medians: Sequence[float], *, k: int = RECENT_K, window: int = WINDOW,
                persist_window: int = PERSIST_WINDOW, min_baseline: int = MIN_BASELINE,
                mad_k: float = MAD_K, min_drop: float = MIN_DROP) -> Shift | None:
    """The same rule on the fleet's per-session medians (oldest first), in either
    direction: None without a baseline."""
    base = baseline_of(medians, window, persist_window)
    if len(base) < min_baseline or len(medians) < max(k, persist_window):
        return None
    spread = relative_mad(base)
    baseline = statistics.median(base)
    if spread is None:
        return None
    recent = statistics.median(medians[-k:])
    return Shift(baseline, recent, (recent - baseline) / abs(baseline),
                 max(mad_k * spread, min_drop))


def higher_is_better(unit: str) -> bool | None:
    """The direction of a figure in ``unit`` (``ocibench.metrics``), None for a unit no
    metric states (its drift cannot be told)."""
    found = {m.higher_is_better for m in metrics.METRICS.values() if unit in m.units}
    return found.pop() if len(found) == 1 else None


# --------------------------------------------------------------------------- the results

@dataclass(frozen=True)
class Drift:
    """One figure of one node drifting: the numbers, and one line that names them.
    ``baseline``, ``recent`` and ``cluster_median`` are in the figure's unit: the value
    its usual place among its peers would give now, the median of its last RECENT_K
    values, and its peers' median of those sweeps; ``drop`` and ``threshold`` are
    fractions of the peers' median."""

    node: str
    check: str
    variant: str
    size: int | None
    figure: str
    baseline: float
    recent: float
    cluster_median: float | None
    drop: float            # positive: worse than its usual place
    threshold: float       # the drop beyond which it is flagged
    repeat_offender: bool
    reason: str
    unit: str = ""
    #: Times the node was flagged, drained and resumed before (the repeat offences)
    offences: int = 0
    #: Time of the node's sweep of this figure before its newest (None: no earlier one)
    previous: float | None = None
    #: At least PERSIST_LOW separate sweeps of the last PERSIST_WINDOW were each low:
    #: what the sweep and the healthcheck drain for (a single low sweep is rerun)
    persists: bool = False


@dataclass(frozen=True)
class ClusterEvent:
    """A move of a figure the fleet made together: shown once, never a node's drift."""

    check: str
    variant: str
    size: int | None
    figure: str
    unit: str
    session: str           # the first session of the move
    time: float            # that session's time (the median of its values' times)
    shift: float           # fraction of the fleet's earlier median, signed as the value moved
    worse: bool
    baseline: float        # the fleet's median before, in the figure's unit
    recent: float          # and since
    moved: int             # nodes whose own value moved at least half as far, the same way
    measured: int          # nodes measured both before and since
    software: str | None   # the image or driver change it began with, if any
    text: str


def offences(events: Iterable[tuple[float, str, str]], before: float | None = None) -> int:
    """How many times the node was flagged, then drained, then resumed (in that order)
    before ``before``: a node flagged again after one such round is a repeat offender."""
    count, step = 0, 0
    for time, kind, _reason in events:
        if before is not None and time >= before:
            break
        if (step, kind) in ((0, "flagged"), (1, "drained"), (2, "resumed")):
            step += 1
            if step == 3:
                count, step = count + 1, 0
    return count


def flagged_since(events: Iterable[tuple[float, str, str]], since: float | None) -> bool:
    """The node's newest event at or after ``since`` is a flag.  Persistence is no
    longer told from events (:attr:`Drift.persists`); kept for readers of the events."""
    if since is None:
        return False
    newest = [kind for time, kind, _reason in events if time >= since]
    return bool(newest) and newest[-1] == "flagged"


# --------------------------------------------------------------------------- one pass

#: One node's figure over the sweeps read is one flat array of doubles, newest sweep
#: first, :data:`_STRIDE` numbers a sweep (one array a series, not one object a value:
#: 2.4 M values of 1,000 nodes x 50 figures x 48 sweeps): the session id, the value,
#: its residual (NaN: no peers), the peers' median, the time, and the software (id x 2,
#: + 1 where it is the session's majority's for the figure).
_SESSION, _VALUE, _RESIDUAL, _PEERS, _TIME, _SOFTWARE = range(6)
_STRIDE = 6


def _field(series: array, index: int, field: int) -> float:
    return series[index * _STRIDE + field]


@dataclass
class _FleetPoint:
    """A session's values of one figure over the fleet."""

    session: int
    median: float
    count: int
    majority: int          # its most common software id
    time: float


class Fleet:
    """What one pass over the newest :data:`HORIZON` sweeps of a history holds: every
    node's residual series of every figure, and the fleet's median per session.
    :meth:`drifting` and :meth:`events` judge from it without reading again."""

    def __init__(self, history: History, now: float | None = None) -> None:
        self.history, self.now = history, now
        index = history.series_index()
        self.software_names = history.software_index()
        self.keys: list[Key] = []
        self.units: list[str] = []
        self.higher: list[bool] = []
        figure_of: dict[Key, int] = {}
        #: series id -> (node, figure index), for the figures whose direction is known
        self.meta: dict[int, tuple[str, int]] = {}
        for sid, (node, check, variant, size, figure, unit) in index.items():
            higher = higher_is_better(unit)
            if higher is None:
                continue
            key = (check, variant, size, figure)
            if key not in figure_of:
                figure_of[key] = len(self.keys)
                self.keys.append(key)
                self.units.append(unit)
                self.higher.append(higher)
            self.meta[sid] = (node, figure_of[key])
        #: series id -> figure index (the reading loop's one lookup)
        self.figure_of = {sid: figure for sid, (_node, figure) in self.meta.items()}
        self.series: dict[int, array] = {}
        self.fleet: list[list[_FleetPoint]] = [[] for _ in self.keys]
        self.names: dict[int, str] = {}
        self._read()
        self._residuals: dict[int, tuple[list[float], list[int]]] = {}

    # ------------------------------------------------------------------ reading

    def _read(self) -> None:
        swept = 0
        for session, name in self.history.arrivals():
            if swept >= HORIZON:
                break
            self.names[session] = name
            if self._session(session, self.history.session_values(session, SANE)):
                swept += 1

    def _session(self, session: int, rows: list[tuple[Any, ...]]) -> bool:
        """Take one session's sane values; True when it was a sweep (a figure of it
        measured by MIN_PEERS + 1 nodes or more)."""
        figure_of, now, store = self.figure_of, self.now, self.series
        if now is not None:
            rows = [row for row in rows if row[2] <= now]
        # (figure, software) as one int: one dict lookup a value (2.4 M of them)
        grouped: dict[int, list[tuple[float, int, float]]] = {}
        for sid, value, time, software in rows:
            figure = figure_of.get(sid)
            if figure is not None:
                grouped.setdefault(figure << 32 | software, []).append((value, sid, time))
        groups: dict[int, dict[int, list[tuple[float, int, float]]]] = {}
        for key, members in grouped.items():
            groups.setdefault(key >> 32, {})[key & 0xFFFFFFFF] = members
        swept = False
        for figure, by_software in groups.items():
            everyone = [v for members in by_software.values() for v, _sid, _t in members]
            if len(everyone) <= MIN_PEERS:
                continue
            swept = True
            majority = max(by_software, key=lambda s: (len(by_software[s]), -s))
            times = [t for members in by_software.values() for _v, _sid, t in members]
            self.fleet[figure].append(_FleetPoint(session, statistics.median(everyone),
                                                  len(everyone), majority,
                                                  statistics.median(times)))
            sign = 1.0 if self.higher[figure] else -1.0   # residual: (peers - value) x sign
            for software, members in by_software.items():
                tag = 2 * software + (software == majority)
                for (value, sid, time), peers in zip(members, _peers(members)):
                    # NaN peers (too few) give NaN; a median of 0 gives no fraction
                    residual = math.nan if not peers else sign * (peers - value) / abs(peers)
                    series = store.get(sid)
                    if series is None:
                        series = store[sid] = array("d")
                    series.extend((session, value, residual, peers, time, tag))
        return swept

    # ------------------------------------------------------------------ nodes

    @staticmethod
    def since_change(series: array) -> int:
        """How many of the newest values of ``series`` are since its baseline began: the
        newest change of software that was the node's own (see the module's text)."""
        tags = series[_SOFTWARE::_STRIDE]   # newest first
        if tags.count(tags[0]) == len(tags):   # one software throughout: the usual case
            return len(tags)
        tags = [int(t) for t in tags]
        for i in range(len(tags) - 1):
            newer, older = tags[i], tags[i + 1]
            if newer >> 1 != older >> 1 and not (newer & 1 and older & 1):
                return i + 1
        return len(tags)

    def residuals(self, sid: int) -> tuple[list[float], list[int]]:
        """The series' residuals since its baseline began, oldest first, and the
        positions (newest first) they came from."""
        if sid not in self._residuals:
            series = self.series[sid]
            kept = self.since_change(series)
            values = series[_RESIDUAL::_STRIDE][:kept]
            if not math.isnan(math.fsum(values)):    # every value had peers: the usual case
                self._residuals[sid] = (values[::-1].tolist(), list(range(kept)))
            else:
                positions = [i for i in range(kept - 1, -1, -1) if not math.isnan(values[i])]
                self._residuals[sid] = ([values[i] for i in positions], positions[::-1])
        return self._residuals[sid]

    def mads(self) -> list[float | None]:
        """Each figure's residual MAD, pooled over every node."""
        pooled: list[list[list[float]]] = [[] for _ in self.keys]
        for sid in self.series:
            pooled[self.meta[sid][1]].append(self.residuals(sid)[0])
        return [residual_mad(s) for s in pooled]

    def drifting(self, nodes: Sequence[str], session: str | None = None) -> dict[str, list[Drift]]:
        """Each of ``nodes``' drifting figures (``session`` given: only the figures whose
        newest record is of that session)."""
        wanted = set(nodes)
        found: dict[str, list[Drift]] = {node: [] for node in nodes}
        mads = self.mads()
        only = None if session is None else self._newest_in(session)
        for sid, series in self.series.items():
            node, figure = self.meta[sid]
            if node not in wanted or (only is not None and sid not in only):
                continue
            mad = mads[figure]
            residuals, positions = self.residuals(sid)
            judged = None if mad is None else flags(residuals, mad)
            if judged is None:
                continue
            found[node].append(self._drift(node, figure, series, judged, positions))
        repeats = {node: offences(self.history.events(node), self.now)
                   for node, drifts in found.items() if drifts}
        return {node: [self._named(d, repeats.get(node, 0)) for d in sorted(
            drifts, key=lambda d: (d.check, d.variant, d.size or -1, d.figure))]
            for node, drifts in found.items()}

    def _newest_in(self, session: str) -> set[int]:
        """The series whose newest record (any verdict) is of ``session``: those it
        holds, less those of a session that arrived after it (a sweep judges its own
        figures, and a later one may have arrived meanwhile)."""
        ids = [sid for sid, name in self.names.items() if name == session]
        if not ids:
            return set()
        later = [sid for sid in self.names if sid > ids[0]]
        return self.history.series_of(ids) - self.history.series_of(later)

    def _drift(self, node: str, figure: int, series: array, judged: Assessment,
               positions: list[int]) -> Drift:
        check, variant, size, name = self.keys[figure]
        higher = self.higher[figure]
        recent = positions[:RECENT_K]
        peers = statistics.median(_field(series, i, _PEERS) for i in recent)
        value = statistics.median(_field(series, i, _VALUE) for i in recent)
        usual = peers * (1 - judged.reference) if higher else peers * (1 + judged.reference)
        previous = _field(series, positions[1], _TIME) if len(positions) > 1 else None
        return Drift(node, check, variant, size, name, usual, value, peers, judged.drop,
                     judged.threshold, False, _reason(self.keys[figure], self.units[figure],
                                                      higher, value, peers, judged),
                     self.units[figure], 0, previous, judged.persists)

    @staticmethod
    def _named(found: Drift, repeats: int) -> Drift:
        if not repeats:
            return found
        reason = (f"{found.reason}; repeat offender: flagged, drained and resumed {repeats} "
                  f"time{'s' if repeats > 1 else ''} before")
        return replace(found, repeat_offender=True, offences=repeats, reason=reason)

    # ------------------------------------------------------------------ the fleet

    def events(self) -> list[ClusterEvent]:
        """One event per figure whose fleet median moved (either way), by figure."""
        found = []
        for figure in sorted(range(len(self.keys)), key=lambda f: _sort_key(self.keys[f])):
            event = self._event(figure)
            if event is not None:
                found.append(event)
        return found

    def _event(self, figure: int) -> ClusterEvent | None:
        points = self.fleet[figure][::-1]    # oldest first
        medians = [p.median for p in points]
        shift = fleet_shift(medians)
        if shift is None or not shift.beyond:
            return None
        up = shift.shift > 0
        # the move: the newest sessions beyond the threshold, the same way
        start = len(points)
        while start > 0 and _beyond(points[start - 1].median, shift, up):
            start -= 1
        if start == len(points):       # the newest is back within: no move now
            return None
        since = [p.median for p in points[start:]]
        after = statistics.median(since)
        moved_by = (after - shift.baseline) / abs(shift.baseline)
        higher = self.higher[figure]
        worse = (moved_by < 0) == higher
        before = {p.session for p in points[max(0, start - WINDOW):start]}
        after_sessions = {p.session for p in points[start:]}
        moved, measured = self._moved(figure, before, after_sessions, moved_by)
        software = None
        if start > 0:
            software = self._change(points[start - 1].majority, points[start].majority)
        first = points[start]
        check, variant, size, name = self.keys[figure]
        unit = self.units[figure]
        text = (f"{_figure_name(self.keys[figure])}: the fleet moved {100 * moved_by:+.1f} % "
                f"({'worse' if worse else 'better'}: median {shift.baseline:.4g} -> "
                f"{after:.4g} {unit}) on {moved} of {measured} nodes since session "
                f"{self.names.get(first.session, first.session)} "
                f"({_when(first.time)})"
                + (f", with {software}" if software else ", with no image or driver change")
                + ": a change the fleet shares, no node's drift")
        return ClusterEvent(check, variant, size, name, unit,
                            self.names.get(first.session, str(first.session)), first.time,
                            moved_by, worse, shift.baseline, after, moved, measured,
                            software, " ".join(text.split()))

    def _moved(self, figure: int, before: set[int], after: set[int],
               shift: float) -> tuple[int, int]:
        moved = measured = 0
        for sid, series in self.series.items():
            if self.meta[sid][1] != figure:
                continue
            pairs = list(zip(series[_SESSION::_STRIDE], series[_VALUE::_STRIDE]))
            old = [v for s, v in pairs if s in before]
            new = [v for s, v in pairs if s in after]
            if not old or not new:
                continue
            measured += 1
            middle = statistics.median(old)
            if middle and (statistics.median(new) - middle) / abs(middle) * (
                    1 if shift > 0 else -1) >= abs(shift) / 2:
                moved += 1
        return moved, measured

    def _change(self, older: int, newer: int) -> str | None:
        if older == newer:
            return None
        was = self.software_names.get(older, (None, None))
        now = self.software_names.get(newer, (None, None))
        parts = [f"{what} {now[i] or 'unknown'} (was {was[i] or 'unknown'})"
                 for i, what in enumerate(("image", "driver")) if was[i] != now[i]]
        return " and ".join(parts) or None


def _peers(members: list[tuple[float, int, float]]) -> list[float]:
    """The median of the others' values for each of one session's members of a figure
    and software (value, series, time); NaN where fewer than MIN_PEERS others.
    :func:`median_without` for each, without its call: without one element, the median
    of a sorted list is one of three (the element is below, at or above the middle)."""
    ordered = sorted(v for v, _sid, _t in members)
    n = len(ordered)
    if n - 1 < MIN_PEERS:
        return [math.nan] * n
    h = (n - 1) // 2
    pivot = ordered[h]
    if n % 2 == 0:        # n - 1 others, odd: one middle element
        below = ordered[h + 1]
        return [pivot if v > pivot else below for v, _sid, _t in members]
    high = (ordered[h - 1] + pivot) / 2                 # it is above the middle
    low = (pivot + ordered[h + 1]) / 2                  # it is below
    middle = (ordered[h - 1] + ordered[h + 1]) / 2      # it is the middle
    under = ordered[h - 1]
    return [high if v > pivot else low if v <= under else middle for v, _sid, _t in members]


def _beyond(median: float, shift: Shift, up: bool) -> bool:
    moved = (median - shift.baseline) / abs(shift.baseline)
    return moved > shift.threshold if up else moved < -shift.threshold


def _sort_key(key: Key) -> tuple[str, str, int, str]:
    check, variant, size, figure = key
    return (check, variant, -1 if size is None else size, figure)


def _figure_name(key: Key) -> str:
    check, variant, size, figure = key
    return " ".join(f"{check} {variant}{'' if size is None else f' size {size}'} {figure}"
                    .split())


def _when(stamp: float) -> str:
    try:
        return clock.strftime("%Y-%m-%d %H:%M UTC", clock.gmtime(stamp))
    except (OverflowError, OSError, ValueError):
        return "an unknown time"


def _reason(key: Key, unit: str, higher: bool, value: float, peers: float,
            judged: Assessment) -> str:
    side = "below" if higher else "above"
    where = (f"{100 * judged.reference:.1f} % {side}" if judged.reference > 0
             else "level with or better than")
    persists = (f"low in {judged.low} of its last {PERSIST_WINDOW} sweeps: persists"
                if judged.persists else
                f"low in {judged.low} of its last {PERSIST_WINDOW} sweeps: "
                f"{PERSIST_LOW} make it persist")
    text = (f"{_figure_name(key)}: drifting: median of its last {RECENT_K} sweeps "
            f"{value:.4g} {unit} is {100 * judged.recent:.1f} % {side} its peers' median "
            f"{peers:.4g} {unit} of the same sweeps, where it is usually {where} them "
            f"({judged.count} sweeps before): {100 * judged.drop:.1f} % worse, threshold "
            f"{100 * judged.threshold:.1f} % = max({MAD_K:g} x MAD {100 * judged.mad:.1f} %, "
            f"{100 * MIN_DROP:g} %); {persists}")
    return " ".join(text.split())


# --------------------------------------------------------------------------- the interface

def read(history: History, *, now: float | None = None) -> Fleet:
    """One pass over the newest sweeps of ``history`` (values stamped after ``now``
    left out, None: everything kept): judge nodes and the fleet from it."""
    return Fleet(history, now)


def drifting(history: History, node: str, *, now: float | None = None,
             session: str | None = None) -> list[Drift]:
    """The figures of ``node`` that drift, as of ``now`` (None: everything kept).
    ``session`` given: only the figures whose newest record is of that session (what a
    sweep measured).  A node is judged against its peers: this reads the fleet's newest
    sweeps, as :func:`drifting_nodes` does for all of them at once."""
    return drifting_nodes(history, [node], now=now, session=session)[node]


def drifting_nodes(history: History, nodes: Sequence[str], *, now: float | None = None,
                   session: str | None = None) -> dict[str, list[Drift]]:
    """:func:`drifting` of each of ``nodes``, from one pass over the history."""
    return read(history, now=now).drifting(nodes, session)


def cluster_events(history: History, *, now: float | None = None) -> list[ClusterEvent]:
    """The moves the fleet made together, one per figure that moved (see the module's
    text): shown once, never a node's drift."""
    return read(history, now=now).events()


def latest_flag(history: History, node: str) -> tuple[float, str] | None:
    """(time, reason) of the node's newest event where that is a flag (the last sweep
    that judged it found it drifting, and it was not drained or resumed since), else
    None: what the sweep decided, read without judging drift again."""
    events = history.events(node)
    if not events or events[-1][1] != "flagged":
        return None
    newest = max((r.time for r in history.latest(node)), default=None)
    # A sweep keeps its figures before it flags (sweep.run): a flag older than the
    # node's newest figure is that of an earlier sweep, and a later one found no drift.
    if newest is not None and newest > events[-1][0]:
        return None
    return events[-1][0], events[-1][2]
