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
  start, a crash) is reported with the line that says why
  (:func:`ocibench.figures.joblog.failure_line`).
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

The contract of a check, by phase (stated as the EESSI test suite states its mixin's,
eessi/testsuite/eessi_mixin.py: what a subclass sets, and by when):

Before init (class body, or a parameter)
    ``check_name`` (the figure naming of the shape files and ocibench.benchmarks)
    and ``descr``; its parameters (``buffers``, ``nodes``, ...).  Never
    ``valid_prog_environs``: the base derives it from the registry entry at init
    (ocibench.reframe.site.prog_environs).
Before setup (class body, or a ``run_after("init")`` hook)
    ``valid_systems``, from :func:`systems_for` (nodes and GPU, with ``local`` named
    where it must SKIP rather than vanish).
At setup (the base calls it, after the partition and environment are chosen)
    :meth:`OcibenchCheck.configure`: ``executable``, ``executable_opts``,
    ``num_tasks`` and ``num_tasks_per_node``, then :meth:`OcibenchCheck.export_ucx`
    and other ``export``-s; a run the partition cannot hold is skipped there
    (``need_nodes``, ``need_gpus``, ``need_cores``, ``skip_if``).  Set
    ``gpu_messages`` there when the messages go through UCX from GPU memory.
Any time
    :meth:`OcibenchCheck.figure_params` (the parameters as the shape's figures name
    them) and :meth:`OcibenchCheck.run_params` (what the parser needs besides).

The base does the rest: the provenance line, the one exit-code check before sanity
(:meth:`OcibenchCheck._ocibench_exit_code`), sanity and performance.
"""

from __future__ import annotations

import os
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

from ocibench import accelerators, benchmarks, shapes
from ocibench.figures import evaluate, judge, nccl_path, outputs, references, ucx_proto
from ocibench.figures.joblog import failure_line
from ocibench.metrics import RunVerdict, could_not_judge
from ocibench.reframe.launchers import INTELMPI
from ocibench.reframe.site import built_shape, prog_environs

PROVENANCE_FILE = "provenance.json"

def systems_for(nodes: int, gpu: bool = False) -> list[str]:
    """``valid_systems`` of a run on ``nodes`` nodes, with GPUs or not.

    The partition features pick the partitions (``multinode`` for more than one node,
    ``gpu`` for GPU buffers).  ``local`` (this machine) is named besides where those
    features could leave it out -- more than one node, or a GPU it may lack -- so that
    the case is listed there and SKIPS with the reason (one machine, no GPU), never
    vanishes from the run."""
    where = "+multinode" if nodes > 1 else "-multinode"
    features = f"+gpu {where}" if gpu else where
    return [features, "local"] if nodes > 1 or gpu else [features]


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
    #: only ``result: skip``; the run reader (ocibench.results.load) reads it from here.
    skip_reason = variable(str, value="")
    #: Whether the run's messages go through UCX from GPU memory (the GPU checks):
    #: the job then runs with UCX_PROTO_INFO=y (UCX_PROTO_INFO above).
    gpu_messages = variable(bool, value=False)
    #: The path NCCL's traffic took, as its log says (ocibench.figures.nccl_path
    #: ``Path.describe``; empty for a run that is no NCCL run).  Set at sanity, so that
    #: ReFrame's JSON report holds it for a run that passed as well as one that failed.
    nccl_path = variable(str, value="")

    valid_systems = systems_for(1)
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
        """The parameters as the shape files' figures and ocibench.benchmarks name them:
        the check's attributes named as its registry entry's variant parameters
        (``CheckSpec.variant``: buffers, nodes, placement, ...), each the check has."""
        names = benchmarks.spec(self.check_name).variant()
        return {name: getattr(self, name) for name in names
                if getattr(self, name, None) is not None}

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

    # The node's hardware, as ReFrame's partition records it (processor, devices: filled
    # from the shape file by ocibench.reframe.site).

    @property
    def node_cores(self) -> int:
        """Physical cores of a node."""
        return self.current_partition.processor.num_cores or 0

    @property
    def node_sockets(self) -> int:
        return self.current_partition.processor.num_sockets or 1

    @property
    def node_gpus(self) -> int:
        return sum(d.num_devices or 0 for d in self.current_partition.select_devices("gpu"))

    def need_nodes(self, nodes: int) -> None:
        have = self.extras.get("nodes", 1)
        where = self.current_partition.fullname
        if self.extras.get("shape") == "local" and nodes > 1:
            self.skip_if(True, f"needs {nodes} nodes; the local shape runs on this "
                               "machine only (multi-node runs: a shape with a scheduler)")
        self.skip_if(have < nodes, f"needs {nodes} nodes; partition {where} has {have} "
                                   "(shape file cluster.nodes, sinfo, or the host file)")

    def need_gpus(self, gpus: int) -> None:
        have = self.node_gpus
        shape = self.extras.get("shape")
        if have == 0 and shape == "local":
            tools = ", ".join(a.probe_command[0] for a in accelerators.VENDORS.values())
            self.skip_if(True, f"needs {gpus} GPU(s); no GPU on this machine "
                               f"({tools}: none listed)")
        self.skip_if(have < gpus, f"needs {gpus} GPU(s) per node; {shape} has {have}")

    def need_cores(self, cores: int) -> None:
        have = self.node_cores
        self.skip_if(have < cores, f"needs {cores} cores per node; "
                                   f"{self.extras.get('shape')} has {have}")

    def export(self, name: str, value: str) -> None:
        """Pass a variable to every rank on the mpirun line (-x / -genv)."""
        self.job.launcher.env_vars[name] = value

    #: Whether the seed's command line names the UCX device even in one node (seed 000
    #: sec 2-5, osu_xccl_allreduce); see export_ucx.
    ucx_device_in_one_node = False

    def export_ucx(self, purpose: str = "mpi") -> None:
        """``UCX_NET_DEVICES`` on mpirun's line: the shape's device for ``purpose``
        (``network.ucx_net_devices``: ``mpi``, ``nccl``; a purpose the shape names no
        device for takes ``mpi``'s, the NIC every UCX message of the run then uses).

        One rule: exported when the job's ranks span nodes, as the seeds do (seed 002
        sec 3, 004 sec 1, 003 sec 3-2).  Only messages between nodes take the network;
        inside one node UCX uses shared memory and the GPUs' own links, and naming a
        device there only adds a way to fail ("network device ... is not available").
        A check whose seed names it in one node too keeps the seed's line
        (``ucx_device_in_one_node``).  Call it once ``num_tasks`` and
        ``num_tasks_per_node`` are set; it adds to mpirun's line where it is called."""
        devices = self.extras.get("ucx_net_devices") or {}
        device = devices.get(purpose) or devices.get("mpi")
        per_node = self.num_tasks_per_node or self.num_tasks
        spans = bool(per_node) and self.num_tasks > per_node
        if device and (spans or self.ucx_device_in_one_node):
            self.export("UCX_NET_DEVICES", device)

    def _record_ucx_protocols(self) -> None:
        """UCX_PROTO_INFO=y in the job's environment, and last on mpirun's line when
        ranks run on other nodes (Open MPI forwards only what -x names)."""
        name, value = UCX_PROTO_INFO
        self.env_vars = {**self.env_vars, name: value}
        per_node = self.num_tasks_per_node or self.num_tasks
        if per_node and self.num_tasks > per_node:
            self.export(name, value)

    # ------------------------------------------------------------------ hooks

    @run_after("init")
    def _ocibench_environs(self):
        # The environment of the entry's module (and of its MPI, IMB's parameter): the
        # registry's, so that no check writes an environment's name.
        self.valid_prog_environs = prog_environs(self.check_name, getattr(self, "mpi", None))

    @run_after("setup")
    def _ocibench_setup(self):
        self.shape = self.extras.get("shape", "")
        unavailable = self.current_environ.extras.get("unavailable")
        self.skip_if(bool(unavailable), unavailable)
        if self.current_environ.extras.get("launcher") == INTELMPI:
            self.job.launcher = getlauncher(INTELMPI)()
        self.configure(self.extras)
        # The software is not installed (ocibench.reframe.site.absent_modules): after
        # configure, so that a check this node could never run (no GPU, one node) says
        # that first; before the job, whose `module load` would fail it.
        absent = self.current_environ.extras.get("absent")
        self.skip_if(bool(absent), absent)
        if self.gpu_messages:
            self._record_ucx_protocols()
        self.prerun_cmds = [f"{sys.executable} -m ocibench.node.provenance > {PROVENANCE_FILE}"] \
            + list(self.prerun_cmds)

    @run_before("sanity")
    def _ocibench_exit_code(self):
        """The one check of the job's exit code: before ReFrame's own assertion
        (general/trap_job_errors), which says only "job exited with exit code 1", and
        before the output is read; it names the line that says why.  An exit code
        ReFrame could not learn (None) is no success either."""
        code = self.job.exitcode
        if not self.is_dry_run() and code != 0:
            raise ReframeSanityError(f"job exit code {code}: {self._why_failed()}")

    @sanity_function
    def assert_sane(self):
        """An output that ocibench.figures.outputs.parse accepts (the exit code was
        checked before: _ocibench_exit_code)."""
        self.measurement()   # the parse's own refusal, as the performance stage sees it
        # Kept: the performance stage names a missed figure's cause from these rows
        # (_cause) rather than judging the run a second time.
        result = self._ocibench_evaluation = evaluate.evaluate(
            self.check_name, self._output(), self._shape(), self.run_params())
        self.nccl_path = result.path or ""
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
            # the shape the configuration built for this partition: not read again
            cached = self._ocibench_shape = built_shape(self.shape or shapes.LOCAL)
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
        kept = getattr(self, "_ocibench_evaluation", None)
        if kept is not None and kept.unjudged is None:
            rows = kept.rows   # the sanity stage's judgement, against the same figures
        else:
            # Its rows were not compared (a method other than the figure's): ReFrame's
            # reference still was, so the cause is named from a judgement against it.
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
        self.valid_systems = systems_for(self.nodes, gpu=True)

    def one_rank_per_gpu(self, extras: dict[str, Any]) -> None:
        # The collective library's settings OCI recommends for the shape
        # (network.collective_env: NCCL_IB_HCA, NCCL_IB_GID_INDEX, the net plugin...),
        # first: the log level below overrides theirs.
        network = self._shape().data.get("network") or {}
        for name, value in (network.get("collective_env") or {}).items():
            self.export(name, str(value))
        # NCCL's log names the transport of every channel: the path the figure took
        # is judged with it (ocibench.figures.nccl_path), a few hundred lines per run.
        for name, value in nccl_path.DEBUG_ENV.items():
            self.export(name, value)
        self.need_nodes(self.nodes)
        # Across nodes a collective is measured over the cluster network.  A shape without
        # one (OCI's A10 shapes have no RDMA) would send it over the front-end TCP network
        # (NCCL's NET/Socket), a path no figure describes and no OCI cluster uses.
        rdma = str(network.get("rdma") or "none").lower()
        self.skip_if(self.nodes > 1 and rdma == "none",
                     f"{extras['shape']} has no cluster network (no network.rdma): a "
                     "collective across nodes would go over the front-end TCP network")
        # In one node a collective needs two GPUs to be one; across nodes one each.
        self.need_gpus(2 if self.nodes == 1 else 1)
        self.gpu_messages = True
        self.gpus_per_node = self.node_gpus
        self.num_tasks = self.nodes * self.gpus_per_node
        self.num_tasks_per_node = self.gpus_per_node
