"""nccl-tests all_reduce_perf at 10 GiB (seed 003 sec 3-1, 3-2), or over the sizes of a
shape's documented figures (BM.GPU.H100.8: -b 1G -e 16G -f 2).

    mpirun -n 8 all_reduce_perf -b 10G -e 10G -t 1 -g 1
    mpirun -n 16 -N 8 -hostfile ... -x LD_LIBRARY_PATH -x UCX_NET_DEVICES=mlx5_4:1
           -x NCCL_IGNORE_CPU_AFFINITY=1 all_reduce_perf -b 10G -e 10G -t 1 -g 1

One rank per GPU (-g 1), every GPU of the node(s).  One test case per documented size
range at the node count (``size_range``, an index into the partition's ``nccl_sizes``,
ocibench.reframe.site.nccl_size_ranges): a figure is compared only by a run over its
sizes, and a shape may document several at one node count (BM.GPU.MI300X.8, one node:
OCI's floor at -b 1G -e 16G -f 2, AMD's at -b 8 -e 8G -f 2).  Index 0 also runs where
none is documented (the seeds' sizes); a higher index the shape lacks SKIPS.
"""

from __future__ import annotations

import reframe as rfm
from reframe.core.builtins import parameter, variable

from ocibench import benchmarks
from ocibench.reframe.site import built_shapes, nccl_size_ranges

from .base import EveryGpuCheck

#: nccl-tests' option of each size parameter (ocibench.benchmarks).
_OPTION = {"begin": "-b", "end": "-e", "factor": "-f", "step": "-i"}


def max_size_ranges() -> int:
    """The most documented size ranges any shape has at one node count: the range of
    the ``size_range`` parameter."""
    counts = [len(found) for shape in built_shapes()
              for found in nccl_size_ranges(shape).values()]
    return max(counts + [1])


@rfm.simple_test
class nccl_all_reduce_perf(EveryGpuCheck):
    check_name = "nccl_all_reduce_perf"
    descr = "nccl-tests all_reduce_perf, 10 GiB, busbw, every GPU of the node(s)"
    tags = {"ocibench", "nccl-tests", "gpu", "nccl"}
    #: Which of the shape's documented size ranges at this node count the case runs.
    size_range = parameter(list(range(max_size_ranges())))
    #: The size options the run used (empty: the seeds' -b 10G -e 10G).
    sizes = variable(dict, value={})

    def configure(self, extras):
        self.one_rank_per_gpu(extras)
        self.executable = "all_reduce_perf"
        # The sizes of the shape's documented figures at this node count (BM.GPU.H100.8,
        # 2 nodes: -b 1G -e 16G -f 2, ocitutorials run-nccltests-h100 sec 3), else the
        # seeds'.
        ranges = (extras.get("nccl_sizes") or {}).get(str(self.nodes)) or [{}]
        self.skip_if(self.size_range >= len(ranges),
                     f"{extras.get('shape')} documents {len(ranges)} size range(s) of "
                     f"{self.check_name} on {self.nodes} node(s); none at index "
                     f"{self.size_range}")
        self.sizes = dict(ranges[self.size_range])
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
