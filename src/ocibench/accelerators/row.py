"""What a vendor's row holds (:class:`Accelerator`) and the records its probes give."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

#: In a row's ``spack_recipes``: the variant naming the shape's target, as the row
#: spells it (:meth:`Accelerator.spack_arch`: ``cuda_arch=80``, ``amdgpu_target=gfx942``).
ARCH = "<arch>"


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


#: What a reader of a driver's file says: present (True), absent (False) or cannot
#: tell (None), and why in words (ocibench.node.preflight puts the kernel before them).
FileVerdict = tuple[Optional[bool], str]


@dataclass(frozen=True)
class DmabufProbe:
    """What says whether the GPU driver exports GPU memory as a dma-buf that the RDMA
    NIC registers (GPUDirect RDMA without a peer-memory module): a file the driver
    writes (``file``, read under the probed root, and its reader ``read``, given its
    text or None where there is no such file), or the runtime's own answer, which a
    tool prints (``query``: its first group, YES or NO).  One of the two."""

    file: str | None = None
    read: Callable[[str | None], FileVerdict] | None = None
    query: VersionQuery | None = None


@dataclass(frozen=True)
class PeerMemory:
    """How preflight tells that the GPU driver registers GPU memory with the RDMA stack
    through a peer-memory client (GPUDirect RDMA without dma-buf): the capability it is
    (ocibench.capabilities), and a kernel module that must be loaded (``module``) or the
    files one of which the driver writes where it registered (``files``, read under the
    probed root, in the order the collective library looks), with the words for none."""

    capability: str
    module: str | None = None
    files: tuple[str, ...] = ()
    none_found: str = "module not loaded"


class ProbeFormatError(ValueError):
    """A probe's output line that is not what the probe asked for."""


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory-error state as the vendor's query prints it: what makes it one
    to drain (``broken``: a row remap pending or failed, a page pending retirement or
    unreservable), or why its state cannot be read (``unread``), and what is only worth
    saying (``note``: pages retired as designed)."""

    gpu: int | str              # the GPU as the tool names it: its index or bus id
    broken: tuple[str, ...] = ()
    unread: str = ""
    note: str = ""


@dataclass(frozen=True)
class GpuMemoryQuery:
    """The healthcheck's memory-error item of a vendor: its name, the command and the
    reader of its output (ProbeFormatError: output it cannot read)."""

    name: str
    command: tuple[str, ...]
    parse: Callable[[str], list[GpuMemory]]
    #: What a healthy GPU's state is, for the evidence: "no remap pending or failed".
    healthy: str


@dataclass(frozen=True)
class MigMode:
    """One GPU's MIG mode as the vendor's query prints it: now, and after its next
    reset; "[N/A]" on a GPU without MIG."""

    gpu: str
    current: str
    pending: str


@dataclass(frozen=True)
class SramCounts:
    """One GPU's aggregate (lifetime) SRAM ECC error counts; None where the tool
    printed no count (N/A: ECC off, or a GPU that does not report it)."""

    gpu: str
    uncorrectable: int | None
    correctable: int | None


@dataclass(frozen=True)
class GpuModule:
    """One GPU's PCI address (as the tool prints it) and the module (its slot on the
    board, which the CDFP cables wire) the tool says it is in."""

    bus_id: str
    module: str


@dataclass(frozen=True)
class GpuClocks:
    """One GPU's graphics clocks in MHz as the tool prints them: the applications clock
    (the one the GPU runs a job at, which ``nvidia-smi -ac`` sets), its default, and
    the current one (low on an idle GPU); None where it printed no number (N/A)."""

    gpu: str
    applications: int | None
    default: int | None
    current: int | None


@dataclass(frozen=True)
class GpuQuery:
    """A per-GPU query of the node doctor's checks (ocibench.node.doctor): the command
    and the reader of its output (ProbeFormatError: output it cannot read)."""

    command: tuple[str, ...]
    parse: Callable[[str], list[Any]]
    #: What puts a GPU the check finds wrong right, for its evidence: "nvidia-smi -rac
    #: restores the default".
    fix: str = ""


@dataclass(frozen=True)
class KernelLogScan:
    """The healthcheck's kernel-log item of a vendor: the GPU driver's messages that
    take a GPU out of service until it is reset or the node rebooted.  ``read`` gives,
    for one line of the log, the GPU's PCI address and the error's words, or None."""

    name: str
    read: Callable[[str], tuple[str, str] | None]
    #: What is looked for, for the evidence of a clean log: "Xid 48, 79, 94, 95".
    looks_for: str
    #: The fault code a failure names, where the check is another's (OCI's node doctor)
    fault: str = ""


@dataclass(frozen=True)
class TicketEvidence:
    """What a support ticket (ocibench.health.ticket) collects of the vendor's GPUs: each
    tool's output as a file of the archive's tools/ (``tools``: file name, command),
    run on a node whose shape has the vendor's GPUs; the query whose answer
    versions.txt gives as the GPUs' firmware (``firmware``); and, on every node whatever
    its shape says (a file read runs nothing, and a wrong shape is what a ticket may
    be about), the file in which the driver says its version (``driver_file``, under
    the node's root) and the words of the driver's kernel-log lines (``kernel_words``,
    a regular expression)."""

    tools: tuple[tuple[str, tuple[str, ...]], ...] = ()
    firmware: tuple[str, ...] | None = None
    driver_file: str | None = None
    kernel_words: str = ""


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
    #: The vendor's spellings: the variant that turns GPU support on (``+cuda``) and
    #: the one that names the target (``cuda_arch``).
    spack_variant: str
    spack_arch_variant: str
    #: Which recipes take which of the vendor's variants, in the order the scope writes
    #: them (:data:`ARCH`: the target); a recipe not listed has none of the vendor's
    #: variants and is built without GPU support.  Not one variant for every recipe:
    #: CudaPackage and ROCmPackage recipes share a shape, another vendor's need not
    #: (spack-packages' openmpi, ucx, ucc and OMB have no ``level_zero``; babelstream has
    #: ``+sycl2020``).  ocibench.spack.scopes reads nothing else of a row to choose them.
    spack_recipes: Mapping[str, tuple[str, ...]] = field(hash=False)
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
    #: UoB-HPC/BabelStream: IMPLEMENTATION_STRING); the recipe's variants for it are
    #: the row's ``spack_recipes["babelstream"]`` (its cmake_args: "+<model>" -> -DMODEL).
    babelstream_model: str

    # ---- the probe: a command listing index, model, arch and PCI bus id per GPU
    probe_command: tuple[str, ...]
    probe_parse: Callable[[str], list[ProbedGpu]] | None
    #: The links between the GPUs of a node (the ``device_link`` capability): a command
    #: and its reader, giving per GPU index (links up, links there); {} where it names
    #: no GPU.  Output it cannot read raises ProbeFormatError (ocibench.node.preflight).
    link_command: tuple[str, ...]
    link_parse: Callable[[str], dict[int, tuple[int, int]]]

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
    #: How preflight tells whether the driver exports GPU memory as a dma-buf.
    dmabuf_probe: DmabufProbe = DmabufProbe()
    #: How preflight tells the driver's peer-memory registration (one of ``gpudirect``),
    #: or None: the vendor has none.
    peer_memory: PeerMemory | None = None
    #: The line perftest prints when ``--use_<buffer_flag>`` put its buffers in this
    #: vendor's GPU memory (a regular expression of the whole line), whether or not the
    #: project's recipe builds it: a pasted output may come from any build.
    perftest_gpu_banner: str = ""
    #: The systemd unit that must run where a shape declares ``capabilities.fabric_manager``
    #: (GPUs meeting in switches), or None: the vendor has none.
    fabric_manager_service: str | None = None
    #: Whether the probe's model name is the product's, whatever the tool's release:
    #: then a name other than the shape's ``gpus.model`` is another GPU.  Where it is
    #: not, a name that differs from the shape's on the shape's architecture cannot
    #: tell (preflight says unknown), and only another architecture is another GPU.
    probe_model_stable: bool = True
    #: The healthcheck's memory-error query and kernel-log scan (ocibench.health.probes);
    #: None: the vendor has none, and the item is not probed on its GPUs.
    gpu_memory: GpuMemoryQuery | None = None
    kernel_log: KernelLogScan | None = None
    #: The node doctor's per-GPU queries (ocibench.node.doctor): MIG mode (MigMode per
    #: GPU) and SRAM ECC counts (SramCounts per GPU); None: not probed on its GPUs.
    mig_query: GpuQuery | None = None
    sram_query: GpuQuery | None = None
    #: Each GPU's module id (GpuModule per GPU): the CDFP cabling check.
    module_query: GpuQuery | None = None
    #: Each GPU's graphics clocks (GpuClocks per GPU): the GPU clock check.
    clock_query: GpuQuery | None = None
    #: The variable through which the vendor's runtime shows a process only some of the
    #: node's GPUs, renumbered from 0 in the order it lists them (its tool lists them
    #: all): the ``local`` shape describes what it leaves visible.  "": not read.
    visible_devices: str = ""
    #: What a support ticket collects of the vendor's GPUs (TicketEvidence); nothing
    #: where the row says nothing.
    ticket: TicketEvidence = TicketEvidence()

    def device_arch(self, arch: str) -> str:
        """ReFrame's ``devices[].arch``: ``sm_80`` for NVIDIA 80, ``gfx942`` as it is."""
        prefix = self.device_arch_prefix
        return arch if arch.startswith(prefix) else f"{prefix}{arch}"

    @property
    def babelstream_executable(self) -> str:
        """BabelStream's executable for the vendor's GPUs: ``hip-stream`` on AMD."""
        return f"{self.babelstream_model}-stream"

    def recipe_variants(self, recipe: str, arch: str) -> tuple[str, ...] | None:
        """The variants of ``recipe`` for this vendor's GPUs of target ``arch``
        (``spack_recipes``, :data:`ARCH` spelled out); None where the recipe has none."""
        variants = self.spack_recipes.get(recipe)
        if variants is None:
            return None
        return tuple(self.spack_arch(arch) if v == ARCH else v for v in variants)

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
