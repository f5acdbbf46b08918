"""The node against its shape, before the benchmarks: ``ocibench preflight --json``.

It probes what the documented figures depend on (GPUs, NVLink, PCIe links, GPU NUMA
affinity, gdrdrv, XPMEM, nvidia_peermem, CMA, the memlock limit, the RDMA ports of
``UCX_NET_DEVICES``, UCX's transports, Open MPI's CUDA support and PML) in the
benchmarks' own environment (``omb``: the modules the tutorials load), keeps the JSON
(``preflight.json``) with the run's files, and fails naming each item the shape
requires and the node lacks.  On ``local`` nothing is required: it records the node.
See docs/preflight.md.
"""

from __future__ import annotations

import json
import os
import sys

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, sanity_function, variable
from reframe.core.exceptions import SanityError

from ocibench import benchmarks
from ocibench.figures.joblog import failure_line
from ocibench.metrics import could_not_judge
from ocibench.reframe.site import prog_environs

from .base import PROVENANCE_FILE, SweepNodes, systems_for

PREFLIGHT_FILE = "preflight.json"


@rfm.simple_test
class preflight(rfm.RunOnlyRegressionTest, SweepNodes):
    descr = "this node against its shape file (ocibench preflight)"
    valid_systems = systems_for(1)
    # the environment of the checks whose UCX protocol tables are read (omb)
    valid_prog_environs = prog_environs(next(spec.name for spec in benchmarks.CHECKS.values()
                                             if spec.ucx_buffers))
    shape = variable(str, value="")
    time_limit = "10m"
    keep_files = [PREFLIGHT_FILE, PROVENANCE_FILE]
    tags = {"ocibench", "preflight"}
    maintainers = ["oci-hpc-bench"]

    @run_after("setup")
    def _command(self):
        self.shape = self.current_partition.extras.get("shape", "")
        self.job.launcher = getlauncher("local")()
        self.executable = sys.executable
        self.executable_opts = ["-m", "ocibench.cli", "preflight", "--json"] \
            + (["--shape", self.shape] if self.shape else []) + [">", PREFLIGHT_FILE]
        # Every job records what it ran with, the benchmarks' way (checks/base.py).
        self.prerun_cmds = [f"{sys.executable} -m ocibench.node.provenance > {PROVENANCE_FILE}"]

    @sanity_function
    def assert_node_has_what_the_shape_requires(self):
        code = self.job.exitcode
        try:
            with open(os.path.join(self.stagedir, PREFLIGHT_FILE)) as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            result = None
        if code == 1 and result:
            raise SanityError(f"{result['shape']} requires what this node lacks: "
                              + "; ".join(f"{i['name']} {i['status']} ({i['detail']})"
                                          for i in result["items"] if i["missing"]))
        if code == 3 and result:
            # Unknown is not the node's fault, and not a pass either: say so.
            raise SanityError(could_not_judge(
                f"preflight could not read what {result['shape']} requires: "
                + "; ".join(f"{i['name']} unknown ({i['detail']})" for i in result["items"]
                            if i["required"] and i["status"] == "unknown")))
        if code != 0 or not result:
            with open(os.path.join(self.stagedir, self.stderr.evaluate()),
                      errors="replace") as handle:
                why = failure_line(handle.read()) or "no error output"
            raise SanityError(f"ocibench preflight exit code {code}: {why}")
        return True
