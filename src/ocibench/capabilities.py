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
    Capability("dmabuf", FLAG, "GPUDirect RDMA through dma-buf: the NVIDIA open kernel "
               "module (R515 or later) exports GPU memory as a dma-buf that the RDMA NIC "
               "registers (Linux 5.12 or later); the successor of nvidia_peermem",
               gpu_only=True),
    Capability("cma", FLAG, "Cross Memory Attach (process_vm_readv) allowed between a "
               "user's processes: single-copy shared memory without a kernel module"),
    Capability("nvlink", COUNT, "NVLink links per GPU (0: none)", gpu_only=True),
    Capability("pcie", PCIE, "PCIe generation and lane width of each GPU's link",
               gpu_only=True),
    Capability("rdma", COUNT, "RDMA ports of a node (equals network.ports)"),
)}


#: Capabilities that stand in for each other: GPUDirect RDMA either through the
#: nvidia_peermem module or through dma-buf.  NCCL uses dma-buf where the GPU and the
#: NIC's stack support it (NCCL_DMABUF_ENABLE, src/transport/net_ib.cc), else
#: peermem; UCX likewise (uct_cuda_copy_md_is_dmabuf_supported, src/uct/cuda/
#: cuda_copy/cuda_copy_md.c).  A node with one of them has GPUDirect RDMA.
GPUDIRECT = ("nvidia_peermem", "dmabuf")


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
