"""What one healthcheck run does with what it found: the decision, and nothing else.

Given the probes' results (the history and drift probes' among them), the drain of ours
the state file records, what Slurm said of the node, the drain budget's count and the
run's options, :func:`decide` says what to do as data (:class:`Decision`): drain with
this reason, resume, would (a dry run), leave the node as it is, and the exit status.
It asks nothing, writes nothing and reads no clock; ocibench.health.check runs the
probes, asks Slurm, writes the state file and does what was decided (as the sweep's
decisions in ocibench.sweep.actions and its caller).

The run asks Slurm in steps, each asked only when the one before says so (an idle
healthy cluster sends slurmctld nothing, NHC's way), so the decision is given in steps:

1. :func:`asks_slurm`: is there anything to ask Slurm about (a failure, a drain of ours)?
2. :func:`standing`: what Slurm's answer says of the node and of our drain; a person's
   resume (:attr:`Standing.resumed`) makes the run judge the excusable probes again;
3. :func:`counts_budget`: does a new drain need the drain budget counted?
4. :func:`decide`: what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocibench.health import state
from ocibench.health.state import FAIL, PASS, UNKNOWN, ProbeResult

#: Exit status (docs/healthcheck.md).
OK, FAILED, USAGE, UNJUDGED, SLURM = 0, 1, 2, 3, 4

#: sinfo's %t of a drained node, its suffix (*, ~, ...) taken off: drained and idle,
#: or draining (still running a job).
DRAINED_STATES = ("drain", "drng")


@dataclass(frozen=True)
class Drain:
    """A drain of this healthcheck's, as its state file records it: the exact reason
    Slurm was given, and the probes that failed then.  ``Drain()``: none."""

    reason: str = ""
    probes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """What Slurm said of the node.  ``Answer()``: not asked."""

    asked: bool = False
    error: str = ""             # why Slurm could not be asked ("": it answered)
    state: str | None = None    # sinfo's %t; None: not asked, no answer, or no such node
    reason: str = ""            # sinfo's %E ("" when none)


@dataclass(frozen=True)
class Standing:
    """What Slurm's answer says of the node and of the drain of ours on record."""

    drained: bool    # Slurm holds the node drained, by anyone
    ours: bool       # ... with exactly the reason this healthcheck recorded
    lost: bool       # a drain of ours is on record, and Slurm no longer holds it so

    @property
    def resumed(self) -> bool:
        """A person resumed our drain: Slurm holds the node drained no more."""
        return self.lost and not self.drained


@dataclass(frozen=True)
class Facts:
    """Everything the decision is made from."""

    node: str
    results: tuple[ProbeResult, ...]  # after a person's resume, judged again
    recorded: Drain                   # the drain of ours the state file records
    slurm: Answer
    reason: str = ""                  # the Slurm reason a drain of the failures writes
    budget_unknown: str | None = None  # why the drain budget could not be counted
    budget_spent: str | None = None   # "drain budget spent: ..." for this node
    time_left: float = 0.0            # seconds left of the run's Slurm time
    time_needed: float = 0.0          # seconds a drain and its re-count need
    dry_run: bool = False
    prolog: bool = False


@dataclass(frozen=True)
class Decision:
    action: str                 # one of state.ACTIONS
    reason: str                 # the Slurm reason the action writes or resumes ("": none)
    code: int                   # the run's exit status, before acting
    keep: Drain                 # the drain of ours the state file records after the run
    lines: tuple[str, ...]      # what the run says of it, one line each
    slurm_error: str = ""       # why the run does not do in Slurm what it found
    held: bool = False          # Slurm holds the node drained now (by anyone)
    #: our drain ended in this run (resumed by it, or by a person; not in a dry run):
    #: one more offence of its probes on the action ladder (check.ended_drains)
    ended: bool = False


def failures(results: tuple[ProbeResult, ...] | list[ProbeResult]) -> list[ProbeResult]:
    return [r for r in results if r.state == FAIL]


def asks_slurm(results: tuple[ProbeResult, ...] | list[ProbeResult], recorded: Drain) -> bool:
    """Slurm is asked only when there is something to do: a failure, or a drain of ours
    to look after."""
    return bool(failures(results)) or bool(recorded.reason)


def standing(slurm: Answer, recorded: Drain) -> Standing:
    """Drained: Slurm's state, its suffix taken off, is a drain (DRAINED_STATES).  Ours:
    with exactly the reason on record (the ``ocibench:`` prefix proves nothing: the sweep
    writes it too, and a person can type it).  Lost: a drain of ours on record that is
    not ours any more, a person having resumed it or drained the node with a reason of
    theirs; from then on the drain (or its absence) is theirs."""
    drained = slurm.state is not None and \
        slurm.state.rstrip("*~#!%@^-$") in DRAINED_STATES
    ours = drained and bool(recorded.reason) and slurm.reason == recorded.reason
    lost = slurm.state is not None and bool(recorded.reason) and not ours
    return Standing(drained, ours, lost)


def counts_budget(results: tuple[ProbeResult, ...] | list[ProbeResult], slurm: Answer,
                  held: Standing) -> bool:
    """A new drain is counted against ocibench's drain budget first (from Slurm, now):
    a failure on a node Slurm knows and does not hold drained already."""
    return bool(failures(results)) and slurm.state is not None and not held.drained


def decide(facts: Facts) -> Decision:
    """What the run does.  Only a failure drains, and only a node Slurm knows, holds
    undrained, within the drain budget, with the time a drain needs; a node drained
    already (by anyone) is left as it is.  A drain of ours is resumed only when Slurm
    holds it with exactly our reason and every probe it was drained for now passes:
    an unknown is not clean; a prolog never resumes.  Could not judge is never a drain
    nor a resume."""
    node, results, slurm = facts.node, facts.results, facts.slurm
    failed = failures(results)
    unknown = any(r.state == UNKNOWN for r in results)
    code = FAILED if failed else UNJUDGED if unknown else OK
    lines: list[str] = []
    slurm_error = ""
    if slurm.asked and slurm.error:
        slurm_error = f"cannot ask Slurm about {node}: {slurm.error}"
        lines.append(slurm_error)
    elif slurm.asked and slurm.state is None:
        lines.append(f"Slurm knows no node {node!r}: nothing done "
                     "(--node names it as slurm.conf does)")
    if slurm.asked and slurm.state is None:
        code = FAILED if failed else SLURM   # a failure is 1, told to Slurm or not

    held = standing(slurm, facts.recorded)
    keep = facts.recorded
    if held.lost:
        lines.append(f"the drain this healthcheck wrote is no longer Slurm's "
                     f"(now: {slurm.state}, {slurm.reason or 'no reason'}): forgotten")
        keep = Drain()

    action, reason = state.NONE, ""
    if failed and slurm.state is not None:
        reason = facts.reason
        if held.drained:
            who = "this healthcheck" if held.ours else "someone else"
            lines.append(f"{node} is drained already, by {who} ({slurm.reason}): "
                         "left as it is")
        elif facts.budget_unknown is not None:
            slurm_error = f"{facts.budget_unknown}: not drained (unknown)"
            lines.append(slurm_error)
        elif facts.budget_spent is not None:
            action = state.BUDGET_SPENT
            lines.append(f"{node}: would drain, {facts.budget_spent}")
        elif facts.dry_run:
            action = state.WOULD_DRAIN
        elif facts.time_left < facts.time_needed:
            # no time to re-count the budget after the drain, or to undo it: no drain
            slurm_error = (f"{node}: not drained: {max(facts.time_left, 0):.1f} s left of "
                           f"the run's Slurm time, fewer than the {facts.time_needed:g} s a "
                           "drain and its re-count of the drain budget need (Slurm slow "
                           "to answer)")
            lines.append(slurm_error)
        else:
            action = state.DRAIN
            keep = Drain(reason, tuple(sorted({r.name for r in failed})))
    elif not failed and held.ours and not facts.prolog:
        still = [r.name for r in results if r.name in keep.probes and r.state != PASS]
        if still:
            lines.append(f"{node} stays drained: {', '.join(still)} could not be judged")
        elif facts.dry_run:
            action, reason = state.WOULD_RESUME, keep.reason
        else:
            action, reason = state.RESUME, keep.reason
            keep = Drain()

    # our drain ended: resumed now, or Slurm holds no drain at all (a person resumed)
    ended = action == state.RESUME or (slurm.state is not None and not held.drained)
    return Decision(action, reason, code, keep, tuple(lines), slurm_error, held.drained,
                    ended and not facts.dry_run)
