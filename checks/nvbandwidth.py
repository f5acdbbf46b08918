"""This node's copy ceilings: NVIDIA's nvbandwidth and the pageable-host copy rate.

    nvbandwidth -b 256 -t host_to_device_memcpy_ce device_to_host_memcpy_ce \\
                device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce
    python3 -m ocibench.pageable_copy

The copy engines' rate between pinned host memory and each GPU, and between two GPUs
(NVIDIA/nvbandwidth's testcases, v0.8 testcase.h), and the rate of a copy from
pageable host memory (what OMB's host buffers get; nvbandwidth has no pageable
testcase: ocibench.pageable_copy).  256 MiB per copy, the size of OMB's osu_bw runs.
The report shows each GPU figure beside the ceiling that bounds it (docs/report.md).
Nothing is documented for these: they are recorded, judged only for plausibility.
"""

from __future__ import annotations

import sys

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import variable

from ocibench import outputs

from .base import OcibenchCheck

#: MiB per copy (-b): OMB's osu_bw message in the checks (-m 268435456).
BUFFER_MIB = 256


@rfm.simple_test
class nvbandwidth(OcibenchCheck):
    check_name = "nvbandwidth"
    descr = "nvbandwidth copy-engine ceilings and the pageable-host copy rate, 256 MiB"
    valid_systems = ["+gpu -multinode", "local"]
    valid_prog_environs = ["+nvbandwidth"]
    tags = {"ocibench", "gpu", "nvbandwidth"}
    nodes = variable(int, value=1)
    gpus_per_node = variable(int, value=0)

    def configure(self, extras):
        self.need_gpus(1)
        self.gpus_per_node = extras["gpus"]
        # one process on the node, no MPI
        self.job.launcher = getlauncher("local")()
        self.num_tasks = self.num_tasks_per_node = 1
        testcases = [outputs.NVBANDWIDTH_CEILINGS[key] for key in outputs.NVBANDWIDTH_KEYS
                     if not key.startswith("pageable_")
                     and (self.gpus_per_node > 1 or not key.startswith("device_to_device"))]
        self.executable = "nvbandwidth"
        self.executable_opts = ["-b", str(BUFFER_MIB), "-t", *testcases]
        where = outputs.nvbandwidth_gpus(self.gpus_per_node)
        self.postrun_cmds = [
            f"{sys.executable} -m ocibench.pageable_copy --size {BUFFER_MIB * 2**20} "
            f"--h2d-gpu {where['pageable_host_to_device'][1]} "
            f"--d2h-gpu {where['pageable_device_to_host'][0]}"]

    def figure_params(self):
        return {"nodes": 1, "gpus_per_node": self.gpus_per_node}
