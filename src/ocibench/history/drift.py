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
max(5 %, 4 x MAD) is flagged within 3 sweeps in about 95-99 % of the series, and about
1 % or fewer of the noise-only series are ever flagged over 52 sweeps.  k = 3 misses the
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
#: young baselines' noise flags 4.5 % or 1.2 % of noise-only series of the noisiest
#: figure over 52 sweeps (docs/drift.md); a new node is judged from its 17th sweep.
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
    deviation), and a threshold of 3 MADs drawn low flags noise (docs/drift.md: 3-4 % of
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
          **rule: float) -> Assessment | None:
    """The assessment when ``values`` drift (beyond the threshold and worse than the
    cluster's median), else None.  No cluster median (no other node measured the
    figure) is no flag: the rule cannot tell the node's change from the cluster's."""
    found = assess(values, higher_is_better, **rule)  # type: ignore[arg-type]
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


def _values(records: Iterable[Record], now: float | None) -> list[float]:
    return [r.value for r in records
            if r.verdict in SANE and (now is None or r.time <= now)]


def _pool(history: History, node: str, key: tuple[str, str, int | None, str],
          nodes: Sequence[str], now: float | None) -> list[list[float]]:
    """Up to POOL - 1 other nodes' values of the figure, taken in name order after
    ``node`` (so that nodes spread the reads), trying at most 4 x POOL nodes: a cluster
    where few nodes measure the figure costs the health check no more."""
    start = nodes.index(node) + 1 if node in nodes else 0
    others = [n for n in list(nodes[start:]) + list(nodes[:start]) if n != node]
    found: list[list[float]] = []
    for other in others[:4 * POOL]:
        values = _values(history.series(other, *key), now)
        if len(values) >= RECENT_K + MIN_BASELINE:
            found.append(values)
            if len(found) == POOL - 1:
                break
    return found


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
    events = history.events(node)
    repeats = offences(events, now)
    nodes = history.nodes()
    found: list[Drift] = []
    for latest in history.latest(node):
        if session is not None and latest.session != session:
            continue
        higher = higher_is_better(latest.unit)
        if higher is None:
            continue
        key = latest.key
        mine = [r for r in history.series(node, *key)
                if r.verdict in SANE and (now is None or r.time <= now)]
        values = [r.value for r in mine]
        if len(values) < RECENT_K + MIN_BASELINE:
            continue
        mad = figure_mad([values] + _pool(history, node, key, nodes, now))
        if mad is None:
            continue
        since = mine[-RECENT_K].time
        cluster = history.cluster_median(*key, since=since)
        flagged = flags(values, cluster, higher, mad=mad)
        if flagged is None or cluster is None:
            continue
        found.append(Drift(
            node, latest.check, latest.variant, latest.size, latest.figure,
            flagged.baseline, flagged.recent, cluster, flagged.drop, flagged.threshold,
            repeats > 0, _reason(latest, flagged, cluster, higher, mad, repeats),
            latest.unit, repeats, mine[-2].time if len(mine) > 1 else None))
    return found
