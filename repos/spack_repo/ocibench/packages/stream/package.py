# SPDX-License-Identifier: (Apache-2.0 OR MIT)
# Copyright oci-hpc-bench contributors.

import re

from spack_repo.builtin.packages.stream.package import Stream as BuiltinStream

from spack.package import *

# stream.c's own defaults (NTIMES, OFFSET): passed only when changed, so that the
# compile line of the documented build is the seed's, flag for flag.
DEFAULT_NTIMES = 10
DEFAULT_OFFSET = 0

# Bytes per element for each STREAM_TYPE this recipe offers.
TYPE_SIZES = {"double": 8, "float": 4}

# The x86-64 small code model reaches static data through 32-bit PC-relative
# relocations, so code plus .bss must fit in 2 GiB.  The three static arrays are
# nearly all of it; the headroom covers code and libc data.  Measured with clang
# 14 here: 3 x 89,478,485 doubles (2 GiB - 8 bytes) fails to link with
# "relocation truncated to fit", 3 x 89,000,000 links.
SMALL_MODEL_LIMIT = 2 * 1024**3 - 16 * 1024**2

# Non-temporal store flag per C compiler (Spack package name).  Plain LLVM clang
# and GCC have no such flag (`clang: error: unknown argument: '-fnt-store'`), so
# they are refused rather than built without streaming stores.
NT_STORE_FLAGS = {
    "aocc": "-fnt-store",
    "intel-oneapi-compilers": "-qopt-streaming-stores=always",
    "nvhpc": "-Mnontemporal",
}


def _integer_at_least(name, minimum, meaning):
    """A values= validator that names the variant and the rule it breaks."""

    def validate(value):
        text = str(value)
        # Plain decimal only: the value becomes a C macro, where 010 would be octal.
        if not (re.fullmatch(r"0|[1-9][0-9]*", text) and int(text) >= minimum):
            raise SpackError(
                f"stream: {name}={text!r} is invalid: {meaning} must be a decimal "
                f"integer >= {minimum}"
            )
        return True

    validate.__doc__ = f"{meaning}: a decimal integer >= {minimum}"
    return validate


class Stream(BuiltinStream):
    """STREAM (stream.c only) with validated build options and non-temporal stores.

    Seed 001 builds it on BM.Standard.E5.192 as
      clang -DSTREAM_TYPE=double -DSTREAM_ARRAY_SIZE=430080000 -O3 -mcmodel=large
            -fopenmp -fnt-store stream.c
    which is `stream@5.10 stream_array_size=430080000 +nt_store stream_type=double +openmp
    %aocc@5`
    (in Spack 1.x the compiler comes last: what follows `%aocc@5` constrains aocc)."""

    # The builtin's variant names, with validated values (the builtin takes any string).
    variant(
        "stream_array_size",
        default="10000000",
        values=_integer_at_least("stream_array_size", 1, "STREAM_ARRAY_SIZE (elements per array)"),
        description="STREAM_ARRAY_SIZE: elements in each of the three arrays",
    )
    variant(
        "ntimes",
        default=str(DEFAULT_NTIMES),
        # stream.c silently replaces NTIMES <= 1 by 10, so refuse it instead
        values=_integer_at_least("ntimes", 2, "NTIMES (repetitions of each kernel)"),
        description="NTIMES: repetitions of each kernel; the best one is reported",
    )
    variant(
        "offset",
        default=str(DEFAULT_OFFSET),
        values=_integer_at_least("offset", 0, "OFFSET (elements between arrays)"),
        description="OFFSET: extra elements that shift the relative alignment of the arrays",
    )
    variant(
        "stream_type",
        default="double",
        values=tuple(TYPE_SIZES),
        multi=False,
        description="STREAM_TYPE: element type of the arrays",
    )
    variant("openmp", default=True, description="Build with OpenMP (one thread per core)")
    variant(
        "nt_store",
        default=False,
        description="Non-temporal (streaming) stores with the compiler's own flag",
    )

    requires(
        *(f"%c={compiler}" for compiler in NT_STORE_FLAGS),
        policy="one_of",
        when="+nt_store",
        msg="+nt_store needs a C compiler with a non-temporal-store flag: "
        + ", ".join(f"{c} ({flag})" for c, flag in NT_STORE_FLAGS.items())
        + "; GCC and LLVM clang have none",
    )

    def stream_cflags(self):
        """The compile flags of stream.c, in the order seed 001 writes them."""
        spec = self.spec
        flags = [
            f"-DSTREAM_TYPE={spec.variants['stream_type'].value}",
            f"-DSTREAM_ARRAY_SIZE={spec.variants['stream_array_size'].value}",
        ]
        ntimes, offset = int(spec.variants["ntimes"].value), int(spec.variants["offset"].value)
        if ntimes != DEFAULT_NTIMES:
            flags.append(f"-DNTIMES={ntimes}")
        if offset != DEFAULT_OFFSET:
            flags.append(f"-DOFFSET={offset}")
        flags.append("-O3")
        if self.static_array_bytes() >= SMALL_MODEL_LIMIT:
            flags.append("-mcmodel=large")
        if spec.satisfies("+openmp"):
            flags.append(self["c"].openmp_flag)
        if spec.satisfies("+nt_store"):
            flags.append(self._nt_store_flag())
        return flags

    def static_array_bytes(self):
        """Bytes of the three static arrays a[], b[], c[] of STREAM_ARRAY_SIZE+OFFSET."""
        variants = self.spec.variants
        elements = int(variants["stream_array_size"].value) + int(variants["offset"].value)
        return 3 * elements * TYPE_SIZES[variants["stream_type"].value]

    def _nt_store_flag(self):
        compiler = self.spec["c"].name
        if compiler not in NT_STORE_FLAGS:  # requires() above makes this unreachable
            raise InstallError(f"stream +nt_store: {compiler} has no non-temporal-store flag")
        return NT_STORE_FLAGS[compiler]

    def edit(self, spec, prefix):
        """Nothing to edit: CC and CFLAGS go on the make command line."""

    @property
    def build_targets(self):
        # Only the C benchmark: upstream's Makefile rule is `$(CC) $(CFLAGS) stream.c`.
        return ["stream_c.exe", f"CC={spack_cc}", "CFLAGS=" + " ".join(self.stream_cflags())]

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install("stream_c.exe", prefix.bin)


def _drop_dependencies(pkg_cls, *names):
    """Remove dependencies the builtin declares and this recipe must not have.

    Spack has no directive that retracts a parent's directive.  Each package class
    gets its own directive tables when it is created, so editing ours leaves the
    builtin class untouched.  tests/test_spack_repo.py checks the result through
    `spack spec` and `spack info`.
    """
    table = pkg_cls.dependencies
    for when in list(table):
        for name in names:
            table[when].pop(name, None)
        if not table[when]:
            del table[when]


# No Fortran: only stream.c is built.  The builtin's variants keep their names; this
# class redefines them (validated, and used for the -mcmodel decision).
_drop_dependencies(Stream, "fortran")
