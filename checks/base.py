"""The shared base of every oci-hpc-bench check (no test is defined here).

A check is a run-only ReFrame test over a benchmark installed in the shape's Lmod tree
(the ``osu_run`` pattern of ReFrame's hpctestlib).  This base does what every check does
the same way:

* It scales the run to the partition: cores, GPUs, NUMA layout and nodes come from the
  partition's ``extras`` (see :mod:`ocibench.reframe_site`), which come from the shape
  file.  A run the partition cannot hold (too few cores, GPUs or nodes; no Intel MPI;
  no GPU on the machine) is SKIPPED with the reason, never passed.
* It records provenance: ``python3 -m ocibench.provenance > provenance.json`` runs in
  the job before the benchmark, with the interpreter that runs ReFrame.
* Sanity is :func:`ocibench.outputs.parse` (the same code that judges hand-run outputs
  offline) plus the job's exit code; a job that failed before the benchmark printed
  anything (a module that does not load, mpirun that cannot start) is reported with the
  line of its error output that says why.
* Sanity also refuses a value that cannot be a measurement (zero, above the physical
  limit of its link or memory): :func:`ocibench.judge.judge` says so, as it does offline.
* Performance variables are every value the parse returns, named
  ``<metric>_<key>`` by :func:`ocibench.references.perf_var`; their references come
  from :func:`ocibench.judge.reframe_reference`, with the same bounds as the offline
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
from reframe.core.builtins import (parameter, performance_function, run_after,
                                   run_before, sanity_function, variable)
from reframe.core.exceptions import SanityError as ReframeSanityError

from ocibench import judge, outputs, references, shapes
from ocibench.reframe_launchers import INTELMPI

PROVENANCE_FILE = "provenance.json"

#: Lines of a failed job's stderr that say why it failed, most telling first.
_FAILURE_LINES = (
    re.compile(r"ocibench: .*"),
    # UCX_NET_DEVICES names a device the node lacks (a wrong mlx5_N:1 in a shape file)
    re.compile(r".*network device '[^']+' is not available.*"),
    re.compile(r"module\(s\) are unknown"),
    re.compile(r".*(?:command not found|No such file or directory).*"),
    re.compile(r".*(?:not enough slots|There are not enough slots).*"),
    re.compile(r"(?i).*error.*"),
)


def failure_line(stderr: str) -> str | None:
    """The line of a failed job's error output that best says why it failed."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for pattern in _FAILURE_LINES:
        for index, line in enumerate(lines):
            if pattern.search(line):
                if "module(s) are unknown" in line and index + 1 < len(lines):
                    return f"{line} {lines[index + 1]}"  # Lmod prints the names next
                return line
    return lines[-1] if lines else None


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


class OcibenchCheck(rfm.RunOnlyRegressionTest):
    """Base of the checks: scaling, skips, provenance, sanity, performance, references."""

    #: The figure naming of the shape files: osu_latency, osu_bw, imb_pingpong, ...
    check_name = variable(str)
    #: The shape the check ran for (the partition's ``extras.shape``).
    shape = variable(str, value="")
    #: Why the case was skipped.  ReFrame prints the reason but its JSON report keeps
    #: only ``result: skip``; the report (ocibench.report.load) reads it from here.
    skip_reason = variable(str, value="")

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
        """The parameters as the shape files' figures and ocibench.checkspec name them."""
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

    # ------------------------------------------------------------------ hooks

    @run_after("setup")
    def _ocibench_setup(self):
        self.shape = self.extras.get("shape", "")
        unavailable = self.current_environ.extras.get("unavailable")
        self.skip_if(bool(unavailable), unavailable)
        if self.current_environ.extras.get("launcher") == INTELMPI:
            self.job.launcher = getlauncher(INTELMPI)()
        self.configure(self.extras)
        self.prerun_cmds = [f"{sys.executable} -m ocibench.provenance > {PROVENANCE_FILE}"] \
            + list(self.prerun_cmds)

    @run_before("sanity")
    def _ocibench_exit_code(self):
        # Before ReFrame's own exit-code assertion (general/trap_job_errors), which
        # says only "job exited with exit code 1": name the line that says why.
        code = self.job.exitcode
        if not self.is_dry_run() and code not in (0, None):
            why = failure_line(self._error_output()) or "no error output"
            raise ReframeSanityError(f"job exit code {code}: {why}")

    @sanity_function
    def assert_sane(self):
        """Exit code 0 and an output that ocibench.outputs.parse accepts."""
        code = self.job.exitcode
        if code != 0:
            why = failure_line(self._error_output()) or "no error output"
            raise ReframeSanityError(f"job exit code {code}: {why}")
        measured = self.measurement()
        rows = judge.judge_run(self._shape(), self.check_name, self.run_params(),
                               measured.series(), measured.units())
        impossible = next((row.failure() for row in rows if row.implausible), None)
        if impossible:
            raise ReframeSanityError(impossible)
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

    def _error_output(self) -> str:
        """stderr, then stdout: UCX logs its warnings (a UCX_NET_DEVICES device the node
        does not have) to stdout."""
        return self._read(self.stderr.evaluate()) + "\n" + self._read(self.stdout.evaluate())

    def _read(self, name: str) -> str:
        path = os.path.join(self.stagedir, name)
        try:
            with open(path, errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""

    def measurement(self) -> outputs.Measurement:
        cached = getattr(self, "_ocibench_measurement", None)
        if cached is None:
            text = self._read(self.stdout.evaluate())
            try:
                cached = outputs.parse(self.check_name, text, self.run_params())
            except outputs.SanityError as err:
                raise ReframeSanityError(str(err)) from None
            self._ocibench_measurement = cached
        return cached

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
        self.need_nodes(self.nodes)
        # In one node a collective needs two GPUs to be one; across nodes one each.
        self.need_gpus(2 if self.nodes == 1 else 1)
        self.gpus_per_node = extras["gpus"]
        self.num_tasks = self.nodes * self.gpus_per_node
        self.num_tasks_per_node = self.gpus_per_node

    def figure_params(self):
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node}
