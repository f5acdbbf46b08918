"""Per-node verdicts from the jobs of a sweep: pure.

Every figure is judged by :func:`ocibench.figures.judge.judge` (through the report's reader of
ReFrame run reports); nothing here compares a value with a documented figure.  What this
module adds is the cluster's view:

* **Outliers.**  For each figure of each case (metric and message size), the median
  and the median absolute deviation (MAD) of the values of every job, the MAD scaled
  by :data:`MAD_SCALE` so that it estimates a standard deviation for normal noise
  (Rousseeuw and Croux, JASA 88 (1993) 1273; Iglewicz and Hoaglin's 3.5 for
  modified z-scores, "How to Detect and Handle Outliers", ASQC 1993).  A value that
  judge did not fail (within tolerance, or nothing documented) but that is more than
  K (:data:`OUTLIER_K`) scaled MADs on the worse side of the median (higher for a
  latency, lower for a rate: ``ocibench.metrics``) is an outlier, provided it is also
  worse than the median by at least :data:`MIN_MARGIN` of the margin
  ``ocibench.figures.policy`` allows around a figure (:func:`margin`).  The spread is at least
  :data:`MIN_SPREAD` of the median; with fewer than :data:`MIN_SAMPLES` jobs there is
  no median to speak of and no outliers.
* **Attribution.**  A single-node job's cell is its node's.  A ring pair's result
  belongs to the node that is bad in both its pairs, or that fails its re-test with a
  third partner; the partner of such a node passes.  A group of 4 that failed is
  pinned to its members that are bad on their own (single-node or pair cases); when
  none is, every member gets the group's verdict with the action rerun.
* **Drift.**  A node that passes every check of the sweep but whose figure has slipped
  below its own past and the cluster's median (``ocibench.history.drift``, read from
  the history by the sweep) is drifting: rerun, or drain when its previous sweep
  flagged it too (:func:`mark_drifting`).  Any other verdict stays: a fail or an
  outlier is already a finding, and an unjudged node judged nothing, so it is never
  drained for its past.
* **A node's verdict** is the worst of its cells (pass < unjudged < outlier < fail),
  unreachable when Slurm holds it or its job never started, and unjudged when no cell
  at all judged it (no check ran there): never a pass on nothing.  A cell whose run
  could not be judged (a live check that fails saying "could not judge") is unjudged,
  with the action rerun: never a pass, never a drain.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ocibench import ladder, metrics
from ocibench.figures import policy
from ocibench.figures.judge import Row
from ocibench.history.drift import PERSIST_LOW, PERSIST_WINDOW, Drift, higher_is_better
from ocibench.metrics import Action, NodeVerdict, Verdict
from ocibench.sweep import actions
from ocibench.sweep.plan import GROUPS, PAIRS, RETEST, SINGLE, Case, Group, Plan, neighbours

#: Robust deviations beyond the median that make an outlier (Iglewicz and Hoaglin).
OUTLIER_K = 3.5
#: MAD x 1.4826 estimates the standard deviation of normally distributed values.
MAD_SCALE = 1.4826
#: The spread is never taken below this fraction of the median.
MIN_SPREAD = 0.01
#: Fewer values than this give no outliers.
MIN_SAMPLES = 5
#: An outlier is also worse than the median by at least this fraction of the margin
#: ocibench.figures.policy would allow around a figure equal to the median (15 % or 0.10 us of
#: a latency, 10 % of a rate): a difference that no documented figure would notice is
#: no finding, however tight the cluster (0.23 against 0.20 us, printed at two
#: decimals, was 4 robust deviations on 8 quiet nodes).
MIN_MARGIN = 0.5

_ORDER = {v: i for i, v in enumerate(metrics.NODE_VERDICTS)}


@dataclass
class JobResult:
    """One job of the sweep, as ReFrame ran it and judge judged it."""

    case: Case
    nodes: Group
    kind: str                       # the wave's kind (plan.SINGLE, PAIRS, GROUPS, RETEST)
    rows: list[Row] = field(default_factory=list)
    failed: str | None = None       # why the job failed (ReFrame's or judge's reason)
    skipped: str | None = None      # why ReFrame skipped it
    never_started: str | None = None  # why it never ran (pending past the timeout)
    #: What the history keeps beside the rows (ocibench.sweep.keep): the run's
    #: parameters, when it completed (epoch s), the node's OS image and GPU driver.
    params: dict[str, Any] = field(default_factory=dict)
    time: float | None = None
    image: str | None = None
    driver: str | None = None


@dataclass
class Cell:
    """The verdict of one check case on one node (or on one job, before attribution)."""

    verdict: NodeVerdict
    reason: str
    action: Action | None = None
    value: float | None = None
    unit: str | None = None
    figure: str | None = None       # "latency_1": the metric and key of the value shown
    bound: str = "-"                # for the drain reason: "> ceiling 35.00 us"
    source: str = "-"               # where the bound comes from
    jobs: list[Group] = field(default_factory=list)
    #: the failure's entry of the action ladder (step, fault code, evidence), when failed
    rung: ladder.Rung | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": str(self.verdict), "reason": self.reason,
                "action": None if self.action is None else str(self.action),
                "step": None if self.rung is None else str(self.rung.step),
                "fault": None if self.rung is None else self.rung.fault,
                "value": self.value, "unit": self.unit, "figure": self.figure,
                "bound": self.bound, "source": self.source,
                "jobs": [list(j) for j in self.jobs]}


@dataclass
class NodeResult:
    verdict: NodeVerdict
    reason: str
    action: Action | None
    cells: dict[str, Cell]          # case name -> cell
    drain_reason: str | None = None

    def next_step(self) -> ladder.Decision | None:
        """What the admin does first: the most severe ladder entry of its failed cells;
        for a drifting node the drift's (one step up when it persists: drained)."""
        if self.verdict is NodeVerdict.DRIFTING:
            return ladder.decide(ladder.PROBE, "drift", int(actions.drains(self.action)))
        # a cell drained though its entry says rerun was seen twice (an outlier pinned
        # to the node): a repeat, one step up
        return ladder.worst([
            ladder.Decision(c.rung, ladder.escalate(c.rung.step, repeat), repeat)
            for c in self.cells.values() if c.rung is not None
            and c.verdict is not NodeVerdict.PASS
            for repeat in [int(c.rung.step is ladder.Step.RERUN and actions.drains(c.action))]])

    def to_dict(self) -> dict[str, Any]:
        first = self.next_step()
        return {"verdict": str(self.verdict), "reason": self.reason,
                "action": None if self.action is None else str(self.action),
                "next": None if first is None else first.to_dict(),
                "drain_reason": self.drain_reason,
                "checks": {name: cell.to_dict() for name, cell in self.cells.items()}}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _figure(row: Row) -> str:
    return f"{row.metric}_{row.key}"


def _worse(a: NodeVerdict, b: NodeVerdict) -> bool:
    return _ORDER[a] > _ORDER[b]


# --------------------------------------------------------------------------- one job

def job_cell(job: JobResult) -> Cell | None:
    """The job's own verdict: fail (judge or the job), else pass; None when it did not
    run (skipped, never started).  Outliers come later, across jobs."""
    if job.skipped or job.never_started:
        return None
    jobs = [job.nodes]
    failing = next((r for r in job.rows if r.verdict is Verdict.FAIL), None)
    if failing is not None:
        bound, source = _bound(failing)
        return Cell(NodeVerdict.FAIL, failing.failure() or "failed",
                    actions.for_row(failing, job.case.check), failing.measured, failing.unit,
                    _figure(failing), bound, source, jobs,
                    rung=actions.row_rung(failing, job.case.check))
    if job.failed and actions.could_not_judge(job.failed):
        return Cell(NodeVerdict.UNJUDGED, job.failed, Action.RERUN, bound="",
                    source="could not judge", jobs=jobs)
    if job.failed:
        return Cell(NodeVerdict.FAIL, job.failed, actions.for_failure(job.failed),
                    bound="", source="job failed", jobs=jobs,
                    rung=actions.failure_rung(job.failed))
    shown = next((r for r in job.rows if r.reference is not None), None) or \
        (job.rows[0] if job.rows else None)
    if shown is None:
        return Cell(NodeVerdict.PASS, "passed", jobs=jobs)
    return Cell(NodeVerdict.PASS, f"{shown.metric} at {shown.label}: {_num(shown.measured)} "
                f"{shown.unit} ({shown.verdict})", None, shown.measured, shown.unit,
                _figure(shown), jobs=jobs)


def _bound(row: Row) -> tuple[str, str]:
    """The bound a failed row missed, and its source, for the drain reason."""
    if row.implausible:
        return row.implausible, "plausibility"
    if row.tolerance is Verdict.FAIL:
        if row.upper is not None and row.measured is not None and row.measured > row.upper:
            return f"> ceiling {_num(row.upper)} {row.unit}", row.source or "-"
        return f"< floor {_num(row.lower)} {row.unit}", row.source or "-"
    if row.floor_verdict is Verdict.FAIL:
        side = "<" if metrics.metric(row.metric).higher_is_better else ">"
        return f"{side} floor {_num(row.floor)} {row.unit}", row.floor_source or "-"
    return "-", row.source or "-"


# --------------------------------------------------------------------------- outliers

@dataclass(frozen=True)
class Spread:
    median: float
    scale: float        # MAD x MAD_SCALE, at least MIN_SPREAD x |median|
    count: int


def spread(values: Sequence[float]) -> Spread | None:
    """Median and robust scale of ``values``; None with fewer than MIN_SAMPLES."""
    if len(values) < MIN_SAMPLES:
        return None
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    return Spread(median, max(mad * MAD_SCALE, MIN_SPREAD * abs(median)), len(values))


def deviation(metric: str, value: float, stats: Spread) -> float:
    """Robust deviations of ``value`` from the median, positive on the worse side."""
    worse_by = (stats.median - value) if metrics.metric(metric).higher_is_better \
        else (value - stats.median)
    if not stats.scale:   # a median of 0: every worse value is beyond any spread
        return math.inf if worse_by > 0 else 0.0
    return worse_by / stats.scale


def margin(metric: str, median: float) -> float:
    """How much worse than the median an outlier must be at least (MIN_MARGIN)."""
    lower, upper = policy.bounds(metric, median)
    bound = lower if metrics.metric(metric).higher_is_better else upper
    return MIN_MARGIN * abs(bound - median)


def is_outlier(metric: str, value: float, stats: Spread, k: float = OUTLIER_K) -> bool:
    """More than ``k`` robust deviations and more than :func:`margin` worse."""
    worse_by = abs(value - stats.median)
    return deviation(metric, value, stats) > k and worse_by > margin(metric, stats.median)


def mark_outliers(jobs: Sequence[JobResult], cells: dict[int, Cell],
                  k: float = OUTLIER_K) -> None:
    """Turn passing cells of ``jobs`` (index -> cell) into outliers, per case and
    figure; the spread of a case comes from its planned jobs (not its re-tests), and
    re-tests are compared with it."""
    by_case: dict[str, list[int]] = {}
    for index, job in enumerate(jobs):
        if index in cells:
            by_case.setdefault(job.case.name, []).append(index)
    for indexes in by_case.values():
        figures: dict[tuple[str, Any], list[tuple[int, Row]]] = {}
        for index in indexes:
            for row in jobs[index].rows:
                if metrics.is_number(row.measured):
                    figures.setdefault((row.metric, row.key), []).append((index, row))
        for (metric, _key), found in figures.items():
            planned = [row.measured for i, row in found if jobs[i].kind != RETEST]
            stats = spread(planned)
            if stats is None:
                continue
            for index, row in found:
                cell = cells[index]
                if cell.verdict is not NodeVerdict.PASS:
                    continue
                if is_outlier(metric, row.measured, stats, k):
                    dev = deviation(metric, row.measured, stats)
                    cells[index] = _outlier(cell, row, stats, k, dev, jobs[index].kind)


def _outlier(cell: Cell, row: Row, stats: Spread, k: float, dev: float, kind: str) -> Cell:
    higher = metrics.metric(row.metric).higher_is_better
    sign = "-" if higher else "+"
    limit = stats.median - k * stats.scale if higher else stats.median + k * stats.scale
    what = {SINGLE: "nodes", PAIRS: "pairs", RETEST: "pairs", GROUPS: "groups"}[kind]
    bound = f"{'<' if higher else '>'} {_num(limit)} {row.unit}"
    source = (f"cluster median {_num(stats.median)} {sign} {k:g} x {_num(stats.scale)} "
              f"robust deviation, {stats.count} {what}")
    return replace(cell, verdict=NodeVerdict.OUTLIER, action=Action.RERUN,
                   reason=(f"{row.metric} at {row.label}: {_num(row.measured)} {row.unit}, "
                           f"{dev:.1f} robust deviations worse than the cluster median "
                           f"{_num(stats.median)} {row.unit} ({stats.count} {what}; "
                           f"{row.verdict} against the documented figure)"),
                   value=row.measured, unit=row.unit, figure=_figure(row),
                   bound=bound, source=source, rung=ladder.LADDER[(ladder.JOB, "outlier")])


# --------------------------------------------------------------------------- attribution

def is_bad(cell: Cell | None) -> bool:
    return cell is not None and cell.verdict in (NodeVerdict.FAIL, NodeVerdict.OUTLIER)


def _pinned(cell: Cell, how: str, jobs: list[Group]) -> Cell:
    """A pair's bad cell, now known to be this node's: an outlier that repeats on the
    node is no noise, and on the fabric that is the drain action."""
    action = Action.DRAIN if cell.verdict is NodeVerdict.OUTLIER else cell.action
    return replace(cell, action=action, reason=f"{how}: {cell.reason}", jobs=jobs)


def pair_alone(case: Case, pairs: Mapping[Group, Cell]) -> list[Group]:
    """The pairs of one 2-node case that failed while both nodes passed their other pair."""
    ring = list(pairs)
    near = neighbours(ring)
    by_node = _pairs_by_node(pairs)
    alone = []
    for pair, cell in pairs.items():
        if not is_bad(cell) or len(ring) < 3:
            continue
        others = [c for a in pair for p, c in by_node.get(a, []) if p != pair]
        if not any(is_bad(c) for c in others) and all(len(near[a]) == 2 for a in pair):
            alone.append(pair)
    return alone


def _pairs_by_node(pairs: Mapping[Group, Cell]) -> dict[str, list[tuple[Group, Cell]]]:
    found: dict[str, list[tuple[Group, Cell]]] = {}
    for pair, cell in pairs.items():
        for node in pair:
            found.setdefault(node, []).append((pair, cell))
    return found


def attribute_pairs(pairs: Mapping[Group, Cell], retests: Mapping[Group, Cell],
                    stuck: Iterable[str] = ()) -> dict[str, Cell]:
    """Each node's cell for one 2-node case, from its ring pairs and re-tests."""
    by_node = _pairs_by_node(pairs)
    retest_of = {pair[0]: (pair, cell) for pair, cell in retests.items()}
    stuck = set(stuck)
    result: dict[str, Cell] = {}
    for node, mine in by_node.items():
        bad = [(p, c) for p, c in mine if is_bad(c)]
        jobs = [p for p, _ in mine]
        if not bad:
            result[node] = _pass_of(mine, jobs)
            continue
        if len(pairs) == 1:   # N = 2: one pair, nothing to compare with
            pair, cell = bad[0]
            result[node] = replace(cell, jobs=jobs, reason=(
                f"the only pair ({'+'.join(pair)}), which node cannot be told: {cell.reason}"))
            continue
        if len(mine) == 1:    # its other pair did not run (a partner unreachable)
            pair, cell = bad[0]
            result[node] = replace(cell, action=Action.RERUN, jobs=jobs, reason=(
                f"its pair {'+'.join(pair)} failed and its other pair did not run: "
                f"{cell.reason}"))
            continue
        if len(bad) == 2:
            worst = max(bad, key=lambda pc: _ORDER[pc[1].verdict])[1]
            result[node] = _pinned(worst, "in both its pairs (" + ", ".join(
                "+".join(p) for p, _ in bad) + ")", jobs)
            continue
        pair, cell = bad[0]
        partner = next(n for n in pair if n != node)
        partner_bad = [c for p, c in by_node.get(partner, []) if is_bad(c)]
        if len(partner_bad) == 2:
            result[node] = _pass_of(mine, jobs, (
                f"passes; its pair with {partner} failed, and {partner} fails in both its "
                "pairs"))
        elif node in retest_of:
            rpair, rcell = retest_of[node]
            jobs = jobs + [rpair]
            if is_bad(rcell):
                result[node] = _pinned(rcell, f"with {partner} and in its re-test with "
                                       f"{rpair[1]}", jobs)
            elif rcell.verdict is not NodeVerdict.PASS:   # the re-test judged nothing
                result[node] = replace(cell, action=Action.RERUN, jobs=jobs, reason=(
                    f"its pair with {partner} failed alone (its re-test with {rpair[1]} "
                    f"could not be judged: {rcell.reason}): {cell.reason}"))
            else:
                result[node] = replace(rcell, jobs=jobs, reason=(
                    f"passes: its pair with {partner} failed once ({cell.reason}); the "
                    f"re-test with {rpair[1]} passed"))
        else:
            why = "no third partner to re-test with" if node in stuck else "not re-tested"
            result[node] = replace(cell, action=Action.RERUN, jobs=jobs, reason=(
                f"its pair with {partner} failed alone ({why}): {cell.reason}"))
    return result


def _pass_of(mine: list[tuple[Group, Cell]], jobs: list[Group],
             reason: str | None = None) -> Cell:
    """The node's passing pair (its value is the node's), with every job listed; where
    no pair of the node passed and none failed, its unjudged pair: a pair that could
    not be judged never passes a node."""
    passed = next((c for _, c in mine if c.verdict is NodeVerdict.PASS), None)
    if passed is None:
        unjudged = next(c for _, c in mine if c.verdict is NodeVerdict.UNJUDGED)
        return replace(unjudged, jobs=jobs)
    return replace(passed, action=None, jobs=jobs, reason=reason or passed.reason)


def attribute_groups(groups: Mapping[Group, Cell], pinned_bad: set[str]) -> dict[str, Cell]:
    """Each node's cell for one case of k >= 3 nodes: a bad group is pinned to its
    members that are bad on their own; with none, every member shares it (rerun)."""
    result: dict[str, Cell] = {}
    for group, cell in groups.items():
        culprits = [n for n in group if n in pinned_bad]
        for node in group:
            if not is_bad(cell):
                new = replace(cell, jobs=[group])
            elif culprits and node not in culprits:
                new = Cell(NodeVerdict.PASS, f"passes; group {'+'.join(group)} did not: "
                           f"{', '.join(culprits)} fail(s) on their own", jobs=[group])
            elif culprits:
                new = replace(cell, jobs=[group])
            else:
                new = replace(cell, action=Action.RERUN, jobs=[group], reason=(
                    f"group {'+'.join(group)}, not pinned to a node: {cell.reason}"))
            previous = result.get(node)   # a node in the full and the topped-up group
            if previous is not None:
                kept = new if _worse(new.verdict, previous.verdict) else previous
                new = replace(kept, jobs=list(previous.jobs) + [group])
            result[node] = new
    return result


# --------------------------------------------------------------------------- nodes

def nothing_ran(plan: Plan, skipped: Sequence[str] = ()) -> str:
    """Why no check judged a node: the cases the plan could not run (too few nodes),
    and those of its jobs ReFrame skipped."""
    why = [f"{case}: {reason}" for case, reason in plan.not_run.items()] + list(skipped)
    if not plan.cases:
        why.insert(0, "no check case was selected for this shape")
    return "no check ran on this node" + (f" ({'; '.join(why)})" if why else "")


def node_results(plan: Plan, cells: Mapping[str, Mapping[str, Cell]],
                 unreachable: Mapping[str, str],
                 skipped: Mapping[str, Sequence[str]] | None = None) -> dict[str, NodeResult]:
    """Every node of the plan (swept and unreachable) with its verdict, action and
    one-line reason; ``cells`` is case name -> node -> cell, ``skipped`` node -> its
    jobs ReFrame skipped ("case: reason").  A swept node that no cell judged is
    UNJUDGED (action rerun), saying why: never a pass on nothing."""
    results: dict[str, NodeResult] = {}
    for node in list(plan.nodes) + [n for n in plan.unreachable if n not in plan.nodes]:
        mine = {case: by_node[node] for case, by_node in cells.items() if node in by_node}
        why = unreachable.get(node) or plan.unreachable.get(node)
        if why:
            results[node] = NodeResult(NodeVerdict.UNREACHABLE, why, None, mine)
            continue
        if not mine:
            results[node] = NodeResult(
                NodeVerdict.UNJUDGED, " ".join(nothing_ran(plan, (skipped or {}).get(
                    node, ())).split()), Action.RERUN, mine)
            continue
        verdict, reason, action = NodeVerdict.PASS, "passes every check", None
        for case, cell in mine.items():
            action = actions.worse(action, cell.action) \
                if cell.verdict is not NodeVerdict.PASS else action
            if _worse(cell.verdict, verdict):
                verdict, reason = cell.verdict, f"{case}: {cell.reason}"
        if verdict is NodeVerdict.PASS:
            # a pass that needed a second look says so (a partner's or a re-tested pair)
            notes = [f"{case}: {cell.reason}" for case, cell in mine.items()
                     if cell.reason.startswith("passes")]
            reason = "; ".join([reason] + notes)
        drain = None
        if actions.drains(action):
            worst = max((c for c in mine.items() if actions.drains(c[1].action)),
                        key=lambda c: (_ORDER[c[1].verdict], list(Action).index(c[1].action)))
            case, cell = worst
            value = "-" if cell.value is None else f"{_num(cell.value)} {cell.unit}"
            if cell.value is None:   # a job that failed: its reason is the value
                drain = actions.drain_reason(case, cell.reason, "", cell.source)
            else:
                drain = actions.drain_reason(case, value, cell.bound, cell.source)
            reason = f"{case}: {cell.reason}" if verdict is cell.verdict else reason
        results[node] = NodeResult(verdict, " ".join(reason.split()), action, mine, drain)
    return results


# --------------------------------------------------------------------------- drift

def _drift_size(drift: Drift) -> str:
    return "" if drift.size is None else f" size {drift.size}"


def mark_drifting(results: Mapping[str, NodeResult], found: Mapping[str, Sequence[Drift]],
                  persisting: Iterable[str] = ()) -> dict[str, NodeResult]:
    """``results`` with every passing node of ``found`` (node -> its drifting figures)
    drifting: action rerun, or drain with an ``ocibench:`` reason for the nodes in
    ``persisting`` (low in at least two separate sweeps of their last few:
    ``Drift.persists``).  Every other verdict is kept
    (see the module's text)."""
    persisting = set(persisting)
    marked = dict(results)
    for node, drifts in found.items():
        result = results.get(node)
        if result is None or result.verdict is not NodeVerdict.PASS or not drifts:
            continue
        worst = max(drifts, key=lambda d: d.drop / d.threshold if d.threshold else d.drop)
        persists = node in persisting
        action = actions.for_drift(persists)
        reason = "; ".join(d.reason for d in drifts)
        if persists:
            reason = f"persists: {reason}"
        drain = None
        if actions.drains(action):
            side = "above" if higher_is_better(worst.unit) is False else "below"
            repeat = ", repeat offender" if any(d.repeat_offender for d in drifts) else ""
            drain = actions.drain_reason(
                f"{worst.check} {worst.variant}{_drift_size(worst)} {worst.figure}",
                f"{_num(worst.recent)} {worst.unit}",
                f"{100 * worst.drop:.1f} % {side} its baseline {_num(worst.baseline)} "
                f"{worst.unit}", f"drifting, low in {PERSIST_LOW}+ of its last "
                f"{PERSIST_WINDOW} sweeps{repeat}")
        marked[node] = replace(result, verdict=NodeVerdict.DRIFTING, action=action,
                               reason=" ".join(reason.split()), drain_reason=drain)
    return marked
