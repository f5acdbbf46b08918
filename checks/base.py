"""The shared base of every oci-hpc-bench check (no test is defined here).

A check is a run-only ReFrame test over a benchmark installed in the shape's Lmod tree
(the ``osu_run`` pattern of ReFrame's hpctestlib).  This base does what every check does
the same way:

* It scales the run to the partition: cores, GPUs, NUMA layout and nodes come from the
  partition's ``extras`` (see :mod:`ocibench.reframe.site`), which come from the shape
  file.  A run the partition cannot hold (too few cores, GPUs or nodes; no Intel MPI;
  no GPU on the machine) is SKIPPED with the reason, never passed.
* It records provenance: ``python3 -m ocibench.node.provenance > provenance.json`` runs in
  the job before the benchmark, with the interpreter that runs ReFrame.
* Sanity is :func:`ocibench.figures.evaluate.evaluate` (the same code that judges hand-run
  outputs offline) of the job's stderr and stdout, plus the job's exit code; a failed job (a
  module tree that is unsafe or a modulefile that does not load, mpirun that cannot
  start, a crash) is reported with the line that says why (:func:`failure_line`).
* Sanity also refuses a value that cannot be a measurement (zero, above the physical
  limit of its link or memory): :func:`ocibench.figures.judge.judge` says so, as it does offline;
  and a run whose NCCL traffic took a wrong path (:mod:`ocibench.figures.nccl_path`).
* A run the evaluation leaves UNJUDGED on a variant the shape documents fails with "could
  not judge": the checks run our own command lines, so a run we cannot compare there is
  our defect, never the node's (the sweep maps it to rerun, never to drain).  A variant
  the shape documents no figure for is recorded, as everything is on ``local``.
* Performance variables are every value the parse returns, named
  ``<metric>_<key>`` by :func:`ocibench.figures.references.perf_var`; their references come
  from :func:`ocibench.figures.judge.reframe_reference`, with the same bounds as the offline
  judgement (none on a shape that documents nothing: the value is recorded, judged
  only for plausibility).

Subclasses set ``check_name`` (the figure naming of the shape files), ``valid_systems``
and ``valid_prog_environs`` (by feature), and implement :meth:`OcibenchCheck.configure`.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    run_before,
    sanity_function,
    variable,
)
from reframe.core.exceptions import PerformanceError
from reframe.core.exceptions import SanityError as ReframeSanityError

from ocibench import shapes
from ocibench.figures import evaluate, judge, nccl_path, outputs, references, ucx_proto
from ocibench.metrics import RunVerdict, could_not_judge
from ocibench.reframe.launchers import INTELMPI

PROVENANCE_FILE = "provenance.json"

#: Lines of a failed job's output that say why it failed, most telling first, after
#: our own "ocibench:" lines, Lmod's error and a crash (see failure_line).
_FAILURE_LINES = (
    # UCX_NET_DEVICES names a device the node lacks (a wrong mlx5_N:1 in a shape file)
    re.compile(r".*network device '[^']+' is not available.*"),
    re.compile(r".*(?:command not found|No such file or directory).*"),
    re.compile(r".*(?:not enough slots|There are not enough slots).*"),
)
#: Looked for in stderr only: STREAM's stdout says "Solution Validates: avg error less
#: than 1.000000e-13", which is no error.
_ERROR_LINE = re.compile(r"(?i).*error.*")

_LMOD_ERROR = "Lmod has detected the following error:"
#: How Lua reports a modulefile it cannot run, once Lmod's wrapped lines are joined:
#: '<file>: [string "<its first line>..."]:<line>: <why>'.
_LMOD_LUA = re.compile(r'(\S+): \[string ".*?"\]:(\d+): (.*)')


def failure_line(stderr: str, stdout: str = "") -> str | None:
    """The line of a failed job's output that best says why it failed.

    In order: an ``ocibench:`` line (our own checks in the job script), Lmod's error
    (with the modulefile and line it names), a crash (the shell's or mpirun's line
    naming the signal), the specific errors above, then any stderr line with "error".
    """
    err = [line.strip() for line in stderr.splitlines() if line.strip()]
    out = [line.strip() for line in stdout.splitlines() if line.strip()]
    ours = next((line for line in err + out if line.startswith("ocibench: ")), None)
    if ours:
        return ours
    lmod = lmod_error(err)
    if lmod:
        return lmod
    for lines in (err, out):
        crash = outputs.first_crash("\n".join(lines))
        if crash:
            return "benchmark crashed: " + _paragraph(lines, crash.string, crash.start())
    for pattern in _FAILURE_LINES:
        found = next((line for line in err + out if pattern.search(line)), None)
        if found:
            return found
    found = next((line for line in err if _ERROR_LINE.search(line)), None)
    return found or (err or out or [None])[-1]


def _paragraph(lines: list[str], text: str, offset: int) -> str:
    """The line holding ``offset`` of ``text`` (the lines joined), with the lines that
    continue its sentence: mpirun wraps 'noticed that process ... exited on' / 'signal
    11 (Segmentation fault).' over two."""
    index = text.count("\n", 0, offset)
    found = lines[index]
    for more in lines[index + 1:index + 3]:
        if found.endswith((".", ")")) or not found.startswith(("mpirun", "prterun")):
            break
        found = f"{found} {more}"
    return found


def lmod_error(lines: list[str]) -> str | None:
    """Lmod's error in one line, naming the modulefile and line where it names them.

    Lmod wraps its message to the terminal width and lists the module it was loading
    below it ("While processing the following module(s): ... Module Filename")."""
    start = next((i for i, line in enumerate(lines) if line.startswith(_LMOD_ERROR)), None)
    if start is None:
        return None
    block, files = [], []
    rest = iter(lines[start:])
    for line in rest:
        if line.startswith(("Please check", "While processing")):
            break
        block.append(line)
    for line in rest:   # the table of "While processing the following module(s):"
        if line.startswith(_LMOD_ERROR):
            break
        if line.split()[-1].startswith("/"):
            files.append(line.split()[-1])
    message = " ".join(" ".join(block)[len(_LMOD_ERROR):].split())
    lua = _LMOD_LUA.search(message)
    if lua:
        return (f"{_LMOD_ERROR[:-1]} in modulefile {lua.group(1)} line {lua.group(2)}: "
                f"{lua.group(3)}")
    where = f" (modulefile {files[0]})" if files else ""
    return f"{_LMOD_ERROR} {message}{where}"


def host_device_cores(extras: dict[str, Any], buffers: str,
                      placement: str) -> tuple[list[int] | None, str]:
    """The two cores of an H-D or D-H run in one node (seed 000 sec 2-1/2-2).

    The device rank (rank 1 for H-D, rank 0 for D-H) uses GPU ``local rank % GPUs`` (as
    OMB chooses it) and sits on the second core of that GPU's NUMA node; the host rank
    sits on the first core of the same NUMA node (same-numa), on the first core of the
    first other NUMA node of the same socket (same-socket), or on the first core of the
    other socket (other-socket).  On BM.GPU4.8 (GPUs 0-1 on NUMA 3 = cores 24-31,
    socket 0 = NUMA 0-3, socket 1 from core 32) this gives the seed's pe-lists:
    H-D 24,25 / 0,25 / 32,25 and D-H 25,24 / 25,0 / 25,32.

    Returns (cores in rank order, "") or (None, why the topology cannot offer it).
    """
    numa = {n["id"]: n for n in extras["numa_nodes"]}
    device_rank = 1 if buffers == "H-D" else 0
    gpu = device_rank % extras["gpus"]
    node_id = extras["gpu_numa"][gpu]
    node = numa[node_id]
    cores = list(range(node["cores"][0], node["cores"][1] + 1))
    device_core = cores[1] if len(cores) > 1 else cores[0]
    if placement == "same-numa":
        if len(cores) < 2:
            return None, f"NUMA node {node_id} of GPU {gpu} has a single core"
        host_core = cores[0]
    elif placement == "same-socket":
        others = [i for i in sorted(numa) if i != node_id and numa[i]["socket"] == node["socket"]]
        if not others:
            return None, (f"socket {node['socket']} has a single NUMA node ({node_id}, "
                          f"GPU {gpu}'s): no other NUMA node on the same socket")
        host_core = numa[others[0]]["cores"][0]
    elif placement == "other-socket":
        others = [i for i in sorted(numa) if numa[i]["socket"] != node["socket"]]
        if not others:
            return None, "the node has a single socket"
        host_core = min(numa[i]["cores"][0] for i in others)
    else:
        raise ValueError(f"unknown placement {placement!r}")
    order = [device_core, host_core] if device_rank == 0 else [host_core, device_core]
    return order, ""


#: The file an Open MPI 4.x job names each rank's core in (see pin_ranks).
RANKFILE = "ocibench_rankfile"
#: Shell variable that carries the pinning options when the MPI is chosen in the job.
PLACEMENT_VAR = "OCIBENCH_PLACEMENT"


def pin_ranks(cores: list[int], openmpi: str) -> tuple[list[str], list[str]]:
    """mpirun options that put rank i on ``cores[i]``, and the job lines they need.

    Open MPI 5.x (PRRTE) takes the seeds' ``--map-by pe-list=24,25:ordered``.  Open MPI
    4.x (ORTE) does not know pe-list ("The mapping request contains an unrecognized
    modifier", then "Bad parameter"), and its ``--cpu-list 25,24 --bind-to
    cpu-list:ordered`` binds in ascending core order whatever the list says (tried with
    4.1.4: rank 0 went to the lower core), so 4.x gets a rankfile of OS core ids
    (``rmaps_rank_file_physical``, as the shape file and numactl count them).

    ``openmpi`` is the shape's ``software.stack.openmpi``.  A version there (5.0.8)
    gives that major's options on the mpirun line, and the job fails, naming both
    versions, if its mpirun is another major.  Without one (``any``) the job asks its
    own mpirun (``mpirun --version``) and picks; another major than 4 or 5 fails
    saying which are needed.
    """
    pe_list = f"--map-by pe-list={','.join(map(str, cores))}:ordered"
    lines = "\\n".join(f"rank {rank}=localhost slot={core}" for rank, core in enumerate(cores))
    forms = {  # major -> (options, the job line that prepares them)
        "5": (pe_list, ":"),
        "4": (f"--rankfile {RANKFILE} --mca rmaps_rank_file_physical 1",
              f"printf '{lines}\\n' > {RANKFILE}"),
    }
    probe = ("ocibench_ompi=$(mpirun --version 2>&1 | "
             "sed -n 's/^.*(Open MPI) \\([0-9][0-9]*\\)\\..*$/\\1/p' | head -n 1)")
    major = openmpi.split(".")[0]
    if major.isdigit():   # the shape names its Open MPI: that major's options, checked
        options = forms[major][0].split() if major in forms else []
        branches = {major: forms[major][1]} if major in forms else {}
        need = (f"is written for Open MPI {major}.x (software.stack.openmpi: {openmpi})"
                if major in forms else
                f"needs Open MPI 4.x or 5.x, not {openmpi} (software.stack.openmpi)")
    else:                 # chosen in the job by its own mpirun
        options = [f"${PLACEMENT_VAR}"]
        branches = {m: f'{setup}; {PLACEMENT_VAR}="{opts}"' for m, (opts, setup) in forms.items()}
        need = "needs Open MPI 4.x (rankfile) or 5.x (--map-by pe-list)"
    fail = (f'echo "ocibench: the host<->GPU placement {need}; this job\'s mpirun is '
            f'Open MPI ${{ocibench_ompi:-(none found)}}" >&2; exit 1')
    cases = "".join(f"{m}) {line} ;; " for m, line in branches.items())
    return options, [probe, f'case "$ocibench_ompi" in {cases}*) {fail} ;; esac']


#: UCX prints the protocol and transports it selects (src/ucp/proto/proto_debug.c):
#: the GPU checks' outputs then say what their messages took, which names the cause of
#: a missed figure (ocibench.figures.ucx_proto, ocibench.figures.judge.Row.cause).
UCX_PROTO_INFO = ("UCX_PROTO_INFO", "y")


#: ReFrame 4.10 renamed RegressionMixin (deprecated there, with a warning per class) to
#: RegressionTestPlugin; 4.9, the oldest this project runs, has only the former.
_Plugin = getattr(rfm, "RegressionTestPlugin", None) or rfm.RegressionMixin


class SweepNodes(_Plugin):
    """The nodes ``ocibench sweep`` pins a job to (docs/sweep.md).

    The sweep runs ReFrame with ``-P sweep_nodes=a+b,c+d`` (ReFrame's --parameterize):
    one test case per node group, each copied to ``job.pin_nodes`` (``sbatch
    --nodelist``), as ReFrame's own ``--distribute`` pins its jobs.  Empty outside a
    sweep: Slurm chooses the nodes."""

    #: The nodes of this job, joined with ``ocibench.sweep.plan.NODE_SEPARATOR`` ('+').
    sweep_nodes = variable(str, value="")

    @run_before("run")
    def _ocibench_pin_nodes(self):
        if self.sweep_nodes and not self.local:
            self.job.pin_nodes = self.sweep_nodes.split("+")


# special=True: check_performance is extended (ReFrame allows it so, see its message
# "If you do want to augment the core functionality of the pipeline stage"), to add the
# missed figure's cause to ReFrame's performance failure.
class OcibenchCheck(rfm.RunOnlyRegressionTest, SweepNodes, special=True):
    """Base of the checks: scaling, skips, provenance, sanity, performance, references."""

    #: The figure naming of the shape files: osu_latency, osu_bw, imb_pingpong, ...
    check_name = variable(str)
    #: The shape the check ran for (the partition's ``extras.shape``).
    shape = variable(str, value="")
    #: Why the case was skipped.  ReFrame prints the reason but its JSON report keeps
    #: only ``result: skip``; the report (ocibench.report.load) reads it from here.
    skip_reason = variable(str, value="")
    #: Whether the run's messages go through UCX from GPU memory (the GPU checks):
    #: the job then runs with UCX_PROTO_INFO=y (UCX_PROTO_INFO above).
    gpu_messages = variable(bool, value=False)

    valid_systems = ["-multinode"]
    exclusive_access = True
    time_limit = "30m"
    keep_files = [PROVENANCE_FILE]
    tags = {"ocibench"}
    maintainers = ["oci-hpc-bench"]

    # ------------------------------------------------------------------ interface

    def configure(self, extras: dict[str, Any]) -> None:
        """Set executable, options, ranks and launcher options; skip_if what cannot fit."""
        raise NotImplementedError

    def figure_params(self) -> dict[str, Any]:
        """The parameters as the shape files' figures and ocibench.benchmarks name them."""
        raise NotImplementedError

    def run_params(self) -> dict[str, Any]:
        """figure_params plus what the parser needs to know of this run (sizes, ...)."""
        return self.figure_params()

    # ------------------------------------------------------------------ helpers

    def skip(self, msg=None):
        # skip_if calls skip: every skip of a check, its own or the base's, passes here
        self.skip_reason = msg or ""
        super().skip(msg)

    @property
    def extras(self) -> dict[str, Any]:
        return self.current_partition.extras

    def need_nodes(self, nodes: int) -> None:
        have = self.extras.get("nodes", 1)
        where = self.current_partition.fullname
        if self.extras.get("shape") == "local" and nodes > 1:
            self.skip_if(True, f"needs {nodes} nodes; the local shape runs on this "
                               "machine only (multi-node runs: a shape with a scheduler)")
        self.skip_if(have < nodes, f"needs {nodes} nodes; partition {where} has {have} "
                                   "(shape file cluster.nodes, sinfo, or the host file)")

    def need_gpus(self, gpus: int) -> None:
        have = self.extras.get("gpus", 0)
        shape = self.extras.get("shape")
        if have == 0 and shape == "local":
            self.skip_if(True, f"needs {gpus} GPU(s); no GPU on this machine "
                               "(nvidia-smi lists none)")
        self.skip_if(have < gpus, f"needs {gpus} GPU(s) per node; {shape} has {have}")

    def need_cores(self, cores: int) -> None:
        have = self.extras.get("cores", 0)
        self.skip_if(have < cores, f"needs {cores} cores per node; "
                                   f"{self.extras.get('shape')} has {have}")

    def export(self, name: str, value: str) -> None:
        """Pass a variable to every rank on the mpirun line (-x / -genv)."""
        self.job.launcher.env_vars[name] = value

    def ucx_device(self, purpose: str = "mpi") -> str | None:
        return (self.extras.get("ucx_net_devices") or {}).get(purpose)

    def _record_ucx_protocols(self) -> None:
        """UCX_PROTO_INFO=y in the job's environment, and last on mpirun's line when
        ranks run on other nodes (Open MPI forwards only what -x names)."""
        name, value = UCX_PROTO_INFO
        self.env_vars = {**self.env_vars, name: value}
        per_node = self.num_tasks_per_node or self.num_tasks
        if per_node and self.num_tasks > per_node:
            self.export(name, value)

    # ------------------------------------------------------------------ hooks

    @run_after("setup")
    def _ocibench_setup(self):
        self.shape = self.extras.get("shape", "")
        unavailable = self.current_environ.extras.get("unavailable")
        self.skip_if(bool(unavailable), unavailable)
        if self.current_environ.extras.get("launcher") == INTELMPI:
            self.job.launcher = getlauncher(INTELMPI)()
        self.configure(self.extras)
        if self.gpu_messages:
            self._record_ucx_protocols()
        self.prerun_cmds = [f"{sys.executable} -m ocibench.node.provenance > {PROVENANCE_FILE}"] \
            + list(self.prerun_cmds)

    @run_before("sanity")
    def _ocibench_exit_code(self):
        # Before ReFrame's own exit-code assertion (general/trap_job_errors), which
        # says only "job exited with exit code 1": name the line that says why.
        code = self.job.exitcode
        if not self.is_dry_run() and code not in (0, None):
            raise ReframeSanityError(f"job exit code {code}: {self._why_failed()}")

    @sanity_function
    def assert_sane(self):
        """Exit code 0 and an output that ocibench.figures.outputs.parse accepts."""
        code = self.job.exitcode
        if code != 0:
            raise ReframeSanityError(f"job exit code {code}: {self._why_failed()}")
        self.measurement()   # the parse's own refusal, as the performance stage sees it
        result = evaluate.evaluate(self.check_name, self._output(), self._shape(),
                                   self.run_params())
        if result.sanity or result.path_fault:
            raise ReframeSanityError(result.reason)
        impossible = next((row.failure() for row in result.rows if row.implausible), None)
        if impossible:
            raise ReframeSanityError(impossible)
        # Our own command line on a variant the shape documents, yet nothing compared
        # (or an output we cannot read): our defect, never the node's.  evaluate sets
        # ``unjudged`` for exactly those; a variant the shape documents no figure for
        # (1-node latency where only 2 nodes are documented) has only a note, and is
        # recorded, as on `local`.
        if result.verdict is RunVerdict.UNJUDGED and result.unjudged:
            raise ReframeSanityError(could_not_judge(result.reason))
        # A figure that missed is left to the performance stage, which logs its values.
        return True

    def _shape(self) -> shapes.Shape:
        cached = getattr(self, "_ocibench_shape", None)
        if cached is None:
            cached = self._ocibench_shape = shapes.load(self.shape or shapes.LOCAL)
        return cached

    @run_before("performance")
    def _ocibench_performance(self):
        if self.is_dry_run():
            return
        measured = self.measurement()
        perf = {}
        for metric, values in measured.series().items():
            for key in values:
                perf[references.perf_var(metric, key)] = getattr(self, metric)(key)
        self.perf_variables = perf
        self.reference = judge.reframe_reference(
            self._shape(), self.check_name, self.run_params(),
            [self.current_partition.fullname])

    # ------------------------------------------------------------------ measurement

    def _why_failed(self) -> str:
        """The line of the job's stderr (or stdout: UCX logs its warnings there)
        that says why the job failed."""
        try:
            stderr = self._read(self.stderr.evaluate())
            stdout = self._read(self.stdout.evaluate())
        except outputs.OutputTooLarge as err:
            return str(err)
        return failure_line(stderr, stdout) or "no error output"

    def _read(self, name: str) -> str:
        """A file of the stage directory ('' if absent), read up to
        outputs.MAX_OUTPUT_BYTES (OutputTooLarge beyond)."""
        try:
            with open(os.path.join(self.stagedir, name), "rb") as stream:
                return outputs.read_output(stream, name)
        except OSError:
            return ""

    def measurement(self) -> outputs.Measurement:
        """The parse of stderr, then stdout: as a hand run saved with 2>&1, so that a
        crash or OMB's size cap printed on stderr is judged as offline."""
        cached = getattr(self, "_ocibench_measurement", None)
        if cached is None:
            try:
                cached = outputs.parse(self.check_name, self._output(), self.run_params())
            except (outputs.SanityError, outputs.OutputTooLarge) as err:
                raise ReframeSanityError(str(err)) from None
            self._ocibench_measurement = cached
        return cached

    def check_performance(self):
        """ReFrame's check, whose failure also names the missed figure's cause from
        the run's UCX protocol tables ("...: the documented 2.46 us needs gdrdrv; this
        run's 1-byte messages from cuda memory went ...")."""
        try:
            super().check_performance()
        except PerformanceError as err:
            cause = self._cause()
            if cause:
                raise PerformanceError(f"{err}{cause}") from None
            raise

    def _cause(self) -> str:
        measured = self.measurement()
        facts = judge.Facts(tables=tuple(ucx_proto.parse(self._output())))
        rows = judge.judge_run(self._shape(), self.check_name, self.run_params(),
                               measured.series(), measured.units(), facts)
        return next((row.cause() for row in rows if row.cause()), "")

    def _output(self) -> str:
        """The job's stderr, then its stdout: as a hand run saved with 2>&1."""
        return self._read(self.stderr.evaluate()) + "\n" + self._read(self.stdout.evaluate())

    def _value(self, metric: str, key):
        return self.measurement().series()[metric][key]

    @performance_function("us")
    def latency(self, key=None):
        return self._value("latency", key)

    @performance_function("MB/s")
    def bandwidth(self, key=None):
        return self._value("bandwidth", key)

    @performance_function("GB/s")
    def busbw(self, key=None):
        return self._value("busbw", key)


class EveryGpuCheck(OcibenchCheck):
    """Base of the GPU collectives (osu_xccl_allreduce, nccl-tests): one rank per GPU,
    every GPU of one node or of two nodes, as seed 000 sec 2-5/2-6 and seed 003 sec 3
    run them (``mpirun -n 8`` / ``-n 16 -N 8``)."""

    nodes = parameter([1, 2])
    gpus_per_node = variable(int, value=0)

    @run_after("init")
    def _gpu_systems(self):
        # `local` is listed by name: it has no `gpu` feature when its machine has no
        # GPU, and the check must then SKIP with that reason rather than vanish.
        where = "+multinode" if self.nodes > 1 else "-multinode"
        self.valid_systems = [f"+gpu {where}", "local"]

    def one_rank_per_gpu(self, extras: dict[str, Any]) -> None:
        # The collective library's settings OCI recommends for the shape
        # (network.collective_env: NCCL_IB_HCA, NCCL_IB_GID_INDEX, the net plugin...),
        # first: the log level below overrides theirs.
        network = shapes.load(extras["shape"]).data.get("network") or {}
        for name, value in (network.get("collective_env") or {}).items():
            self.export(name, str(value))
        # NCCL's log names the transport of every channel: the path the figure took
        # is judged with it (ocibench.figures.nccl_path), a few hundred lines per run.
        for name, value in nccl_path.DEBUG_ENV.items():
            self.export(name, value)
        self.need_nodes(self.nodes)
        # In one node a collective needs two GPUs to be one; across nodes one each.
        self.need_gpus(2 if self.nodes == 1 else 1)
        self.gpu_messages = True
        self.gpus_per_node = extras["gpus"]
        self.num_tasks = self.nodes * self.gpus_per_node
        self.num_tasks_per_node = self.gpus_per_node

    def figure_params(self):
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node}
