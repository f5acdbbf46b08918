"""The NVIDIA row: CUDA, NCCL, nvidia-smi and the driver's kernel log."""

from __future__ import annotations

import re

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


#: mig.mode.current and mig.mode.pending as nvidia-smi prints them ("[N/A]" on a GPU
#: without MIG: nvidia-smi --help-query-gpu, "mig.mode.current").
_MIG_MODES = ("Enabled", "Disabled", "[N/A]", "N/A")


def _parse_mig_modes(out: str) -> list[MigMode]:
    """``nvidia-smi --query-gpu=uuid,mig.mode.current,mig.mode.pending
    --format=csv,noheader``: "GPU-ec84..., Enabled, Enabled" per GPU."""
    found = []
    for line in (raw.strip() for raw in out.splitlines() if raw.strip()):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not all(f in _MIG_MODES for f in fields[1:]):
            raise ProbeFormatError(f"printed {line[:80]!r}, not uuid, mig.mode.current, "
                                   "mig.mode.pending")
        found.append(MigMode(*fields))
    return found


#: "00000000:0F:00.0, 2": a GPU's bus id and module id ("[N/A]" where the board has none).
#: nvidia-smi -q: a GPU's section starts "GPU 00000000:0F:00.0" at the line's start;
#: its items are indented by four spaces per level ("    ECC Errors", "        Aggregate",
#: "            SRAM Uncorrectable Parity     : 0").
_SMI_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_SMI_ITEM = re.compile(r"^( *)(\S[^:]*?)\s*(?::\s*(.*?))?\s*$")


def _parse_module_ids(out: str) -> list[GpuModule]:
    """Each GPU's module (its slot on the board) in ``nvidia-smi -q``: the section
    "GPU 00000000:0F:00.0" and its "Module ID" (R535, at the section's first level) or
    "Module Id" (R580, under "Platform Info").  ``--query-gpu=module_id``, which OCI's
    doctor asks, is refused by R580 ('Field "module_id" is not a valid field to
    query', seen on an H200 node with 580.159.04).  "N/A": no module id."""
    found: list[GpuModule] = []
    bus_id = None
    for line in out.splitlines():
        if m := _SMI_GPU.match(line):
            bus_id = m.group(1)
            continue
        m = _SMI_ITEM.match(line)
        if bus_id and m and m.group(1) and m.group(2).lower() == "module id" and m.group(3):
            found.append(GpuModule(bus_id, m.group(3)))
            bus_id = None
    if not found:
        first = next((line.strip() for line in out.splitlines() if line.strip()), "nothing")
        raise ProbeFormatError(f"printed {first[:80]!r}, no GPU section with its Module Id")
    return found



def _parse_sram_counts(out: str) -> list[SramCounts]:
    """Each GPU's aggregate SRAM ECC counts in ``nvidia-smi -q -d ECC`` (or the whole
    ``-q``): under "ECC Errors", "Aggregate", the "SRAM Correctable" line and the
    uncorrectable ones, "SRAM Uncorrectable" (drivers before R535) or its "Parity" and
    "SEC-DED" parts (R535 on), which are summed, as OCI's doctor sums them.  "N/A" (ECC
    off, or a GPU that does not count them) in any part is no count."""
    gpus: dict[str, dict[str, int | None]] = {}
    gpu: dict[str, int | None] | None = None
    path: list[tuple[int, str]] = []
    for line in out.splitlines():
        if m := _SMI_GPU.match(line):
            gpu = gpus.setdefault(m.group(1), {})
            path = []
            continue
        m = _SMI_ITEM.match(line)
        if gpu is None or not m or not m.group(1):
            continue
        depth, name, value = len(m.group(1)), m.group(2), m.group(3)
        while path and path[-1][0] >= depth:
            path.pop()
        if value is None:
            path.append((depth, name))
            continue
        if [p for _, p in path] != ["ECC Errors", "Aggregate"] or \
                not name.startswith("SRAM ") or "Threshold" in name:
            continue
        kind = "correctable" if name == "SRAM Correctable" else \
            "uncorrectable" if name.startswith("SRAM Uncorrectable") else None
        if kind is None:
            continue
        if re.fullmatch(r"[0-9]{1,19}", value or ""):
            if kind not in gpu or gpu[kind] is not None:
                gpu[kind] = (gpu.get(kind) or 0) + int(value)
        elif value not in ("N/A", "[N/A]"):
            raise ProbeFormatError(f"printed {line.strip()[:80]!r}: not a count")
        else:
            gpu[kind] = None        # a part not counted: the sum is not known
    if not gpus:
        first = next((raw.strip() for raw in out.splitlines() if raw.strip()), "nothing")
        raise ProbeFormatError(f"printed {first[:80]!r}, no GPU section of nvidia-smi -q")
    return [SramCounts(bus, c.get("uncorrectable"), c.get("correctable"))
            for bus, c in gpus.items()]


#: The NVIDIA driver that sets CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: only the open
#: kernel module, from R515 on (NCCL's dmaBufSupported in src/init.cc, CUDA 11.7 or
#: later; UCX's uct_cuda_copy_md_is_dmabuf_supported).
DMABUF_DRIVER = 515
#: /proc/driver/nvidia/version, first line: "NVRM version: NVIDIA UNIX Open Kernel
#: Module for x86_64  570.124.06  Release Build ..." for the open module; "NVRM version:
#: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..." for the proprietary one.
_NVRM = re.compile(r"^NVRM version: NVIDIA UNIX (Open Kernel Module for )?.*?\s"
                   r"([0-9]{3,4})\.([0-9]{1,3})(?:\.[0-9]{1,3})?\s", re.MULTILINE)
_DRIVER_FILE = "proc/driver/nvidia/version"


def _read_nvrm_version(text: str | None) -> tuple[bool | None, str]:
    """Whether the loaded driver exports GPU memory as a dma-buf: the open kernel
    module R515 or later, as its version file says."""
    if text is None:
        return False, f"no NVIDIA driver loaded (no /{_DRIVER_FILE})"
    nvrm = _NVRM.search(text)
    if not nvrm:
        first = (text.strip().splitlines() or [""])[0]
        return None, f"/{_DRIVER_FILE} reads {first[:60]!r}, not an NVRM version line"
    version = f"{nvrm.group(2)}.{nvrm.group(3)}"
    if not nvrm.group(1):
        return False, (f"the NVIDIA kernel module {version} is the proprietary one (dma-buf "
                       "needs the open kernel module)")
    if int(nvrm.group(2)) < DMABUF_DRIVER:
        return False, f"NVIDIA open kernel module {version} is older than R{DMABUF_DRIVER}"
    return True, f"NVIDIA open kernel module {version}"


#: The sections of ``nvidia-smi -q -d CLOCK`` whose "Graphics" line GpuClocks keeps.
_CLOCK_SECTIONS = {"Applications Clocks": "applications",
                   "Default Applications Clocks": "default", "Clocks": "current"}


def _parse_clocks(out: str) -> list[GpuClocks]:
    """Each GPU's graphics clocks in ``nvidia-smi -q -d CLOCK`` (or the whole ``-q``):
    the "Graphics" line of its "Applications Clocks", "Default Applications Clocks"
    and "Clocks" sections ("1980 MHz"); "N/A" is no number."""
    gpus: dict[str, dict[str, int | None]] = {}
    gpu: dict[str, int | None] | None = None
    section = ""
    for line in out.splitlines():
        if m := _SMI_GPU.match(line):
            gpu, section = gpus.setdefault(m.group(1), {}), ""
            continue
        m = _SMI_ITEM.match(line)
        if gpu is None or not m or not m.group(1):
            continue
        depth, name, value = len(m.group(1)), m.group(2), m.group(3)
        if depth == 4:
            section = name if value is None else ""
        elif section in _CLOCK_SECTIONS and name == "Graphics":
            if number := re.fullmatch(r"([0-9]{1,6}) MHz", value or ""):
                gpu[_CLOCK_SECTIONS[section]] = int(number.group(1))
            elif value not in ("N/A", "[N/A]"):
                raise ProbeFormatError(f"printed {line.strip()[:80]!r}: not a clock")
    if not gpus:
        first = next((raw.strip() for raw in out.splitlines() if raw.strip()), "nothing")
        raise ProbeFormatError(f"printed {first[:80]!r}, no GPU section of nvidia-smi -q")
    return [GpuClocks(bus, c.get("applications"), c.get("default"), c.get("current"))
            for bus, c in gpus.items()]


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
    # CudaPackage recipes of spack-packages (and of this project's repository, which
    # overrides some): +cuda, cuda_arch where the build compiles GPU code for it.
    spack_recipes={
        "openmpi": ("+cuda",),                # seed 000 sec 1: device buffers
        "ucx": ("+cuda",),                    # gpu-with-ubuntu sec 3-1: --with-cuda
        # UCC without the arch, as the tech tip: its configure then builds for every
        # architecture the toolkit has (config/m4/cuda.m4)
        "ucc": ("+cuda", "+nccl"),
        "osu-micro-benchmarks": ("+cuda", "+nccl", ARCH),   # --enable-cuda --enable-ncclomb
        "gdrcopy": (ARCH,),
        "babelstream": ("+cuda", ARCH),       # the model's variant is CudaPackage's own
        "nccl-tests": (ARCH,),
        # perftest: this project's recipe builds for ROCm only
    },
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
    # NVIDIA Fabric Manager User Guide: the service of NVSwitch boards (HGX A100, H100, ...)
    fabric_manager_service="nvidia-fabricmanager",
    # Only the open kernel module sets CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, from R515
    # on; its version file's first line says which module is loaded (preflight).
    dmabuf_probe=DmabufProbe(file=_DRIVER_FILE, read=_read_nvrm_version),
    # the nvidia_peermem kernel module (NVIDIA's GPUDirect RDMA guide)
    peer_memory=PeerMemory("nvidia_peermem", module="nvidia_peermem"),
    gpu_memory=GpuMemoryQuery(
        name="row_remap",
        # nvidia-smi(1): --query-remapped-rows (Ampere and later)
        command=("nvidia-smi", "--query-remapped-rows=gpu_bus_id,remapped_rows.pending,"
                 "remapped_rows.failure", "--format=csv,noheader"),
        parse=_parse_remapped_rows, healthy="no remap pending or failed"),
    kernel_log=KernelLogScan(name="xid", read=_read_xid,
                             looks_for=f"Xid {', '.join(map(str, sorted(XIDS)))}"),
    # nvidia-smi(1): --query-gpu's mig.mode.current and mig.mode.pending (A100 and later)
    mig_query=GpuQuery(("nvidia-smi", "--query-gpu=uuid,mig.mode.current,mig.mode.pending",
                        "--format=csv,noheader"), _parse_mig_modes,
                       fix="nvidia-smi -mig 0, then a GPU reset"),
    # nvidia-smi(1): -q -d ECC prints the ECC section of -q alone
    sram_query=GpuQuery(("nvidia-smi", "-q", "-d", "ECC"), _parse_sram_counts),
    # each GPU section's Module Id (R580 refuses --query-gpu=module_id, OCI's way)
    module_query=GpuQuery(("nvidia-smi", "-q"), _parse_module_ids),
    # nvidia-smi(1): -q -d CLOCK prints the clock sections of -q alone
    clock_query=GpuQuery(("nvidia-smi", "-q", "-d", "CLOCK"), _parse_clocks,
                         fix="nvidia-smi -rac restores the default"),
    visible_devices="CUDA_VISIBLE_DEVICES",
    # What OCI's support asks of an NVIDIA host (docs/ladder.md): nvidia-smi -q and the
    # GPUs' topology; each GPU's driver and VBIOS; the kernel module's version line;
    # the driver's kernel-log lines (NVRM's, its Xid reports, a GPU off the bus).
    ticket=TicketEvidence(
        tools=(("nvidia-smi-q.txt", ("nvidia-smi", "-q")),
               ("nvidia-smi-topo.txt", ("nvidia-smi", "topo", "-m"))),
        firmware=("nvidia-smi", "--query-gpu=index,driver_version,vbios_version",
                  "--format=csv,noheader"),
        driver_file="proc/driver/nvidia/version",
        kernel_words=r"NVRM|Xid|fallen off the bus"),
)
