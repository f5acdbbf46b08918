"""The AMD row: ROCm, RCCL, amd-smi and amdgpu's kernel log."""

from __future__ import annotations

import json
import re
from typing import Any

from .row import (
    ARCH,
    Accelerator,
    DmabufProbe,
    GpuMemory,
    GpuMemoryQuery,
    KernelLogScan,
    PeerMemory,
    ProbedGpu,
    ProbeFormatError,
    TicketEvidence,
    VersionQuery,
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
    # ROCmPackage recipes carry the target wherever +rocm is on: ROCmPackage
    # conflicts("amdgpu_target=none", when="+rocm") (Open MPI and UCC included).  UCX's
    # +rocm is its own variant (ucx is a CudaPackage only), without a target; rccl-tests
    # is no ROCmPackage and builds for the targets of its hip.
    spack_recipes={
        "openmpi": ("+rocm", ARCH),
        "ucx": ("+rocm",),
        "ucc": ("+rocm", "+rccl", ARCH),
        "osu-micro-benchmarks": ("+rocm", "+rccl", ARCH),   # --enable-rocm --enable-rcclomb
        # this project's perftest: AMD's GPU-to-NIC acceptance runs ib_write_bw
        # --use_rocm (ROCm/system-acceptance-docs, docs/network/rdma-benchmarking.md)
        "perftest": ("+rocm", ARCH),
        # HIP's model is +hip; only ROCmPackage's +rocm carries amdgpu_target
        "babelstream": ("+hip", "+rocm", ARCH),
        "rccl-tests": (),
    },
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
    # Where amdgpu's KFD shows its peer-memory registration, by kernel (RCCL's
    # src/transport/net_ib.cc ncclIbGdrSupport tries them in this order: Ubuntu 22.04's
    # 5.15, 22.04.4 HWE's 6.5, 24.04's 6.8).
    peer_memory=PeerMemory("amd_peermem", files=(
        "sys/kernel/mm/memory_peers/amdkfd/version", "sys/kernel/memory_peers/amdkfd/version",
        "sys/memory_peers/amdkfd/version"),
        none_found="amdkfd registers no peer memory (no memory_peers/amdkfd/version)"),
    # The ROCm runtime's answer (HSA_AMD_SYSTEM_INFO_DMABUF_SUPPORTED), which rocminfo
    # prints from ROCm 5.7 on: "DMAbuf Support:" padded to 25 columns, then YES or NO
    # (ROCm/rocminfo rocminfo.cc, DisplaySystemInfo).
    dmabuf_probe=DmabufProbe(query=VersionQuery(("rocminfo",),
                                                r"^DMAbuf Support:\s+(YES|NO)\s*$")),
    # perftest's src/rocm_memory.c (rocm_memory_init): "Using ROCm Device with ID: <n>, ..."
    perftest_gpu_banner=r"Using ROCm Device with ID:.*",
    gpu_memory=GpuMemoryQuery(
        name="bad_pages", command=("amd-smi", "bad-pages", "--json"),
        parse=_parse_amd_smi_bad_pages, healthy="no bad page pending or unreservable"),
    kernel_log=KernelLogScan(name="ras", read=_read_amdgpu_fatal,
                             looks_for="amdgpu's uncorrectable hardware error "
                                       "(ERREVENT_ATHUB_INTERRUPT)"),
    # amd-smi's static description of each GPU (firmware included) and its metrics;
    # amdgpu's kernel-log lines.
    ticket=TicketEvidence(
        tools=(("amd-smi-static.txt", ("amd-smi", "static")),
               ("amd-smi-metric.txt", ("amd-smi", "metric"))),
        kernel_words="amdgpu"),
)
