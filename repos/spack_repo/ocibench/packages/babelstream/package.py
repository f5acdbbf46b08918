# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

# The builtin recipe's build logic lives in its builders, not its package class: Spack
# takes a package's builder from the package's own module by name
# (spack.builder.get_builder_class: `CMakeBuilder`, `MakefileBuilder`), never from a
# base class's module.  Without these two names here, our subclass got Spack's default
# CMake builder: no -DMODEL, and the build ran BabelStream's Fortran Makefile instead.
from spack_repo.builtin.packages.babelstream.package import Babelstream as BuiltinBabelstream
from spack_repo.builtin.packages.babelstream.package import (  # noqa: F401
    CMakeBuilder,
    MakefileBuilder,
)
from spack_repo.ocibench.amdgpu import ROCmTargets


class Babelstream(BuiltinBabelstream, ROCmTargets):
    """The builtin BabelStream; its amdgpu_target (the HIP model's --offload-arch)
    also takes gfx950 (MI355X), which the pinned builtin ROCmPackage lacks.  Only
    that: delete this file once the pinned spack-packages has gfx950 (ea8584695d)."""
