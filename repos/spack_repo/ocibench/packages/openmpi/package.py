# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.openmpi.package import Openmpi as BuiltinOpenmpi

from spack.package import *


class Openmpi(BuiltinOpenmpi):
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
