# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.hwloc.package import Hwloc as BuiltinHwloc
from spack_repo.ocibench.amdgpu import ROCmTargets


class Hwloc(BuiltinHwloc, ROCmTargets):
    """The builtin hwloc; its amdgpu_target also takes gfx950, because Open MPI
    `+rocm amdgpu_target=<t>` depends on `hwloc +rocm amdgpu_target=<t>` (builtin
    openmpi).  Only that: delete this file once the pinned spack-packages has gfx950
    (ea8584695d)."""
