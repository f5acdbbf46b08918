"""The checks and their run parameters: one registry for the output parsers, the
references, the offline evaluator and the ReFrame checks.

A check's parameters are of two kinds.  Some select the documented variant (buffers,
nodes, placement, ranks_per_node, gpus_per_node, mpi, nps, threads) and are matched
against a figure's ``params``; the others give the message sizes the run covered
(OMB ``-m``, IMB ``-msglog``, nccl-tests ``-b/-e/-f/-i``), from which the parsers know
which size lines must be present.  Every default is the seeds' command line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: STREAM's four kernels, as its report names them (stream.c's label[]): the value keys
#: of a STREAM figure.
STREAM_KERNELS = ("Copy", "Scale", "Add", "Triad")

#: The names nccl-tests' values are keyed by (its out-of-place and in-place busbw).
NCCL_COLUMNS = ("out_of_place", "in_place")
#: A node's copy ceilings, the value keys of an nvbandwidth figure: nvbandwidth's
#: memcpy CE testcases, and the pageable copies (ocibench.node.pageable_copy).
NVBANDWIDTH_KEYS = ("host_to_device", "device_to_host", "device_to_device_read",
                    "device_to_device_write", "pageable_host_to_device",
                    "pageable_device_to_host")


class ParamError(ValueError):
    """An unknown check, an unknown parameter or a bad parameter value; one line."""


#: The digits a number may be written with.  Python's int() also takes other scripts'
#: digits ("١" is 1) and underscores ("1_0"); a benchmark's command line takes neither.
_ASCII_NUMBER = re.compile(r"[0-9]+")
#: More digits than any size or count has (2**64 has 20); int() of a longer string
#: costs time quadratic in its length.
_MAX_DIGITS = 20


def _ascii_int(text: Any) -> int:
    """A non-negative integer written in ASCII digits (an int passes as it is)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    raw = str(text).strip()
    if not _ASCII_NUMBER.fullmatch(raw) or len(raw) > _MAX_DIGITS:
        raise ValueError(f"{text!r} is not an integer")
    return int(raw)


def _positive_int(text: Any) -> int:
    value = _ascii_int(text)
    if value < 1:
        raise ValueError(f"{text!r} is not a positive integer")
    return value


def _int_range(text: Any) -> tuple[int, int]:
    """'MIN:MAX' as two integers, MIN <= MAX."""
    first, sep, last = str(text).partition(":")
    try:
        low, high = _ascii_int(first), _ascii_int(last)
    except ValueError:
        low = high = None
    if not sep or low is None or high is None or low > high:
        raise ValueError(f"{text!r} is not MIN:MAX with integers MIN <= MAX")
    return low, high


def _range_text(text: Any) -> str:
    first, last = _int_range(text)
    return f"{first}:{last}"


#: nccl-tests' size suffixes (its parsesize(): powers of 1024).
_NCCL_SUFFIXES = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
_NCCL_SIZE = re.compile(r"([0-9]{1,20})([KMG]?)")


def nccl_bytes(text: Any) -> int:
    """A size as nccl-tests' -b/-e/-i read it: 10G = 10 * 2**30 bytes."""
    found = _NCCL_SIZE.fullmatch(str(text).strip().upper())
    if not found:
        raise ValueError(f"{text!r} is not a size like 10G, 512M, 8K or 1024")
    return int(found.group(1)) * _NCCL_SUFFIXES[found.group(2)]


def _nccl_size_text(text: Any) -> str:
    nccl_bytes(text)
    return str(text).strip()


@dataclass(frozen=True)
class Param:
    """One run parameter; ``default`` None means "not set" unless a rule requires it."""

    name: str
    help: str
    convert: Callable[[Any], Any] = str
    choices: tuple[Any, ...] = ()
    default: Any = None
    kind: str = "N"          # how --list shows a value without choices

    def value(self, check: str, raw: Any) -> Any:
        if isinstance(raw, str) and not raw.strip():
            raise ParamError(f"{check}: {self.name}: empty value ({self.describe()})")
        if isinstance(raw, str) and not raw.isascii():
            raise ParamError(f"{check}: {self.name}: {raw!r} has non-ASCII characters "
                             "(write it as on the benchmark's command line)")
        try:
            value = self.convert(raw)
        except ValueError as err:
            raise ParamError(f"{check}: {self.name}: {err}") from None
        if self.choices and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise ParamError(f"{check}: {self.name} must be one of {allowed}, not {raw!r}")
        return value

    def describe(self) -> str:
        allowed = "|".join(str(c) for c in self.choices) or self.kind
        default = "none" if self.default is None else self.default
        return f"{self.name}={allowed} (default {default}): {self.help}"


@dataclass(frozen=True)
class CheckSpec:
    """A check family: what it runs, its parameters, its size range and primary metric."""

    name: str
    summary: str
    metric: str
    params: tuple[Param, ...]
    #: For values keyed by name (nccl-tests' busbw columns at the last size and their
    #: average over every size): the size range is part of the variant.  A figure then
    #: documents the run over exactly the sizes its own size parameters give (those it
    #: leaves out take the defaults: the seeds' 10 GiB), see :func:`figure_sizes`.
    sizes_in_variant: bool = False
    #: Metrics the same output also gives, besides ``metric`` (IMB PingPong's
    #: Mbytes/sec column): a figure may document any of :attr:`metrics`.
    extra_metrics: tuple[str, ...] = ()
    #: The collective library whose log shows the path the traffic took ("nccl":
    #: :mod:`ocibench.figures.nccl_path`); None for MPI's own benchmarks (UCX's tables say it).
    collective: str | None = None

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric, *self.extra_metrics)

    def param(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        known = ", ".join(p.name for p in self.params)
        raise ParamError(f"{self.name}: unknown parameter {name!r}; known: {known}")


_BUFFERS = Param("buffers", "where the two ranks' buffers live (H host, D device), as OMB's "
                 "'-d <gpu> D H'", choices=("H-H", "D-D", "H-D", "D-H"), default="H-H")
_PLACEMENT = Param("placement", "host rank's core relative to the GPU, for H-D and D-H in one "
                   "node", choices=("same-numa", "same-socket", "other-socket"))
_MPI = Param("mpi", "the MPI that IMB was built with", choices=("openmpi", "intel-mpi"),
             default="openmpi")


def _nodes(default: int, choices: tuple[int, ...] = ()) -> Param:
    return Param("nodes", "nodes the run spanned", _positive_int, choices, default)


def _ranks_per_node(default: int) -> Param:
    return Param("ranks_per_node", "MPI ranks on each node", _positive_int, default=default)


def _gpus_per_node(default: int) -> Param:
    return Param("gpus_per_node", "GPUs (one rank each) on each node", _positive_int,
                 default=default)


def _omb_sizes(default: str) -> Param:
    return Param("sizes", "OMB -m MIN:MAX; sizes double from MIN", _range_text, default=default,
                 kind="MIN:MAX")


#: RDMA device names as /sys/class/infiniband lists them (mlx5_0, rxe0, ...).
_DEVICE_NAME = re.compile(r"[A-Za-z][\w.-]*")


def _device(text: Any) -> str:
    name = str(text).strip()
    if not _DEVICE_NAME.fullmatch(name):
        raise ValueError(f"{text!r} is not an RDMA device name like mlx5_0")
    return name


def _perftest_params(size: int, extra: tuple[Param, ...]) -> tuple[Param, ...]:
    """perftest between two nodes as oci-hpc's multi-node health check runs it
    (playbooks/roles/healthchecks/files/multi_node_active_healthcheck.py, v3.1.0)."""
    return (
        _nodes(2, (2,)),
        Param("device", "-d, the RDMA device (one port of the cluster network)", _device,
              kind="NAME"),
        Param("port", "-i, the port of the device", _positive_int, default=1),
        Param("size", "-s, message size in bytes", _positive_int, default=size),
        *extra,
        Param("attempts", "runs in the output, the best of which counts (OCI: 3)",
              _positive_int, default=1),
    )


_MSGLOG = Param("msglog", "IMB -msglog MINLOG:MAXLOG; sizes 0 and 2^MINLOG..2^MAXLOG",
                _range_text, default="3:28", kind="MINLOG:MAXLOG")

CHECKS: dict[str, CheckSpec] = {spec.name: spec for spec in (
    CheckSpec("osu_latency", "OMB osu_latency -m 1:1 [-d <gpu> X Y]", "latency",
              (_BUFFERS, _nodes(2, (1, 2)), _PLACEMENT, _omb_sizes("1:1"))),
    CheckSpec("osu_bw", "OMB osu_bw -m 268435456:268435456 [-d <gpu> X Y]", "bandwidth",
              (_BUFFERS, _nodes(2, (1, 2)), _PLACEMENT, _omb_sizes("268435456:268435456"))),
    CheckSpec("osu_alltoall", "OMB osu_alltoall -m 1:67108864", "latency",
              (_nodes(1), _ranks_per_node(36), _omb_sizes("1:67108864"))),
    CheckSpec("osu_allreduce", "OMB osu_allreduce -m 4:268435456", "latency",
              (_nodes(4), _ranks_per_node(36), _omb_sizes("4:268435456"))),
    CheckSpec("osu_xccl_allreduce", "OMB osu_xccl_allreduce -m 1073741824:1073741824 -d <gpu>",
              "latency",
              (_nodes(1, (1, 2)), _gpus_per_node(8), _omb_sizes("1073741824:1073741824")),
              collective="nccl"),
    CheckSpec("nccl_all_reduce_perf", "nccl-tests all_reduce_perf -b 10G -e 10G -g 1 "
              "(busbw at the last size, out of place and in place; avg: '# Avg bus bandwidth')",
              "busbw",
              (_nodes(1), _gpus_per_node(8),
               Param("begin", "-b, smallest size (K/M/G = 2^10/2^20/2^30)", _nccl_size_text,
                     default="10G", kind="SIZE"),
               Param("end", "-e, largest size", _nccl_size_text, default="10G", kind="SIZE"),
               Param("factor", "-f, multiply sizes by this (1: add step instead)",
                     _positive_int, default=1),
               Param("step", "-i, bytes added per size when factor is 1", _nccl_size_text,
                     default="1M", kind="SIZE")),
              sizes_in_variant=True, collective="nccl"),
    CheckSpec("imb_pingpong", "IMB-MPI1 -msglog 3:28 PingPong (one rank per node)", "latency",
              (_MPI, _nodes(2), _MSGLOG), extra_metrics=("bandwidth",)),
    CheckSpec("imb_allreduce", "IMB-MPI1 -msglog 3:28 -npmin N allreduce", "latency",
              (_MPI, _nodes(4), _ranks_per_node(36), _MSGLOG)),
    # OCI's floors judge the columns its health check reads: BW peak (parts[2] of the
    # 65536-byte row) and t_avg (awk '{print $6}' of the 8-byte row).
    CheckSpec("ib_write_bw", "perftest ib_write_bw -F -q 2 -x 3 --report_gbits -d DEVICE "
              "(BW peak, Gb/s)", "bandwidth",
              _perftest_params(65536, (Param("qps", "-q, queue pairs", _positive_int,
                                             default=2),))),
    CheckSpec("ib_write_lat", "perftest ib_write_lat -F -x 3 -s 8 -n 10000 -d DEVICE (t_avg)",
              "latency",
              _perftest_params(8, (Param("iterations", "-n, exchanges", _positive_int,
                                         default=10000),))),
    # This node's copy ceilings, keyed by name (ocibench.figures.outputs.NVBANDWIDTH_CEILINGS),
    # in MB/s as OMB prints its bandwidths.
    CheckSpec("nvbandwidth", "nvbandwidth -t <copy-engine testcases> (its default buffer "
              "size) and python3 -m ocibench.node.pageable_copy (GB/s of copies, read as MB/s)",
              "bandwidth",
              (_nodes(1, (1,)), _gpus_per_node(8))),
    CheckSpec("stream", "STREAM with OMP_NUM_THREADS=threads on a node in NPS nps mode",
              "bandwidth",
              (Param("nps", "NUMA nodes per socket (BIOS)", _positive_int, (1, 2, 4), 1),
               Param("threads", "OMP_NUM_THREADS", _positive_int, default=96))),
)}

#: Above this many message sizes a range is surely a typo (and would be slow to list).
MAX_SIZES = 4096


def spec(check: str) -> CheckSpec:
    if check not in CHECKS:
        raise ParamError(f"unknown check {check!r}; known: {', '.join(CHECKS)}")
    return CHECKS[check]


def resolve(check: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The run's parameters: validated, converted, defaults filled in, unset ones left out."""
    check_spec = spec(check)
    params = {p.name: p.default for p in check_spec.params}
    for name, raw in given.items():
        params[name] = check_spec.param(name).value(check, raw)
    params = {k: v for k, v in params.items() if v is not None}
    if "placement" in {p.name for p in check_spec.params}:
        _check_placement(check, params)
    expected_sizes(check, params)  # rejects an impossible size range now, not at parse time
    return params


def _check_placement(check: str, params: dict[str, Any]) -> None:
    """placement names the host rank's core, so it exists exactly for H-D/D-H in a node."""
    needs = params["buffers"] in ("H-D", "D-H") and params["nodes"] == 1
    if needs and "placement" not in params:
        raise ParamError(f"{check}: {params['buffers']} in one node needs placement "
                         "(same-numa, same-socket or other-socket)")
    if not needs and "placement" in params:
        raise ParamError(f"{check}: placement applies only to H-D and D-H with nodes=1")


def expected_sizes(check: str, params: Mapping[str, Any]) -> list[int]:
    """Every message size the run prints a line for; [] for STREAM (no sizes).

    The sizes are counted before any list is built: a range of a million sizes
    (``msglog=3:1000000``) is refused at once instead of filling the memory.
    """
    names = {p.name: p for p in spec(check).params}

    def get(name: str) -> Any:
        return names[name].value(check, params.get(name, names[name].default))

    if "sizes" in names:
        first, last = _int_range(get("sizes"))
        _at_most(check, "sizes", _doublings(first, last))
        return _series(first, last, lambda s: s * 2 if s else 1)
    if "msglog" in names:
        first, last = _int_range(get("msglog"))
        _at_most(check, "msglog", last - first + 2)   # 0, then 2^first .. 2^last
        return [0] + [2**k for k in range(first, last + 1)]
    if "size" in names:   # perftest: one size per run
        return [get("size")]
    if "end" in names:
        return _nccl_sizes(check, get)
    return []


def _at_most(check: str, name: str, count: int) -> None:
    if count > MAX_SIZES:
        raise ParamError(f"{check}: {name}: the range gives {count} message sizes "
                         f"(at most {MAX_SIZES})")


def _doublings(first: int, last: int) -> int:
    """How many sizes first, 2*first, 4*first, ... <= last there are (OMB's -m);
    OMB starts a range at 0 with 0, 1, 2, ..."""
    if first == 0:
        return 1 + _doublings(1, last) if last >= 1 else 1
    return (last // first).bit_length()


def _nccl_sizes(check: str, get: Callable[[str], Any]) -> list[int]:
    """nccl-tests' sizes: from -b to -e, times -f, or plus -i when -f is 1."""
    factor, step = get("factor"), nccl_bytes(get("step"))
    first, last = nccl_bytes(get("begin")), nccl_bytes(get("end"))
    if first > last:
        raise ParamError(f"{check}: begin {get('begin')} is larger than end {get('end')}")
    if factor > 1:
        if first == 0:
            raise ParamError(f"{check}: begin 0 never grows by factor {factor}")
        count, size = 1, first
        while size * factor <= last and count <= MAX_SIZES:   # at most log2(last) turns
            size *= factor
            count += 1
        _at_most(check, "begin/end/factor", count)
        return _series(first, last, lambda s: s * factor)
    if step == 0:
        raise ParamError(f"{check}: step 0 with factor 1 never advances")
    count = (last - first) // step + 1
    _at_most(check, "begin/end/step", count)
    return _series(first, last, lambda s: s + step)


def _series(first: int, last: int, advance: Callable[[int], int]) -> list[int]:
    """first, advance(first), ... up to last; the caller has counted them."""
    sizes, size = [], first
    while size <= last:
        sizes.append(size)
        if len(sizes) > MAX_SIZES:   # the callers counted; a slip must not hang
            raise ParamError(f"more than {MAX_SIZES} message sizes from {first} to {last}")
        size = advance(size)
    return sizes


def figure_sizes(check: str, figure_params: Mapping[str, Any]) -> list[int]:
    """The sizes of the run a figure documents: its own size parameters, the check's
    defaults for those it leaves out (nccl-tests: -b 10G -e 10G, the seeds' run)."""
    names = {p.name for p in spec(check).params}
    return expected_sizes(check, {k: v for k, v in figure_params.items() if k in names})
