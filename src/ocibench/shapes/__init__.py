"""The per-shape source of truth: load, validate and detect shapes.

Every shape is one YAML file in ``site/shapes/<shape>.yaml``.  It holds the
hardware facts (CPU, NUMA layout, GPUs, links, RDMA devices), the software the
OCI image provides (compilers and externals), the versions the seeds build, and
the documented figures with their source.  The Spack configuration, the Lmod
module configuration and the ReFrame configuration are all derived from these
files; nothing else states a hardware fact.

The ``local`` shape file holds only software defaults: its hardware is read
from the machine itself (see :mod:`ocibench.shapes.probe`).

Fields: ``site/shapes/schema.json`` states every field, its type and its allowed
values (editors complete from it), and docs/shapes.md explains them.  A file is
valid when it passes that schema and the rules across fields of
:mod:`ocibench.shapes.rules` (a figure's params, value keys and limit against its
check and the shape); ``ocibench shape --check`` runs both on every file.  A
broken file fails with one line naming the file, the figure and the field, and
stops only what uses that shape.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ocibench.paths import SITE_DIR
from ocibench.shapes import rules as shape_rules

#: The shape used on any machine that is not a documented OCI shape.
LOCAL = "local"

#: Environment variable that overrides shape detection.
SHAPE_ENV = "OCIBENCH_SHAPE"

#: OCI instance metadata (IMDSv2); answers only on an OCI instance.
OCI_METADATA_URL = "http://169.254.169.254/opc/v2/instance/"

#: Seconds to wait for the metadata service before deciding we are not on OCI.
METADATA_TIMEOUT_S = 1.0

SHAPES_DIR = SITE_DIR / "shapes"

#: The RoCE GID index where a shape file gives none (ocibench.shapes.rules says why).
OCI_GID_INDEX = shape_rules.OCI_GID_INDEX
#: The shape's RDMA cluster network, or None (``network.rdma: none``, or no network).
rdma_network = shape_rules.rdma_network

#: Environment variable: the directory of the shape files (default: site/shapes).
SHAPES_DIR_ENV = "OCIBENCH_SHAPES_DIR"

#: The NUMA-nodes-per-socket settings an AMD EPYC BIOS offers (cpu.nps_modes).
NPS_SETTINGS = (0, 1, 2, 4)

#: The schedulers ocibench.reframe.site builds partitions for (scheduler:).
SCHEDULERS = ("slurm", "none")


#: A shape name: OCI's shape names (BM.GPU.H100.8, VM.Standard.E5.Flex) and ours
#: (local, loopback-cluster).  No '/', no leading '.', bounded: a name is a file name
#: in the shapes directory and nothing else.
NAME_PATTERN = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

#: Bounds on a shape file, far above the largest shipped one (depth 8, about 1,500
#: values): the deepest nesting, and how many values the document holds once every
#: YAML alias is expanded (what the schema and the rules walk).  An alias "bomb" (10
#: levels of 10 aliases: 10**10 values from a 1 KB file) is refused before any walk.
MAX_DEPTH = 32
MAX_VALUES = 200_000
#: The largest shape file read (the shipped ones are under 30 KB).
MAX_FILE_BYTES = 1 << 20


class ShapeError(ValueError):
    """A shape name or shape file that cannot be used, with the reason."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key written twice in a mapping is an error,
    and nesting deeper than :data:`MAX_DEPTH` is refused while composing.

    PyYAML keeps the last of two equal keys silently: a figure with ``nodes`` twice
    would lose one without a word.  PyYAML's composer recurses once per level: 600
    levels would end in a RecursionError, so the depth is counted here.
    """

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

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
    #: What describing this machine could not read (``local`` only), one line each.
    unknown: tuple[str, ...] = ()

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
        """``network.ucx_net_devices``; its ``mpi`` where the file gives none is the first
        cluster-network port (``rdma_nics``): one list, not a second copy of its head."""
        given = dict((self.data.get("network") or {}).get("ucx_net_devices") or {})
        nics = self.rdma_nics
        if "mpi" not in given and nics:
            return {"mpi": nic_port(nics[0]), **given}
        return given

    @property
    def rdma_nics(self) -> list[dict[str, Any]]:
        """The cluster-network NICs (``network.rdma_nics``), one per port, in the order
        of OCI's NCCL_IB_HCA; [] where the shape has no RDMA network."""
        return list((self.data.get("network") or {}).get("rdma_nics") or [])

    @property
    def hcas(self) -> list[str]:
        """The cluster-network RDMA devices, in OCI's NCCL_IB_HCA order: what the perftest
        checks run on (derived from ``rdma_nics``)."""
        return [str(nic["device"]) for nic in self.rdma_nics]

    @property
    def gid_index(self) -> int:
        """The RoCE GID index of the cluster-network ports (``network.gid_index``, else
        OCI's 3): perftest's ``-x``, and NCCL_IB_GID_INDEX where the shape sets it."""
        return int((self.data.get("network") or {}).get("gid_index", OCI_GID_INDEX))

    @property
    def figures(self) -> list[dict[str, Any]]:
        return self.data["figures"]

    @property
    def topology(self) -> dict[str, Any]:
        """A node's layout as the placements read it (ocibench.placement): its NUMA
        nodes, its GPU count and the NUMA node of GPU *i*."""
        devices = sorted((self.gpus or {}).get("devices") or [], key=lambda d: d["index"])
        return {"numa_nodes": [dict(n) for n in self.cpu["numa_nodes"]],
                "gpus": self.gpu_count,
                "gpu_numa": [d["numa_node"] for d in devices]}

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


def nic_port(nic: dict[str, Any]) -> str:
    """"mlx5_0:1": an entry of ``network.rdma_nics`` as UCX_NET_DEVICES names a port."""
    return f"{nic['device']}:{int(nic.get('port', 1))}"


def shapes_dir() -> Path:
    """$OCIBENCH_SHAPES_DIR, else the repository's ``site/shapes``.

    A site may keep its shape files elsewhere (and tests use a copy); every reader
    of shape files (ReFrame's configuration included) follows this one setting.
    """
    override = os.environ.get(SHAPES_DIR_ENV)
    return Path(override) if override else SHAPES_DIR


def known_shapes() -> list[str]:
    """Every shape with a file in :func:`shapes_dir`, sorted, ``local`` included.

    A directory that cannot be listed is a ShapeError naming it (not an empty list:
    "no shapes" and "cannot read the shapes" are different answers)."""
    directory = shapes_dir()
    try:
        names = [entry.name for entry in os.scandir(directory)]
    except OSError as err:
        raise ShapeError(f"cannot list the shapes directory {directory}: "
                         f"{err.strerror or err}") from None
    return sorted(n[:-len(".yaml")] for n in names
                  if n.endswith(".yaml") and NAME_PATTERN.fullmatch(n[:-len(".yaml")]))


def shape_path(name: str) -> Path:
    """The file of the shape ``name``; ShapeError for a name that is no shape name
    (a '/', '..', too long) or has no file, naming the known shapes."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        shown = name if not isinstance(name, str) or len(name) <= 60 else name[:57] + "..."
        raise ShapeError(f"{shown!r} is not a shape name (letters, digits, '.', '_', '-', "
                         "at most 100, not starting with '.')")
    path = shapes_dir() / f"{name}.yaml"
    try:
        found = path.is_file()
    except OSError as err:
        raise ShapeError(f"cannot look up shape {name!r} in {shapes_dir()}: "
                         f"{err.strerror or err}") from None
    if not found:
        known = known_shapes()
        listing = (f"known shapes: {', '.join(known)}" if known
                   else f"{shapes_dir()} holds no shape file (*.yaml)")
        raise ShapeError(f"unknown shape {name!r}; {listing}")
    return path


def load(name: str) -> Shape:
    """Load and validate one shape; ``local`` is completed from the machine."""
    return load_file(shape_path(name))


def load_file(path: Path) -> Shape:
    """Load and validate the shape file at ``path``; its stem is the shape's name.

    Every fault is a ShapeError whose one line names the file, the figure and the
    field (:mod:`ocibench.shapes.rules`).

    A process parses and validates a file once (:data:`_loaded`): asked again, the file
    is read and its bytes compared, and the same Shape (or the same refusal) comes back
    while they are unchanged.  The returned Shape is shared: its readers never change
    its ``data``.
    """
    path = Path(path)
    where = path.name
    raw = _read(path, where)
    key = _cache_key(path)
    digest = hashlib.sha256(raw).digest()
    kept = _loaded.get(key)
    if kept is not None and kept[0] == digest:
        result = kept[1]
    else:
        try:
            result = _load(path, raw)
        except ShapeError as err:
            result = str(err)
        _loaded[key] = (digest, result)
    if isinstance(result, str):
        raise ShapeError(result)
    return result


#: What this process has loaded: (file, $PATH for ``local``) -> (the digest of the
#: file's bytes, the Shape or the refusal's line).  ReFrame's start-up asks for every
#: shape from several places (its configuration, the checks' parameters, each check's
#: configure): one YAML parse and one validation per file (about 70 ms each), and one
#: probe of this machine.  The probe's answer depends on the tools $PATH finds (a GPU
#: tool installed, a fake one in a test): another $PATH describes the machine again.
_loaded: dict[tuple[str, str | None], tuple[bytes, Shape | str]] = {}


def forget() -> None:
    """Drop every shape this process kept: the next load reads, validates and probes
    afresh.  For a process that stands for several machines in turn (a test that fakes
    one node's tools, then another's); a command never needs it."""
    _loaded.clear()


def _cache_key(path: Path) -> tuple[str, str | None]:
    return (os.path.realpath(path),
            os.environ.get("PATH", "") if path.stem == LOCAL else None)


def _load(path: Path, raw: bytes) -> Shape:
    """Parse, validate (and for ``local`` probe) the shape file ``path`` holding ``raw``."""
    name = path.stem
    where = path.name
    data = _parse(raw, where)
    unknown: list[str] = []
    if name == LOCAL:
        _fail(where, shape_rules.schema_problem(data))  # before probing: the file as written
        data = _probe_local(data, where, unknown)
    validate(data, where)
    if data["shape"] != name:
        raise ShapeError(f"{where}: 'shape' is {data['shape']!r}, expected {name!r} "
                         "(the file's name without .yaml)")
    return Shape(name=name, data=data, path=path, unknown=tuple(unknown))


def _read(path: Path, where: str) -> bytes:
    """A shape file's bytes, bounded in size."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ShapeError(f"{where}: cannot read: {' '.join((err.strerror or str(err)).split())}"
                         ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ShapeError(f"{where}: larger than {MAX_FILE_BYTES} bytes: not a shape file")
    return raw


def _parse(raw: bytes, where: str) -> Any:
    """The YAML document of a shape file's bytes, bounded in depth and expanded size."""
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ShapeError(f"{where}: not valid YAML{at}: {err.problem}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ShapeError(f"{where}: cannot read: {' '.join(str(err).split())}") from None
    size = _expanded_size(data, {}, set())
    if size > MAX_VALUES:
        raise ShapeError(f"{where}: holds more than {MAX_VALUES} values once its YAML "
                         "aliases are expanded: not a shape file")
    return data


def _expanded_size(value: Any, sizes: dict[int, int], open_: set[int]) -> int:
    """How many values ``value`` holds with every alias expanded.

    PyYAML builds an alias as a second reference to the same object, so the loaded
    document is small; whoever walks it (the schema, the rules, JSON) walks every
    reference.  Counted once per object (``sizes``), so the count costs as much as
    the file, not as the expansion; a self-containing alias counts as one (the
    schema check names it).  Depth is bounded by the loader."""
    if not isinstance(value, (dict, list)):
        return 1
    key = id(value)
    if key in sizes:
        return sizes[key]
    if key in open_:
        return 1
    open_.add(key)
    children = value.values() if isinstance(value, dict) else value
    total = 1
    for child in children:
        total += _expanded_size(child, sizes, open_)
        if total > MAX_VALUES:
            break
    open_.discard(key)
    sizes[key] = total
    return total


def _probe_local(data: dict[str, Any], where: str, unknown: list[str]) -> dict[str, Any]:
    from ocibench.shapes import probe  # local import: probing runs commands

    try:
        return probe.complete_local(data, unknown)
    except (OSError, subprocess.SubprocessError, probe.ProbeError) as err:
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
    if isinstance(shape, str) and NAME_PATTERN.fullmatch(shape):
        try:
            if (shapes_dir() / f"{shape}.yaml").is_file():
                return shape
        except OSError:
            pass   # an unreadable directory: local, as off OCI
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
