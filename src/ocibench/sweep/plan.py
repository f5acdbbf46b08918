"""Which nodes run which check, in waves: pure, and fast for thousands of nodes.

A check case runs on 1, 2 or 4 nodes (its own ``nodes`` parameter, or the default of
its ``ocibench.benchmarks`` entry).  The plan gives every swept node:

* **every single-node case**, one job per node, all nodes in one wave;
* **every 2-node case over a ring of pairs** (n0,n1), (n1,n2) ... (n[N-1],n0): each
  node is in exactly two pairs, with two different partners, so a slow NIC or link
  shows in both pairs of its node and is pinned to it, not to a pair.  A ring of even
  N splits into 2 waves of disjoint pairs (even and odd positions); an odd ring needs a
  third wave for the pair that closes it.  With N = 2 there is one pair (each node in
  one pair: a failure cannot be pinned); with N = 1 no 2-node case runs;
* **every case of k >= 3 nodes (the 4-node collectives) on groups of k** consecutive
  nodes; the N mod k nodes left over form one more group, topped up with the first
  nodes of the list, in a second wave, so that every node takes part.  With N < k the
  case does not run.

A wave is a set of node groups no two of which share a node; each case of the wave
runs once on every group, and a step (one wave, one case) is one ReFrame run whose
jobs all start at once.  The number of waves depends on the node counts of the
cases (1 + 2 or 3 + 1 or 2), never on N: the wall time grows with the slowest
group, not with the cluster.

On a cluster of rack-scale NVLink domains (GB200 NVL72: 18 hosts of a rack share one
NVLink domain; Slurm's topology/block plugin describes each rack as a block, which the
sweep reads: ``domains``), every multi-node case is planned **per domain**: a ring of
pairs within each domain and groups of k within each domain, never across, so that an
all-reduce across hosts runs over the rack's NVLink (multi-node NVLink), which is what it
checks, and a fault is pinned to a node of one rack.  The waves run every domain's
groups at once (domains share no node).  A domain with fewer nodes than a case needs
does not run it (``not_run`` says so); nodes in no block form a domain of their own.

A pair that fails while both its nodes pass their other pair "fails alone": each of its
two nodes is re-tested with a third partner (:func:`retest_waves`); the node that fails
in both its pairs, or in its re-test, is the bad one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Joins the nodes of one job in ReFrame's ``-P sweep_nodes=a+b,c+d`` (checks/base.py):
#: host names hold letters, digits, '-' and '.', never '+' or ','.
NODE_SEPARATOR = "+"

#: The domain of the nodes Slurm's topology puts in no block.
NO_DOMAIN = "(no block)"

#: Wave kinds.
SINGLE, PAIRS, GROUPS, RETEST = "single", "pairs", "groups", "retest"

Group = tuple[str, ...]


@dataclass(frozen=True)
class Case:
    """One ReFrame test case of the shape, before it is pinned to nodes."""

    name: str           # ReFrame's display name: "osu_latency %buffers=H-H %nodes=2"
    select: str         # what selects exactly this case: "/<hashcode>" (reframe -n)
    check: str          # the figure naming (check_name), or the test's own name
    nodes: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "check": self.check, "nodes": self.nodes}


@dataclass(frozen=True)
class Wave:
    kind: str
    size: int                   # nodes per group
    groups: tuple[Group, ...]   # pairwise disjoint
    cases: tuple[Case, ...]

    @property
    def jobs(self) -> int:
        return len(self.groups) * len(self.cases)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "size": self.size, "groups": [list(g) for g in self.groups],
                "checks": [c.name for c in self.cases], "jobs": self.jobs}


@dataclass
class Plan:
    nodes: tuple[str, ...]                  # swept, in the given order
    cases: tuple[Case, ...]
    unreachable: dict[str, str] = field(default_factory=dict)   # node -> Slurm's reason
    pairs: tuple[Group, ...] = ()
    groups: dict[int, tuple[Group, ...]] = field(default_factory=dict)   # size -> groups
    leftover: dict[int, tuple[str, ...]] = field(default_factory=dict)   # size -> nodes
    waves: list[Wave] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)      # case name -> why
    #: NVLink domain -> its swept nodes, in order; {} when the plan is not per domain
    domains: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def domain_of(self) -> dict[str, str]:
        return {n: d for d, members in self.domains.items() for n in members}

    @property
    def jobs(self) -> int:
        return sum(w.jobs for w in self.waves)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": list(self.nodes), "unreachable": dict(self.unreachable),
            "cases": [c.to_dict() for c in self.cases],
            "pairs": [list(p) for p in self.pairs],
            "groups": {str(k): [list(g) for g in v] for k, v in self.groups.items()},
            "leftover": {str(k): list(v) for k, v in self.leftover.items()},
            "waves": [w.to_dict() for w in self.waves], "jobs": self.jobs,
            "not_run": dict(self.not_run),
            "domains": {d: list(members) for d, members in self.domains.items()},
        }


class PlanError(ValueError):
    """A node list the plan cannot use; one line."""


def ring_pairs(nodes: Sequence[str]) -> list[Group]:
    """(n0,n1), (n1,n2), ..., (n[N-1],n0): every node in two pairs for N >= 3."""
    count = len(nodes)
    if count < 2:
        return []
    if count == 2:
        return [(nodes[0], nodes[1])]
    return [(nodes[i], nodes[(i + 1) % count]) for i in range(count)]


def pair_waves(pairs: Sequence[Group]) -> list[tuple[Group, ...]]:
    """The ring's pairs in waves of disjoint pairs: even positions, odd positions, and
    for an odd ring the closing pair alone (it shares a node with the first and the
    last pair)."""
    count = len(pairs)
    if count <= 2:   # N = 2 (one pair) or nothing
        return [tuple(pairs)] if pairs else []
    if count % 2 == 0:
        return [tuple(pairs[0::2]), tuple(pairs[1::2])]
    return [tuple(pairs[0:count - 1:2]), tuple(pairs[1:count - 1:2]), (pairs[-1],)]


def node_groups(nodes: Sequence[str], size: int) -> tuple[list[Group], list[Group], tuple]:
    """Groups of ``size`` consecutive nodes (first wave), the group of the leftover
    nodes topped up with the first nodes (second wave, may be empty), and the leftover."""
    full = [tuple(nodes[i:i + size]) for i in range(0, len(nodes) - size + 1, size)]
    rest = tuple(nodes[len(full) * size:])
    if not full or not rest:
        return full, [], rest
    topped = rest + tuple(n for n in nodes if n not in rest)[:size - len(rest)]
    return full, [topped], rest


def by_domain(nodes: Sequence[str], domains: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The swept nodes of each domain, domains in the order of their first node."""
    found: dict[str, list[str]] = {}
    for node in nodes:
        found.setdefault(domains.get(node, NO_DOMAIN), []).append(node)
    return {d: tuple(members) for d, members in found.items()}


def _merged(per_domain: Iterable[Sequence[tuple[Group, ...]]]) -> list[tuple[Group, ...]]:
    """Wave i of every domain together: the domains share no node."""
    merged: list[list[Group]] = []
    for waves in per_domain:
        for index, wave in enumerate(waves):
            if index == len(merged):
                merged.append([])
            merged[index] += wave
    return [tuple(w) for w in merged if w]


def make_plan(nodes: Sequence[str], cases: Iterable[Case],
              unreachable: dict[str, str] | None = None,
              domains: Mapping[str, str] | None = None) -> Plan:
    """The plan for ``nodes`` (those to sweep, in order; duplicates are an error);
    ``domains`` (node -> NVLink domain) plans the multi-node cases per domain."""
    nodes = tuple(nodes)
    seen: set[str] = set()
    for node in nodes:
        if node in seen:
            raise PlanError(f"node {node} is listed twice")
        seen.add(node)
    cases = tuple(cases)
    plan = Plan(nodes=nodes, cases=cases, unreachable=dict(unreachable or {}))
    by_size: dict[int, list[Case]] = {}
    for case in cases:
        by_size.setdefault(case.nodes, []).append(case)
    if domains:
        plan.domains = by_domain(nodes, domains)
    for size in sorted(by_size):
        sized = tuple(by_size[size])
        if size > 1 and plan.domains:
            _plan_per_domain(plan, size, sized)
            continue
        if len(nodes) < size:
            for case in sized:
                plan.not_run[case.name] = (f"needs {size} nodes; {len(nodes)} swept "
                                           "(the others are unreachable or not listed)")
            continue
        if size == 1:
            plan.waves.append(Wave(SINGLE, 1, tuple((n,) for n in nodes), sized))
        elif size == 2:
            plan.pairs = tuple(ring_pairs(nodes))
            plan.waves += [Wave(PAIRS, 2, wave, sized) for wave in pair_waves(plan.pairs)]
        else:
            full, extra, rest = node_groups(nodes, size)
            plan.groups[size] = tuple(full + extra)
            plan.leftover[size] = rest
            plan.waves += [Wave(GROUPS, size, tuple(w), sized) for w in (full, extra) if w]
    return plan


def _plan_per_domain(plan: Plan, size: int, sized: tuple[Case, ...]) -> None:
    """The cases of ``size`` >= 2 nodes within each NVLink domain of the plan."""
    pair_waves_of, group_waves_of, rings, groups, rest = [], [], [], [], []
    for domain, members in plan.domains.items():
        if len(members) < size:
            for case in sized:
                plan.not_run[f"{case.name} in {domain}"] = (
                    f"needs {size} nodes of one NVLink domain; {len(members)} swept in "
                    f"{domain}")
            continue
        if size == 2:
            ring = ring_pairs(members)
            rings += ring
            pair_waves_of.append(pair_waves(ring))
        else:
            full, extra, left = node_groups(members, size)
            groups += full + extra
            rest += left
            group_waves_of.append([tuple(w) for w in (full, extra) if w])
    if size == 2:
        plan.pairs = tuple(rings)
        plan.waves += [Wave(PAIRS, 2, wave, sized) for wave in _merged(pair_waves_of)]
    elif groups:
        plan.groups[size] = tuple(groups)
        plan.leftover[size] = tuple(rest)
        plan.waves += [Wave(GROUPS, size, wave, sized) for wave in _merged(group_waves_of)]


def neighbours(pairs: Iterable[Group]) -> dict[str, set[str]]:
    """Each node's partners in the ring."""
    found: dict[str, set[str]] = {}
    for a, b in pairs:
        found.setdefault(a, set()).add(b)
        found.setdefault(b, set()).add(a)
    return found


def retest_pairs(alone: Sequence[Group], ring: Sequence[Group],
                 suspects: Iterable[str] = (),
                 domain_of: Mapping[str, str] | None = None) -> tuple[list[Group], list[str]]:
    """A third partner for each node of each pair that failed alone: a node that is
    neither its ring partner nor under suspicion (in a pair that did not pass), and
    of the same NVLink domain where the plan is per domain (``domain_of``).
    Partners are spread over the cluster, each used as rarely as possible.  Returns
    the re-test pairs and the nodes no partner could be found for (small rings)."""
    domain_of = domain_of or {}
    near = neighbours(ring)
    doubtful = set(suspects) | {n for pair in alone for n in pair}
    clear = [n for n in near if n not in doubtful]
    used = dict.fromkeys(clear, 0)
    pairs, stuck = [], []
    for pair in alone:
        for node in pair:
            choices = [n for n in clear if n not in near.get(node, ()) and n != node
                       and domain_of.get(n) == domain_of.get(node)]
            if not choices:
                stuck.append(node)
                continue
            partner = min(choices, key=lambda n: used[n])   # first of the least used
            used[partner] += 1
            pairs.append((node, partner))
    return pairs, stuck


def waves_of(groups: Sequence[Group]) -> list[tuple[Group, ...]]:
    """Groups in waves with no node twice in a wave (first fit, in order)."""
    waves: list[list[Group]] = []
    busy: list[set[str]] = []
    for group in groups:
        for index, nodes in enumerate(busy):
            if not nodes.intersection(group):
                waves[index].append(group)
                nodes.update(group)
                break
        else:
            waves.append([group])
            busy.append(set(group))
    return [tuple(w) for w in waves]


def retest_waves(pairs: Sequence[Group], case: Case) -> list[Wave]:
    return [Wave(RETEST, 2, wave, (case,)) for wave in waves_of(pairs)]


def describe(plan: Plan) -> str:
    """The plan as ``--dry-run`` prints it."""
    lines = [f"{len(plan.nodes)} node(s) to sweep, {len(plan.unreachable)} unreachable, "
             f"{len(plan.cases)} check case(s), {plan.jobs} job(s) in {len(plan.waves)} "
             "wave(s)"]
    for node, why in plan.unreachable.items():
        lines.append(f"unreachable {node}: {why}")
    for name, why in plan.not_run.items():
        lines.append(f"not run {name}: {why}")
    if plan.domains:
        lines.append(f"NVLink domains ({len(plan.domains)}; multi-node cases within each): "
                     + "; ".join(f"{d}: {' '.join(m)}" for d, m in plan.domains.items()))
    if plan.pairs:
        lines.append(f"pairs ({len(plan.pairs)}, ring): "
                     + " ".join(NODE_SEPARATOR.join(p) for p in plan.pairs))
    for size, groups in plan.groups.items():
        rest = plan.leftover.get(size) or ()
        lines.append(f"groups of {size} ({len(groups)}"
                     + (f"; leftover {' '.join(rest)} topped up" if rest else "") + "): "
                     + " ".join(NODE_SEPARATOR.join(g) for g in groups))
    for number, wave in enumerate(plan.waves, 1):
        lines.append(f"wave {number} ({wave.kind}, {len(wave.groups)} group(s) of "
                     f"{wave.size} x {len(wave.cases)} check case(s) = {wave.jobs} "
                     f"job(s)): {', '.join(c.name for c in wave.cases)}")
    return "\n".join(lines)
