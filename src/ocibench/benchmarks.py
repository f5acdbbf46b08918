"""The benchmark registry: one entry per check, the one home of a benchmark.

An entry (:class:`CheckSpec`) holds everything the layers above need to know of a
benchmark, so that adding one is one entry here and one check class in checks/
(docs/adding-a-benchmark.md).  Derived from it, never written a second time:

* the shape schema's ``check`` enum (site/shapes/schema.json; tests/test_shape_schema.py
  holds the two equal) and the shape rules' value keys (:mod:`ocibench.shapes.rules`);
* the parser of each check (``parser`` names its family's module in
  :mod:`ocibench.figures.outputs`, which looks for ``title``), and what differs between
  the checks of one parser (``unit``, ``columns``, ``ranks``, ``message_per_rank``): a
  parser never asks which check it reads;
* the report's families (``family``, :mod:`ocibench.results.model`);
* which runs' buffers are UCX memory types (``ucx_buffers``: the judge names a missed
  figure's cause from UCX's protocol tables, :meth:`ocibench.figures.judge.Facts.for_run`);
* the physical limit of a figure (``directions``: a limit is per direction, so a
  bidirectional figure's is twice the link's, :func:`ocibench.figures.judge.physical_limit`);
* the node's copy ceilings that bound a figure (``ceilings``,
  :mod:`ocibench.figures.ceilings`);
* the parameters a ReFrame check hands the judge (``figure_params`` in checks/base.py
  reads the check's attributes named by :meth:`CheckSpec.variant`);
* the seed's command line (``command``; checks/osu.py and checks/perftest.py run it
  for the point-to-point checks, osu_allreduce and perftest).

A check's parameters are of two kinds.  Some select the documented variant (buffers,
nodes, placement, ranks_per_node, gpus_per_node, mpi, nps, threads) and are matched
against a figure's ``params``; the others give the message sizes the run covered
(OMB ``-m``, IMB ``-msglog``, nccl-tests ``-b/-e/-f/-i``), from which the parsers know
which size lines must be present.  Every default is the seeds' command line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ocibench import metrics

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
#: BabelStream's kernels, as its table names them (src/main.cpp of UoB-HPC/BabelStream:
#: labels Copy, Mul, Add, Triad, Dot; Nstream with --nstream-only, v4.0 on).
BABELSTREAM_KERNELS = ("Copy", "Mul", "Add", "Triad", "Dot", "Nstream")
#: What a TransferBench p2p run gives between two GPUs, GB/s a direction: the GPU->GPU
#: column of its "Averages (During UniDir)" and "Averages (During  BiDir)" lines (the
#: values AMD's acceptance compares: ROCm/cvs cvs/tests/health/transferbench_cvs.py,
#: parse_tb_p2p_bw), and the slowest pair of GPUs in each matrix (one bad link hides in
#: an average of 56 pairs).
TRANSFERBENCH_KEYS = ("unidir_avg", "bidir_avg", "unidir_min", "bidir_min")
#: What a TransferBench a2a run gives, GB/s: its "Average bandwidth (GPU Timed)" over
#: every pair of GPUs copying at once (the value of AMD's a2a floor, mi300x.md), and the
#: slowest pair of its matrix.
TRANSFERBENCH_A2A_KEYS = ("avg", "min")


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


#: The MPI a check runs with where its entry offers no other (checks/base.py's
#: launcher, the seeds' ``module load openmpi``).
DEFAULT_MPI = "openmpi"

#: The parameters that select the documented variant (matched against a figure's
#: ``params``); every other parameter gives the sizes or the device of the run.
VARIANT_PARAMS = ("buffers", "nodes", "placement", "ranks_per_node", "gpus_per_node", "mpi",
                  "nps", "threads")

#: How a check's message sizes are given (CheckSpec.size_range), each read by
#: :func:`expected_sizes`: OMB's ``-m MIN:MAX`` (sizes double from MIN), IMB's
#: ``-msglog MINLOG:MAXLOG`` (0, then powers of two), nccl-tests' ``-b/-e/-f/-i``,
#: perftest's one ``-s``, or none (STREAM, nvbandwidth: values keyed by name).
SIZE_RANGES = ("omb", "msglog", "nccl", "single", "none")

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
    """One benchmark: what it runs, how its output is read and judged, its parameters."""

    name: str
    summary: str
    metric: str
    params: tuple[Param, ...]
    #: The report's family: one plot and one part of a shape's page.
    family: str = ""
    #: The parser family that reads its output: the module of its name, "-" written
    #: "_", in :mod:`ocibench.figures.outputs` (nccl-tests: outputs/nccl_tests.py).
    parser: str = ""
    #: The line the parser looks for, as the benchmark prints it: OMB's title for host
    #: buffers ("# OSU MPI Latency Test"; a -d cuda run prints "# OSU MPI-CUDA ..."),
    #: IMB's benchmark name ("# Benchmarking PingPong"), perftest's title.
    title: str = ""
    #: How its message sizes are given (:data:`SIZE_RANGES`).
    size_range: str = "none"
    #: The names its values are keyed by, where not message sizes (STREAM's kernels,
    #: nvbandwidth's ceilings, nccl-tests' busbw columns), and what one of them is.
    keys: tuple[str, ...] = ()
    key_name: str = ""
    #: Whether its ``buffers`` letters are UCX memory types (H host, D cuda): MPI's own
    #: point-to-point messages, whose UCX protocol tables name a missed figure's cause.
    ucx_buffers: bool = False
    #: 1, or 2 where the value counts both directions at once (osu_bibw): a physical
    #: limit is per direction, so a bidirectional value's is twice the link's.
    directions: int = 1
    #: (buffers, nodes) -> the node's copy ceilings (:data:`NVBANDWIDTH_KEYS`) that bound
    #: the value, the one OMB's buffers get first (ocibench.figures.ceilings).
    ceilings: Mapping[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)
    #: The seed's command line: the executable and its options (a GPU run adds OMB's
    #: ``-d cuda X Y``).  Empty where the check builds it from the node (STREAM's
    #: threads, nvbandwidth's testcases, the collectives' rank counts).
    command: tuple[str, ...] = ()
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
    #: What the figures' command fixes that its output prints and no parameter names:
    #: the parser compares the fields the output prints with these (and with the
    #: command's own options, :func:`command_option`), and a run that differs was
    #: measured another way: UNJUDGED, naming the field.  ``bytes``: the size of each
    #: copy where the command gives none (TransferBench's default); ``version``: the
    #: major version of the benchmark the figures were measured with.
    method: Mapping[str, Any] = field(default_factory=dict)
    #: The unit its values are given in, where not the metric's usual one
    #: (:func:`ocibench.metrics.default_unit`): perftest's --report_gbits bandwidth, Gb/s,
    #: the unit of OCI's floors.  The parser converts what the output prints to it.
    unit: str = ""
    #: metric -> the column of the output's table that gives it, where a parser reads
    #: the table by its column names: IMB PingPong's "t[usec]" and "Mbytes/sec",
    #: Allreduce's "t_avg[usec]" (the mean over the ranks); perftest latency's
    #: "t_avg[usec]" (the column OCI's floor judges).
    columns: Mapping[str, str] = field(default_factory=dict)
    #: How many processes a run has whatever its parameters (IMB PingPong: 2, while the
    #: others wait in a barrier); 0: ``nodes`` x ``ranks_per_node``.
    ranks: int = 0
    #: Whether each rank's buffer holds one message for every rank (an all-to-all), so
    #: that OMB's own cap on its buffers (-M) must be the largest size times the ranks.
    message_per_rank: bool = False
    #: The Lmod module of its build, as users load it (modules.yaml's projections:
    #: osu-micro-benchmarks is ``omb``).  One ReFrame environment per module, and per MPI
    #: (:attr:`mpis`), selected by the features module and MPI (ocibench.reframe.site);
    #: a module that a vendor row names (its collective tests, its copy-ceiling tool)
    #: is that vendor's (ocibench.accelerators).
    module: str = ""
    #: Whether mpirun starts its processes (Open MPI, or the MPIs its ``mpi`` parameter
    #: offers): its environment loads the MPI's module first.
    under_mpi: bool = False
    #: Whether a run may use the node's GPUs: its environment loads the vendor's
    #: toolkit and collective library first (on a shape with GPUs).
    gpu: bool = False
    #: Whether it runs on the RDMA devices themselves (verbs, not through MPI): it cannot
    #: run where the shape has none, or where its stack does not build it.
    rdma: bool = False

    def __post_init__(self) -> None:
        # A new entry's slip is named when the registry is imported, not at a run.
        if not self.parser:
            raise ValueError(f"{self.name}: no parser (the family that reads its output)")
        if self.size_range not in SIZE_RANGES:
            raise ValueError(f"{self.name}: size_range {self.size_range!r} is not one of "
                             f"{SIZE_RANGES}")
        if self.directions not in (1, 2):
            raise ValueError(f"{self.name}: directions is 1 or 2, not {self.directions!r}")
        if not self.family:
            raise ValueError(f"{self.name}: no family (the report's part it is shown in)")
        if self.unit and self.unit not in metrics.metric(self.metric).units:
            raise ValueError(f"{self.name}: unit {self.unit!r} is not one of "
                             f"{metrics.metric(self.metric).units} ({self.metric})")
        if not self.module:
            raise ValueError(f"{self.name}: no module (the Lmod module its runs load)")
        unknown = set(self.columns) - set(self.metrics)
        if unknown:
            raise ValueError(f"{self.name}: columns for {', '.join(sorted(unknown))}, not "
                             f"one of its metrics {self.metrics}")

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric, *self.extra_metrics)

    @property
    def figure_unit(self) -> str:
        """The unit of its primary metric's values (:attr:`unit`, else the metric's)."""
        return self.unit or metrics.default_unit(self.metric)

    @property
    def mpis(self) -> tuple[str, ...]:
        """The MPIs it runs with, as their modules are named: its ``mpi`` parameter's
        choices (IMB: built with each), else Open MPI's; none where mpirun does not
        start it."""
        if not self.under_mpi:
            return ()
        offered = next((p.choices for p in self.params if p.name == "mpi"), ())
        return tuple(offered) or (DEFAULT_MPI,)

    def variant(self) -> tuple[str, ...]:
        """The parameters that select the documented variant, in the registry's order."""
        return tuple(p.name for p in self.params if p.name in VARIANT_PARAMS)

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
_MPI = Param("mpi", "the MPI that IMB was built with", choices=(DEFAULT_MPI, "intel-mpi"),
             default=DEFAULT_MPI)


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

#: The families of the report (CheckSpec.family).
_PT2PT_FAMILY = "OSU point-to-point"
_OSU_COLLECTIVES = "OSU collectives"
_IMB_FAMILY = "Intel MPI Benchmarks"
_PERFTEST_FAMILY = "perftest (RDMA)"
_TRANSFERBENCH_FAMILY = "GPU-to-GPU copies (TransferBench)"

#: The node's copy ceilings that bound an OMB bandwidth in one node.  Two GPUs of a
#: node: UCX's cuda_ipc is a copy-engine copy between them (read or write, whichever
#: the node does faster); host<->GPU: the pageable copy first, as OMB's host buffers
#: are pageable unless a single-copy path or pinning helps.
_COPY_CEILINGS = {
    ("D-D", 1): ("device_to_device_read", "device_to_device_write"),
    ("H-D", 1): ("pageable_host_to_device", "host_to_device"),
    ("D-H", 1): ("pageable_device_to_host", "device_to_host"),
}
#: OMB's point-to-point options as the seeds give them (seed 000 sec 2-1/2-2, seed 002
#: sec 3-2/3-3): 1 B latency, 256 MiB bandwidth.
_OMB_LATENCY_OPTS = ("-x", "1000", "-i", "10000", "-m", "1:1")
_OMB_BW_OPTS = ("-x", "10", "-i", "10", "-m", "268435456:268435456")


def _omb_pt2pt(name: str, metric: str, title: str, sizes: str, options: tuple[str, ...],
               directions: int = 1,
               ceilings: Mapping[tuple[str, int], tuple[str, ...]] | None = None,
               ) -> CheckSpec:
    """An OMB point-to-point benchmark between two ranks (c/mpi/pt2pt/standard)."""
    return CheckSpec(
        name, f"OMB {name} {' '.join(options[-2:])} [-d <gpu> X Y]", metric,
        (_BUFFERS, _nodes(2, (1, 2)), _PLACEMENT, _omb_sizes(sizes)),
        family=_PT2PT_FAMILY, parser="omb", title=title, size_range="omb",
        ucx_buffers=True, directions=directions, ceilings=ceilings or {},
        command=(name, *options), module="omb", under_mpi=True, gpu=True)


CHECKS: dict[str, CheckSpec] = {spec.name: spec for spec in (
    _omb_pt2pt("osu_latency", "latency", "# OSU MPI Latency Test", "1:1", _OMB_LATENCY_OPTS),
    _omb_pt2pt("osu_bw", "bandwidth", "# OSU MPI Bandwidth Test", "268435456:268435456",
               _OMB_BW_OPTS, ceilings=_COPY_CEILINGS),
    # Both ranks send a window of messages to each other at once (OMB's
    # c/mpi/pt2pt/standard/osu_bibw.c): its MB/s counts both directions.  No seed runs
    # it, so no shape documents a figure; the check runs osu_bw's seed options (H-H on 1
    # and 2 nodes, D-D in one node: checks/osu.py), and a hand run of any buffers is read.
    _omb_pt2pt("osu_bibw", "bandwidth", "# OSU MPI Bi-Directional Bandwidth Test",
               "268435456:268435456", _OMB_BW_OPTS, directions=2, ceilings=_COPY_CEILINGS),
    CheckSpec("osu_alltoall", "OMB osu_alltoall -m 1:67108864", "latency",
              (_nodes(1), _ranks_per_node(36), _omb_sizes("1:67108864")),
              family=_OSU_COLLECTIVES, parser="omb",
              title="# OSU MPI All-to-All Personalized Exchange Latency Test",
              size_range="omb", message_per_rank=True, module="omb", under_mpi=True,
              # its -m scales to the node's memory (checks/osu.py largest_size)
              command=("osu_alltoall", "-x", "10", "-i", "10", "-m", "1:67108864")),
    CheckSpec("osu_allreduce", "OMB osu_allreduce -m 4:268435456", "latency",
              (_nodes(4), _ranks_per_node(36), _omb_sizes("4:268435456")),
              family=_OSU_COLLECTIVES, parser="omb", title="# OSU MPI Allreduce Latency Test",
              size_range="omb", module="omb", under_mpi=True,
              command=("osu_allreduce", "-x", "10", "-i", "10", "-m", "4:268435456")),
    CheckSpec("osu_xccl_allreduce", "OMB osu_xccl_allreduce -m 1073741824:1073741824 -d <gpu>",
              "latency",
              (_nodes(1, (1, 2)), _gpus_per_node(8), _omb_sizes("1073741824:1073741824")),
              collective="nccl", family=_OSU_COLLECTIVES, parser="omb",
              title="# OSU NCCL Allreduce Latency Test", size_range="omb", module="omb",
              under_mpi=True, gpu=True,
              command=("osu_xccl_allreduce", "-x", "10", "-i", "10",
                       "-m", "1073741824:1073741824")),
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
              sizes_in_variant=True, collective="nccl", family="nccl-tests",
              parser="nccl-tests", size_range="nccl", keys=NCCL_COLUMNS,
              key_name="nccl-tests busbw column", module="nccl-tests", under_mpi=True,
              gpu=True,
              command=("all_reduce_perf", "-b", "10G", "-e", "10G", "-t", "1", "-g", "1")),
    CheckSpec("imb_pingpong", "IMB-MPI1 -msglog 3:28 PingPong (one rank per node)", "latency",
              (_MPI, _nodes(2), _MSGLOG), extra_metrics=("bandwidth",),
              family=_IMB_FAMILY, parser="imb", title="PingPong", size_range="msglog",
              # PingPong always runs on 2 processes (others wait in MPI_Barrier)
              ranks=2, columns={"latency": "t[usec]", "bandwidth": "Mbytes/sec"},
              module="imb", under_mpi=True,
              command=("IMB-MPI1", "-msglog", "3:28", "PingPong")),
    CheckSpec("imb_allreduce", "IMB-MPI1 -msglog 3:28 -npmin N allreduce", "latency",
              (_MPI, _nodes(4), _ranks_per_node(36), _MSGLOG),
              family=_IMB_FAMILY, parser="imb", title="Allreduce", size_range="msglog",
              columns={"latency": "t_avg[usec]"}, module="imb", under_mpi=True,
              command=("IMB-MPI1", "-msglog", "3:28", "-npmin", "144", "allreduce")),
    # OCI's floors judge the columns its health check reads: BW peak (parts[2] of the
    # 65536-byte row) and t_avg (awk '{print $6}' of the 8-byte row).
    CheckSpec("ib_write_bw", "perftest ib_write_bw -F -q 2 -x 3 --report_gbits -d DEVICE "
              "(BW peak, Gb/s)", "bandwidth",
              _perftest_params(65536, (Param("qps", "-q, queue pairs", _positive_int,
                                             default=2),)),
              family=_PERFTEST_FAMILY, parser="perftest", title="RDMA_Write BW Test",
              size_range="single", unit="Gb/s", module="perftest", rdma=True,
              # oci-hpc's options; -d DEVICE -i PORT follow (checks/perftest.py)
              command=("ib_write_bw", "-F", "-q", "2", "-x", "3", "--report_gbits")),
    CheckSpec("ib_write_lat", "perftest ib_write_lat -F -x 3 -s 8 -n 10000 -d DEVICE (t_avg)",
              "latency",
              _perftest_params(8, (Param("iterations", "-n, exchanges", _positive_int,
                                         default=10000),)),
              family=_PERFTEST_FAMILY, parser="perftest", title="RDMA_Write Latency Test",
              size_range="single", columns={"latency": "t_avg[usec]"}, module="perftest",
              rdma=True,
              command=("ib_write_lat", "-F", "-x", "3", "-s", "8", "-n", "10000")),
    # This node's copy ceilings, keyed by name (ocibench.figures.outputs.NVBANDWIDTH_CEILINGS),
    # in MB/s as OMB prints its bandwidths.
    CheckSpec("nvbandwidth", "nvbandwidth -t <copy-engine testcases> (its default buffer "
              "size) and python3 -m ocibench.node.pageable_copy (GB/s of copies, read as MB/s)",
              "bandwidth",
              (_nodes(1, (1,)), _gpus_per_node(8)),
              family="GPU copy ceilings (nvbandwidth)", parser="nvbandwidth",
              keys=NVBANDWIDTH_KEYS, key_name="nvbandwidth ceiling", module="nvbandwidth",
              gpu=True),
    CheckSpec("stream", "STREAM with OMP_NUM_THREADS=threads on a node in NPS nps mode",
              "bandwidth",
              (Param("nps", "NUMA nodes per socket (BIOS)", _positive_int, (1, 2, 4), 1),
               Param("threads", "OMP_NUM_THREADS", _positive_int, default=96)),
              family="STREAM", parser="stream", keys=STREAM_KERNELS, key_name="STREAM kernel",
              module="stream"),
    # The GPUs' memory bandwidth, one process per GPU, as AMD's acceptance runs it
    # (ROCm/system-acceptance-docs docs/common/system-validation.md, "BabelStream":
    # `<model>-stream --device $OMPI_COMM_WORLD_RANK -n 50 -s 268435456` under
    # `mpiexec -n 8`).  Each kernel's value is the slowest GPU's: AMD's floor holds
    # for every GPU.  "babelstream" is BabelStream's executable; its CMake build names
    # it after the model (<model>-stream, cmake/register_models.cmake since v4.0),
    # which the vendor row gives (accelerators.Accelerator.babelstream_model).
    CheckSpec("babelstream", "BabelStream <model>-stream -n 50 -s 268435456, one process per "
              "GPU (each kernel: the slowest GPU's MB/s)", "bandwidth",
              (_nodes(1, (1,)),
               Param("gpus", "processes in the output, one GPU and one result table each "
                     "(unset: as many as the output holds)", _positive_int)),
              family="GPU memory bandwidth (BabelStream)", parser="babelstream",
              keys=BABELSTREAM_KERNELS, key_name="BabelStream kernel", module="babelstream",
              # mpirun starts one process per GPU, as AMD's acceptance runs it (mpiexec -n 8)
              under_mpi=True, gpu=True,
              command=("babelstream", "-n", "50", "-s", "268435456"),
              # AMD's example of its acceptance run prints 'Version: 5.0'
              # (ROCm/system-acceptance-docs docs/mi300x/performance-bench.rst@b754ce7,
              # tests/data/corpus/babelstream/sad-mi300x-8gpu-5.0-elided.txt)
              method={"version": "5"}),
    # Copies between the GPUs of a node, AMD's peer-to-peer acceptance
    # (ROCm/system-acceptance-docs docs/gpus/mi300x.md, "TransferBench p2p").
    CheckSpec("transferbench_p2p", "TransferBench p2p (GPU->GPU: the averages AMD compares, "
              "and the slowest pair; GB/s a direction, read as MB/s)", "bandwidth",
              (_nodes(1, (1,)),),
              family=_TRANSFERBENCH_FAMILY, parser="transferbench-p2p",
              keys=TRANSFERBENCH_KEYS, key_name="TransferBench p2p value",
              module="transferbench", gpu=True,
              command=("TransferBench", "p2p"),
              # no size given: DEFAULT_BYTES_PER_TRANSFER, 1 << 26 (ROCm/TransferBench
              # src/include/TransferBench.hpp, v1.52; the client's default since)
              method={"bytes": 2**26}),
    # Every GPU copying to every other at once, AMD's all-to-all acceptance (mi300x.md,
    # "TransferBench a2a"; ROCm/TransferBench src/client/Presets/AllToAll.hpp).
    CheckSpec("transferbench_a2a", "TransferBench a2a (the average GPU pair while all copy "
              "at once, and the slowest pair; GB/s, read as MB/s)", "bandwidth",
              (_nodes(1, (1,)),),
              family=_TRANSFERBENCH_FAMILY, parser="transferbench-a2a",
              keys=TRANSFERBENCH_A2A_KEYS, key_name="TransferBench a2a value",
              module="transferbench", gpu=True,
              command=("TransferBench", "a2a"), method={"bytes": 2**26}),
)}

#: The parser families, in the registry's order: what the entries name, never listed
#: by hand (ocibench.figures.outputs derives its table of parsers from it, and fails at
#: import, naming the entries, where a family has no module).
PARSERS: tuple[str, ...] = tuple(dict.fromkeys(spec.parser for spec in CHECKS.values()))

#: Above this many message sizes a range is surely a typo (and would be slow to list).
MAX_SIZES = 4096


def spec(check: str) -> CheckSpec:
    if check not in CHECKS:
        raise ParamError(f"unknown check {check!r}; known: {', '.join(CHECKS)}")
    return CHECKS[check]


def command_option(check: str, flag: str) -> str | None:
    """The value the figures' command gives ``flag`` ("-s" of BabelStream's), or None."""
    command = spec(check).command
    return next((value for option, value in zip(command, command[1:]) if option == flag),
                None)


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
    check_spec = spec(check)
    names = {p.name: p for p in check_spec.params}

    def get(name: str) -> Any:
        return names[name].value(check, params.get(name, names[name].default))

    kind = check_spec.size_range
    if kind == "omb":
        first, last = _int_range(get("sizes"))
        _at_most(check, "sizes", _doublings(first, last))
        return _series(first, last, lambda s: s * 2 if s else 1)
    if kind == "msglog":
        first, last = _int_range(get("msglog"))
        _at_most(check, "msglog", last - first + 2)   # 0, then 2^first .. 2^last
        return [0] + [2**k for k in range(first, last + 1)]
    if kind == "single":   # perftest: one size per run
        return [get("size")]
    if kind == "nccl":
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
