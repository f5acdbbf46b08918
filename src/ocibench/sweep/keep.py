"""Every node's figures of a sweep, kept in the history (ocibench.history.store).

A node's figures are those of the job the sweep's verdict on it comes from
(:mod:`ocibench.sweep.verdicts`, "Attribution"): a single-node job's are its node's;
of a node's two ring pairs, the passing one where the node passes (its partner took
the blame), the failing one (or its re-test) where the failure is pinned on it; a
group's are each member's, except for a member that passes while the group's failure
is pinned on another, which keeps none of that group's.  So each figure of a node is
kept once per sweep, with the verdict judge gave it.
"""

from __future__ import annotations

import time as clock
from collections.abc import Mapping, Sequence
from pathlib import Path

from ocibench.history import rows
from ocibench.history.store import History, Record
from ocibench.sweep.verdicts import Cell, JobResult, NodeResult


def _job_of(node_cell: Cell, jobs: Sequence[JobResult], cells: Mapping[int, Cell],
            case: str) -> JobResult | None:
    """The job whose own cell the node's cell is: same verdict, and the same value
    where there is one; None where the node's cell comes from none of its jobs."""
    mine = [(job, cells[i]) for i, job in enumerate(jobs)
            if i in cells and job.case.name == case and job.nodes in node_cell.jobs]
    same = [job for job, cell in mine if cell.verdict is node_cell.verdict]
    exact = [job for job, cell in mine if cell.verdict is node_cell.verdict
             and cell.value == node_cell.value and cell.figure == node_cell.figure]
    return (exact or same or [None])[0]


def records(nodes: Mapping[str, NodeResult], jobs: Sequence[JobResult],
            cells: Mapping[int, Cell], session: str, now: float) -> list[Record]:
    """The Records of a sweep: ``nodes`` its verdicts, ``jobs`` every job it ran,
    ``cells`` each job's own cell (ocibench.sweep.run.job_cells); ``now`` stands for
    a job's time where ReFrame did not say when it ended."""
    found: list[Record] = []
    for node, result in nodes.items():
        for case, cell in result.cells.items():
            job = _job_of(cell, jobs, cells, case)
            if job is None:
                continue
            found += rows.records(node, job.case.check, job.params, job.rows,
                                  time=job.time if job.time is not None else now,
                                  session=session, image=job.image, driver=job.driver)
    return found


def keep(path: Path, nodes: Mapping[str, NodeResult], jobs: Sequence[JobResult],
         cells: Mapping[int, Cell], session: str, now: float | None = None) -> tuple[int, int]:
    """Add the sweep's records to the history at ``path``: (records added, nodes)."""
    found = records(nodes, jobs, cells, session, clock.time() if now is None else now)
    with History(path) as history:
        added = history.add(found)
    return added, len({r.node for r in found})
