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

import json
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


@dataclass(frozen=True)
class DmabufProbe:
    """What says whether the GPU driver exports GPU memory as a dma-buf that the RDMA
    NIC registers (GPUDirect RDMA without a peer-memory module): a file the driver
    writes (``file``, read under the probed root), or the runtime's own answer, which
    a tool prints (``query``: its first group, YES or NO).  One of the two."""

    file: str | None = None
    query: VersionQuery | None = None


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
class KernelLogScan:
    """The healthcheck's kernel-log item of a vendor: the GPU driver's messages that
    take a GPU out of service until it is reset or the node rebooted.  ``read`` gives,
    for one line of the log, the GPU's PCI address and the error's words, or None."""

    name: str
    read: Callable[[str], tuple[str, str] | None]
    #: What is looked for, for the evidence of a clean log: "Xid 48, 79, 94, 95".
    looks_for: str


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
    #: Whether the project's perftest recipe builds for this vendor's GPUs (ib_write_bw
    #: --use_<buffer_flag>): its ``spack_variant`` and target variant exist there.
    perftest_gpu: bool = False
    #: The line perftest prints when ``--use_<buffer_flag>`` put its buffers in this
    #: vendor's GPU memory (a regular expression of the whole line), whether or not the
    #: project's recipe builds it: a pasted output may come from any build.
    perftest_gpu_banner: str = ""
    #: Whether the probe's model name is the product's, whatever the tool's release:
    #: then a name other than the shape's ``gpus.model`` is another GPU.  Where it is
    #: not, a name that differs from the shape's on the shape's architecture cannot
    #: tell (preflight says unknown), and only another architecture is another GPU.
    probe_model_stable: bool = True
    #: Whether every recipe built with ``spack_variant`` must also name the target:
    #: spack-packages' ROCmPackage conflicts("amdgpu_target=none", when="+rocm") (Open
    #: MPI and UCC included); CudaPackage has no such conflict.
    arch_required: bool = False
    #: The healthcheck's memory-error query and kernel-log scan (ocibench.health.probes);
    #: None: the vendor has none, and the item is not probed on its GPUs.
    gpu_memory: GpuMemoryQuery | None = None
    kernel_log: KernelLogScan | None = None

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


#: One GPU's line of ``nvidia-smi nvlink --status`` ("GPU 0: NVIDIA A100-SXM4-40GB
#: (UUID: ...)"), then one line per link ("\t Link 0: 25.781 GB/s", "<inactive>").
_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.+)$")


def _parse_nvlink_status(out: str) -> dict[int, tuple[int, int]]:
    """Active and present NVLinks per GPU: every "Link N:" line under "GPU i:" is a
    link; an inactive one prints "<inactive>" instead of its rate."""
    found: dict[int, tuple[int, int]] = {}
    gpu = None
    for line in out.splitlines():
        if m := _NVLINK_GPU.match(line):
            gpu = int(m.group(1))
            found[gpu] = (0, 0)
        elif (m := _NVLINK_LINK.match(line)) and gpu is not None:
            up, there = found[gpu]
            found[gpu] = (up + ("inactive" not in m.group(2).lower()), there + 1)
    return found


#: The Xid errors that take a GPU out of service (NVIDIA's "XID Errors" catalogue,
#: docs.nvidia.com/deploy/xid-errors): the GPU is gone or its memory is corrupt.
XIDS = {48: "double-bit ECC error", 79: "GPU has fallen off the bus",
        94: "contained ECC error", 95: "uncontained ECC error"}
#: The driver's line: "NVRM: Xid (PCI:0000:0f:00): 79, pid=..., GPU has fallen off the bus."
_XID = re.compile(r"NVRM: Xid \((PCI:[0-9A-Fa-f:.]+)\): (\d+)\b")


def _read_xid(line: str) -> tuple[str, str] | None:
    m = _XID.search(line)
    if not m or int(m.group(2)) not in XIDS:
        return None
    return m.group(1), f"Xid {m.group(2)} {XIDS[int(m.group(2))]}"


_YES, _NO = ("yes", "1"), ("no", "0")


def _parse_remapped_rows(out: str) -> list[GpuMemory]:
    """``nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,
    remapped_rows.failure --format=csv,noheader``: a row remap pending (the GPU needs a
    reset before the spare rows are used) or failed (no spare row left: the GPU must be
    replaced) breaks it; "[N/A]" is a GPU without a row remapper (before Ampere)."""
    found = []
    for line in (raw for raw in out.splitlines() if raw.strip()):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            raise ProbeFormatError(f"printed {line.strip()[:80]!r}, not bus id, pending, "
                                   "failure")
        bus, pending, failure = fields[0], fields[1].lower(), fields[2].lower()
        if pending in _YES or failure in _YES:
            found.append(GpuMemory(bus, tuple(
                w for w, v in (("remap pending", pending), ("remap failure", failure))
                if v in _YES)))
        elif pending in _NO and failure in _NO:
            found.append(GpuMemory(bus))
        else:
            found.append(GpuMemory(bus, unread=f"{fields[1]}, {fields[2]}"))
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
    link_command=("nvidia-smi", "nvlink", "--status"),
    link_parse=_parse_nvlink_status,
    reframe_feature="nvgpu",
    device_arch_prefix="sm_",
    gpu_modules=("cuda", "nccl"),
    # NCCL uses dma-buf where the GPU and the NIC's stack support it (NCCL_DMABUF_ENABLE,
    # src/transport/net_ib.cc), else nvidia_peermem; UCX likewise.
    gpudirect=("nvidia_peermem", "dmabuf"),
    # perftest's src/cuda_memory.c (cuda_memory_init): "initializing CUDA"
    perftest_gpu_banner=r"initializing CUDA",
    # Only the open kernel module sets CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, from R515
    # on; its version file's first line says which module is loaded (preflight).
    dmabuf_probe=DmabufProbe(file="proc/driver/nvidia/version"),
    gpu_memory=GpuMemoryQuery(
        name="row_remap",
        # nvidia-smi(1): --query-remapped-rows (Ampere and later)
        command=("nvidia-smi", "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,"
                 "remapped_rows.failure", "--format=csv,noheader"),
        parse=_parse_remapped_rows, healthy="no remap pending or failed"),
    kernel_log=KernelLogScan(name="xid", read=_read_xid,
                             looks_for=f"Xid {', '.join(map(str, sorted(XIDS)))}"),
)

def _amd_smi_json(out: str, what: str) -> Any:
    """amd-smi's JSON, or ProbeFormatError naming the first line printed."""
    try:
        return json.loads(out)
    except ValueError:
        first = next((line.strip() for line in out.splitlines() if line.strip()), "nothing")
        raise ProbeFormatError(f"printed {first[:80]!r}, not the JSON of {what}") from None


def _amd_smi_records(data: Any, what: str) -> list[dict[str, Any]]:
    """The per-GPU records of amd-smi's JSON: a list of them (amdsmi_logger
    _print_json_output: json.dumps(multiple_device_output), ROCm 6.x), or the same list
    under "gpu_data" (amdsmi_logger combine_arrays_to_json, amd-smi of ROCm 7)."""
    if isinstance(data, dict) and "gpu_data" in data:
        data = data["gpu_data"]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ProbeFormatError(f"printed JSON that is no list of GPUs ({what})")
    return data


def _field(record: dict[str, Any], section: str, key: str) -> str:
    """A text field of one GPU's record; "N/A" (what amd-smi prints for a value its
    library could not read: amdsmi_commands.py static()) or none is a format error."""
    part = record.get(section)
    value = part.get(key) if isinstance(part, dict) else None
    if not isinstance(value, str) or not value.strip() or value.strip() == "N/A":
        raise ProbeFormatError(f"printed no {section}.{key} for GPU {record.get('gpu')!r} "
                               f"({value!r})")
    return value.strip()


#: amd-smi's BDF (amdsmi_get_gpu_device_bdf: "0000:0c:00.0", domain:bus:device.function).
_BDF = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")


def _parse_amd_smi_static(out: str) -> list[ProbedGpu]:
    """``amd-smi static --asic --bus --json``: per GPU its "gpu" index, asic.market_name,
    asic.target_graphics_version ("gfx942"; printed from ROCm 6.3 on, amdsmi_interface
    amdsmi_get_gpu_asic_info) and bus.bdf."""
    what = "amd-smi static --asic --bus --json"
    found = []
    for record in _amd_smi_records(_amd_smi_json(out, what), what):
        index = record.get("gpu")
        if not isinstance(index, int) or isinstance(index, bool):
            raise ProbeFormatError(f"printed a GPU record without its \"gpu\" index "
                                   f"({sorted(record)[:6]})")
        model = _field(record, "asic", "market_name")
        arch = _field(record, "asic", "target_graphics_version")
        if AMD.arch_problem(arch):
            raise ProbeFormatError(f"printed target_graphics_version {arch[:40]!r} for GPU "
                                   f"{index}, not an LLVM AMDGPU target")
        bus = _field(record, "bus", "bdf")
        if not _BDF.fullmatch(bus):
            raise ProbeFormatError(f"printed bdf {bus[:40]!r} for GPU {index}, not a PCI "
                                   "address")
        found.append(ProbedGpu(index, model, arch, bus))
    return found


def _parse_amd_smi_topology(out: str) -> dict[int, tuple[int, int]]:
    """xGMI links per GPU from ``amd-smi topology -t --json``: the peers its link_type
    says XGMI.  From ROCm 6.1.1 each GPU's record lists "links", one per GPU with its
    "link_type" (SELF, PCIE, XGMI, N/A); ROCm 6.1.0 printed a "link_type" mapping
    {"gpu_1": "XGMI", ...} (amdsmi CHANGELOG, 6.1.1: "Updated amd-smi topology --json").
    The topology shows which peers are linked, not a link that is down: links up and
    links there are both the XGMI peers (on a fully connected board, MI300X, one link
    each)."""
    what = "amd-smi topology -t --json"
    found: dict[int, tuple[int, int]] = {}
    for record in _amd_smi_records(_amd_smi_json(out, what), what):
        index = record.get("gpu")
        links = record.get("links")
        if isinstance(links, list):
            types = [link.get("link_type") for link in links if isinstance(link, dict)
                     and link.get("gpu") != index]
        elif isinstance(record.get("link_type"), dict):
            types = [t for peer, t in record["link_type"].items() if peer != f"gpu_{index}"]
        else:
            types = [None]
        if not isinstance(index, int) or isinstance(index, bool) \
                or not all(isinstance(t, str) for t in types):
            raise ProbeFormatError(f"printed a GPU record without its index and each "
                                   f"peer's link_type ({json.dumps(record)[:80]})")
        xgmi = sum(t == "XGMI" for t in types)
        found[index] = (xgmi, xgmi)
    return found


#: amd-smi's word for a list it found empty (amdsmi_commands.py bad_pages():
#: bad_pages_not_found), and for a value its library could not read.
_NO_BAD_PAGES, _NOT_READ = "No bad pages found.", "N/A"
#: The bad pages that make a GPU one to drain, by the key amd-smi lists them under
#: (amdsmi.h amdsmi_memory_page_status_t): PENDING, "marked as bad and will be marked
#: reserved at the next window" (a reset; OCI's oci-hpc healthcheck, check_gpu_setup.py
#: check_bad_pages, fails a GPU on them), and UNRESERVABLE, "unable to reserve this
#: page": its retirement failed.  RESERVED pages ("retired") are retired as designed.
_BAD_PAGES = {"pending": "pending retirement", "un_res": "unreservable"}


def _pages(record: dict[str, Any], key: str) -> list[Any] | None:
    """The pages amd-smi lists under ``key`` of one GPU's record (none: "No bad pages
    found." or an empty list; one page: a mapping, which it prints without its list), or
    None where its library could not read them ("N/A")."""
    value = record.get(key)
    if value == _NOT_READ:
        return None
    if value == _NO_BAD_PAGES or value == []:
        return []
    pages = [value] if isinstance(value, dict) else value
    if not isinstance(pages, list) or not all(
            isinstance(p, dict) and "page_address" in p for p in pages):
        raise ProbeFormatError(f"printed {key} {json.dumps(value)[:60]} for GPU "
                               f"{record.get('gpu')!r}, not its bad pages")
    return pages


def _parse_amd_smi_bad_pages(out: str) -> list[GpuMemory]:
    """``amd-smi bad-pages --json``: per GPU its "gpu" index and its bad pages by
    status, "retired", "pending" and "un_res" (amdsmi_commands.py bad_pages(), stored
    flat in the GPU's record: amdsmi_logger _store_output_amdsmi); ROCm 7's "gpu_data"
    wrapper read as for the listing."""
    what = "amd-smi bad-pages --json"
    found = []
    for record in _amd_smi_records(_amd_smi_json(out, what), what):
        index = record.get("gpu")
        if not isinstance(index, int) or isinstance(index, bool) \
                or not all(k in record for k in ("retired", *_BAD_PAGES)):
            raise ProbeFormatError(f"printed a GPU record without its index and its "
                                   f"retired, pending and un_res pages "
                                   f"({json.dumps(record)[:80]})")
        pages = {k: _pages(record, k) for k in ("retired", *_BAD_PAGES)}
        unread = [k for k in _BAD_PAGES if pages[k] is None]
        broken = tuple(f"{len(p)} page{'s' if len(p) > 1 else ''} {_BAD_PAGES[k]} (first at "
                       f"{p[0]['page_address']})" for k, p in pages.items()
                       if k in _BAD_PAGES and p)
        retired = pages["retired"]
        note = f"{len(retired)} pages retired" if retired else ""
        found.append(GpuMemory(index, broken, unread=", ".join(
            f"{k} {_NOT_READ}" for k in unread), note=note))
    return found


#: amdgpu's fatal RAS event: an uncorrectable error raised the ATHUB interrupt and the
#: driver resets the GPU (Linux drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c,
#: amdgpu_ras_global_ras_isr: "uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT)
#: detected!", from 5.x with dev_info, later through RAS_EVENT_LOG with its event id
#: "{1}"), after the device's name: "amdgpu 0000:dd:00.0: ".  The newer RAS manager
#: writes "Uncorrectable" (amdgpu_ras_mgr's amdgpu_ras_sys_detect_fatal_event).
_AMDGPU_FATAL = re.compile(
    r"amdgpu ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): (?:amdgpu: )?"
    r"(?:\{\d+\} ?)?uncorrectable hardware error ?\(ERREVENT_ATHUB_INTERRUPT\)",
    re.IGNORECASE)


def _read_amdgpu_fatal(line: str) -> tuple[str, str] | None:
    m = _AMDGPU_FATAL.search(line)
    return (m.group(1), "uncorrectable hardware error (ERREVENT_ATHUB_INTERRUPT)") \
        if m else None


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
    probe_parse=_parse_amd_smi_static,
    # -t: the link type only (amdsmi_parser.py, topology --link-type, ROCm 6.1.1 on)
    link_command=("amd-smi", "topology", "-t", "--json"),
    link_parse=_parse_amd_smi_topology,
    # amd-smi's market_name is not the product's name in every release: "MI300X-O"
    # (rocm-blogs amd-smi-overview, Sep 2024), "MI308X" (amdsmi CHANGELOG, ROCm 6.3),
    # "AMD Instinct MI350X" (rocm-systems pull 2987, 2025).
    probe_model_stable=False,
    reframe_feature="amdgpu",
    device_arch_prefix="gfx",
    gpu_modules=("hip", "rccl"),
    # RCCL's net_ib.cc (ncclIbGdrSupport) looks for amdkfd's peer-memory registration
    # (/sys/kernel/mm/memory_peers/amdkfd/version), and uses dma-buf where
    # NCCL_DMABUF_ENABLE allows; OCI turns dma-buf off on BM.GPU.MI355X.8.
    gpudirect=("amd_peermem", "dmabuf"),
    # The ROCm runtime's answer (HSA_AMD_SYSTEM_INFO_DMABUF_SUPPORTED), which rocminfo
    # prints from ROCm 5.7 on: "DMAbuf Support:" padded to 25 columns, then YES or NO
    # (ROCm/rocminfo rocminfo.cc, DisplaySystemInfo).
    dmabuf_probe=DmabufProbe(query=VersionQuery(("rocminfo",),
                                                r"^DMAbuf Support:\s+(YES|NO)\s*$")),
    # perftest +rocm: AMD's GPU-to-NIC acceptance runs ib_write_bw --use_rocm
    # (ROCm/system-acceptance-docs, docs/network/rdma-benchmarking.md)
    perftest_gpu=True,
    # perftest's src/rocm_memory.c (rocm_memory_init): "Using ROCm Device with ID: <n>, ..."
    perftest_gpu_banner=r"Using ROCm Device with ID:.*",
    arch_required=True,
    gpu_memory=GpuMemoryQuery(
        name="bad_pages", command=("amd-smi", "bad-pages", "--json"),
        parse=_parse_amd_smi_bad_pages, healthy="no bad page pending or unreservable"),
    kernel_log=KernelLogScan(name="ras", read=_read_amdgpu_fatal,
                             looks_for="amdgpu's uncorrectable hardware error "
                                       "(ERREVENT_ATHUB_INTERRUPT)"),
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
