"""Describe the machine we run on, for the ``local`` shape.

The result has the same fields as a documented shape file, so every reader
(Spack config, ReFrame config, checks) treats ``local`` like any other shape.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import archspec.cpu

from ocibench import accelerators

#: Seconds a tool run while describing this machine may take: every command that loads
#: the ``local`` shape waits for it, so a hung nvidia-smi (a GPU fallen off the bus
#: hangs it in the driver) costs this much once, never forever.
PROBE_TIMEOUT_S = 10
#: The most output a probed tool may write (each stream); a tool that writes more is
#: killed by the kernel (RLIMIT_FSIZE) and its answer is unknown.
TOOL_OUTPUT_LIMIT = 16 * 2**20


@dataclass
class Ran:
    """A tool's outcome.  ``why`` is set when it gave no answer: not installed
    (``missing``), ran past its time, could not start or exited non-zero."""

    command: str
    out: str = ""
    why: str = ""
    missing: bool = False   # not on PATH: the tool (and what it belongs to) is not here
    timed_out: bool = False


def run_tool(args: list[str], timeout: float) -> Ran:
    """Run a probed tool with a time limit and bounded output, in its own process
    group, and never raise.

    ``subprocess.run(timeout=...)`` kills only the tool itself and then waits for its
    pipes to close: a wrapper script whose child still holds them open (``nvidia-smi``
    wrappers, ``timeout``-less shells) would hang the caller anyway.  Writing into
    files and killing the whole group bounds both the time and the memory.
    """
    command = " ".join(args)
    if not shutil.which(args[0]):
        return Ran(command, why=f"{args[0]} not on PATH", missing=True)

    def limit_output() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (TOOL_OUTPUT_LIMIT, TOOL_OUTPUT_LIMIT))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    env={**os.environ, "LC_ALL": "C"},
                                    start_new_session=True, preexec_fn=limit_output)
        except OSError as error:
            return Ran(command, why=f"{args[0]} cannot run: {error.strerror}")
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return Ran(command, why=f"{args[0]} ran past {timeout:g} s (killed)",
                       timed_out=True)
        _kill_group(proc)  # what the tool left running in its group
        text, error_text = _bounded(out), _bounded(err)
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else -code
        more = " (wrote more than it may)" if -code == signal.SIGXFSZ else ""
        return Ran(command, out=text, why=f"{args[0]} killed by {name}{more}")
    if code != 0:
        last = (error_text.strip() or text.strip()).splitlines()[-1:] or ["no output"]
        return Ran(command, out=text, why=f"exit {code}: {last[0][:200]}")
    return Ran(command, out=text)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass   # the group is gone already
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _bounded(stream: Any) -> str:
    stream.seek(0)
    return stream.read(TOOL_OUTPUT_LIMIT).decode("utf-8", errors="replace")


class ProbeError(RuntimeError):
    """What describing this machine could not read, in one line."""


def complete_local(data: dict[str, Any], unknown: list[str] | None = None) -> dict[str, Any]:
    """Fill the hardware fields of the local shape file from this machine.

    ``unknown`` collects, one line each, what could not be read (a GPU tool that
    hung or printed something else than it was asked): that part is left out of the
    description (no GPUs), and the line says why, rather than a guess.
    """
    merged = dict(data)
    merged["cpu"] = cpu()
    merged["memory"] = memory()
    try:
        merged["gpus"] = gpus(merged["cpu"]["numa_nodes"])
    except ProbeError as err:
        merged["gpus"] = None
        if unknown is not None:
            unknown.append(f"gpus: unknown: {err}")
    links = dict(merged.get("links") or {})
    row = accelerators.VENDORS.get((merged["gpus"] or {}).get("vendor"))
    if row and row.device_link == "nvlink" and len(merged["gpus"]["devices"]) > 1:
        try:
            rate = nvlink_gbs(row)
        except ProbeError as err:
            rate = None
            if unknown is not None:
                unknown.append(f"links.nvlink_gbs: unknown: {err}")
        if rate:
            links["nvlink_gbs"] = rate
    merged["links"] = links
    return merged


#: A link of ``nvidia-smi nvlink --status`` with its rate ("\t Link 0: 26.562 GB/s");
#: an inactive one prints "<inactive>".
_NVLINK_RATE = re.compile(r"^\s*Link \d+: ([0-9]{1,4}(?:\.[0-9]+)?) GB/s\s*$")
_NVLINK_GPU = re.compile(r"^GPU (\d+):")


def nvlink_gbs(row: accelerators.Accelerator) -> float | None:
    """NVLink of one GPU in GB/s per direction, the ``links.nvlink_gbs`` of a shape
    file, from the rates ``nvidia-smi nvlink --status`` prints for each active link:
    their sum, the least over the GPUs a process here may use (CUDA_VISIBLE_DEVICES).

    ``local`` then knows that its GPUs are NVLink-connected, as a documented shape
    says it, so that NCCL falling back to shared memory between them is the fault it
    is there (ocibench.figures.nccl_path.fault) rather than a path recorded as fine.
    None where a GPU has no active link (PCIe only, or a link down: the rule is then
    not applied; the preflight names a link down); ProbeError where the tool gives no
    answer.  The rates are what the links' command of the GPUs' row prints (``row``:
    ``link_command``, NVLink's where ``device_link`` is ``nvlink``)."""
    ran = run_tool(list(row.link_command), PROBE_TIMEOUT_S)
    if ran.missing:
        return None
    if ran.why:
        raise ProbeError(f"`{ran.command}`: {ran.why}")
    rates: dict[int, float] = {}
    gpu = None
    for line in ran.out.splitlines():
        if found := _NVLINK_GPU.match(line):
            gpu = int(found.group(1))
            rates[gpu] = 0.0
        elif (found := _NVLINK_RATE.match(line)) and gpu is not None:
            rates[gpu] += float(found.group(1))
    used = visible([_Link(index, rate) for index, rate in rates.items()], row.vendor)
    if len(used) < 2 or not all(link.gbs for link in used):
        return None
    return round(min(link.gbs for link in used), 1)


@dataclass(frozen=True)
class _Link:
    index: int   # the GPU's index as nvidia-smi lists it
    gbs: float   # its active links' rates, summed


def cpu() -> dict[str, Any]:
    """Sockets, physical cores and NUMA nodes from ``lscpu -p``."""
    ran = run_tool(["lscpu", "-p=CPU,CORE,SOCKET,NODE"], PROBE_TIMEOUT_S)
    if ran.why:
        raise ProbeError(f"`{ran.command}`: {ran.why}")
    out = ran.out
    cores: dict[int, tuple[int, int]] = {}  # core id -> (socket, numa node)
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) != 4 or not all(re.fullmatch(r"[0-9]*", f) for f in fields):
            raise ProbeError(f"`{ran.command}` printed {line[:80]!r}, not CPU,CORE,SOCKET,NODE")
        _cpu, core, socket, node = (int(f) if f else 0 for f in fields)
        cores.setdefault(core, (socket, node))
    if not cores:
        raise ProbeError(f"`{ran.command}` listed no CPU")
    # Renumber physical cores 0..n-1 so that ranges per NUMA node are contiguous.
    by_node: dict[int, list[int]] = {}
    socket_of: dict[int, int] = {}
    for index, core in enumerate(sorted(cores, key=lambda c: (cores[c][1], c))):
        socket, node = cores[core]
        by_node.setdefault(node, []).append(index)
        socket_of[node] = socket
    numa_nodes = [
        {"id": node, "socket": socket_of[node], "cores": [ids[0], ids[-1]]}
        for node, ids in sorted(by_node.items())
    ]
    logical = sum(1 for line in out.splitlines() if not line.startswith("#"))
    return {
        "model": _lscpu_field("Model name") or "unknown",
        "spack_target": archspec.cpu.host().name,
        "sockets": len(set(socket_of.values())),
        "cores": len(cores),
        "smt": logical > len(cores),
        "numa_nodes": numa_nodes,
    }


def memory() -> dict[str, Any]:
    kib = 0
    with open("/proc/meminfo", encoding="ascii", errors="replace") as meminfo:
        text = meminfo.read(1 << 16)
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            kib = int(line.split()[1])
    # The theoretical bandwidth of an unknown machine is not knowable from
    # software; figures are then reported without a fraction of the limit.
    return {"type": "unknown", "size_gib": round(kib / 2**20, 1), "bandwidth_gbs": None}


def gpus(numa_nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The GPUs from their vendor's probe (:mod:`ocibench.accelerators`), with the NUMA
    node of each one's PCIe slot.

    None when no vendor's probe tool is here (no driver: no GPU to describe);
    ProbeError when a probe is there but gives no answer: it failed, hung, or printed
    something else than what it was asked."""
    for vendor in accelerators.VENDORS.values():
        ran = run_tool(list(vendor.probe_command), PROBE_TIMEOUT_S)
        if ran.missing:
            continue
        if ran.why:
            raise ProbeError(f"`{ran.command}`: {ran.why}")
        if vendor.probe_parse is None:
            raise ProbeError(f"`{ran.command}`: no reader of its output for "
                             f"{vendor.vendor} GPUs (ocibench.accelerators)")
        try:
            found = vendor.probe_parse(ran.out)
        except accelerators.ProbeFormatError as err:
            raise ProbeError(f"`{ran.command}` {err}") from None
        if not found:
            raise ProbeError(f"`{ran.command}` listed no GPU")
        found = visible(found, vendor.vendor)
        if not found:
            return None
        valid_nodes = {n["id"] for n in numa_nodes}
        devices = []
        for index, gpu in enumerate(found):
            node = _pci_numa_node(gpu.bus_id)
            devices.append({"index": index,
                            "numa_node": node if node in valid_nodes else min(valid_nodes)})
        return {"vendor": vendor.vendor, "model": found[-1].model, "arch": found[-1].arch,
                "devices": devices}
    return None


def visible(found: list[Any], vendor: str) -> list[Any]:
    """The GPUs a process started here may use, in the order its runtime numbers them.

    ``CUDA_VISIBLE_DEVICES=0`` on a node of two GPUs is a node of one GPU to every
    benchmark started from here (CUDA renumbers what it leaves visible from 0), so the
    ``local`` shape describes one, and the checks that need two skip, saying so,
    instead of running two ranks on one GPU.  CUDA's rule for the list: indices, in
    order; an index that names no GPU ends it.  A GPU named by UUID or a MIG instance
    cannot be matched against the indices the probe lists: unknown, never guessed."""
    row = accelerators.VENDORS.get(vendor)
    name = row.visible_devices if row else ""   # the vendor row's (accelerators)
    value = os.environ.get(name) if name else None
    if value is None:
        return found
    by_index = {gpu.index: gpu for gpu in found}
    chosen: list[Any] = []
    for entry in (e.strip() for e in value.split(",")):
        if not re.fullmatch(r"[0-9]{1,4}", entry):
            if entry and not re.fullmatch(r"-[0-9]+", entry):
                raise ProbeError(f"{name}={value!r} names {entry!r}, not a GPU index: "
                                 "which of the listed GPUs it means cannot be told")
            break
        gpu = by_index.get(int(entry))
        if gpu is None or gpu in chosen:
            break
        chosen.append(gpu)
    return chosen


def _pci_numa_node(bus_id: str) -> int:
    # A probe prints 00000000:0F:00.0; sysfs uses 0000:0f:00.0.  Hex digits only, so
    # the path stays under /sys/bus/pci/devices.
    if not re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]", bus_id):
        return 0
    domain, rest = bus_id.lower().split(":", 1)
    path = Path("/sys/bus/pci/devices") / f"{domain[-4:]}:{rest}" / "numa_node"
    try:
        with path.open(encoding="ascii") as handle:
            text = handle.read(64).strip()
    except (OSError, UnicodeDecodeError):
        return 0
    return max(0, int(text)) if re.fullmatch(r"-?[0-9]{1,6}", text) else 0


def _lscpu_field(name: str) -> str | None:
    out = run_tool(["lscpu"], PROBE_TIMEOUT_S).out
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None
