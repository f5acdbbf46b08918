"""Derive each shape's Spack configuration scope from its shape file.

One Spack environment (``spack.yaml`` at the repository root) serves every shape.
Its shape-independent layers are committed (``packages.yaml``, ``modules.yaml``);
the shape-dependent layer is generated here from ``site/shapes/<shape>.yaml`` and
nothing else, so a hardware or image fact is stated once (spack-stack style:
common layer + site layer, the site layer derived by code instead of written).

The generated layer of a shape holds:

* ``packages:all:require: target=<cpu.spack_target>``;
* the compilers and externals of the OCI image (``software.compilers`` and
  ``software.externals``) as non-buildable Spack externals, and the language
  virtuals (c, cxx, fortran) restricted to those compilers;
* one requirement per package of ``software.stack``: its version, plus the
  variants the shape calls for (:func:`_stack_rules`);
* the definition ``ocibench_specs`` that ``spack.yaml``'s ``specs`` lists (Spack
  reads user specs only from the top-level manifest, but ``definitions`` from
  every scope: spack/environment/environment.py ``_sync_speclists``);
* ``modules:default:roots:lmod`` = :func:`ocibench.paths.module_root` and the
  core compilers of the Lmod hierarchy;
* ``env_vars`` that ``spack env activate .`` exports (the shape, ReFrame's
  configuration, this checkout's ``bin/`` on ``PATH`` and ``src/`` on ``PYTHONPATH`` for
  the ``ocibench`` command, the module tree on ``MODULEPATH``).
  They hold absolute paths of this checkout, which is why they live in this
  git-ignored generated layer: Spack does not expand ``$env`` in ``env_vars``.

Decide, then act: :func:`gather` reads what the scope depends on of this machine and
its files (:class:`Facts`), :func:`decide` makes the scope from those facts alone (no
Spack, no machine: what a shape or a vendor row asks of Spack can be read in a test),
and :func:`write` writes the files, once every scope asked for is decided.  What GPU
variants each recipe takes is the vendor row's (``spack_recipes``), nothing here.

A shape whose file lists no compilers (``local``, and any shape that describes
"whatever this machine has") is *machine-described*: its compilers and externals
are what ``spack compiler find`` / ``spack external find`` report on this machine
at set-up time (``make setup``), cached in ``site/spack/generated/machine.json``
(ocibench.node.machine looks; this module derives and renders).

Optional shape-file field read here (additive to the schema in ocibench.shapes)::

    software:
      build:                      # how a seed builds a stack package on this shape
        stream:
          compiler: aocc@5.0.0    # a compiler of software.compilers; default: the first
          variants: stream_array_size=430080000 +nt_store stream_type=double +openmp
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ocibench import accelerators, capabilities, paths, shapes
from ocibench.node.machine import (
    DETECT_COMPILERS,
    Machine,
    detect_machine,
    detect_tools,
    detect_xpmem,
    driver_stub,
    has_device,
    has_driver,
)
from ocibench.paths import REPO_ROOT, SITE_DIR

#: Where `make setup` writes the generated layer (git-ignored).
GENERATED_DIR = SITE_DIR / "spack" / "generated"
#: Per-shape scopes: spack.yaml includes shapes/${OCIBENCH_SHAPE}.yaml.
SHAPES_SUBDIR = "shapes"
#: The scope spack.yaml includes when OCIBENCH_SHAPE is unset: points at the detected shape.
DETECTED_FILE = "detected.yaml"
#: Develop specs per shape (scripts/mirror-from-checkouts.sh); optional.  They live in
#: the per-user cache beside the sources they name, not in the checkout, so every
#: clone on this machine (CI's fresh clone too) builds from the same sources.
LOCAL_DEVELOP_DIR = paths.cache_dir() / "develop"
#: The definition that spack.yaml's `specs:` references.
SPECS_DEFINITION = "ocibench_specs"

#: Detected externals the environment must use, never rebuild (the machine's MPI
#: is "the image's MPI" of a machine-described shape; every vendor's toolkit and
#: collective library come with the driver).
NOT_BUILDABLE = {"openmpi", "rdma-core", "slurm", "hwloc"} | accelerators.image_packages()

#: The compiler executables of each compiler package, relative to its prefix,
#: for shape files that give a compiler as {spec, prefix} only.
COMPILER_EXES = {
    "gcc": {"c": "bin/gcc", "cxx": "bin/g++", "fortran": "bin/gfortran"},
    "aocc": {"c": "bin/clang", "cxx": "bin/clang++", "fortran": "bin/flang"},
    "llvm": {"c": "bin/clang", "cxx": "bin/clang++"},
    # ROCm's LLVM (/opt/rocm-<version>/llvm): rccl-tests requires("%cxx=llvm-amdgpu")
    "llvm-amdgpu": {"c": "bin/amdclang", "cxx": "bin/amdclang++"},
    "intel-oneapi-compilers": {"c": "bin/icx", "cxx": "bin/icpx", "fortran": "bin/ifx"},
    "nvhpc": {"c": "bin/nvc", "cxx": "bin/nvc++", "fortran": "bin/nvfortran"},
}
#: MPI implementations a stack may name; each MPI-using benchmark is built once per MPI.
MPI_PACKAGES = ("openmpi", "intel-oneapi-mpi")
#: Built only for their vendor's GPUs (nccl-tests, rccl-tests: see _collective_tests).
GPU_ONLY = tuple(a.collective_tests_package for a in accelerators.VENDORS.values())
#: The versions OCI's tech tips build under Open MPI 5.0.8: "gpu-with-ubuntu" sec 3-1
#: (GPU shapes: GDRCopy 2.5.1, UCX 1.19.0, UCC 1.5.0) and "build-openmpi" sec 1-1-5
#: and 1-1-6 (BM.Optimized3.36: UCX 1.19.0, UCC 1.5.0); ocitutorials
#: content/hpc/tech-knowhow/<tip>/index.md.
TECH_TIP_VERSIONS = {"ucx": "1.19.0", "gdrcopy": "2.5.1", "ucc": "1.5.0"}


class SpackConfigError(shapes.ShapeError):
    """A scope that cannot be derived, with the reason (one line)."""


# --------------------------------------------------------------------------- derivation


def is_machine_described(shape: shapes.Shape) -> bool:
    """True when the shape file leaves compilers to the machine (local and the like)."""
    return not shape.data["software"]["compilers"]


def _compiler_entry(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    spec, prefix = item["spec"], item["prefix"]
    name = re.split(r"[@\s~+%]", spec, maxsplit=1)[0]
    if name not in COMPILER_EXES:
        raise SpackConfigError(
            f"compiler {spec!r}: unknown compiler package; known: {', '.join(COMPILER_EXES)}")
    if name == "gcc" and "languages" not in spec:
        spec += " languages:='c,c++,fortran'"
    exes = item.get("compilers") or {
        lang: str(Path(prefix) / rel) for lang, rel in COMPILER_EXES[name].items()}
    return name, {"spec": spec, "prefix": prefix, "extra_attributes": {"compilers": exes}}


def _external_entries(name: str, value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, dict) or "spec" not in item or "prefix" not in item:
            raise SpackConfigError(f"software.externals.{name}: each entry needs spec and prefix")
        keys = ("spec", "prefix", "extra_attributes", "modules")
        out.append({k: item[k] for k in keys if k in item})
    return out


@dataclass
class Facts:
    """Everything derive() decides from, gathered from the shape (and the machine)."""

    shape: shapes.Shape
    compilers: list[tuple[str, dict[str, Any]]]  # (package, external entry), default first
    externals: dict[str, list[dict[str, Any]]]
    #: The GPUs' vendor (ocibench.accelerators), or None: nothing is built for GPUs.
    accel: accelerators.Accelerator | None
    arch: str | None
    arch_why: str
    #: software.stack: package -> version ("any" or none: the recipe's preferred one).
    stack: dict[str, Any]
    slurm: bool
    rdma: bool
    mpi_external: bool  # the MPI is the image's/machine's, not built by Spack
    #: machine-described, the toolkit but no driver: ocibench.node.machine.driver_stub
    stub_dir: Path | None = None
    #: What UCX is built to use (gdrdrv, xpmem, cma -> True/False): the shape's
    #: ``capabilities:``, or on a machine-described shape what this node has
    #: (:func:`_build_capabilities`).
    build_caps: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # for the generated file's header
    #: Build tools Spack found on this machine (ocibench.node.machine.detect_tools).
    tools: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Where the shape's Lmod tree goes (ocibench.paths.module_root) and the source
    #: mirror and build cache found (:func:`_mirrors`).
    module_root: Path = Path()
    mirrors: dict[str, Any] = field(default_factory=dict)


def gather(shape: shapes.Shape, machine: Machine | None, root: Path = Path("/"),
           tools: dict[str, list[dict[str, Any]]] | None = None) -> Facts:
    """The facts of one shape: everything :func:`decide` reads of this machine, its
    files and its environment (``root``: the filesystem root that the probes of a
    machine-described shape read, ``/``; a fake tree in the tests).  A shape whose scope
    cannot be derived is refused here (SpackConfigError), before anything is written."""
    sw = shape.data["software"]
    if is_machine_described(shape):
        if machine is None:
            raise SpackConfigError(f"{shape.name}: machine-described shape needs machine detection")
        compilers = []
        # gcc first: it is the only detected compiler with Fortran (openmpi +fortran).
        for name in sorted(machine.compilers, key=lambda n: DETECT_COMPILERS.index(n)):
            compilers += [(name, e) for e in machine.compilers[name]]
        externals = {n: e for n, e in machine.externals.items() if n not in DETECT_COMPILERS}
        # Declared externals of a machine-described shape still apply (and win).
        for name, value in (sw.get("externals") or {}).items():
            externals[name] = _external_entries(name, value)
    else:
        compilers = [_compiler_entry(c) for c in sw["compilers"]]
        externals = {n: _external_entries(n, v) for n, v in (sw.get("externals") or {}).items()}
    if not compilers:
        raise SpackConfigError(
            f"{shape.name}: no compiler (none declared, none found on this machine)")
    gpus = shape.gpus
    mpi_external, mpi_note = _machine_mpi(shape, externals)
    if mpi_note:
        externals.pop("openmpi", None)  # built instead: see _machine_mpi
    if is_machine_described(shape) and "openmpi" in (sw.get("stack") or {}) \
            and not externals.get("openmpi") and not gpus:
        # The local shape builds against this machine's Open MPI (docs/spack-env.md).
        # Without it Spack would plan Open MPI and some 40 dependencies from source,
        # which fails offline on a download that never names the missing MPI.
        raise SpackConfigError(_no_machine_mpi(shape.name, machine))
    accel, arch, why = _accelerator(shape, externals)
    stub = None
    if accel and accel.driver_stub and is_machine_described(shape) \
            and not has_driver(accel.driver_stub.library):
        stub = driver_stub(accel, externals[accel.toolkit_packages[0]][0]["prefix"])
    if is_machine_described(shape) and "xpmem" not in externals:
        found = detect_xpmem(root)
        if found:
            externals["xpmem"] = [found]
    return Facts(
        shape=shape,
        compilers=compilers,
        externals=externals,
        accel=accel,
        arch=arch,
        arch_why=why,
        stack=dict(sw.get("stack") or {}),
        slurm=shape.data["scheduler"] == "slurm",
        rdma=shapes.rdma_network(shape.data) is not None,
        mpi_external=mpi_external,
        stub_dir=stub,
        build_caps=_build_capabilities(shape, accel, root),
        notes=[mpi_note] if mpi_note else [],
        tools=dict(tools or {}),
        module_root=paths.module_root(shape.name),
        mirrors=_mirrors(),
    )


def _accelerator(shape: shapes.Shape, externals: dict[str, list[dict[str, Any]]]
                 ) -> tuple[accelerators.Accelerator | None, str | None, str]:
    """(the vendor built for, its target, why that target).

    A GPU shape: its ``gpus.vendor`` and ``gpus.arch``, and the image must provide the
    vendor's toolkit.  A machine-described shape without GPUs whose machine has a
    toolkit (a build host): compile-only, for the vendor's default target."""
    gpus = shape.gpus
    if gpus:
        accel = accelerators.of(gpus)
        toolkit = accel.toolkit_packages[0]
        if not externals.get(toolkit):
            raise SpackConfigError(f"{shape.name}: a GPU shape of vendor {accel.vendor} "
                                   f"needs software.externals.{toolkit}")
        return accel, str(gpus["arch"]), f"gpus.arch of {shape.name}"
    accel = accelerators.with_toolkit(externals) if is_machine_described(shape) else None
    if accel is None:
        return None, None, "no GPU toolkit"
    return accel, accel.build_host_arch, accel.build_host_arch_why


def _no_machine_mpi(shape_name: str, machine: Machine) -> str:
    """Why a machine-described shape has no Open MPI to build against, and what to do:
    Spack's detection dropped it (and said why), or did not report the one on PATH, or
    there is none."""
    again = "then run `make setup` again (`spack -d external find openmpi` shows Spack's steps)"
    if "openmpi" in machine.skipped:
        return (f"{shape_name}: Spack's detection dropped this machine's Open MPI "
                f"({machine.skipped['openmpi']}), and the {shape_name} shape builds against "
                f"it: {again}")
    mpicc = shutil.which("mpicc")
    if mpicc:
        return (f"{shape_name}: Spack's detection did not report the Open MPI of {mpicc}, "
                f"and the {shape_name} shape builds against it: check that it is Open MPI "
                f"with its headers (ompi_info on PATH), {again}")
    return (f"{shape_name}: Spack's detection found no Open MPI on this machine, and the "
            f"{shape_name} shape builds against it: install it (Debian/Ubuntu: apt-get "
            "install openmpi-bin libopenmpi-dev; EL: dnf install openmpi openmpi-devel, "
            "with its bin/ on PATH), then run `make setup` again")


def _machine_mpi(shape: shapes.Shape, externals: dict[str, list[dict[str, Any]]]
                 ) -> tuple[bool, str]:
    """(whether the machine's Open MPI is used as is, why it is not).

    A machine-described shape reuses this machine's Open MPI (an external, not built),
    except on a node with GPUs where that MPI is not CUDA-aware (Spack's detection
    reads ``ompi_info``: ``~cuda``): the GPU checks pass device buffers to MPI
    (seed 000 sec 2, ``osu_latency -d cuda D D``), so there Open MPI is built, over
    UCX, as on the documented GPU shapes (the 2 x H200 machine: Ubuntu's Open MPI 4.1
    is not CUDA-aware, docs/gpu-results.md)."""
    if not is_machine_described(shape):
        return False, ""
    found = externals.get("openmpi") or []
    if not found:
        return False, ""
    # Spack writes the variants glued: openmpi@4.1.4~cuda+cxx~cxx_exceptions...
    aware = accelerators.of(shape.gpus)
    if not aware or any(re.search(rf"\+{aware.mpi_aware_variant}(?![\w-])", e["spec"])
                         for e in found):
        return True, ""
    name = re.split(r"[~+\s]", found[0]["spec"], maxsplit=1)[0]
    return False, (f"this machine's {name} is not {aware.mpi_aware_variant.upper()}-aware "
                   "and there are GPUs: Open MPI is built (over UCX)")


def _build_capabilities(shape: shapes.Shape, accel: accelerators.Accelerator | None,
                        root: Path) -> dict[str, bool]:
    """What UCX is built to use, from the capabilities the nodes have.

    A documented shape: its ``capabilities:`` (ocibench.capabilities), the one source
    of truth.  ``cma`` is on unless the shape says its nodes forbid it: UCX builds
    its CMA transport by default and neither tech tip turns it off, while whether a
    node allows it (Yama's ptrace_scope, CAP_SYS_PTRACE) is decided at run time by
    UCX itself and reported by ``ocibench preflight``.

    A machine-described shape (``local``): ``cma`` always (as above); ``gdrdrv``
    wherever CUDA is, since UCX turns gdr_copy off by itself on a node without
    /dev/gdrdrv and loading gdrdrv later then needs no rebuild; ``xpmem`` only where
    /dev/xpmem exists, because XPMEM's user library comes with its kernel module
    (both tech tips build the two together) and Spack's recipe cannot build the
    library alone from a release (``~kernel-module`` needs xpmem@2.6.6:)."""
    gdr = bool(accel and accel.gdr_copy)
    if is_machine_described(shape):
        return {"cma": True, "gdrdrv": gdr, "xpmem": has_device("xpmem", root)}
    declared = shape.data.get("capabilities") or {}
    return {
        "cma": capabilities.present(declared.get("cma", True)),
        "gdrdrv": gdr and capabilities.present(declared.get("gdrdrv", False)),
        "xpmem": capabilities.present(declared.get("xpmem", False)),
    }


# --------------------------------------------------------------------------- the rules
#
# One rule per package: what the shape's facts ask of it (its variants) and which root
# specs it adds, each citing the seed document or the tech tip that needs it.  A stack
# package without a rule is built as the builtin recipe's defaults, at its version.


@dataclass(frozen=True)
class Plan:
    """What one package contributes: its requirement (beside the shape's target) and
    the root specs it adds, or why it is left out; ``None`` from a transport rule: the
    package is not needed."""

    require: tuple[str, ...] = ()
    specs: tuple[str, ...] = ()
    note: str = ""
    #: Why the package is not built on this shape (the plan is then empty).
    left_out: str = ""


def _openmpi(f: Facts, version: list[str]) -> Plan:
    if f.mpi_external:
        return Plan(specs=("openmpi",),
                    note="openmpi: this machine's MPI, used as an external (not built)")
    # seed 002 sec 1 / 000 sec 1: UCX-based OpenMPI (UCX_NET_DEVICES in every run), with
    # UCC as both tech tips configure it (build-openmpi sec 1-2, gpu-with-ubuntu sec 3-2:
    # --with-ucx --with-ucc).  Not on a machine-described shape: Open MPI 5.0's coll/ucc
    # is off unless coll_ucc_enable=1 (ompi/mca/coll/ucc/coll_ucc_component.c), so the
    # seeds' figures did not use it, and UCC for GPUs compiles for every architecture
    # (see _ucc): a long build on a borrowed machine for nothing.
    req = [*version, "fabrics=ucx" if is_machine_described(f.shape) else "fabrics=ucx,ucc"]
    req += _gpu(f, "openmpi")  # seed 000 sec 1: device buffers (-d cuda D D)
    if f.slurm:
        # seed 002 sec 1 (build-openmpi tip): OpenMPI for Slurm, with the external PMIx
        # that srun --mpi=pmix also uses
        req += ["schedulers=slurm", "~internal-pmix"]
    return Plan(tuple(req), ("openmpi",), note=_host_buffers_only(f, "openmpi"))


def _omb(f: Facts, version: list[str]) -> Plan:
    # seed 000 sec 1: --enable-cuda --enable-ncclomb (osu_xccl_* on GPUs); the ROCm
    # build is the same with the vendor's variants (OMB 7.4 --enable-rocm --enable-rcclomb)
    name = "osu-micro-benchmarks"
    return Plan((*version, *_gpu(f, name)), _per_mpi(f, name, ("openmpi",)),
                note=_host_buffers_only(f, name))


def _collective_tests(vendor: accelerators.Accelerator, f: Facts, version: list[str]) -> Plan:
    if f.accel is not vendor:
        return Plan(left_out=f"{vendor.collective_tests_package} runs on {vendor.vendor} "
                    f"GPUs; {f.shape.name} has {f.accel.vendor if f.accel else 'no'} GPU toolkit")
    # seed 003 sec 2: make MPI=1 with OpenMPI, CUDA and NCCL (the arch only where the
    # recipe has the variant: rccl-tests builds for the targets of its hip)
    arch = _gpu(f, vendor.collective_tests_package)
    return Plan((*version, "+mpi", *arch),
                _per_mpi(f, vendor.collective_tests_package, ("openmpi",)))


def _imb(f: Facts, version: list[str]) -> Plan:
    # seed 004 sec 1 and 2: IMB once with OpenMPI and once with Intel MPI
    return Plan(tuple(version), _per_mpi(f, "intel-mpi-benchmarks", MPI_PACKAGES))


def _perftest(f: Facts, version: list[str]) -> Plan:
    # OCI's ib_write_bw/lat checks: only where the shape has an RDMA network
    if not f.rdma:
        return Plan(left_out=f"no RDMA network on {f.shape.name}")
    # ib_write_bw on GPU memory where the recipe builds for the vendor
    return Plan((*version, *_gpu(f, "perftest")), ("perftest",))


def _gpu(f: Facts, recipe: str) -> tuple[str, ...]:
    """The variants of ``recipe`` for the GPUs built for: those the vendor's row gives
    that recipe (``spack_recipes``, which says which recipe has which variant), none
    without a GPU toolkit or where the recipe has none of the vendor's."""
    return (f.accel.recipe_variants(recipe, f.arch) or ()) if f.accel and f.arch else ()


def _host_buffers_only(f: Facts, recipe: str) -> str:
    """The note of a recipe built without GPU support on a shape built for GPUs: its
    recipe has no variant of the vendor's (the row's ``spack_recipes``)."""
    if not f.accel or f.accel.recipe_variants(recipe, f.arch or "") is not None:
        return ""
    return (f"{recipe}: its recipe has no variant for {f.accel.vendor} GPUs "
            "(ocibench.accelerators: spack_recipes): built for host buffers only")


def _per_mpi(f: Facts, name: str, mpis: tuple[str, ...]) -> tuple[str, ...]:
    """``name ^<mpi>`` for each of ``mpis`` the stack builds, else ``name`` alone."""
    return tuple(f"{name} ^{m}" for m in mpis if m in f.stack) or (name,)


#: The rules of software.stack's packages.  The collective tests are per vendor: a
#: GPU shape's stack lists its vendor's (nccl-tests, rccl-tests).
STACK_RULES: dict[str, Callable[[Facts, list[str]], Plan]] = {
    "openmpi": _openmpi,
    "osu-micro-benchmarks": _omb,
    "intel-mpi-benchmarks": _imb,
    "perftest": _perftest,
    **{a.collective_tests_package: partial(_collective_tests, a)
       for a in accelerators.VENDORS.values()},
}


def _ucx(f: Facts) -> Plan:
    caps = f.build_caps
    ucx = [f"@{TECH_TIP_VERSIONS['ucx']}"]
    if caps["cma"]:
        # Cross Memory Attach: UCX's configure builds it by default and the tech tips
        # keep that default (build-openmpi sec 0 lists CMA among UCX's in-node
        # transports); Spack's recipe defaults it off.
        ucx.append("+cma")
    if f.rdma:
        # seeds 000 sec 2-3, 002 sec 3, 004 sec 1: UCX_NET_DEVICES=mlx5_N:1 (RoCEv2 on
        # ConnectX); build-openmpi sec 0: UD, RC and DC over the cluster network.  UCX's
        # configure builds them (and rdmacm, mlx5 direct verbs) by default; Spack's
        # recipe has them off.  (shape_rules holds capabilities.rdma equal to network.)
        ucx += ["+verbs", "+rdmacm", "+rc", "+ud", "+dc", "+mlx5_dv"]
    # seed 000 sec 2-3/2-4: device buffers across nodes; gpu-with-ubuntu sec 3-1:
    # configure-release --with-cuda
    ucx += _gpu(f, "ucx")
    if caps["gdrdrv"]:
        ucx.append("+gdrcopy")  # see _gdrcopy
    if caps["xpmem"]:
        # gpu-with-ubuntu sec 3-1, build-openmpi sec 1-1-4/1-1-5: UCX --with-xpmem
        ucx.append("+xpmem")
    return Plan(tuple(ucx))


def _gdrcopy(f: Facts) -> Plan | None:
    # gpu-with-ubuntu sec 3-1: GDRCopy 2.5.1 (its gdrdrv module loaded by a service),
    # UCX --with-gdrcopy: small GPU messages by CPU load/store through BAR1
    # (docs/gpu-results.md: 15.9 us D-D at 1 B without it).  A root of its own, so
    # that its tools (gdrcopy_sanity, _copylat, _copybw) are in the module tree.
    if not f.build_caps["gdrdrv"]:
        return None
    return Plan((f"@{TECH_TIP_VERSIONS['gdrcopy']}", *_gpu(f, "gdrcopy")), ("gdrcopy",))


def _xpmem(f: Facts) -> Plan | None:
    # gpu-with-ubuntu sec 3-1, build-openmpi sec 1-1-4/1-1-5: XPMEM's user library and
    # kernel module come from one build: the library is the node's, an external.
    if not f.build_caps["xpmem"] or f.externals.get("xpmem"):
        return None
    if not is_machine_described(f.shape):
        raise SpackConfigError(
            f"{f.shape.name}: capabilities.xpmem is true but software.externals has no "
            "xpmem: name the XPMEM user library that comes with the nodes' kernel "
            "module (the tech tips install it with --prefix=/opt/xpmem)")
    # /dev/xpmem without a library where the tech tips or the system put it: Spack
    # builds the library only (the kernel module is the node's).
    return Plan(("~kernel-module",), note="xpmem: /dev/xpmem but no user library found; "
                "Spack builds it (~kernel-module, from xpmem's master branch)")


def _ucc(f: Facts) -> Plan | None:
    if is_machine_described(f.shape):
        return None  # no UCC: see _openmpi
    # UCC 1.5.0 under Open MPI (both tech tips); on GPU shapes --with-cuda --with-nccl
    # (gpu-with-ubuntu sec 3-1).  No arch, as in the tech tip: UCC's configure then
    # compiles for every architecture the toolkit supports (config/m4/cuda.m4), and the
    # recipe would otherwise demand a collective library built for that arch, which
    # the image's external does not declare (the vendor rows: spack_recipes["ucc"]).
    return Plan((f"@{TECH_TIP_VERSIONS['ucc']}", *_gpu(f, "ucc")))


#: UCX, GDRCopy, XPMEM and UCC under the Open MPI a shape builds over UCX, as OCI's
#: tech tips build them ("gpu-with-ubuntu" sec 3-1 on GPU shapes, "build-openmpi" sec
#: 1-1 on BM.Optimized3.36), each variant from a capability of the nodes.
TRANSPORT_RULES: dict[str, Callable[[Facts], Plan | None]] = {
    "ucx": _ucx, "gdrcopy": _gdrcopy, "xpmem": _xpmem, "ucc": _ucc,
}


def _gpu_roots(f: Facts) -> Plan | None:
    if not f.accel:
        return None
    # The toolkit and the collective library as modules of their own (seeds 000/003
    # `module load nvhpc`), and on a shape with GPUs the node's copy ceilings, which
    # the GPU figures are judged against (issue 10, item 5); a build host with a
    # toolkit and no GPU has none to measure.
    ceiling = (f.accel.ceiling_package,) if f.shape.gpus else ()
    return Plan(specs=(*f.accel.gpu_modules, *ceiling))


#: BabelStream's release whose output the parser was tested on (v5.0: its table
#: "Function MBytes/sec ..."), the newest of spack-packages releases/v2025.11's recipe
#: (its versions 1.0 to 5.0 and the branch main, which Spack would otherwise prefer).
BABELSTREAM_VERSION = "@5.0"


def _babelstream(f: Facts) -> Plan | None:
    # The GPUs' memory bandwidth (checks/babelstream.py), AMD's acceptance measurement
    # on any vendor's GPUs: the recipe's model variant for the vendor (+cuda; +hip with
    # ROCmPackage's +rocm, which alone has amdgpu_target) and the shape's target.  Only
    # on a shape with GPUs (a build host has none to measure) whose vendor's model the
    # recipe has.
    model = _gpu(f, "babelstream") if f.shape.gpus else ()
    if not model:
        return None
    return Plan((BABELSTREAM_VERSION, *model), ("babelstream",))


def _stack_rules(facts: Facts) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """(requirements per package, root specs, notes): each package of software.stack
    through its rule (STACK_RULES), then the GPU roots, then the transports under an
    Open MPI built over UCX (TRANSPORT_RULES)."""
    build: dict[str, Any] = facts.shape.data["software"].get("build") or {}
    require: dict[str, list[str]] = {}
    specs: list[str] = []
    notes: list[str] = list(facts.notes)
    for name, value in facts.stack.items():
        version = [] if value is None or str(value) in ("any", "") else [f"@{value}"]
        rule = STACK_RULES.get(name)
        plan = rule(facts, version) if rule else Plan(tuple(version), (name,))
        if plan.left_out:
            notes.append(f"{name}: left out, {plan.left_out}")
            continue
        _add(plan, name, require, specs, notes, build.get(name) or {})
    gpu = _gpu_roots(facts)
    if gpu:
        specs += gpu.specs
    babelstream = _babelstream(facts)
    if babelstream:
        _add(babelstream, "babelstream", require, specs, notes, {})
    if any(r.startswith("fabrics=") and "ucx" in r for r in require.get("openmpi", [])):
        for name, rule in TRANSPORT_RULES.items():
            plan = rule(facts)
            if plan is not None:
                _add(plan, name, require, specs, notes, {})
    return require, specs, notes


def _add(plan: Plan, name: str, require: dict[str, list[str]], specs: list[str],
         notes: list[str], extra: dict[str, Any]) -> None:
    """Merge one package's plan, with its ``software.build`` entry (variants, then the
    compiler last: in Spack 1.x whatever follows %compiler constrains the compiler)."""
    req = list(plan.require) + str(extra.get("variants") or "").split()
    if extra.get("compiler"):
        req.append(f"%{extra['compiler']}")
    if req:
        require[name] = req
    specs += plan.specs
    if plan.note:
        notes.append(plan.note)


def derive(shape: shapes.Shape, machine: Machine | None = None,
           tools: dict[str, list[dict[str, Any]]] | None = None,
           root: Path = Path("/")) -> dict[str, Any]:
    """The Spack configuration scope of one shape, as a mapping ready for YAML
    (``root``: the filesystem root of this machine's probes, see :func:`gather`)."""
    return decide(gather(shape, machine, root, tools))


def decide(facts: Facts) -> dict[str, Any]:
    """The scope of one shape from its facts alone, as a mapping ready for YAML:
    nothing here reads the machine, a file or the environment (:func:`gather` did),
    and nothing is written (:func:`write` does), so what a shape's scope holds can be
    asked without Spack and without this machine."""
    shape = facts.shape
    target = shape.cpu["spack_target"]
    require, specs, notes = _stack_rules(facts)

    packages: dict[str, Any] = {}
    packages["all"] = {"require": [f"target={target}"]}
    for name, entry in facts.compilers:
        pkg = packages.setdefault(name, {"externals": [], "buildable": False})
        pkg["externals"].append(entry)
    compiler_specs = [entry["spec"].split()[0] for _, entry in facts.compilers]
    # The language virtuals only from the shape's compilers (not from whatever other
    # compiler the Spack instance knows): the default (first) one is preferred.
    for lang in ("c", "cxx", "fortran"):
        providers = [e["spec"].split()[0] for _, e in facts.compilers
                     if lang in e.get("extra_attributes", {}).get("compilers", {})]
        if providers:
            packages[lang] = {"require": [{"any_of": providers}], "prefer": [providers[0]]}
    for name, entries in facts.externals.items():
        packages[name] = {"externals": entries}
        # What the OCI image provides is never rebuilt; of what detection found on a
        # machine-described shape only the MPI/GPU/system stack is (build tools found
        # there are merely preferred).
        if not is_machine_described(shape) or name in NOT_BUILDABLE:
            packages[name]["buildable"] = False
    for name, entries in facts.tools.items():
        packages.setdefault(name, {"externals": entries, "buildable": False})
    # A package's own `require` replaces the one under `all`, so each carries the target.
    for name, req in require.items():
        pkg = packages.setdefault(name, {})
        own = [r for r in req if not r.startswith("%")]
        compiler = [r for r in req if r.startswith("%")]
        pkg["require"] = [" ".join(own + [f"target={target}"] + compiler)]

    env_vars = {
        "set": {
            "OCIBENCH_SHAPE": shape.name,
            "RFM_CONFIG_FILES": str(SITE_DIR / "reframe_config.py"),
        },
        "prepend_path": {
            # this checkout's `ocibench` command and package (never pip-installed)
            "PATH": str(REPO_ROOT / "bin"),
            "PYTHONPATH": str(REPO_ROOT / "src"),
            "MODULEPATH": str(_core_level(facts.module_root)),
        },
    }
    # The target goes on every root spec too: Spack considers a target the host cannot
    # run only when a user spec names it and host_compatible is off (solver/asp.py,
    # target_defaults), which is what concretizing a documented shape elsewhere needs.
    specs = [f"{s} target={target}" for s in specs]
    scope: dict[str, Any] = {
        # Packages this machine builds from local checkouts (develop specs), if any.
        "include": [{"path": str(LOCAL_DEVELOP_DIR / f"{shape.name}.yaml"), "optional": True}],
        "definitions": [{SPECS_DEFINITION: specs}],
        "packages": packages,
        "modules": {"default": {
            "roots": {"lmod": str(facts.module_root)},
            "lmod": {"core_compilers": compiler_specs},
        }},
        "env_vars": env_vars,
    }
    if facts.stub_dir and facts.accel:
        toolkit = facts.accel.toolkit_packages[0]
        scope["modules"]["default"]["lmod"][toolkit] = {
            "environment": {"prepend_path": {"LD_LIBRARY_PATH": str(facts.stub_dir)}}}
        notes.append(f"no {facts.accel.vendor} driver: the {toolkit} module puts the "
                     f"toolkit's driver stub ({facts.stub_dir}) on LD_LIBRARY_PATH "
                     "(host-buffer runs only)")
    if not is_machine_described(shape):
        scope["concretizer"] = {"targets": {"host_compatible": False}}
    if facts.mirrors:
        scope["mirrors"] = facts.mirrors
    scope["_notes"] = notes + [f"gpu arch: {facts.arch} ({facts.arch_why})"]
    return scope


def _mirrors() -> dict[str, Any]:
    """The per-user source mirror and binary build cache, where they exist."""
    mirrors: dict[str, Any] = {}
    if paths.source_mirror().is_dir():
        mirrors["ocibench-source"] = {"url": f"file://{paths.source_mirror()}", "binary": False}
    if paths.build_cache().is_dir():
        # A bundle's build cache is signed (scripts/bundle.sh; setup trusts its key and
        # sets OCIBENCH_BUILD_CACHE_SIGNED=1), and Spack then checks every binary's
        # signature; a cache pushed by hand with --unsigned is used as it is.
        signed = os.environ.get("OCIBENCH_BUILD_CACHE_SIGNED") == "1"
        mirrors["ocibench-buildcache"] = {
            "url": f"file://{paths.build_cache()}", "source": False, "signed": signed}
    return mirrors


def modulepath(shape: str) -> Path:
    """The directory to `module use` for a shape: the Core level of its Lmod tree."""
    return _core_level(paths.module_root(shape))


def _core_level(module_root: Path) -> Path:
    return module_root / "Core"


# --------------------------------------------------------------------------- writing


def render(shape_name: str, scope: dict[str, Any]) -> str:
    scope = dict(scope)
    notes = scope.pop("_notes", [])
    header = [
        f"# GENERATED by `ocibench spack-config` from site/shapes/{shape_name}.yaml.",
        "# Do not edit: change the shape file (or src/ocibench/spack/scopes.py) and",
        "# run `make setup`.  spack.yaml includes this file as the shape's scope.",
    ] + [f"# note: {n}" for n in notes]
    return "\n".join(header) + "\n" + yaml.safe_dump(scope, sort_keys=False, width=100)


def write(shape_names: list[str] | None = None, out_dir: Path = GENERATED_DIR,
          detect: bool = False, detected: str | None = None) -> list[Path]:
    """Write the scope of each shape (default: every known shape) and detected.yaml."""
    names = shape_names or shapes.known_shapes()
    loaded = [shapes.load(n) for n in names]
    machine = None
    if any(is_machine_described(s) for s in loaded):
        machine = detect_machine(out_dir, refresh=detect)
    tools = detect_tools()
    # Every scope decided first, then written: a shape that fails leaves no file changed.
    texts: dict[str, str | None] = {}
    for shape in loaded:
        try:
            texts[shape.name] = render(shape.name, derive(shape, machine, tools))
        except SpackConfigError as err:
            # Writing every shape: one that cannot be built on this machine (e.g. the
            # Slurm test cluster's, where no system MPI exists) must not stop the scope
            # of the shape this machine is.  That one, or a shape asked for, still fails.
            if shape_names or shape.name == detected:
                raise
            print(f"ocibench spack-config: {shape.name} left out: {err}", file=sys.stderr)
            texts[shape.name] = None
    written = []
    (out_dir / SHAPES_SUBDIR).mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        path = out_dir / SHAPES_SUBDIR / f"{name}.yaml"
        if text is None:
            path.unlink(missing_ok=True)
            continue
        path.write_text(text)
        written.append(path)
    if detected:
        path = out_dir / DETECTED_FILE
        path.write_text(
            f"# GENERATED by `ocibench spack-config`: this machine is {detected}.\n"
            "# spack.yaml includes this file when OCIBENCH_SHAPE is unset.\n"
            + yaml.safe_dump({"include": [f"{SHAPES_SUBDIR}/{detected}.yaml"]}, sort_keys=False))
        written.append(path)
    return written
