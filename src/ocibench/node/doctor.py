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

Each gives one :class:`~ocibench.node.preflight.Item`: present (held), unexpected (not
as the shape says), or unknown (the tool absent, hung, or printing what it was not
asked): a tool that did not answer never fails a node.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from ocibench import accelerators
from ocibench.capabilities import PRESENT, UNEXPECTED, UNKNOWN
from ocibench.node.preflight import Expectations, Gpu, Item, _sysfs_bdf, run
from ocibench.shapes.probe import Ran

#: OCI's fault codes of these checks (oci-dr-hpc-v2 configs/recommendations.json
#: @1b62d6d3716307c8631ab3fe2962c78f280348e7: gpu_mode_check, sram_error_check,
#: gpu_driver_check, pcie_error_check).
FAULT = {"mig": "HPCGPU-0001-0002", "sram_errors": "HPCGPU-0006-0001",
         "driver": "HPCGPU-0007-0001", "pcie_errors": "HPCGPU-0002-0001",
         "cdfp": "HPCGPU-0010-0001"}
#: The items' names, by the shape file's key.
NAMES = {"mig": "mig_mode", "sram_errors": "sram_errors", "driver": "driver_version",
         "cdfp": "cdfp_cabling"}
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
    on = [m for m in modes if m.current == "Enabled"]
    changing = [m for m in modes if m.pending != m.current]
    later = "; ".join(f"{m.gpu}: {m.current} until its next reset, then {m.pending}"
                      for m in changing)
    if on:
        shown = ", ".join(m.gpu for m in on)
        return Item(name, UNEXPECTED, f"MIG mode Enabled on {len(on)} of {len(modes)} "
                    f"GPUs ({shown}); the shape's figures are of whole GPUs "
                    f"(nvidia-smi -mig 0, then a GPU reset; OCI's {FAULT['mig']})"
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
    have = {_sysfs_bdf(g.bus_id): g.module for g in found}
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


#: (shape file key, probe): the checks in the order they run.
PROBES: tuple[tuple[str, Callable[..., Item]], ...] = (
    ("mig", probe_mig), ("sram_errors", probe_sram), ("driver", probe_driver),
    ("cdfp", probe_cdfp),
)


def items(root: Path, exp: Expectations, gpus: tuple[list[Gpu], Ran],
          timeout: float | None = None) -> list[Item]:
    """Preflight's items of the checks the shape lists."""
    return [probe(root, exp, gpus, timeout) for key, probe in PROBES if declared(exp, key)]
