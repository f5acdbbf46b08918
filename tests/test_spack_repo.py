"""Our package repository (repos/spack_repo/ocibench) against the real, pinned Spack.

Every Spack command runs in a throwaway environment under pytest's tmp directory
whose spack.yaml adds our repository and declares the externals, so the shared
Spack configuration is never changed.  Concretization is the slow part (a minute or
so on 2 cores): the good specs are concretized together in one solve, shared by the
tests through a session fixture.  docs/spack-repo.md says what each override adds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from intel_row import INTEL
from ocibench import accelerators, paths

pytestmark = pytest.mark.spack

REPO = paths.REPO_ROOT / "repos" / "spack_repo" / "ocibench"
PROBE = Path(__file__).with_name("spack_repo_probe.py")
OUR_PACKAGES = sorted(p.parent.name.replace("_", "-")
                      for p in (REPO / "packages").glob("*/package.py"))
#: Recipes of our own, where Spack's builtin repository has none (each says why).
NEW_PACKAGES = {
    # perftest: spack-packages releases/v2025.11 has no perftest recipe; OCI's health
    # checks run its ib_write_bw / ib_write_lat (docs/spack-repo.md).
    "perftest",
}
OVERRIDES = [p for p in OUR_PACKAGES if p not in NEW_PACKAGES]

#: The software of the shapes as Spack externals.  Concretization only reads these
#: declarations (nothing is built or run), so the prefixes need not exist here.
#: Versions and places from the seeds: OpenMPI 5.0.8 in /opt/openmpi (000 sec 1,
#: 003 sec 2), AOCC 5.0 in /opt/aocc (001 sec 2); CUDA 13 (not the seeds' 12.9) so
#: that the OMB patch for CUDA 13 is part of the concretized spec.
ENV_YAML = f"""\
spack:
  view: false
  repos:
    ocibench: {REPO}
  concretizer:
    unify: true
  packages:
    cuda:
      buildable: false
      externals:
      - spec: cuda@13.0.88
        prefix: /usr/local/cuda-13.0
    nccl:
      buildable: false
      externals:
      - spec: nccl@2.28.9-1 +cuda
        prefix: /usr/local/cuda-13.0
    openmpi:
      buildable: false
      externals:
      - spec: openmpi@5.0.8 +cuda fabrics=ucx schedulers=slurm
        prefix: /opt/openmpi
    aocc:
      buildable: false
      externals:
      - spec: aocc@5.0.0
        prefix: /opt/aocc
        extra_attributes:
          compilers:
            c: /opt/aocc/bin/clang
            cxx: /opt/aocc/bin/clang++
"""

#: The documented STREAM build of BM.Standard.E5.192 (seed 001 sec 2).  In Spack 1.x
#: everything after `%aocc@5` would constrain aocc, so the compiler comes last.
E5_STREAM = ("stream@5.10 stream_array_size=430080000 +nt_store stream_type=double +openmp "
             "%aocc@5")
SEED_001_FLAGS = ["-DSTREAM_TYPE=double", "-DSTREAM_ARRAY_SIZE=430080000", "-O3",
                  "-mcmodel=large", "-fopenmp", "-fnt-store"]
GPU_OMB = "osu-micro-benchmarks@7.4 +cuda +nccl cuda_arch=90 ^openmpi"
NCCL_TESTS = "nccl-tests@2.16.3 +mpi cuda_arch=90 ^openmpi"

#: Timeouts in seconds: one Spack start, one concretization.
QUICK_S, SOLVE_S = 120, 600


@pytest.fixture(scope="session")
def spack(spack_exe, tmp_path_factory):
    """Run `spack -e <throwaway env> ARGS`; returns the CompletedProcess."""
    env_dir = tmp_path_factory.mktemp("spack-repo-env")
    (env_dir / "spack.yaml").write_text(ENV_YAML)
    environ = {k: v for k, v in os.environ.items() if k != "SPACK_ENV"}
    environ.setdefault("SPACK_PYTHON", sys.executable)

    def run(*args, timeout=QUICK_S):
        argv = [str(spack_exe), "-e", str(env_dir), *map(str, args)]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  env=environ)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{' '.join(argv)} did not finish in {timeout}s")

    # A repository that fails to load is only a warning to Spack, after which every
    # command would silently use the builtin recipes.
    repos = run("repo", "list")
    assert repos.returncode == 0 and "ocibench" in repos.stdout, output(repos)
    assert "Error constructing repository" not in output(repos), output(repos)
    return run


def output(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


def probe(spack, *args, timeout=QUICK_S):
    proc = spack("python", PROBE, *args, timeout=timeout)
    assert proc.returncode == 0, output(proc)
    return json.loads(proc.stdout)


def test_repo_layout():
    repo_yaml = (REPO / "repo.yaml").read_text()
    assert "namespace: ocibench" in repo_yaml
    assert OUR_PACKAGES, f"no packages under {REPO / 'packages'}"


#: The recipes a vendor's variants may land on (ocibench.spack.scopes' rules).
GPU_RECIPES = ("openmpi", "ucx", "ucc", "osu-micro-benchmarks", "gdrcopy", "babelstream",
               "perftest", "nccl-tests", "rccl-tests")


@pytest.fixture(scope="module")
def recipe_variants(spack):
    return probe(spack, "variants", *GPU_RECIPES)


@pytest.mark.parametrize("row", [accelerators.NVIDIA, accelerators.AMD, INTEL],
                         ids=lambda r: r.vendor)
def test_a_rows_spack_variants_are_its_recipes(recipe_variants, row):
    """Each recipe a vendor's row lists has the variants the row gives it (ours where we
    override the builtin); a recipe the row leaves out has no variant of the vendor's
    (docs/adding-a-vendor.md's Intel-like row: no level_zero but in mpich)."""
    for recipe in GPU_RECIPES:
        given = row.recipe_variants(recipe, "any")
        names = {v.lstrip("+").split("=")[0] for v in given or ()}
        assert names <= set(recipe_variants[recipe]), (row.vendor, recipe)
        if given is None:
            assert row.spack_variant.lstrip("+") not in recipe_variants[recipe], \
                (row.vendor, recipe)


def test_audit_packages(spack):
    # about two minutes of one core for our ten recipes and what they import
    proc = spack("audit", "packages", *OUR_PACKAGES, timeout=SOLVE_S)
    assert proc.returncode == 0, output(proc)


@pytest.fixture(scope="session")
def directives(spack):
    return probe(spack, "directives")


#: What each override must still add to (or drop from) its builtin recipe: if the
#: builtin gains it, the override has become dead weight and this test says so.
#: amdgpu_target with gfx950 (repos/spack_repo/ocibench/amdgpu.py), and the compiler it needs.
GFX950 = ["variant amdgpu_target ", "depends_on llvm-amdgpu@7.0.0: "]

EXPECTED = {
    "openmpi": {"added": ["depends_on ucx+cuda type=5 when=+cuda fabrics=ucx", *GFX950,
                          "depends_on hwloc+rocm amdgpu_target=gfx950 "],
                "methods": ["make_ucx_the_pml"]},
    # only for gfx950 (docs/spack-repo.md, "amdgpu.py")
    "ucc": {"added": GFX950},
    "hwloc": {"added": GFX950},
    "babelstream": {"added": GFX950},
    # ROCm 7.2.0, the image of BM.GPU.MI355X-v1.8 (spack-packages releases/v2026.02 has it)
    "transferbench": {"added": ["version 7.2.0 ", "depends_on hip type=",
                                "depends_on hsa-rocr-dev type=", "depends_on rocm-cmake type=",
                                "conflicts ^hip@:7.1 when=@7.2.0"]},
    "osu-micro-benchmarks": {
        "added": ["variant nccl ", "conflicts +nccl when=~cuda",
                  "depends_on nccl type=5 when=+nccl",
                  "patch cuda13-mem-prefetch.patch sha256=", *GFX950],
        "methods": ["build_directory", "nccl_configure_args", "setup_run_environment"],
    },
    "stream": {
        # the builtin's variant names, with validated values and stream.c's defaults
        "added": ["variant stream_array_size default=10000000 ",
                  "variant stream_type default=double values=double,float ",
                  "variant nt_store ", "variant openmp default=True", "requires %c=aocc"],
        "dropped": ["depends_on fortran ", "variant stream_array_size default=none ",
                    "variant stream_type default=none "],
    },
    "nccl-tests": {"methods": ["setup_build_environment", "build_targets", "spack_build_dir",
                               "install"]},
    # libcheck only up to 2.4 (2.5's sanity has its own test suite)
    "gdrcopy": {"added": ["depends_on check "], "dropped": ["depends_on check "]},
}


@pytest.mark.parametrize("package", OVERRIDES)
def test_override_differs_from_builtin(directives, package):
    diff = directives[package]
    assert diff["namespace"] == "ocibench"
    assert diff["subclass_of_builtin"], f"{package} must subclass the builtin recipe"
    assert diff["added"] or diff["dropped"] or diff["methods"], (
        f"{package}: the override no longer differs from the builtin recipe; delete it")
    for kind, wanted in EXPECTED.get(package, {}).items():
        for prefix in wanted:
            assert any(line.startswith(prefix) for line in diff[kind]), (
                f"{package}: {kind} lacks {prefix!r} (the builtin may have it now):\n"
                + "\n".join(diff[kind]))


@pytest.mark.parametrize("package", OVERRIDES)
def test_override_keeps_the_builtins_builders(directives, package):
    """Spack takes a package's builder (``CMakeBuilder``, ...) from the package's own
    module by name, never from its base class's: an override of a recipe whose build
    logic is in builders must bring them along.  BabelStream's did not, and `spack
    install babelstream` ran CMake without -DMODEL, then its Fortran Makefile."""
    assert directives[package]["builders_lost"] == [], (
        f"{package}: the override's module lacks the builtin's "
        f"{', '.join(directives[package]['builders_lost'])}: import them from "
        f"spack_repo.builtin.packages.{package.replace('-', '_')}.package")


def test_the_pinned_rocm_package_still_lacks_gfx950(spack):
    """repos/spack_repo/ocibench/amdgpu.py adds gfx950 because the pinned builtin
    ROCmPackage lacks it (spack-packages ea8584695d added it on develop).  When the pin
    moves past that commit this fails: delete amdgpu.py and the overrides that exist
    only for it (docs/spack-repo.md)."""
    proc = spack("python", "-c", "from spack_repo.builtin.build_systems.rocm import "
                 "ROCmPackage; print(sorted(ROCmPackage.amdgpu_targets))")
    assert proc.returncode == 0, output(proc)
    assert "'gfx942'" in proc.stdout and "'gfx950'" not in proc.stdout, proc.stdout


def test_gfx950_is_a_value_of_every_rocm_recipe_of_ours(directives):
    """The one definition in amdgpu.py reaches each recipe that mixes it in, perftest
    (a ROCmPackage of our own) included."""
    targets = directives["_amdgpu_targets"]
    for package in ("openmpi", "osu-micro-benchmarks", "perftest", "ucc", "hwloc",
                    "babelstream"):
        assert "gfx950" in targets[package], (package, targets[package])


def test_every_override_is_expected():
    """A new override needs its entry in EXPECTED (and docs/spack-repo.md)."""
    assert set(OVERRIDES) == set(EXPECTED)


@pytest.mark.parametrize("package", sorted(NEW_PACKAGES))
def test_a_new_recipe_has_no_builtin_to_override(directives, package):
    """A recipe of our own must not shadow a builtin one: when the builtin repository
    gains it, this fails and the recipe becomes an override (or goes)."""
    assert directives[package] == {"builtin": False, "namespace": "ocibench"}


BAD_INPUT = {
    "stream stream_array_size=-1": "stream_array_size='-1' is invalid",
    "stream stream_array_size=abc": "stream_array_size='abc' is invalid",
    "stream +nt_store %gcc": "+nt_store needs a C compiler with a non-temporal-store flag",
    "osu-micro-benchmarks +nccl ~cuda": "+nccl needs +cuda",
}


@pytest.fixture(scope="module")
def refused(spack):
    """Each bad spec concretized alone, all in one Spack process (a solve each)."""
    return probe(spack, "refuse", *BAD_INPUT, timeout=SOLVE_S * len(BAD_INPUT))


@pytest.mark.parametrize("spec, problem", sorted(BAD_INPUT.items()))
def test_bad_input_is_refused_with_its_reason(refused, spec, problem):
    assert refused[spec]["refused"], f"{spec} was accepted"
    assert problem in refused[spec]["message"], refused[spec]["message"]


def test_the_cli_refuses_bad_input_too(spack):
    """The refusal the user meets: `spack spec` of a bad value exits non-zero with it."""
    proc = spack("spec", "stream", "stream_array_size=abc", timeout=SOLVE_S)
    assert proc.returncode != 0, (
        f"`spack spec stream stream_array_size=abc` was accepted:\n{proc.stdout}")
    assert BAD_INPUT["stream stream_array_size=abc"] in output(proc), output(proc)


@pytest.fixture(scope="session")
def omb_tree(tmp_path_factory):
    """An OMB installation tree with some benchmark directories (those of a build
    without +nccl and without mpi/congestion), for the run environment."""
    prefix = tmp_path_factory.mktemp("omb-prefix")
    for sub in ("mpi/collective", "mpi/one-sided", "mpi/pt2pt", "mpi/startup"):
        (prefix / "libexec" / "osu-micro-benchmarks" / sub).mkdir(parents=True)
    return prefix


@pytest.fixture(scope="session")
def concretized(spack, omb_tree):
    return probe(spack, "concretize", omb_tree, GPU_OMB, E5_STREAM, NCCL_TESTS,
                 timeout=SOLVE_S)


def test_gpu_omb_concretizes_with_nccl_and_the_cuda13_patch(concretized):
    omb = concretized["osu-micro-benchmarks"]
    assert omb["namespace"] == "ocibench"
    assert omb["variants"]["cuda"] == "True" and omb["variants"]["nccl"] == "True"
    assert omb["variants"]["cuda_arch"] == "90"
    assert {"cuda", "nccl", "openmpi"} <= set(omb["dependencies"])
    assert omb["patches"] == ["cuda13-mem-prefetch.patch"]
    assert omb["nccl_configure_args"] == ["--enable-ncclomb", "--with-nccl=/usr/local/cuda-13.0"]


def test_omb_builds_out_of_its_sources_in_a_directory_of_its_own(concretized):
    # a develop tree is shared by every spec built from it (docs/spack-env.md)
    omb = concretized["osu-micro-benchmarks"]
    build, sources = Path(omb["build_directory"]), Path(omb["source_path"])
    assert build.name == f"spack-build-{omb['hash7']}"
    assert sources not in build.parents and build != sources


def test_nccl_tests_build_out_of_their_sources_in_a_directory_of_their_own(concretized):
    nccl_tests = concretized["nccl-tests"]
    [builddir] = [t.split("=", 1)[1] for t in nccl_tests["build_targets"]
                  if t.startswith("BUILDDIR=")]
    assert Path(builddir).name == f"spack-build-{nccl_tests['hash7']}"
    assert Path(nccl_tests["source_path"]) not in Path(builddir).parents


def test_ucx_openmpi_makes_ucx_its_pml_where_no_mellanox_nic_is(concretized):
    # Open MPI 5 would pick ob1 on a node whose UCX finds no mlx* device
    # (repos/spack_repo/ocibench/packages/openmpi/package.py says why)
    files = concretized["openmpi"]["installed_files"]
    params = files.get("etc/openmpi-mca-params.conf", "")
    settings = [line.split("=") for line in params.splitlines()
                if line.strip() and not line.startswith("#")]
    assert [[k.strip(), v.strip()] for k, v in settings] == [["pml", "ucx"]], files


def test_omb_run_environment_lists_existing_benchmark_dirs_in_seed_order(concretized, omb_tree):
    root = omb_tree / "libexec" / "osu-micro-benchmarks"
    assert concretized["osu-micro-benchmarks"]["run_path"] == [
        str(root), *(str(root / sub) for sub in
                     ("mpi/collective", "mpi/one-sided", "mpi/pt2pt", "mpi/startup"))]


def test_e5_stream_compiles_with_the_seed_001_flags(concretized):
    stream = concretized["stream"]
    assert stream["namespace"] == "ocibench"
    assert stream["compiler"] == "aocc"
    assert stream["cflags"] == SEED_001_FLAGS
    assert "fortran" not in stream["dependencies"]
    assert stream["variants"]["stream_array_size"] == "430080000"
