"""nccl-tests all_reduce_perf at 10 GiB (seed 003 sec 3-1, 3-2), or over the sizes a
shape's published run used (BM.GPU.H100.8: -b 1G -e 16G -f 2).

    mpirun -n 8 all_reduce_perf -b 10G -e 10G -t 1 -g 1
    mpirun -n 16 -N 8 -hostfile ... -x LD_LIBRARY_PATH -x UCX_NET_DEVICES=mlx5_4:1
           -x NCCL_IGNORE_CPU_AFFINITY=1 all_reduce_perf -b 10G -e 10G -t 1 -g 1

One rank per GPU (-g 1), every GPU of the node(s).
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import variable

from ocibench import benchmarks

from .base import EveryGpuCheck

#: nccl-tests' option of each size parameter (ocibench.benchmarks).
_OPTION = {"begin": "-b", "end": "-e", "factor": "-f", "step": "-i"}


@rfm.simple_test
class nccl_all_reduce_perf(EveryGpuCheck):
    check_name = "nccl_all_reduce_perf"
    descr = "nccl-tests all_reduce_perf, 10 GiB, busbw, every GPU of the node(s)"
    valid_prog_environs = ["+nccl-tests"]
    tags = {"ocibench", "nccl-tests", "gpu", "nccl"}
    #: The size options the run used (empty: the seeds' -b 10G -e 10G).
    sizes = variable(dict, value={})

    def configure(self, extras):
        self.one_rank_per_gpu(extras)
        self.executable = "all_reduce_perf"
        # The shape's published sizes at this node count (BM.GPU.H100.8, 2 nodes:
        # -b 1G -e 16G -f 2, ocitutorials run-nccltests-h100 sec 3), else the seeds'.
        self.sizes = dict((extras.get("nccl_sizes") or {}).get(str(self.nodes)) or {})
        options = []
        for name in ("begin", "end", "factor", "step"):
            value = self.sizes.get(name, benchmarks.spec(self.check_name).param(name).default)
            if name in ("begin", "end") or name in self.sizes:
                options += [_OPTION[name], str(value)]
        self.executable_opts = options + ["-t", "1", "-g", "1"]
        self.export_ucx("nccl")
        if self.nodes > 1:
            self.export("NCCL_IGNORE_CPU_AFFINITY", "1")

    def run_params(self):
        return {**self.figure_params(), **self.sizes}
