# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

import os

from spack_repo.builtin.packages.osu_micro_benchmarks.package import (
    OsuMicroBenchmarks as BuiltinOsuMicroBenchmarks,
)
from spack_repo.ocibench.amdgpu import ROCmTargets

from spack.package import *

# Benchmark directories under libexec/osu-micro-benchmarks that the seeds' `omb`
# module files put on PATH (seed 000 sec 1, seed 002 sec 2), in their order.
# Not every build installs all of them (xccl/ comes only with +nccl or +rccl, and
# mpi/congestion is new in 7.4), so only the ones present are added.
BENCHMARK_DIRS = (
    "",
    "mpi/collective",
    "mpi/congestion",
    "mpi/one-sided",
    "mpi/pt2pt",
    "mpi/startup",
    "xccl/collective",
    "xccl/pt2pt",
)


class OsuMicroBenchmarks(BuiltinOsuMicroBenchmarks, ROCmTargets):
    """OSU Micro-Benchmarks with the NCCL benchmarks (osu_xccl_*) of seed 000,
    buildable against CUDA 13, with every benchmark directory on PATH."""

    variant(
        "nccl",
        default=False,
        description="Build the NCCL benchmarks (osu_xccl_*) with --enable-ncclomb",
    )
    conflicts(
        "+nccl",
        when="~cuda",
        msg="+nccl needs +cuda: the NCCL benchmarks run on CUDA device buffers",
    )
    depends_on("nccl", when="+nccl")

    # The same benchmarks over RCCL on ROCm device buffers: OMB 7.4's configure.ac has
    # --enable-rcclomb / --with-rccl beside --enable-ncclomb (osu_xccl_* then print
    # "#Using RCCL" and "# OSU RCCL-ROCM ...").  The builtin recipe has neither.
    variant(
        "rccl",
        default=False,
        description="Build the RCCL benchmarks (osu_xccl_*) with --enable-rcclomb",
    )
    conflicts(
        "+rccl",
        when="~rocm",
        msg="+rccl needs +rocm: the RCCL benchmarks run on ROCm device buffers",
    )
    conflicts("+rccl", when="+nccl", msg="OMB builds the xccl benchmarks for one library")
    depends_on("rccl", when="+rccl")

    # CUDA 13 changed cudaMemPrefetchAsync(ptr, n, int device, stream) to
    # (ptr, n, cudaMemLocation, flags, stream); the patch keeps the old call for
    # CUDA < 13.  Checked against 7.4; 7.5 and 7.5.1 are assumed to carry the same
    # call (see docs/spack-repo.md).
    patch("cuda13-mem-prefetch.patch", when="@7.4:7.5.1 ^cuda@13:")

    @property
    def build_directory(self):
        # Configure out of the sources (a VPATH build), one directory per spec, as
        # Spack's CMake builds do: an in-source build of a `spack develop` tree (the
        # air-gapped path, docs/spack-env.md) is shared by every spec built from it,
        # and make would keep objects compiled for another spec.
        return join_path(self.stage.path, f"spack-build-{self.spec.dag_hash(7)}")

    def configure_args(self):
        return super().configure_args() + self.nccl_configure_args()

    def nccl_configure_args(self):
        if self.spec.satisfies("+rccl"):
            return ["--enable-rcclomb", f"--with-rccl={self.spec['rccl'].prefix}"]
        if not self.spec.satisfies("+nccl"):
            return []
        return ["--enable-ncclomb", f"--with-nccl={self.spec['nccl'].prefix}"]

    def setup_build_environment(self, env: EnvironmentModifications) -> None:
        super().setup_build_environment(env)
        if self.spec.satisfies("+cuda"):
            # configure links -lcuda, the driver's library, which a build host
            # without a GPU driver (CI, login nodes) lacks.  Fall back to the
            # toolkit's stub, as the builtin openmpi@5 does: it carries the soname
            # libcuda.so.1, so the benchmarks load the driver's library at run time.
            stubs = join_path(self.spec["cuda"].libs.directories[0], "stubs")
            env.append_path("LIBRARY_PATH", stubs)
        if self.spec.satisfies("%nvhpc"):
            # Seed 000 edits the generated libtool to put NVHPC's compilers/bin on
            # PATH: libtool runs commands that call NVHPC tools by bare name.  In a
            # Spack build that directory is never on PATH (the nvhpc recipe only
            # sets LIBRARY_PATH/LD_LIBRARY_PATH for dependents), so add it for the
            # whole build.  Appended, not prepended: NVHPC's compilers/bin also has
            # an nvcc, which must not shadow the one of the `cuda` dependency.
            nvhpc_bin = os.path.dirname(self.spec["nvhpc"].package.cc)
            env.append_path("PATH", nvhpc_bin)

    def setup_run_environment(self, env: EnvironmentModifications) -> None:
        # Replaces the builtin's four mpi/ directories with the seeds' full list.
        root = join_path(self.prefix.libexec, "osu-micro-benchmarks")
        # prepend in reverse, so that PATH reads in the module file's order
        for sub in reversed(BENCHMARK_DIRS):
            path = join_path(root, sub) if sub else root
            if os.path.isdir(path):
                env.prepend_path("PATH", path)
