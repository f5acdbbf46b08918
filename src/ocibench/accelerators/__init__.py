"""The accelerator vendors: one row per vendor, and no vendor's names anywhere else.

A shape names its vendor and architecture (``gpus: {vendor: nvidia, arch: "80"}``,
``gpus: {vendor: amd, arch: gfx942}``); everything that differs between vendors is
read from that vendor's row: the buffer flag the benchmarks take and the title tag OMB
prints for it, the collective library and its tests, UCX's memory type and transports,
the Spack variants and the image's toolkit, the ceiling tool, the probe commands with
their readers and ReFrame's partition feature and devices.  :mod:`.row` says what a row
holds; each vendor's module (:mod:`.nvidia`, :mod:`.amd`) is its row and the readers of
its tools' outputs.  Adding a vendor is one such module, its entry in ``VENDORS`` and
its shape files (docs/adding-a-vendor.md); tests/test_vendor_words.py fails when a
vendor's name is spelled in code outside this package.

Why a table rather than subclasses: CSCS's checks and Spack's recipes treat a vendor
as one feature and one variant (``+nvgpu``/``+amdgpu`` partitions, ``+cuda``/``+rocm``
recipes); the code that uses a row is the same for every vendor.  Which recipe takes
which variant is the row's too (``spack_recipes``): another vendor's recipes need not
all have one.
"""

from __future__ import annotations

from typing import Any

from .amd import AMD
from .nvidia import NVIDIA, XIDS
from .row import (
    ARCH,
    Accelerator,
    DmabufProbe,
    DriverStub,
    GpuClocks,
    GpuMemory,
    GpuMemoryQuery,
    GpuModule,
    GpuQuery,
    HostCopyApi,
    KernelLogScan,
    MigMode,
    PeerMemory,
    ProbedGpu,
    ProbeFormatError,
    SramCounts,
    TicketEvidence,
    VersionQuery,
)

__all__ = [
    "AMD",
    "ARCH",
    "NVIDIA",
    "XIDS",
    "ProbedGpu",
    "DriverStub",
    "HostCopyApi",
    "VersionQuery",
    "TicketEvidence",
    "DmabufProbe",
    "PeerMemory",
    "ProbeFormatError",
    "GpuClocks",
    "GpuMemory",
    "GpuMemoryQuery",
    "GpuQuery",
    "GpuModule",
    "MigMode",
    "SramCounts",
    "KernelLogScan",
    "Accelerator",
    "VENDORS",
    "VendorError",
    "of",
    "with_toolkit",
    "image_packages",
]

VENDORS: dict[str, Accelerator] = {a.vendor: a for a in (NVIDIA, AMD)}


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


def with_toolkit(externals: dict[str, Any]) -> Accelerator | None:
    """The vendor whose toolkit ``externals`` declares (a machine-described shape
    without GPUs: a build host), or None."""
    return next((a for a in VENDORS.values() if externals.get(a.toolkit_packages[0])), None)


def image_packages() -> set[str]:
    """Every vendor's toolkit and collective library: what the image provides and
    Spack never rebuilds."""
    return {p for a in VENDORS.values() for p in (*a.toolkit_packages, a.collective_package)}
