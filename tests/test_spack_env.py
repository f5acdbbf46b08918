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

from ocibench import machine, paths, shapes, spack_config
from ocibench.paths import REPO_ROOT

ENV_FILES = ("spack.yaml", "packages.yaml", "modules.yaml")
SHAPES = shapes.known_shapes()
DOCUMENTED = [s for s in SHAPES if s.startswith("BM.")]
GPU_SHAPES = [s for s in DOCUMENTED if shapes.load(s).gpus]
CONCRETIZE_TIMEOUT_S = 1800

#: seed 001 sec 2: clang -DSTREAM_TYPE=double -DSTREAM_ARRAY_SIZE=430080000 -O3
#: -mcmodel=large -fopenmp -fnt-store, with AOCC 5.0 (sec 0).
E5_STREAM = {"array_size": "430080000", "nt_store": True, "type": "double", "openmp": True}


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
    assert spack_config.module_name("osu-micro-benchmarks") == "omb"
    assert spack_config.module_name("intel-mpi-benchmarks") == "imb"
    assert spack_config.module_name("openmpi") == "openmpi"
    assert spack_config.module_name("nccl-tests") == "nccl-tests"
    assert spack_config.module_name("stream") == "stream"


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
def test_gpu_scope_builds_cuda_aware(name: str) -> None:
    arch = shapes.load(name).gpus["cuda_arch"]
    scope = _derive(name)
    pkgs = scope["packages"]
    assert {"+cuda", "fabrics=ucx", "schedulers=slurm"} <= set(pkgs["openmpi"]["require"][0].split())
    assert {"+cuda", "+nccl", f"cuda_arch={arch}"} <= set(
        pkgs["osu-micro-benchmarks"]["require"][0].split())
    assert f"cuda_arch={arch}" in pkgs["nccl-tests"]["require"][0]
    assert "+cuda" in pkgs["ucx"]["require"][0]
    specs = " ".join(scope["definitions"][0][spack_config.SPECS_DEFINITION])
    assert "nccl-tests ^openmpi" in specs and "cuda " in specs and "nccl " in specs


def test_cpu_shape_has_no_gpu_specs() -> None:
    scope = _derive("BM.Optimized3.36")
    specs = scope["definitions"][0][spack_config.SPECS_DEFINITION]
    assert not any(s.startswith(("nccl-tests", "cuda", "nccl ")) for s in specs)
    assert "+cuda" not in scope["packages"]["openmpi"]["require"][0]
    # seed 004: IMB once with OpenMPI, once with Intel MPI
    assert "intel-mpi-benchmarks ^openmpi target=icelake" in specs
    assert "intel-mpi-benchmarks ^intel-oneapi-mpi target=icelake" in specs


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
                                                "variants": "array_size=123 +nt_store"}}

    req = _derive("BM.Standard.E5.192", edit)["packages"]["stream"]["require"][0].split()
    assert {"%aocc@5.0.0", "array_size=123", "+nt_store", "@5.10"} <= set(req)
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
            toolkit = machine.cuda_toolkit_of(Path(candidate))
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
        for shape in sorted(SHAPES, key=lambda s: (s not in GPU_SHAPES, s)):
            self.futures[shape] = self.pool.submit(self._run, shape)

    def _run(self, shape: str) -> subprocess.CompletedProcess:
        script = Path(spack_config.__file__).with_name("spack_scripts") / "concretize.py"
        done = subprocess.run(
            [str(self.spack_exe), "-e", str(self.env_dir), "python", str(script)],
            env={**_spack_env(), "OCIBENCH_SHAPE": shape},
            capture_output=True, text=True, timeout=CONCRETIZE_TIMEOUT_S)
        # kept beside the private environment, for a look after the session
        (self.env_dir / f"concretized-{shape}.json").write_text(done.stdout)
        return done

    def result(self, shape: str) -> dict[str, list[dict[str, Any]]]:
        done = self.futures[shape].result()
        assert done.returncode == 0, f"{shape} does not concretize:\n{done.stderr[-3000:]}"
        roots: dict[str, list[dict[str, Any]]] = {}
        for root in json.loads(done.stdout):
            roots.setdefault(root["name"], []).append(root)
        return roots


@pytest.fixture(scope="session")
def concretizer(spack_exe: Path, env_dir: Path):
    pool = ConcretizerPool(spack_exe, env_dir, workers=max(1, min(3, os.cpu_count() or 1)))
    pool.start()
    yield pool
    pool.pool.shutdown(cancel_futures=True)


@pytest.mark.spack
def test_environment_config_validates(spack_exe: Path, env_dir: Path) -> None:
    """Spack checks a section of every scope against its schema when it reads it
    (packages, definitions, repos and concretizer are read by the concretization)."""
    for shape in SHAPES:
        for section in ("modules", "env_vars"):
            done = subprocess.run([str(spack_exe), "-e", str(env_dir), "config", "get", section],
                                  env={**_spack_env(), "OCIBENCH_SHAPE": shape},
                                  capture_output=True, text=True)
            assert done.returncode == 0, f"{shape} {section}: {done.stderr}"
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


def _variants(root: dict[str, Any]) -> dict[str, Any]:
    return root["variants"]


@pytest.mark.spack
@pytest.mark.parametrize("shape", SHAPES)
def test_concretizes(concretizer: ConcretizerPool, shape: str) -> None:
    roots = concretizer.result(shape)
    data = shapes.load(shape)
    target = data.cpu["spack_target"]
    for name, found in roots.items():
        for root in found:
            assert root["target"] == target, f"{name} built for {root['target']}, not {target}"
    # every stack package is a root (nccl-tests only with CUDA)
    has_cuda = "cuda" in roots
    for pkg in data.data["software"]["stack"]:
        if pkg in spack_config.GPU_ONLY and not has_cuda:
            continue
        assert pkg in roots, f"{pkg} missing from the concretized {shape}"
    # compilers: only the shape's (documented shapes)
    if not spack_config.is_machine_described(data):
        allowed = {c["spec"].split()[0] for c in data.data["software"]["compilers"]}
        for name, found in roots.items():
            for root in found:
                assert set(root["compilers"]) <= allowed, f"{name}: {root['compilers']}"
    # openmpi: UCX-based (seed 002 sec 1), also as the benchmarks' dependency
    ompi = roots["openmpi"][0]
    assert "ucx" in _variants(ompi)["fabrics"]
    for name in ("osu-micro-benchmarks", "intel-mpi-benchmarks"):
        for root in roots.get(name, []):
            if "openmpi" in root["deps"]:
                assert root["deps"]["openmpi"]["version"] == ompi["version"]
    stack = data.data["software"]["stack"]
    if str(stack.get("openmpi", "any")) != "any":
        assert ompi["version"] == str(stack["openmpi"])
    if data.data["scheduler"] == "slurm" and not ompi["external"]:
        assert _variants(ompi)["schedulers"] == ["slurm"]


@pytest.mark.spack
@pytest.mark.parametrize("shape", GPU_SHAPES)
def test_gpu_shape_concretizes_cuda_aware(concretizer: ConcretizerPool, shape: str) -> None:
    roots = concretizer.result(shape)
    data = shapes.load(shape)
    arch = str(data.gpus["cuda_arch"])
    ompi = roots["openmpi"][0]
    assert _variants(ompi)["cuda"] is True
    assert _variants(ompi)["schedulers"] == ["slurm"]
    assert ompi["deps"]["ucx"]["variants"]["cuda"] is True  # device buffers across nodes
    omb = roots["osu-micro-benchmarks"][0]
    assert omb["version"] == "7.5.1"  # seeds 000, 002
    assert _variants(omb)["cuda"] is True and _variants(omb)["nccl"] is True
    assert _variants(omb)["cuda_arch"] == [arch]
    nt = roots["nccl-tests"][0]
    assert _variants(nt)["cuda_arch"] == [arch] and _variants(nt)["mpi"] is True
    cuda = data.data["software"]["externals"]["cuda"]["spec"].split("@")[1]
    nccl = data.data["software"]["externals"]["nccl"]["spec"].split("@")[1]
    for root in (omb, nt):
        assert root["deps"]["cuda"]["external"] and root["deps"]["cuda"]["version"] == cuda
        assert root["deps"]["nccl"]["external"] and root["deps"]["nccl"]["version"] == nccl


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
        assert _variants(stream).get(key) == value, f"stream {key}={_variants(stream).get(key)}"
    assert [c.split("@")[0] for c in stream["compilers"]] == ["aocc"]
    assert stream["compilers"][0].split("@")[1].startswith("5.")


@pytest.mark.spack
def test_local_uses_this_machines_mpi_and_cuda(concretizer: ConcretizerPool) -> None:
    roots = concretizer.result("local")
    assert roots["openmpi"][0]["external"], "local: the machine's MPI is an external"
    cuda = shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()
    if cuda:
        omb = roots["osu-micro-benchmarks"][0]
        assert _variants(omb)["cuda"] and _variants(omb)["nccl"]
        assert omb["deps"]["cuda"]["external"] and omb["deps"]["nccl"]["external"]
        assert "nccl-tests" in roots
    else:
        assert "nccl-tests" not in roots and "cuda" not in roots


def test_local_without_a_detected_open_mpi_stops_naming_it() -> None:
    """Spack's detection once dropped the machine's Open MPI (a timeout on a cold
    Spack); the local shape must then stop, not plan Open MPI from source offline."""
    from ocibench import machine, shapes, spack_config

    cache = spack_config.GENERATED_DIR / machine.MACHINE_FILE
    detected = json.loads(cache.read_text()) if cache.is_file() else None
    if not detected or "gcc" not in detected:
        pytest.skip("no machine detection yet (make setup writes it)")
    without_mpi = machine.Machine({k: v for k, v in detected.items() if k != "openmpi"})
    with pytest.raises(spack_config.SpackConfigError,
                       match="found no Open MPI on this machine.*apt-get install openmpi-bin"):
        spack_config.gather(shapes.load("local"), without_mpi)
