"""What a failure asks of the admin, and the drain decisions.

Each failure is an entry of the action ladder (ocibench.ladder: its step, fault code and
evidence; docs/ladder.md), found here (:func:`failure_rung`, :func:`row_rung`); the
sweep's :class:`~ocibench.metrics.Action` is the step's (``ladder.SWEEP_ACTION``):

* **fix-software**: the node's software stops the benchmark or its figure: a module
  that does not load (Lmod's error, ``command not found``, an unsafe module tree), an
  MPI of the wrong version or not CUDA-aware, a missing library, and a figure missed
  for lack of a capability that software provides (GDRCopy's gdrdrv, XPMEM,
  nvidia_peermem, CMA: ``ocibench.capabilities``; preflight's UCX and Open MPI items);
* **drain**: hardware or fabric: a documented figure missed with no software cause
  (a link, a GPU, memory too slow), a port UCX cannot find, wrong data (nccl-tests'
  ``#wrong``), a node Slurm lost (NODE_FAIL), a missing GPU, NVLink, PCIe lanes or
  RDMA port (preflight), an outlier pinned to the node (both its pairs, or a pair
  and its re-test), and a drift that persists (flagged in the node's previous sweep
  too: "rerun, then drain if it persists");
* **rerun**: what one sweep cannot attribute: a crash, a time limit, a value that
  cannot be a measurement, an outlier seen once, a node drifting below its own past
  (``ocibench.history.drift``) for the first sweep, and every failure not named above;
  and every run that could not be judged (``RunVerdict.UNJUDGED``: a live check fails
  saying "could not judge", :data:`COULD_NOT_JUDGE`).  The live checks run this
  project's own command lines, so a run they cannot judge is the project's defect,
  never the node's: whatever else its reason says, it is rerun, never drained.

``--drain`` drains the nodes whose action is drain or fix-software (neither serves
jobs correctly until fixed); rerun nodes and unreachable nodes are never drained.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from ocibench import ladder, metrics
from ocibench.cluster import reason
from ocibench.figures.judge import Row
from ocibench.metrics import Action

#: Default cap: at most this fraction of the swept nodes drained by one sweep, so that
#: a wrong reference (every node "too slow") cannot take a cluster out of service.
MAX_DRAIN_FRACTION = 0.25

#: What a live check's failure says when its run was UNJUDGED (metrics.COULD_NOT_JUDGE),
#: matched before any pattern below.
COULD_NOT_JUDGE = metrics.COULD_NOT_JUDGE

#: Capabilities (ocibench.capabilities) that are hardware; the others are software.
HARDWARE_CAPABILITIES = ladder.HARDWARE_CAPABILITIES
#: Every job failure the ladder names (ocibench.ladder: its failure lines' patterns).
JOB_FAILURES = ladder.JOB_FAILURES


def failure_rung(reason: str) -> ladder.Rung:
    """The ladder's entry for a job that failed with ``reason`` (ladder.failure_entry)."""
    return ladder.failure_entry(reason)


def for_failure(reason: str) -> Action:
    """The action for a job that failed with ``reason`` (no figure judged)."""
    return ladder.SWEEP_ACTION[failure_rung(reason).step]


def could_not_judge(reason: str | None) -> bool:
    """The failure of a run that could not be judged (RunVerdict.UNJUDGED)."""
    return metrics.unjudged_in(reason) is not None


def row_rung(row: Row, check: str | None = None) -> ladder.Rung:
    """The ladder's entry for a judged figure of ``check`` that failed
    (ladder.figure_entry)."""
    return ladder.figure_entry(check, bool(row.implausible), row.lacking)


def for_row(row: Row, check: str | None = None) -> Action:
    """The action for a judged figure of ``check`` that failed."""
    if not row.implausible and row.lacking and \
            all(c in HARDWARE_CAPABILITIES for c in row.lacking):
        return Action.DRAIN  # hardware lacking: never a rerun, whatever the figure's step
    return ladder.SWEEP_ACTION[row_rung(row, check).step]


def for_drift(persists: bool) -> Action:
    """A drifting node's action: rerun, then drain if it persists (its previous sweep
    flagged it too): the drift probe's entry, one step up for the repeat."""
    step = ladder.escalate(ladder.LADDER[(ladder.PROBE, "drift")].step, int(persists))
    return ladder.SWEEP_ACTION[step]


def worse(a: Action | None, b: Action | None) -> Action | None:
    """The more severe of two actions (rerun < fix-software < drain)."""
    order = list(Action)
    if a is None or b is None:
        return a or b
    return a if order.index(a) >= order.index(b) else b


def drains(action: Action | None) -> bool:
    return action in (Action.DRAIN, Action.FIX_SOFTWARE)


def drain_reason(check: str, value: str, bound: str, source: str) -> str:
    """``ocibench: <check> <value> <bound> (<source>)``, on one line, within
    Slurm's length (:func:`ocibench.cluster.reason.worded`)."""
    return reason.worded(f"{check} {value} {bound} ({source})")


@dataclass(frozen=True)
class DrainDecision:
    cap: int                     # the most nodes this sweep may drain (:func:`cap`)
    nodes: dict[str, str]        # node -> Slurm reason, the nodes to drain
    refused: str | None          # why none is drained, or None


def cap(swept: int, fraction: float) -> int:
    """The most nodes one sweep may drain: ``fraction`` of ``swept``, rounded down.
    Exactly: 0.29 of 100 nodes is 29, though 0.29 * 100 is 28.999... in floating point.
    No minimum: a cap of 0 (--max-drain-fraction 0, or the default 25 % of fewer than 4
    nodes) drains nothing without --force."""
    return math.floor(Fraction(repr(fraction)) * swept)


def decide(wanted: Mapping[str, str], swept: int, fraction: float = MAX_DRAIN_FRACTION,
           force: bool = False) -> DrainDecision:
    """Drain ``wanted`` (node -> reason) unless that is more than :func:`cap` of the
    ``swept`` nodes (every node the sweep judged, unreachable ones included): then none,
    with a one-line reason; ``force`` lifts the cap.  All or nothing: a wrong reference
    fails every node, and draining its first quarter would be as wrong as draining them
    all."""
    most = cap(swept, fraction)
    if len(wanted) > most and not force:
        return DrainDecision(most, {}, (
            f"refusing to drain {len(wanted)} of the {swept} nodes of this sweep: more than "
            f"the cap of {most} ({fraction:.0%}, --max-drain-fraction, rounded down); a "
            "wrong reference fails every node. Check the figures, then --force"))
    return DrainDecision(most, dict(wanted), None)
