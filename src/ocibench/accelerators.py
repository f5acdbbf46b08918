"""The accelerator vendors: one row per vendor, and no "cuda" or "rocm" anywhere else.

A shape names its vendor and architecture (``gpus: {vendor: nvidia, arch: "80"}``);
everything that differs between vendors is read from that vendor's row here: the
buffer flag the benchmarks take, the collective library and its tests, UCX's memory
type and transports, the Spack variants, the ceiling tool, the probe commands and
ReFrame's partition features and devices.  Adding a vendor is one row and its shape
files (docs/adding-a-vendor.md).

Why a table rather than subclasses: CSCS's checks and Spack's recipes treat a vendor
as one feature and one variant (``+nvgpu``/``+amdgpu`` partitions, ``+cuda``/``+rocm``
recipes); the code that uses a row is the same for every vendor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Accelerator:
    """What one GPU vendor's software stack is called, wherever ocibench names it."""

    vendor: str
    #: How a shape writes its architecture, and how Spack and ReFrame spell it.
    arch_help: str
    #: Spack: the variant that turns GPU support on and the one that names the target
    #: (``+cuda cuda_arch=80`` | ``+rocm amdgpu_target=gfx942``).
    spack_variant: str
    spack_arch_variant: str
    #: The image's toolkit, declared under ``software.externals`` (never built).
    toolkit_packages: tuple[str, ...]
    #: The collective library, its Spack package, OMB's variant for it, its tests.
    collective: str
    collective_package: str
    omb_collective_variant: str
    collective_tests_package: str
    #: The benchmarks' buffer flag: OMB's ``-d <buffer_flag>`` (c/util/osu_util.c,
    #: options.accel) and the tag OMB's title then carries (``# OSU MPI-CUDA ...``).
    buffer_flag: str
    omb_title_tag: str
    #: UCX: the memory type of a device buffer (ucs_memory_type_names: "cuda", "rocm"),
    #: its copy transport and its IPC transport between GPUs of one node (src/uct/<dir>).
    ucx_memory: str
    ucx_copy_transport: str
    ucx_ipc_transport: str
    #: UCX's loadable module for the vendor (``uct_<x>_MODULES`` in ``ucx_info -b``).
    ucx_module: str
    #: The node's copy-ceiling tool (its Spack package).
    ceiling_package: str
    #: The probe: a command listing index, name and PCI bus id per GPU.
    probe_command: tuple[str, ...]
    #: ReFrame: the partition feature (CSCS's naming) and the device type's arch prefix.
    reframe_feature: str
    device_arch_prefix: str
    #: Modules the GPU checks load beside MPI (the image's toolkit and collective library).
    gpu_modules: tuple[str, ...]

    def device_arch(self, arch: str) -> str:
        """ReFrame's ``devices[].arch``: ``sm_80`` for NVIDIA 80, ``gfx942`` as it is."""
        prefix = self.device_arch_prefix
        return arch if arch.startswith(prefix) else f"{prefix}{arch}"

    def spack_arch(self, arch: str) -> str:
        """The Spack variant naming the target: ``cuda_arch=80``, ``amdgpu_target=gfx942``."""
        return f"{self.spack_arch_variant}={arch}"


VENDORS: dict[str, Accelerator] = {a.vendor: a for a in (
    Accelerator(
        vendor="nvidia",
        arch_help="the CUDA compute capability without the dot, as a string: \"80\" for A100",
        spack_variant="+cuda",
        spack_arch_variant="cuda_arch",
        toolkit_packages=("cuda",),
        collective="nccl",
        collective_package="nccl",
        omb_collective_variant="+nccl",
        collective_tests_package="nccl-tests",
        buffer_flag="cuda",
        omb_title_tag="-CUDA",
        ucx_memory="cuda",
        ucx_copy_transport="cuda_copy",
        ucx_ipc_transport="cuda_ipc",
        ucx_module="cuda",
        ceiling_package="nvbandwidth",
        probe_command=("nvidia-smi", "--query-gpu=index,name,pci.bus_id",
                       "--format=csv,noheader"),
        reframe_feature="nvgpu",
        device_arch_prefix="sm_",
        gpu_modules=("cuda", "nccl"),
    ),
)}


class VendorError(ValueError):
    """A shape names a vendor that has no row here."""


def of(gpus: dict[str, Any] | None) -> Accelerator | None:
    """The vendor row of a shape's ``gpus`` section; None on a CPU shape."""
    if not gpus:
        return None
    name = gpus.get("vendor")
    if name not in VENDORS:
        raise VendorError(f"gpus.vendor: {name!r} is not a known vendor "
                          f"({', '.join(VENDORS)})")
    return VENDORS[name]
