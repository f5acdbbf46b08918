# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.nccl_tests.package import NcclTests as BuiltinNcclTests

from spack.package import *


class NcclTests(BuiltinNcclTests):
    """nccl-tests as seed 003 builds them (MPI=1), with or without a cuda_arch."""

    @property
    def spack_build_dir(self):
        # One per spec and outside the sources, as Spack's CMake builds do.  The
        # Makefile's default, build/ in the sources, is shared by every spec built
        # from one `spack develop` tree (the air-gapped path, docs/spack-env.md):
        # seen in CI, an install "built" in 0.05 s from another spec's binaries.
        return join_path(self.stage.path, f"spack-build-{self.spec.dag_hash(7)}")

    @property
    def build_targets(self):
        targets = super().build_targets + [f"BUILDDIR={self.spack_build_dir}"]
        if self.spec.satisfies("+mpi"):
            # The Makefile looks for mpi.h only in $(MPI_HOME)/include, which an MPI
            # of the OS does not have (Debian: /usr/lib/x86_64-linux-gnu/openmpi/
            # include).  Compiling through the MPI's C++ wrapper (nvcc -ccbin
            # $(CXX)), as OMB's build does, finds it wherever it is.
            targets.append(f"CXX={self.spec['mpi'].mpicxx}")
        return targets

    def setup_build_environment(self, env: EnvironmentModifications) -> None:
        # The builtin always exports NVCC_GENCODE from cuda_arch; with the default
        # cuda_arch=none that is `arch=compute_none,code=sm_none`, which nvcc
        # rejects.  Without a cuda_arch, leave NVCC_GENCODE unset: src/common.mk
        # then picks architectures that the CUDA in use supports (for CUDA 13:
        # sm_80, 90, 100, 120 -- CUDA 13 dropped sm_70 and older).
        cuda_arch = self.spec.variants["cuda_arch"].value
        if "none" not in cuda_arch:
            env.set("NVCC_GENCODE", " ".join(self.cuda_flags(cuda_arch)))

    def install(self, spec, prefix):
        # The builtin installs ./build; the binaries are in spack_build_dir.
        mkdirp(prefix.bin)
        install_tree(self.spack_build_dir, prefix.bin)
