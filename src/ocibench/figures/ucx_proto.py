"""UCX's protocol tables (``UCX_PROTO_INFO=y``): which protocol and transports a run's
messages took.

With ``UCX_PROTO_INFO=y`` every process prints, the first time it selects protocols
for an operation, one table per (endpoint configuration, operation, memory type):
one row per message-size range with the protocol and the lanes it uses.  The GPU
checks run with it, so a missed figure can say what the run did instead of what the
figure needs (``ocibench.figures.judge.Row.cause``).

The format, as openucx/ucx writes it (src/ucp/proto/proto_debug.c,
``ucp_proto_select_elem_info``; each line through ``ucs_log_print_compact`` of
src/ucs/debug/log.c, so prefixed ``[<sec>.<usec>] [<host>:<pid>:<thread>]``)::

    +--------------------------+----------------------------------------------------+
    | intra-node cfg#1         | tagged message by ucp_tag_send* from cuda/GPU0     |
    +--------------------------+--------------------------------+-------------------+
    |                   0..8184 | eager copy-in copy-out        | sysv/memory       |
    |                8185..inf | (?) rendezvous zero-copy ...  | cuda_ipc/cuda     |
    +--------------------------+--------------------------------+-------------------+

UCX 1.13 to 1.21 print the endpoint and the selection in one row of two cells (1.13
names the endpoint ``0x... ep_cfg[N]``; 1.16 on ``intra-node cfg#N``, ``inter-node``
or ``self``).  UCX 1.22 (src/ucs/debug/table.c) prints them as two one-cell rows and
adds a ``Range | Description | Config`` header row; both are read.  A range is
``ucs_memunits_range_str``: ``LOW..HIGH`` or one value, with K/M/G/T suffixes for
multiples of 1024 and ``inf`` for the largest.  A "(?)" before a protocol marks an
estimated (not measured) performance; the selection is the same.

Lines of two processes interleave line by line in an mpirun output, and the tables
interleave with the benchmark's own lines (OMB's header, then a table, then its row):
tables are assembled per process (host and pid), and every other line is left to the
benchmark's parser, which ignores these (``ocibench.figures.outputs``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ocibench import accelerators, capabilities
from ocibench.capabilities import CAPABILITIES

#: ``[1795367862.612545] [vm:17630:0]   <text>``: UCS_LOG_COMPACT_FMT.
_LINE = re.compile(r"^\s*\[\d+\.\d+\]\s+\[([^:\]\s]+):(\d+):[^\]]*\]\s?(.*)$")
_SEPARATOR = re.compile(r"^(?:[+|][-+ ]*)\+$")
#: ucs_memunits_to_str: a number with an optional 1024-power suffix, or "inf".
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}
_AMOUNT = r"(?:\d+[KMGTPE]?|inf)"
_RANGE = re.compile(rf"^({_AMOUNT})(?:\.\.({_AMOUNT}))?$")
#: The memory a selection's buffer is in: "from host memory", "into cuda/GPU0",
#: "from cuda-managed memory" (ucp_proto_debug_mem_info_str).
_MEMORY = re.compile(r"\b(?:from|into|of)\s+(?:(?:contig|iov|generic|struct)(?:\[\d+\])?\s+)?"
                     r"([a-z][\w-]*)(?:\s+memory\b|/)")
_HEADER_CELLS = {"Count", "Range", "Description", "Config"}

#: The transports of UCX that show, when a row's lanes name them, that a node has a
#: capability (ocibench.capabilities): the names ``ucx_info -d`` lists, as preflight
#: reads them (capabilities.UCX_TRANSPORT_FOR), plus each vendor's IPC transport for its
#: links between the GPUs of a node (accelerators: ``device_link`` -> ``ucx_ipc_transport``,
#: cuda_ipc for NVLink) and the RDMA transports (src/uct/ib:
#: rc_verbs, rc_mlx5, dc_mlx5, ud_verbs, ud_mlx5), which GPUDirect RDMA
#: (nvidia_peermem) needs for GPU memory.
_RDMA = ("rc_", "dc_", "ud_")
TRANSPORTS: dict[str, tuple[str, ...]] = {
    **{name: (tl,) for name, tl in capabilities.UCX_TRANSPORT_FOR.items()
       if name in CAPABILITIES and name != "rdma"},
    **{a.device_link: (a.ucx_ipc_transport,) for a in accelerators.VENDORS.values()
       if a.device_link in CAPABILITIES},
    "rdma": _RDMA,
    "nvidia_peermem": _RDMA,
}


def transport_of(capability: str) -> str | None:
    """The transport name a reader looks for: gdr_copy for gdrdrv, rc_* for rdma."""
    names = TRANSPORTS.get(capability)
    if not names:
        return None
    return " or ".join(n + "*" if n.endswith("_") else n for n in names)


def _is(transport: str, capability: str) -> bool:
    return any(transport == n or (n.endswith("_") and transport.startswith(n))
               for n in TRANSPORTS.get(capability, ()))


def _amount(text: str) -> int | None:
    """'8184' -> 8184, '32K' -> 32768, 'inf' -> None (no upper end)."""
    if text == "inf":
        return None
    return int(text.rstrip("KMGTPE")) * _UNITS[text.lstrip("0123456789")]


@dataclass(frozen=True)
class Route:
    """One row: messages of ``low``..``high`` bytes (None: no end) take ``protocol``
    over ``lanes`` ("sysv/memory", "cuda_ipc/cuda", "rc_mlx5/mlx5_0:1")."""

    low: int
    high: int | None
    protocol: str
    lanes: tuple[str, ...]
    estimated: bool = False

    def covers(self, size: int) -> bool:
        return self.low <= size and (self.high is None or size <= self.high)

    @property
    def transports(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lane.split("/")[0] for lane in self.lanes))

    def text(self) -> str:
        over = " and ".join(self.lanes) or "no lane"
        return f"{self.protocol} over {over}"


@dataclass(frozen=True)
class Table:
    """One protocol table of one process."""

    process: str         # "<host>:<pid>"
    endpoint: str        # "intra-node cfg#1", "self cfg#0", "0x55b1... ep_cfg[1]"
    selection: str       # "tagged message by ucp_tag_send* from cuda/GPU0"
    routes: tuple[Route, ...]

    @property
    def memory(self) -> str | None:
        """The memory type of the selection's buffer: host, cuda, cuda-managed..."""
        found = _MEMORY.search(self.selection)
        return found.group(1) if found else None

    @property
    def is_send(self) -> bool:
        """A tagged send (MPI's point-to-point messages through pml ucx)."""
        return self.selection.startswith(("tagged message", "synchronous tagged message"))

    @property
    def locality(self) -> str | None:
        """self, intra-node or inter-node; None where UCX does not say (1.13-1.15
        print ``ep_cfg[N]``), except for an endpoint with a ``self`` lane."""
        for word in ("self", "intra-node", "inter-node"):
            if re.search(rf"(?:^|\s){word}(?:\s|$)", self.endpoint):
                return word
        # UCX's self transport reaches only the process itself: no other endpoint has it.
        if any("self" in route.transports for route in self.routes):
            return "self"
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Table:
        routes = tuple(Route(int(r["low"]), None if r["high"] is None else int(r["high"]),
                             str(r["protocol"]), tuple(str(x) for x in r["lanes"]),
                             bool(r.get("estimated"))) for r in data["routes"])
        return cls(str(data["process"]), str(data["endpoint"]), str(data["selection"]),
                   routes)


def parse(text: str) -> list[Table]:
    """Every protocol table in ``text``, in the order each process printed them."""
    lines: dict[str, list[str]] = {}
    for raw in text.splitlines():
        found = _LINE.match(raw)
        if found:
            lines.setdefault(f"{found.group(1)}:{found.group(2)}", []).append(
                found.group(3).strip())
    return [table for process, body in lines.items() for table in _tables(process, body)]


def _cells(line: str) -> list[str] | None:
    if not (line.startswith("|") and line.endswith("|")) or _SEPARATOR.match(line):
        return None
    return [cell.strip() for cell in line[1:-1].split("|")]


def _tables(process: str, lines: list[str]) -> Iterable[Table]:
    title: list[str] = []
    routes: list[Route] = []
    for line in lines:
        if _SEPARATOR.match(line):
            if routes:                  # the bottom frame: the table is complete
                yield _table(process, title, routes)
                title, routes = [], []
            continue
        cells = _cells(line)
        if cells is None:
            title, routes = [], []      # not a table line: whatever was open is broken
            continue
        route = _route(cells)
        if route is not None:
            routes.append(route)
        elif set(cells) <= _HEADER_CELLS:
            continue                    # UCX 1.22's column headers
        elif routes:                    # a new title without a bottom frame
            title, routes = list(cells), []
        else:
            title += cells
    if routes:
        yield _table(process, title, routes)


def _table(process: str, title: list[str], routes: list[Route]) -> Table:
    endpoint, selection = (title + ["", ""])[:2] if len(title) != 1 else ("", title[0])
    return Table(process, endpoint, selection, tuple(routes))


def _route(cells: list[str]) -> Route | None:
    """A body row: [range, protocol, config], or [count, range, protocol, config]."""
    if len(cells) == 4 and cells[0].isdigit():
        cells = cells[1:]
    if len(cells) != 3:
        return None
    found = _RANGE.match(cells[0])
    if not found:
        return None
    low = _amount(found.group(1))
    high = _amount(found.group(2)) if found.group(2) else low
    protocol = cells[1]
    estimated = protocol.startswith("(?) ")
    lanes = tuple(re.findall(r"[a-z][\w]*/[\w:.\-]+", cells[2]))
    return Route(low or 0, high, protocol[4:] if estimated else protocol, lanes, estimated)


# --- what a run's messages took -------------------------------------------------------

#: OMB's buffer letters -> UCX's memory type names (ucs_memory_type_names): a device
#: buffer is any vendor's (accelerators: ``ucx_memory``); a run's tables name one.
MEMORY = {"H": ("host",), "D": tuple(a.ucx_memory for a in accelerators.VENDORS.values())}


def size_words(size: int) -> str:
    """1 -> '1-byte', 268435456 -> '256 MiB'."""
    for factor, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {suffix}"
    return f"{size}-byte"


@dataclass(frozen=True)
class Taken:
    """What the messages of one size and memory type took, in one run.  ``role``: the
    tagged send that carries the message ("tagged send"), or, for a rendezvous, the
    phase that moves its data: "data send" on the sender, "data fetch" on the receiver
    (UCX 1.16+ print those tables; the tagged send's lane then carries only the
    rendezvous' control, not the bytes)."""

    memory: str
    route: Route
    role: str = "tagged send"


def taken(tables: Iterable[Table], size: int, memories: Iterable[str],
          nodes: int | None = None) -> list[Taken]:
    """The distinct routes of the tagged sends of ``size`` bytes from ``memories``
    (host, cuda) between two processes: not a process's own (self) endpoint, and
    across nodes (inter-node) or within one (intra-node) when UCX says which."""
    want = "inter-node" if nodes and nodes > 1 else "intra-node" if nodes == 1 else None
    wanted = list(dict.fromkeys(memories))
    found: dict[tuple[str, str, tuple[str, ...]], Route] = {}
    for table in tables:
        if not table.is_send or table.memory not in wanted or table.locality == "self":
            continue
        if want and table.locality not in (None, want):
            continue
        for route in table.routes:
            if route.covers(size):   # each process prints its own: one of each
                found.setdefault((table.memory, route.protocol, route.lanes), route)
    order = {m: i for i, m in enumerate(wanted)}
    sends = [Taken(key[0], route) for key, route in
             sorted(found.items(), key=lambda item: order[item[0][0]])]
    if not any("rendezvous" in t.route.protocol for t in sends):
        return sends
    # A rendezvous moves its bytes in a data phase with tables of its own: 256 MiB H-D
    # goes over cuda_ipc there, though the tagged send's row names cma (2 x H200).
    data: dict[tuple[str, str, str, tuple[str, ...]], Taken] = {}
    for table in tables:
        role = _DATA_ROLE.match(table.selection)
        if not role or table.memory not in wanted or table.locality == "self":
            continue
        if want and table.locality not in (None, want):
            continue
        for route in table.routes:
            if route.covers(size):
                key = (f"data {role.group(1)}", table.memory, route.protocol, route.lanes)
                data.setdefault(key, Taken(table.memory, route, key[0]))
    # A data phase that its tagged send already says (host to host, UCX 1.13: the send's
    # "rendezvous fragmented copy-in copy-out" over sysv, then "fragmented copy-in
    # copy-out" over sysv both ways) adds nothing to what the messages took.
    phases = [t for t in data.values()
              if not any(t.route.lanes == send.route.lanes
                         and t.route.protocol in send.route.protocol for send in sends)]
    return sends + sorted(phases, key=lambda t: (t.role != "data send", order[t.memory]))


#: "rendezvous data send(multi) from host memory to cuda/dev[1]", "rendezvous data
#: fetch(multi) into cuda/GPU1 from host" (UCX 1.16+, src/ucp/proto/proto_debug.c).
_DATA_ROLE = re.compile(r"rendezvous data (send|fetch)\b")


def named_transports(tables: Iterable[Table]) -> set[str]:
    """Every transport any row of any table names."""
    return {tl for table in tables for route in table.routes for tl in route.transports}


def describe(size: int, routes: list[Taken]) -> str:
    """"1-byte messages from cuda memory went eager copy-in copy-out over sysv/memory";
    a rendezvous' data phase after it ("their data: sent from host memory by pipeline
    cuda_copy, ... over cuda_ipc/cuda")."""
    parts = [f"from {t.memory} memory went {t.route.text()}" for t in routes
             if t.role == "tagged send"]
    phases = [f"{'sent from' if t.role == 'data send' else 'fetched into'} {t.memory} "
              f"memory by {t.route.text()}" for t in routes if t.role != "tagged send"]
    text = f"{size_words(size)} messages " + "; ".join(parts)
    return text + (f"; their data: {'; '.join(phases)}" if phases else "")


#: Capabilities whose lane the tables need not print where it serves: gdr_copy copies GPU
#: memory to a host bounce buffer inside UCX's memory-type endpoint (src/ucp/dt/dt.c,
#: ucp_mem_type_pack), whose lanes no table lists.  Tables that name no such lane at all
#: say nothing against a preflight that found the capability present.
UNPRINTED = ("gdrdrv",)


def names(capability: str, tables: Iterable[Table]) -> bool:
    """Whether any row of ``tables`` names ``capability``'s transport."""
    return any(_is(tl, capability) for tl in named_transports(list(tables)))


def lacks(capability: str, routes: list[Taken], tables: list[Table]) -> str | None:
    """What the tables show of a required capability: None when a route of these
    messages used its transport (or nothing is known of it); else the line that says
    the tables name none ("UCX's tables name no gdr_copy lane")."""
    if not routes or capability not in TRANSPORTS:
        return None
    if any(_is(tl, capability) for t in routes for tl in t.route.transports):
        return None
    if any(_is(tl, capability) for tl in named_transports(tables)):
        return f"these messages took no {transport_of(capability)} lane"
    return f"UCX's tables name no {transport_of(capability)} lane"
