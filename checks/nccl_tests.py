"""nccl-tests all_reduce_perf at 10 GiB (seed 003 sec 3-1, 3-2).

    mpirun -n 8 all_reduce_perf -b 10G -e 10G -t 1 -g 1
    mpirun -n 16 -N 8 -hostfile ... -x LD_LIBRARY_PATH -x UCX_NET_DEVICES=mlx5_4:1
           -x NCCL_IGNORE_CPU_AFFINITY=1 all_reduce_perf -b 10G -e 10G -t 1 -g 1

One rank per GPU (-g 1), every GPU of the node(s).
"""

from __future__ import annotations

import reframe as rfm

from .base import EveryGpuCheck


@rfm.simple_test
class nccl_all_reduce_perf(EveryGpuCheck):
    check_name = "nccl_all_reduce_perf"
    descr = "nccl-tests all_reduce_perf, 10 GiB, busbw, every GPU of the node(s)"
    valid_prog_environs = ["+nccl-tests"]
    tags = {"ocibench", "nccl-tests", "gpu", "nccl"}

    def configure(self, extras):
        self.one_rank_per_gpu(extras)
        self.executable = "all_reduce_perf"
        self.executable_opts = ["-b", "10G", "-e", "10G", "-t", "1", "-g", "1"]
        if self.nodes > 1:
            device = self.ucx_device("nccl") or self.ucx_device("mpi")
            if device:
                self.export("UCX_NET_DEVICES", device)
            self.export("NCCL_IGNORE_CPU_AFFINITY", "1")
