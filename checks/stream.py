"""STREAM (seed 001 sec 3-2):

    OMP_PLACES=0:96:2 OMP_NUM_THREADS=96 OMP_PROC_BIND=spread ./a.out

BM.Standard.E5.192 has 192 cores (SMT off, so core = CPU id 0..191).  ``0:96:2`` is
OpenMP's place list <start>:<count>:<stride>: 96 places, the CPUs 0, 2, 4, ..., 190 -
one thread on every other core, 48 on each socket (12 on each NUMA node in NPS4), which
is where this shape's memory bandwidth saturates.  Generalised: threads = cores / 2,
places ``0:<threads>:2``, on any shape.

``nps`` (NUMA nodes per socket, an AMD BIOS setting) is what the node runs, not a knob
of the run: the variant whose NPS differs from the node's NUMA count / sockets is
skipped with that reason (a run on an NPS1 node cannot claim an NPS4 figure).  The
node's NUMA count is read on the node itself, in the job.
"""

from __future__ import annotations

import glob

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_before, variable

from .base import OcibenchCheck, systems_for

NUMA_FILE = "ocibench_numa_nodes.txt"
NUMA_GLOB = "/sys/devices/system/node/node[0-9]*"

#: The executable the Spack stream recipe installs (the seed's ./a.out).
EXECUTABLE = "stream_c.exe"


def nps_of(numa_nodes: int, sockets: int) -> int:
    return max(1, numa_nodes // max(1, sockets))


@rfm.simple_test
class stream(OcibenchCheck):
    check_name = "stream"
    descr = "STREAM Copy/Scale/Add/Triad, one thread per 2 cores, OMP_PROC_BIND=spread"
    nps = parameter([1, 4])
    threads = variable(int, value=0)
    valid_systems = systems_for(1)
    tags = {"ocibench", "stream"}

    def _skip_other_nps(self, numa_nodes: int) -> None:
        sockets = self.node_sockets
        actual = nps_of(numa_nodes, sockets)
        self.skip_if(actual != self.nps,
                     f"the node runs NPS{actual} ({numa_nodes} NUMA nodes on {sockets} "
                     f"socket(s)); this variant is NPS{self.nps} (a BIOS setting)")

    def configure(self, extras):
        if (self.current_partition.scheduler.registered_name == "local"
                and not self.is_dry_run()):
            # The job runs on this very machine: skip now rather than after the run.
            self._skip_other_nps(len(glob.glob(NUMA_GLOB)) or 1)
        # The shape's documented thread count (E5.192: 96, E6.256: 32), else one thread
        # per 2 cores; the places spread the threads evenly: 0:96:2, 0:32:8.
        cores = self.node_cores
        self.threads = extras.get("stream_threads") or max(1, cores // 2)
        stride = max(1, cores // self.threads)
        self.num_tasks = self.num_tasks_per_node = 1
        self.num_cpus_per_task = cores
        self.job.launcher = getlauncher("local")()
        self.executable = EXECUTABLE
        self.env_vars = {
            "OMP_NUM_THREADS": str(self.threads),
            "OMP_PLACES": f"0:{self.threads}:{stride}",
            "OMP_PROC_BIND": "spread",
        }
        self.prerun_cmds = [f"(ls -d {NUMA_GLOB} 2>/dev/null || true) | wc -l > {NUMA_FILE}"]

    @run_before("sanity")
    def _node_nps(self):
        if self.is_dry_run():
            return
        text = self._read(NUMA_FILE).strip()
        if text.isdigit() and int(text) > 0:
            self._skip_other_nps(int(text))
