"""A rack-scale NVLink domain seen from one node (GB200 NVL72): the GPUs' fabric
registration (``nvidia-smi -q``), the IMEX service (``nvidia-imex-ctl -N``), and each
GPU's NVLink-C2C links to its Grace CPU (``nvidia-smi c2c -s``).

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

* ``nvidia-smi c2c -s``, per GPU (a Grace Hopper's: 10 links)::

      GPU 0: NVIDIA GH200 480GB (UUID: GPU-8d852f73-...)
               C2C Link 0: 44.712 GB/s

* ``nvidia-imex-ctl -N``: the legend, ``Node #0   - 172.31.48.81    - READY    -
  Version: 570.172`` per node, the connectivity matrix (``C`` connected) and
  ``Domain State: UP``.

Three states: a tool that is absent, hangs or prints nothing readable is unknown; a
registration still in progress is unknown (asked again next run); only what the tools
say is broken fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ocibench.capabilities import PRESENT, UNEXPECTED, UNKNOWN
from ocibench.node import probing
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


def _asked(name: str, command: list[str], judge: Callable[[str], tuple[str, str]],
           timeout: float) -> probing.Item:
    """The item ``name`` of one tool's answer: unknown where the tool gave none (absent,
    hung, failed), else what ``judge`` makes of its output."""
    ran = probing.run(command, timeout)
    if ran.why:
        return probing.Item(name, UNKNOWN, ran.why, ran.command, True)
    status, detail = judge(ran.out)
    return probing.Item(name, status, detail, ran.command, True)


def probe_fabric(timeout: float) -> probing.Item:
    """The node's GPUs in the NVLink fabric (``nvidia-smi -q``)."""
    return _asked("nvlink_fabric", SMI_QUERY, lambda out: judge_fabric(parse_fabric(out)),
                  timeout)


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


def probe_imex(timeout: float) -> probing.Item:
    """The IMEX service of the node's NVLink domain."""
    service = probing.run(["systemctl", "is-active", IMEX_SERVICE], timeout)
    nodes = probing.run(IMEX_NODES, timeout)
    status, detail = judge_imex(service, nodes)
    return probing.Item("imex", status, detail, nodes.command, True)


# --------------------------------------------------------------------------- NVLink-C2C

SMI_C2C = ["nvidia-smi", "c2c", "-s"]
_C2C_GPU = re.compile(r"^GPU (\d+):")
_C2C_LINK = re.compile(r"^\s*C2C Link (\d+)\s*:\s*(.*?)\s*$")
_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s$")
#: What nvidia-smi prints for a value it cannot give (a field, not a link's state).
_NOT_GIVEN = {"n/a", "[n/a]", "not supported", "[not supported]", "unknown"}
#: Links of one GPU run at one speed; a link this much slower than its GPU's fastest
#: trained down (lanes lost): the bandwidth the CPU<->GPU path was sold with is gone.
SLOWER_BY = 0.05


def parse_c2c(text: str) -> dict[int, dict[int, str]]:
    """GPU index -> {link -> what ``nvidia-smi c2c -s`` says of it}, in order."""
    gpus: dict[int, dict[int, str]] = {}
    gpu: int | None = None
    for line in text.splitlines():
        found = _C2C_GPU.match(line)
        if found:
            gpu = int(found.group(1))
            gpus[gpu] = {}
            continue
        found = _C2C_LINK.match(line)
        if found and gpu is not None:
            gpus[gpu][int(found.group(1))] = found.group(2)
    return gpus


def judge_c2c(gpus: dict[int, dict[int, str]]) -> tuple[str, str]:
    """(status, detail) of the GPUs' NVLink-C2C links: every link up at its GPU's speed
    and every GPU with as many links as the others.  A link without a speed (a state
    word, 0 GB/s) is down; a value nvidia-smi cannot give (N/A) is unknown."""
    if not any(gpus.values()):
        return UNKNOWN, ("nvidia-smi c2c -s shows no C2C link (no NVLink-C2C, or a driver "
                         "without it)")
    speeds: dict[int, dict[int, float]] = {}
    for gpu, links in gpus.items():
        for link, said in links.items():
            if said.lower() in _NOT_GIVEN:
                return UNKNOWN, f"GPU {gpu}: C2C link {link} {said}"
            speed = _SPEED.match(said)
            if not speed or float(speed.group(1)) <= 0:
                return UNEXPECTED, f"GPU {gpu}: C2C link {link} {said or 'shows nothing'}, not up"
            speeds.setdefault(gpu, {})[link] = float(speed.group(1))
    for gpu, links in speeds.items():
        top = max(links.values())
        slow = {link: s for link, s in links.items() if s < top * (1 - SLOWER_BY)}
        if slow:
            link, speed = next(iter(slow.items()))
            return UNEXPECTED, (f"GPU {gpu}: C2C link {link} at {speed:g} GB/s, its other "
                                f"links at {top:g} GB/s ({len(slow)} slow link(s))")
    counts = {gpu: len(links) for gpu, links in gpus.items()}
    most = max(counts.values())
    short = [gpu for gpu, n in counts.items() if n < most]
    if short:
        other = next(gpu for gpu, n in counts.items() if n == most)
        return UNEXPECTED, (f"GPU {short[0]}: {counts[short[0]]} C2C link(s), GPU {other} "
                            f"has {most}")
    total = {gpu: sum(links.values()) for gpu, links in speeds.items()}
    return PRESENT, (f"{len(gpus)} GPU(s), {most} C2C link(s) each up, "
                     f"{min(total.values()):g} GB/s per GPU")


def probe_c2c(timeout: float) -> probing.Item:
    """The GPUs' NVLink-C2C links to their CPU (``nvidia-smi c2c -s``)."""
    return _asked("c2c", SMI_C2C, lambda out: judge_c2c(parse_c2c(out)), timeout)
