"""OSU Micro-Benchmarks: the command lines of seeds 000 (GPUs) and 002 (host).

Device buffers are the shape's vendor's (ocibench.accelerators): ``-d cuda D H`` on
NVIDIA, ``-d rocm D H`` on AMD; the xccl benchmarks run on its collective library.

    osu_latency / osu_bw            buffers H-H | D-D, nodes 1 | 2
    osu_bibw                        buffers H-H in 1 | 2 nodes, D-D in one node
    osu_latency_host_device /       buffers H-D | D-H in one node, placement same-numa |
      osu_bw_host_device              same-socket | other-socket (figures: osu_latency, osu_bw)
    osu_alltoall                    one node, one rank per core
    osu_allreduce                   4 nodes, one rank per core
    osu_xccl_allreduce              every GPU of 1 | 2 nodes
"""

from __future__ import annotations

from typing import Any

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ocibench import accelerators, benchmarks
from ocibench.placement import host_device_cores, pin_ranks

from .base import EveryGpuCheck, OcibenchCheck, systems_for

#: seed 000 sec 2-5/2-6: osu_xccl_allreduce at 1 GiB
XCCL_BYTES = 1 << 30

def buffer_opts(check: OcibenchCheck, buffers: str) -> list[str]:
    """OMB's buffer options: none for H-H, ``-d <flag> D H`` for D-H with the flag of
    the shape's GPU vendor (its row's ``buffer_flag``)."""
    if buffers == "H-H":
        return []
    vendor = accelerators.of(check._shape().gpus)
    check.skip_if(vendor is None, f"{buffers} buffers need GPUs; shape "
                  f"{check._shape().name} has none")
    return vendor.omb_buffer_options(buffers)


def largest_size(limit: int, ranks: int, memory_gib: float, buffers_per_rank: int) -> int:
    """The largest power of two <= ``limit`` whose buffers fit in half the node's memory.

    A collective of ``ranks`` ranks that each hold ``buffers_per_rank`` buffers of
    ``size x ranks`` bytes (alltoall) needs ranks_per_node x that much memory; seed 002
    runs alltoall up to 64 MiB on 36 ranks (166 GB of 512 GiB), which would need
    4.7 TB with 192 ranks.  Sizes therefore scale with the node; a shape that documents
    the full range (BM.Optimized3.36) keeps it.
    """
    if not memory_gib:
        return limit
    budget = memory_gib * 2**30 / 2
    size = limit
    while size > 1 and buffers_per_rank * size * ranks * ranks > budget:
        size //= 2
    return size


class _OsuBase(OcibenchCheck):
    tags = {"ocibench", "omb"}


class _Pt2Pt(_OsuBase):
    """An OMB point-to-point benchmark between two ranks, with the seed's options
    (its registry entry's ``command``)."""

    #: OMB's warm-up and measured iterations (-x, -i); 0, the default: the seed's.  Fewer
    #: move less data for a functional run (the seed's osu_bw moves 256 MiB x 64 messages
    #: in flight x 20 = 320 GiB); the message size, and so the figure judged, is the
    #: seed's either way, and the command line in the run's output names the count.
    iterations = variable(int, value=0)

    def pt2pt(self, extras: dict[str, Any], nodes: int, buffers: str) -> None:
        self.need_nodes(nodes)
        if buffers != "H-H":
            # D-D in one node copies GPU 0 to GPU 1 (seed 000 sec 2-1): two GPUs.  H-D
            # and D-H have one device rank (on GPU ``local rank % GPUs``, as OMB picks
            # it), and across 2 nodes each rank has its node's GPU: one GPU is enough.
            self.need_gpus(2 if nodes == 1 and buffers == "D-D" else 1)
            self.gpu_messages = True
        self.need_cores(2 if nodes == 1 else 1)
        self.num_tasks = 2
        self.num_tasks_per_node = 2 if nodes == 1 else 1
        executable, *options = benchmarks.spec(self.check_name).command
        self.executable = executable
        if self.iterations > 0:
            options[options.index("-x") + 1] = options[options.index("-i") + 1] = \
                str(self.iterations)
        self.executable_opts = options + buffer_opts(self, buffers)
        self.export_ucx("mpi")
        if nodes == 1 and buffers != "H-H":
            self.job.launcher.options = ["--report-bindings"]


class _Pt2PtSameBuffers(_Pt2Pt):
    buffers = parameter(["H-H", "D-D"])
    nodes = parameter([1, 2])

    @run_after("init")
    def _systems(self):
        self.valid_systems = systems_for(self.nodes, gpu=self.buffers == "D-D")
        if self.buffers == "D-D":
            self.tags = self.tags | {"gpu"}

    def configure(self, extras):
        self.pt2pt(extras, self.nodes, self.buffers)


class _Pt2PtHostDevice(_Pt2Pt):
    buffers = parameter(["H-D", "D-H"])
    placement = parameter(["same-numa", "same-socket", "other-socket"])
    nodes = variable(int, value=1)
    valid_systems = systems_for(1, gpu=True)
    tags = {"ocibench", "omb", "gpu"}

    def configure(self, extras):
        self.pt2pt(extras, 1, self.buffers)
        cores, why = host_device_cores(extras, self.buffers, self.placement)
        self.skip_if(cores is None, f"{self.placement} placement impossible on "
                                    f"{extras['shape']}: {why}")
        # seed 000 sec 2-1: mpirun -n 2 --map-by pe-list=24,25:ordered --report-bindings
        #                   numactl -l osu_latency ... -d cuda H D
        # (Open MPI 5.x; 4.x gets a rankfile: ocibench.placement.pin_ranks)
        openmpi = str(self.current_environ.extras.get("mpi_version") or "any")
        options, prepare = pin_ranks(cores, openmpi)
        self.job.launcher.options = options + ["--report-bindings"]
        self.prerun_cmds = list(self.prerun_cmds) + prepare
        self.executable = "numactl"
        self.executable_opts = ["-l", self.check_name] + self.executable_opts


@rfm.simple_test
class osu_latency(_Pt2PtSameBuffers):
    check_name = "osu_latency"
    descr = "OMB osu_latency, 1 B, two ranks (seed 000 sec 2-1/2-3, seed 002 sec 3-2)"


@rfm.simple_test
class osu_bw(_Pt2PtSameBuffers):
    check_name = "osu_bw"
    descr = "OMB osu_bw, 256 MiB, two ranks (seed 000 sec 2-2/2-4, seed 002 sec 3-3)"


@rfm.simple_test
class osu_bibw(_Pt2PtSameBuffers):
    """Both ranks send at once: its MB/s counts both directions (``directions: 2`` in
    its registry entry, so its physical limit is twice the link's).  No seed runs it:
    osu_bw's seed options; D-D only in one node (two GPUs over NVLink)."""

    check_name = "osu_bibw"
    descr = "OMB osu_bibw, 256 MiB, two ranks, both directions at once"

    @run_after("init")
    def _one_node_d_d(self):
        # A variant left out here is not a test case at all (ReFrame's own filter).
        if self.buffers == "D-D" and self.nodes > 1:
            self.valid_systems = []


@rfm.simple_test
class osu_latency_host_device(_Pt2PtHostDevice):
    check_name = "osu_latency"
    descr = "OMB osu_latency host<->GPU at a NUMA placement (seed 000 sec 2-1)"


@rfm.simple_test
class osu_bw_host_device(_Pt2PtHostDevice):
    check_name = "osu_bw"
    descr = "OMB osu_bw host<->GPU at a NUMA placement (seed 000 sec 2-2)"


class _Collective(_OsuBase):
    ranks_per_node = variable(int, value=0)
    sizes = variable(str, value="")

    def run_params(self):
        return {**self.figure_params(), "sizes": self.sizes}


@rfm.simple_test
class osu_alltoall(_Collective):
    """seed 002 sec 3-1: mpirun -n 36 osu_alltoall -x 10 -i 10 -m 1:67108864"""

    check_name = "osu_alltoall"
    descr = "OMB osu_alltoall, one node, one rank per core, 1 B .. 64 MiB"
    nodes = variable(int, value=1)
    valid_systems = systems_for(1)

    def configure(self, extras):
        self.need_cores(2)
        cores = self.node_cores
        self.ranks_per_node = cores
        self.num_tasks = self.num_tasks_per_node = cores
        # Every rank holds a send and a receive buffer of size x ranks.
        top = largest_size(67108864, cores, extras.get("memory_gib", 0), 2)
        self.sizes = f"1:{top}"
        self.executable = "osu_alltoall"
        self.executable_opts = ["-x", "10", "-i", "10", "-m", self.sizes]


@rfm.simple_test
class osu_allreduce(_Collective):
    """seed 002 sec 3-4: mpirun -n 144 -N 36 -hostfile ... -x UCX_NET_DEVICES=mlx5_2:1
    osu_allreduce -x 10 -i 10 -m 4:268435456"""

    check_name = "osu_allreduce"
    descr = "OMB osu_allreduce, 4 nodes, one rank per core, 4 B .. 256 MiB"
    nodes = variable(int, value=4)
    valid_systems = systems_for(4)
    tags = {"ocibench", "omb", "multinode"}

    def configure(self, extras):
        self.need_nodes(self.nodes)
        cores = self.node_cores
        self.ranks_per_node = cores
        self.num_tasks = self.nodes * cores
        self.num_tasks_per_node = cores
        self.executable, *options = benchmarks.spec(self.check_name).command
        self.executable_opts = options
        self.sizes = options[options.index("-m") + 1]
        self.export_ucx("mpi")


@rfm.simple_test
class osu_xccl_allreduce(EveryGpuCheck):
    """seed 000 sec 2-5/2-6: mpirun -n 8 [-N 8 -hostfile ...] -x UCX_NET_DEVICES=mlx5_6:1
    osu_xccl_allreduce -x 10 -i 10 -m 1073741824:1073741824 -d cuda D D
    (plus -M 1073741824, for OMB 7.4: see configure)"""

    check_name = "osu_xccl_allreduce"
    descr = "OMB osu_xccl_allreduce (NCCL), 1 GiB, every GPU of the node(s)"
    tags = {"ocibench", "omb", "gpu", "nccl"}
    ucx_device_in_one_node = True   # the seed's one-node line names it (above)

    def configure(self, extras):
        self.one_rank_per_gpu(extras)
        self.executable = "osu_xccl_allreduce"
        # -M: OMB before 7.5 caps messages at its MAX_MEM_LIMIT of 512 MiB
        # (c/util/osu_util.h) and prints "Increase the Max Memory Limit", so the
        # seed's line (OMB 7.5) gives no 1 GiB figure with OMB 7.4 -- seen on the
        # 2 x H200 machine (docs/gpu-results.md).  The limit equal to the message
        # size changes nothing else, on either version.
        self.executable_opts = ["-x", "10", "-i", "10", "-m", f"{XCCL_BYTES}:{XCCL_BYTES}",
                                "-M", str(XCCL_BYTES), *buffer_opts(self, "D-D")]
        self.export_ucx("mpi")
