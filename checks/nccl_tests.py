"""nccl-tests all_reduce_perf at 10 GiB (seed 003 sec 3-1, 3-2).

    mpirun -n 8 all_reduce_perf -b 10G -e 10G -t 1 -g 1
    mpirun -n 16 -N 8 -hostfile ... -x LD_LIBRARY_PATH -x UCX_NET_DEVICES=mlx5_4:1
           -x NCCL_IGNORE_CPU_AFFINITY=1 all_reduce_perf -b 10G -e 10G -t 1 -g 1

One rank per GPU (-g 1), every GPU of the node(s).
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from .base import OcibenchCheck


@rfm.simple_test
class nccl_all_reduce_perf(OcibenchCheck):
    check_name = "nccl_all_reduce_perf"
    descr = "nccl-tests all_reduce_perf, 10 GiB, busbw, every GPU of the node(s)"
    nodes = parameter([1, 2])
    gpus_per_node = variable(int, value=0)
    valid_prog_environs = ["+nccl-tests"]
    tags = {"ocibench", "nccl-tests", "gpu", "nccl"}

    @run_after("init")
    def _systems(self):
        where = "+multinode" if self.nodes > 1 else "-multinode"
        self.valid_systems = [f"+gpu {where}", "local"]

    def configure(self, extras):
        self.need_nodes(self.nodes)
        self.need_gpus(2 if self.nodes == 1 else 1)
        self.gpus_per_node = extras["gpus"]
        self.num_tasks = self.nodes * self.gpus_per_node
        self.num_tasks_per_node = self.gpus_per_node
        self.executable = "all_reduce_perf"
        self.executable_opts = ["-b", "10G", "-e", "10G", "-t", "1", "-g", "1"]
        if self.nodes > 1:
            device = self.ucx_device("nccl") or self.ucx_device("mpi")
            if device:
                self.export("UCX_NET_DEVICES", device)
            self.export("NCCL_IGNORE_CPU_AFFINITY", "1")

    def figure_params(self):
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node}
