"""The per-shape source of truth: load, validate and detect shapes.

Every shape is one YAML file in ``site/shapes/<shape>.yaml``.  It holds the
hardware facts (CPU, NUMA layout, GPUs, links, RDMA devices), the software the
OCI image provides (compilers and externals), the versions the seeds build, and
the documented figures with their source.  The Spack configuration, the Lmod
module configuration and the ReFrame configuration are all derived from these
files; nothing else states a hardware fact.

The ``local`` shape file holds only software defaults: its hardware is read
from the machine itself (see :mod:`ocibench.probe`).

Field reference (``required`` unless marked optional)::

    shape: BM.GPU4.8                 # the OCI shape name; equals the file stem
    summary: one line for humans
    sources: [where the hardware facts come from]
    cpu:
      model: AMD EPYC 7542
      spack_target: zen2             # archspec microarchitecture name
      sockets: 2
      cores: 64                      # physical cores, whole node
      smt: false
      numa_nodes:                    # every NUMA node of the node
        - {id: 0, socket: 0, cores: [0, 7]}     # first and last core, inclusive
      nps_modes: [1, 4]              # optional: AMD NUMA-per-socket BIOS settings the
                                     # shape offers; numa_nodes describes the first
    memory:
      type: DDR4-3200
      size_gib: 2048
      bandwidth_gbs: 409.6           # theoretical peak, GB/s (1e9 B/s)
    gpus:                            # optional: absent or null on CPU shapes
      model: NVIDIA A100-SXM4-40GB
      cuda_arch: 80
      devices: [{index: 0, numa_node: 3}, ...]
    links:                           # physical limits, GB/s per direction
      nvlink_gbs: 300                # optional
      pcie_gbs: 32                   # optional; host<->GPU
      rdma_port_gbs: 12.5            # optional; one RDMA port
      rdma_node_gbs: 200             # optional; all RDMA ports of a node together
    network:                         # optional on single-node shapes
      rdma: RoCEv2
      ports: 16
      port_gbps: 100
      ucx_net_devices: {mpi: mlx5_6:1, nccl: mlx5_4:1}
    scheduler: slurm                 # or "none"
    software:
      compilers: [{spec: gcc@8.5.0, prefix: /usr}]   # externals; first is default
      externals: {cuda: {spec: cuda@12.9.0, prefix: /usr/local/cuda-12.9}, ...}
      stack: {openmpi: 5.0.8, osu-micro-benchmarks: 7.5.1, ...}  # versions built
      build: {stream: {compiler: aocc@5.0.0, variants: "..."}}    # optional: how a seed
                                     # builds a stack package here (ocibench.spack_config)
    figures: [see FIGURE_FIELDS]      # documented figures; [] when none
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ocibench import metrics
from ocibench.paths import SITE_DIR

#: The shape used on any machine that is not a documented OCI shape.
LOCAL = "local"

#: Environment variable that overrides shape detection.
SHAPE_ENV = "OCIBENCH_SHAPE"

#: OCI instance metadata (IMDSv2); answers only on an OCI instance.
OCI_METADATA_URL = "http://169.254.169.254/opc/v2/instance/"

#: Seconds to wait for the metadata service before deciding we are not on OCI.
METADATA_TIMEOUT_S = 1.0

SHAPES_DIR = SITE_DIR / "shapes"

FIGURE_FIELDS = {
    "id": "unique name of the figure within the shape",
    "check": "the evaluator/check family that produces it (see ocibench.evaluate)",
    "params": "the check parameters that select the variant (mapping)",
    "metric": "latency | bandwidth | busbw",
    "unit": "us | MB/s | GB/s",
    "source": "{doc: <seed file name>, section: <section number>}",
    "values": "mapping of message size in bytes (or STREAM kernel name) to the value",
}
FIGURE_OPTIONAL = {
    "limit": "key of `links` (or 'memory') giving the physical limit",
    "floor": "{values: {key: number}, source: '<repository>, <path>@<commit>: <line>'}: "
             "the acceptance floor OCI's own health checks apply (values may then be absent)",
}

#: metric -> the units a figure of it may be stated in (ocibench.metrics).
METRIC_UNITS = {name: set(m.units) for name, m in metrics.METRICS.items()}

_REQUIRED = {
    "shape": str,
    "summary": str,
    "sources": list,
    "cpu": dict,
    "memory": dict,
    "links": dict,
    "scheduler": str,
    "software": dict,
    "figures": list,
}
_CPU_REQUIRED = ("model", "spack_target", "sockets", "cores", "smt", "numa_nodes")

#: The NUMA-nodes-per-socket settings an AMD EPYC BIOS offers (cpu.nps_modes).
NPS_SETTINGS = (0, 1, 2, 4)


class ShapeError(ValueError):
    """A shape name or shape file that cannot be used, with the reason."""


@dataclass(frozen=True)
class Shape:
    """One validated shape file (for ``local``: merged with the probed machine)."""

    name: str
    data: dict[str, Any]
    path: Path

    @property
    def is_local(self) -> bool:
        return self.name == LOCAL

    @property
    def cpu(self) -> dict[str, Any]:
        return self.data["cpu"]

    @property
    def gpus(self) -> dict[str, Any] | None:
        return self.data.get("gpus") or None

    @property
    def gpu_count(self) -> int:
        return len(self.gpus["devices"]) if self.gpus else 0

    @property
    def cores(self) -> int:
        return int(self.cpu["cores"])

    @property
    def ucx_net_devices(self) -> dict[str, str]:
        return (self.data.get("network") or {}).get("ucx_net_devices") or {}

    @property
    def figures(self) -> list[dict[str, Any]]:
        return self.data["figures"]

    @cached_property
    def numa_cores(self) -> dict[int, list[int]]:
        """NUMA node id -> the cores on it."""
        return {
            n["id"]: list(range(n["cores"][0], n["cores"][1] + 1))
            for n in self.cpu["numa_nodes"]
        }

    def numa_socket(self, numa_id: int) -> int:
        for node in self.cpu["numa_nodes"]:
            if node["id"] == numa_id:
                return node["socket"]
        raise ShapeError(f"{self.name}: no NUMA node {numa_id}")


def known_shapes() -> list[str]:
    """Every shape with a file in ``site/shapes``, sorted, ``local`` included."""
    return sorted(p.stem for p in SHAPES_DIR.glob("*.yaml"))


def shape_path(name: str) -> Path:
    path = SHAPES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ShapeError(
            f"unknown shape {name!r}; known shapes: {', '.join(known_shapes())}"
        )
    return path


def load(name: str) -> Shape:
    """Load and validate one shape; ``local`` is completed from the machine."""
    path = shape_path(name)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ShapeError(f"{path.name}: not valid YAML: {err}") from err
    if name == LOCAL:
        from ocibench import probe  # local import: probing runs commands

        data = probe.complete_local(data)
    validate(data, path.name)
    if data["shape"] != name:
        raise ShapeError(f"{path.name}: 'shape' is {data['shape']!r}, expected {name!r}")
    return Shape(name=name, data=data, path=path)


def validate(data: Any, where: str) -> None:
    """Raise ShapeError naming the first missing or malformed field."""
    if not isinstance(data, dict):
        raise ShapeError(f"{where}: a shape file must be a mapping")
    for key, kind in _REQUIRED.items():
        if key not in data:
            raise ShapeError(f"{where}: missing field {key!r}")
        if not isinstance(data[key], kind):
            raise ShapeError(f"{where}: field {key!r} must be a {kind.__name__}")
    for key in _CPU_REQUIRED:
        if key not in data["cpu"]:
            raise ShapeError(f"{where}: missing field cpu.{key}")
    nps_modes = data["cpu"].get("nps_modes")
    if nps_modes is not None and (
        not isinstance(nps_modes, list) or not nps_modes
        or any(mode not in NPS_SETTINGS for mode in nps_modes)
    ):
        raise ShapeError(f"{where}: cpu.nps_modes must be a list of NPS settings from {NPS_SETTINGS}")
    covered: list[int] = []
    for node in data["cpu"]["numa_nodes"]:
        first, last = node["cores"]
        covered.extend(range(first, last + 1))
    if sorted(covered) != list(range(data["cpu"]["cores"])):
        raise ShapeError(f"{where}: cpu.numa_nodes must cover cores 0..cores-1 once each")
    gpus = data.get("gpus")
    if gpus:
        for key in ("model", "cuda_arch", "devices"):
            if key not in gpus:
                raise ShapeError(f"{where}: missing field gpus.{key}")
        numa_ids = {n["id"] for n in data["cpu"]["numa_nodes"]}
        for dev in gpus["devices"]:
            if dev.get("numa_node") not in numa_ids:
                raise ShapeError(f"{where}: GPU {dev.get('index')} names an unknown NUMA node")
    for key in ("compilers", "externals", "stack"):
        if key not in data["software"]:
            raise ShapeError(f"{where}: missing field software.{key}")
    seen: set[str] = set()
    for fig in data["figures"]:
        _validate_figure(fig, where, data)
        if fig["id"] in seen:
            raise ShapeError(f"{where}: figure id {fig['id']!r} appears twice")
        seen.add(fig["id"])


def _validate_figure(fig: Any, where: str, data: dict[str, Any]) -> None:
    if not isinstance(fig, dict):
        raise ShapeError(f"{where}: every figure must be a mapping")
    label = f"{where}: figure {fig.get('id', '?')!r}"
    for key in FIGURE_FIELDS:
        # a figure known only by OCI's floor has no documented values
        if key not in fig and not (key == "values" and "floor" in fig):
            raise ShapeError(f"{label}: missing field {key!r}")
    if fig["unit"] not in METRIC_UNITS.get(fig["metric"], set()):
        raise ShapeError(f"{label}: unit {fig['unit']!r} does not fit metric {fig['metric']!r}")
    src = fig["source"]
    if not isinstance(src, dict) or not src.get("doc") or not src.get("section"):
        raise ShapeError(f"{label}: source needs 'doc' and 'section'")
    if "values" in fig:
        _positive_numbers(fig["values"], f"{label}: values")
    floor = fig.get("floor")
    if floor is not None:
        if not isinstance(floor, dict) or not isinstance(floor.get("source"), str) \
                or not floor["source"].strip():
            raise ShapeError(f"{label}: floor needs 'values' and a 'source' string")
        _positive_numbers(floor.get("values"), f"{label}: floor.values")
        extra = set(floor["values"]) - set(fig.get("values") or floor["values"])
        if extra:
            raise ShapeError(f"{label}: floor.values has keys the figure's values lack: "
                             f"{sorted(extra, key=str)}")
    limit = fig.get("limit")
    if limit is not None and limit != "memory" and limit not in data["links"]:
        raise ShapeError(f"{label}: limit {limit!r} is not a key of links")


def _positive_numbers(mapping: Any, label: str) -> None:
    if not mapping or not isinstance(mapping, dict):
        raise ShapeError(f"{label} must be a non-empty mapping")
    for key, value in mapping.items():
        if not metrics.is_number(value) or value <= 0:
            raise ShapeError(f"{label}: value for {key!r} must be a positive number")


def detect() -> str:
    """The shape this machine is: $OCIBENCH_SHAPE, else OCI metadata, else local.

    An OCI shape without a shape file is reported as ``local`` (it still works,
    with no documented figures) rather than as an error: only a name the user
    typed is an error.
    """
    override = os.environ.get(SHAPE_ENV)
    if override:
        shape_path(override)  # raises with the list of known shapes
        return override
    shape = oci_metadata_shape()
    if shape and (SHAPES_DIR / f"{shape}.yaml").is_file():
        return shape
    return LOCAL


def oci_metadata_shape(timeout: float = METADATA_TIMEOUT_S) -> str | None:
    """The shape from the OCI instance metadata service, or None off OCI."""
    request = urllib.request.Request(
        OCI_METADATA_URL, headers={"Authorization": "Bearer Oracle"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response).get("shape")
    except (OSError, urllib.error.URLError, ValueError):
        return None


def current() -> Shape:
    return load(detect())
