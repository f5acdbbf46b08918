"""Compare this node with its shape file: what the documented figures depend on.

Each probe is a small function of the filesystem root (``/`` on a node; a fake tree
of ``sys``/``proc``/``dev`` in the tests) and the shape's expectations, and returns
one :class:`Item`: *present*, *absent* or *unexpected* (there, but not as the shape
says), with the evidence (the file read or the command run).  A probe never raises
for a missing tool, device or file: that item is absent, and says why.

What a shape requires comes from its ``capabilities:`` mapping (the vocabulary of
ocibench.capabilities: gdrdrv, xpmem, nvidia_peermem, cma, nvlink, pcie, rdma); a
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

import os
import re
import resource
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from ocibench import capabilities, shapes
from ocibench.capabilities import CAPABILITIES

PRESENT, ABSENT, UNEXPECTED = "present", "absent", "unexpected"

#: Seconds a probed command may run (gdrcopy's sanity runs a few seconds per GPU).
TIMEOUT_S = 30
SANITY_TIMEOUT_S = 300

#: PCIe transfer rate per lane (GT/s, as sysfs prints it) -> generation (PCI-SIG).
PCIE_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
#: CAP_SYS_PTRACE (linux/capability.h): lets a process ptrace, hence process_vm_readv
#: (CMA), any process of its user whatever Yama's ptrace_scope says.
CAP_SYS_PTRACE = 19

#: UCX's loadable transport modules a capability needs (``uct_MODULES`` and
#: ``uct_cuda_MODULES`` in ``ucx_info -b``; src/uct/*/configure.m4 of openucx/ucx).
UCX_MODULE_FOR = {"gdrdrv": "gdrcopy", "xpmem": "xpmem", "cma": "cma", "rdma": "ib",
                  "gpus": "cuda"}
#: The transport ``ucx_info -d`` lists when the module works on this node.
UCX_TRANSPORT_FOR = {"gdrdrv": "gdr_copy", "xpmem": "xpmem", "cma": "cma",
                     "gpus": "cuda_copy", "rdma": "rc_verbs"}


@dataclass
class Item:
    """One probed item: its state on this node against the shape."""

    name: str
    status: str        # PRESENT, ABSENT or UNEXPECTED
    detail: str        # what was found, or why not
    evidence: str      # the file read or the command run
    required: bool = False

    @property
    def missing(self) -> bool:
        return self.required and self.status != PRESENT

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
    rdma_devices: list[str]        # "mlx5_6:1", from network.ucx_net_devices

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_numa)

    def requires(self, capability: str) -> bool:
        return self.binding and capabilities.present(self.capabilities.get(capability))


def expectations(shape: shapes.Shape) -> Expectations:
    data = shape.data
    # The shape file's declaration is the one source (ocibench.capabilities): a shape
    # that declares nothing requires nothing of its nodes.
    caps = dict(data.get("capabilities") or {})
    devices = (shape.gpus or {}).get("devices") or []
    # "mlx5_6:1" names an RDMA device and port; "ocbnet0" (a plain interface) does not.
    rdma = [d for d in shape.ucx_net_devices.values() if re.fullmatch(r"[\w-]+:\d+", str(d))]
    return Expectations(
        shape=shape.name,
        binding=bool(data["software"]["compilers"]),
        gpu_model=(shape.gpus or {}).get("model"),
        gpu_numa=[int(d["numa_node"]) for d in sorted(devices, key=lambda d: d["index"])],
        capabilities=caps,
        rdma_devices=sorted(set(rdma)) if caps.get("rdma") else [],
    )


# --------------------------------------------------------------------------- helpers


@dataclass
class Ran:
    """A command's outcome; ``why`` is set when it could not give an answer."""

    command: str
    out: str = ""
    why: str = ""


def run(args: list[str], timeout: float = TIMEOUT_S) -> Ran:
    command = " ".join(args)
    if not shutil.which(args[0]):
        return Ran(command, why=f"{args[0]} not on PATH")
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                              check=False, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        return Ran(command, why=f"{args[0]} ran past {timeout:.0f} s")
    except OSError as err:
        return Ran(command, why=f"{args[0]} cannot run: {err.strerror}")
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        return Ran(command, out=done.stdout, why=f"exit {done.returncode}: {last[0][:200]}")
    return Ran(command, out=done.stdout)


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text(errors="replace")
    except OSError:
        return None


def _sysfs_bdf(bus_id: str) -> str:
    """nvidia-smi's 00000000:0F:00.0 as sysfs names it: 0000:0f:00.0."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}"


@dataclass
class Gpu:
    index: int
    name: str
    bdf: str


def list_gpus() -> tuple[list[Gpu], Ran]:
    ran = run(["nvidia-smi", "--query-gpu=index,name,pci.bus_id", "--format=csv,noheader"])
    gpus = []
    for line in ran.out.splitlines() if not ran.why else []:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[0].isdigit():
            gpus.append(Gpu(int(fields[0]), fields[1], _sysfs_bdf(fields[2])))
    return gpus, ran


# --------------------------------------------------------------------------- probes
# Each probe: (root, expectations, gpus) -> Item.


def probe_gpus(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    found, ran = gpus
    required = exp.binding and exp.gpu_count > 0
    wanted = (f"{exp.gpu_count}x {exp.gpu_model}" if exp.gpu_count
              else "none (the shape has no GPUs)")
    if ran.why or not found:
        why = ran.why or "nvidia-smi lists no GPU"
        return Item("gpus", ABSENT, f"{why}; the shape: {wanted}", ran.command, required)
    models = sorted({g.name for g in found})
    have = f"{len(found)}x {', '.join(models)}"
    if exp.gpu_count and (len(found) != exp.gpu_count or models != [exp.gpu_model]):
        return Item("gpus", UNEXPECTED, f"{have}; the shape: {wanted}", ran.command, required)
    if not exp.gpu_count and exp.binding:
        return Item("gpus", UNEXPECTED, f"{have}; the shape: {wanted}", ran.command)
    return Item("gpus", PRESENT, have, ran.command, required)


_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.+)$")


def probe_nvlink(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    want = int(exp.capabilities.get("nvlink") or 0)
    required = exp.requires("nvlink")
    ran = run(["nvidia-smi", "nvlink", "--status"])
    if ran.why:
        return Item("nvlink", ABSENT, ran.why, ran.command, required)
    active: dict[int, int] = {}
    total: dict[int, int] = {}
    gpu = None
    for line in ran.out.splitlines():
        if m := _NVLINK_GPU.match(line):
            gpu = int(m.group(1))
            active[gpu] = total[gpu] = 0
        elif (m := _NVLINK_LINK.match(line)) and gpu is not None:
            total[gpu] += 1
            # an inactive link prints "<inactive>" instead of its rate
            active[gpu] += "inactive" not in m.group(2).lower()
    if not any(active.values()):
        return Item("nvlink", ABSENT, "no active NVLink on any GPU", ran.command, required)
    per_gpu = ", ".join(f"GPU {g}: {active[g]}/{total[g]}" for g in sorted(active))
    short = [g for g in active if active[g] < max(want, total[g])]
    if short:
        wanted = f"; the shape: {want} per GPU" if want else ""
        return Item("nvlink", UNEXPECTED, f"active/links {per_gpu}{wanted}", ran.command,
                    required)
    return Item("nvlink", PRESENT, f"active/links {per_gpu}", ran.command, required)


def _pcie_gen(text: str | None) -> int | None:
    """'16.0 GT/s PCIe' (or '16 GT/s') -> 4; None when unreadable."""
    m = re.match(r"\s*([\d.]+)\s*GT/s", text or "")
    return PCIE_GEN_BY_GTS.get(float(m.group(1))) if m else None


def probe_pcie(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    want = exp.capabilities.get("pcie") or {}
    required = exp.requires("pcie")
    found, ran = gpus
    if ran.why or not found:
        return Item("pcie", ABSENT, ran.why or "no GPU", ran.command, required)
    parts, bad = [], []
    for g in found:
        base = f"sys/bus/pci/devices/{g.bdf}"
        vals = {k: _read(root, f"{base}/{k}") for k in (
            "current_link_speed", "max_link_speed", "current_link_width", "max_link_width")}
        gen_now, gen_max = _pcie_gen(vals["current_link_speed"]), _pcie_gen(vals["max_link_speed"])
        width_now = (vals["current_link_width"] or "").strip()
        width_max = (vals["max_link_width"] or "").strip()
        if None in (gen_now, gen_max) or not width_now.isdigit() or not width_max.isdigit():
            return Item("pcie", ABSENT, f"GPU {g.index}: no readable link speed and width",
                        f"read {root / base}", required)
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
    if ran.why or not found:
        return Item("gpu_numa", ABSENT, ran.why or "no GPU", ran.command, required)
    have, wrong = [], []
    for g in found:
        text = (_read(root, f"sys/bus/pci/devices/{g.bdf}/numa_node") or "").strip()
        node = int(text) if re.fullmatch(r"-?\d+", text) else None
        have.append(f"GPU {g.index}: {node if node is not None else '?'}")
        if exp.gpu_count and (g.index >= exp.gpu_count or node != exp.gpu_numa[g.index]):
            wrong.append(g.index)
    detail = "NUMA node of " + ", ".join(have)
    evidence = f"read {root / 'sys/bus/pci/devices'}/<bdf>/numa_node"
    if wrong:
        shape = ", ".join(f"GPU {i}: {n}" for i, n in enumerate(exp.gpu_numa))
        return Item("gpu_numa", UNEXPECTED, f"{detail}; the shape: {shape}", evidence, required)
    return Item("gpu_numa", PRESENT, detail, evidence, required)


def _device(name: str, root: Path, exp: Expectations) -> Item:
    path = f"dev/{name}"
    required = exp.requires(name)
    if (root / path).exists():
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
    if ran.why:
        item.status, item.detail = UNEXPECTED, f"{item.detail}, but {tool} failed: {ran.why}"
    else:
        item.detail += f"; {tool} passed"
    return item


def probe_xpmem(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    return _device("xpmem", root, exp)


def probe_nvidia_peermem(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    required = exp.requires("nvidia_peermem")
    modules = _read(root, "proc/modules")
    loaded = (modules is not None and any(line.split(" ", 1)[0] == "nvidia_peermem"
                                          for line in modules.splitlines())) \
        or (root / "sys/module/nvidia_peermem").is_dir()
    evidence = f"read {root / 'proc/modules'}, {root / 'sys/module/nvidia_peermem'}"
    if loaded:
        return Item("nvidia_peermem", PRESENT, "module loaded", evidence, required)
    return Item("nvidia_peermem", ABSENT, "module not loaded", evidence, required)


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
    if scope is None:
        return Item("cma", PRESENT, "allowed: no Yama", evidence, required)
    level = scope.strip()
    if level == "0":
        return Item("cma", PRESENT, "allowed: Yama ptrace_scope 0", evidence, required)
    status = _read(root, "proc/self/status") or ""
    evidence += f", {root / 'proc/self/status'} CapEff"
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.MULTILINE)
    if level in ("1", "2") and m and int(m.group(1), 16) >> CAP_SYS_PTRACE & 1:
        return Item("cma", PRESENT, f"allowed: Yama ptrace_scope {level}, with CAP_SYS_PTRACE",
                    evidence, required)
    return Item("cma", ABSENT, f"restricted: Yama ptrace_scope {level} without CAP_SYS_PTRACE "
                "(sysctl kernel.yama.ptrace_scope=0 allows it)", evidence, required)


def probe_memlock(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """RLIMIT_MEMLOCK: RDMA registers (pins) buffers; a limit fails large registrations."""
    required = exp.binding and bool(exp.capabilities.get("rdma"))
    limits = _read(root, "proc/self/limits")
    if limits is not None:
        evidence = f"read {root / 'proc/self/limits'}"
        m = re.search(r"^Max locked memory\s+(\S+)", limits, re.MULTILINE)
        soft = m.group(1) if m else "?"
    else:
        evidence = "resource.getrlimit(RLIMIT_MEMLOCK)"
        value = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
        soft = "unlimited" if value == resource.RLIM_INFINITY else str(value)
    if soft == "unlimited":
        return Item("memlock", PRESENT, "unlimited", evidence, required)
    return Item("memlock", UNEXPECTED, f"{soft} bytes; RDMA wants unlimited "
                "(ulimit -l unlimited, /etc/security/limits.conf)", evidence, required)


def probe_rdma_device(device: str) -> Callable[..., Item]:
    def probe(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
        name, _, port = device.partition(":")
        rel = f"sys/class/infiniband/{name}/ports/{port}/state"
        state = _read(root, rel)
        evidence = f"read {root / rel}"
        if state is None:
            return Item(f"rdma {device}", ABSENT, f"no port {port} of {name}", evidence,
                        exp.binding)
        if "ACTIVE" not in state:
            return Item(f"rdma {device}", UNEXPECTED, f"port state {state.strip()}", evidence,
                        exp.binding)
        return Item(f"rdma {device}", PRESENT, state.strip(), evidence, exp.binding)
    return probe


def _needed(exp: Expectations, table: dict[str, str]) -> list[str]:
    """What UCX must have for the capabilities the shape requires."""
    names = [c for c in table if c != "gpus" and exp.requires(c)]
    if exp.binding and exp.gpu_count:
        names.append("gpus")
    return [table[c] for c in names]


def probe_ucx_built(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    needed = _needed(exp, UCX_MODULE_FOR)
    ran = run(["ucx_info", "-b"])
    if ran.why:
        return Item("ucx built", ABSENT, ran.why, ran.command, bool(needed))
    # '#define uct_MODULES ":ib:rdmacm:cma"', '#define uct_cuda_MODULES ":gdrcopy"'
    modules: list[str] = []
    for m in re.finditer(r'^#define uct\w*_MODULES\s+"([^"]*)"', ran.out, re.MULTILINE):
        modules += [x for x in m.group(1).split(":") if x]
    detail = f"transport modules {' '.join(modules) or 'none'}"
    lacking = [n for n in needed if n not in modules]
    if lacking:
        return Item("ucx built", UNEXPECTED, f"{detail}; lacks {' '.join(lacking)}",
                    ran.command, True)
    return Item("ucx built", PRESENT, detail, ran.command, bool(needed))


def probe_ucx_transports(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    needed = _needed(exp, UCX_TRANSPORT_FOR)
    ran = run(["ucx_info", "-d"])
    if ran.why:
        return Item("ucx transports", ABSENT, ran.why, ran.command, bool(needed))
    found = sorted(set(re.findall(r"^#\s+Transport:\s+(\S+)", ran.out, re.MULTILINE)))
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


def probe_ompi_cuda(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    required = exp.binding and exp.gpu_count > 0
    ran = run(["ompi_info", "--parsable", "--all"])
    if ran.why:
        return Item("openmpi cuda", ABSENT, ran.why, ran.command, required)
    values = _ompi_values(ran.out)
    # Open MPI 5: mpi_built_with_cuda_support; 4.1: opal_built_with_cuda_support.
    key = next((k for k in ("mpi_built_with_cuda_support", "opal_built_with_cuda_support")
                if k in values), None)
    if key is None:
        return Item("openmpi cuda", ABSENT, "ompi_info names no *_built_with_cuda_support",
                    ran.command, required)
    if values[key] == "true":
        return Item("openmpi cuda", PRESENT, f"{key} true", ran.command, required)
    return Item("openmpi cuda", ABSENT, f"{key} {values[key]}", ran.command, required)


def probe_ompi_pml(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran]) -> Item:
    """The PML MPI_Init will pick: the highest priority of those the `pml` parameter
    allows (``^ucx`` excludes; ``ucx,ob1`` includes), as mca_base_select does."""
    required = exp.binding and (exp.gpu_count > 0 or bool(exp.capabilities.get("rdma")))
    ran = run(["ompi_info", "--parsable", "--param", "pml", "all", "--level", "9"])
    if ran.why:
        return Item("openmpi pml", ABSENT, ran.why, ran.command, required)
    components = sorted(set(re.findall(r"^mca:pml:(\w+):version:", ran.out, re.MULTILINE)))
    values = _ompi_values(ran.out)
    setting = values.get("pml", "")
    names = [n for n in setting.lstrip("^").split(",") if n]
    allowed = [c for c in components if (c not in names if setting.startswith("^")
                                         else not names or c in names)]
    ranked = sorted(((int(values.get(f"pml_{c}_priority", "0") or 0), c) for c in allowed
                     if f"pml_{c}_priority" in values), reverse=True)
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
    probe_gpus, probe_nvlink, probe_pcie, probe_numa, probe_gdrdrv, probe_xpmem,
    probe_nvidia_peermem, probe_cma, probe_memlock, probe_ucx_built, probe_ucx_transports,
    probe_ompi_cuda, probe_ompi_pml,
)


@dataclass
class Preflight:
    shape: str
    root: str
    items: list[Item]

    @property
    def missing(self) -> list[Item]:
        return [i for i in self.items if i.missing]

    @property
    def ok(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "root": self.root, "ok": self.ok,
                "missing": [i.name for i in self.missing],
                "items": [{**asdict(i), "missing": i.missing} for i in self.items]}


def preflight(shape: shapes.Shape, root: Path = Path("/")) -> Preflight:
    exp = expectations(shape)
    gpus = list_gpus()
    probes = list(PROBES) + [probe_rdma_device(d) for d in exp.rdma_devices]
    return Preflight(shape.name, str(root), [p(root, exp, gpus) for p in probes])


def lacking(report: dict[str, Any]) -> set[str]:
    """The capabilities (ocibench.capabilities names) a ``preflight --json`` report found
    absent or not as the shape says: what a missed figure's ``requires`` is read against."""
    return set(absent(report))


def absent(report: dict[str, Any]) -> dict[str, str]:
    """:func:`lacking`, each with what preflight found: {"gdrdrv": "absent: no
    /dev/gdrdrv (kernel module not loaded)"}, as a missed figure's reason names it."""
    return {str(item["name"]): f"{item.get('status')}: {item.get('detail') or 'no detail'}"
            for item in report.get("items") or []
            if isinstance(item, dict) and item.get("name") in CAPABILITIES
            and item.get("status") != PRESENT}
