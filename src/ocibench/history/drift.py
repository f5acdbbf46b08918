"""Drift, the lemon list: a node slipping below its own past, named before it fails a floor.

The rule (issue 23, item 3), per node and figure, on the node's values one per sweep:

* **recent**: the median of its last :data:`RECENT_K` sweeps;
* **baseline**: the median of up to :data:`WINDOW` sweeps before those, at least
  :data:`MIN_BASELINE` of them (fewer: no baseline, no flag);
* **MAD**: the figure's run-to-run spread: the median absolute deviation of baseline
  values from their node's baseline, as a fraction of it, pooled over the node and up
  to :data:`POOL` - 1 other nodes that measured the figure (:func:`figure_mad`), and
  *scaled* by :data:`MAD_SCALE` (1.4826) so that it estimates a standard deviation for
  normal noise, as ``ocibench.sweep.verdicts`` scales the cluster's spread;
* **drift** when the recent median is worse than the baseline by more than
  max(:data:`MAD_K` x MAD, :data:`MIN_DROP`) of the baseline, *and* worse than the
  cluster's median of the same figure over the same sweeps.  "Worse" is lower for a rate
  and higher for a latency (``ocibench.metrics``: each unit's metric knows its
  direction).  The cluster condition keeps a change every node shares (a new driver, a
  busier fabric) off the list, and a node that was always the cluster's slowest but has
  not moved off its own past is no drift.

Why these numbers: scripts/bench-drift.py measures the rule on 1,000 synthetic series per
figure, built from the run-to-run spreads this project recorded (docs/drift.md).  With
k = 2, the pooled scaled MAD and a baseline of at least 15 sweeps, a sustained drop of
max(5 %, 4 x MAD) is flagged within 3 sweeps in 94-100 % of the series (the noisiest
latency misses 95 % narrowly), and at most 0.8 % of the noise-only series are ever
flagged over 52 sweeps.  k = 3 misses the
detection target (its median is all dropped only at the third sweep: one chance), the
node's own MAD (20 values: off by 25 %) or the unscaled one (3 x 0.67 sigma) flag noise
too often, and so does a baseline of 5 or 10 sweeps.

Only sane values count: a figure whose verdict is fail or unjudged is already the sweep's
finding (or no measurement to trust), and never part of a baseline or a recent median.

The statistics (:func:`assess`, :func:`flags`) work on plain sequences of floats, so that
the benchmark measures the same code the sweep and the health check run; :func:`drifting`
is the thin layer over :class:`~ocibench.history.store.History`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ocibench import metrics
from ocibench.history.store import History, Record

#: Sweeps in the recent median.  2: by the second and the third sweep after a drop,
#: every value of the median is dropped (two chances to flag it within 3 sweeps; k = 3
#: has one), and one low sweep among normal ones moves it half as far (docs/drift.md).
RECENT_K = 2
#: At most this many sweeps before the recent ones make the baseline: long enough that
#: its median is steady, short enough that a node's figure from long ago (an older
#: image, a replaced part) ages out.
WINDOW = 20
#: Fewer baseline sweeps than this: no baseline yet, never a flag.  With 5 or 10, the
#: young baselines' noise flags up to 4.5 % or 1.6 % of the noisy figures' noise-only
#: series over 52 sweeps (docs/drift.md); a new node is judged from its 17th sweep.
MIN_BASELINE = 15
#: Scaled MADs of a drop that make drift (the issue's 3).
MAD_K = 3.0
#: A drop never counts as drift below this fraction of the baseline (the issue's 3 %):
#: a node whose figure barely moves would otherwise be flagged for a hair.
MIN_DROP = 0.03
#: Nodes whose baselines make a figure's MAD (the node itself and up to POOL - 1 others
#: that measured the same figure): :func:`figure_mad`.
POOL = 16
#: MAD x 1.4826 estimates the standard deviation of normally distributed values
#: (Rousseeuw and Croux, JASA 88 (1993) 1273); the same constant as the sweep's outliers.
MAD_SCALE = 1.4826
#: Verdicts of values a baseline or a recent median may use (metrics.Verdict and
#: RunVerdict words): read and not found broken.
SANE = frozenset({"pass", "suspicious", "no reference", "recorded"})


@dataclass(frozen=True)
class Assessment:
    """A node's figure against its own past: the numbers the rule compares."""

    baseline: float
    recent: float
    mad: float          # scaled, in the figure's unit
    drop: float         # fraction of the baseline, positive when recent is worse
    threshold: float    # fraction of the baseline: max(MAD_K x mad / |baseline|, MIN_DROP)
    count: int          # baseline sweeps

    @property
    def beyond(self) -> bool:
        return self.drop > self.threshold


def worse_by(value: float, reference: float, higher_is_better: bool) -> float:
    """How much worse ``value`` is than ``reference``, as a fraction of ``reference``
    (negative when better); inf when the reference is 0 and the value worse."""
    delta = (reference - value) if higher_is_better else (value - reference)
    if reference == 0:
        return float("inf") if delta > 0 else 0.0
    return delta / abs(reference)


def baseline_values(values: Sequence[float], k: int = RECENT_K,
                    window: int = WINDOW) -> Sequence[float]:
    """The values of the baseline: up to ``window`` before the last ``k``."""
    return values[:-k][-window:] if k > 0 else values[-window:]


def relative_mad(values: Sequence[float]) -> float | None:
    """The scaled MAD of ``values`` as a fraction of their median (None for a median of
    0, where no fraction is defined)."""
    middle = statistics.median(values)
    if not middle:
        return None
    return MAD_SCALE * statistics.median(abs(v - middle) for v in values) / abs(middle)


def figure_mad(series: Iterable[Sequence[float]], *, k: int = RECENT_K, window: int = WINDOW,
               min_baseline: int = MIN_BASELINE) -> float | None:
    """The figure's run-to-run spread: the scaled MAD, as a fraction, of the baseline
    values of several nodes pooled, each value taken around its own node's baseline
    median (so that nodes at different levels pool); series with fewer than
    ``min_baseline`` baseline values are left out.  None without any.

    Why pooled: a MAD of one node's 20 values is itself off by about 25 % (one standard
    deviation), and a threshold of 3 MADs drawn low flags noise (docs/drift.md: 7-8 % of
    noise-only series over 52 sweeps, against the 1 % allowed); 16 nodes' values give the
    figure's spread within about 6 %."""
    pooled: list[float] = []
    for values in series:
        earlier = baseline_values(values, k, window)
        if len(earlier) < min_baseline:
            continue
        middle = statistics.median(earlier)
        if middle:
            pooled += [abs(v - middle) / abs(middle) for v in earlier]
    return MAD_SCALE * statistics.median(pooled) if pooled else None


def assess(values: Sequence[float], higher_is_better: bool, *, mad: float | None = None,
           k: int = RECENT_K, window: int = WINDOW, min_baseline: int = MIN_BASELINE,
           mad_k: float = MAD_K, min_drop: float = MIN_DROP) -> Assessment | None:
    """The rule's numbers for ``values`` (one per sweep, oldest first), or None while
    there are fewer than ``k`` recent and ``min_baseline`` earlier values.  ``mad`` is
    the figure's scaled MAD as a fraction (:func:`figure_mad`); without it, the node's
    own baseline's."""
    earlier = baseline_values(values, k, window)
    if k < 1 or len(earlier) < min_baseline:
        return None
    recent = statistics.median(values[-k:])
    baseline = statistics.median(earlier)
    spread = relative_mad(earlier) if mad is None else mad
    if spread is None:   # a baseline of 0: no fraction of it means anything
        return None
    return Assessment(baseline, recent, spread * abs(baseline),
                      worse_by(recent, baseline, higher_is_better),
                      max(mad_k * spread, min_drop), len(earlier))


def flags(values: Sequence[float], cluster_median: float | None, higher_is_better: bool,
          **rule: Any) -> Assessment | None:
    """The assessment when ``values`` drift (beyond the threshold and worse than the
    cluster's median), else None.  No cluster median (no other node measured the
    figure) is no flag: the rule cannot tell the node's change from the cluster's."""
    found = assess(values, higher_is_better, **rule)
    if found is None or not found.beyond or cluster_median is None:
        return None
    if worse_by(found.recent, cluster_median, higher_is_better) <= 0:
        return None
    return found


def higher_is_better(unit: str) -> bool | None:
    """The direction of a figure in ``unit`` (``ocibench.metrics``), None for a unit no
    metric states (its drift cannot be told)."""
    found = {m.higher_is_better for m in metrics.METRICS.values() if unit in m.units}
    return found.pop() if len(found) == 1 else None


# --------------------------------------------------------------------------- the history

@dataclass(frozen=True)
class Drift:
    """One figure of one node drifting: the numbers, and one line that names them."""

    node: str
    check: str
    variant: str
    size: int | None
    figure: str
    baseline: float
    recent: float
    cluster_median: float | None
    drop: float            # fraction of the baseline, positive: worse
    threshold: float       # fraction of the baseline the drop exceeds
    repeat_offender: bool
    reason: str
    unit: str = ""
    #: Times the node was flagged, drained and resumed before (the repeat offences)
    offences: int = 0
    #: Time of the node's sweep of this figure before its newest (None: no earlier one)
    previous: float | None = None


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
    """The node's newest event at or after ``since`` is a flag: it was flagged then (its
    previous sweep) and has not been drained or resumed since.  ``since`` None: never."""
    if since is None:
        return False
    newest = [kind for time, kind, _reason in events if time >= since]
    return bool(newest) and newest[-1] == "flagged"


def _sane(records: Iterable[Record], now: float | None) -> list[Record]:
    return [r for r in records if r.verdict in SANE and (now is None or r.time <= now)]


Key = tuple[str, str, "int | None", str]


class _Figures:
    """What the nodes of one judgement share per figure, read once: the nodes the
    figure's MAD is pooled over (the first POOL in name order with a baseline, trying at
    most 4 x POOL nodes, so that a cluster where few nodes measure the figure costs no
    more) and their values."""

    def __init__(self, history: History, now: float | None) -> None:
        self.history, self.now = history, now
        self.nodes = history.nodes()
        self.pools: dict[Key, dict[str, list[float]]] = {}

    def pool(self, key: Key) -> dict[str, list[float]]:
        if key not in self.pools:
            found: dict[str, list[float]] = {}
            for node in self.nodes[:4 * POOL]:
                values = [r.value for r in _sane(self.history.series(node, *key), self.now)]
                if len(values) >= RECENT_K + MIN_BASELINE:
                    found[node] = values
                    if len(found) == POOL:
                        break
            self.pools[key] = found
        return self.pools[key]

    def mad(self, key: Key, node: str, values: Sequence[float]) -> float | None:
        """The figure's MAD: ``node``'s values and up to POOL - 1 others'."""
        others = [v for n, v in self.pool(key).items() if n != node][:POOL - 1]
        return figure_mad([values, *others])


def _size(size: int | None) -> str:
    return "" if size is None else f" size {size}"


def _reason(record: Record, found: Assessment, cluster: float, higher: bool,
            mad: float, repeats: int) -> str:
    side = "below" if higher else "above"
    unit = record.unit
    text = (f"{record.check} {record.variant}{_size(record.size)} {record.figure}: drifting: "
            f"median of its last {RECENT_K} sweeps {found.recent:.4g} {unit} is "
            f"{100 * found.drop:.1f} % {side} its baseline {found.baseline:.4g} {unit} "
            f"({found.count} sweeps before; threshold {100 * found.threshold:.1f} % = "
            f"max({MAD_K:g} x MAD {100 * mad:.1f} %, {100 * MIN_DROP:g} %)) and {side} "
            f"the cluster median {cluster:.4g} {unit}")
    if repeats:
        text += (f"; repeat offender: flagged, drained and resumed {repeats} time"
                 f"{'s' if repeats > 1 else ''} before")
    return " ".join(text.split())


def drifting(history: History, node: str, *, now: float | None = None,
             session: str | None = None) -> list[Drift]:
    """The figures of ``node`` that drift, as of ``now`` (None: everything kept).
    ``session`` given: only the figures whose newest record is of that session (what a
    sweep measured).  A figure of a unit no metric states, or of too short a history,
    is never flagged."""
    return drifting_nodes(history, [node], now=now, session=session)[node]


def drifting_nodes(history: History, nodes: Sequence[str], *, now: float | None = None,
                   session: str | None = None) -> dict[str, list[Drift]]:
    """:func:`drifting` of each of ``nodes``, reading what they share once (the sweep's
    way: each figure's pool of nodes, and the cluster's median)."""
    shared = _Figures(history, now)
    recent: dict[Key, list[tuple[str, Record, list[Record]]]] = {}
    for node in nodes:
        for latest in history.latest(node):
            if session is not None and latest.session != session:
                continue
            if higher_is_better(latest.unit) is None:
                continue
            mine = _sane(history.series(node, *latest.key), now)
            if len(mine) >= RECENT_K + MIN_BASELINE:
                recent.setdefault(latest.key, []).append((node, latest, mine))
    found: dict[str, list[Drift]] = {node: [] for node in nodes}
    repeats = {node: offences(history.events(node), now) for node in nodes}
    for key, judged in recent.items():
        # The cluster's median: every node's newest value since the earliest of the
        # judged nodes' last RECENT_K sweeps (one read per figure; for one node, since
        # its own).
        since = min(mine[-RECENT_K].time for _node, _latest, mine in judged)
        cluster = history.cluster_median(*key, since=since)
        if cluster is None:
            continue
        for node, latest, mine in judged:
            higher = bool(higher_is_better(latest.unit))
            values = [r.value for r in mine]
            mad = shared.mad(key, node, values)
            flagged = None if mad is None else flags(values, cluster, higher, mad=mad)
            if flagged is None or mad is None:
                continue
            found[node].append(Drift(
                node, latest.check, latest.variant, latest.size, latest.figure,
                flagged.baseline, flagged.recent, cluster, flagged.drop, flagged.threshold,
                repeats[node] > 0,
                _reason(latest, flagged, cluster, higher, mad, repeats[node]),
                latest.unit, repeats[node], mine[-2].time))
    return found


def latest_flag(history: History, node: str) -> tuple[float, str] | None:
    """(time, reason) of the node's newest event where that is a flag (the last sweep
    that judged it found it drifting, and it was not drained or resumed since), else
    None: what the sweep decided, read without judging drift again (a health check's
    way; :func:`drifting` reads the figure's pool and the cluster's median)."""
    events = history.events(node)
    if not events or events[-1][1] != "flagged":
        return None
    newest = max((r.time for r in history.latest(node)), default=None)
    # A sweep keeps its figures before it flags (sweep.run): a flag older than the
    # node's newest figure is that of an earlier sweep, and a later one found no drift.
    if newest is not None and newest > events[-1][0]:
        return None
    return events[-1][0], events[-1][2]
