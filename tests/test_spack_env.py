"""The Spack environment: its YAML, each shape's derived scope, and real concretization.

Concretizing all shapes takes minutes (each 1-3 min on 2 cores): one session-scoped
pool runs them in parallel (as many at once as there are cores, at most 3) in a
private copy of the environment, without writing any spack.lock, and each shape's
test waits only for its own result.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

import concretized_stack
from concretized_stack import variants
from gpu_node import fake_root, local_with_gpus
from ocibench import accelerators, paths, shapes
from ocibench.node import machine
from ocibench.paths import REPO_ROOT
from ocibench.spack import scopes as spack_config

ENV_FILES = ("spack.yaml", "packages.yaml", "modules.yaml")
SHAPES = shapes.known_shapes()
#: Concretized here: every shape but `local`, whose concretization is the one `make
#: install` makes in tests/test_local_install.py (the same solve, not done twice).
CONCRETIZED = [s for s in SHAPES if s != "local"]
DOCUMENTED = [s for s in SHAPES if s.startswith("BM.")]
GPU_SHAPES = [s for s in DOCUMENTED if shapes.load(s).gpus]
CONCRETIZE_TIMEOUT_S = 1800

#: UCX as OCI's tech tips build it, per documented shape (the variants Spack's recipe
#: has; issue 10 "What to build" 1).  GPU shapes with gdrdrv and xpmem: gpu-with-ubuntu
#: sec 3-1 `configure-release --with-xpmem --with-cuda --with-gdrcopy` plus UCX's own
#: configure defaults (cma, verbs, rdmacm, rc, ud, dc, mlx5); BM.Optimized3.36:
#: build-openmpi sec 1-1-5 `--with-xpmem`, no CUDA.
RDMA_UCX = {"verbs", "rdmacm", "rc", "ud", "dc", "mlx5_dv"}
TECH_TIP_UCX = {
    "BM.GPU4.8": {"cuda", "gdrcopy", "xpmem", "cma"} | RDMA_UCX,
    "BM.GPU.A100-v2.8": {"cuda", "gdrcopy", "xpmem", "cma"} | RDMA_UCX,
    "BM.Optimized3.36": {"xpmem", "cma"} | RDMA_UCX,
}
#: Every on/off variant of UCX that the table above may turn on.
UCX_SWITCHES = {"cuda", "gdrcopy", "xpmem", "cma", "knem"} | RDMA_UCX

#: seed 001 sec 2: clang -DSTREAM_TYPE=double -DSTREAM_ARRAY_SIZE=430080000 -O3
#: -mcmodel=large -fopenmp -fnt-store, with AOCC 5.0 (sec 0).
E5_STREAM = {"stream_array_size": "430080000", "nt_store": True, "stream_type": "double",
             "openmp": True}


# --------------------------------------------------------------------------- YAML


@pytest.mark.parametrize("name", ENV_FILES)
def test_committed_yaml_loads(name: str) -> None:
    data = yaml.safe_load((REPO_ROOT / name).read_text())
    assert isinstance(data, dict) and data, name


def test_spack_yaml_includes_the_shape_scope_and_lists_the_definition() -> None:
    env = yaml.safe_load((REPO_ROOT / "spack.yaml").read_text())["spack"]
    includes = [i if isinstance(i, str) else i["path"] for i in env["include"]]
    assert "site/spack/generated/shapes/${OCIBENCH_SHAPE}.yaml" in includes
    assert "site/spack/generated/detected.yaml" in includes
    assert {"packages.yaml", "modules.yaml"} <= set(includes)
    # the shape scope precedes (= overrides) the common layers
    assert includes.index("site/spack/generated/detected.yaml") < includes.index("packages.yaml")
    assert env["specs"] == [f"${spack_config.SPECS_DEFINITION}"]
    assert env["repos"]["ocibench"] == "$env/repos/spack_repo/ocibench"


def test_no_machine_path_in_committed_environment() -> None:
    for name in ENV_FILES:
        text = (REPO_ROOT / name).read_text()
        # This checkout's parent and the user's home: paths of this machine.
        for bad in (f"{REPO_ROOT.parent}/", f"{Path.home()}/", "/home/"):
            assert bad not in text, f"{name} holds a machine path ({bad})"


def test_module_names_are_the_seeds() -> None:
    assert paths.module_name("osu-micro-benchmarks") == "omb"
    assert paths.module_name("intel-mpi-benchmarks") == "imb"
    assert paths.module_name("openmpi") == "openmpi"
    assert paths.module_name("nccl-tests") == "nccl-tests"
    assert paths.module_name("stream") == "stream"


# --------------------------------------------------------------------------- derived scopes


def _derive(name: str, data_edit=None) -> dict[str, Any]:
    shape = shapes.load(name)
    if data_edit:
        data = copy.deepcopy(shape.data)
        data_edit(data)
        shape = shapes.Shape(name=shape.name, data=data, path=shape.path)
    return spack_config.derive(shape, None, {})


@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_scope_has_what_its_readers_need(name: str) -> None:
    shape = shapes.load(name)
    scope = _derive(name)
    pkgs = scope["packages"]
    target = shape.cpu["spack_target"]
    assert pkgs["all"]["require"] == [f"target={target}"]
    specs = scope["definitions"][0][spack_config.SPECS_DEFINITION]
    assert specs and all(s.endswith(f"target={target}") for s in specs)
    # every package with its own requirement keeps the target (it replaces all:require)
    for pkg, conf in pkgs.items():
        for req in conf.get("require", []):
            if isinstance(req, str):
                assert f"target={target}" in req, pkg
    # the image's compilers and externals, never rebuilt
    for comp in shape.data["software"]["compilers"]:
        pkg = comp["spec"].split("@")[0]
        assert pkgs[pkg]["buildable"] is False
        assert pkgs[pkg]["externals"][0]["prefix"] == comp["prefix"]
        assert set(pkgs[pkg]["externals"][0]["extra_attributes"]["compilers"]) >= {"c", "cxx"}
    for ext, entry in shape.data["software"]["externals"].items():
        assert pkgs[ext]["buildable"] is False
        assert pkgs[ext]["externals"][0]["spec"] == entry["spec"]
    # versions of the stack
    for pkg, version in shape.data["software"]["stack"].items():
        if pkg in spack_config.GPU_ONLY and not shape.gpus:
            assert pkg not in pkgs
            continue
        assert f"@{version} " in pkgs[pkg]["require"][0] + " ", pkg
    # module tree, ReFrame, provenance of the shape
    assert scope["modules"]["default"]["roots"]["lmod"] == str(paths.module_root(name))
    assert scope["modules"]["default"]["lmod"]["core_compilers"]
    env_vars = scope["env_vars"]
    assert env_vars["set"]["OCIBENCH_SHAPE"] == name
    assert env_vars["set"]["RFM_CONFIG_FILES"].endswith("site/reframe_config.py")
    assert env_vars["prepend_path"]["MODULEPATH"] == str(spack_config.modulepath(name))
    assert env_vars["prepend_path"]["PYTHONPATH"] == str(REPO_ROOT / "src")
    assert env_vars["prepend_path"]["PATH"] == str(REPO_ROOT / "bin")  # bin/ocibench
    assert scope["concretizer"]["targets"]["host_compatible"] is False


@pytest.mark.parametrize("name", GPU_SHAPES)
def test_gpu_scope_builds_gpu_aware(name: str) -> None:
    """Each GPU shape builds its vendor's stack, every name from the vendor's row:
    Open MPI and UCX +cuda | +rocm, OMB with the collective library's benchmarks for the
    shape's arch, the collective tests, the toolkit's and library's modules."""
    gpus = shapes.load(name).gpus
    vendor, arch = accelerators.of(gpus), gpus["arch"]
    scope = _derive(name)
    pkgs = scope["packages"]
    assert {vendor.spack_variant, "fabrics=ucx,ucc", "schedulers=slurm"} <= set(
        pkgs["openmpi"]["require"][0].split())
    assert {vendor.spack_variant, vendor.collective_variant, vendor.spack_arch(arch)} <= set(
        pkgs["osu-micro-benchmarks"]["require"][0].split())
    if vendor.spack_arch(arch) in vendor.recipe_variants(vendor.collective_tests_package, arch):
        assert vendor.spack_arch(arch) in pkgs[vendor.collective_tests_package]["require"][0]
    assert vendor.spack_variant in pkgs["ucx"]["require"][0]
    # each recipe the row lists takes its variants (ROCmPackage: +rocm with
    # amdgpu_target=none conflicts, so Open MPI and UCC name the target there)
    for name in ("openmpi", "ucx", "ucc", "osu-micro-benchmarks"):
        assert set(vendor.recipe_variants(name, arch)) <= set(
            pkgs[name]["require"][0].split()), name
    specs = " ".join(scope["definitions"][0][spack_config.SPECS_DEFINITION])
    assert f"{vendor.collective_tests_package} ^openmpi" in specs
    assert all(f"{module} " in specs for module in vendor.gpu_modules)


def test_cpu_shape_has_no_gpu_specs() -> None:
    scope = _derive("BM.Optimized3.36")
    specs = scope["definitions"][0][spack_config.SPECS_DEFINITION]
    assert not any(s.startswith(("nccl-tests", "cuda", "nccl ")) for s in specs)
    assert "+cuda" not in scope["packages"]["openmpi"]["require"][0]
    # seed 004: IMB once with OpenMPI, once with Intel MPI
    assert "intel-mpi-benchmarks ^openmpi target=icelake" in specs
    assert "intel-mpi-benchmarks ^intel-oneapi-mpi target=icelake" in specs


def _ucx_on(scope: dict[str, Any]) -> set[str]:
    """The UCX variants a derived scope turns on."""
    req = scope["packages"].get("ucx", {}).get("require", [""])[0].split()
    return {r[1:] for r in req if r.startswith("+")}


@pytest.mark.parametrize("name", sorted(TECH_TIP_UCX))
def test_scope_builds_ucx_as_the_tech_tips(name: str) -> None:
    scope = _derive(name)
    pkgs = scope["packages"]
    assert _ucx_on(scope) & UCX_SWITCHES == TECH_TIP_UCX[name]
    assert "@1.19.0" in pkgs["ucx"]["require"][0].split()
    assert "fabrics=ucx,ucc" in pkgs["openmpi"]["require"][0].split()
    ucc = pkgs["ucc"]["require"][0].split()
    assert "@1.5.0" in ucc
    specs = scope["definitions"][0][spack_config.SPECS_DEFINITION]
    if "gdrcopy" in TECH_TIP_UCX[name]:
        arch = shapes.load(name).gpus["arch"]
        assert {"@2.5.1", f"cuda_arch={arch}"} <= set(pkgs["gdrcopy"]["require"][0].split())
        assert any(s.startswith("gdrcopy ") for s in specs)  # a module with its tools
        assert {"+cuda", "+nccl"} <= set(ucc)
    else:
        assert "gdrcopy" not in pkgs and "+cuda" not in ucc
    # the nodes' XPMEM library (tech tips: /opt/xpmem), never built by Spack
    assert pkgs["xpmem"]["externals"][0]["prefix"] == "/opt/xpmem"
    assert pkgs["xpmem"]["buildable"] is False


def test_gpu_shapes_build_their_vendors_ceiling_tool() -> None:
    ceilings = {v.ceiling_package for v in accelerators.VENDORS.values()}
    for name in GPU_SHAPES:
        ceiling = accelerators.of(shapes.load(name).gpus).ceiling_package
        specs = _derive(name)["definitions"][0][spack_config.SPECS_DEFINITION]
        assert any(s.startswith(f"{ceiling} ") for s in specs), name
        assert not any(s.split()[0] in ceilings - {ceiling} for s in specs), name
    specs = _derive("BM.Optimized3.36")["definitions"][0][spack_config.SPECS_DEFINITION]
    assert not any(s.split()[0] in ceilings for s in specs)


def test_shape_that_forbids_cma_builds_ucx_without_it() -> None:
    scope = _derive("BM.Optimized3.36", lambda d: d["capabilities"].update(cma=False))
    assert "cma" not in _ucx_on(scope) and "xpmem" in _ucx_on(scope)


def test_xpmem_capability_without_its_library_is_an_error() -> None:
    with pytest.raises(spack_config.SpackConfigError,
                       match=r"BM.GPU4.8: capabilities.xpmem is true but software.externals "
                             r"has no xpmem"):
        _derive("BM.GPU4.8", lambda d: d["software"]["externals"].pop("xpmem"))


# The local shape on a GPU node (tests/gpu_node.py): what it builds depends on this
# node's Open MPI, CUDA and /dev/xpmem, read under a fake root.

def _machine(tmp_path: Path, mpi: str = "openmpi@4.1.4~cuda+cxx~cxx_exceptions+java fabrics=ofi,ucx"
             ) -> machine.Machine:
    """A machine as Spack's detection reports it: gcc, an Open MPI, a CUDA toolkit
    (under tmp_path: no driver stub to link)."""
    gcc = {"spec": "gcc@12.2.0 languages:='c,c++,fortran'", "prefix": "/usr",
           "extra_attributes": {"compilers": {"c": "/usr/bin/gcc", "cxx": "/usr/bin/g++",
                                              "fortran": "/usr/bin/gfortran"}}}
    found = {"gcc": [gcc], "cuda": [{"spec": "cuda@13.0.88", "prefix": str(tmp_path / "cuda")}],
             "nccl": [{"spec": "nccl@2.28.9", "prefix": str(tmp_path / "cuda")}]}
    if mpi:
        found["openmpi"] = [{"spec": mpi, "prefix": "/usr"}]
    return machine.Machine(found)


def _derive_local(tmp_path: Path, root: Path, **machine_kw) -> dict[str, Any]:
    return spack_config.derive(local_with_gpus(), _machine(tmp_path, **machine_kw), {}, root)


def test_local_gpu_node_builds_open_mpi_over_ucx_with_cma_and_gdrcopy(tmp_path: Path) -> None:
    scope = _derive_local(tmp_path, fake_root(tmp_path / "root"))
    pkgs = scope["packages"]
    assert "openmpi" not in pkgs or not pkgs["openmpi"].get("externals")
    # no UCC on local: Open MPI 5.0 leaves coll/ucc off (coll_ucc_enable=0)
    assert {"+cuda", "fabrics=ucx"} <= set(pkgs["openmpi"]["require"][0].split())
    assert "ucc" not in pkgs
    assert _ucx_on(scope) & UCX_SWITCHES == {"cuda", "cma", "gdrcopy"}
    assert {"@2.5.1", "cuda_arch=90"} <= set(pkgs["gdrcopy"]["require"][0].split())
    assert "xpmem" not in pkgs
    specs = scope["definitions"][0][spack_config.SPECS_DEFINITION]
    assert any(s.startswith("nvbandwidth ") for s in specs)
    # BabelStream's CUDA model for the GPUs nvidia-smi listed
    assert any(s.startswith("babelstream ") for s in specs)
    assert pkgs["babelstream"]["require"][0].split()[:3] == ["@5.0", "+cuda", "cuda_arch=90"]
    assert "this machine's openmpi@4.1.4 is not CUDA-aware and there are GPUs: Open MPI is " \
        "built (over UCX)" in scope["_notes"]


def test_local_gpu_node_with_xpmem_uses_its_library(tmp_path: Path) -> None:
    root = fake_root(tmp_path / "root", xpmem=True, xpmem_library="opt/xpmem")
    scope = _derive_local(tmp_path, root)
    assert "xpmem" in _ucx_on(scope)
    assert scope["packages"]["xpmem"]["externals"] == [
        {"spec": "xpmem@master ~kernel-module", "prefix": "/opt/xpmem"}]


def test_local_gpu_node_with_xpmem_but_no_library_builds_the_library(tmp_path: Path) -> None:
    scope = _derive_local(tmp_path, fake_root(tmp_path / "root", xpmem=True))
    assert "xpmem" in _ucx_on(scope)
    assert scope["packages"]["xpmem"]["require"][0].split()[0] == "~kernel-module"


def test_local_xpmem_library_without_the_device_is_not_used(tmp_path: Path) -> None:
    scope = _derive_local(tmp_path, fake_root(tmp_path / "root", xpmem_library="opt/xpmem"))
    assert "xpmem" not in _ucx_on(scope) and "xpmem" not in scope["packages"]


def test_local_reuses_a_cuda_aware_machine_mpi(tmp_path: Path) -> None:
    scope = _derive_local(tmp_path, fake_root(tmp_path / "root"),
                          mpi="openmpi@5.0.7+cuda+cxx~java fabrics=ucx")
    assert scope["packages"]["openmpi"]["externals"][0]["spec"].startswith("openmpi@5.0.7")
    assert "ucx" not in scope["packages"]  # not built: the machine's MPI brings its own


def test_local_without_gpus_reuses_the_machine_mpi(tmp_path: Path) -> None:
    scope = spack_config.derive(shapes.load("local"), _machine(tmp_path), {},
                                fake_root(tmp_path / "root", xpmem=True))
    assert scope["packages"]["openmpi"]["externals"]
    assert "ucx" not in scope["packages"]
    # a CUDA toolkit but no GPU: nothing for nvbandwidth to measure
    specs = scope["definitions"][0][spack_config.SPECS_DEFINITION]
    assert any(s.startswith("cuda ") for s in specs)
    assert not any(s.startswith(("nvbandwidth", "babelstream")) for s in specs)


def test_local_gpu_node_without_any_mpi_builds_one(tmp_path: Path) -> None:
    scope = _derive_local(tmp_path, fake_root(tmp_path / "root"), mpi="")
    assert "+cuda" in scope["packages"]["openmpi"]["require"][0].split()


@pytest.mark.parametrize("static, found", [(True, True), (False, False)])
def test_boost_for_nvbandwidth_is_the_systems_where_it_has_program_options(
        tmp_path: Path, static: bool, found: bool) -> None:
    (tmp_path / "usr/include/boost").mkdir(parents=True)
    (tmp_path / "usr/include/boost/version.hpp").write_text(
        '#define BOOST_VERSION 107400\n#define BOOST_LIB_VERSION "1_74"\n')
    libdir = tmp_path / "usr/lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    (libdir / "libboost_program_options.so").write_text("")
    if static:  # nvbandwidth links Boost statically (its CMakeLists, but on Fedora)
        (libdir / "libboost_program_options.a").write_text("")
    expected = {"spec": "boost@1.74.0 +program_options", "prefix": "/usr"} if found else None
    assert machine.detect_boost(tmp_path) == expected


def test_gpu_shape_without_cuda_is_an_error() -> None:
    with pytest.raises(spack_config.SpackConfigError, match="needs software.externals.cuda"):
        _derive("BM.GPU4.8", lambda d: d["software"]["externals"].pop("cuda"))


def test_unknown_compiler_is_an_error() -> None:
    def edit(data):
        data["software"]["compilers"] = [{"spec": "fancycc@1.0", "prefix": "/opt/fancy"}]

    with pytest.raises(spack_config.SpackConfigError, match="fancycc"):
        _derive("BM.GPU4.8", edit)


def test_build_entry_sets_compiler_and_variants() -> None:
    def edit(data):
        data["software"]["build"] = {"stream": {"compiler": "aocc@5.0.0",
                                                "variants": "stream_array_size=123 +nt_store"}}

    req = _derive("BM.Standard.E5.192", edit)["packages"]["stream"]["require"][0].split()
    assert {"%aocc@5.0.0", "stream_array_size=123", "+nt_store", "@5.10"} <= set(req)
    # whatever follows %compiler would constrain the compiler, not stream
    assert req[-1] == "%aocc@5.0.0"


def test_cli_unknown_shape_lists_known_ones() -> None:
    done = subprocess.run([sys.executable, "-m", "ocibench.cli", "spack-config", "--shape", "BM.Nope"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "BM.Nope" in done.stderr and "BM.GPU4.8" in done.stderr and "local" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _real_nvcc() -> Path | None:
    for candidate in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file():
            toolkit = machine.toolkit_of(Path(candidate))
            if toolkit:
                return toolkit / "bin" / "nvcc"
    return None


def _wrapper_prefix(tmp_path: Path, body: str) -> Path:
    """A prefix whose bin/nvcc is a shell wrapper, as some images put in /usr/local/bin."""
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.write_text(f"#!/bin/sh\n{body}\n")
    wrapper.chmod(0o755)
    return tmp_path


def test_cuda_behind_an_nvcc_wrapper_resolves_to_its_toolkit(tmp_path: Path) -> None:
    nvcc = _real_nvcc()
    if nvcc is None:
        pytest.skip("no CUDA toolkit on this machine: nothing for a wrapper to run")
    prefix = _wrapper_prefix(tmp_path, f'exec {nvcc} "$@"')
    found = machine._clean_detected({"cuda": [{"spec": "cuda@13.0.88", "prefix": str(prefix)}]})
    assert found["cuda"] == [{"spec": "cuda@13.0.88", "prefix": str(nvcc.parent.parent)}]


def test_nvcc_wrapper_that_names_no_toolkit_is_an_error(tmp_path: Path) -> None:
    prefix = _wrapper_prefix(tmp_path, "echo 'nvcc: release 13.0'")
    with pytest.raises(machine.MachineError, match="does not name its toolkit"):
        machine._clean_detected({"cuda": [{"spec": "cuda@13.0.88", "prefix": str(prefix)}]})


# --------------------------------------------------------------------------- Spack


def _spack_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OCIBENCH_SHAPE"}
    env.setdefault("SPACK_PYTHON", sys.executable)
    return env


@pytest.fixture(scope="session")
def env_dir(spack_exe: Path, tmp_path_factory) -> Path:
    """A private copy of the environment (same spack.yaml, packages.yaml, modules.yaml,
    package repo) with freshly generated shape scopes: concretizing here never touches
    the checkout's spack.lock or generated files."""
    root = tmp_path_factory.mktemp("spack-env")
    for name in ENV_FILES:
        shutil.copy(REPO_ROOT / name, root / name)
    (root / "repos").symlink_to(REPO_ROOT / "repos")
    generated = root / "site" / "spack" / "generated"
    # This machine's Spack detection as `make setup` cached it: the same machine, and
    # detection need not run again (tests/test_bundle.py runs it on a cold Spack).
    detected = spack_config.GENERATED_DIR / machine.MACHINE_FILE
    if detected.is_file():
        generated.mkdir(parents=True)
        shutil.copy(detected, generated / machine.MACHINE_FILE)
    written = spack_config.write(None, generated, detected=shapes.detect())
    assert len(written) == len(SHAPES) + 1
    return root


class ConcretizerPool:
    """Concretize every shape at most `workers` at a time; results on demand."""

    def __init__(self, spack_exe: Path, env_dir: Path, workers: int) -> None:
        self.spack_exe, self.env_dir = spack_exe, env_dir
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.futures: dict[str, Future] = {}

    def start(self) -> None:
        # GPU and E5 shapes first: they carry most of the assertions
        for shape in sorted(CONCRETIZED, key=lambda s: (s not in GPU_SHAPES, s)):
            self.futures[shape] = self.pool.submit(self._run, shape)

    def _run(self, shape: str) -> subprocess.CompletedProcess:
        script = Path(spack_config.__file__).with_name("scripts") / "concretize.py"
        done = subprocess.run(
            [str(self.spack_exe), "-e", str(self.env_dir), "python", str(script)],
            env={**_spack_env(), "OCIBENCH_SHAPE": shape},
            capture_output=True, text=True, timeout=CONCRETIZE_TIMEOUT_S)
        # kept beside the private environment, for a look after the session
        (self.env_dir / f"concretized-{shape}.json").write_text(done.stdout)
        return done

    def result(self, shape: str) -> concretized_stack.Roots:
        done = self.futures[shape].result()
        assert done.returncode == 0, f"{shape} does not concretize:\n{done.stderr[-3000:]}"
        return concretized_stack.roots_by_name(done.stdout)


@pytest.fixture(scope="session")
def concretizer(spack_exe: Path, env_dir: Path):
    pool = ConcretizerPool(spack_exe, env_dir, workers=max(1, min(3, os.cpu_count() or 1)))
    pool.start()
    yield pool
    pool.pool.shutdown(cancel_futures=True)


@pytest.mark.spack
def test_environment_config_validates(spack_exe: Path, env_dir: Path,
                                      concretizer: ConcretizerPool) -> None:
    """Spack checks a section of every scope against its schema when it reads it
    (packages, definitions, repos and concretizer are read by the concretization).
    `concretizer`: its solves start first, and these Spack starts run beside them."""
    # both sections in one Spack start per shape (reading a section validates it);
    # `spack python -c` compiles one line
    read = "import spack.config; _ = [spack.config.get(s) for s in ('modules', 'env_vars')]"
    for shape in SHAPES:
        done = subprocess.run([str(spack_exe), "-e", str(env_dir), "python", "-c", read],
                              env={**_spack_env(), "OCIBENCH_SHAPE": shape},
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{shape} modules, env_vars: {done.stderr}"
    done = subprocess.run([str(spack_exe), "-e", str(env_dir), "config", "get", "definitions"],
                          env=_spack_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    detected_specs = yaml.safe_load(done.stdout)["definitions"][0][spack_config.SPECS_DEFINITION]
    target = shapes.load(shapes.detect()).cpu["spack_target"]
    assert all(s.endswith(f"target={target}") for s in detected_specs)


@pytest.mark.spack
def test_unknown_shape_fails_in_spack_naming_it(spack_exe: Path, env_dir: Path) -> None:
    done = subprocess.run([str(spack_exe), "-e", str(env_dir), "config", "get", "definitions"],
                          env={**_spack_env(), "OCIBENCH_SHAPE": "BM.NoSuchShape"},
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "shapes/BM.NoSuchShape.yaml" in done.stderr
    assert "does not exist" in done.stderr


@pytest.mark.spack
@pytest.mark.parametrize("shape", CONCRETIZED)
def test_concretizes(concretizer: ConcretizerPool, shape: str) -> None:
    concretized_stack.assert_stack(shape, concretizer.result(shape))


@pytest.mark.spack
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_gpu_shape_concretizes_gpu_aware(concretizer: ConcretizerPool, shape: str) -> None:
    """Open MPI, UCX and OMB take the vendor's device buffers, OMB and the collective
    tests the shape's target and the image's toolkit and collective library (the
    vendor's row: +cuda/NCCL on NVIDIA, +rocm/RCCL on AMD)."""
    roots = concretizer.result(shape)
    data = shapes.load(shape)
    vendor = accelerators.of(data.gpus)
    arch = data.gpus["arch"]
    aware = vendor.spack_variant.lstrip("+")
    ompi = roots["openmpi"][0]
    assert variants(ompi)[aware] is True
    assert variants(ompi)["schedulers"] == ["slurm"]
    assert ompi["deps"]["ucx"]["variants"][aware] is True  # device buffers across nodes
    omb = roots["osu-micro-benchmarks"][0]
    assert omb["version"] == "7.5.1"  # seeds 000, 002
    assert variants(omb)[aware] is True
    assert variants(omb)[vendor.collective_variant.lstrip("+")] is True
    assert variants(omb)[vendor.spack_arch_variant] == [arch]
    tests = roots[vendor.collective_tests_package][0]
    assert variants(tests)["mpi"] is True
    if vendor.spack_arch(arch) in vendor.recipe_variants(vendor.collective_tests_package, arch):
        assert variants(tests)[vendor.spack_arch_variant] == [arch]
    externals = data.data["software"]["externals"]
    for package in (vendor.toolkit_packages[0], vendor.collective_package):
        version = externals[package]["spec"].split("@")[1]
        for root in (omb, tests):
            dep = root["deps"][package]
            assert dep["external"] and dep["version"] == version, (root["name"], package)


@pytest.mark.spack
@pytest.mark.parametrize("shape", sorted(TECH_TIP_UCX))
def test_transport_stack_concretizes_as_the_tech_tips(concretizer: ConcretizerPool,
                                                      shape: str) -> None:
    """Open MPI over UCX 1.19.0 with the tech tips' transports, GDRCopy 2.5.1 and UCC
    1.5.0, and the nodes' own XPMEM library (an external, not built)."""
    roots = concretizer.result(shape)
    ompi = roots["openmpi"][0]
    assert variants(ompi)["fabrics"] == ["ucc", "ucx"]
    ucx = ompi["deps"]["ucx"]
    assert ucx["version"] == "1.19.0"
    on = {k for k, v in ucx["variants"].items() if v is True} & UCX_SWITCHES
    assert on == TECH_TIP_UCX[shape], f"ucx {sorted(on)}"
    ucc = ompi["deps"]["ucc"]
    assert ucc["version"] == "1.5.0"
    assert ompi["deps"]["xpmem"]["external"]
    gpu = "cuda" in TECH_TIP_UCX[shape]
    assert variants(ompi)["cuda"] is gpu
    assert ucc["variants"]["cuda"] is gpu and ucc["variants"].get("nccl", False) is gpu
    if gpu:
        gdrcopy = ompi["deps"]["gdrcopy"]
        assert gdrcopy["version"] == "2.5.1" and not gdrcopy["external"]
        assert gdrcopy["variants"]["cuda_arch"] == [shapes.load(shape).gpus["arch"]]
        assert "check" not in ompi["deps"]  # our gdrcopy: no libcheck from 2.5 on
        assert "gdrcopy" in roots and "nvbandwidth" in roots
    else:
        assert "gdrcopy" not in ompi["deps"] and "nvbandwidth" not in roots


@pytest.mark.spack
def test_optimized3_builds_imb_with_both_mpis(concretizer: ConcretizerPool) -> None:
    roots = concretizer.result("BM.Optimized3.36")
    mpis = sorted(next(d for d in r["deps"] if d in spack_config.MPI_PACKAGES)
                  for r in roots["intel-mpi-benchmarks"])
    assert mpis == ["intel-oneapi-mpi", "openmpi"]  # seed 004 sec 1 and 2
    assert roots["intel-oneapi-mpi"][0]["version"].startswith("2021.10")
    assert "cuda" not in roots and "nccl-tests" not in roots


@pytest.mark.spack
def test_e5_stream_is_seed_001s(concretizer: ConcretizerPool) -> None:
    roots = concretizer.result("BM.Standard.E5.192")
    stream = roots["stream"][0]
    assert stream["version"] == "5.10"
    for key, value in E5_STREAM.items():
        assert variants(stream).get(key) == value, f"stream {key}={variants(stream).get(key)}"
    assert [c.split("@")[0] for c in stream["compilers"]] == ["aocc"]
    assert stream["compilers"][0].split("@")[1].startswith("5.")


def test_local_without_a_detected_open_mpi_stops_naming_it(tmp_path, monkeypatch) -> None:
    """Spack's detection once dropped the machine's Open MPI (a cold Spack); a local
    shape without GPUs, which reuses the machine's MPI, must then stop, not plan Open
    MPI from source offline, and say which of three cases it is: Spack dropped it (and
    why), Spack did not report the mpicc on PATH, or there is none to install."""
    import dataclasses

    from ocibench import shapes
    from ocibench.node import machine
    from ocibench.spack import scopes as spack_config

    gcc = {"spec": "gcc@13.3.0 languages:=c,c++,fortran", "prefix": "/usr",
           "extra_attributes": {"compilers": {"c": "/usr/bin/gcc", "cxx": "/usr/bin/g++",
                                              "fortran": "/usr/bin/gfortran"}}}
    local = shapes.load("local")
    no_gpus = dataclasses.replace(local, data={k: v for k, v in local.data.items()
                                               if k != "gpus"})
    with pytest.raises(spack_config.SpackConfigError,
                       match=r"dropped this machine's Open MPI \(timeout reached\).*make setup"):
        spack_config.gather(no_gpus, machine.Machine({"gcc": [gcc]},
                                                     {"openmpi": "timeout reached"}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(spack_config.SpackConfigError,
                       match="found no Open MPI on this machine.*apt-get install openmpi-bin"):
        spack_config.gather(no_gpus, machine.Machine({"gcc": [gcc]}))
    (bin_dir / "mpicc").write_text("#!/bin/sh\n")
    (bin_dir / "mpicc").chmod(0o755)
    with pytest.raises(spack_config.SpackConfigError,
                       match=f"did not report the Open MPI of {bin_dir / 'mpicc'}.*make setup"):
        spack_config.gather(no_gpus, machine.Machine({"gcc": [gcc]}))


def test_a_cached_detection_keeps_what_spack_dropped(tmp_path) -> None:
    """machine.json keeps Spack's reasons for what it dropped beside the externals, and
    a file written before (externals only) still loads."""
    from ocibench.node import machine

    gcc = [{"spec": "gcc@13.3.0", "prefix": "/usr"}]
    (tmp_path / machine.MACHINE_FILE).write_text(json.dumps(
        {"externals": {"gcc": gcc}, "skipped": {"openmpi": "timeout reached"}}))
    found = machine.detect_machine(tmp_path)
    assert found.externals == {"gcc": gcc} and found.skipped == {"openmpi": "timeout reached"}
    (tmp_path / machine.MACHINE_FILE).write_text(json.dumps({"gcc": gcc}))
    found = machine.detect_machine(tmp_path)
    assert found.externals == {"gcc": gcc} and found.skipped == {}
