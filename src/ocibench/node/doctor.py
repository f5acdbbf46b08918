"""OCI's node-doctor checks of a shape's GPUs, as items of preflight and the healthcheck.

OCI's node doctor for its HPC and GPU shapes (ai2-compute-gpu/oci-dr-hpc-v2) runs, per
shape, the checks its ``internal/test_limits/test_limits.json`` enables, with the
thresholds written there, and names each failure with a fault code of its
``configs/recommendations.json``.  The shape file's ``node_doctor:`` section is our copy
of a shape's entry, cited by file and commit (the one source per shape): a check it
lists is run here, one it does not list is not.

* **mig**: MIG mode off on every GPU, now (``mig.mode.current``).  OCI's fault
  HPCGPU-0001-0002.  A GPU whose mode will change at its next reset
  (``mig.mode.pending``) is said in the evidence.
* **sram_errors**: each GPU's aggregate SRAM ECC counts (``nvidia-smi -q -d ECC``)
  against the shape's thresholds: uncorrectable above fails (OCI's HPCGPU-0006-0001);
  correctable above is only said (OCI's doctor warns, and fails nothing for it).
* **driver**: the GPU driver's version, the same on every GPU, against the shape's
  lists: refused fails (HPCGPU-0007-0001), allowed passes, warned or on no list is
  unknown (OCI's doctor warns: "unsupported but not blacklisted").
* **cdfp**: each GPU at its PCI address in the module the shape's map gives it
  (each GPU section's Module Id in ``nvidia-smi -q``; HPCGPU-0010-0001).
* **pcie_errors**: PCIe AER errors in the kernel log (HPCGPU-0002-0001): a scan of the
  healthcheck's kernel-log probe (:data:`PCIE_ERRORS`), judged by sequence number
  with the GPU driver's errors (ocibench.health.probes); preflight does not read the
  kernel log.
* **hca_errors**: fatal errors of the mlx5 NICs in the kernel log (OCI's hca_error_check,
  HPCGPU-0011-0001): a scan of the same reading (:data:`HCA_ERRORS`).
* **gpu_clocks**: each GPU's applications graphics clock (``nvidia-smi -q -d CLOCK``)
  against the shape's, less OCI's 10% (HPCGPU-0011-0001).  OCI's doctor reads the
  *current* clock, which an idle GPU drops (345 MHz on an idle H200), so that it would
  fail every node between jobs; the applications clock is the one a job runs at, and
  the one OCI's fix sets (``nvidia-smi -ac``).

And, of the node rather than its GPUs (:data:`NODE_PROBES`, run without the GPU tool):

* **eth0**: the interface ``eth0`` is there (``/sys/class/net/eth0``; OCI's
  eth0_presence_check reads ``ip addr``; HPCGPU-0010-0001);
* **eth_link**: the shape's front-end interface up (``operstate``) at its speed
  (``speed``, Mb/s: Documentation/ABI/testing/sysfs-class-net) or faster (OCI's
  eth_link_check, HPCGPU-0007-0001, reads ``mlxlink`` on the VCN NICs, which also gives
  the lanes and the bit error rates: those need MFT and root, and are not judged here);
* **missing_interface**: no PCI device reading revision ff in ``lspci`` (all ones: a
  device that no longer answers its configuration reads; OCI's missing_interface_check,
  HPCGPU-0012-0001), more than the shape's threshold fails.

Each gives one :class:`~ocibench.node.probing.Item`: present (held), unexpected (not
as the shape says), or unknown (the tool absent, hung, or printing what it was not
asked): a tool that did not answer never fails a node.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

from ocibench import accelerators
from ocibench.capabilities import PRESENT, UNEXPECTED, UNKNOWN
from ocibench.node.probing import (
    Expectations,
    Gpu,
    Item,
    described,
    read_file,
    run,
    strerror,
    sysfs_bdf,
)
from ocibench.shapes.probe import Ran

#: OCI's fault codes of these checks (oci-dr-hpc-v2 configs/recommendations.json
#: @1b62d6d3716307c8631ab3fe2962c78f280348e7: gpu_mode_check, sram_error_check,
#: gpu_driver_check, pcie_error_check).
FAULT = {"mig": "HPCGPU-0001-0002", "sram_errors": "HPCGPU-0006-0001",
         "driver": "HPCGPU-0007-0001", "pcie_errors": "HPCGPU-0002-0001",
         "cdfp": "HPCGPU-0010-0001", "eth0": "HPCGPU-0010-0001",
         "eth_link": "HPCGPU-0007-0001", "gpu_clocks": "HPCGPU-0011-0001",
         "hca_errors": "HPCGPU-0011-0001", "missing_interface": "HPCGPU-0012-0001"}
#: The items' names, by the shape file's key.
NAMES = {"mig": "mig_mode", "sram_errors": "sram_errors", "driver": "driver_version",
         "cdfp": "cdfp_cabling", "gpu_clocks": "gpu_clocks", "eth0": "eth0_presence",
         "eth_link": "eth_link", "missing_interface": "missing_interface"}
#: drivers/pci/pcie/aer.c (aer_print_error): "<dev> <bdf>: PCIe Bus Error:
#: severity=<Corrected|Correctable|Uncorrected (Non-Fatal)|Uncorrected (Fatal)>,
#: type=<layer>, ..."; since Linux 6.x with "AER: " before it.  One line per error the
#: kernel reports, naming the device that saw it; the lines after it (the status mask,
#: the error's bit) and the root port's "AER: ... error received" say the same error.
_AER = re.compile(r"([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): (?:AER: )?"
                  r"PCIe Bus Error: severity=([A-Za-z]+(?: \([A-Za-z-]+\))?), "
                  r"type=([A-Za-z ]+)")


def _read_aer(line: str) -> tuple[str, str] | None:
    m = _AER.search(line)
    return (m.group(1).lower(), f"PCIe {m.group(2)} error ({m.group(3).strip()})") \
        if m else None


#: The healthcheck's scan of the kernel log for PCIe errors, where the shape lists
#: ``pcie_errors``: OCI's doctor fails a node on any (internal/level1_tests/
#: pcie_error_check.go: a "pcieport" line with "error" in dmesg), corrected ones too.
PCIE_ERRORS = accelerators.KernelLogScan(
    name="pcie_errors", read=_read_aer, looks_for="PCIe AER error ('PCIe Bus Error')",
    fault=f"OCI's {FAULT['pcie_errors']}")

#: mlx5_core's fatal health errors, as it prints them: "mlx5_core 0000:01:00.0:
#: poll_health:795:(pid 0): Fatal error 1 detected" (drivers/net/ethernet/mellanox/mlx5/
#: core/health.c).  OCI's hca_error_check takes any dmesg line naming mlx5 with "fatal"
#: in it; the word alone here, not the "NonFatalErr" or "(Non-Fatal)" of a PCIe AER
#: error's lines on an mlx5 device, which the pcie_errors scan judges.
_MLX5 = re.compile(r"\b(?:mlx5_\w+ ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
                   r"(?: \S+)?|infiniband (mlx5_[0-9]{1,3})): (.*)")
_FATAL = re.compile(r"(?<![-\w])fatal\b", re.IGNORECASE)


def _read_hca(line: str) -> tuple[str, str] | None:
    m = _MLX5.search(line)
    if not m or not _FATAL.search(m.group(3)) or _AER.search(line):
        return None
    # the driver's function:line:(pid n) prefix differs between builds and runs
    said = re.sub(r"^\w+:\d+:(?:\(pid \d+\):)? ?", "", m.group(3).strip())
    return (m.group(1) or m.group(2)).lower(), f"mlx5 fatal error ({said[:80]})"


#: The healthcheck's scan of the kernel log for fatal mlx5 errors, where the shape lists
#: ``hca_errors`` (OCI's hca_error_check: "Clear dmesg and reboot the node. If the
#: problem persists, return the node to OCI").
HCA_ERRORS = accelerators.KernelLogScan(
    name="hca_errors", read=_read_hca, looks_for="fatal mlx5 error ('mlx5_core ...: "
    "... Fatal ...')", fault=f"OCI's {FAULT['hca_errors']}")
#: A driver's version as the driver prints it: 535.104.12, 550.54.15, 580.65.06.
_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}")


def declared(exp: Expectations, check: str) -> dict[str, Any] | None:
    """The shape's ``node_doctor.<check>``, or None: the check does not apply."""
    value = (exp.doctor or {}).get(check)
    return value if isinstance(value, dict) else None


def _query(exp: Expectations, name: str, query: accelerators.GpuQuery | None,
           timeout: float | None) -> tuple[list[Any], Ran] | Item:
    """The vendor's per-GPU query run and read; or the unknown item saying why not."""
    if query is None:
        vendor = exp.vendor.vendor if exp.vendor else "no"
        return Item(name, UNKNOWN, f"{vendor} GPUs have no such query (ocibench."
                    "accelerators)", "", exp.binding)
    ran = run(list(query.command), timeout)
    if ran.why:
        return Item(name, UNKNOWN, ran.why, ran.command, exp.binding)
    try:
        found = query.parse(ran.out)
    except accelerators.ProbeFormatError as err:
        return Item(name, UNKNOWN, str(err), ran.command, exp.binding)
    if not found:
        return Item(name, UNKNOWN, "listed no GPU", ran.command, exp.binding)
    return found, ran


def probe_mig(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
              timeout: float | None = None) -> Item:
    name = NAMES["mig"]
    got = _query(exp, name, exp.vendor and exp.vendor.mig_query, timeout)
    if isinstance(got, Item):
        return got
    modes, ran = got
    fix = exp.vendor.mig_query.fix if exp.vendor and exp.vendor.mig_query else ""
    on = [m for m in modes if m.current == "Enabled"]
    changing = [m for m in modes if m.pending != m.current]
    later = "; ".join(f"{m.gpu}: {m.current} until its next reset, then {m.pending}"
                      for m in changing)
    if on:
        shown = ", ".join(m.gpu for m in on)
        return Item(name, UNEXPECTED, f"MIG mode Enabled on {len(on)} of {len(modes)} "
                    f"GPUs ({shown}); the shape's figures are of whole GPUs "
                    f"({fix}; OCI's {FAULT['mig']})"
                    + (f"; {later}" if later else ""), ran.command, exp.binding)
    said = sorted({m.current for m in modes})
    return Item(name, PRESENT, f"MIG mode {'/'.join(said)} on {len(modes)} GPUs"
                + (f"; {later}" if later else ""), ran.command, exp.binding)


def probe_sram(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
               timeout: float | None = None) -> Item:
    name = NAMES["sram_errors"]
    limits = declared(exp, "sram_errors") or {}
    worst_u, worst_c = int(limits["uncorrectable"]), int(limits["correctable"])
    got = _query(exp, name, exp.vendor and exp.vendor.sram_query, timeout)
    if isinstance(got, Item):
        return got
    counts, ran = got
    over = [c for c in counts if c.uncorrectable is not None and c.uncorrectable > worst_u]
    if over:
        shown = "; ".join(f"GPU {c.gpu}: {c.uncorrectable} uncorrectable" for c in over)
        return Item(name, UNEXPECTED, f"aggregate SRAM ECC errors over the shape's "
                    f"{worst_u}: {shown} (OCI's {FAULT['sram_errors']})", ran.command, exp.binding)
    unread = [c.gpu for c in counts if c.uncorrectable is None]
    if unread:
        return Item(name, UNKNOWN, f"no aggregate SRAM uncorrectable count (N/A: ECC off, "
                    f"or not counted) for GPU {', '.join(unread)}", ran.command, exp.binding)
    many = [c for c in counts if c.correctable is not None and c.correctable > worst_c]
    note = "".join(f"; GPU {c.gpu}: {c.correctable} correctable, over the shape's "
                   f"{worst_c} (OCI's doctor warns)" for c in many)
    top = max(c.uncorrectable or 0 for c in counts)
    return Item(name, PRESENT, f"{len(counts)} GPUs: at most {top} aggregate SRAM "
                f"uncorrectable (the shape's limit {worst_u}){note}", ran.command, exp.binding)


def probe_driver(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
                 timeout: float | None = None) -> Item:
    """The driver's version on every GPU (the vendor's ``driver_version`` query, one
    line per GPU) against the shape's lists."""
    name = NAMES["driver"]
    lists = declared(exp, "driver") or {}
    if exp.vendor is None:
        return Item(name, UNKNOWN, "no GPU vendor in the shape", "", exp.binding)
    ran = run(list(exp.vendor.driver_version.command), timeout)
    if ran.why:
        return Item(name, UNKNOWN, ran.why, ran.command, exp.binding)
    lines = [line.strip() for line in ran.out.splitlines() if line.strip()]
    odd = next((line for line in lines if not _VERSION.fullmatch(line)), None)
    if odd is not None or not lines:
        shown = repr(odd[:60]) if odd is not None else "nothing"
        return Item(name, UNKNOWN, f"printed {shown}, not a driver version per GPU",
                    ran.command, exp.binding)
    versions = sorted(set(lines))
    if len(versions) > 1:
        return Item(name, UNEXPECTED, f"GPUs on different driver versions: "
                    f"{', '.join(versions)} (OCI's {FAULT['driver']})", ran.command, exp.binding)
    version = versions[0]
    if version in (lists.get("refused") or []):
        return Item(name, UNEXPECTED, f"driver {version} is on the shape's refused list "
                    f"(OCI's {FAULT['driver']})", ran.command, exp.binding)
    if version in (lists.get("allowed") or []):
        return Item(name, PRESENT, f"driver {version}, on the shape's allowed list",
                    ran.command, exp.binding)
    why = "on the shape's warned list" if version in (lists.get("warned") or []) else \
        "on none of the shape's lists"
    return Item(name, UNKNOWN, f"driver {version} is {why} (OCI's doctor warns: "
                "unsupported but not refused; add it to node_doctor.driver.allowed once "
                "qualified)", ran.command, exp.binding)


def probe_cdfp(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
               timeout: float | None = None) -> Item:
    """Each GPU at its PCI address in the module the shape gives it (OCI's
    cdfp_cable_check: the board's CDFP cables wire its GPU modules; with two swapped,
    the GPUs' addresses and module ids disagree with the shape's map)."""
    name = NAMES["cdfp"]
    want = {str(pci).lower(): str(module) for pci, module in
            ((declared(exp, "cdfp") or {}).get("modules") or {}).items()}
    got = _query(exp, name, exp.vendor and exp.vendor.module_query, timeout)
    if isinstance(got, Item):
        return got
    found, ran = got
    have = {sysfs_bdf(g.bus_id): g.module for g in found}
    wrong = []
    for pci, module in sorted(want.items()):
        if pci not in have:
            wrong.append(f"no GPU at {pci} (the shape's module {module})")
        elif have[pci] != module and have[pci] != NO_MODULE:
            wrong.append(f"GPU at {pci} is module {have[pci]}, the shape's {module}")
    if wrong:
        return Item(name, UNEXPECTED, f"{'; '.join(wrong)} (CDFP cabling: OCI's "
                    f"{FAULT['cdfp']})", ran.command, exp.binding)
    unread = [pci for pci in sorted(want) if have.get(pci) == NO_MODULE]
    if unread:
        return Item(name, UNKNOWN, f"no module id for the GPU at {', '.join(unread)}",
                    ran.command, exp.binding)
    return Item(name, PRESENT, f"{len(want)} GPUs each in the shape's module",
                ran.command, exp.binding)


#: What nvidia-smi -q prints for a GPU whose module it cannot tell.
NO_MODULE = "N/A"


def probe_gpu_clocks(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
                     timeout: float | None = None) -> Item:
    """Each GPU's applications graphics clock at least the shape's less OCI's 10%
    (OCI's gpu_clk_check: a GPU set to run jobs slower than the shape's GPUs)."""
    name = NAMES["gpu_clocks"]
    limits = declared(exp, "gpu_clocks") or {}
    want = int(limits["graphics_mhz"])
    floor = want - round(want * float(limits["tolerance"]))
    got = _query(exp, name, exp.vendor and exp.vendor.clock_query, timeout)
    if isinstance(got, Item):
        return got
    clocks, ran = got
    fix = exp.vendor.clock_query.fix if exp.vendor and exp.vendor.clock_query else ""
    slow = [c for c in clocks if c.applications is not None and c.applications < floor]
    if slow:
        shown = "; ".join(f"GPU {c.gpu}: {c.applications} MHz" + (
            f" (its default {c.default} MHz)" if c.default else "") for c in slow)
        return Item(name, UNEXPECTED, f"applications graphics clock below the shape's "
                    f"{floor} MHz ({want} less OCI's {float(limits['tolerance']):.0%}): "
                    f"{shown} ({fix}; OCI's "
                    f"{FAULT['gpu_clocks']})", ran.command, exp.binding)
    unread = [c.gpu for c in clocks if c.applications is None]
    if unread:
        return Item(name, UNKNOWN, f"no applications graphics clock (N/A) for GPU "
                    f"{', '.join(unread)}", ran.command, exp.binding)
    low = min(c.applications or 0 for c in clocks)
    idle = min((c.current for c in clocks if c.current is not None), default=None)
    now = f"; now {idle} MHz at the least (an idle GPU's, not judged)" \
        if idle is not None and idle < floor else ""
    return Item(name, PRESENT, f"{len(clocks)} GPUs: applications graphics clock "
                f"{low} MHz at the least (the shape's floor {floor}){now}", ran.command,
                exp.binding)


# --------------------------------------------------------------------------- the node's


#: /sys/class/net/<if>/operstate (RFC 2863's states, Documentation/ABI/testing/
#: sysfs-class-net): "up" carries traffic; "unknown" is a driver that does not say.
_OPERSTATES = ("unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant",
               "up")


def _interfaces(root: Path) -> list[str] | str:
    """The network interfaces in /sys/class/net, or why they could not be listed."""
    path = root / "sys/class/net"
    try:
        with os.scandir(path) as entries:
            return sorted(e.name for _, e in zip(range(4096), entries))
    except OSError as err:
        return f"cannot list {path}: {strerror(err)}"


def probe_eth0(root: Path, exp: Expectations, timeout: float | None = None) -> Item:
    """The front-end interface ``eth0`` is there (OCI's eth0_presence_check: the
    host's own network: its jobs' bootstrap, NCCL_SOCKET_IFNAME, Slurm)."""
    name, evidence = NAMES["eth0"], f"ls {root / 'sys/class/net'}"
    found = _interfaces(root)
    if isinstance(found, str):
        return Item(name, UNKNOWN, found, evidence, exp.binding)
    if not found:
        return Item(name, UNKNOWN, f"{root / 'sys/class/net'} lists no interface (no "
                    "sysfs of the host's network here)", evidence, exp.binding)
    if "eth0" in found:
        return Item(name, PRESENT, "eth0 present", evidence, exp.binding)
    shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
    return Item(name, UNEXPECTED, f"no interface eth0 (the node has {shown}: renamed, or "
                f"its NIC missing; OCI's {FAULT['eth0']})", evidence, exp.binding)


def probe_eth_link(root: Path, exp: Expectations, timeout: float | None = None) -> Item:
    """The shape's front-end interface up at its speed (OCI's eth_link_check)."""
    name = NAMES["eth_link"]
    limits = declared(exp, "eth_link") or {}
    iface, gbps = str(limits["interface"]), float(limits["gbps"])
    base = f"sys/class/net/{iface}"
    evidence = f"read {root / base}/{{operstate, speed}}"
    state = read_file(root, f"{base}/operstate")
    said = (state.text or "").strip()
    if state.why or (state.text is not None and said not in _OPERSTATES):
        return Item(name, UNKNOWN, f"operstate of {iface} not read: {described(state)}",
                    evidence, exp.binding)
    if state.text is None:
        return Item(name, UNEXPECTED, f"no interface {iface} (the shape's front-end NIC; "
                    f"OCI's {FAULT['eth_link']})", evidence, exp.binding)
    if said == "unknown":
        return Item(name, UNKNOWN, f"{iface}'s driver says no link state (operstate "
                    "unknown)", evidence, exp.binding)
    if said != "up":
        return Item(name, UNEXPECTED, f"{iface} link {said} (operstate), the shape's "
                    f"front-end NIC at {gbps:g} Gb/s (OCI's {FAULT['eth_link']})",
                    evidence, exp.binding)
    speed = read_file(root, f"{base}/speed")
    text = (speed.text or "").strip()
    if not re.fullmatch(r"[0-9]{1,9}", text):
        # -1: SPEED_UNKNOWN; a link without a negotiated speed cannot be read (EINVAL)
        return Item(name, UNKNOWN, f"{iface} up, its speed not read: {described(speed)}",
                    evidence, exp.binding)
    if int(text) < gbps * 1000:
        return Item(name, UNEXPECTED, f"{iface} up at {int(text) / 1000:g} Gb/s, below "
                    f"the shape's {gbps:g} Gb/s (OCI's {FAULT['eth_link']})", evidence,
                    exp.binding)
    return Item(name, PRESENT, f"{iface} up at {int(text) / 1000:g} Gb/s", evidence,
                exp.binding)


#: lspci's line of a device: "[<domain>:]<bus>:<dev>.<fn> <class>: <name> (rev <xx>)"
#: (pciutils' lspci.c show_terse); "(rev ff)": its revision read as all ones.
_LSPCI = re.compile(r"^((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) (.*)$",
                    re.IGNORECASE)


def probe_missing_interface(root: Path, exp: Expectations,
                            timeout: float | None = None) -> Item:
    """No more PCI devices reading revision ff than the shape's threshold (OCI's
    missing_interface_check; oci-hpc's check_bus: "Devices have fallen off the bus")."""
    name = NAMES["missing_interface"]
    allowed = int((declared(exp, "missing_interface") or {})["threshold"])
    ran = run(["lspci", "-D"], timeout)
    if ran.why:
        return Item(name, UNKNOWN, ran.why, ran.command, exp.binding)
    devices = [m for m in (_LSPCI.match(line) for line in ran.out.splitlines()) if m]
    if not devices:
        first = next((line.strip() for line in ran.out.splitlines() if line.strip()),
                     "nothing")
        return Item(name, UNKNOWN, f"printed {first[:60]!r}, no PCI device", ran.command,
                    exp.binding)
    gone = [m for m in devices if "(rev ff)" in m.group(2).lower()]
    if len(gone) > allowed:
        shown = "; ".join(f"{m.group(1)} {m.group(2)[:70]}" for m in gone[:4])
        more = f"; and {len(gone) - 4} more" if len(gone) > 4 else ""
        return Item(name, UNEXPECTED, f"{len(gone)} PCI devices read revision ff (no "
                    f"longer answering: fallen off the bus), over the shape's {allowed}: "
                    f"{shown}{more} (OCI's {FAULT['missing_interface']})", ran.command,
                    exp.binding)
    return Item(name, PRESENT, f"{len(devices)} PCI devices, {len(gone)} reading revision "
                f"ff (the shape's limit {allowed})", ran.command, exp.binding)


#: (shape file key, probe): the checks in the order they run.
PROBES: tuple[tuple[str, Callable[..., Item]], ...] = (
    ("mig", probe_mig), ("sram_errors", probe_sram), ("driver", probe_driver),
    ("cdfp", probe_cdfp), ("gpu_clocks", probe_gpu_clocks),
)
#: (shape file key, probe) of the checks of the node, not of its GPUs: run without the
#: GPU tool's listing (``probe(root, exp, timeout)``).
NODE_PROBES: tuple[tuple[str, Callable[..., Item]], ...] = (
    ("eth0", probe_eth0), ("eth_link", probe_eth_link),
    ("missing_interface", probe_missing_interface),
)


def items(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
          timeout: float | None = None) -> list[Item]:
    """Preflight's items of the checks the shape lists."""
    return [probe(root, exp, gpus, timeout) for key, probe in PROBES if declared(exp, key)] \
        + [probe(root, exp, timeout) for key, probe in NODE_PROBES if declared(exp, key)]
