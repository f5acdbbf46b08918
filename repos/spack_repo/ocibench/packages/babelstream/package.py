# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.babelstream.package import Babelstream as BuiltinBabelstream
from spack_repo.ocibench.amdgpu import ROCmTargets


class Babelstream(BuiltinBabelstream, ROCmTargets):
    """The builtin BabelStream; its amdgpu_target (the HIP model's --offload-arch)
    also takes gfx950 (MI355X), which the pinned builtin ROCmPackage lacks.  Only
    that: delete this file once the pinned spack-packages has gfx950 (ea8584695d)."""
