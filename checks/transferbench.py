"""TransferBench's presets, AMD's GPU-to-GPU acceptance (ROCm/system-acceptance-docs
docs/gpus/mi300x.md, "TransferBench p2p" and "TransferBench a2a"):

    TransferBench p2p
    TransferBench a2a

One process drives every GPU (no MPI).  p2p prints a unidirectional and a
bidirectional matrix of every pair and their averages; the figures compare the
GPU->GPU averages, as AMD's own acceptance suite does (ROCm/cvs, parse_tb_p2p_bw).  a2a
has every GPU copy to every other at once and prints the average pair; the figure
compares that.  The slowest pair of each matrix is recorded beside the averages.
TransferBench is AMD's: on other vendors' GPUs its environment is unavailable and the
checks skip with the reason (ocibench.reframe.site).
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import variable

from ocibench import benchmarks

from .base import OcibenchCheck, systems_for


class _Preset(OcibenchCheck):
    """One TransferBench preset: the registry entry's command on the node's GPUs."""

    valid_systems = systems_for(1, gpu=True)
    tags = {"ocibench", "gpu", "transferbench"}
    nodes = variable(int, value=1)

    def configure(self, extras):
        # a pair of GPUs at least: the presets copy between them
        self.need_gpus(2)
        self.job.launcher = getlauncher("local")()
        self.num_tasks = self.num_tasks_per_node = 1
        executable, *options = benchmarks.spec(self.check_name).command
        self.executable = executable
        self.executable_opts = list(options)


@rfm.simple_test
class transferbench_p2p(_Preset):
    check_name = "transferbench_p2p"
    descr = "TransferBench p2p: GPU-to-GPU copies, uni- and bidirectional"


@rfm.simple_test
class transferbench_a2a(_Preset):
    check_name = "transferbench_a2a"
    descr = "TransferBench a2a: every GPU copying to every other at once"
