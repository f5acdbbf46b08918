"""Where the ranks of a run sit: the cores of a host<->GPU run in one node, and the
``mpirun`` options that pin each rank to its core.

The topology read here is a node's as the shape files give it (and as
``ocibench.reframe.site.partition_extras`` hands it to the checks): ``numa_nodes``
(``[{id, socket, cores: [first, last]}]``), ``gpus`` (count) and ``gpu_numa`` (the
NUMA node of GPU *i*).  Used by the host<->GPU checks (checks/osu.py) and by
``ocibench placement``, which the device scripts call for the same cores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The placements of a host<->GPU run (ocibench.benchmarks: osu_* ``placement``).
PLACEMENTS = ("same-numa", "same-socket", "other-socket")


def host_device_cores(topology: Mapping[str, Any], buffers: str,
                      placement: str) -> tuple[list[int] | None, str]:
    """The two cores of an H-D or D-H run in one node (seed 000 sec 2-1/2-2).

    The device rank (rank 1 for H-D, rank 0 for D-H) uses GPU ``local rank % GPUs`` (as
    OMB chooses it) and sits on the second core of that GPU's NUMA node; the host rank
    sits on the first core of the same NUMA node (same-numa), on the first core of the
    first other NUMA node of the same socket (same-socket), or on the first core of the
    other socket (other-socket).  On BM.GPU4.8 (GPUs 0-1 on NUMA 3 = cores 24-31,
    socket 0 = NUMA 0-3, socket 1 from core 32) this gives the seed's pe-lists:
    H-D 24,25 / 0,25 / 32,25 and D-H 25,24 / 25,0 / 25,32.

    Returns (cores in rank order, "") or (None, why the topology cannot offer it).
    """
    if not topology.get("gpus"):
        return None, "the node has no GPU"
    numa = {n["id"]: n for n in topology["numa_nodes"]}
    device_rank = 1 if buffers == "H-D" else 0
    gpu = device_rank % topology["gpus"]
    node_id = topology["gpu_numa"][gpu]
    node = numa[node_id]
    cores = list(range(node["cores"][0], node["cores"][1] + 1))
    device_core = cores[1] if len(cores) > 1 else cores[0]
    if placement == "same-numa":
        if len(cores) < 2:
            return None, f"NUMA node {node_id} of GPU {gpu} has a single core"
        host_core = cores[0]
    elif placement == "same-socket":
        others = [i for i in sorted(numa) if i != node_id and numa[i]["socket"] == node["socket"]]
        if not others:
            return None, (f"socket {node['socket']} has a single NUMA node ({node_id}, "
                          f"GPU {gpu}'s): no other NUMA node on the same socket")
        host_core = numa[others[0]]["cores"][0]
    elif placement == "other-socket":
        others = [i for i in sorted(numa) if numa[i]["socket"] != node["socket"]]
        if not others:
            return None, "the node has a single socket"
        host_core = min(numa[i]["cores"][0] for i in others)
    else:
        raise ValueError(f"unknown placement {placement!r}")
    order = [device_core, host_core] if device_rank == 0 else [host_core, device_core]
    return order, ""


#: The file an Open MPI 4.x job names each rank's core in (see pin_ranks).
RANKFILE = "ocibench_rankfile"
#: Shell variable that carries the pinning options when the MPI is chosen in the job.
PLACEMENT_VAR = "OCIBENCH_PLACEMENT"


def pin_ranks(cores: list[int], openmpi: str) -> tuple[list[str], list[str]]:
    """mpirun options that put rank i on ``cores[i]``, and the job lines they need.

    Open MPI 5.x (PRRTE) takes the seeds' ``--map-by pe-list=24,25:ordered``.  Open MPI
    4.x (ORTE) does not know pe-list ("The mapping request contains an unrecognized
    modifier", then "Bad parameter"), and its ``--cpu-list 25,24 --bind-to
    cpu-list:ordered`` binds in ascending core order whatever the list says (tried with
    4.1.4: rank 0 went to the lower core), so 4.x gets a rankfile of OS core ids
    (``rmaps_rank_file_physical``, as the shape file and numactl count them).

    ``openmpi`` is the shape's ``software.stack.openmpi``.  A version there (5.0.8)
    gives that major's options on the mpirun line, and the job fails, naming both
    versions, if its mpirun is another major.  Without one (``any``) the job asks its
    own mpirun (``mpirun --version``) and picks; another major than 4 or 5 fails
    saying which are needed.
    """
    pe_list = f"--map-by pe-list={','.join(map(str, cores))}:ordered"
    lines = "\\n".join(f"rank {rank}=localhost slot={core}" for rank, core in enumerate(cores))
    forms = {  # major -> (options, the job line that prepares them)
        "5": (pe_list, ":"),
        "4": (f"--rankfile {RANKFILE} --mca rmaps_rank_file_physical 1",
              f"printf '{lines}\\n' > {RANKFILE}"),
    }
    probe = ("ocibench_ompi=$(mpirun --version 2>&1 | "
             "sed -n 's/^.*(Open MPI) \\([0-9][0-9]*\\)\\..*$/\\1/p' | head -n 1)")
    major = openmpi.split(".")[0]
    if major.isdigit():   # the shape names its Open MPI: that major's options, checked
        options = forms[major][0].split() if major in forms else []
        branches = {major: forms[major][1]} if major in forms else {}
        need = (f"is written for Open MPI {major}.x (software.stack.openmpi: {openmpi})"
                if major in forms else
                f"needs Open MPI 4.x or 5.x, not {openmpi} (software.stack.openmpi)")
    else:                 # chosen in the job by its own mpirun
        options = [f"${PLACEMENT_VAR}"]
        branches = {m: f'{setup}; {PLACEMENT_VAR}="{opts}"' for m, (opts, setup) in forms.items()}
        need = "needs Open MPI 4.x (rankfile) or 5.x (--map-by pe-list)"
    fail = (f'echo "ocibench: the host<->GPU placement {need}; this job\'s mpirun is '
            f'Open MPI ${{ocibench_ompi:-(none found)}}" >&2; exit 1')
    cases = "".join(f"{m}) {line} ;; " for m, line in branches.items())
    return options, [probe, f'case "$ocibench_ompi" in {cases}*) {fail} ;; esac']
