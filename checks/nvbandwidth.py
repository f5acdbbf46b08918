"""This node's copy ceilings: NVIDIA's nvbandwidth and the pageable-host copy rate.

    nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce \\
                device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce
    python3 -m ocibench.node.pageable_copy --size 268435456

The copy engines' rate between pinned host memory and each GPU, and between two GPUs
(NVIDIA/nvbandwidth's testcases, v0.8 testcase.h), and the rate of a copy from
pageable host memory (what OMB's host buffers get; nvbandwidth has no pageable
testcase: ocibench.node.pageable_copy).  nvbandwidth copies its default buffer size: a
smaller one (-b) reads below the copy engines' peak, and nvbandwidth says so ("NOTE: You
have chosen a buffer size that is smaller than the default buffer size", main() of
nvbandwidth.cpp; the default is defaultBufferSize, 512 MiB, in common.h): at -b 256 the
D-D copy read about 1 % low, and OMB's 256 MiB D-D bandwidth came out above its
"ceiling".  The pageable copy is ours: 256 MiB, the size of OMB's osu_bw runs.
The report shows each GPU figure beside the ceiling that bounds it (docs/report.md).
Nothing is documented for these: they are recorded, judged only for plausibility.
"""

from __future__ import annotations

import sys

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import variable

from ocibench.figures import outputs

from .base import OcibenchCheck, systems_for

#: bytes per pageable copy: OMB's osu_bw message in the checks (-m 268435456).
PAGEABLE_BYTES = 256 * 2**20


@rfm.simple_test
class nvbandwidth(OcibenchCheck):
    check_name = "nvbandwidth"
    descr = "nvbandwidth copy-engine ceilings and the pageable-host copy rate"
    valid_systems = systems_for(1, gpu=True)
    tags = {"ocibench", "gpu", "nvbandwidth"}
    nodes = variable(int, value=1)
    gpus_per_node = variable(int, value=0)

    def configure(self, extras):
        self.need_gpus(1)
        self.gpus_per_node = self.node_gpus
        # one process on the node, no MPI
        self.job.launcher = getlauncher("local")()
        self.num_tasks = self.num_tasks_per_node = 1
        testcases = [outputs.NVBANDWIDTH_CEILINGS[key] for key in outputs.NVBANDWIDTH_KEYS
                     if not key.startswith("pageable_")
                     and (self.gpus_per_node > 1 or not key.startswith("device_to_device"))]
        self.executable = "nvbandwidth"
        # no -b: the copy engines' ceiling is measured at nvbandwidth's own size (above)
        self.executable_opts = ["-t", *testcases]
        where = outputs.nvbandwidth_gpus(self.gpus_per_node)
        self.postrun_cmds = [
            f"{sys.executable} -m ocibench.node.pageable_copy --size {PAGEABLE_BYTES} "
            f"--h2d-gpu {where['pageable_host_to_device'][1]} "
            f"--d2h-gpu {where['pageable_device_to_host'][0]}"]
