"""Intel MPI Benchmarks (seed 004 sec 1-3, 1-4 with Open MPI; sec 2-4, 2-5 with Intel MPI).

    mpirun -n 2 -N 1 -hostfile ... -x UCX_NET_DEVICES=mlx5_2:1 IMB-MPI1 -msglog 3:28 PingPong
    mpirun -n 144 -N 36 -hostfile ... -x UCX_NET_DEVICES=mlx5_2:1 IMB-MPI1 -msglog 3:28
           -npmin 144 allreduce
    mpirun -n 2 -ppn 1 -hostfile ... -genv UCX_NET_DEVICES=mlx5_2:1 IMB-MPI1 ...   (Intel MPI)

The seeds run PingPong on 2 nodes and Allreduce on 4 nodes x all cores; the 1-node
variants (two ranks / all cores of one node) run the same command inside a node, where
a shape has no second node (the local shape).  mpi=intel-mpi needs Intel MPI in the
shape's software.stack; elsewhere it is skipped with that reason.
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from .base import OcibenchCheck, systems_for

MSGLOG = "3:28"


class _Imb(OcibenchCheck):
    mpi = parameter(["openmpi", "intel-mpi"])
    tags = {"ocibench", "imb"}

    @run_after("init")
    def _environs(self):
        self.valid_systems = systems_for(self.nodes)

    def run_params(self):
        return {**self.figure_params(), "msglog": MSGLOG}


@rfm.simple_test
class imb_pingpong(_Imb):
    check_name = "imb_pingpong"
    descr = "IMB-MPI1 PingPong, 0 B .. 256 MiB, one rank per node (2 nodes) or 2 ranks in one"
    nodes = parameter([1, 2])

    def configure(self, extras):
        self.need_nodes(self.nodes)
        self.need_cores(2 if self.nodes == 1 else 1)
        self.num_tasks = 2
        self.num_tasks_per_node = 2 if self.nodes == 1 else 1
        self.executable = "IMB-MPI1"
        self.executable_opts = ["-msglog", MSGLOG, "PingPong"]
        self.export_ucx("mpi")


@rfm.simple_test
class imb_allreduce(_Imb):
    check_name = "imb_allreduce"
    descr = "IMB-MPI1 Allreduce, 0 B .. 256 MiB, one rank per core of 4 nodes (or of one)"
    nodes = parameter([1, 4])
    ranks_per_node = variable(int, value=0)

    def configure(self, extras):
        self.need_nodes(self.nodes)
        self.need_cores(2)
        self.ranks_per_node = self.node_cores
        self.num_tasks = self.nodes * self.ranks_per_node
        self.num_tasks_per_node = self.ranks_per_node
        self.executable = "IMB-MPI1"
        self.executable_opts = ["-msglog", MSGLOG, "-npmin", str(self.num_tasks), "allreduce"]
        self.export_ucx("mpi")
