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

from dataclasses import dataclass

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
    Capability("cma", FLAG, "Cross Memory Attach (process_vm_readv) allowed between a "
               "user's processes: single-copy shared memory without a kernel module"),
    Capability("nvlink", COUNT, "NVLink links per GPU (0: none)", gpu_only=True),
    Capability("pcie", PCIE, "PCIe generation and lane width of each GPU's link",
               gpu_only=True),
    Capability("rdma", COUNT, "RDMA ports of a node (equals network.ports)"),
)}


def describe(name: str) -> str:
    return CAPABILITIES[name].description


def present(value: object) -> bool:
    """Whether a declared value means the node has the capability."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value > 0
    return isinstance(value, dict) and bool(value)
