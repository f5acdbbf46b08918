"""What a node can have that a documented figure may depend on: the one vocabulary.

A shape file declares what its nodes have (``capabilities:``), and a figure names
what it ``requires`` with the reason (``why:``).  The names and their kinds are
stated here only; ``site/shapes/schema.json`` lists the same names for editors, and
``tests/test_shape_schema.py`` holds the two equal.

Why these: OCI's tech tip "gpu-with-ubuntu" (ocitutorials
``content/hpc/tech-knowhow/gpu-with-ubuntu``), whose Open MPI the GPU seeds use,
builds GDRCopy with its ``gdrdrv`` module, XPMEM with its module, UCX
``--with-xpmem --with-cuda --with-gdrcopy`` (CMA, verbs, mlx5 and rdmacm from UCX's
configure defaults) and loads ``nvidia_peermem``.  Without them the GPU figures of
the seeds are out of reach (docs/gpu-results.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ocibench import accelerators

#: How a shape file states a capability.
FLAG = "flag"     # true / false
COUNT = "count"   # a whole number, 0 meaning absent (links per GPU, ports per node)
PCIE = "pcie"     # {gen: N, width: N}
KINDS = (FLAG, COUNT, PCIE)


@dataclass(frozen=True)
class Capability:
    name: str
    kind: str
    description: str
    #: Only a node with GPUs can have it (a CPU shape declaring it is an error).
    gpu_only: bool = False


CAPABILITIES: dict[str, Capability] = {c.name: c for c in (
    Capability("gdrdrv", FLAG, "GDRCopy's gdrdrv kernel module (/dev/gdrdrv): UCX's gdr_copy "
               "moves small GPU messages by a CPU load/store through the GPU's BAR1",
               gpu_only=True),
    Capability("xpmem", FLAG, "the XPMEM kernel module (/dev/xpmem): single-copy shared "
               "memory between the processes of a node"),
    Capability("nvidia_peermem", FLAG, "the nvidia_peermem kernel module: GPUDirect RDMA, "
               "the RDMA NIC reads and writes GPU memory directly", gpu_only=True),
    Capability("dmabuf", FLAG, "GPUDirect RDMA through dma-buf: the GPU driver exports "
               "GPU memory as a dma-buf that the RDMA NIC registers (Linux 5.12 or later; "
               "NVIDIA's open kernel module R515 or later, AMD's runtime); the "
               "successor of the peer-memory modules", gpu_only=True),
    Capability("amd_peermem", FLAG, "AMD's PeerDirect: amdgpu's KFD registers GPU memory "
               "with the RDMA stack (ib_peer_mem), shown as memory_peers/amdkfd/version in "
               "sysfs; RCCL's GPUDirect RDMA path where dma-buf is off", gpu_only=True),
    Capability("cma", FLAG, "Cross Memory Attach (process_vm_readv) allowed between a "
               "user's processes: single-copy shared memory without a kernel module"),
    Capability("nvlink", COUNT, "NVLink links per GPU (0: none)", gpu_only=True),
    Capability("xgmi", COUNT, "xGMI (AMD Infinity Fabric) links per GPU to its peers "
               "(0: none)", gpu_only=True),
    Capability("pcie", PCIE, "PCIe generation and lane width of each GPU's link",
               gpu_only=True),
    Capability("rdma", COUNT, "RDMA ports of a node (equals network.ports)"),
    Capability("fabric_manager", FLAG, "NVIDIA Fabric Manager running: it configures the "
               "NVSwitches of an HGX board, without which the GPUs do not initialise "
               "(NVIDIA Fabric Manager User Guide)", gpu_only=True),
)}


#: Capabilities that stand in for each other: GPUDirect RDMA either through the
#: vendor's peer-memory module or through dma-buf (each vendor's ``gpudirect`` in
#: ocibench.accelerators).  A node with one of them has GPUDirect RDMA.
GPUDIRECT_GROUPS = tuple(v.gpudirect for v in accelerators.VENDORS.values() if v.gpudirect)


@dataclass(frozen=True)
class Requirement:
    """What a figure ``requires``: one capability, or any one of several
    (``{any_of: [nvidia_peermem, dmabuf]}`` in a shape file)."""

    names: tuple[str, ...]

    @property
    def text(self) -> str:
        return " or ".join(self.names)


def requirements(raw: Iterable[Any] | None) -> tuple[Requirement, ...]:
    """A figure's ``requires`` (validated by the schema) as requirements."""
    found = []
    for item in raw or ():
        if isinstance(item, dict):
            found.append(Requirement(tuple(str(n) for n in item.get("any_of") or ())))
        else:
            found.append(Requirement((str(item),)))
    return tuple(found)


def describe(name: str) -> str:
    return CAPABILITIES[name].description


def present(value: object) -> bool:
    """Whether a declared value means the node has the capability."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value > 0
    return isinstance(value, dict) and bool(value)


# --------------------------------------------------------------------------- what preflight found
# Preflight (ocibench.node.preflight) writes these states per item; the figures layer reads
# a ``preflight --json`` report through the functions below, so judging a figure never
# imports the node layer.

#: An item's state on a node against its shape.
PRESENT, ABSENT, UNEXPECTED, UNKNOWN = "present", "absent", "unexpected", "unknown"

#: The transport ``ucx_info -d`` lists when the capability works on this node (the names
#: of src/uct/*/ in openucx/ucx); ucx_proto reads protocol tables with the same names.
#: The GPUs' own copy transport is their vendor's (accelerators: ``ucx_copy_transport``).
UCX_TRANSPORT_FOR = {"gdrdrv": "gdr_copy", "xpmem": "xpmem", "cma": "cma",
                     "rdma": "rc_verbs"}


def lacking(report: dict[str, Any]) -> set[str]:
    """The capabilities (ocibench.capabilities names) a ``preflight --json`` report found
    absent or not as the shape says: what a missed figure's ``requires`` is read against."""
    return set(reported_absent(report))


def reported_absent(report: dict[str, Any]) -> dict[str, str]:
    """:func:`lacking`, each with what preflight found: {"gdrdrv": "absent: no
    /dev/gdrdrv (kernel module not loaded)"}, as a missed figure's reason names it.
    An item preflight could not read (unknown) is not absent: it is left out."""
    return _capability_items(report, (ABSENT, UNEXPECTED))


def reported_present(report: dict[str, Any]) -> dict[str, str]:
    """The capabilities a ``preflight --json`` report found present, each with what it
    found: {"gdrdrv": "present: /dev/gdrdrv exists; gdrcopy_sanity passed"}."""
    return _capability_items(report, (PRESENT,))


def reported_unknown(report: dict[str, Any]) -> dict[str, str]:
    """The capabilities a ``preflight --json`` report could not tell, with why."""
    return _capability_items(report, (UNKNOWN,))


def _capability_items(report: dict[str, Any], statuses: tuple[str, ...]) -> dict[str, str]:
    return {str(item["name"]): f"{item.get('status')}: {item.get('detail') or 'no detail'}"
            for item in report.get("items") or []
            if isinstance(item, dict) and item.get("name") in CAPABILITIES
            and item.get("status") in statuses}
