# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.openmpi.package import Openmpi as BuiltinOpenmpi
from spack_repo.ocibench.amdgpu import ADDED_TARGETS, ROCmTargets

from spack.package import *


class Openmpi(BuiltinOpenmpi, ROCmTargets):
    """Open MPI whose CUDA support reaches its UCX and UCC transports.

    The UCX-based build of the OCI tutorial (seed 002 sec 1 and its note 2) is
    otherwise a matter of variants -- fabrics=ucx, schedulers=slurm, PMIx, +cuda --
    which the environment sets per shape (docs/spack-repo.md)."""

    # With fabrics=ucx, UCX (pml ucx) moves the device buffers of a CUDA-aware
    # run such as `osu_latency -d cuda D D` (seed 000 sec 2), so UCX itself needs
    # CUDA support (Open MPI 5.0.8 docs, tuning-apps/networking/cuda: "it is
    # important to ensure that UCX itself is built with CUDA support").  The
    # builtin states this for ROCm only.
    depends_on("ucx +cuda", when="+cuda fabrics=ucx")
    # Same for collectives offloaded to UCC (the builtin has `ucc +rocm` only).
    depends_on("ucc +cuda", when="+cuda fabrics=ucc")

    # amdgpu_target=gfx950 (ROCmTargets, spack_repo.ocibench.amdgpu): the builtin's
    # hwloc dependency per target, for the targets it does not know yet.
    for _target in ADDED_TARGETS:
        depends_on(f"hwloc +rocm amdgpu_target={_target}",
                   when=f"+rocm ~internal-hwloc amdgpu_target={_target}")

    # Open MPI 5 gives pml ucx its priority (51) only where UCX reports a device
    # that matches opal_common_ucx_devices, "mlx*" by default; elsewhere it gets 19,
    # below ob1's 20 (5.0.7: opal/mca/common/ucx/common_ucx.c and
    # ompi/mca/pml/ucx/pml_ucx_component.c).  On a node with NVLink-joined GPUs and
    # no Mellanox NIC (the lent 2 x H200 machine, docs/gpu-results.md) Open MPI
    # picked ob1 ("selected ob1 best priority 20"), not the UCX this build is for.
    # The site default goes in the file Open MPI reads at start-up; `--mca pml` or
    # OMPI_MCA_pml still override it.
    @run_after("install", when="fabrics=ucx")
    def make_ucx_the_pml(self):
        mkdirp(self.prefix.etc)
        with open(join_path(self.prefix.etc, "openmpi-mca-params.conf"), "a") as conf:
            conf.write("\n# oci-hpc-bench (openmpi fabrics=ucx): UCX moves every message,\n"
                       "# also on nodes without a Mellanox NIC (docs/spack-repo.md).\n"
                       "pml = ucx\n")
