"""A rack-scale NVLink domain seen from one node (GB200 NVL72): the GPUs' fabric
registration (``nvidia-smi -q``) and the IMEX service (``nvidia-imex-ctl -N``).

Between the hosts of one NVL72 rack, GPU memory is shared over NVLink only when every
GPU registered in the rack's NVLink fabric (NVML's fabric state "Completed", status
"Success", one cluster UUID and clique for the rack) and the IMEX service, which
exports and imports that memory between the hosts, runs with its domain up (NVIDIA
IMEX guide; NCCL: "MNNVL ... is available but not working on this system. Check the
IMEX configuration (nvidia-imex-ctl -N)").  Either one broken and NCCL falls back to
the RoCE network, or fails outright.

What the tools print (published outputs under tests/data/nvlink_fabric/):

* ``nvidia-smi -q``, per GPU::

      Fabric
          State                             : Completed
          Status                            : Success
          CliqueId                          : 2
          ClusterUUID                       : dc6e40c4-d722-4357-9ba6-5291dd461278
          Health
              Summary                       : Unhealthy

* ``nvidia-imex-ctl -N``: the legend, ``Node #0   - 172.31.48.81    - READY    -
  Version: 570.172`` per node, the connectivity matrix (``C`` connected) and
  ``Domain State: UP``.

Three states: a tool that is absent, hangs or prints nothing readable is unknown; a
registration still in progress is unknown (asked again next run); only what the tools
say is broken fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ocibench.capabilities import PRESENT, UNEXPECTED, UNKNOWN
from ocibench.node import preflight
from ocibench.shapes.probe import Ran

#: The IMEX service's unit (NVIDIA IMEX guide, "The IMEX Service": systemd nvidia-imex).
IMEX_SERVICE = "nvidia-imex"
SMI_QUERY = ["nvidia-smi", "-q"]
IMEX_NODES = ["nvidia-imex-ctl", "-N"]

_FIELD = re.compile(r"^(\s*)([A-Za-z][A-Za-z ]*?)\s*:\s*(.*?)\s*$")
_IMEX_NODE = re.compile(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)")
_DOMAIN_STATE = re.compile(r"^Domain State:\s*(\S+)")
#: A row of the connectivity matrix: "      10        C   C   I ..."
_MATRIX_ROW = re.compile(r"^\s*(\d+)\s{2,}((?:\S+\s*)+)$")
_ZERO_UUID = re.compile(r"^[0\-]+$")


@dataclass(frozen=True)
class GpuFabric:
    """One GPU's "Fabric" block of ``nvidia-smi -q``."""

    index: int                 # its position in the output (the GPU's order)
    state: str                 # Completed, In Progress, Not Started, Not Supported, N/A
    status: str                # Success, or the error of a completed registration
    clique: str
    cluster_uuid: str
    health: str = ""           # Health: Summary (Healthy, Unhealthy, Not Supported...)

    @property
    def domain(self) -> tuple[str, str]:
        return self.cluster_uuid, self.clique


def parse_fabric(text: str) -> list[GpuFabric]:
    """Every "Fabric" block of ``nvidia-smi -q`` (or of its ``grep -A``), in order."""
    found: list[GpuFabric] = []
    block: dict[str, str] | None = None
    indent = 0
    for line in text.splitlines():
        if line.strip() == "Fabric":
            if block is not None:
                found.append(_fabric(len(found), block))
            block, indent = {}, len(line) - len(line.lstrip())
            continue
        if block is None:
            continue
        field = _FIELD.match(line)
        depth = len(line) - len(line.lstrip())
        if not line.strip() or line.strip() == "--":
            continue
        if depth <= indent:                      # the next section of the GPU
            found.append(_fabric(len(found), block))
            block = None
            continue
        if line.strip() == "Health":
            block["_health"] = "1"
        elif field:
            key = field.group(2)
            if block.get("_health") and key == "Summary":
                key = "Health"
            block.setdefault(key, field.group(3))
    if block is not None:
        found.append(_fabric(len(found), block))
    return found


def _fabric(index: int, block: dict[str, str]) -> GpuFabric:
    return GpuFabric(index, block.get("State", ""), block.get("Status", ""),
                     block.get("CliqueId", ""), block.get("ClusterUUID", ""),
                     block.get("Health", ""))


def judge_fabric(gpus: list[GpuFabric]) -> tuple[str, str]:
    """(status, detail) of the node's GPUs in the NVLink fabric: every one registered
    (Completed, Success), in one cluster and one clique, and not reported unhealthy."""
    if not gpus:
        return UNKNOWN, "nvidia-smi -q shows no Fabric section (a driver without fabric info)"
    waiting = [g for g in gpus if g.state == "In Progress"]
    unsupported = [g for g in gpus if g.state in ("Not Supported", "N/A", "")]
    if unsupported:
        return UNKNOWN, (f"GPU {unsupported[0].index}: fabric state "
                         f"{unsupported[0].state or 'not shown'}")
    if waiting:
        return UNKNOWN, f"GPU {waiting[0].index}: fabric registration in progress"
    for gpu in gpus:
        if gpu.state != "Completed":
            return UNEXPECTED, f"GPU {gpu.index}: fabric state {gpu.state}, not Completed"
        if gpu.status != "Success":
            return UNEXPECTED, (f"GPU {gpu.index}: fabric registration completed with "
                                f"status {gpu.status}")
        if _ZERO_UUID.match(gpu.cluster_uuid):
            return UNEXPECTED, f"GPU {gpu.index}: cluster UUID {gpu.cluster_uuid} (none)"
        if gpu.health == "Unhealthy":
            return UNEXPECTED, f"GPU {gpu.index}: fabric health Unhealthy"
    domains = {g.domain for g in gpus}
    if len(domains) > 1:
        first = gpus[0]
        other = next(g for g in gpus if g.domain != first.domain)
        return UNEXPECTED, (f"GPUs in different NVLink cliques: GPU {first.index} clique "
                            f"{first.clique} of {first.cluster_uuid}, GPU {other.index} "
                            f"clique {other.clique} of {other.cluster_uuid}")
    uuid, clique = domains.pop()
    return PRESENT, (f"{len(gpus)} GPU(s) registered (Completed, Success) in clique "
                     f"{clique} of cluster {uuid}")


def probe_fabric(timeout: float) -> preflight.Item:
    """The node's GPUs in the NVLink fabric (``nvidia-smi -q``)."""
    ran = preflight.run(SMI_QUERY, timeout)
    if ran.why:
        return preflight.Item("nvlink_fabric", UNKNOWN, ran.why, ran.command, True)
    status, detail = judge_fabric(parse_fabric(ran.out))
    return preflight.Item("nvlink_fabric", status, detail, ran.command, True)


@dataclass(frozen=True)
class ImexDomain:
    """What ``nvidia-imex-ctl -N`` says: each node's state, the links that are not
    connected (from -> to: code), and the domain's state (UP, DEGRADED, DOWN)."""

    nodes: dict[int, tuple[str, str]]          # index -> (address, READY / ...)
    broken_links: dict[tuple[int, int], str]
    state: str | None


def parse_imex_nodes(text: str) -> ImexDomain:
    nodes: dict[int, tuple[str, str]] = {}
    links: dict[tuple[int, int], str] = {}
    state = None
    columns: list[int] = []
    for line in text.splitlines():
        found = _IMEX_NODE.match(line.strip())
        if found:
            nodes[int(found.group(1))] = (found.group(2), found.group(3))
            continue
        if "Nodes From\\To" in line:
            columns = [int(c) for c in line.split("To", 1)[1].split()]
            continue
        found = _DOMAIN_STATE.match(line.strip())
        if found:
            state = found.group(1)
            continue
        found = _MATRIX_ROW.match(line) if columns else None
        if found:
            cells = found.group(2).split()
            if len(cells) == len(columns):
                links.update({(int(found.group(1)), to): code
                              for to, code in zip(columns, cells) if code != "C"})
    return ImexDomain(nodes, links, state)


def judge_imex(service: Ran, nodes: Ran) -> tuple[str, str]:
    """(status, detail) of the IMEX service and its domain: the unit active (systemd),
    and ``nvidia-imex-ctl -N`` saying the domain is UP with every node READY and
    connected.  With nvidia-imex-ctl installed, a unit systemd says is inactive or
    failed is broken; a tool that is absent, hangs or prints no domain state is
    unknown."""
    if nodes.missing:
        # not installed: nothing here to ask (systemd calls an unknown unit inactive too)
        return UNKNOWN, f"{nodes.why} [`{nodes.command}`]"
    said = (service.out.strip().splitlines() or [""])[0]
    if said in ("inactive", "failed") and not service.timed_out and not service.missing:
        return UNEXPECTED, f"{IMEX_SERVICE} {said} [`{service.command}`]"
    if nodes.timed_out:
        return UNKNOWN, f"{nodes.why} [`{nodes.command}`]"
    domain = parse_imex_nodes(nodes.out)
    if domain.state is None:
        first = (nodes.out.strip().splitlines() or [nodes.why or "no output"])[0]
        return UNKNOWN, f"no domain state in its output: {first!r} [`{nodes.command}`]"
    if domain.state != "UP":
        return UNEXPECTED, f"IMEX domain {domain.state}{_not_ready(domain)} [`{nodes.command}`]"
    trouble = _not_ready(domain)
    if trouble:
        return UNEXPECTED, f"IMEX domain UP, but{trouble[1:]} [`{nodes.command}`]"
    return PRESENT, (f"IMEX domain UP, {len(domain.nodes)} node(s) READY and connected "
                     f"[`{nodes.command}`]")


def _not_ready(domain: ImexDomain) -> str:
    """", node #3 (10.0.0.4) DOWN; link 2 -> 3 I" for the nodes and links not ready."""
    parts = [f"node #{i} ({addr}) {state}" for i, (addr, state) in domain.nodes.items()
             if state != "READY"]
    parts += [f"link {a} -> {b} {code}" for (a, b), code in list(domain.broken_links.items())[:3]]
    more = len(domain.broken_links) - 3
    if more > 0:
        parts.append(f"and {more} more link(s)")
    return (": " + "; ".join(parts)) if parts else ""


def probe_imex(timeout: float) -> preflight.Item:
    """The IMEX service of the node's NVLink domain."""
    service = preflight.run(["systemctl", "is-active", IMEX_SERVICE], timeout)
    nodes = preflight.run(IMEX_NODES, timeout)
    status, detail = judge_imex(service, nodes)
    return preflight.Item("imex", status, detail, nodes.command, True)
