"""The drain budget: how many nodes ocibench may hold drained at once, shared by every
drain it makes (the sweep's ``--drain``, the healthcheck, the prolog).

A fault that moves every node at once (a driver update, an image, a wrong reference,
a probe's own defect) looks like many broken nodes; draining them all would do more
harm than the fault.  So, as Kubernetes' PodDisruptionBudget bounds the pods evicted
at once, ocibench bounds its own drains, per partition, counted from Slurm itself:

* **What counts**: the nodes of the partition that Slurm holds drained or draining
  with a reason that starts with ``ocibench:`` (:data:`~ocibench.cluster.reason.REASON_PREFIX`),
  whoever wrote it (the sweep, the healthcheck, the prolog, or a person who typed the
  prefix).  A person's drain with a reason of their own is theirs (NHC's rule): it
  does not count, and ocibench never touches it.
* **The budget**: ``N`` nodes, or ``P%`` of each partition rounded down with at least
  one node (:data:`DEFAULT`: 10 %); ``0`` drains nothing.  A node in several partitions
  must fit in each.  ``--drain-budget``, else ``$OCIBENCH_DRAIN_BUDGET`` (:func:`configured`).
* **Above it, no new drain**: the node is reported "would drain, budget spent".
  Slurm not answering is no count, and no count is no drain.
* **Races**: deciders that count at the same moment (slurmd starts every node's
  health check together) would each see room.  So a new drain is checked after the
  fact (:func:`overdrawn`): :data:`RECOUNT_AFTER_S` after ``scontrol`` drained the
  node, Slurm is listed again and the partition's ocibench drains are ranked by the
  time Slurm set their reason, then by node name; a new drain ranked beyond the
  budget is undone at once.  Slurm stamps a reason with the second slurmctld handled
  the drain, under its node lock (``update_node``, src/slurmctld/node_mgr.c); listed a
  second later, every drain stamped in the same second is already in the listing,
  so every decider ranks the same nodes the same way, and the drains that stay are
  never more than the budget.  What that needs, and the overshoot when it fails, are
  in docs/healthcheck.md ("The drain budget").

:func:`admit` and :func:`overdrawn` are pure, on a listing (ocibench.cluster.slurm.listing);
:func:`count` and :func:`recount` add the one ``sinfo`` call each.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ocibench.cluster import slurm
from ocibench.cluster.reason import REASON_PREFIX

#: The budget when none is given: 10 % of each partition, at least one node.  Broken
#: nodes are rare and independent (Meta's Llama 3 run: 419 unexpected interruptions in
#: 54 days on 16,384 GPUs, under 8 of its 2,048 nodes a day); a fault that fails more
#: than a tenth of a partition at once is far more often one cause shared by all
#: (docs/healthcheck.md).  At least one node, or a partition under 10 nodes could never
#: drain a broken one.
DEFAULT = "10%"
#: Where the budget is set for every ocibench command on a machine (the healthcheck's
#: wrapper, the sweep's shell); ``--drain-budget`` overrides it.
ENV = "OCIBENCH_DRAIN_BUDGET"
#: Seconds between ``scontrol``'s drain and the re-count: more than the one second
#: to which Slurm stamps a reason, so that every drain stamped in the same second as
#: this one is in the re-count's listing.
RECOUNT_AFTER_S = 1.1
#: The most nodes a budget may name: far above any Slurm cluster.
MAX_NODES = 1_000_000

_FORM = re.compile(r"(\d{1,7})\s*(%?)")


class BudgetError(ValueError):
    """A budget that is not one; one line naming where it was given."""


@dataclass(frozen=True)
class Budget:
    """``nodes`` per partition, or ``percent`` of each partition (at least one node);
    ``text`` and ``source`` as given, for the lines that name it."""

    text: str
    nodes: int | None = None
    percent: int | None = None
    source: str = "the default"

    def limit(self, size: int) -> int:
        """The most nodes of a partition of ``size`` nodes ocibench may hold drained."""
        if self.nodes is not None:
            return self.nodes
        if not self.percent:
            return 0
        return max(1, math.floor(Fraction(self.percent, 100) * size))

    def describe(self) -> str:
        return f"{self.text}, {self.source}"


def parse(text: str, source: str) -> Budget:
    """``N`` (nodes) or ``P%`` (of each partition, 0 to 100); one line otherwise."""
    match = _FORM.fullmatch(text.strip())
    if not match:
        raise BudgetError(f"{source} {text!r:.40}: not a drain budget; give a number of "
                          "nodes (2) or a percentage of each partition (10%)")
    value, percent = int(match[1]), bool(match[2])
    if percent and value > 100:
        raise BudgetError(f"{source} {text!r}: more than 100 % of a partition")
    if not percent and value > MAX_NODES:
        raise BudgetError(f"{source} {text!r}: more than {MAX_NODES} nodes")
    given = f"{value}%" if percent else str(value)
    return Budget(given, None if percent else value, value if percent else None, source)


def configured(given: str | None = None) -> Budget:
    """The budget: ``given`` (``--drain-budget``), else ``$OCIBENCH_DRAIN_BUDGET``,
    else :data:`DEFAULT`."""
    if given is not None:
        return parse(given, "--drain-budget")
    if os.environ.get(ENV):
        return parse(os.environ[ENV], f"${ENV}")
    return parse(DEFAULT, "the default")


def holds(node: slurm.ListedNode) -> bool:
    """Does this node count against the budget: drained or draining with an
    ``ocibench:`` reason (whoever wrote it)."""
    return node.held_drained and node.reason.startswith(REASON_PREFIX)


def _members(listing: Mapping[str, slurm.ListedNode]) -> dict[str, list[str]]:
    """partition -> its nodes."""
    found: dict[str, list[str]] = {}
    for node in listing.values():
        for partition in node.partitions:
            found.setdefault(partition, []).append(node.name)
    return found


def _rank_key(node: slurm.ListedNode) -> tuple[str, str]:
    """Older drains first (a reason with no time counts as the oldest: it goes before
    the one ranking, never after), then by name: the same order for every decider."""
    return (node.reason_time, node.name)


def _spent_line(partition: str, held: Sequence[str], limit: int, size: int,
                budget: Budget) -> str:
    shown = ", ".join(sorted(held)[:5]) + (", ..." if len(held) > 5 else "")
    return (f"drain budget spent: partition {partition} holds {len(held)} ocibench "
            f"drain(s) of at most {limit} of its {size} nodes (budget {budget.describe()})"
            + (f": {shown}" if held else ""))


@dataclass(frozen=True)
class Admission:
    """Which candidates may be drained now, and why the others may not."""

    admitted: tuple[str, ...]
    spent: dict[str, str]      # node -> "drain budget spent: ..." (one line)
    unknown: dict[str, str]    # node -> why the budget could not be counted for it


def admit(listing: Mapping[str, slurm.ListedNode], candidates: Iterable[str],
          budget: Budget, also_held: Iterable[str] = ()) -> Admission:
    """The candidates, in the order given, that fit the budget of every partition
    they are in, counting the drains Slurm holds (:func:`holds`), the nodes of
    ``also_held`` (drains the caller makes whatever the budget: the sweep's re-tested
    nodes drained again), and the candidates admitted before.  A candidate Slurm does
    not list in a partition is unknown: no count, no drain."""
    members = _members(listing)
    held = {p: {n for n in nodes if holds(listing[n])} for p, nodes in members.items()}
    for name in also_held:
        for partition in listing[name].partitions if name in listing else ():
            held[partition].add(name)
    admitted: list[str] = []
    spent: dict[str, str] = {}
    unknown: dict[str, str] = {}
    for name in candidates:
        node = listing.get(name)
        if node is None or not node.partitions:
            unknown[name] = (f"Slurm lists {name} in no partition: no drain budget to "
                             "count it against")
            continue
        full = [p for p in node.partitions if name not in held[p]
                and len(held[p]) >= budget.limit(len(members[p]))]
        if full:
            p = full[0]
            spent[name] = _spent_line(p, sorted(held[p]), budget.limit(len(members[p])),
                                      len(members[p]), budget)
            continue
        for partition in node.partitions:
            held[partition].add(name)
        admitted.append(name)
    return Admission(tuple(admitted), spent, unknown)


def overdrawn(listing: Mapping[str, slurm.ListedNode], own: Mapping[str, str],
              budget: Budget) -> dict[str, str]:
    """Of ``own`` (node -> the reason this caller just drained it with), the drains to
    undo: in a partition of the node, the drains that count (:func:`holds`) ranked
    oldest first (the time Slurm set the reason, then the node's name), and the node
    beyond the budget.  A node Slurm no longer holds drained with exactly that reason
    is no longer this caller's (a person resumed it, or drained it again): left alone."""
    members = _members(listing)
    undo: dict[str, str] = {}
    for name, reason in own.items():
        node = listing.get(name)
        if node is None or not holds(node) or node.reason != reason:
            continue
        for partition in node.partitions:
            ranked = sorted((listing[n] for n in members[partition] if holds(listing[n])),
                            key=_rank_key)
            limit = budget.limit(len(members[partition]))
            rank = [n.name for n in ranked].index(name) + 1
            if rank > limit:
                before = [n.name for n in ranked[:limit]]
                undo[name] = (_spent_line(partition, before, limit,
                                          len(members[partition]), budget)
                              + f" (drained in the same moment as others: {name} ranks "
                              f"{rank} by the time of its reason, then its name)")
                break
    return undo


def count(candidates: Sequence[str], budget: Budget, also_held: Iterable[str] = (),
          timeout: float = slurm.TIMEOUT_S) -> Admission:
    """:func:`admit` on Slurm's listing now; Slurm not answering makes every candidate
    unknown."""
    try:
        found = slurm.listing(timeout)
    except slurm.SlurmError as err:
        return Admission((), {}, {name: f"no count of the drain budget: {err}"
                                  for name in candidates})
    return admit(found, candidates, budget, also_held)


def recount(own: Mapping[str, str], budget: Budget,
            timeout: float = slurm.TIMEOUT_S) -> tuple[dict[str, str], str | None]:
    """After the caller drained ``own`` (node -> reason): wait :data:`RECOUNT_AFTER_S`,
    list Slurm again, and return (the drains to undo, node -> why; a line when Slurm
    did not answer: the drains then stay, which docs/healthcheck.md counts in the
    overshoot)."""
    if not own:
        return {}, None
    time.sleep(RECOUNT_AFTER_S)
    try:
        found = slurm.listing(timeout)
    except slurm.SlurmError as err:
        return {}, (f"no re-count of the drain budget after draining "
                    f"{', '.join(own)}: {err}; the drain stays")
    return overdrawn(found, own, budget), None
