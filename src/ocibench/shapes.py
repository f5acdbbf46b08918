"""The per-shape source of truth: load, validate and detect shapes.

Every shape is one YAML file in ``site/shapes/<shape>.yaml``.  It holds the
hardware facts (CPU, NUMA layout, GPUs, links, RDMA devices), the software the
OCI image provides (compilers and externals), the versions the seeds build, and
the documented figures with their source.  The Spack configuration, the Lmod
module configuration and the ReFrame configuration are all derived from these
files; nothing else states a hardware fact.

The ``local`` shape file holds only software defaults: its hardware is read
from the machine itself (see :mod:`ocibench.probe`).

Fields: ``site/shapes/schema.json`` states every field, its type and its allowed
values (editors complete from it), and docs/shapes.md explains them.  A file is
valid when it passes that schema and the rules across fields of
:mod:`ocibench.shape_rules` (a figure's params, value keys and limit against its
check and the shape); ``ocibench shape --check`` runs both on every file.  A
broken file fails with one line naming the file, the figure and the field, and
stops only what uses that shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ocibench import shape_rules
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

#: Environment variable: the directory of the shape files (default: site/shapes).
SHAPES_DIR_ENV = "OCIBENCH_SHAPES_DIR"

#: The NUMA-nodes-per-socket settings an AMD EPYC BIOS offers (cpu.nps_modes).
NPS_SETTINGS = (0, 1, 2, 4)

#: The schedulers ocibench.reframe_site builds partitions for (scheduler:).
SCHEDULERS = ("slurm", "none")


class ShapeError(ValueError):
    """A shape name or shape file that cannot be used, with the reason."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key written twice in a mapping is an error.

    PyYAML keeps the last of two equal keys silently: a figure with ``nodes`` twice
    would lose one without a word.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"key {key!r} appears twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


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


def shapes_dir() -> Path:
    """$OCIBENCH_SHAPES_DIR, else the repository's ``site/shapes``.

    A site may keep its shape files elsewhere (and tests use a copy); every reader
    of shape files (ReFrame's configuration included) follows this one setting.
    """
    override = os.environ.get(SHAPES_DIR_ENV)
    return Path(override) if override else SHAPES_DIR


def known_shapes() -> list[str]:
    """Every shape with a file in :func:`shapes_dir`, sorted, ``local`` included."""
    return sorted(p.stem for p in shapes_dir().glob("*.yaml"))


def shape_path(name: str) -> Path:
    path = shapes_dir() / f"{name}.yaml"
    if not name or not path.is_file():
        raise ShapeError(
            f"unknown shape {name!r}; known shapes: {', '.join(known_shapes())}"
        )
    return path


def load(name: str) -> Shape:
    """Load and validate one shape; ``local`` is completed from the machine."""
    return load_file(shape_path(name))


def load_file(path: Path) -> Shape:
    """Load and validate the shape file at ``path``; its stem is the shape's name.

    Every fault is a ShapeError whose one line names the file, the figure and the
    field (:mod:`ocibench.shape_rules`).
    """
    path = Path(path)
    name = path.stem
    where = path.name
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ShapeError(f"{where}: not valid YAML{at}: {err.problem}") from None
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as err:
        raise ShapeError(f"{where}: cannot read: {' '.join(str(err).split())}") from None
    if name == LOCAL:
        _fail(where, shape_rules.schema_problem(data))  # before probing: the file as written
        data = _probe_local(data, where)
    validate(data, where)
    if data["shape"] != name:
        raise ShapeError(f"{where}: 'shape' is {data['shape']!r}, expected {name!r} "
                         "(the file's name without .yaml)")
    return Shape(name=name, data=data, path=path)


def _probe_local(data: dict[str, Any], where: str) -> dict[str, Any]:
    from ocibench import probe  # local import: probing runs commands

    try:
        return probe.complete_local(data)
    except (OSError, subprocess.SubprocessError) as err:
        raise ShapeError(f"{where}: cannot probe this machine's hardware: "
                         f"{' '.join(str(err).split())}") from None


def validate(data: Any, where: str) -> None:
    """Raise ShapeError naming the file, the figure and the field of the first fault."""
    try:
        found = shape_rules.problem(data)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        # A rule that the schema should have made safe: still one line, never a traceback.
        found = f"cannot validate ({type(err).__name__}: {err}); please report this"
    _fail(where, found)


def _fail(where: str, problem: str | None) -> None:
    if problem:
        raise ShapeError(f"{where}: {problem}")


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
    if shape and (shapes_dir() / f"{shape}.yaml").is_file():
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
