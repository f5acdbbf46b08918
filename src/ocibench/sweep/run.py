"""The sweep from start to end: nodes, plan, ReFrame steps, verdicts, drain decisions."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibench.metrics import NODE_VERDICTS, NodeVerdict
from ocibench.sweep import actions, plan, rfm, slurm, verdicts
from ocibench.sweep.plan import GROUPS, PAIRS, Case, Group, Plan
from ocibench.sweep.verdicts import Cell, JobResult, NodeResult

START_TIMEOUT_S = slurm.START_TIMEOUT_S


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
    outlier_k: float = verdicts.OUTLIER_K
    start_timeout: int = START_TIMEOUT_S
    prefix: Path = Path("sweep")
    setvars: Sequence[str] = ()         # ReFrame's -S, for every run of the sweep


@dataclass
class Sweep:
    plan: Plan
    skipped: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, NodeResult] = field(default_factory=dict)
    drain: actions.DrainDecision | None = None
    drained: list[str] = field(default_factory=list)
    undrained: list[str] = field(default_factory=list)
    retests: list[Group] = field(default_factory=list)
    partition: str | None = None
    outlier_k: float = verdicts.OUTLIER_K
    setvars: Sequence[str] = ()

    @property
    def ok(self) -> bool:
        return all(n.verdict is NodeVerdict.PASS for n in self.nodes.values())

    def summary(self) -> dict[str, int]:
        return {str(v): sum(n.verdict is v for n in self.nodes.values()) for v in NODE_VERDICTS}

    def to_dict(self) -> dict[str, Any]:
        decision = self.drain
        return {
            "version": 1, "partition": self.partition,
            "outlier_k": self.outlier_k, "setvars": list(self.setvars),
            "plan": self.plan.to_dict(), "skipped": dict(self.skipped),
            "retests": [list(p) for p in self.retests],
            "nodes": {name: node.to_dict() for name, node in self.nodes.items()},
            "drain": {"cap": decision.cap if decision else None,
                      "wanted": {n: r.drain_reason for n, r in self.nodes.items()
                                 if actions.drains(r.action)},
                      "refused": decision.refused if decision else None,
                      "nodes": dict(decision.nodes) if decision else {},
                      "drained": list(self.drained), "undrained": list(self.undrained)},
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
    swept, unreachable, retaken = [], {}, []
    for node in listed:
        state = states[node]
        if state.sweepable:
            swept.append(node)
        elif options.undrain and state.drained_by_us:
            swept.append(node)
            retaken.append(node)
        else:
            unreachable[node] = state.why_not()
    return swept, unreachable, retaken, states


def dry_run(options: Options, nodes: list[str] | None = None) -> tuple[Plan, dict[str, str]]:
    """The plan, without running anything: ``nodes`` given (a pure plan of names), or
    Slurm's nodes of the partition."""
    if nodes is None:
        nodes, unreachable, _, _ = select_nodes(options)
    else:
        unreachable = {}
    cases, skipped = rfm.discover(options.names, options.excludes, options.prefix,
                                  options.partition, options.setvars)
    return plan.make_plan(nodes, cases, unreachable), skipped


def sweep(options: Options, say: Callable[[str], None] = print) -> Sweep:
    nodes, unreachable, retaken, states = select_nodes(options)
    cases, skipped = rfm.discover(options.names, options.excludes, options.prefix,
                                  options.partition, options.setvars)
    the_plan = plan.make_plan(nodes, cases, unreachable)
    result = Sweep(the_plan, skipped, partition=options.partition,
                   outlier_k=options.outlier_k, setvars=list(options.setvars))
    reservation = None
    resumed: list[str] = []
    try:
        if retaken:
            # A drained node takes no job: resume it inside a reservation of every swept
            # node, so that no other user's job lands on it while it is re-tested.
            reservation = f"ocibench-sweep-{os.getpid()}"
            slurm.create_reservation(reservation, nodes, getpass.getuser())
            for node in retaken:
                slurm.resume(node)
                resumed.append(node)
        jobs = _run_waves(the_plan, the_plan.waves, options, reservation, say, start=1)
        retest_jobs = _retests(the_plan, jobs, options, reservation, say, result)
        result.nodes = judge_nodes(the_plan, jobs + retest_jobs, options.outlier_k,
                                   _never_started(jobs + retest_jobs, options))
        _decide_drains(result, options, states, retaken)
        resumed = []   # every resumed node is now decided: passed, or drained again
    finally:
        for node in resumed:   # the sweep stopped before deciding: back as they were
            slurm.drain(node, states[node].reason)
        if reservation:
            slurm.delete_reservation(reservation)
    return result


def _run_waves(the_plan: Plan, waves: Sequence[plan.Wave], options: Options,
               reservation: str | None, say: Callable[[str], None], start: int) -> list[JobResult]:
    jobs: list[JobResult] = []
    number = start
    for index, wave in enumerate(waves, 1):
        for case in wave.cases:
            say(f"step {number}: wave {index}/{len(waves)} ({wave.kind}), {case.name} on "
                f"{len(wave.groups)} group(s)")
            jobs += rfm.run_step(number, wave, case, options.prefix, options.start_timeout,
                                 options.partition, reservation, options.setvars)
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
        retest, _stuck = plan.retest_pairs(alone, the_plan.pairs, suspects)
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
    return verdicts.node_results(the_plan, by_case, unreachable)


def _decide_drains(result: Sweep, options: Options, states: dict[str, slurm.NodeState],
                   retaken: list[str]) -> None:
    wanted = {n: r.drain_reason for n, r in result.nodes.items()
              if actions.drains(r.action) and r.drain_reason}
    listed = len(result.nodes)
    decision = actions.decide(wanted, listed, options.max_drain_fraction, options.force)
    result.drain = decision
    for node in retaken:
        verdict = result.nodes[node].verdict
        if verdict is NodeVerdict.PASS:
            result.undrained.append(node)   # resumed before its re-test: stays in service
        elif options.drain and node in decision.nodes:
            pass                            # drained again below, with today's reason
        else:
            slurm.drain(node, states[node].reason)   # as it was
    if options.drain:
        for node, reason in decision.nodes.items():
            slurm.drain(node, reason)
            result.drained.append(node)
