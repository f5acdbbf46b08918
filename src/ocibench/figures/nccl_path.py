"""The path NCCL's traffic took, read from its own log (``NCCL_DEBUG=INFO``).

A bandwidth alone cannot say how it was carried: two GPUs of one host that lost peer
access still finish an all-reduce, over shared memory at a tenth of NVLink or over a TCP
socket at about 1 % of it, and a 2-node run without GPUDirect RDMA stages every message
through host memory.  NCCL says which transport each channel uses when it connects; this
module reads those lines so that a verdict names the path (NVIDIA's AI Cluster Runtime:
"a silent fallback to NET should not masquerade as a pass").

What NCCL prints, and since when (NVIDIA/nccl, src/transport.cc and
src/transport/*.cc; the formats seen on 2.4 to 2.28):

* ``Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM`` (2.19+; older ``P2P/IPC``,
  ``P2P/direct pointer``, ``P2P/CUMEM/read``), ``Channel 00 : 1[1] -> 0[0] via
  SHM/direct/direct``, ``Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0``,
  ``... via NET/IB/0/GDRDMA`` (``/GDRDMA`` only when the NIC reads GPU memory
  directly), and before 2.5 ``Ring 00 : ...``.  Ranks are NCCL ranks, the bracket the
  CUDA device (or, around 2.7, its bus id).
* ``comm 0x... rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0`` (2.12+) with the
  log prefix ``host:pid:tid [dev]``, which say which host each rank is on.
* ``Using network Socket`` / ``Using network IB``; ``NCCL_P2P_DISABLE set by
  environment to 1`` -- the usual cause of a fallback, quoted as it is.

* Multi-node NVLink (2.20+; GB200 NVL72, where 18 hosts share one NVLink domain):
  ``MNNVL busId 0x801000 fabric UUID a441...d758.7d6b...e7b3 cliqueId 0x2786 state 3
  healthMask 0xaa`` for each GPU (the fabric its host's GPUs are in: NVML's cluster UUID
  and clique, state 3 = registration completed; printed whatever NCCL_MNNVL_ENABLE says),
  ``MNNVL 1 cliqueId 2786 cliqueSize 4 cliqueRank 0`` and ``comm ... MNNVL 1`` (whether
  NCCL uses it), ``Channel 00/0 : 3[3] -> 4[0] via P2P/MNNVL`` between hosts of one
  clique, ``NVLS multicast support is available on dev 0``, and the warning ``MNNVL
  (cliqueSize 8) is available but not working on this system. Check the IMEX
  configuration`` (src/init.cc, src/mnnvl.cc, src/transport/p2p.cc).

NCCL prints all of these at its default ``NCCL_DEBUG_SUBSYS`` (INIT and ENV), a few
hundred lines per run; the checks set ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV``
(:data:`DEBUG_ENV`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ocibench.figures import outputs
from ocibench.shapes import rules as shape_rules

#: What the checks export so that the log shows the path and stays small.
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}

#: The log prefix NCCL writes before INFO (host:pid:tid [cuda device]), once the
#: launchers' own prefixes are gone (outputs.without_launcher_prefixes).
_PREFIX = re.compile(r"\s*([^\s:]+):\d+:\d+ \[\d+\] NCCL INFO ")
#: The transport is the rest of the line: a net plugin's name may hold a blank (NET's
#: "via NET/%s/%d%s%s%s" prints comm->ncclNet->name: aws-ofi-nccl's "AWS Libfabric"), and
#: so does "P2P/direct pointer".  RCCL appends " comm 0x... nRanks N" (its channel
#: lines on Frontier), which is not part of the transport.
_CHANNEL = re.compile(
    r"NCCL INFO (?:Channel|Ring) (\d+)(?:/\d+)? ?: (\d+)\[[0-9a-fx]+\] -> (\d+)\[[0-9a-fx]+\]"
    r"(?: \[(?:send|receive)\])? via (\S(?:[^\n]*?\S)?)"
    r"(?: comm 0x[0-9a-f]+ nRanks \d+)?[ \t\r]*$")
#: 2.12+: "comm 0x.. rank 0 nRanks 2 nNodes 1 ..."; before: "comm 0x.. rank 0 nranks 2
#: cudaDev 0 busId 1a000 - Init COMPLETE" (no node count, the host from the prefix).
_COMM = re.compile(r"NCCL INFO comm 0x[0-9a-f]+ rank (\d+) n[Rr]anks (\d+)(?: nNodes (\d+))?")
_NETWORK = re.compile(r"NCCL INFO Using network (\S.*?)\s*$")
#: NCCL's environment echo: "NCCL_P2P_DISABLE set by environment to 1".
_ENV = re.compile(r"NCCL INFO ((NCCL_\w+) set by environment to (\S+?))\.?\s*$")

#: "MNNVL busId 0x801000 fabric UUID <hi>.<lo> cliqueId 0x2786 state 3 healthMask 0xaa"
_FABRIC = re.compile(r"NCCL INFO MNNVL busId 0x[0-9a-f]+ fabric UUID ([0-9a-f]+\.[0-9a-f]+) "
                     r"cliqueId 0x([0-9a-f]+) state (\d+)")
#: "MNNVL 1 cliqueId 2786 cliqueSize 4 ..." and the comm line's " ... localRank 0 MNNVL 1"
_MNNVL = re.compile(r"NCCL INFO (?:MNNVL ([01]) cliqueId|comm 0x[0-9a-f]+ .* MNNVL ([01])\s*$)")
_NVLS = re.compile(r"NCCL INFO NVLS multicast support is (not )?available")
#: NCCL's warnings about multi-node NVLink and IMEX, quoted as the cause of a fallback.
_MNNVL_WARN = re.compile(r"NCCL WARN (.*(?:MNNVL|IMEX|imex).*?)\s*$")
#: NVML's fabric state "completed": the GPU is registered in its NVLink domain.
FABRIC_COMPLETED = 3
#: The settings that keep NCCL off multi-node NVLink (cuMem's fabric handles carry it).
_MNNVL_OFF = ("NCCL_MNNVL_ENABLE set by environment to 0",
              "NCCL_CUMEM_ENABLE set by environment to 0")

#: The variables whose setting explains a fallback, in the order they are named.
_CAUSES = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_P2P_LEVEL", "NCCL_IB_DISABLE",
           "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_NET", "NCCL_SOCKET_IFNAME")


@dataclass(frozen=True)
class Channel:
    channel: int
    source: int          # NCCL rank
    target: int
    transport: str       # "P2P/CUMEM", "SHM/direct/direct", "NET/IB/0/GDRDMA", ...

    @property
    def kind(self) -> str:
        """P2P, SHM, NET, NVLS or COLLNET."""
        head = self.transport.split("/", 1)[0].upper()
        return "COLLNET" if head.startswith("COLLNET") else head

    @property
    def gdrdma(self) -> bool:
        return "GDRDMA" in self.transport.upper()

    @property
    def mnnvl(self) -> bool:
        """Over multi-node NVLink (P2P/MNNVL): NVLink between hosts of one domain."""
        return self.kind == "P2P" and "MNNVL" in self.transport.upper()


@dataclass(frozen=True)
class Path:
    """What one output's NCCL log says of the path."""

    channels: tuple[Channel, ...] = ()
    hosts: Mapping[int, str] = field(default_factory=dict)   # NCCL rank -> host
    nodes: int | None = None          # NCCL's nNodes
    network: str | None = None        # "Socket", "IB", a plugin's name
    environment: tuple[str, ...] = ()  # "NCCL_P2P_DISABLE set by environment to 1", ...
    #: host -> the NVLink fabrics its GPUs report: (cluster UUID, clique ID, state)
    fabric: Mapping[str, frozenset[tuple[str, str, int]]] = field(default_factory=dict)
    mnnvl: bool | None = None          # NCCL's "MNNVL 1"/"MNNVL 0"; None: not said
    nvls: bool | None = None           # "NVLS multicast support is (not) available"
    warnings: tuple[str, ...] = ()     # NCCL's warnings about MNNVL and IMEX

    @property
    def known(self) -> bool:
        """Whether the output carries NCCL's connection lines at all."""
        return bool(self.channels)

    def local(self, channel: Channel) -> bool | None:
        """Whether a channel joins two GPUs of one host (None: not known).  The hosts
        decide where the log names them: NCCL's own nNodes counts 2 for two ranks of
        one host that it could join only over the network (seen with P2P and SHM both
        disabled on 2 x H200), the very case to catch."""
        source, target = self.hosts.get(channel.source), self.hosts.get(channel.target)
        if source is not None and target is not None:
            return source == target
        return True if self.nodes == 1 else None

    def transports(self, local: bool) -> dict[str, int]:
        """transport -> channel count, for the channels within a host (or between)."""
        counts: dict[str, int] = {}
        for channel in self.channels:
            if self.local(channel) is local:
                name = _short(channel.transport)
                counts[name] = counts.get(name, 0) + 1
        return counts

    def describe(self) -> str:
        """One line: "within a host P2P/CUMEM (48 channels); network Socket"."""
        if not self.known:
            return ("not shown: the output has no NCCL connection lines (run with "
                    "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV)")
        parts = []
        for local, where in ((True, "within a host"), (False, "between hosts")):
            counts = self.transports(local)
            if counts:
                parts.append(f"{where} " + ", ".join(
                    f"{name} ({n} channel{'s' * (n != 1)})" for name, n in counts.items()))
        if self.network:
            parts.append(f"network {self.network}")
        # only where the GPUs are in an NVLink fabric (NCCL's fabric lines) or NCCL used
        # it: every NCCL 2.2x log says "MNNVL 0" on an 8-GPU board too
        if self.mnnvl or (self.in_fabric and self.mnnvl is not None):
            parts.append(f"multi-node NVLink (MNNVL) {'on' if self.mnnvl else 'off'}")
        if self.in_fabric and self.nvls is not None:
            parts.append(f"NVLS multicast {'available' if self.nvls else 'not available'}")
        return "; ".join(parts)

    @property
    def in_fabric(self) -> bool:
        """Whether a GPU of the run registered in an NVLink fabric (a cluster UUID that
        is not zero: NCCL prints "fabric UUID 0.0" on boards without one, an H200 VM)."""
        return any(uuid.strip("0.") for found in self.fabric.values() for uuid, _c, _s in found)

    def domain(self, host: str) -> tuple[str, str] | None:
        """The NVLink domain the host's GPUs registered in: (cluster UUID, clique ID);
        None where the log does not say, the GPUs disagree, or registration did not
        complete (then NCCL cannot use multi-node NVLink from that host)."""
        found = self.fabric.get(host) or frozenset()
        if len(found) != 1:
            return None
        uuid, clique, state = next(iter(found))
        if state != FABRIC_COMPLETED or not uuid.strip("0."):
            return None
        return uuid, clique

    def mnnvl_causes(self) -> str:
        """What the log says kept NCCL off multi-node NVLink, quoted: a setting that
        turns it off, NCCL's warning about IMEX, or its own "MNNVL 0"."""
        named = [line for line in self.environment if line in _MNNVL_OFF]
        named += list(self.warnings)
        if not named and self.mnnvl is False:
            named.append("NCCL reports MNNVL 0")
        return f" ({'; '.join(named)})" if named else ""

    def causes(self) -> str:
        """The environment settings that explain a fallback, quoted from the log."""
        named = [line for name in _CAUSES for line in self.environment
                 if line.startswith(name + " ")]
        return f" ({'; '.join(named)})" if named else ""


def _short(transport: str) -> str:
    """NET/Socket/0 -> NET/Socket; NET/IB/0(1)/GDRDMA -> NET/IB/GDRDMA; P2P as is."""
    parts = transport.split("/")
    if parts[0].upper() == "NET":
        return "/".join(p for p in parts if not re.fullmatch(r"\d+(\(\d+\))?", p))
    return transport


def parse(text: str) -> Path:
    """The path in ``text`` (an output saved with 2>&1); an empty Path when it has no
    NCCL connection lines (NCCL_DEBUG unset, or not an NCCL run)."""
    channels: dict[tuple[int, int, int, str], Channel] = {}
    hosts: dict[int, str] = {}
    nodes = network = mnnvl = nvls = None
    environment: list[str] = []
    fabric: dict[str, set[tuple[str, str, int]]] = {}
    warnings: list[str] = []
    for line in outputs.without_launcher_prefixes(text).splitlines():
        if "NCCL INFO" not in line:
            found = _MNNVL_WARN.search(line)
            if found and found.group(1) not in warnings:
                warnings.append(found.group(1))
                continue
            # nccl-tests' device lines also say which host each rank is on
            found = outputs.NCCL_RANK.match(line.strip())
            if found:
                hosts.setdefault(int(found.group(1)), found.group(3))
            continue
        found = _CHANNEL.search(line)
        if found:
            channel = Channel(int(found.group(1)), int(found.group(2)), int(found.group(3)),
                              found.group(4))
            channels[(channel.channel, channel.source, channel.target,
                      channel.transport)] = channel
            continue
        found = _MNNVL.search(line)
        if found:
            # any "MNNVL 0" of the run wins: one communicator off the fabric is enough
            said = (found.group(1) or found.group(2)) == "1"
            mnnvl = said if mnnvl is None else (mnnvl and said)
        found = _COMM.search(line)
        if found:
            prefix = _PREFIX.match(line)
            if prefix:
                hosts[int(found.group(1))] = prefix.group(1)
            if found.group(3):
                nodes = int(found.group(3))
            continue
        found = _FABRIC.search(line)
        if found:
            prefix = _PREFIX.match(line)
            if prefix:
                fabric.setdefault(prefix.group(1), set()).add(
                    (found.group(1), found.group(2), int(found.group(3))))
            continue
        found = _NVLS.search(line)
        if found:
            nvls = bool(nvls) or not found.group(1)
            continue
        found = _NETWORK.search(line)
        if found:
            network = found.group(1)
            continue
        found = _ENV.search(line)
        if found and found.group(1) not in environment:
            environment.append(found.group(1))
    return Path(tuple(channels.values()), hosts, nodes, network, tuple(environment),
                {host: frozenset(found) for host, found in fabric.items()}, mnnvl, nvls,
                tuple(warnings))


#: The path verdicts :func:`fault` gives, by name (the action ladder's ``nccl:<name>``
#: entries, ocibench.ladder).
LOCAL_OVER_NET, LOCAL_OVER_SHM, HOSTS_WITHOUT_GDRDMA = (
    "local-over-net", "local-over-shm", "hosts-without-gdrdma")
#: A rack-scale NVLink domain's: NCCL could not set up multi-node NVLink (IMEX), or
#: joined hosts of one domain by anything but it.
MNNVL_NOT_SET_UP, DOMAIN_WITHOUT_MNNVL = "mnnvl-not-set-up", "domain-without-mnnvl"
FAULTS = (LOCAL_OVER_NET, LOCAL_OVER_SHM, HOSTS_WITHOUT_GDRDMA, MNNVL_NOT_SET_UP,
          DOMAIN_WITHOUT_MNNVL)


def fault(path: Path, shape_data: Mapping[str, Any], params: Mapping[str, Any]) -> str | None:
    """Why the path itself makes the run broken, whatever its number; None when it
    does not (or when the output does not show the path).  :func:`classify` names it."""
    found = classify(path, shape_data, params)
    return None if found is None else found[1]


def classify(path: Path, shape_data: Mapping[str, Any],
             params: Mapping[str, Any]) -> tuple[str, str] | None:
    """The path's fault as (one of :data:`FAULTS`, why), or None:

    * GPUs of one host that talked over NET (a socket, or the NIC's loopback) have lost
      peer access and shared memory alike: always a fault.
    * On a shape whose GPUs are NVLink-connected (its ``links.nvlink_gbs``, unless it
      declares ``capabilities.nvlink: 0``), a channel within the host over SHM is a
      fallback from NVLink to host memory.  Without NVLink (L40S, A10), P2P over PCIe
      and SHM are both healthy paths.
    * On a shape whose NVLink domain spans hosts (``gpus.nvlink_domain``: GB200 NVL72),
      P2P/MNNVL between hosts is the healthy path; two hosts whose GPUs registered in
      one domain (NCCL's fabric lines: the same cluster UUID) that talked over NET or
      anything else fail, naming the channel and, where the log shows it, the cause
      (NCCL_MNNVL_ENABLE=0, NCCL_CUMEM_ENABLE=0, NCCL's IMEX warning, different
      cliques); a log without channels whose NCCL warned that multi-node NVLink is not
      working (IMEX) fails with that warning.  Between domains the rule below applies.
    * Between hosts of a shape with an RDMA cluster network (``network.rdma``), a
      channel over a socket, or over the NIC without GPUDirect RDMA (no ``GDRDMA``,
      whichever net plugin NCCL used), is not the path OCI's figures were measured on."""
    spans_hosts = bool((shape_data.get("gpus") or {}).get("nvlink_domain")
                       and _nvlink_connected(shape_data))
    if not path.known:
        # NCCL stops at init when the domain's fabric is there and IMEX does not work
        # (its warning names the IMEX configuration): no channel, and the cause.
        if spans_hosts and path.warnings:
            return MNNVL_NOT_SET_UP, (
                f"NCCL could not set up multi-node NVLink: {path.warnings[0]}")
        return None
    links = shape_data.get("links") or {}
    local = [c for c in path.channels if path.local(c)]
    over_net = [c for c in local if c.kind == "NET"]
    if over_net:
        return LOCAL_OVER_NET, (
                f"NCCL connected GPUs of one host over {_short(over_net[0].transport)} "
                f"(channel {over_net[0].channel:02d}: rank {over_net[0].source} -> "
                f"{over_net[0].target}), not peer access or shared memory{path.causes()}")
    over_shm = [c for c in local if c.kind == "SHM"]
    if over_shm and _nvlink_connected(shape_data):
        return LOCAL_OVER_SHM, (
                f"NCCL connected GPUs of one host over {_short(over_shm[0].transport)} "
                f"(host memory), though this shape's GPUs are NVLink-connected "
                f"(links.nvlink_gbs {links['nvlink_gbs']} GB/s): P2P over NVLink expected"
                f"{path.causes()}")
    rdma = shape_rules.rdma_network(shape_data)
    between = [c for c in path.channels if path.local(c) is False]
    if spans_hosts:
        # A rack-scale NVLink domain (GB200 NVL72): hosts of one domain talk over NVLink
        # (P2P/MNNVL), hosts of different domains over the cluster network.
        found = _domain_fault(path, between)
        if found:
            return DOMAIN_WITHOUT_MNNVL, found
        between = [c for c in between if not c.mnnvl]
    if rdma and between and _nodes(params) > 1:
        # Whichever net plugin carries it (NCCL's own IB, IBext, AWS Libfabric, OFI...),
        # GDRDMA says the NIC reads the GPU's memory; a socket never does.
        slow = next((c for c in between if c.kind != "NET" or not c.gdrdma), None)
        if slow is not None:
            how = ("without GPUDirect RDMA (no GDRDMA)" if slow.kind == "NET"
                   else "outside the network")
            return HOSTS_WITHOUT_GDRDMA, (
                    f"NCCL connected the hosts over {_short(slow.transport)} {how}, not "
                    f"with GPUDirect RDMA (GDRDMA) over the {rdma} cluster network"
                    f"{path.causes()}")
    return None


def _domain_fault(path: Path, between: list[Channel]) -> str | None:
    """Two hosts whose GPUs registered in one NVLink domain (the same cluster UUID, as
    NCCL's "MNNVL busId ... fabric UUID" lines say) that NCCL joined by anything but
    multi-node NVLink: the fabric is there and was not used.  Hosts of different
    cluster UUIDs are different racks (the cluster network is their path); hosts whose
    log does not say stay unjudged here."""
    for channel in between:
        if channel.mnnvl:
            continue
        source, target = path.hosts.get(channel.source), path.hosts.get(channel.target)
        ours, theirs = path.domain(source or ""), path.domain(target or "")
        if ours is None or theirs is None or ours[0] != theirs[0]:
            continue
        where = (f"channel {channel.channel:02d}: rank {channel.source} on {source} -> "
                 f"{channel.target} on {target}")
        if ours[1] != theirs[1]:
            return (f"NCCL connected hosts of one NVLink domain (cluster UUID {ours[0]}) "
                    f"over {_short(channel.transport)} ({where}): their GPUs are in "
                    f"different cliques ({source} 0x{ours[1]}, {target} 0x{theirs[1]}), a "
                    f"domain/clique mismatch, so multi-node NVLink (P2P/MNNVL) could not "
                    f"join them{path.mnnvl_causes()}")
        return (f"NCCL connected hosts of one NVLink domain (cluster UUID {ours[0]}, clique "
                f"0x{ours[1]}) over {_short(channel.transport)} ({where}), not over "
                f"multi-node NVLink (P2P/MNNVL){path.mnnvl_causes()}")
    return None


def _nvlink_connected(shape_data: Mapping[str, Any]) -> bool:
    """Whether the shape's GPUs are NVLink-connected: it states an NVLink rate
    (``links.nvlink_gbs``) and does not declare ``capabilities.nvlink: 0``.  A PCIe
    shape (L40S, A10: no NVLink) has P2P over PCIe or SHM as its healthy path inside a
    host, and the NVLink rules never apply to it, whatever else its file says."""
    declared = (shape_data.get("capabilities") or {}).get("nvlink")
    if declared is not None and not (isinstance(declared, int) and declared > 0):
        return False
    return bool((shape_data.get("links") or {}).get("nvlink_gbs"))


def _nodes(params: Mapping[str, Any]) -> int:
    nodes = params.get("nodes")
    return nodes if isinstance(nodes, int) else 1
