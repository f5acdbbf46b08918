"""What the sweep asks of Slurm and tells it: hostlists, node states, drain, resume.

Every call is a Slurm command (``scontrol``, ``sinfo``) with a timeout; a command that
fails is a :class:`SlurmError` with one line naming the command and Slurm's message.
Hostlists are expanded and folded by ClusterShell's NodeSet, which needs no Slurm
controller (``--dry-run`` on a host that cannot reach one).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from ocibench import hostnames

#: Seconds a sweep's job may pend before its nodes count as unreachable: the groups
#: of a wave are disjoint and idle, so a job starts at once on nodes that work.
START_TIMEOUT_S = 300

#: Seconds a Slurm client command may take.
TIMEOUT_S = 30

#: A character that is neither in a host name nor in a hostlist's ranges.
_NOT_HOSTLIST = re.compile(r"[^A-Za-z0-9._,\[\]-]")
#: The most nodes a hostlist may name: far above any Slurm cluster, and a bound on the
#: memory and time a typo such as ``node[0-99999999]`` (10^8 names) would take.
MAX_NODES = 100_000
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")

#: ``sinfo %t`` states in which a node takes a new job at once.  A suffix marks a
#: node that is not responding (*), powering (~ # !), rebooting (@), ...: not idle.
SWEEPABLE = ("idle",)
#: ``sinfo %t`` of a drained node (drng: draining, still running jobs).
DRAINED = ("drain",)
#: ``sinfo %t`` of a node that takes no new job because it is drained: drained and idle
#: (or down), or draining (still running a job); its suffix (``*``: not responding, ...)
#: taken off first (:data:`STATE_SUFFIXES`).
HELD_DRAINED = ("drain", "drng")
#: What ``sinfo %t`` appends to a state: not responding (*), powering (~ # ! %),
#: rebooting (@), ... (sinfo(1), NODE STATE CODES).
STATE_SUFFIXES = "*~#!%@^-$"
#: ``sinfo %H``, the time a node's reason was set, with SLURM_TIME_FORMAT=standard.
_REASON_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


class SlurmError(RuntimeError):
    """A Slurm command failed; one line."""


class SlurmTimeout(SlurmError):
    """A Slurm command gave no answer within its time and was killed: what it asked
    may or may not have been done."""


class UsageError(ValueError):
    """A bad hostlist, partition or node; one line."""


def _call(argv: list[str], timeout: float = TIMEOUT_S,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        # A session of its own: a Ctrl-C at the terminal reaches the sweep (which
        # finishes the Slurm action under way: ocibench.sweep.signals), never a
        # scontrol half-way through a drain or a resume.
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              check=False, start_new_session=True, env=env)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: ocibench sweep runs where Slurm's "
                         "client commands are (a login or head node)") from None
    except subprocess.TimeoutExpired:
        raise SlurmTimeout(f"{' '.join(argv)}: Slurm did not answer within {timeout:.3g} s "
                         "(killed)") from None


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _run(argv: list[str], timeout: float = TIMEOUT_S,
         env: dict[str, str] | None = None) -> str:
    done = _call(argv, timeout, env)
    if done.returncode != 0:
        why = _last_line(done.stderr) or f"exit status {done.returncode}"
        raise SlurmError(f"{' '.join(argv)}: {why}")
    return done.stdout


def _parts(text: str) -> list[str]:
    """A hostlist's comma-separated parts, commas inside brackets kept (``a[1,3],b``)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    return parts + [text[start:]]


def _size(part: str) -> int:
    """About how many names one part of a hostlist makes (the product of its bracket
    sets' sizes), counted without expanding it."""
    size = 1
    for inner in _BRACKETS.findall(part):
        count = 0
        for item in inner.split(","):
            low, _, high = item.partition("-")
            count += int(high) - int(low) + 1 if low.isdigit() and high.isdigit() else 1
        size *= max(count, 1)
    return size


def expand_hostlist(text: str) -> list[str]:
    """``node[1-3],gpu7`` expanded, in the order given, each name once.

    ClusterShell's NodeSet reads Slurm's hostlist syntax (ranges, zero padding, several
    bracket sets) without a Slurm controller; ``scontrol show hostnames`` needs one and
    fails on a login node that cannot reach it.  NodeSet's own operators (``!&^``),
    groups (``@name``) and any other character no host name has are refused first:
    they are no Slurm hostlist."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

    if not text or not text.strip():
        raise UsageError("--nodes: empty hostlist")
    odd = _NOT_HOSTLIST.search(text)
    if odd:
        raise UsageError(f"--nodes {text!r}: bad hostlist: {odd.group()!r} is no part of a "
                         "Slurm hostlist; write it as node[1-8],gpu-[001-120]")
    names: dict[str, None] = {}
    for part in _parts(text):
        if _size(part) + len(names) > MAX_NODES:   # before NodeSet builds the ranges
            raise UsageError(f"--nodes {text!r}: more than {MAX_NODES} nodes")
        try:
            nodeset = NodeSet(part, resolver=RESOLVER_NOGROUP)
        except NodeSetException as err:
            raise UsageError(f"--nodes {text!r}: bad hostlist: {err}") from None
        names.update(dict.fromkeys(nodeset))
    bad = next((n for n in names if not hostnames.is_host(n)), None)
    if bad is not None or not names:
        raise UsageError(f"--nodes {text!r}: bad hostlist (it expands to {bad!r}); "
                         "write it as node[1-8],gpu-[001-120]")
    return list(names)


def fold(nodes: list[str]) -> str:
    """Nodes as one Slurm hostlist (``node[1-4,7]``), as Slurm's own commands print them."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    return str(NodeSet.fromlist(nodes, resolver=RESOLVER_NOGROUP))


def partitions() -> tuple[list[str], str | None]:
    """Slurm's partitions and the default one (marked '*' by sinfo)."""
    names, default = [], None
    for line in _run(["sinfo", "-h", "-o", "%P"]).split():
        if line.endswith("*"):
            line = default = line[:-1]
        names.append(line)
    return names, default


@dataclass(frozen=True)
class NodeState:
    state: str      # sinfo %t: idle, alloc, mix, drain, down*, ...
    reason: str     # sinfo %E; "" when none

    @property
    def sweepable(self) -> bool:
        return self.state in SWEEPABLE

    @property
    def drained(self) -> bool:
        """Drained, for any reason: whether this tool drained it is the record's to
        say (ocibench.sweep.state), not the reason's prefix."""
        return self.state in DRAINED

    def why_not(self) -> str:
        """Slurm's word on a node that will not take the sweep's job at once."""
        what = {"alloc": "running other jobs", "mix": "running other jobs",
                "comp": "completing a job"}.get(self.state.rstrip("*~#!%@^-"), "")
        text = f"Slurm state {self.state}"
        if self.state.endswith("*"):
            text += " (not responding)"
        if what:
            text += f" ({what})"
        return f"{text}: {self.reason}" if self.reason else text


def node_states(partition: str | None) -> dict[str, NodeState]:
    """Every node of the partition (or of the cluster) with its state and reason."""
    argv = ["sinfo", "-N", "-h", "-o", "%N|%t|%E"] + (["-p", partition] if partition else [])
    return parse_sinfo(_run(argv))


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """``sinfo -N -h -o '%N|%t|%E'``: a node per line (once per partition it is in)."""
    found: dict[str, NodeState] = {}
    for line in text.splitlines():
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        reason = "" if reason.strip() == "none" else reason.strip()
        if name.strip():
            found[name.strip()] = NodeState(state.strip(), reason)
    return found


def node_state(node: str, timeout: float = TIMEOUT_S) -> NodeState | None:
    """One node's state and reason; None when Slurm does not know the node."""
    return parse_sinfo(_run(["sinfo", "-N", "-h", "-n", node, "-o", "%N|%t|%E"],
                            timeout)).get(node)


@dataclass(frozen=True)
class ListedNode:
    """One node as Slurm lists it for the drain budget (ocibench.cluster.budget)."""

    name: str
    partitions: tuple[str, ...]   # every partition it is in (hidden ones too)
    state: str                    # sinfo %t: idle, drain, drng, drain*, ...
    reason: str                   # sinfo %E; "" when none
    #: sinfo %H: when the reason was set, as slurmctld's clock read it, to the second
    #: ("2026-05-20T12:38:41", which sorts as it reads); "" when Slurm gives none
    reason_time: str

    @property
    def held_drained(self) -> bool:
        """Drained or draining, for any reason: it takes no new job."""
        return self.state.rstrip(STATE_SUFFIXES) in HELD_DRAINED


def listing(timeout: float = TIMEOUT_S) -> dict[str, ListedNode]:
    """Every node of every partition, hidden ones included, with its state, reason and
    the reason's time: one ``sinfo`` call, read by the drain budget."""
    # the reason's time as sinfo's "standard" form, whatever the caller's environment
    # asks (SLURM_TIME_FORMAT=relative would print "Tomorrow 10:00")
    env = {**os.environ, "SLURM_TIME_FORMAT": "standard"}
    return parse_listing(_run(["sinfo", "--all", "-N", "-h", "-o", "%N|%R|%t|%H|%E"],
                              timeout, env))


def parse_listing(text: str) -> dict[str, ListedNode]:
    """``sinfo --all -N -h -o '%N|%R|%t|%H|%E'``: a line per node and partition (the
    reason last: it may hold a '|')."""
    found: dict[str, ListedNode] = {}
    for line in text.splitlines():
        fields = line.split("|", 4)
        if len(fields) < 5 or not fields[0].strip():
            continue
        name, partition, state, when, reason = (f.strip() for f in fields)
        before = found.get(name)
        partitions = (before.partitions if before else ()) + (partition,)
        found[name] = ListedNode(
            name, tuple(dict.fromkeys(partitions)), state,
            "" if reason == "none" else reason,
            when if _REASON_TIME.fullmatch(when) else "")
    return found


def drain(node: str, reason: str, timeout: float = TIMEOUT_S) -> None:
    _run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
         timeout)


def resume(node: str, timeout: float = TIMEOUT_S) -> None:
    _run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], timeout)


def create_reservation(name: str, nodes: list[str], user: str) -> None:
    """Keep ``nodes`` for ``user``'s jobs only while the sweep resumes and re-tests
    the nodes it drained (IGNORE_JOBS: nodes that still finish a job are taken too)."""
    _run(["scontrol", "create", "reservation", f"ReservationName={name}",
          f"Nodes={fold(nodes)}", "StartTime=now", "Duration=UNLIMITED",
          f"Users={user}", "Flags=IGNORE_JOBS"])


def delete_reservation(name: str) -> None:
    _run(["scontrol", "delete", f"ReservationName={name}"])


def parse_topology_blocks(text: str) -> dict[str, str]:
    """Node -> block of ``scontrol show topology`` under Slurm's topology/block plugin
    (a record per block: ``BlockName=rack1 BlockIndex=0 Nodes=gb[01-18] BlockSize=18``).
    Other topologies (topology/tree: ``SwitchName=...``) have no blocks: {}."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "BlockName" in fields and fields.get("Nodes"):
            for node in expand_hostlist(fields["Nodes"]):
                found.setdefault(node, fields["BlockName"])
    return found


def nvlink_domains(timeout: float = TIMEOUT_S) -> tuple[dict[str, str], str]:
    """Node -> NVLink domain, as Slurm's topology/block describes the racks (a block per
    NVL72 rack, the hosts OCI's image gives one IMEX domain); or {} and why not."""
    try:
        text = _run(["scontrol", "show", "topology"], timeout)
    except SlurmError as err:
        return {}, str(err)
    found = parse_topology_blocks(text)
    return found, "" if found else "Slurm's topology has no blocks (no topology/block)"
