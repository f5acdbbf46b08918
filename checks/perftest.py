"""perftest ib_write_bw and ib_write_lat between two nodes, per cluster-network HCA, as
oci-hpc's multi-node health check runs them (oracle-quickstart/oci-hpc v3.1.0,
playbooks/roles/healthchecks/files/multi_node_active_healthcheck.py, run_ib_write_bw and
run_ib_write_lat)::

    server:  ib_write_bw -F -q 2 -x 3 --report_gbits -d mlx5_0
    client:  ib_write_bw -F -q 2 -x 3 --report_gbits -d mlx5_0 <server>
    server:  ib_write_lat -F -x 3 -s 8 -n 10000 -d mlx5_0
    client:  ib_write_lat -F -x 3 -s 8 -n 10000 -d mlx5_0 <server>

with ``-x`` the shape's RoCE GID index (``network.gid_index``; OCI's 3 where the shape
gives none, 1 on BM.GPU.MI355X.8's Pollara NICs), both over ssh, the server started a
second before the client, three attempts of which
the best counts (OCI retries a failed attempt up to three times).  One test case per HCA
of the shape's ``network.rdma_nics`` (OCI's NCCL_IB_HCA list); the HCA index is the
parameter because the device names differ between shapes.  The first host of the job's
host file is the server, the second the client.

On a machine without RDMA devices (/sys/class/infiniband empty) or a shape without
``network.rdma_nics`` the ``perftest`` environment is unavailable and every case SKIPS with
that reason (ocibench.reframe.site.rdma_unavailable).
"""

from __future__ import annotations

import glob
import shlex

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, performance_function, run_after, variable

from ocibench import benchmarks, shapes
from ocibench.reframe.launchers import HOSTFILE_VAR
from ocibench.reframe.site import built_shapes

from .base import OcibenchCheck, systems_for

#: Attempts per HCA; the best counts (oci-hpc: `for i in range(3)`).
ATTEMPTS = 3
#: Seconds the server gets to listen before the client connects (oci-hpc: time.sleep(1)).
SERVER_START_S = 1


def max_hcas() -> int:
    """The most cluster-network HCAs any shape has: the range of the HCA parameter."""
    counts = [len(shape.hcas) for shape in built_shapes() if not shape.is_local]
    return max(counts + [len(glob.glob("/sys/class/infiniband/*")), 1])


def pair_script(exe: str, options: list[str], attempts: int = ATTEMPTS) -> list[str]:
    """Shell lines: for each attempt, the server on the first host, the client on the
    second, both over ssh as OCI's check runs them."""
    opts = " ".join(shlex.quote(o) for o in options)
    return [
        f'hosts=$(awk \'{{print $1}}\' "${{{HOSTFILE_VAR}:?no host file for a two-node run: '
        f'the partition must export {HOSTFILE_VAR}}}" | uniq | head -n 2)',
        "server=$(echo \"$hosts\" | sed -n 1p); client=$(echo \"$hosts\" | sed -n 2p)",
        '[ -n "$client" ] || '
        '{ echo "ocibench: the host file names fewer than 2 hosts" >&2; exit 1; }',
        f"exe=$(command -v {exe}) || {{ echo 'ocibench: {exe} is not on PATH' >&2; exit 1; }}",
        f"for attempt in $(seq {attempts}); do",
        f'  ssh "$server" "$exe {opts}" > /dev/null 2>&1 &',
        f"  sleep {SERVER_START_S}",
        f'  ssh "$client" "$exe {opts} $server" || exit $?',
        "  wait",
        "done",
    ]


def with_gid_index(options: list[str], gid_index: int) -> list[str]:
    """``options`` with the value of ``-x`` (perftest's GID index) set to ``gid_index``."""
    at = options.index("-x") + 1
    return options[:at] + [str(gid_index)] + options[at + 1:]


class PerftestCheck(OcibenchCheck):
    """One HCA of the shape, two nodes, OCI's options."""

    hca = parameter(list(range(max_hcas())))
    device = variable(str, value="")
    #: One client and one server node, as oci-hpc's check pairs them.
    nodes = variable(int, value=2)

    tags = {"ocibench", "perftest", "rdma"}

    @run_after("init")
    def _two_node_systems(self):
        # `local` by name: without the multinode feature it must still list the case
        # and SKIP with the reason (no RDMA device here), never drop it silently.
        self.valid_systems = systems_for(2)

    def configure(self, extras):
        hcas = extras.get("rdma_hcas") or []
        self.skip_if(self.hca >= len(hcas),
                     f"{extras.get('shape')} has {len(hcas)} cluster-network HCA(s) "
                     f"(network.rdma_nics); none at index {self.hca}")
        self.device = hcas[self.hca]
        self.need_nodes(self.nodes)
        self.num_tasks, self.num_tasks_per_node = 2, 1
        self.job.launcher = getlauncher("local")()
        self.executable = "true"   # the pair script below is the run
        # oci-hpc's options (the registry entry's command) with the shape's GID index
        # (network.gid_index: OCI's -x 3 on mlx5, 1 on BM.GPU.MI355X.8's Pollara NICs),
        # then the HCA and its port
        options = with_gid_index(list(benchmarks.spec(self.check_name).command[1:]),
                                 extras.get("gid_index", shapes.OCI_GID_INDEX))
        self.prerun_cmds = pair_script(self.check_name,
                                       options + ["-d", self.device, "-i", "1"])

    def run_params(self):
        return {**self.figure_params(), "device": self.device, "attempts": ATTEMPTS}


@rfm.simple_test
class ib_write_bw(PerftestCheck):
    check_name = "ib_write_bw"
    descr = "perftest ib_write_bw between 2 nodes per HCA, BW peak at 64 KiB, best of 3"

    @performance_function("Gb/s")
    def bandwidth(self, key=None):
        return self._value("bandwidth", key)


@rfm.simple_test
class ib_write_lat(PerftestCheck):
    check_name = "ib_write_lat"
    descr = "perftest ib_write_lat between 2 nodes per HCA, t_avg at 8 B, best of 3"
