# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

"""The AMD GPU targets our recipes accept beyond the pinned builtin ``ROCmPackage``.

spack-packages releases/v2025.11 (the pinned builtin repository) has no
``amdgpu_target=gfx950``: gfx950 is the LLVM target of AMD Instinct MI350X/MI355X
(CDNA 4), BM.GPU.MI355X.8's GPUs.  Upstream added it on develop in ea8584695d
("rocm.py: add a few missing amd_gpu_target values (#3408)", 2026-02-17).  Until
the pin moves past that commit, every recipe the MI355X stack builds with ``+rocm``
mixes ``ROCmTargets`` in after its builtin class; once the pin has it, this module
and the overrides that exist only for it are deleted (tests/test_spack_repo.py
then fails on them as dead weight).
"""

from spack_repo.builtin.build_systems.rocm import ROCmPackage

from spack.package import any_combination_of, depends_on, variant

#: What ea8584695d adds that the CDNA shapes need; only gfx950 (its other values are
#: consumer GPUs no OCI shape has).
ADDED_TARGETS = ("gfx950",)


class ROCmTargets(ROCmPackage):
    """``ROCmPackage`` whose ``amdgpu_target`` also takes gfx950.

    Mixed in after the builtin class (``class Ucc(BuiltinUcc, ROCmTargets)``): Spack
    runs the builtin's directives first and this variant last, and a later variant of
    the same name and condition replaces the earlier one (spack.directives.variant).
    """

    amdgpu_targets = ROCmPackage.amdgpu_targets + tuple(
        t for t in ADDED_TARGETS if t not in ROCmPackage.amdgpu_targets)

    # The builtin's definition (build_systems/rocm.py), with the wider values.
    variant(
        "amdgpu_target",
        description="AMD GPU architecture",
        values=any_combination_of(*amdgpu_targets),
        sticky=True,
        when="+rocm",
    )

    # The first ROCm whose compiler targets gfx950 is 7.0.0: AMD's compatibility
    # matrix for ROCm 7.0.0 (ROCm/ROCm docs/compatibility/compatibility-matrix.rst,
    # https://rocm.docs.amd.com/en/docs-7.0.0/compatibility/compatibility-matrix.html)
    # lists "gfx950" under 7.0.0 and not under 6.4.3, with llvm-project 20.0.0.25314
    # against 6.4.3's 19.0.0.25224.  Spack's llvm-amdgpu takes ROCm's version, as the
    # builtin's minimums for gfx940..gfx1103 do (build_systems/rocm.py).
    depends_on("llvm-amdgpu@7.0.0:", when="amdgpu_target=gfx950")
