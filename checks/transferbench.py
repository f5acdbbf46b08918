"""TransferBench's peer-to-peer preset: copies between every pair of GPUs of a node,
AMD's acceptance (ROCm/system-acceptance-docs docs/gpus/mi300x.md, "TransferBench p2p"):

    TransferBench p2p

One process drives every GPU (no MPI).  It prints a unidirectional and a bidirectional
matrix and their averages; the figures compare the GPU->GPU averages, as AMD's own
acceptance suite does (ROCm/cvs, parse_tb_p2p_bw), and the slowest pair is recorded
beside them.  TransferBench is AMD's: on other vendors' GPUs its environment is
unavailable and the check skips with the reason (ocibench.reframe.site).
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import variable

from ocibench import benchmarks

from .base import OcibenchCheck, systems_for


@rfm.simple_test
class transferbench_p2p(OcibenchCheck):
    check_name = "transferbench_p2p"
    descr = "TransferBench p2p: GPU-to-GPU copies, uni- and bidirectional"
    valid_systems = systems_for(1, gpu=True)
    valid_prog_environs = ["+transferbench"]
    tags = {"ocibench", "gpu", "transferbench"}
    nodes = variable(int, value=1)

    def configure(self, extras):
        # a pair of GPUs at least: the preset copies between them
        self.need_gpus(2)
        self.job.launcher = getlauncher("local")()
        self.num_tasks = self.num_tasks_per_node = 1
        executable, *options = benchmarks.spec(self.check_name).command
        self.executable = executable
        self.executable_opts = list(options)
