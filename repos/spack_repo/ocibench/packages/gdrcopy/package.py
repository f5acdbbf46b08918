# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

from spack_repo.builtin.packages.gdrcopy.package import Gdrcopy as BuiltinGdrcopy

from spack.package import *


class Gdrcopy(BuiltinGdrcopy):
    """GDRCopy without the unit-test framework its releases no longer use.

    The builtin builds the library and the tools (`make lib exes`, installed with
    `lib_install exes_install`: gdrcopy_sanity, _copybw, _copylat, _apiperf, _pplat
    and the short names sanity, copybw, ...) and never the gdrdrv kernel module,
    which is the node's (gpu-with-ubuntu sec 3-1 loads it by a service).  Only its
    `depends_on("check")` is wrong for the version the tech tip builds (2.5.1)."""

    # libcheck: tests/sanity.cpp used it up to 2.3 and tests/common.hpp still
    # included check.h in 2.4; gdrcopy 2.5 runs its sanity tests on a test suite of
    # its own (tests/testsuites/, upstream commit 8f61796 "fix tests compilation
    # without check"), and 2.5.1's tests/Makefile links -lcuda -lpthread -ldl
    # -lgdrapi only.  The builtin requires check for every version, which costs an
    # extra package (and, offline, a source) for nothing.
    depends_on("check", when="@:2.4")


def _drop_inherited_check(pkg_cls):
    """Remove the builtin's unconditional depends_on("check"); the conditional one
    above stays.  Spack has no directive that retracts a parent's directive, and each
    package class has its own tables (see the stream override's _drop_dependencies)."""
    for when in list(pkg_cls.dependencies):
        if when == Spec() and "check" in pkg_cls.dependencies[when]:
            del pkg_cls.dependencies[when]["check"]
            if not pkg_cls.dependencies[when]:
                del pkg_cls.dependencies[when]


_drop_inherited_check(Gdrcopy)
