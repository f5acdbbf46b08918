"""One healthcheck run: the probes, the decision (ocibench.health.decide, pure), the
Slurm action, the state file.

It acts as LBNL NHC and oci-hpc's healthchecks.sh do, with one difference in how it
knows its own drains:

* a probe that fails drains the node with
  ``Reason="ocibench: [<fault code>] <probe> (<evidence>)"`` (:func:`drain_reason`),
  unless the node is drained already (by anyone: a person's reason is never replaced),
  and only within ocibench's drain budget (ocibench.cluster.budget): above it, the run
  says "would drain (budget spent)" and drains nothing;
* an unknown probe never drains, and never resumes a node drained for that probe;
* a node is resumed only when Slurm holds it drained with exactly the reason this
  healthcheck wrote and recorded in its state file, and the probes that failed then
  now pass.  The prefix proves nothing: ``ocibench sweep`` writes ``ocibench:``
  reasons too, and a person can type it.  The sweep trusts its own record of drains
  (ocibench.sweep.state), the healthcheck its state file (ocibench.health.state); each
  leaves the other's drains, and every other drain, alone.

The record is written before ``scontrol`` drains the node (as the sweep does): a run
killed in between leaves a reason Slurm never got, which matches nothing, rather than
a drain of ours that no later run would recognise.

Every Slurm call shares the run's Slurm time (SLURM_WINDOW_S after the probes'
deadline) and is killed past it, so that a slurmctld that hangs never keeps the run
past Slurm's kill at 60 s; what a run does when Slurm does not answer is :func:`_drain`'s.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ocibench import ladder, shapes
from ocibench.cluster import budget as drain_budget
from ocibench.cluster import slurm
from ocibench.cluster.reason import MAX_REASON, REASON_PREFIX
from ocibench.health import decide, probes, state

# the exit statuses (docs/healthcheck.md), the decision's; USAGE is the command's
from ocibench.health.decide import FAILED, OK, SLURM, UNJUDGED, USAGE  # noqa: F401
from ocibench.health.state import FAIL, PASS, UNKNOWN, HealthState, ProbeResult

#: Seconds by which every probe has answered (Slurm kills the program at 60 s; the
#: issue's target is 5 s at the 99th percentile, Python's start and scontrol included).
DEADLINE_S = 3.5
#: Seconds a Slurm command may take here (the sweep allows 30: it is not in a hurry).
SLURM_TIMEOUT_S = 10.0
#: Seconds after the probes' deadline (--deadline) by which every Slurm call of a run
#: has answered: the node's state, the drain budget's count, the drain, its re-count
#: and its undo, a resume.  Each call gets what remains of it (at most SLURM_TIMEOUT_S)
#: and is killed past it: a hung slurmctld must not keep the run past Slurm's kill at
#: 60 s, before its state is written and says why.  A drain costs about 1.5 s on a
#: quiet cluster (two sinfo, a scontrol, budget.RECOUNT_AFTER_S, a sinfo); 15 s leaves
#: a slow slurmctld room.
SLURM_WINDOW_S = 15.0
#: Seconds from the command's start after which no Slurm call runs, whatever
#: --deadline: Slurm's kill at 60 s, less Python's start and the state's writes.
SLURM_LIMIT_S = 55.0
#: Of the run's Slurm time, what a new drain keeps back to undo itself (a resume) when
#: its re-count does not answer.
UNDO_RESERVE_S = 2.0
#: The least Slurm time a new drain starts with: the wait before the re-count, the
#: undo's reserve, and a second each at least for the drain and the re-count (they
#: share the rest evenly).  Less: no drain (no re-count, no drain).
DRAIN_NEEDS_S = drain_budget.RECOUNT_AFTER_S + UNDO_RESERVE_S + 2.0



@dataclass
class Options:
    shape: shapes.Shape
    root: Path = Path("/")
    node: str = ""
    state_path: Path | None = None
    dry_run: bool = False
    prolog: bool = False
    deadline_s: float = DEADLINE_S
    tool_timeout_s: float = probes.TOOL_TIMEOUT_S
    interval_s: int | None = None
    history_db: Path | None = None
    #: how many nodes ocibench may hold drained (ocibench.cluster.budget; the command
    #: reads --drain-budget, else $OCIBENCH_DRAIN_BUDGET)
    budget: drain_budget.Budget = field(
        default_factory=lambda: drain_budget.parse(drain_budget.DEFAULT, "the default"))
    #: acknowledge every kernel log record there is now (--clear-kernel-log)
    clear_kernel_log: bool = False
    #: time.monotonic() the command started (the deadline counts from it: loading the
    #: shape is part of the run), else the check's own start
    started: float | None = None
    #: seconds after the probes' deadline by which its Slurm calls are done
    slurm_window_s: float = SLURM_WINDOW_S


@dataclass
class Outcome:
    state: HealthState
    lines: list[str]        # what the run says, one line each
    code: int
    #: Slurm holds the node drained after the run (by it, or by anyone before): the
    #: prolog's exit 1 then adds no drain of Slurm's own
    held: bool = False


def node_name() -> str:
    """Slurm's name of this node: $SLURMD_NODENAME (slurmd sets it for the programs it
    runs), else the host name without its domain, as Slurm's NodeHostname."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def slurm_interval(conf: Path | None = None) -> int | None:
    """HealthCheckInterval from slurm.conf ($SLURM_CONF, else /etc/slurm/slurm.conf):
    the expected time between runs, for the state file's freshness.  None when not
    readable or not set: nothing here depends on it."""
    path = conf or Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 20)
    except OSError:
        return None
    found = re.findall(r"^\s*HealthCheckInterval\s*=\s*([0-9]+)\s*(?:#.*)?$", text,
                       re.MULTILINE | re.IGNORECASE)
    return int(found[-1]) if found else None


def run_probes(ctx: probes.Context, only: Sequence[str] | None = None) -> list[ProbeResult]:
    """Every probe that applies to the shape (of ``only``, where given), in order; one
    that would start after the deadline is unknown and says so, and so is one still
    running at the deadline (:func:`bounded`)."""
    results = []
    for name, applies, probe in probes.PROBES:
        if (only is not None and name not in only) or not applies(ctx):
            continue
        start, began = time.time(), time.monotonic()
        if ctx.deadline - began < probes.MIN_TOOL_S:
            found = [probes.Finding(probes.item_name(name, ctx), UNKNOWN,
                                    "not run: the run's deadline passed")]
        else:
            found = bounded(name, probe, ctx)
        took = time.monotonic() - began
        results += [ProbeResult(f.name, f.state, f.evidence, start, round(took, 4))
                    for f in found]
    return results


def bounded(name: str, probe: probes.Probe, ctx: probes.Context) -> list[probes.Finding]:
    """``probe`` run in a thread of its own on a copy of ``ctx``, waited for until the
    run's deadline and no longer: every tool it starts has its own timeout, but its
    Python work (parsing, a read that blocks) has none, and Slurm kills the program
    at 60 s before it writes its state.  Past the deadline it is unknown, the thread
    is left to end on its own (a daemon: it never holds the process's exit), and
    whatever it leaves in its copy is never used.  A probe that raises is unknown
    too, saying what it raised: this program acts alone, and a traceback would leave
    no state."""
    mine = ctx.fork()
    done: list[list[probes.Finding] | BaseException] = []

    def work() -> None:
        try:
            done.append(probe(mine))
        except Exception as err:   # noqa: BLE001 (said as the probe's unknown below)
            done.append(err)

    worker = threading.Thread(target=work, name=f"probe {name}", daemon=True)
    worker.start()
    worker.join(max(0.0, ctx.deadline - time.monotonic()))
    item = probes.item_name(name, ctx)
    if not done:
        return [probes.Finding(item, UNKNOWN, "ran past the run's deadline: not judged "
                               "(--deadline)")]
    if isinstance(done[0], BaseException):
        err = done[0]
        return [probes.Finding(item, UNKNOWN, f"the probe failed: {type(err).__name__}: "
                               f"{' '.join(str(err).split())[:300]}")]
    ctx.merge(mine)
    return done[0]


#: The probes whose verdicts a person's resume of this healthcheck's drain changes:
#: they judge records of the past (the history, the kernel log), which the person saw.
EXCUSABLE = ("kernel_log", "history", "drift")


def _kernel_items(ctx: probes.Context) -> tuple[str, ...]:
    return probes.kernel_items(ctx)


def _rejudged(ctx: probes.Context, results: list[ProbeResult],
              previous: HealthState | None, start: float) -> list[ProbeResult]:
    """``results`` with the EXCUSABLE probes run again, holding against the node only
    what came after a person's resume at ``start``: the history measured since, and
    the kernel log's records after those the run before this one had read (what the
    drain they resumed was judged on)."""
    ctx.history_since = start
    if previous is not None and previous.kernel_boot_id:
        ctx.kernel_since = (previous.kernel_boot_id,
                            max(previous.kernel_seq_passed, previous.kernel_seq_read))
    again = {r.name: r for r in run_probes(ctx, only=EXCUSABLE)}
    return [again.get(r.name, r) for r in results]


def _kernel_fields(ctx: probes.Context, results: list[ProbeResult],
                   previous: HealthState | None, dry_run: bool) -> dict[str, object]:
    """The state file's kernel log fields: the records judged clean (or acknowledged)
    move up to what this run read when its probe passed; they stay where a record
    failed or could not be judged; a new boot starts over.  A dry run leaves them as
    the last real run did."""
    before = {"kernel_boot_id": previous.kernel_boot_id if previous else "",
              "kernel_seq_passed": previous.kernel_seq_passed if previous else -1,
              "kernel_seq_read": previous.kernel_seq_read if previous else -1}
    if dry_run or ctx.kernel_read is None:
        return before
    boot, highest = ctx.kernel_read
    kernel = [r for r in results if r.name in _kernel_items(ctx)]
    passed = bool(kernel) and all(r.state == PASS for r in kernel)
    kept = ctx.kernel_since[1] if boot and ctx.kernel_since[0] == boot else -1
    return {"kernel_boot_id": boot, "kernel_seq_passed": highest if passed else kept,
            "kernel_seq_read": highest}


def ended_drains(previous: HealthState | None, ended: bool) -> dict[str, int]:
    """The state's ``offences``, one more for each probe of the drain of ours that
    ``ended`` in this run (resumed by it, or by a person): "flagged, drained, put back";
    a probe that fails after that is a repeat offender on the action ladder."""
    offences = dict(previous.offences) if previous else {}
    if previous and previous.drained_probes and ended:
        for name in {ladder.base_name(n) for n in previous.drained_probes}:
            offences[name] = offences.get(name, 0) + 1
    return offences


def next_steps(results: list[ProbeResult], offences: dict[str, int]) -> list[str]:
    """For each failing probe, its step on the action ladder (ocibench.ladder), fault code
    and the commands that show the evidence: what the admin does next."""
    lines = []
    for result in results:
        if result.state != FAIL:
            continue
        decision = ladder.decide(ladder.PROBE, result.name,
                                 offences.get(ladder.base_name(result.name), 0),
                                 result.evidence)
        if decision is None:
            lines.append(f"{result.name}: next: no ladder entry (ocibench.ladder): report it")
            continue
        lines.append(f"{result.name}: next: {decision.line()}; {decision.rung.fix}; "
                     f"evidence: {'; '.join(decision.rung.evidence)}")
    return lines


def drain_reason(failed: list[ProbeResult]) -> str:
    """``ocibench: [<fault code>] <probe> (<evidence>); ...``: one line, at most
    MAX_REASON characters, the evidence without the file or command it was read from
    (the state file has it).  Each failing probe leads with its fault code on the action
    ladder (ocibench.ladder: OCI's HPCGPU-... or ours, OCIBENCH-...), the first probe's
    first of all, so that a cut at MAX_REASON never loses it; a probe of no ladder entry
    has none (its next step says so).  Nothing parses the reason back: a drain is known
    as this healthcheck's by the exact reason its state file records."""
    parts = []
    for result in failed:
        evidence = re.sub(r"\s*\[[^\]]*\]\s*$", "", result.evidence)
        rung = ladder.entry(ladder.PROBE, result.name, result.evidence)
        code = f"[{rung.fault}] " if rung is not None else ""
        parts.append(f"{code}{result.name} ({' '.join(evidence.split())})")
    reason = f"{REASON_PREFIX} " + "; ".join(parts)
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON - 3] + "..."


def check(options: Options) -> Outcome:
    """One run, holding the node's state file for its whole length (state.locked)."""
    path = options.state_path or state.default_path()
    try:
        with state.locked(path):
            return _check(options, path)
    except state.StateError as err:    # only the lock raises it: _check says its own
        # No lock: another run of this node holds it past state.LOCK_WAIT_S (that run
        # judges the node), or it cannot be taken (its directory refused).  Without it
        # a run could write over another's drain record: this one probes nothing,
        # writes nothing, drains nothing, and says why in one line (exit 3; as the
        # prolog 0, the job runs); a state left unwritten is the staleness alert's.
        record = HealthState(node=options.node or node_name(), time=time.time(),
                             duration_s=0.0, interval_s=options.interval_s,
                             action=state.NONE, reason="")
        return Outcome(record, [f"{err}: this run judged nothing"], UNJUDGED)


def _check(options: Options, path: Path) -> Outcome:
    """The probes, Slurm's answers the decision asks for (ocibench.health.decide), the
    state file, then what was decided done in Slurm."""
    began, start = options.started or time.monotonic(), time.time()
    node = options.node or node_name()
    previous, lines = _previous(path, node)
    ctx = probes.Context(root=options.root, shape=options.shape, node=node,
                         deadline=began + options.deadline_s,
                         tool_timeout=options.tool_timeout_s, previous=previous,
                         history_db=options.history_db,
                         history_since=previous.history_since if previous else 0.0,
                         kernel_since=(previous.kernel_boot_id, previous.kernel_seq_passed)
                         if previous else ("", -1),
                         acknowledge_kernel_log=options.clear_kernel_log)
    results = run_probes(ctx)
    counters = dict(previous.link_downed) if previous else {}
    if not options.dry_run:
        counters.update(ctx.counters)   # a dry run leaves the next real run its baseline
    recorded = decide.Drain(previous.drained_reason, previous.drained_probes) \
        if previous else decide.Drain()
    history_since = ctx.history_since

    # Every Slurm call shares what remains of the run's Slurm time (SLURM_WINDOW_S).
    slurm_until = began + min(options.deadline_s + options.slurm_window_s, SLURM_LIMIT_S)
    answer = _ask(node, slurm_until) if decide.asks_slurm(results, recorded) \
        else decide.Answer()
    standing = decide.standing(answer, recorded)
    if standing.resumed and not options.dry_run:
        # a person resumed our drain: what the history and the kernel log held against
        # it, they have seen; judged again without it, so that it is not drained again
        # for the very records they overrode
        history_since = start
        results = _rejudged(ctx, results, previous, start)
    room = drain_budget.count([node], options.budget, timeout=_left(slurm_until)) \
        if decide.counts_budget(results, answer, standing) else None
    decision = decide.decide(decide.Facts(
        node=node, results=tuple(results), recorded=recorded, slurm=answer,
        reason=drain_reason(decide.failures(results)),
        budget_unknown=room.unknown[node] if room is not None and node in room.unknown else None,
        budget_spent=room.spent[node] if room is not None and node in room.spent else None,
        time_left=slurm_until - time.monotonic(), time_needed=DRAIN_NEEDS_S,
        dry_run=options.dry_run, prolog=options.prolog))
    action, reason, code = decision.action, decision.reason, decision.code

    lines += [f"{r.name}: {r.state}: {r.evidence}" for r in results]
    lines += decision.lines
    offences = ended_drains(previous, decision.ended)
    lines += next_steps(results, offences)
    kernel = _kernel_fields(ctx, results, previous, options.dry_run)
    if any(r.state == FAIL and r.name in _kernel_items(ctx) for r in results):
        lines.append("the kernel log's record fails every run until the node reboots, or "
                     "a person acknowledges it once the GPU is reset: `ocibench healthcheck "
                     "--clear-kernel-log`, or resuming this healthcheck's drain")
    record = HealthState(
        node=node, time=start, duration_s=round(time.monotonic() - began, 4),
        interval_s=options.interval_s, action=action, reason=reason,
        probes=tuple(results), link_downed=counters,
        drained_reason=decision.keep.reason, drained_probes=decision.keep.probes,
        history_since=history_since, slurm_error=decision.slurm_error, offences=offences,
        **kernel)
    try:
        state.write(record, path)   # before scontrol: see the module's docstring
    except state.StateError as err:
        lines.append(f"{err}: nothing done in Slurm (a drain without its record could "
                     "never be resumed)")
        return Outcome(record, lines, SLURM if code != FAILED else FAILED)
    held, after = decision.held, record
    if action == state.DRAIN:
        done = _drain(node, reason, options.budget, slurm_until)
        held = done.held
        lines += done.lines
        if done.error:
            code = FAILED
        if not done.recorded:
            after = replace(after, action=done.action, drained_reason="", drained_probes=())
        after = replace(after, slurm_error=done.error)
    elif action == state.RESUME:
        try:
            slurm.resume(node, _left(slurm_until))
        except slurm.SlurmError as err:
            # the drain stays ours: a later run resumes it (one that did not answer may
            # have been made: the next run then finds the node up, and forgets it)
            lines.append(f"Slurm refused: {err}")
            after = replace(after, action=state.NONE, drained_reason=reason,
                            drained_probes=recorded.probes,
                            offences=dict(previous.offences) if previous else {},
                            slurm_error=f"not resumed: {err}")
            code = SLURM   # a resume follows no failure
    if after != record:
        record = replace(after, duration_s=round(time.monotonic() - began, 4))
        try:
            state.write(record, path)
        except state.StateError as err:
            lines.append(f"{err}: the state file still says the drain was made as decided")
    if record.action != state.NONE:
        lines.append(f"{node}: {record.action}: {reason}")
    record = replace(record, duration_s=round(time.monotonic() - began, 4))
    return Outcome(record, lines, code, held)


def _previous(path: Path, node: str) -> tuple[HealthState | None, list[str]]:
    """The node's state file from the run before, and a warning line where it is not
    one or is another node's: the run then goes on without its memory (no flap
    detection, no record of a drain: nothing of ours will be resumed)."""
    try:
        previous = state.read(path)
    except state.StateError as err:
        return None, [f"warning: {err}; starting without it"]
    if previous is not None and previous.node != node:
        return None, [f"warning: {path} is node {previous.node}'s state, not {node}'s; "
                      "starting without it"]
    return previous, []


def _ask(node: str, until: float) -> decide.Answer:
    """Slurm's state and reason of ``node`` (decide.Answer), within the run's Slurm time."""
    try:
        current = slurm.node_state(node, _left(until))
    except slurm.SlurmError as err:
        return decide.Answer(asked=True, error=str(err))
    if current is None:
        return decide.Answer(asked=True)
    return decide.Answer(asked=True, state=current.state, reason=current.reason)


def _left(until: float, keep: float = 0.0) -> float:
    """Seconds the next Slurm call may take: what remains until ``until`` (the run's
    Slurm time) less ``keep``, at most SLURM_TIMEOUT_S.  With nothing left, a moment:
    the call then fails at once as not answering, and says so."""
    return max(0.001, min(SLURM_TIMEOUT_S, until - keep - time.monotonic()))


@dataclass
class _Drained:
    held: bool              # Slurm holds the node drained (as far as the run knows)
    recorded: bool          # the state keeps the drain as this healthcheck's
    action: str             # the state's action once done
    lines: list[str]
    error: str = ""         # why it is not as decided ("": it is)


def _drain(node: str, reason: str, budget: drain_budget.Budget,
           until: float) -> _Drained:
    """Drain ``node``, then re-count the drain budget (drain_budget.recount) and undo
    a drain beyond it, every call within the run's Slurm time (``until``); the undo's
    reserve (UNDO_RESERVE_S) is kept from the drain and the re-count, which share the
    rest evenly.

    Slurm not answering in time is the careful case.  **No re-count, no drain**: a
    drain whose re-count did not answer is undone (a resume, in the reserve), since
    nothing then bounds how many nodes drained into the same room, and slurmd starts
    every node's check at once; a broken node is drained by a later run that Slurm
    answers.  A drain Slurm did not answer may have been made all the same: the
    re-count's listing tells, and without it the undo goes ahead.  The state keeps
    the drain as this healthcheck's (so that a later run looks after it and resumes
    it once clean) unless the run knows Slurm does not hold it: undone, or not in the
    re-count's listing.  A drain kept that way, its undo unanswered, is one more than
    the budget (docs/healthcheck.md, "Races")."""
    said: list[str] = []
    # the drain and the re-count share evenly what the wait and the undo leave
    share = (until - time.monotonic() - drain_budget.RECOUNT_AFTER_S - UNDO_RESERVE_S) / 2
    try:
        slurm.drain(node, reason, max(0.001, min(SLURM_TIMEOUT_S, share)))
    except slurm.SlurmTimeout as err:
        said.append(f"no answer to the drain, which may have been made: {err}")
    except slurm.SlurmError as err:
        line = f"Slurm refused: {err}"
        return _Drained(False, False, state.NONE, [line], f"not drained: {err}")
    # other nodes may have counted the same room in the same moment
    # (drain_budget.recount, with the listing's answer kept: it also says whether a
    # drain Slurm did not answer was made)
    time.sleep(drain_budget.RECOUNT_AFTER_S)
    no_count = ""
    try:
        listed = slurm.listing(_left(until, UNDO_RESERVE_S))
    except slurm.SlurmError as err:
        listed, no_count = None, f"no re-count of the drain budget after draining {node}: {err}"
    undo = {} if listed is None else drain_budget.overdrawn(listed, {node: reason}, budget)
    if listed is not None and node not in undo:
        now = listed.get(node)
        if said and not (now and drain_budget.holds(now) and now.reason == reason):
            return _Drained(False, False, state.NONE, said, said[0] + ": not drained")
        return _Drained(True, True, state.DRAIN, said, "")
    why = undo.get(node) or f"{no_count}: no re-count, no drain"
    try:
        slurm.resume(node, _left(until))
    except slurm.SlurmError as err:
        error = (f"{why}; its undo: {err}: the drain may stay, kept as this "
                 "healthcheck's (resumed once the node is clean)")
        return _Drained(True, True, state.DRAIN, said + [error], error)
    if node in undo:
        line = f"{node}: drained, then resumed: would drain, {why}"
        return _Drained(False, False, state.BUDGET_SPENT, said + [line], "")
    line = f"{node}: drained, then resumed: {why}"
    return _Drained(False, False, state.NONE, said + [line], line)


def exit_code(outcome: Outcome, prolog: bool) -> int:
    """As a prolog, only a failure on a node Slurm now holds drained stops the job
    (Slurm then requeues it elsewhere): an unknown, Slurm not answering, or the drain
    budget spent lets the job run, since a prolog's exit 1 makes Slurm drain the node
    itself ("Prolog error"), a drain outside the budget."""
    if prolog:
        failed = any(p.state == FAIL for p in outcome.state.probes)
        return FAILED if failed and outcome.held else OK
    return outcome.code
