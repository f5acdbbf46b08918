"""Validate a shape file: its JSON Schema first, then the rules that span fields.

``site/shapes/schema.json`` states every field, its type and its allowed values;
editors read it too (docs/shapes.md).  What a schema cannot say is checked here,
against the one registry of each concept:

* a figure's ``check`` is a check of :mod:`ocibench.benchmarks`, its ``metric`` one
  that check gives, its ``params`` parameters of that check with allowed values
  (each parameter's own converter and choices), its ``values`` and ``floor.values``
  keys the message sizes the check prints for those params (or the STREAM kernels,
  or nccl-tests' columns, :mod:`ocibench.figures.outputs`);
* ``limit`` names a key of ``links`` (or ``memory``) and bounds a rate;
* ``requires`` names capabilities of :mod:`ocibench.capabilities`;
* every core sits in exactly one NUMA node, every GPU on a NUMA node that exists;
* ``gpus.vendor`` is a row of :mod:`ocibench.accelerators` and ``gpus.arch`` an
  architecture of that vendor;
* figure ids are unique.

:func:`problem` answers the first fault as one line naming the field, and the
figure by its id where the field is in a figure; the caller prefixes the file.
Why one fault and not all: a broken type makes the later rules meaningless, and
one line per file is what ``ocibench shape --check`` prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from ocibench import accelerators, benchmarks, capabilities, metrics
from ocibench.paths import SITE_DIR

#: The RoCE GID index of a shape whose file gives no ``network.gid_index``: OCI's
#: health checks run perftest with ``-x 3`` on every RoCEv2 shape (oracle-quickstart/
#: oci-hpc v3.1.0, playbooks/roles/healthchecks/files/multi_node_active_healthcheck.py
#: lines 475 and 558; scripts/ib_write_bw.sh line 40), and its RCCL sample gives
#: NCCL_IB_GID_INDEX=3 (samples/gpu/rccl_run_allreduce.sbatch line 66).
OCI_GID_INDEX = 3

#: The schema ships beside the shipped shape files (editors find it there); shape
#: files read from another directory ($OCIBENCH_SHAPES_DIR) are held to the same one.
SCHEMA_PATH = SITE_DIR / "shapes" / "schema.json"

#: How many sizes an error message lists before eliding the middle.
_SHOWN_SIZES = 6


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def _strict_integer(_checker: Any, instance: Any) -> bool:
    # JSON Schema calls 36.0 an integer; range(36.0) is a TypeError: refuse it.
    return isinstance(instance, int) and not isinstance(instance, bool)


def _finite_number(_checker: Any, instance: Any) -> bool:
    # .nan and .inf are YAML floats; no shape fact or figure is either.
    return metrics.is_number(instance)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    base = jsonschema.Draft202012Validator
    base.check_schema(schema())
    checker = base.TYPE_CHECKER.redefine_many(
        {"integer": _strict_integer, "number": _finite_number})
    return jsonschema.validators.extend(base, type_checker=checker)(schema())


def problem(data: Any) -> str | None:
    """The first fault of a shape file's data as one line, or None when it is valid."""
    found = schema_problem(data)
    if found:
        return found
    return next(iter(_rule_problems(data)), None)


def schema_problem(data: Any) -> str | None:
    """The schema's verdict alone (``local.yaml`` before its hardware is probed)."""
    try:
        document = _jsonable(data, [], set())
    except _SelfReference as err:
        return _joined(_where(err.path, data),
                       "a YAML alias refers to the mapping or list that contains it")
    except _DuplicateKey as err:
        return _joined(_where(err.path, data),
                       f"key {str(err.key)!r} appears twice (once as text, once as a number)")
    error = best_match(_validator().iter_errors(document))
    return None if error is None else _describe(error, data)


class _SelfReference(ValueError):
    def __init__(self, path: list[Any]) -> None:
        super().__init__("self-reference")
        self.path = path


class _DuplicateKey(ValueError):
    def __init__(self, path: list[Any], key: Any) -> None:
        super().__init__("duplicate key")
        self.path = path
        self.key = key


def _jsonable(value: Any, path: list[Any], open_: set[int]) -> Any:
    """The document as JSON sees it: YAML's integer keys (message sizes) as text.

    YAML aliases can build a list that contains itself (``&a [*a]``): refused here,
    where it would otherwise recurse without end.
    """
    if not isinstance(value, (Mapping, list)):
        return value
    if id(value) in open_:
        raise _SelfReference(path)
    open_.add(id(value))
    try:
        if isinstance(value, Mapping):
            document: dict[str, Any] = {}
            for k, v in value.items():
                text = k if isinstance(k, str) else str(k)
                if text in document:
                    # 1 and "1" are two YAML keys but one message size: one would be lost
                    raise _DuplicateKey(path, k)
                document[text] = _jsonable(v, path + [k], open_)
            return document
        return [_jsonable(v, path + [i], open_) for i, v in enumerate(value)]
    finally:
        open_.discard(id(value))


# --------------------------------------------------------------------------- messages

def _where(path: list[Any], data: Any) -> str:
    """'cpu.numa_nodes[0].cores', or "figure 'osu_bw_d_d': params.nodes"."""
    return _joined(*_split(path, data))


def _split(path: list[Any], data: Any) -> tuple[str, str]:
    """(the figure's label or '', the field's dotted path) of a path in the document."""
    label = ""
    if len(path) >= 2 and path[0] == "figures" and isinstance(path[1], int):
        label = _figure_label(data["figures"][path[1]], path[1])
        path = path[2:]
    field = ""
    for part in path:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    return label, field


def _figure_label(figure: Any, index: int) -> str:
    figure_id = figure.get("id") if isinstance(figure, Mapping) else None
    return f"figure {figure_id!r}" if isinstance(figure_id, str) and figure_id \
        else f"figure #{index + 1} (no id)"


def _joined(where: str, text: str) -> str:
    return f"{where}: {text}" if where and text else where or text


_TYPE_NAMES = {"integer": "an integer", "number": "a finite number", "string": "a string",
               "boolean": "true or false", "array": "a list", "object": "a mapping",
               "null": "null"}


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _describe(error: ValidationError, data: Any) -> str:
    path = list(error.absolute_path)
    where = _where(path, data)
    kind, expected, instance = error.validator, error.validator_value, error.instance
    hint = error.schema.get("description") if isinstance(error.schema, dict) else None
    about = f" ({hint.rstrip('.')})" if hint else ""
    if kind == "required":
        name = next(n for n in expected if n not in instance)
        label, field = _split(path + [name], data)
        return _joined(label, f"missing field {field!r}")
    if kind == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(k for k in instance if k not in known)
        known_text = ", ".join(known) or "none"
        return _joined(where, f"unknown field {extra[0]!r} (known: {known_text})")
    if kind == "dependentRequired":
        key = next(k for k, needs in expected.items()
                   if k in instance and any(n not in instance for n in needs))
        need = next(n for n in expected[key] if n not in instance)
        return _joined(where, f"{key!r} needs {need!r} beside it")
    if kind == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_TYPE_NAMES.get(t, t) for t in types)
        if not path:
            found = "an empty file" if instance is None else _short(instance)
            return f"a shape file must be a mapping, not {found}"
        return _joined(where, f"{_short(instance)} is not {wanted}{about}")
    if kind == "enum":
        allowed = ", ".join(str(v) for v in expected)
        return _joined(where, f"{_short(instance)} is not one of {allowed}")
    if kind in ("minItems", "maxItems"):
        bound = "at least" if kind == "minItems" else "at most"
        items = "item" if expected == 1 else "items"
        return _joined(where, f"{_short(instance)} must have {bound} {expected} {items}{about}")
    if kind in ("minimum", "exclusiveMinimum"):
        sign = ">=" if kind == "minimum" else ">"
        return _joined(where, f"{_short(instance)} must be {sign} {expected}{about}")
    if kind == "maximum":
        return _joined(where, f"{_short(instance)} must be <= {expected}{about}")
    if kind in ("minLength", "minProperties"):
        return _joined(where, f"must not be empty{about}")
    if kind == "uniqueItems":
        return _joined(where, f"{_short(instance)} lists an item twice")
    if kind == "pattern":
        # propertyNames reports the object's path, and the offending key as instance
        key_error = "propertyNames" in error.absolute_schema_path
        subject = f"key {_short(instance)}" if key_error else _short(instance)
        return _joined(where, f"{subject} does not match {expected!r}{about}")
    if kind in ("oneOf", "anyOf"):
        # A requirement is a name or {any_of: [...]}: a wrong name is best told by the
        # branch that fits its type ("is not one of ..."), not by "is not valid".
        fitting = [e for e in error.context or () if e.validator != "type"]
        if fitting:
            return _describe(best_match(fitting), data)
        return _joined(where, f"{_short(instance)} is not valid{about}")
    return _joined(where, error.message)


# --------------------------------------------------------------------------- rules

def _rule_problems(data: dict[str, Any]) -> Iterator[str]:
    for key in ("cpu", "memory"):
        if key not in data:  # the schema asks for them except in local.yaml
            yield f"missing field {key!r}"
            return
    yield from _numa_problems(data["cpu"])
    yield from _gpu_problems(data)
    yield from _capability_problems(data)
    yield from _rdma_nic_problems(data)
    yield from _gid_problems(data)
    seen: dict[str, int] = {}
    for index, figure in enumerate(data["figures"]):
        label = _figure_label(figure, index)
        if figure["id"] in seen:
            yield f"figure id {figure['id']!r} appears twice (figures #{seen[figure['id']] + 1} " \
                  f"and #{index + 1})"
        seen[figure["id"]] = index
        yield from (f"{label}: {p}" for p in _figure_problems(figure, data))


def _numa_problems(cpu: dict[str, Any]) -> Iterator[str]:
    nodes, cores = cpu["numa_nodes"], cpu["cores"]
    ids: set[int] = set()
    spans = []
    for i, node in enumerate(nodes):
        where = f"cpu.numa_nodes[{i}]"
        if node["id"] in ids:
            yield f"{where}.id: NUMA node {node['id']} appears twice"
        ids.add(node["id"])
        if node["socket"] >= cpu["sockets"]:
            yield f"{where}.socket: socket {node['socket']}, but cpu.sockets is {cpu['sockets']}"
        first, last = node["cores"]
        if first > last:
            yield f"{where}.cores: first core {first} is after last core {last}"
        if last >= cores:
            yield f"{where}.cores: core {last} is beyond cpu.cores ({cores}: cores 0..{cores - 1})"
        spans.append((first, last, node["id"]))
    # Interval arithmetic, not a list of every core: a typo'd core count stays cheap.
    expected = 0
    previous = None
    for first, last, node_id in sorted(spans):
        if first < expected:
            yield (f"cpu.numa_nodes: core {first} is in NUMA node {previous} and in NUMA node "
                   f"{node_id} (every core sits in one NUMA node)")
        elif first > expected:
            yield f"cpu.numa_nodes: cores {expected}..{first - 1} are in no NUMA node"
        expected, previous = max(expected, last + 1), node_id
    if expected < cores:
        yield f"cpu.numa_nodes: cores {expected}..{cores - 1} are in no NUMA node"


def _gpu_problems(data: dict[str, Any]) -> Iterator[str]:
    gpus = data.get("gpus")
    if not gpus:
        return
    try:
        vendor = accelerators.of(gpus)
    except accelerators.VendorError as err:
        yield str(err)
        return
    wrong_arch = vendor.arch_problem(gpus["arch"])
    if wrong_arch:
        yield f"gpus.arch: {wrong_arch}"
    numa_ids = sorted(n["id"] for n in data["cpu"]["numa_nodes"])
    indexes: set[int] = set()
    for i, device in enumerate(gpus["devices"]):
        if device["index"] in indexes:
            yield f"gpus.devices[{i}].index: GPU {device['index']} appears twice"
        indexes.add(device["index"])
        if device["numa_node"] not in numa_ids:
            yield (f"gpus.devices[{i}].numa_node: GPU {device['index']} is on NUMA node "
                   f"{device['numa_node']}, which cpu.numa_nodes does not list "
                   f"({', '.join(map(str, numa_ids))})")
    domain = gpus.get("nvlink_domain")
    if domain:
        per_host = len(gpus["devices"])
        if domain["gpus"] != domain["hosts"] * per_host:
            yield (f"gpus.nvlink_domain: {domain['hosts']} hosts x {per_host} GPUs is "
                   f"{domain['hosts'] * per_host}, not gpus {domain['gpus']}")
        if not (data.get("links") or {}).get("nvlink_gbs"):
            yield "gpus.nvlink_domain: an NVLink domain needs links.nvlink_gbs"
    fabric = (data.get("capabilities") or {}).get("fabric_manager")
    if capabilities.present(fabric) and not vendor.fabric_manager_service:
        # the healthcheck asks systemd for the vendor's service: there would be none to ask
        yield (f"capabilities.fabric_manager: {vendor.vendor} GPUs have no fabric manager "
               "service (ocibench.accelerators: fabric_manager_service)")


def _capability_problems(data: dict[str, Any]) -> Iterator[str]:
    declared = data.get("capabilities") or {}
    for name, value in declared.items():
        cap = capabilities.CAPABILITIES.get(name)
        if cap is None:
            yield (f"capabilities: unknown capability {name!r} "
                   f"(known: {', '.join(capabilities.CAPABILITIES)})")
        elif cap.gpu_only and capabilities.present(value) and not data.get("gpus"):
            yield f"capabilities.{name}: a GPU capability, but the shape has no gpus"
    network = data.get("network") or {}
    ports = declared.get("rdma")
    if ports is not None and network:
        rdma = str(network["rdma"]).lower() != "none"
        if ports != (network["ports"] if rdma else 0):
            yield (f"capabilities.rdma: {ports} RDMA ports, but network says "
                   f"rdma {network['rdma']!r}, ports {network['ports']}")


def _rdma_nic_problems(data: dict[str, Any]) -> Iterator[str]:
    """The cluster-network NICs (network.rdma_nics): every port of an RDMA network is
    listed once, as many as network.ports, each serving a GPU the shape has; the
    capability says as many; NCCL_IB_HCA, where the shape sets it, names the same NICs in
    the same order (one list: the perftest checks run on it, preflight and the
    healthcheck check each of its ports)."""
    network = data.get("network") or {}
    if not network:
        return
    rdma = str(network["rdma"]).lower() != "none"
    nics = network.get("rdma_nics")
    if nics is None:
        if rdma and network["ports"] > 0:
            yield (f"network.rdma_nics: missing: a {network['rdma']} network of "
                   f"{network['ports']} ports lists its NICs ({{device, pci, gpu}} each), "
                   "which preflight and the healthcheck check one by one")
        elif "mpi" not in network["ucx_net_devices"]:
            yield ("network.ucx_net_devices.mpi: missing (it defaults to the first of "
                   "network.rdma_nics, which the shape does not list)")
        return
    if not rdma:
        yield f"network.rdma_nics: listed, but network.rdma is {network['rdma']!r}"
        return
    if len(nics) != network["ports"]:
        yield (f"network.rdma_nics: {len(nics)} NICs, but network.ports is "
               f"{network['ports']} (one entry per port)")
    gpus = sorted(d["index"] for d in (data.get("gpus") or {}).get("devices") or [])
    ports: dict[str, int] = {}
    addresses: dict[str, int] = {}
    for i, nic in enumerate(nics):
        where = f"network.rdma_nics[{i}]"
        port = f"{nic['device']}:{nic.get('port', 1)}"
        if port in ports:
            yield f"{where}: port {port} is listed twice (network.rdma_nics[{ports[port]}])"
        ports.setdefault(port, i)
        pci = nic.get("pci")
        if pci is not None and pci in addresses:
            yield (f"{where}.pci: {pci} is listed twice (network.rdma_nics"
                   f"[{addresses[pci]}]): one PCI function is one port")
        if pci is not None:
            addresses.setdefault(pci, i)
        gpu = nic.get("gpu")
        if gpu is not None and gpu not in gpus:
            known = f"gpus.devices has {', '.join(map(str, gpus))}" if gpus \
                else "the shape has no gpus"
            yield f"{where}.gpu: GPU {gpu} is no GPU of the shape ({known})"
    if (data.get("capabilities") or {}).get("rdma") is None:
        yield (f"capabilities.rdma: not declared, but network.rdma_nics lists "
               f"{len(nics)} RDMA ports (declare rdma: {len(nics)}: preflight requires "
               "what the capabilities say)")
    hca = (network.get("collective_env") or {}).get("NCCL_IB_HCA")
    if hca is not None and not str(hca).startswith("^"):
        named = [h.split(":")[0] for h in str(hca).lstrip("=").split(",") if h]
        listed = [str(nic["device"]) for nic in nics]
        if named != listed:
            yield (f"network.collective_env.NCCL_IB_HCA names {','.join(named)}, but "
                   f"network.rdma_nics lists {','.join(listed)}: the same NICs in the "
                   "same order (the perftest checks run on the one, the collective "
                   "library on the other)")


def _gid_problems(data: dict[str, Any]) -> Iterator[str]:
    """One GID index per network: perftest's -x (network.gid_index, default OCI's 3)
    and the collective library's NCCL_IB_GID_INDEX must name the same GID."""
    network = data.get("network") or {}
    nccl = (network.get("collective_env") or {}).get("NCCL_IB_GID_INDEX")
    gid = network.get("gid_index", OCI_GID_INDEX)
    if nccl is not None and str(nccl) != str(gid):
        given = "network.gid_index" if "gid_index" in network else \
            "network.gid_index (absent: OCI's default)"
        yield (f"{given} is {gid}, but network.collective_env.NCCL_IB_GID_INDEX is "
               f"{nccl!r}: perftest and the collective library must use the same GID")


def _figure_problems(figure: dict[str, Any], data: dict[str, Any]) -> Iterator[str]:
    check = figure["check"]
    spec = benchmarks.CHECKS.get(check)
    if spec is None:
        yield f"check: unknown check {check!r} (known: {', '.join(benchmarks.CHECKS)})"
        return
    metric, unit = figure["metric"], figure["unit"]
    if metric not in spec.metrics:
        yield f"metric: {check} gives {' and '.join(spec.metrics)}, not {metric!r}"
    if unit not in metrics.METRICS[metric].units:
        yield (f"unit {unit!r} does not fit metric {metric!r} "
               f"({metric} is in {', '.join(metrics.METRICS[metric].units)})")
    params = yield from _param_problems(check, spec, figure["params"])
    if params is None:
        return
    keys = _keys(check, spec, params)
    if isinstance(keys, str):
        yield keys
        return
    for field, values in (("values", figure.get("values")),
                          ("floor.values", (figure.get("floor") or {}).get("values"))):
        for key in values or {}:
            if str(key) not in keys:
                yield f"{field}: key {key!r} is not {_what_keys(check, spec, keys)}"
    yield from _limit_problems(figure, data)
    for requirement in capabilities.requirements(figure.get("requires")):
        for name in requirement.names:
            if name not in capabilities.CAPABILITIES:
                yield (f"requires: unknown capability {name!r} "
                       f"(known: {', '.join(capabilities.CAPABILITIES)})")


def _param_problems(check: str, spec: benchmarks.CheckSpec,
                    given: dict[str, Any]) -> Iterator[str]:
    """Each parameter by its own converter and choices; returns the resolved params."""
    known = [p.name for p in spec.params]
    bad = False
    for name, raw in given.items():
        if name not in known:
            yield f"params: unknown parameter {name!r} of {check} (known: {', '.join(known)})"
            return None
        param = spec.param(name)
        try:
            value = param.convert(raw)
        except ValueError as err:
            yield f"params.{name}: {err}"
            return None
        if param.choices and value not in param.choices:
            allowed = ", ".join(str(c) for c in param.choices)
            yield f"params.{name}: {raw!r} is not one of {allowed} ({check})"
            return None
        if str(value) != str(raw):
            # Figures match runs by text (ocibench.figures.references.matching): '01' never would.
            yield f"params.{name}: write {value!r}, not {raw!r}"
            bad = True
    if bad:
        return None
    try:
        return benchmarks.resolve(check, given)  # rules across parameters (placement, ranges)
    except benchmarks.ParamError as err:
        yield f"params: {err}"
        return None


def _keys(check: str, spec: benchmarks.CheckSpec, params: dict[str, Any]) -> set[str] | str:
    """The value keys this check prints for these params, or a problem."""
    if spec.keys and not spec.sizes_in_variant:   # keyed by name alone (STREAM's kernels)
        return set(spec.keys)
    sizes = benchmarks.expected_sizes(check, params)
    if spec.sizes_in_variant:
        # The size range is the figure's own (its begin/end/...): the columns at its last
        # size, and the average over its sizes when there are several.
        return set(spec.keys) | ({"avg"} if len(sizes) > 1 else set())
    return {str(s) for s in sizes}


def _what_keys(check: str, spec: benchmarks.CheckSpec, keys: set[str]) -> str:
    if spec.keys and not spec.sizes_in_variant:
        article = "an" if spec.key_name[:1] in "aeiou" else "a"
        return f"{article} {spec.key_name} ({', '.join(spec.keys)})"
    if spec.sizes_in_variant:
        return f"a {check} column ({', '.join(sorted(keys))})"
    sizes = sorted(int(k) for k in keys)
    shown = sizes if len(sizes) <= _SHOWN_SIZES else sizes[:3] + ["..."] + sizes[-2:]
    return (f"a message size {check} prints for these params "
            f"({', '.join(str(s) for s in shown)})")


def _limit_problems(figure: dict[str, Any], data: dict[str, Any]) -> Iterator[str]:
    limit = figure.get("limit")
    if limit is None:
        return
    if metrics.to_gbs(1.0, figure["unit"]) is None:
        yield f"limit {limit!r}: a {figure['metric']} in {figure['unit']} has no GB/s limit"
    elif limit == "memory":
        if not data["memory"].get("bandwidth_gbs"):
            yield "limit 'memory', but memory.bandwidth_gbs is not given"
    elif limit not in data["links"]:
        known = ", ".join([*data["links"], "memory"])
        yield f"limit {limit!r} is not a key of links ({known})"
