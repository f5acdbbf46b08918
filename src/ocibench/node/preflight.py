"""Compare this node with its shape file: what the documented figures depend on.

Each probe is a small function of the filesystem root (``/`` on a node; a fake tree
of ``sys``/``proc``/``dev`` in the tests) and the shape's expectations, and returns
one :class:`Item`: *present*, *absent*, *unexpected* (there, but not as the shape
says) or *unknown* (the probe could not tell), with the evidence (the file read or
the command run).  A probe never raises.  A missing tool, device or file is absent;
a file that is there but cannot be read (a directory, a link loop, no permission,
too large), a tool that failed, hung or printed something else than it was asked,
is unknown and says why: a probe that could not read never says present.

What a shape requires comes from its ``capabilities:`` mapping (the vocabulary of
ocibench.capabilities: gdrdrv, xpmem, nvidia_peermem, amd_peermem, dmabuf, cma, nvlink,
xgmi, pcie, rdma); a
shape file without one requires none of them.  A machine-described shape
(``local``: the shape file lists no compilers) requires nothing: every item is
informational.

Why these items: OCI's tech tip "gpu-with-ubuntu" (ocitutorials
``content/hpc/tech-knowhow/gpu-with-ubuntu``), whose stack the GPU seeds measured,
loads gdrdrv, XPMEM and nvidia_peermem and builds UCX ``--with-xpmem --with-cuda
--with-gdrcopy``; without them the seeds' GPU figures are out of reach
(docs/gpu-results.md, docs/preflight.md).
"""

from __future__ import annotations

import errno
import os
import re
import resource
import shutil
import stat
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ocibench import accelerators, capabilities, jsonfile, ladder, shapes
from ocibench.capabilities import (
    ABSENT,
    PRESENT,
    UCX_TRANSPORT_FOR,
    UNEXPECTED,
    UNKNOWN,
)
from ocibench.shapes import probe
from ocibench.shapes.probe import Ran

#: The most a probed file may hold: every file read here is a line or a short table
#: (/proc/self/status is about 1.5 KB).  A larger one is not what the probe expects.
MAX_READ = 1 << 16
#: A kernel's config (/boot/config-<release>) is about 300 KB.
MAX_CONFIG_READ = 1 << 21

#: Seconds a probed command may run (gdrcopy's sanity runs a few seconds per GPU).
TIMEOUT_S = 30
SANITY_TIMEOUT_S = 300

#: PCIe transfer rate per lane (GT/s, as sysfs prints it) -> generation (PCI-SIG).
PCIE_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
#: CAP_SYS_PTRACE (linux/capability.h): lets a process ptrace, hence process_vm_readv
#: (CMA), any process of its user whatever Yama's ptrace_scope says.
CAP_SYS_PTRACE = 19

#: UCX's loadable transport modules a capability needs (``uct_MODULES`` and
#: ``uct_<vendor>_MODULES`` in ``ucx_info -b``; src/uct/*/configure.m4 of openucx/ucx).
#: The GPUs' own module is their vendor's (accelerators: ``ucx_module``).
UCX_MODULE_FOR = {"gdrdrv": "gdrcopy", "xpmem": "xpmem", "cma": "cma", "rdma": "ib"}


@dataclass
class Item:
    """One probed item: its state on this node against the shape."""

    name: str
    status: str        # PRESENT, ABSENT, UNEXPECTED or UNKNOWN
    detail: str        # what was found, or why not
    evidence: str      # the file read or the command run
    required: bool = False

    @property
    def missing(self) -> bool:
        """Required and known not to be as the shape says (absent or unexpected)."""
        return self.required and self.status in (ABSENT, UNEXPECTED)

    @property
    def undecided(self) -> bool:
        """Required, and the probe could not tell: neither present nor missing."""
        return self.required and self.status == UNKNOWN

    def line(self) -> str:
        need = "required" if self.required else "not required"
        return f"{self.name}: {self.status} ({need}): {self.detail} [{self.evidence}]"


@dataclass
class Expectations:
    """What a shape says its nodes have."""

    shape: str
    binding: bool                  # False: nothing is required (machine-described shape)
    gpu_model: str | None
    gpu_numa: list[int]            # NUMA node of GPU i
    capabilities: dict[str, Any]   # ocibench.capabilities names -> declared value
    #: Every RDMA port to check (ocibench.node.rdma.Port): network.rdma_nics, then the
    #: RDMA ports of network.ucx_net_devices not among them.
    rdma_ports: list[Any]
    vendor: accelerators.Accelerator | None = None   # the GPUs' row, from gpus.vendor
    gpu_arch: str | None = None    # gpus.arch: "80", "gfx942"
    #: The shape's node_doctor section: OCI's node-doctor checks that apply to it
    #: (ocibench.node.doctor).
    doctor: dict[str, Any] = field(default_factory=dict)

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_numa)

    @property
    def rdma_devices(self) -> list[str]:
        """The ports' names, "mlx5_6:1": the items ``rdma <name>``."""
        return [p.name for p in self.rdma_ports]

    def requires(self, capability: str) -> bool:
        return self.binding and capabilities.present(self.capabilities.get(capability))


def expectations(shape: shapes.Shape) -> Expectations:
    from ocibench.node import rdma  # it reads files with this module's readers

    data = shape.data
    # The shape file's declaration is the one source (ocibench.capabilities): a shape
    # that declares nothing requires nothing of its nodes.
    caps = dict(data.get("capabilities") or {})
    devices = (shape.gpus or {}).get("devices") or []
    ports = rdma.ports_of(data, shape.ucx_net_devices, shape.gid_index) \
        if caps.get("rdma") or shape.rdma_nics else []
    return Expectations(
        shape=shape.name,
        binding=bool(data["software"]["compilers"]),
        gpu_model=(shape.gpus or {}).get("model"),
        gpu_numa=[int(d["numa_node"]) for d in sorted(devices, key=lambda d: d["index"])],
        capabilities=caps,
        rdma_ports=ports,
        vendor=accelerators.of(shape.gpus),
        gpu_arch=str((shape.gpus or {}).get("arch") or "") or None,
        doctor=dict(data.get("node_doctor") or {}),
    )


# --------------------------------------------------------------------------- helpers


def run(args: list[str], timeout: float | None = None) -> Ran:
    """A probed tool's outcome, bounded in time (default :data:`TIMEOUT_S`) and output
    (ocibench.shapes.probe.run_tool)."""
    return probe.run_tool(args, TIMEOUT_S if timeout is None else timeout)


def _tool_item(name: str, ran: Ran, required: bool) -> Item:
    """The item of a tool that gave no answer: absent when it is not installed (what it
    belongs to is not on this node), unknown when it failed, hung or could not start."""
    return Item(name, ABSENT if ran.missing else UNKNOWN, ran.why, ran.command, required)


@dataclass
class Read:
    """A probed file: its text; or ``why`` it could not be read (unknown); neither
    when it does not exist."""

    text: str | None = None
    why: str | None = None

    @property
    def missing(self) -> bool:
        return self.text is None and self.why is None


def _read(root: Path, rel: str, limit: int = MAX_READ) -> Read:
    """A small file under the probed root, read bounded and never blocking.

    Not there (no such file, a parent that is no directory): missing.  There but
    unreadable (no permission, a directory, a link loop or a link to nothing, a
    device or FIFO, larger than :data:`MAX_READ`): ``why``.  Opened non-blocking
    and checked to be a regular file (as /proc and /sys files are), so that a FIFO
    or /dev/zero in its place neither blocks nor fills memory."""
    path = root / rel
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if os.path.lexists(path):
            return Read(why=f"{path} is a link to nothing")
        return Read()
    except NotADirectoryError:
        return Read()
    except OSError as err:
        return Read(why=f"cannot read {path}: {_strerror(err)}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Read(why=f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(limit + 1)
    except OSError as err:
        return Read(why=f"cannot read {path}: {_strerror(err)}")
    finally:
        os.close(fd)
    if len(raw) > limit:
        return Read(why=f"{path} is larger than {limit} bytes: not the file expected")
    return Read(text=raw.decode("utf-8", errors="replace"))


def _shown(read: Read) -> str:
    """What a read gave, for a detail: why not, 'missing', or its first characters."""
    if read.why:
        return read.why
    return "missing" if read.missing else repr((read.text or "").strip()[:40])


def _strerror(err: OSError) -> str:
    return err.strerror or errno.errorcode.get(err.errno or 0, str(err))


def _exists(root: Path, rel: str) -> bool | str:
    """Whether ``rel`` exists under the root (a link is followed); the reason as text
    where that cannot be told (no permission to look, a link loop)."""
    try:
        os.stat(root / rel)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as err:
        return f"cannot look at {root / rel}: {_strerror(err)}"
    return True


def _sysfs_bdf(bus_id: str) -> str:
    """A probe's PCI address as sysfs names it: nvidia-smi's 00000000:0F:00.0 and
    amd-smi's 0000:0c:00.0 are 0000:0f:00.0 and 0000:0c:00.0 (each vendor's reader
    matched it: hex digits only, so the path stays in sys/bus/pci/devices)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}"


@dataclass
class Gpu:
    index: int
    name: str
    bdf: str
    arch: str = ""


def list_gpus(vendor: accelerators.Accelerator | None,
              timeout: float | None = None) -> tuple[list[Gpu], Ran]:
    """The GPUs the vendor's probe lists (its row's command and reader, the same as
    the local shape's probe uses; ``timeout``: the healthcheck's shorter one).  Output
    the reader does not know (a driver message on stdout with exit 0, a changed format)
    sets ``why``: the GPUs are then unknown, not absent.  No vendor (a CPU shape): every
    vendor's listing is asked (:func:`any_gpus`), so a GPU the shape does not declare is
    seen, whoever made it."""
    return _vendor_gpus(vendor, timeout) if vendor else any_gpus(timeout)[1]


def any_gpus(timeout: float | None = None
             ) -> tuple[accelerators.Accelerator | None, tuple[list[Gpu], Ran]]:
    """The GPUs of a node whose shape names no vendor, and the vendor whose tool listed
    them: the first tool of the vendor table that lists GPUs, else the first installed
    one's answer (no GPU, or why it gave none: its vendor), else no tool of any vendor
    (no vendor; ``missing``, each tool named)."""
    answers = [(row, _vendor_gpus(row, timeout)) for row in accelerators.VENDORS.values()]
    listed = next((a for a in answers if a[1][0]), None) \
        or next((a for a in answers if not a[1][1].missing), None)
    if listed:
        return listed
    rans = [ran for _row, (_found, ran) in answers]
    return None, ([], Ran(" / ".join(r.command for r in rans),
                          why="; ".join(r.why for r in rans), missing=True))


def _vendor_gpus(vendor: accelerators.Accelerator,
                 timeout: float | None) -> tuple[list[Gpu], Ran]:
    ran = run(list(vendor.probe_command), timeout)
    if ran.why:
        return [], ran
    if vendor.probe_parse is None:
        ran.why = f"no reader of its output for {vendor.vendor} GPUs (ocibench.accelerators)"
        return [], ran
    try:
        found = vendor.probe_parse(ran.out)
    except accelerators.ProbeFormatError as err:
        ran.why = str(err)
        return [], ran
    return [Gpu(g.index, g.model, _sysfs_bdf(g.bus_id), g.arch) for g in found], ran


# --------------------------------------------------------------------------- probes
# Each probe: (root, expectations, gpus) -> Item.


def probe_gpus(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    found, ran = gpus
    required = exp.binding and exp.gpu_count > 0
    wanted = (f"{exp.gpu_count}x {exp.gpu_model}" if exp.gpu_count
              else "none (the shape has no GPUs)")
    if ran.why:
        status = ABSENT if ran.missing else UNKNOWN
        return Item("gpus", status, f"{ran.why}; the shape: {wanted}", ran.command, required)
    if not found:
        return Item("gpus", ABSENT, f"{ran.command} lists no GPU; the shape: {wanted}",
                    ran.command, required)
    models = sorted({g.name for g in found})
    have = f"{len(found)}x {', '.join(models)}"
    if not exp.gpu_count:
        if exp.binding:
            return Item("gpus", UNEXPECTED, f"{have}; the shape: {wanted}", ran.command)
        return Item("gpus", PRESENT, have, ran.command, required)
    if len(found) != exp.gpu_count:
        return Item("gpus", UNEXPECTED, f"{have}; the shape: {wanted}", ran.command, required)
    if models == [exp.gpu_model]:
        return Item("gpus", PRESENT, have, ran.command, required)
    archs = sorted({g.arch for g in found})
    shape_arch = (exp.gpu_arch or "").split(":")[0]   # gfx942:xnack- is a gfx942
    if exp.vendor is not None and not exp.vendor.probe_model_stable and archs == [shape_arch]:
        # the tool's name for a model changed across its releases: the count and the
        # architecture hold, whether this is the shape's model cannot be told
        return Item("gpus", UNKNOWN, f"{have} ({shape_arch}); the shape: {wanted}: the "
                    f"same count and architecture, under a name {ran.command.split()[0]} "
                    "of some release prints for it, or another model", ran.command,
                    required)
    return Item("gpus", UNEXPECTED, f"{have} ({', '.join(archs)}); the shape: {wanted} "
                f"({exp.gpu_arch})", ran.command, required)


def probe_device_link(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
                      timeout: float | None = None) -> Item:
    """The links between the GPUs (NVLink, xGMI: the vendor's ``device_link``), by the
    vendor's link command and reader, against the shape's count per GPU."""
    vendor = _row(exp)
    name = vendor.device_link
    label = capabilities.describe(name).split()[0]   # "NVLink", "xGMI"
    want = int(exp.capabilities.get(name) or 0)
    required = exp.requires(name)
    listed, listing = gpus
    if listing.why and not listing.missing:
        # the GPU tool already failed or hung: do not wait for it a second time
        return Item(name, UNKNOWN, f"{listing.command} gave no GPU list: {listing.why}",
                    listing.command, required)
    ran = run(list(vendor.link_command), timeout)
    if ran.why:
        return _tool_item(name, ran, required)
    try:
        links = vendor.link_parse(ran.out)
    except accelerators.ProbeFormatError as err:
        return Item(name, UNKNOWN, str(err), ran.command, required)
    if not links and listed:
        # the tool names every GPU it lists, even one without links
        first = next((line.strip() for line in ran.out.splitlines() if line.strip()),
                     "nothing")
        return Item(name, UNKNOWN, f"printed {first[:80]!r}, not the {label} links of a GPU",
                    ran.command, required)
    if not any(up for up, _ in links.values()):
        return Item(name, ABSENT, f"no active {label} on any GPU", ran.command, required)
    per_gpu = ", ".join(f"GPU {g}: {links[g][0]}/{links[g][1]}" for g in sorted(links))
    short = [g for g, (up, there) in links.items() if up < max(want, there)]
    if short:
        wanted = f"; the shape: {want} per GPU" if want else ""
        return Item(name, UNEXPECTED, f"active/links {per_gpu}{wanted}", ran.command,
                    required)
    return Item(name, PRESENT, f"active/links {per_gpu}", ran.command, required)


def _pcie_gen(text: str | None) -> int | None:
    """'16.0 GT/s PCIe' (or '16 GT/s') -> 4; None for anything else ('Unknown', a
    rate no generation has, garbage)."""
    m = re.match(r"\s*([0-9]{1,3}(?:\.[0-9]{1,3})?)\s*GT/s", text or "")
    return PCIE_GEN_BY_GTS.get(float(m.group(1))) if m else None


def probe_pcie(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    want = exp.capabilities.get("pcie") or {}
    required = exp.requires("pcie")
    found, ran = gpus
    if ran.why:
        return _tool_item("pcie", ran, required)
    if not found:
        return Item("pcie", ABSENT, "no GPU", ran.command, required)
    parts, bad = [], []
    for g in found:
        base = f"sys/bus/pci/devices/{g.bdf}"
        vals = {k: _read(root, f"{base}/{k}") for k in (
            "current_link_speed", "max_link_speed", "current_link_width", "max_link_width")}
        texts = {k: (v.text or "").strip() for k, v in vals.items()}
        gen_now = _pcie_gen(texts["current_link_speed"])
        gen_max = _pcie_gen(texts["max_link_speed"])
        width_now, width_max = texts["current_link_width"], texts["max_link_width"]
        if None in (gen_now, gen_max) or not re.fullmatch(r"[0-9]{1,2}", width_now) \
                or not re.fullmatch(r"[0-9]{1,2}", width_max):
            # the GPU is there (its tool lists it): a link nobody can read is unknown
            shown = ", ".join(f"{k} {_shown(v)}" for k, v in vals.items())
            return Item("pcie", UNKNOWN, f"GPU {g.index}: no readable link speed and width "
                        f"({shown})", f"read {root / base}", required)
        parts.append(f"GPU {g.index}: Gen{gen_now} x{width_now} (max Gen{gen_max} x{width_max})")
        # An idle GPU lowers its link speed to save power, so the generation is judged
        # by its maximum; a narrower link than the slot's is a fault (seating, riser).
        if (want and (gen_max < int(want["gen"]) or int(width_now) < int(want["width"]))) \
                or int(width_now) < int(width_max):
            bad.append(g.index)
    detail = "; ".join(parts)
    where = f"read {root / 'sys/bus/pci/devices'}/<bdf>/{{current,max}}_link_{{speed,width}}"
    if bad:
        wanted = f"; the shape: Gen{want['gen']} x{want['width']}" if want else ""
        return Item("pcie", UNEXPECTED, f"{detail}{wanted}", where, required)
    return Item("pcie", PRESENT, detail, where, required)


def probe_numa(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    required = exp.binding and exp.gpu_count > 0
    found, ran = gpus
    if ran.why:
        return _tool_item("gpu_numa", ran, required)
    if not found:
        return Item("gpu_numa", ABSENT, "no GPU", ran.command, required)
    have, wrong, unread = [], [], []
    for g in found:
        read = _read(root, f"sys/bus/pci/devices/{g.bdf}/numa_node")
        text = (read.text or "").strip()
        node = int(text) if re.fullmatch(r"-?[0-9]{1,6}", text) else None
        have.append(f"GPU {g.index}: {node if node is not None else '?'}")
        if node is None:
            unread.append(f"GPU {g.index}: {_shown(read)}")
        elif exp.gpu_count and (g.index >= exp.gpu_count or node != exp.gpu_numa[g.index]):
            wrong.append(g.index)
    detail = "NUMA node of " + ", ".join(have)
    evidence = f"read {root / 'sys/bus/pci/devices'}/<bdf>/numa_node"
    if unread:
        return Item("gpu_numa", UNKNOWN, f"{detail}; unreadable: {'; '.join(unread)}",
                    evidence, required)
    if wrong:
        shape = ", ".join(f"GPU {i}: {n}" for i, n in enumerate(exp.gpu_numa))
        return Item("gpu_numa", UNEXPECTED, f"{detail}; the shape: {shape}", evidence, required)
    return Item("gpu_numa", PRESENT, detail, evidence, required)


def _device(name: str, root: Path, exp: Expectations) -> Item:
    path = f"dev/{name}"
    required = exp.requires(name)
    exists = _exists(root, path)
    if isinstance(exists, str):
        return Item(name, UNKNOWN, exists, f"stat {root / path}", required)
    if exists:
        if exp.binding and exp.capabilities.get(name) is False:
            return Item(name, UNEXPECTED, f"/{path} exists; the shape says its nodes have none",
                        f"stat {root / path}")
        return Item(name, PRESENT, f"/{path} exists", f"stat {root / path}", required)
    return Item(name, ABSENT, f"no /{path} (kernel module not loaded)", f"stat {root / path}",
                required)


def probe_gdrdrv(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    item = _device("gdrdrv", root, exp)
    if item.status != PRESENT:
        return item
    # gdrcopy >= 2.4 installs its tests as gdrcopy_sanity; older releases as sanity.
    tool = next((t for t in ("gdrcopy_sanity", "sanity") if shutil.which(t)), None)
    if tool is None:
        item.detail += "; gdrcopy's sanity not on PATH (not run)"
        return item
    ran = run([tool], timeout=SANITY_TIMEOUT_S)
    item.evidence += f"; ran `{ran.command}`"
    if ran.timed_out:
        item.status, item.detail = UNKNOWN, f"{item.detail}, but {tool} gave no answer: {ran.why}"
    elif ran.why:
        # it ran and said no: the module is there but does not work
        item.status, item.detail = UNEXPECTED, f"{item.detail}, but {tool} failed: {ran.why}"
    else:
        item.detail += f"; {tool} passed"
    return item


def probe_xpmem(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    return _device("xpmem", root, exp)


def probe_peer_memory(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """The GPU driver's peer-memory registration, as the vendor's row says to tell it
    (``peer_memory``: nvidia_peermem loaded; amdkfd's memory_peers file): the item is
    the row's capability."""
    way = _row(exp).peer_memory
    assert way is not None   # preflight() runs it only for a row that has one
    required = exp.requires(way.capability)
    if way.module:
        loaded = _module_loaded(root, way.module)
        evidence = f"read {root / 'proc/modules'}, {root / 'sys/module' / way.module}"
        if isinstance(loaded, str):
            return Item(way.capability, UNKNOWN, loaded, evidence, required)
        if loaded:
            return Item(way.capability, PRESENT, "module loaded", evidence, required)
        return Item(way.capability, ABSENT, way.none_found, evidence, required)
    evidence = "read " + ", ".join(str(root / rel) for rel in way.files)
    found = [(rel, _exists(root, rel)) for rel in way.files]
    there = next((rel for rel, seen in found if seen is True), None)
    if there:
        return Item(way.capability, PRESENT, f"/{there}", evidence, required)
    unread = [seen for _, seen in found if isinstance(seen, str)]
    if unread:
        return Item(way.capability, UNKNOWN, "; ".join(unread), evidence, required)
    return Item(way.capability, ABSENT, way.none_found, evidence, required)


def _module_loaded(root: Path, module: str) -> bool | str:
    """Whether a kernel module is loaded: in /proc/modules, or /sys/module/<name>
    exists (a module built into the kernel is only there).  Why not, as text, where
    neither could be read."""
    modules = _read(root, "proc/modules")
    if modules.text is not None and any(line.split(" ", 1)[0] == module
                                        for line in modules.text.splitlines()):
        return True
    in_sys = _exists(root, f"sys/module/{module}")
    if in_sys is True:
        return True
    if modules.text is None and (modules.why or isinstance(in_sys, str)):
        return "; ".join(w for w in (modules.why, in_sys if isinstance(in_sys, str) else None)
                         if w) or "cannot read the loaded modules"
    return False


#: What GPUDirect RDMA through dma-buf needs of a node, as NCCL and UCX detect it:
#: the CUDA driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (NCCL's dmaBufSupported in
#: src/init.cc, CUDA 11.7 or later; UCX's uct_cuda_copy_md_is_dmabuf_supported), which
#: only the NVIDIA open kernel module sets, from R515 on; and a kernel whose RDMA core
#: registers a dma-buf (ib_umem_dmabuf, Linux 5.12; NCCL's ncclIbDmaBufSupport tries
#: ibv_reg_dmabuf_mr).  Without CUDA here, preflight reads what decides that attribute.
DMABUF_KERNEL = (5, 12)


def probe_dmabuf(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """GPUDirect RDMA through dma-buf: kernel 5.12 or later, a GPU driver that exports
    its memory as a dma-buf (the vendor's ``dmabuf_probe``: NVIDIA's open kernel module
    R515 or later, read in its version file; ROCm's runtime, as rocminfo says it), and
    CONFIG_DMA_SHARED_BUFFER where the kernel's config is installed
    (/boot/config-<release>)."""
    required = exp.requires("dmabuf")
    way = _row(exp).dmabuf_probe
    release_file = "proc/sys/kernel/osrelease"
    evidence = f"read {root / release_file}" + (f", {root / way.file}" if way.file else "")
    release = _read(root, release_file)
    if release.text is None:
        why = release.why or f"no {root / release_file}"
        return Item("dmabuf", UNKNOWN, f"kernel release unknown: {why}", evidence, required)
    kernel = release.text.strip()
    m = re.match(r"([0-9]{1,3})\.([0-9]{1,3})", kernel)
    if not m:
        return Item("dmabuf", UNKNOWN, f"kernel release reads {kernel[:40]!r}", evidence,
                    required)
    if (int(m.group(1)), int(m.group(2))) < DMABUF_KERNEL:
        return Item("dmabuf", ABSENT, f"kernel {kernel} is older than 5.12 (no dma-buf "
                    "registration for RDMA)", evidence, required)
    if way.file:
        driver = _driver_file_says_dmabuf(root, way, kernel)
    else:
        assert way.query is not None   # accelerators.DmabufProbe: one of the two
        driver = _runtime_says_dmabuf(way.query, kernel)
    status, detail, ran = driver
    if status != PRESENT:
        return Item("dmabuf", status, detail, evidence + ran, required)
    config_file = f"boot/config-{kernel}"
    if "/" not in kernel and kernel not in (".", ".."):
        config = _read(root, config_file, limit=MAX_CONFIG_READ)
        evidence += f", {root / config_file}"
        if config.why:
            return Item("dmabuf", UNKNOWN, f"{detail}; {config.why}", evidence + ran,
                        required)
        if config.text is not None:
            if not re.search(r"^CONFIG_DMA_SHARED_BUFFER=y$", config.text, re.MULTILINE):
                return Item("dmabuf", ABSENT, f"{detail}; but the kernel is built without "
                            "CONFIG_DMA_SHARED_BUFFER", evidence + ran, required)
            detail += ", CONFIG_DMA_SHARED_BUFFER=y"
        else:
            # Every distribution kernel since 5.12 selects it (DRM needs it); the GPU
            # drivers that export dma-bufs do not build without it.  Said, not guessed.
            detail += f" (no /{config_file}: CONFIG_DMA_SHARED_BUFFER not read)"
    return Item("dmabuf", PRESENT, detail, evidence + ran, required)


def _driver_file_says_dmabuf(root: Path, way: accelerators.DmabufProbe,
                             kernel: str) -> tuple[str, str, str]:
    """(status, detail, a tool run's evidence: none) of the driver's file, as the
    vendor's reader judges it (NVIDIA's: the open kernel module R515 or later)."""
    assert way.file is not None and way.read is not None   # accelerators.DmabufProbe
    driver = _read(root, way.file)
    if driver.why:
        return UNKNOWN, driver.why, ""
    says, words = way.read(driver.text)
    if says is None:
        return UNKNOWN, words, ""
    if not says:
        return ABSENT, f"kernel {kernel}; {words}", ""
    return PRESENT, f"kernel {kernel} (5.12 or later), {words}", ""


def _runtime_says_dmabuf(query: accelerators.VersionQuery,
                         kernel: str) -> tuple[str, str, str]:
    """(status, detail, the tool's evidence) of the GPU runtime's own answer, YES or NO,
    as a tool prints it (rocminfo's "DMAbuf Support:" line)."""
    ran = run(list(query.command))
    more = f"; ran `{ran.command}`"
    if ran.why:
        # not installed: no runtime that could export GPU memory; failed or hung: unknown
        return ABSENT if ran.missing else UNKNOWN, f"kernel {kernel}; {ran.why}", more
    m = re.search(query.pattern, ran.out, re.MULTILINE)
    if not m:
        first = next((line.strip() for line in ran.out.splitlines() if line.strip()),
                     "nothing")
        return UNKNOWN, (f"kernel {kernel}; {query.command[0]} printed no dma-buf answer "
                         f"(first line {first[:60]!r})"), more
    said = f"{query.command[0]}: DMAbuf Support {m.group(1)}"
    if m.group(1) != "YES":
        return ABSENT, f"kernel {kernel}; {said}", more
    return PRESENT, f"kernel {kernel} (5.12 or later), {said}", more


def probe_cma(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """Cross Memory Attach: process_vm_readv between a user's processes.

    Yama (Documentation/admin-guide/LSM/Yama.rst): ptrace_scope 0 lets a process
    attach to any of its user's processes; 1 only to its descendants, 2 only with
    CAP_SYS_PTRACE, 3 never.  No Yama file: no Yama, classic ptrace rules, allowed.
    """
    required = exp.requires("cma")
    scope_file = "proc/sys/kernel/yama/ptrace_scope"
    scope = _read(root, scope_file)
    evidence = f"read {root / scope_file}"
    if scope.why:
        # there, but not readable: Yama may restrict CMA; nothing says it does not
        return Item("cma", UNKNOWN, scope.why, evidence, required)
    if scope.text is None:
        return Item("cma", PRESENT, "allowed: no Yama", evidence, required)
    level = scope.text.strip()
    if level not in ("0", "1", "2", "3"):
        return Item("cma", UNKNOWN, f"Yama ptrace_scope reads {level[:40]!r}, not 0 to 3",
                    evidence, required)
    if level == "0":
        return Item("cma", PRESENT, "allowed: Yama ptrace_scope 0", evidence, required)
    if level == "3":
        return Item("cma", ABSENT, "restricted: Yama ptrace_scope 3 (no ptrace at all, "
                    "until reboot)", evidence, required)
    status = _read(root, "proc/self/status")
    evidence += f", {root / 'proc/self/status'} CapEff"
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]{1,16})\s*$", status.text or "", re.MULTILINE)
    if not m:
        why = status.why or ("missing" if status.missing else "no CapEff line")
        return Item("cma", UNKNOWN, f"Yama ptrace_scope {level}, and this process's "
                    f"capabilities are unknown ({root / 'proc/self/status'}: {why})",
                    evidence, required)
    if int(m.group(1), 16) >> CAP_SYS_PTRACE & 1:
        return Item("cma", PRESENT, f"allowed: Yama ptrace_scope {level}, with CAP_SYS_PTRACE",
                    evidence, required)
    return Item("cma", ABSENT, f"restricted: Yama ptrace_scope {level} without CAP_SYS_PTRACE "
                "(sysctl kernel.yama.ptrace_scope=0 allows it)", evidence, required)


def probe_memlock(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """RLIMIT_MEMLOCK: RDMA registers (pins) buffers; a limit fails large registrations."""
    required = exp.binding and bool(exp.capabilities.get("rdma"))
    limits = _read(root, "proc/self/limits")
    if limits.why:
        return Item("memlock", UNKNOWN, limits.why, f"read {root / 'proc/self/limits'}",
                    required)
    if limits.text is not None:
        evidence = f"read {root / 'proc/self/limits'}"
        m = re.search(r"^Max locked memory\s+(\S+)", limits.text, re.MULTILINE)
        soft = m.group(1) if m else "?"
    else:
        evidence = "resource.getrlimit(RLIMIT_MEMLOCK)"
        value = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
        soft = "unlimited" if value == resource.RLIM_INFINITY else str(value)
    if soft == "unlimited":
        return Item("memlock", PRESENT, "unlimited", evidence, required)
    if not re.fullmatch(r"[0-9]{1,20}", soft):
        return Item("memlock", UNKNOWN, f"the soft limit reads {soft[:40]!r}", evidence,
                    required)
    return Item("memlock", UNEXPECTED, f"{soft} bytes; RDMA wants unlimited "
                "(ulimit -l unlimited, /etc/security/limits.conf)", evidence, required)


def _needed(exp: Expectations, table: dict[str, str], gpus: str | None) -> list[str]:
    """What UCX must have for the capabilities the shape requires, and ``gpus`` (the
    vendor's module or copy transport) where the shape has GPUs."""
    needed = [table[c] for c in table if exp.requires(c)]
    return needed + [gpus] if gpus and exp.binding and exp.gpu_count else needed


def probe_ucx_built(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    needed = _needed(exp, UCX_MODULE_FOR, exp.vendor and exp.vendor.ucx_module)
    ran = run(["ucx_info", "-b"])
    if ran.why:
        return _tool_item("ucx built", ran, bool(needed))
    # '#define uct_MODULES ":ib:rdmacm:cma"', '#define uct_cuda_MODULES ":gdrcopy"'
    modules: list[str] = []
    lines = list(re.finditer(r'^#define uct\w*_MODULES\s+"([^"]*)"', ran.out, re.MULTILINE))
    if not lines:
        return Item("ucx built", UNKNOWN, "printed no uct_MODULES line (not UCX's "
                    "build configuration)", ran.command, bool(needed))
    for m in lines:
        modules += [x for x in m.group(1).split(":") if x]
    detail = f"transport modules {' '.join(modules) or 'none'}"
    lacking = [n for n in needed if n not in modules]
    if lacking:
        return Item("ucx built", UNEXPECTED, f"{detail}; lacks {' '.join(lacking)}",
                    ran.command, True)
    return Item("ucx built", PRESENT, detail, ran.command, bool(needed))


def probe_ucx_transports(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    needed = _needed(exp, UCX_TRANSPORT_FOR, exp.vendor and exp.vendor.ucx_copy_transport)
    ran = run(["ucx_info", "-d"])
    if ran.why:
        return _tool_item("ucx transports", ran, bool(needed))
    found = sorted(set(re.findall(r"^#\s+Transport:\s+(\S+)", ran.out, re.MULTILINE)))
    if not found:
        # UCX always has its self transport: none listed is not UCX's answer
        return Item("ucx transports", UNKNOWN, "printed no Transport line", ran.command,
                    bool(needed))
    detail = " ".join(found) or "none"
    # any RC transport will do for RDMA (rc_verbs everywhere, rc_mlx5 on ConnectX)
    lacking = [n for n in needed if not (n in found or n == "rc_verbs"
                                         and any(t.startswith("rc_") for t in found))]
    if lacking:
        return Item("ucx transports", UNEXPECTED, f"{detail}; lacks {' '.join(lacking)}",
                    ran.command, True)
    return Item("ucx transports", PRESENT, detail, ran.command, bool(needed))


def _ompi_values(out: str) -> dict[str, str]:
    """'mca:pml:ucx:param:pml_ucx_priority:value:51' -> {'pml_ucx_priority': '51'}."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"^mca:[^:]+:[^:]+:param:([^:]+):value:(.*)$", out, re.MULTILINE)}


def probe_ompi_gpu(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """Whether Open MPI takes the GPUs' buffers: its ``<x>_built_with_<vendor>_support``
    parameter (the vendor's ``mpi_aware_variant``)."""
    vendor = _row(exp)
    item = f"openmpi {vendor.mpi_aware_variant}"
    required = exp.binding and exp.gpu_count > 0
    ran = run(["ompi_info", "--parsable", "--all"])
    if ran.why:
        return _tool_item(item, ran, required)
    values = _ompi_values(ran.out)
    if not values:
        return Item(item, UNKNOWN, "printed no mca:...:param: line (not "
                    "ompi_info --parsable)", ran.command, required)
    # Open MPI 5: mpi_built_with_<x>_support; 4.1: opal_built_with_<x>_support.
    param = f"built_with_{vendor.mpi_aware_variant}_support"
    key = next((k for k in (f"mpi_{param}", f"opal_{param}") if k in values), None)
    if key is None:
        return Item(item, ABSENT, f"ompi_info names no *_{param}", ran.command, required)
    if values[key] == "true":
        return Item(item, PRESENT, f"{key} true", ran.command, required)
    if values[key] != "false":
        return Item(item, UNKNOWN, f"{key} reads {values[key][:40]!r}",
                    ran.command, required)
    return Item(item, ABSENT, f"{key} false", ran.command, required)


def probe_ompi_pml(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """The PML MPI_Init will pick: the highest priority of those the `pml` parameter
    allows (``^ucx`` excludes; ``ucx,ob1`` includes), as mca_base_select does."""
    required = exp.binding and (exp.gpu_count > 0 or bool(exp.capabilities.get("rdma")))
    ran = run(["ompi_info", "--parsable", "--param", "pml", "all", "--level", "9"])
    if ran.why:
        return _tool_item("openmpi pml", ran, required)
    components = sorted(set(re.findall(r"^mca:pml:(\w+):version:", ran.out, re.MULTILINE)))
    values = _ompi_values(ran.out)
    if not components:
        return Item("openmpi pml", UNKNOWN, "printed no mca:pml:<component>:version: line",
                    ran.command, required)
    setting = values.get("pml", "")
    names = [n for n in setting.lstrip("^").split(",") if n]
    allowed = [c for c in components if (c not in names if setting.startswith("^")
                                         else not names or c in names)]
    priorities = {c: values[f"pml_{c}_priority"].strip() for c in allowed
                  if f"pml_{c}_priority" in values}
    garbled = {c: p for c, p in priorities.items() if not re.fullmatch(r"-?[0-9]{1,9}", p)}
    if garbled:
        shown = ", ".join(f"pml_{c}_priority {p[:20]!r}" for c, p in garbled.items())
        return Item("openmpi pml", UNKNOWN, f"a priority that is no number: {shown}",
                    ran.command, required)
    ranked = sorted(((int(p), c) for c, p in priorities.items()), reverse=True)
    pick = ranked[0][1] if ranked else "?"
    detail = (f"components {' '.join(components)}; pml={setting or '(unset)'}; "
              f"by priority: {pick}")
    if pick == "ucx" and values.get("pml_ucx_devices", "any") not in ("any", ""):
        detail += f" (only with a device matching pml_ucx_devices={values['pml_ucx_devices']})"
    if required and pick != "ucx":
        return Item("openmpi pml", UNEXPECTED, f"{detail}; the shape's transports need ucx",
                    ran.command, required)
    return Item("openmpi pml", PRESENT, detail, ran.command, required)


PROBES: tuple[Callable[..., Item], ...] = (
    probe_gpus, probe_device_link, probe_pcie, probe_numa, probe_gdrdrv, probe_xpmem,
    probe_peer_memory, probe_dmabuf, probe_cma, probe_memlock,
    probe_ucx_built, probe_ucx_transports, probe_ompi_gpu, probe_ompi_pml,
)
#: The probes of a vendor's stack, each asked as its row says: run only with a row (the
#: shape's vendor; on a shape without GPUs, the vendor whose tool lists some here).
VENDOR_PROBES = (probe_device_link, probe_peer_memory, probe_dmabuf, probe_ompi_gpu)


def _row(exp: Expectations) -> accelerators.Accelerator:
    assert exp.vendor is not None, "a vendor's probe without a vendor (VENDOR_PROBES)"
    return exp.vendor


@dataclass
class Preflight:
    shape: str
    root: str
    items: list[Item]

    @property
    def missing(self) -> list[Item]:
        return [i for i in self.items if i.missing]

    @property
    def undecided(self) -> list[Item]:
        """Required items the probes could not tell: neither present nor missing."""
        return [i for i in self.items if i.undecided]

    @property
    def ok(self) -> bool:
        """Every required item present: nothing missing and nothing unknown."""
        return not self.missing and not self.undecided

    @property
    def verdict(self) -> str:
        """"pass" (every required item present), "fail" (one is absent or not as the
        shape says) or "unjudged" (none missing, but one could not be read)."""
        return "fail" if self.missing else "unjudged" if self.undecided else "pass"

    def next_steps(self) -> list[dict[str, Any]]:
        """Each missing item's entry on the action ladder (ocibench.ladder): step, fault
        code, fix and the commands that show the evidence; an item of no entry says so."""
        steps = []
        for item in self.missing:
            decision = ladder.decide(ladder.PREFLIGHT, item.name, evidence=item.detail)
            steps.append({"item": item.name, **decision.to_dict()} if decision else
                         {"item": item.name, "step": None, "fault": None,
                          "fix": "no ladder entry (ocibench.ladder): report it"})
        return steps

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "root": self.root, "ok": self.ok,
                "verdict": self.verdict,
                "missing": [i.name for i in self.missing],
                "unknown": [i.name for i in self.undecided],
                "next": self.next_steps(),
                "items": [{**asdict(i), "missing": i.missing} for i in self.items]}


def preflight(shape: shapes.Shape, root: Path = Path("/")) -> Preflight:
    exp = expectations(shape)
    # A shape without GPUs names no vendor: its node's GPU items are those of the vendor
    # whose tool lists GPUs here, for information (none is required), and none where no
    # vendor's tool lists one.  No vendor is assumed.
    if exp.vendor:
        gpus, found = list_gpus(exp.vendor), exp
    else:
        seen, gpus = any_gpus()
        found = replace(exp, vendor=seen if gpus[0] else None)
    # they read files and run tools with this module's readers
    from ocibench.node import doctor, rdma

    probes = [p for p in PROBES if p not in VENDOR_PROBES
              or found.vendor and (p is not probe_peer_memory or found.vendor.peer_memory)]
    probes += [rdma.port_probe(p) for p in exp.rdma_ports]
    items = [p(root, found if p in VENDOR_PROBES else exp, gpus) for p in probes]
    items += doctor.items(root, exp, gpus)
    for group in capabilities.GPUDIRECT_GROUPS:
        _one_of(items, group)
    return Preflight(shape.name, str(root), items)


def _one_of(items: list[Item], group: tuple[str, ...]) -> None:
    """Where one capability of a group that stand in for each other (GPUDirect RDMA
    through nvidia_peermem or dma-buf) is present, the others are not required."""
    members = [i for i in items if i.name in group]
    have = next((i for i in members if i.status == PRESENT), None)
    if have is None:
        return
    for item in members:
        if item is not have and item.required:
            item.required = False
            item.detail += f" (not required: {have.name} is present, either will do)"


def read_report(path: Path | str) -> dict[str, Any]:
    """A ``preflight --json`` report from a file, bounded (ocibench.jsonfile); a
    ValueError with one line naming the file for anything else."""
    data = jsonfile.load(Path(path), limit=1 << 22)
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise jsonfile.JsonFileError(f"{path}: not an `ocibench preflight --json` report "
                                     "(no 'items' list)")
    return data
