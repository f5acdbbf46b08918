# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage
from spack_repo.ocibench.amdgpu import ROCmTargets

from spack.package import *


class Perftest(AutotoolsPackage, ROCmTargets):
    """perftest: the RDMA verbs micro-benchmarks (ib_write_bw, ib_write_lat, ...).

    OCI's multi-node health checks (oracle-quickstart/oci-hpc v3.1.0,
    playbooks/roles/healthchecks/files/multi_node_active_healthcheck.py) run
    `ib_write_bw -F -q 2 -x 3 --report_gbits` and `ib_write_lat -F -x 3 -s 8 -n 10000`
    on every cluster-network HCA; checks/perftest.py runs the same.  Spack's builtin
    repository has no perftest recipe (spack-packages releases/v2025.11), hence this one.

    Versions are git tags pinned to their commit: the release tarballs GitHub generates
    have no published checksum, a commit hash is one.

    ``+rocm``: ib_write_bw --use_rocm=<GPU> moves GPU memory (configure.ac at the pinned
    commit: --enable-rocm, --with-rocm=<ROCm prefix>), AMD's "GPU to NIC" and "GPU to
    switch to GPU" acceptance runs (ROCm/system-acceptance-docs,
    docs/network/rdma-benchmarking.md).  ROCmTargets: ROCmPackage with gfx950
    (spack_repo.ocibench.amdgpu).
    """

    homepage = "https://github.com/linux-rdma/perftest"
    git = "https://github.com/linux-rdma/perftest.git"

    license("GPL-2.0-only OR BSD-2-Clause")

    version("25.10.0-0.128", tag="25.10.0-0.128",
            commit="8a1d3d7234add23fe006b2ff51d650ff022077a8")

    depends_on("c", type="build")
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("m4", type="build")
    # configure.ac: libibverbs, librdmacm, libibumad (all rdma-core) and libpci
    depends_on("rdma-core")
    depends_on("pciutils+shared")

    def configure_args(self):
        if not self.spec.satisfies("+rocm"):
            return []
        return ["--enable-rocm", f"--with-rocm={self.spec['hip'].prefix}"]

    def autoreconf(self, spec, prefix):
        # A git checkout has no configure; upstream's autogen.sh writes it.
        Executable("./autogen.sh")()
