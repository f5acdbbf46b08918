"""ReFrame job launchers that write the tutorials' ``mpirun`` command lines.

The seeds never use ``srun``: they start every benchmark with the MPI library's own
``mpirun``, naming the ranks, the ranks per node and a host list, and exporting the
UCX device to every rank::

    # Open MPI
    mpirun -n 2 -N 1 -hostfile ~/hostlist.txt -x UCX_NET_DEVICES=mlx5_2:1 osu_latency ...
    # Intel MPI
    mpirun -n 2 -ppn 1 -hostfile hostlist.txt -genv UCX_NET_DEVICES=mlx5_2:1 IMB-MPI1 ...

The two launchers here are ReFrame's own ``mpirun-openmpi`` and ``mpirun-intelmpi``
(reframe/core/launchers/mpi.py: ``MpirunOpenMPILauncher``, ``MpirunIntelMPILauncher``,
added in reframe-hpc/reframe pull request 3464 together with the launchers' ``env_vars``,
which these launchers used before: ``mpirun -np N`` and ``env_vars`` as
``-x NAME=value`` / ``-genv NAME value``), with
only what the seeds write differently: ``-n`` for ``-np``; the ranks per node (``-N`` /
``-ppn``) and the host file when the job spans more than one node (plus ``-x PATH -x
LD_LIBRARY_PATH`` for Open MPI); and Intel MPI's ``-genv NAME=value``, as seed 004 sec
2-4 writes it.  A job inside one node gets a plain ``mpirun -n N``, as in the seeds'
single-node runs.

The host file is ``$OCIBENCH_HOSTFILE``, which the partition's ``prepare_cmds`` export
(see :mod:`ocibench.reframe.site`): under Slurm it is written from the allocation
(``scontrol show hostnames``), without a scheduler it is the file a site names.  If it
is unset the job stops with a message that says so, before ``mpirun`` starts.

Importing this module registers the launchers; ``site/reframe_config.py`` imports it.
"""

from __future__ import annotations

from reframe.core.backends import register_launcher
from reframe.core.launchers.mpi import MpirunIntelMPILauncher, MpirunOpenMPILauncher

#: The launchers' registered names, as the configuration refers to them.
OPENMPI = "ocibench-mpirun"
INTELMPI = "ocibench-mpirun-intelmpi"

#: Shell variable that holds the host file of a multi-node job.
HOSTFILE_VAR = "OCIBENCH_HOSTFILE"

_HOSTFILE = (f'"${{{HOSTFILE_VAR}:?no host file for a multi-node run: '
             f'the partition must export {HOSTFILE_VAR}}}"')

#: Variables Open MPI must forward to remote ranks so that they find the module
#: tree's binaries and libraries (seed 000 sec 2-3: ``-x PATH -x LD_LIBRARY_PATH``).
FORWARDED = ("PATH", "LD_LIBRARY_PATH")


def job_nodes(job) -> int:
    """Nodes a job spans: ranks / ranks per node, rounded up; 1 if not stated."""
    per_node = job.num_tasks_per_node
    if not per_node or not job.num_tasks:
        return 1
    return -(-job.num_tasks // per_node)


def _split(cmd: list[str], job) -> tuple[list[str], list[str]]:
    """ReFrame's line as (``mpirun -n N``, what follows: its env_vars options)."""
    head = ["mpirun", "-np", str(job.num_tasks)]
    if cmd[:3] != head:   # ReFrame changed its line: say so rather than write a wrong one
        raise ValueError(f"ReFrame's mpirun launcher wrote {cmd[:3]}, not {head}")
    return ["mpirun", "-n", str(job.num_tasks)], cmd[3:]


@register_launcher(OPENMPI)
class OcibenchMpirun(MpirunOpenMPILauncher):
    """Open MPI: ``mpirun -n N [-N ppn -hostfile H -x PATH -x LD_LIBRARY_PATH] [-x K=V]``."""

    def command(self, job):
        head, env = _split(super().command(job), job)
        if job_nodes(job) > 1:
            head += ["-N", str(job.num_tasks_per_node), "-hostfile", _HOSTFILE]
            for name in FORWARDED:
                if name not in self.env_vars:
                    head += ["-x", name]
        return head + env


@register_launcher(INTELMPI)
class OcibenchMpirunIntel(MpirunIntelMPILauncher):
    """Intel MPI: ``mpirun -n N [-ppn ppn -hostfile H] [-genv K=V]`` (seed 004 sec 2-4)."""

    def command(self, job):
        head, _ = _split(super().command(job), job)
        if job_nodes(job) > 1:
            head += ["-ppn", str(job.num_tasks_per_node), "-hostfile", _HOSTFILE]
        # the seed's -genv NAME=value where ReFrame writes -genv NAME value
        return head + [a for name, value in self.env_vars.items()
                       for a in ("-genv", f"{name}={value}")]
