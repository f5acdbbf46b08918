# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.ucc.package import Ucc as BuiltinUcc
from spack_repo.ocibench.amdgpu import ROCmTargets


class Ucc(BuiltinUcc, ROCmTargets):
    """The builtin UCC; its amdgpu_target also takes gfx950 (BM.GPU.MI355X.8's
    `ucc +rocm +rccl`), which the pinned builtin ROCmPackage lacks.  Only that:
    delete this file once the pinned spack-packages has gfx950 (ea8584695d)."""
