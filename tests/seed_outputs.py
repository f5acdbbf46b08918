"""Where the seed documents show a benchmark's output, and which run it is.

Each entry names a seed document, the command line that printed the output (a line
starting with "$ " that contains every string of ``command``; with ``after``, the
first such line below the line containing ``after``, else the only one in the
document), and the check, shape and parameters of that run.  ``extract`` returns the
command line and everything printed under it, up to the next prompt or the end of the
code block: real noise (report-bindings, SET UCX_NET_DEVICES, blank lines,
indentation) included.  The documents are read from the seeds directory at test time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OMB_GPU = "000_e2d06e61cac4e790.txt"
STREAM = "001_982fe3841ecd9e76.txt"
OMB_CPU = "002_a0a00444901fec78.txt"
NCCL = "003_d13010d0a977d4a9.txt"
IMB = "004_dace33aaa4b42b69.txt"


@dataclass(frozen=True)
class SeedOutput:
    doc: str
    command: tuple[str, ...]
    check: str
    shape: str
    params: dict[str, Any] = field(default_factory=dict)
    after: str | None = None

    @property
    def name(self) -> str:
        params = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.doc[:3]}:{self.check}:{params}"


def _host_device(check: str) -> list[SeedOutput]:
    """Seed 000 sec 2-1/2-2: the host rank's core (pe-list) names the placement
    relative to GPUs 0-1 on NUMA node 3 (cores 24-31, socket 0)."""
    cores = {"24": "same-numa", "0": "same-socket", "32": "other-socket"}
    entries = []
    for core, placement in cores.items():
        entries.append(SeedOutput(OMB_GPU, (f"pe-list={core},25:", check), check, "BM.GPU4.8",
                                  {"buffers": "H-D", "nodes": 1, "placement": placement}))
        entries.append(SeedOutput(OMB_GPU, (f"pe-list=25,{core}:", check), check, "BM.GPU4.8",
                                  {"buffers": "D-H", "nodes": 1, "placement": placement}))
    return entries


INDEX: tuple[SeedOutput, ...] = (
    # 000 sec 2-1, 2-2: GPUs 0 and 1 of one node, no pinning.
    SeedOutput(OMB_GPU, ("mpirun -n 2 --report-bindings osu_latency",), "osu_latency",
               "BM.GPU4.8", {"buffers": "D-D", "nodes": 1}),
    *_host_device("osu_latency"),
    SeedOutput(OMB_GPU, ("mpirun -n 2 --report-bindings osu_bw",), "osu_bw",
               "BM.GPU4.8", {"buffers": "D-D", "nodes": 1}),
    *_host_device("osu_bw"),
    # 000 sec 2-3 .. 2-6: across two nodes; NCCL allreduce on 8 and 16 GPUs.
    SeedOutput(OMB_GPU, ("-N 1", "osu_latency"), "osu_latency", "BM.GPU4.8",
               {"buffers": "D-D", "nodes": 2}),
    SeedOutput(OMB_GPU, ("-N 1", "osu_bw"), "osu_bw", "BM.GPU4.8",
               {"buffers": "D-D", "nodes": 2}),
    SeedOutput(OMB_GPU, ("mpirun -n 8 ", "osu_xccl_allreduce"), "osu_xccl_allreduce",
               "BM.GPU4.8", {"nodes": 1, "gpus_per_node": 8}),
    SeedOutput(OMB_GPU, ("mpirun -n 16 -N 8", "osu_xccl_allreduce"), "osu_xccl_allreduce",
               "BM.GPU4.8", {"nodes": 2, "gpus_per_node": 8}),
    # 001 sec 3-2: the same command line under the NPS1 and the NPS4 heading.
    SeedOutput(STREAM, ("./a.out",), "stream", "BM.Standard.E5.192",
               {"nps": 1, "threads": 96}, after="[ NPS1 の場合]"),
    SeedOutput(STREAM, ("./a.out",), "stream", "BM.Standard.E5.192",
               {"nps": 4, "threads": 96}, after="[ NPS4 の場合]"),
    # 002 sec 3-1 .. 3-4.
    SeedOutput(OMB_CPU, ("osu_alltoall",), "osu_alltoall", "BM.Optimized3.36",
               {"nodes": 1, "ranks_per_node": 36}),
    SeedOutput(OMB_CPU, ("osu_latency",), "osu_latency", "BM.Optimized3.36",
               {"buffers": "H-H", "nodes": 2}),
    SeedOutput(OMB_CPU, ("osu_bw",), "osu_bw", "BM.Optimized3.36",
               {"buffers": "H-H", "nodes": 2}),
    SeedOutput(OMB_CPU, ("osu_allreduce",), "osu_allreduce", "BM.Optimized3.36",
               {"nodes": 4, "ranks_per_node": 36}),
    # 003 sec 3-1, 3-2.
    SeedOutput(NCCL, ("mpirun -n 8 ", "all_reduce_perf"), "nccl_all_reduce_perf",
               "BM.GPU4.8", {"nodes": 1, "gpus_per_node": 8}),
    SeedOutput(NCCL, ("mpirun -n 16 -N 8", "all_reduce_perf"), "nccl_all_reduce_perf",
               "BM.GPU4.8", {"nodes": 2, "gpus_per_node": 8}),
    # 004 sec 1 (OpenMPI: -N) and sec 2 (Intel MPI: -ppn).
    SeedOutput(IMB, ("-N 1 ", "PingPong"), "imb_pingpong", "BM.Optimized3.36",
               {"mpi": "openmpi", "nodes": 2}),
    SeedOutput(IMB, ("-N 36 ", "allreduce"), "imb_allreduce", "BM.Optimized3.36",
               {"mpi": "openmpi", "nodes": 4, "ranks_per_node": 36}),
    SeedOutput(IMB, ("-ppn 1 ", "PingPong"), "imb_pingpong", "BM.Optimized3.36",
               {"mpi": "intel-mpi", "nodes": 2}),
    SeedOutput(IMB, ("-ppn 36 ", "allreduce"), "imb_allreduce", "BM.Optimized3.36",
               {"mpi": "intel-mpi", "nodes": 4, "ranks_per_node": 36}),
)


def extract(seeds_dir: Path, entry: SeedOutput) -> str:
    """The command line of ``entry`` and the output under it, as a terminal shows it."""
    lines = (seeds_dir / entry.doc).read_text().splitlines()
    first = 0
    if entry.after:
        first = next(i for i, line in enumerate(lines) if entry.after in line)
    starts = [i for i, line in enumerate(lines) if i > first
              and line.strip().startswith("$ ") and all(s in line for s in entry.command)]
    if not starts or (len(starts) > 1 and not entry.after):
        raise LookupError(f"{entry.doc}: {len(starts)} command lines contain {entry.command}")
    block = [lines[starts[0]]]
    for line in lines[starts[0] + 1:]:
        if line.strip().startswith(("$", "```")):
            break
        block.append(line)
    return "\n".join(block) + "\n"
