# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.transferbench.package import (
    Transferbench as BuiltinTransferbench,
)

from spack.package import *


class Transferbench(BuiltinTransferbench):
    """The builtin TransferBench, with its ROCm 7.2.0 release: OCI's image for
    BM.GPU.MI355X-v1.8 has ROCm 7.2, and the pinned builtin recipe stops at 7.0.2, whose
    hip, hsa-rocr-dev and rocm-cmake it pins to 7.0.2.  The version and its checksum are
    spack-packages' own (releases/v2026.02, packages/transferbench/package.py); delete
    this file once the pinned spack-packages has 7.2.0."""

    version("7.2.0", sha256="4be9d66044827d7b1950b4fd7ce50913d0926822e88e3441f472ca6a62086a15")

    # The pinned recipes know no hip, hsa-rocr-dev or rocm-cmake 7.2 (`spack audit`
    # refuses a dependency that no known version satisfies), and these are the image's
    # externals, never built: the dependencies are unversioned, and the conflicts keep
    # 7.2.0 off an older ROCm (BM.GPU.MI355X.8's 7.0.2 would otherwise take it, the
    # newest version, over its own).
    depends_on("hip", when="@7.2.0")
    depends_on("rocm-cmake", when="@7.2.0")
    depends_on("hsa-rocr-dev", when="@7.2.0")
    for _dependency in ("hip", "rocm-cmake", "hsa-rocr-dev"):
        conflicts(f"^{_dependency}@:7.1", when="@7.2.0",
                  msg="TransferBench 7.2.0 is ROCm 7.2's: it needs that ROCm")
