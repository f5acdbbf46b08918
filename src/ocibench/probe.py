"""Describe the machine we run on, for the ``local`` shape.

The result has the same fields as a documented shape file, so every reader
(Spack config, ReFrame config, checks) treats ``local`` like any other shape.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import archspec.cpu


def complete_local(data: dict[str, Any]) -> dict[str, Any]:
    """Fill the hardware fields of the local shape file from this machine."""
    merged = dict(data)
    merged["cpu"] = cpu()
    merged["memory"] = memory()
    merged["gpus"] = gpus(merged["cpu"]["numa_nodes"])
    merged.setdefault("links", {})
    return merged


def cpu() -> dict[str, Any]:
    """Sockets, physical cores and NUMA nodes from ``lscpu -p``."""
    out = subprocess.run(
        ["lscpu", "-p=CPU,CORE,SOCKET,NODE"], capture_output=True, text=True, check=True
    ).stdout
    cores: dict[int, tuple[int, int]] = {}  # core id -> (socket, numa node)
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        _cpu, core, socket, node = (int(f) if f else 0 for f in line.split(","))
        cores.setdefault(core, (socket, node))
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
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            kib = int(line.split()[1])
    # The theoretical bandwidth of an unknown machine is not knowable from
    # software; figures are then reported without a fraction of the limit.
    return {"type": "unknown", "size_gib": round(kib / 2**20, 1), "bandwidth_gbs": None}


def gpus(numa_nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """NVIDIA GPUs from nvidia-smi, with the NUMA node of each one's PCIe slot."""
    if not shutil.which("nvidia-smi"):
        return None
    result = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name,compute_cap,pci.bus_id",
         "--format=csv,noheader"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0 or not result.stdout.strip():
        return None
    valid_nodes = {n["id"] for n in numa_nodes}
    devices, model, arch = [], "", ""
    for line in result.stdout.strip().splitlines():
        index, name, cap, bus = (f.strip() for f in line.split(","))
        model, arch = name, cap.replace(".", "")
        node = _pci_numa_node(bus)
        numa_node = node if node in valid_nodes else min(valid_nodes)
        devices.append({"index": int(index), "numa_node": numa_node})
    return {"model": model, "cuda_arch": int(arch), "devices": devices}


def _pci_numa_node(bus_id: str) -> int:
    # nvidia-smi prints 00000000:0F:00.0; sysfs uses 0000:0f:00.0.
    domain, rest = bus_id.lower().split(":", 1)
    path = Path("/sys/bus/pci/devices") / f"{domain[-4:]}:{rest}" / "numa_node"
    try:
        return max(0, int(path.read_text()))
    except (OSError, ValueError):
        return 0


def _lscpu_field(name: str) -> str | None:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False,
                         env={**os.environ, "LC_ALL": "C"}).stdout
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None
