"""BabelStream: the memory bandwidth of every GPU of a node, as AMD's acceptance runs it
(ROCm/system-acceptance-docs docs/common/system-validation.md, "BabelStream"):

    mpirun -n 8 sh -c 'exec hip-stream --device "$OMPI_COMM_WORLD_LOCAL_RANK" -n 50 -s 268435456'

One process per GPU, each on its own GPU (AMD's wrapper.sh passes
``--device $OMPI_COMM_WORLD_RANK`` under ``mpiexec -n 8``; the local rank is the same
in one node and names the device on any node).  The executable is the vendor's
BabelStream model (``hip-stream``, ``cuda-stream``: ocibench.accelerators); the
options are the registry's (ocibench.benchmarks).  Each kernel's value is its slowest
GPU's, since AMD's floors hold for every GPU.
"""

from __future__ import annotations

import shlex

import reframe as rfm
from reframe.core.builtins import variable

from ocibench import accelerators, benchmarks

from .base import OcibenchCheck, systems_for

#: Open MPI's rank of a process among those of its node (ompi/runtime: the
#: OMPI_COMM_WORLD_LOCAL_RANK of every process mpirun starts).
LOCAL_RANK = "$OMPI_COMM_WORLD_LOCAL_RANK"


@rfm.simple_test
class babelstream(OcibenchCheck):
    check_name = "babelstream"
    descr = "BabelStream Copy/Mul/Add/Triad/Dot on every GPU of a node, one process each"
    valid_systems = systems_for(1, gpu=True)
    tags = {"ocibench", "gpu", "babelstream"}
    nodes = variable(int, value=1)
    gpus = variable(int, value=0)

    def configure(self, extras):
        self.need_gpus(1)
        self.gpus = self.node_gpus
        self.num_tasks = self.num_tasks_per_node = self.gpus
        # the shape's GPUs (on `local`, those its probe found) name the vendor
        vendor = accelerators.of(self._shape().gpus)
        self.skip_if(vendor is None, f"{extras['shape']} names no GPU vendor (gpus.vendor)")
        command = benchmarks.spec(self.check_name).command
        run = " ".join([vendor.babelstream_executable, "--device", f'"{LOCAL_RANK}"',
                        *command[1:]])
        self.executable = "sh"
        self.executable_opts = ["-c", shlex.quote(f"exec {run}")]

    def run_params(self):
        return {**self.figure_params(), "gpus": self.gpus}
