"""The sweep from start to end: nodes, plan, ReFrame steps, verdicts, drain decisions.

Slurm actions are all or nothing, or recorded (docs/sweep.md, "Drain and undrain"):

* every drain is written to the record of drains (:mod:`ocibench.sweep.state`) before
  ``scontrol`` makes it, and only a node drained with exactly its recorded reason is
  re-tested and resumed by --undrain;
* a ``scontrol`` that fails stops the drains there: the JSON says which nodes were
  drained and which were not, and why;
* a new drain fits ocibench's drain budget (:mod:`ocibench.cluster.budget`), shared with
  the healthcheck and counted from Slurm: the nodes beyond it are "budget spent";
* the nodes resumed for a re-test are drained again with their old reasons whatever
  stops the sweep (an error, Ctrl-C, SIGTERM, SIGHUP: :mod:`ocibench.sweep.signals`),
  and the reservation that kept other users' jobs off them is deleted only when every
  one of them is drained again;
* whatever happens, :func:`sweep` returns what it knows (nodes it could not judge are
  UNJUDGED, saying why), so that the JSON and the page are always written.
"""

from __future__ import annotations

import getpass
import os
import signal
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibench.cluster import budget, slurm
from ocibench.cluster.reason import REASON_PREFIX
from ocibench.history import current, drift
from ocibench.history.store import History, HistoryError
from ocibench.metrics import NODE_VERDICTS, Action, NodeVerdict
from ocibench.sweep import actions, keep, plan, rfm, signals, state, verdicts
from ocibench.sweep.plan import GROUPS, PAIRS, Case, Group, Plan
from ocibench.sweep.verdicts import Cell, JobResult, NodeResult

START_TIMEOUT_S = slurm.START_TIMEOUT_S

#: Exit status of a sweep whose nodes were judged: 0 every node passes; 1 some node
#: fails, is an outlier, drifts or is unreachable (something to act on); 3 no node does, but
#: some could not be judged (no check ran there, or its runs could not be judged), or
#: the sweep had no node at all.  2 (usage, Slurm, ReFrame) and 128 + the signal
#: (stopped) are the command's (ocibench.commands.sweep).
EXIT_PASS, EXIT_FINDING, EXIT_UNJUDGED = 0, 1, 3
_FINDINGS = (NodeVerdict.DRIFTING, NodeVerdict.OUTLIER, NodeVerdict.FAIL,
             NodeVerdict.UNREACHABLE)


@dataclass
class Options:
    partition: str | None = None
    nodes: str | None = None            # a Slurm hostlist
    names: Sequence[str] = ()
    excludes: Sequence[str] = ()
    drain: bool = False
    undrain: bool = False
    max_drain_fraction: float = actions.MAX_DRAIN_FRACTION
    force: bool = False
    #: how many nodes ocibench may hold drained, the healthcheck's drains included
    #: (ocibench.cluster.budget); --force does not lift it
    drain_budget: budget.Budget = field(
        default_factory=lambda: budget.parse(budget.DEFAULT, "the default"))
    outlier_k: float = verdicts.OUTLIER_K
    start_timeout: int = START_TIMEOUT_S
    prefix: Path = Path("sweep")
    setvars: Sequence[str] = ()         # ReFrame's -S, for every run of the sweep
    #: the history's session of this sweep (ocibench.history.store)
    session: str = field(default_factory=lambda: f"sweep-{uuid.uuid4()}")
    state: Path = Path("drained.json")  # the record of drains (sweep.state)
    #: the history the sweep keeps its figures in before it decides the drains, and
    #: judges drift on (mark_drift); None: neither
    history: Path | None = None


@dataclass
class Sweep:
    plan: Plan
    skipped: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, NodeResult] = field(default_factory=dict)
    drain: actions.DrainDecision | None = None
    drained: list[str] = field(default_factory=list)
    undrained: list[str] = field(default_factory=list)
    #: node -> why the drain decided for it did not happen (scontrol failed, or an
    #: earlier drain did and the sweep stopped draining)
    not_drained: dict[str, str] = field(default_factory=dict)
    #: node -> why the drain decided for it would exceed the drain budget
    budget_spent: dict[str, str] = field(default_factory=dict)
    #: the drain budget it was held to (Budget.describe), when --drain
    budget: str | None = None
    retests: list[Group] = field(default_factory=list)
    partition: str | None = None
    outlier_k: float = verdicts.OUTLIER_K
    setvars: Sequence[str] = ()
    #: Slurm actions (or the record of drains) that failed, one line each
    errors: list[str] = field(default_factory=list)
    #: why the sweep stopped before its end (an error, a signal), or None
    stopped: str | None = None
    signum: int | None = None           # the signal that stopped it
    #: the history's session of this sweep (ocibench.history.store), and when it began
    session: str = field(default_factory=lambda: f"sweep-{uuid.uuid4()}")
    started: float = field(default_factory=time.time)
    #: every job it ran, re-tests included: what the history keeps (Sweep.keep)
    jobs: list[JobResult] = field(default_factory=list)
    #: (records added, nodes) where the sweep kept its figures itself (Options.history)
    kept: tuple[int, int] | None = None
    #: the moves the fleet made together (history.drift.cluster_events), one line each:
    #: shown once, never a node's drift
    cluster_events: list[str] = field(default_factory=list)
    #: the swept nodes marked as being written in the history, until published
    publishing: current.Intent | None = None

    @property
    def ok(self) -> bool:
        return self.exit_status() == EXIT_PASS

    def exit_status(self) -> int:
        """:data:`EXIT_PASS`, :data:`EXIT_FINDING` or :data:`EXIT_UNJUDGED` (above)."""
        found = {n.verdict for n in self.nodes.values()}
        if found & set(_FINDINGS):
            return EXIT_FINDING
        if NodeVerdict.UNJUDGED in found or not found:
            return EXIT_UNJUDGED
        return EXIT_PASS

    def keep(self, path: Path) -> tuple[int, int]:
        """Every node's figures into the history file ``path`` (ocibench.sweep.keep):
        (records added, nodes).  Their snapshots for the healthcheck are published
        (ocibench.history.current): at the end of the sweep's own write where one is
        in flight (:func:`_drift`), else here."""
        cells = job_cells(self.jobs, self.outlier_k)
        if self.publishing is not None:
            return keep.keep(path, self.nodes, self.jobs, cells, self.session, self.started)
        found = keep.records(self.nodes, self.jobs, cells, self.session, self.started)
        return current.add(path, found, self.session), len({r.node for r in found})

    def summary(self) -> dict[str, int]:
        return {str(v): sum(n.verdict is v for n in self.nodes.values()) for v in NODE_VERDICTS}

    def to_dict(self) -> dict[str, Any]:
        decision = self.drain
        return {
            "version": 1, "partition": self.partition, "session": self.session,
            "outlier_k": self.outlier_k, "setvars": list(self.setvars),
            "stopped": self.stopped, "errors": list(self.errors),
            "cluster_events": list(self.cluster_events),
            "plan": self.plan.to_dict(), "skipped": dict(self.skipped),
            "retests": [list(p) for p in self.retests],
            "nodes": {name: node.to_dict() for name, node in self.nodes.items()},
            "drain": {"cap": decision.cap if decision else None,
                      "wanted": drain_wanted(self.nodes),
                      "refused": decision.refused if decision else None,
                      "nodes": dict(decision.nodes) if decision else {},
                      "drained": list(self.drained), "undrained": list(self.undrained),
                      "not_drained": dict(self.not_drained), "budget": self.budget,
                      "budget_spent": dict(self.budget_spent)},
            "summary": self.summary(),
        }


def select_nodes(options: Options) -> tuple[list[str], dict[str, str], list[str],
                                           dict[str, slurm.NodeState]]:
    """(nodes to sweep, unreachable node -> reason, nodes ocibench drained that
    --undrain re-tests, every listed node's state)."""
    known, default = slurm.partitions()
    if options.partition and options.partition not in known:
        raise slurm.UsageError(f"--partition {options.partition}: unknown partition; "
                               f"Slurm has {', '.join(known) or 'none'}")
    # Without --partition: Slurm's default, where an sbatch without -p goes too, so
    # that every node planned is one the jobs can have.
    options.partition = options.partition or default
    states = slurm.node_states(options.partition)
    if options.nodes is not None:
        listed = slurm.expand_hostlist(options.nodes)
        outside = [n for n in listed if n not in states]
        if outside:
            where = f"partition {options.partition}" if options.partition else "this cluster"
            raise slurm.UsageError(f"--nodes: {', '.join(outside[:5])} "
                                   f"{'is' if len(outside) == 1 else 'are'} not a node of {where}")
    else:
        listed = list(states)
    record = state.DrainRecord(options.state) if options.undrain else None
    swept, unreachable, retaken = [], {}, []
    for node in listed:
        now = states[node]
        if now.sweepable:
            swept.append(node)
        elif record is not None and now.drained and record.ours(node, now.reason):
            swept.append(node)
            retaken.append(node)
        else:
            unreachable[node] = now.why_not()
            if record is not None and now.drained and \
                    now.reason.startswith(REASON_PREFIX):
                unreachable[node] += (f" (not drained by a sweep: {options.state} has no "
                                      "such drain of it; left alone)")
    return swept, unreachable, retaken, states


def dry_run(options: Options, nodes: list[str] | None = None) -> tuple[Plan, dict[str, str]]:
    """The plan, without running anything: ``nodes`` given (a pure plan of names), or
    Slurm's nodes of the partition."""
    if nodes is None:
        nodes, unreachable, _, _ = select_nodes(options)
        domains, _ = slurm.nvlink_domains()
    else:
        unreachable, domains = {}, {}
    cases, skipped = rfm.discover(options.names, options.excludes, options.prefix,
                                  options.partition, options.setvars)
    return plan.make_plan(nodes, cases, unreachable, domains), skipped


def sweep(options: Options, say: Callable[[str], None] = print) -> Sweep:
    """The sweep; returns what it knows whatever stops it (see the module's text).
    Raises only before it has done anything (a bad node list, Slurm or ReFrame not
    answering, a signal while the plan is made)."""
    nodes, unreachable, retaken, states = select_nodes(options)
    cases, skipped = rfm.discover(options.names, options.excludes, options.prefix,
                                  options.partition, options.setvars)
    # multi-node cases within each NVLink domain, where Slurm's topology has blocks
    domains, _ = slurm.nvlink_domains()
    the_plan = plan.make_plan(nodes, cases, unreachable, domains)
    result = Sweep(the_plan, skipped, partition=options.partition, session=options.session,
                   outlier_k=options.outlier_k, setvars=list(options.setvars))
    record = state.DrainRecord(options.state)
    try:
        with signals.as_ctrl_c():
            _sweep(result, options, retaken, states, record, say)
    except KeyboardInterrupt as err:
        result.signum = signals.signum_of(err)
        result.stopped = f"stopped by {signal.Signals(result.signum).name}"
    except (slurm.SlurmError, rfm.ReframeError, state.StateError) as err:
        result.stopped = str(err)
        if str(err) not in result.errors:
            result.errors.append(str(err))
    if result.stopped and not result.nodes:
        result.nodes = _unjudged(the_plan, f"the sweep stopped before judging it: "
                                 f"{result.stopped}")
    return result


def _sweep(result: Sweep, options: Options, retaken: list[str],
           states: dict[str, slurm.NodeState], record: state.DrainRecord,
           say: Callable[[str], None]) -> None:
    the_plan = result.plan
    reservation = None
    resumed: list[str] = []   # resumed for a re-test, not yet decided
    try:
        if retaken:
            # A drained node takes no job: resume it inside a reservation of every swept
            # node, so that no other user's job lands on it while it is re-tested.  Held
            # from signals: a node resumed is one listed in `resumed`.
            with signals.shielded():
                name = f"ocibench-sweep-{os.getpid()}"
                slurm.create_reservation(name, list(the_plan.nodes), getpass.getuser())
                reservation = name
                for node in retaken:
                    slurm.resume(node)
                    resumed.append(node)
        jobs = _run_waves(the_plan, the_plan.waves, options, reservation, say, start=1)
        retest_jobs = _retests(the_plan, jobs, options, reservation, say, result)
        result.jobs = jobs + retest_jobs
        result.nodes = judge_nodes(the_plan, jobs + retest_jobs, options.outlier_k,
                                   _never_started(jobs + retest_jobs, options))
        if options.history is not None:
            _drift(result, options.history)
        with signals.shielded():
            _decide_drains(result, options, states, retaken, resumed, record)
            if options.history is not None:
                _keep_events(result, options.history)
    finally:
        with signals.shielded():
            _restore(result, resumed, states, reservation, record)
        _publish(result)


def _unjudged(the_plan: Plan, why: str) -> dict[str, NodeResult]:
    """Every node of the plan not judged, saying ``why`` (unreachable ones stay so)."""
    found = verdicts.node_results(the_plan, {}, {})
    return {node: r if r.verdict is NodeVerdict.UNREACHABLE else
            NodeResult(NodeVerdict.UNJUDGED, why, Action.RERUN, {})
            for node, r in found.items()}


def _run_waves(the_plan: Plan, waves: Sequence[plan.Wave], options: Options,
               reservation: str | None, say: Callable[[str], None], start: int) -> list[JobResult]:
    jobs: list[JobResult] = []
    number = start
    for index, wave in enumerate(waves, 1):
        for case in wave.cases:
            say(f"step {number}: wave {index}/{len(waves)} ({wave.kind}), {case.name} on "
                f"{len(wave.groups)} group(s)")
            jobs += rfm.run_step(number, wave, case, options.prefix, options.start_timeout,
                                 options.partition, reservation, options.setvars,
                                 options.session)
            number += 1
    return jobs


def _retests(the_plan: Plan, jobs: list[JobResult], options: Options,
             reservation: str | None, say: Callable[[str], None],
             result: Sweep) -> list[JobResult]:
    """Re-test the pairs that failed alone, each node with a third partner."""
    cells = job_cells(jobs, options.outlier_k)
    waves, number = [], 1000
    for case in the_plan.cases:
        if case.nodes != 2:
            continue
        pairs = {j.nodes: cells[i] for i, j in enumerate(jobs)
                 if j.case == case and i in cells}
        alone = verdicts.pair_alone(case, pairs)
        if not alone:
            continue
        suspects = {n for p, c in pairs.items() if verdicts.is_bad(c) for n in p}
        retest, _stuck = plan.retest_pairs(alone, the_plan.pairs, suspects,
                                           the_plan.domain_of())
        result.retests += retest
        waves += plan.retest_waves(retest, case)
    return _run_waves(the_plan, waves, options, reservation, say, number) if waves else []


def job_cells(jobs: Sequence[JobResult], k: float) -> dict[int, Cell]:
    cells = {i: c for i, c in ((i, verdicts.job_cell(j)) for i, j in enumerate(jobs))
             if c is not None}
    verdicts.mark_outliers(jobs, cells, k)
    return cells


def _never_started(jobs: Sequence[JobResult], options: Options) -> dict[str, str]:
    """Nodes of jobs that never started, with Slurm's word on them now."""
    stuck = [j for j in jobs if j.never_started]
    if not stuck:
        return {}
    states = slurm.node_states(options.partition)
    found: dict[str, str] = {}
    for job in stuck:
        held = [n for n in job.nodes if n in states and not states[n].sweepable]
        for node in held or job.nodes:
            state = states.get(node)
            found.setdefault(node, f"its job ({'+'.join(job.nodes)}, {job.case.name}) did "
                             f"not start within {options.start_timeout} s: "
                             f"{job.never_started}; "
                             + (state.why_not() if state else "not known to Slurm"))
    return found


def judge_nodes(the_plan: Plan, jobs: Sequence[JobResult], k: float,
                unreachable: dict[str, str]) -> dict[str, NodeResult]:
    """Cells per case and node, attributed (pure, given the jobs)."""
    cells = job_cells(jobs, k)
    by_case: dict[str, dict[str, Cell]] = {}
    own: dict[Case, list[tuple[JobResult, Cell]]] = {}
    for index, job in enumerate(jobs):
        if index in cells:
            own.setdefault(job.case, []).append((job, cells[index]))
    pinned_bad: set[str] = set()
    for case in sorted(own, key=lambda c: c.nodes):
        found = own[case]
        if case.nodes == 1:
            by_case[case.name] = {job.nodes[0]: cell for job, cell in found}
        elif case.nodes == 2:
            pairs = {job.nodes: cell for job, cell in found if job.kind == PAIRS}
            retests = {job.nodes: cell for job, cell in found if job.kind == plan.RETEST}
            by_case[case.name] = verdicts.attribute_pairs(pairs, retests)
        else:
            groups = {job.nodes: cell for job, cell in found if job.kind == GROUPS}
            by_case[case.name] = verdicts.attribute_groups(groups, pinned_bad)
        if case.nodes <= 2:
            pinned_bad |= {n for n, c in by_case[case.name].items() if verdicts.is_bad(c)}
    skipped: dict[str, list[str]] = {}
    for job in jobs:
        if job.skipped:
            for node in job.nodes:
                skipped.setdefault(node, []).append(f"{job.case.name}: skipped: {job.skipped}")
    return verdicts.node_results(the_plan, by_case, unreachable, skipped)


def mark_drift(nodes: dict[str, NodeResult], history: History, session: str,
               now: float, fleet: drift.Fleet | None = None) -> dict[str, NodeResult]:
    """``nodes`` with the passing ones that drift (:mod:`ocibench.history.drift`, on
    the history that already holds this sweep's figures, ``session``; ``fleet``: that
    history read already) drifting, and a "flagged" event kept for each (what repeat
    offenders are told from): drained where the drift persists (``Drift.persists``:
    low in two separate sweeps), rerun otherwise (verdicts.mark_drifting)."""
    passing = [node for node, result in nodes.items() if result.verdict is NodeVerdict.PASS]
    fleet = fleet if fleet is not None else drift.read(history, now=now)
    found = {node: drifts for node, drifts in fleet.drifting(passing, session).items()
             if drifts}
    persisting = {node for node, drifts in found.items() if any(d.persists for d in drifts)}
    marked = verdicts.mark_drifting(nodes, found, persisting)
    for node in found:
        history.add_event(node, "flagged", now, marked[node].reason, session)
    return marked


def _drift(result: Sweep, path: Path) -> None:
    """Keep the sweep's figures in the history at ``path``, then mark the nodes that
    drift: before the drains are decided, so that a drift that persists is drained.  A
    history that cannot be read or written is an error of the sweep, and no drift.
    The nodes are first marked as being written (ocibench.history.current), and their
    snapshots published once the sweep is done with the history (:func:`_publish`);
    a sweep that cannot mark them keeps nothing, rather than leave the healthchecks a
    snapshot the history has moved past."""
    try:
        result.publishing = current.Intent(path, list(result.nodes), result.session)
    except current.PublishError as err:
        result.errors.append(f"history: {err} (figures not kept, drift not judged)")
        return
    try:
        result.kept = result.keep(path)
        with History(path) as history:
            now = time.time()
            fleet = drift.read(history, now=now)
            result.nodes = mark_drift(result.nodes, history, result.session, now, fleet)
            result.cluster_events = [event.text for event in fleet.events()]
    except HistoryError as err:
        result.errors.append(f"history: {err} (drift not judged)")


def _keep_events(result: Sweep, path: Path) -> None:
    """The sweep's drains and returns as the nodes' events in the history: a node
    flagged, drained, returned and flagged again is a repeat offender (drift.offences)."""
    decided = result.drain.nodes if result.drain else {}
    try:
        with History(path) as history:
            for node in result.drained:
                history.add_event(node, "drained", time.time(), decided.get(node, ""),
                                  result.session)
            for node in result.undrained:
                history.add_event(node, "resumed", time.time(), "passed its re-test",
                                  result.session)
    except HistoryError as err:
        result.errors.append(f"history: {err}")


def _publish(result: Sweep) -> None:
    """Publish the swept nodes' snapshots for their healthchecks (ocibench.history.
    current), once the sweep wrote its figures and events; left marked as being
    written where it cannot (their healthchecks say unknown until a later write
    publishes them)."""
    if result.publishing is None:
        return
    try:
        result.publishing.finish()
    except (current.PublishError, HistoryError) as err:
        result.errors.append(f"history: {err} (the nodes' snapshots not published)")
    result.publishing = None


def drain_wanted(nodes: dict[str, NodeResult]) -> dict[str, str]:
    """node -> drain reason, for every node whose action asks for a drain."""
    return {n: r.drain_reason for n, r in nodes.items()
            if actions.drains(r.action) and r.drain_reason}


def _drain(node: str, reason: str, record: state.DrainRecord, options: Options) -> None:
    """Drain ``node``: first the record (a drain this tool made is one it can prove),
    then scontrol."""
    record.add(node, reason, str(options.prefix))
    slurm.drain(node, reason)


def _decide_drains(result: Sweep, options: Options, states: dict[str, slurm.NodeState],
                   retaken: list[str], resumed: list[str], record: state.DrainRecord) -> None:
    """The drain decision, and the Slurm actions it takes; ``resumed`` loses each node
    once it is decided (in service, or drained again)."""
    listed = len(result.nodes)
    decision = actions.decide(drain_wanted(result.nodes), listed, options.max_drain_fraction,
                              options.force)
    result.drain = decision
    for node in retaken:
        verdict = result.nodes[node].verdict
        if verdict is NodeVerdict.PASS:
            record.remove(node)
            resumed.remove(node)
            result.undrained.append(node)   # resumed before its re-test: stays in service
        elif options.drain and node in decision.nodes:
            pass                            # drained again below, with today's reason
        else:
            try:
                _drain(node, states[node].reason, record, options)   # as it was
            except (slurm.SlurmError, state.StateError) as err:
                result.errors.append(str(err))
                raise
            resumed.remove(node)
    if not options.drain:
        return
    # The re-tested nodes it drains again were drained before the sweep: they count
    # against the budget, and are drained whatever it says.
    again = [node for node in decision.nodes if node in resumed]
    room = budget.count([node for node in decision.nodes if node not in resumed],
                        options.drain_budget, also_held=again)
    result.budget = options.drain_budget.describe()
    result.budget_spent.update(room.spent)
    result.not_drained.update(room.unknown)
    if room.unknown:
        result.errors.append(next(iter(room.unknown.values())) + ": nothing drained")
    todo = [(n, r) for n, r in decision.nodes.items() if n in again or n in room.admitted]
    _drain_all(result, todo, resumed, record, options)
    fresh = {node: decision.nodes[node] for node in result.drained if node not in again}
    undo, said = budget.recount(fresh, options.drain_budget)
    if said:
        result.errors.append(said)
    for node, why in undo.items():   # others drained into the same room meanwhile
        try:
            slurm.resume(node)
        except slurm.SlurmError as err:
            result.errors.append(f"{err} (undoing a drain beyond the budget)")
            continue
        result.drained.remove(node)
        result.budget_spent[node] = f"drained, then resumed: {why}"
        try:
            record.remove(node)
        except state.StateError as err:
            result.errors.append(str(err))


def _drain_all(result: Sweep, todo: list[tuple[str, str]], resumed: list[str],
               record: state.DrainRecord, options: Options) -> None:
    """Drain ``todo`` (node, reason) in order; the first that fails stops the rest."""
    for index, (node, reason) in enumerate(todo):
        try:
            _drain(node, reason, record, options)
        except (slurm.SlurmError, state.StateError) as err:
            result.errors.append(str(err))
            result.not_drained[node] = str(err)
            for later, _ in todo[index + 1:]:
                result.not_drained[later] = f"not tried: the drain of {node} failed"
            return
        result.drained.append(node)
        if node in resumed:
            resumed.remove(node)


def _restore(result: Sweep, resumed: list[str], states: dict[str, slurm.NodeState],
             reservation: str | None, record: state.DrainRecord) -> None:
    """Nodes resumed for a re-test that the sweep did not decide (it stopped, or a
    Slurm action failed) go back as they were: drained, with their old reasons.  The
    reservation goes only when every one of them is drained again: a node that could
    not be drained stays reserved for this user, out of other users' jobs."""
    stuck = []
    for node in list(resumed):
        try:
            record.add(node, states[node].reason, "restored: " + (result.stopped or "-"))
            slurm.drain(node, states[node].reason)
            resumed.remove(node)
        except (slurm.SlurmError, state.StateError) as err:
            result.errors.append(str(err))
            stuck.append(node)
    if reservation is None:
        return
    if stuck:
        result.errors.append(
            f"reservation {reservation} kept: it holds {slurm.fold(stuck)} (resumed for a "
            f"re-test, not drained again) out of other users' jobs; drain them, then "
            f"scontrol delete ReservationName={reservation}")
        return
    try:
        slurm.delete_reservation(reservation)
    except slurm.SlurmError as err:
        result.errors.append(str(err))
