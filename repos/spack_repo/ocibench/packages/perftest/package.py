# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Perftest(AutotoolsPackage):
    """perftest: the RDMA verbs micro-benchmarks (ib_write_bw, ib_write_lat, ...).

    OCI's multi-node health checks (oracle-quickstart/oci-hpc v3.1.0,
    playbooks/roles/healthchecks/files/multi_node_active_healthcheck.py) run
    `ib_write_bw -F -q 2 -x 3 --report_gbits` and `ib_write_lat -F -x 3 -s 8 -n 10000`
    on every cluster-network HCA; checks/perftest.py runs the same.  Spack's builtin
    repository has no perftest recipe (spack-packages releases/v2025.11), hence this one.

    Versions are git tags pinned to their commit: the release tarballs GitHub generates
    have no published checksum, a commit hash is one.
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

    def autoreconf(self, spec, prefix):
        # A git checkout has no configure; upstream's autogen.sh writes it.
        Executable("./autogen.sh")()
