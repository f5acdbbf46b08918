"""The accelerator vendors: one row per vendor, and no vendor's names anywhere else.

A shape names its vendor and architecture (``gpus: {vendor: nvidia, arch: "80"}``,
``gpus: {vendor: amd, arch: gfx942}``); everything that differs between vendors is
read from that vendor's row here: the buffer flag the benchmarks take and the title
tag OMB prints for it, the collective library and its tests, UCX's memory type and
transports, the Spack variants and the image's toolkit, the ceiling tool, the probe
command and ReFrame's partition feature and devices.  Adding a vendor is one row and
its shape files (docs/adding-a-vendor.md); tests/test_vendor_words.py fails when a
vendor's name is spelled in code outside this module.

Why a table rather than subclasses: CSCS's checks and Spack's recipes treat a vendor
as one feature and one variant (``+nvgpu``/``+amdgpu`` partitions, ``+cuda``/``+rocm``
recipes); the code that uses a row is the same for every vendor.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbedGpu:
    """One GPU as the vendor's probe lists it."""

    index: int
    model: str
    arch: str     # as a shape writes it (gpus.arch)
    bus_id: str   # PCI address as the tool prints it (domain:bus:device.function)


@dataclass(frozen=True)
class DriverStub:
    """A toolkit's stand-in for the driver's library, for a build host without the
    driver: binaries linked against the driver can start and run host-buffer
    benchmarks, while every driver call fails (nothing pretends there is a GPU)."""

    #: The driver's library as the dynamic linker knows it (``ldconfig -p``).
    library: str
    #: The stub's file name and the toolkit directories that may hold it.
    stub: str
    stub_dirs: tuple[str, ...]


@dataclass(frozen=True)
class HostCopyApi:
    """The driver API through which ocibench.node.pageable_copy times copies between a
    pageable host buffer and a GPU, each entry point by its role."""

    library: str
    init: str
    device_count: str
    device_get: str
    context_retain: str
    context_set: str
    context_release: str
    alloc: str
    free: str
    to_device: str
    to_host: str
    error_string: str


@dataclass(frozen=True)
class VersionQuery:
    """A command whose output gives a version: the first group of ``pattern``."""

    command: tuple[str, ...]
    pattern: str


class ProbeFormatError(ValueError):
    """A probe's output line that is not what the probe asked for."""


@dataclass(frozen=True)
class Accelerator:
    """What one GPU vendor's software stack is called, wherever ocibench names it."""

    vendor: str
    #: A shape's ``gpus.arch``: how Spack spells the target (``80``, ``gfx942``).
    arch_pattern: str
    arch_help: str
    #: The target built for where the toolkit is present but no GPU is (a build host:
    #: compile-only), and why that one.
    build_host_arch: str
    build_host_arch_why: str

    # ---- Spack (spack-packages' CudaPackage / ROCmPackage build systems)
    #: The variant that turns GPU support on in every recipe that has it (openmpi, ucx,
    #: ucc, osu-micro-benchmarks) and the one that names the target.
    spack_variant: str
    spack_arch_variant: str
    #: The image's toolkit, declared under ``software.externals`` (never built); the
    #: first one decides whether a machine-described shape has the toolkit at all.
    toolkit_packages: tuple[str, ...]
    #: Spack's variant spelling in a detected external spec (``~cuda``/``+cuda``):
    #: whether the machine's Open MPI takes device buffers.  Open MPI's ompi_info then
    #: says ``mpi_built_with_<x>_support`` (Open MPI 5; ``opal_`` in 4.1; spack-packages'
    #: openmpi determine_variants reads the same parameter).
    mpi_aware_variant: str
    #: How the collective tests report a failed GPU runtime call, matched without case:
    #: nccl-tests' CUDACHECK prints "Test CUDA failure <file>:<line> '<error>'"
    #: (src/common.h); rccl-tests' HIPCHECK keeps those words (ROCm/rccl-tests src/common.h).
    runtime_failure: str
    #: The toolkit's compiler whose dry run names the toolkit (``TOP=``): a wrapper of
    #: it on PATH is resolved to the real toolkit (ocibench.node.machine); or None.
    toolkit_compiler: str | None
    #: The versions a result's provenance records (ocibench.node.provenance): the
    #: toolkit's and the GPU driver's.
    toolkit_version: VersionQuery
    driver_version: VersionQuery
    #: The toolkit's driver stub (see DriverStub), or None where there is none.
    driver_stub: DriverStub | None
    #: The driver API of the pageable-copy measurement, or None: not measured.
    host_copy: HostCopyApi | None

    # ---- the collective library (NCCL's API: RCCL is its port, with its env vars)
    collective: str
    collective_package: str
    #: The variant of OMB (the xccl benchmarks) and of UCC (its TL) for the library.
    collective_variant: str
    collective_tests_package: str
    #: Whether the tests' recipe names the target (nccl-tests is a CudaPackage;
    #: rccl-tests is not a ROCmPackage and builds for the targets of its hip).
    collective_tests_arch: bool

    # ---- the benchmarks' buffers
    #: OMB's ``-d <buffer_flag>`` (c/util/osu_util.c, process_options: "cuda",
    #: "rocm") and the tag its title then carries (c/util/osu_util_mpi.c,
    #: print_version_message / print_preamble: printf(benchmark_header, "-CUDA") or
    #: "-ROCM"; OMB 7.4).
    buffer_flag: str
    omb_title_tag: str

    # ---- UCX
    #: The memory type of a device buffer (src/ucs/memory/memory_type.c,
    #: ucs_memory_type_names: "cuda", "rocm"), its copy transport and its IPC transport
    #: between the GPUs of one node (src/uct/cuda, src/uct/rocm).
    ucx_memory: str
    ucx_copy_transport: str
    ucx_ipc_transport: str
    #: UCX's loadable modules for the vendor (``uct_<x>_MODULES`` in ``ucx_info -b``).
    ucx_module: str
    #: The capability (ocibench.capabilities) of the links between the GPUs of a node,
    #: which the IPC transport shows in UCX's protocol tables (NVLink, xGMI).
    device_link: str
    #: Whether UCX can use GDRCopy: spack-packages' ucx conflicts("+rocm",
    #: when="+gdrcopy"): "gdrcopy > 2.0 does not support rocm".
    gdr_copy: bool

    # ---- the node's own copy ceilings (its Spack package)
    ceiling_package: str
    #: BabelStream's programming model for the vendor's GPUs: its CMake build's -DMODEL,
    #: the name of the executable (``<model>-stream``, cmake/register_models.cmake
    #: since v4.0), the word its "Implementation:" line prints (src/<model>/ of
    #: UoB-HPC/BabelStream: IMPLEMENTATION_STRING), and the variant of spack-packages'
    #: babelstream recipe that selects it (its cmake_args: "+<model>" -> -DMODEL).
    babelstream_model: str

    # ---- the probe: a command listing index, model, arch and PCI bus id per GPU
    probe_command: tuple[str, ...]
    probe_parse: Callable[[str], list[ProbedGpu]] | None

    # ---- ReFrame
    #: The partition feature (CSCS's naming: ``+nvgpu``, ``+amdgpu``) and the device
    #: type's arch prefix (``devices[].arch``: ``sm_80``, ``gfx942``).
    reframe_feature: str
    device_arch_prefix: str
    #: Modules the GPU checks load beside MPI (the image's toolkit and collective library).
    gpu_modules: tuple[str, ...]
    #: GPUDirect RDMA: the capabilities (ocibench.capabilities) that each give the RDMA
    #: NIC the GPU's memory, any one of which will do; a 2-node GPU figure requires one.
    gpudirect: tuple[str, ...] = ()
    #: Whether the project's perftest recipe builds for this vendor's GPUs (ib_write_bw
    #: --use_<buffer_flag>): its ``spack_variant`` and target variant exist there.
    perftest_gpu: bool = False
    #: Whether every recipe built with ``spack_variant`` must also name the target:
    #: spack-packages' ROCmPackage conflicts("amdgpu_target=none", when="+rocm") (Open
    #: MPI and UCC included); CudaPackage has no such conflict.
    arch_required: bool = False

    def device_arch(self, arch: str) -> str:
        """ReFrame's ``devices[].arch``: ``sm_80`` for NVIDIA 80, ``gfx942`` as it is."""
        prefix = self.device_arch_prefix
        return arch if arch.startswith(prefix) else f"{prefix}{arch}"

    @property
    def babelstream_executable(self) -> str:
        """BabelStream's executable for the vendor's GPUs: ``hip-stream`` on AMD."""
        return f"{self.babelstream_model}-stream"

    def babelstream_variants(self, arch: str) -> tuple[str, ...]:
        """spack-packages' babelstream for the vendor's GPUs: the model's variant, the
        GPU variant where the model has another name (its ROCmPackage ``+rocm``, which
        alone carries ``amdgpu_target``), and the target."""
        model = f"+{self.babelstream_model}"
        gpu = () if self.spack_variant == model else (self.spack_variant,)
        return (model, *gpu, self.spack_arch(arch))

    def spack_arch(self, arch: str) -> str:
        """The Spack variant naming the target: ``cuda_arch=80``, ``amdgpu_target=gfx942``."""
        return f"{self.spack_arch_variant}={arch}"

    def omb_buffer_options(self, buffers: str) -> list[str]:
        """OMB's options for a buffer pair: none for H-H, ``-d cuda D H`` for D-H."""
        return [] if buffers == "H-H" else ["-d", self.buffer_flag, *buffers.split("-")]

    def arch_problem(self, arch: Any) -> str | None:
        """Why ``arch`` is not an architecture of this vendor, or None."""
        if isinstance(arch, str) and re.fullmatch(self.arch_pattern, arch):
            return None
        return f"{arch!r} is not an architecture of {self.vendor} GPUs ({self.arch_help})"


#: One line of ``nvidia-smi --query-gpu=index,name,compute_cap,pci.bus_id
#: --format=csv,noheader``: "0, NVIDIA H100 80GB HBM3, 9.0, 00000000:18:00.0".
_NVIDIA_SMI_LINE = re.compile(r"([0-9]+), ([^,]+), ([0-9]+)\.([0-9]+), "
                              r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")


def _parse_nvidia_smi(out: str) -> list[ProbedGpu]:
    found = []
    for line in out.strip().splitlines():
        match = _NVIDIA_SMI_LINE.fullmatch(line.strip())
        if not match:
            raise ProbeFormatError(f"printed {line.strip()[:80]!r}, not the CSV asked for "
                                   "(index, name, compute_cap, pci.bus_id)")
        index, name, major, minor, bus = match.groups()
        found.append(ProbedGpu(int(index), name.strip(), major + minor, bus))
    return found


NVIDIA = Accelerator(
    vendor="nvidia",
    # Spack's CudaPackage.cuda_arch_values: "80", "90", "90a", "100a", "120f"...
    arch_pattern=r"[1-9][0-9]{1,2}[af]?",
    arch_help='the CUDA compute capability without the dot, as text: "80" for A100',
    build_host_arch="90",
    build_host_arch_why=("no GPU here: compile-only default sm_90 (the H100/H200 machines "
                         "that run what is built here; CUDA 13 targets sm_75 and newer)"),
    spack_variant="+cuda",
    spack_arch_variant="cuda_arch",
    toolkit_packages=("cuda",),
    mpi_aware_variant="cuda",
    runtime_failure="cuda failure",
    toolkit_compiler="nvcc",
    # "Cuda compilation tools, release 12.9, V12.9.86"
    toolkit_version=VersionQuery(("nvcc", "--version"), r"release [\d.]+, V([\d.]+)"),
    driver_version=VersionQuery(
        ("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"), r"^(\S+)"),
    driver_stub=DriverStub(
        library="libcuda.so.1", stub="libcuda.so",
        stub_dirs=("lib64/stubs", "lib/stubs", "targets/x86_64-linux/lib/stubs")),
    # The CUDA driver API of libcuda.so.1 (cuda.h): the driver's library, so that no
    # toolkit is needed on the node.
    host_copy=HostCopyApi(
        library="libcuda.so.1", init="cuInit", device_count="cuDeviceGetCount",
        device_get="cuDeviceGet", context_retain="cuDevicePrimaryCtxRetain",
        context_set="cuCtxSetCurrent", context_release="cuDevicePrimaryCtxRelease",
        alloc="cuMemAlloc_v2", free="cuMemFree_v2", to_device="cuMemcpyHtoD_v2",
        to_host="cuMemcpyDtoH_v2", error_string="cuGetErrorString"),
    collective="NCCL",
    collective_package="nccl",
    collective_variant="+nccl",
    collective_tests_package="nccl-tests",
    collective_tests_arch=True,
    buffer_flag="cuda",
    omb_title_tag="-CUDA",
    ucx_memory="cuda",
    ucx_copy_transport="cuda_copy",
    ucx_ipc_transport="cuda_ipc",
    ucx_module="cuda",
    device_link="nvlink",
    gdr_copy=True,
    ceiling_package="nvbandwidth",
    babelstream_model="cuda",
    probe_command=("nvidia-smi", "--query-gpu=index,name,compute_cap,pci.bus_id",
                   "--format=csv,noheader"),
    probe_parse=_parse_nvidia_smi,
    reframe_feature="nvgpu",
    device_arch_prefix="sm_",
    gpu_modules=("cuda", "nccl"),
    # NCCL uses dma-buf where the GPU and the NIC's stack support it (NCCL_DMABUF_ENABLE,
    # src/transport/net_ib.cc), else nvidia_peermem; UCX likewise.
    gpudirect=("nvidia_peermem", "dmabuf"),
)

AMD = Accelerator(
    vendor="amd",
    # ROCmPackage.amdgpu_targets: gfx90a (MI250X), gfx942 (MI300X), gfx950 (MI355X)...
    arch_pattern=r"gfx[0-9]{2,3}[0-9a-f](:xnack[+-])?",
    arch_help="the LLVM AMDGPU target: gfx942 for MI300X, gfx950 for MI355X",
    build_host_arch="gfx942",
    build_host_arch_why="no GPU here: compile-only default gfx942 (MI300X)",
    spack_variant="+rocm",
    spack_arch_variant="amdgpu_target",
    # hip's dependencies in spack-packages releases/v2025.11 (hip/package.py, for
    # 6.3 to 7.0): what /opt/rocm of the image provides.
    toolkit_packages=("hip", "hipcc", "hsa-rocr-dev", "llvm-amdgpu", "comgr", "rocminfo",
                      "rocm-core", "roctracer-dev-api", "hipify-clang",
                      "rocprofiler-register", "rocm-cmake"),
    mpi_aware_variant="rocm",
    runtime_failure="cuda failure",   # rccl-tests' HIPCHECK message, as nccl-tests words it
    toolkit_compiler=None,      # Spack's detection of hip reports /opt/rocm itself
    # hipconfig --version: "6.4.43484-123eb6fb5" (HIP's version, ROCm's release)
    toolkit_version=VersionQuery(("hipconfig", "--version"), r"^(\d+\.\d+\.\d+)"),
    # amd-smi version: "AMDSMI Tool: ... | ROCm version: 6.4.1 | amdgpu version: 6.12.12"
    # (ROCm/amdsmi, amdsmi_cli VersionCommands.version: the amdgpu part by default)
    driver_version=VersionQuery(("amd-smi", "version"), r"amdgpu version: ([\w.-]+)"),
    driver_stub=None,
    host_copy=None,             # HIP has no primary-context calls: not measured yet
    collective="RCCL",
    collective_package="rccl",
    collective_variant="+rccl",       # OMB 7.4 configure --enable-rcclomb; ucc +rccl
    collective_tests_package="rccl-tests",
    collective_tests_arch=False,
    buffer_flag="rocm",
    omb_title_tag="-ROCM",
    ucx_memory="rocm",
    ucx_copy_transport="rocm_copy",
    ucx_ipc_transport="rocm_ipc",
    ucx_module="rocm",
    device_link="xgmi",     # 7 links per MI300X (rocm.blogs.amd.com, mi300x-rccl-xgmi)
    gdr_copy=False,
    # ROCm/system-acceptance-docs (mi300x.md) measures peer-to-peer with TransferBench;
    # rocm-bandwidth-test is the nvbandwidth-like sweep.  Both are builtin packages.
    ceiling_package="transferbench",
    # HIP: AMD's acceptance runs hip-stream (system-validation.md, "BabelStream")
    babelstream_model="hip",
    probe_command=("amd-smi", "static", "--asic", "--bus", "--json"),
    probe_parse=None,   # the AMD shapes' helper writes it (issue 24 item 4)
    reframe_feature="amdgpu",
    device_arch_prefix="gfx",
    gpu_modules=("hip", "rccl"),
    # RCCL's net_ib.cc (ncclIbGdrSupport) looks for amdkfd's peer-memory registration
    # (/sys/kernel/mm/memory_peers/amdkfd/version), and uses dma-buf where
    # NCCL_DMABUF_ENABLE allows; OCI turns dma-buf off on BM.GPU.MI355X.8.
    gpudirect=("amd_peermem", "dmabuf"),
    # perftest +rocm: AMD's GPU-to-NIC acceptance runs ib_write_bw --use_rocm
    # (ROCm/system-acceptance-docs, docs/network/rdma-benchmarking.md)
    perftest_gpu=True,
    arch_required=True,
)

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
