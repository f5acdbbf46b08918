"""GDRCopy and UCX as the `local` shape builds them on a GPU node, built for real here.

What a GPU node's `local` scope asks for (tests/gpu_node.py: this machine's compilers
and externals, plus GPUs; ocibench.spack.scopes derives the rest) is concretized and
installed with the pinned Spack in a private environment (its own install tree, the
user's as a read-only upstream: tests/private_checkout.py): GDRCopy 2.5.1 (library and
tools; the gdrdrv kernel module is the node's and is not built) and UCX 1.19.0 +cuda
+gdrcopy +cma.  A machine with a CUDA toolkit and no GPU compiles and links them
(`-lcuda` from the toolkit's stub), as it does OMB +cuda.  Then the module tree of
that environment must give gdrcopy's tools, alone and through `module load ucx`.
UCX 1.19's configure --with-cuda also needs NVML (nvml.h, libnvidia-ml): a CUDA
toolkit without its cuda-nvml-dev component (one assembled from NVIDIA's pip wheels)
and no driver SKIPS the UCX tests, saying so.

Sources, offline: gdrcopy 2.5.1 in the source mirror with the recipe's sha256, UCX
1.19.0 as a develop source; both from git snapshots through
scripts/mirror-from-checkouts.sh (docs/spack-env.md, "Air-gapped sites").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpu_node import fake_root, local_with_gpus
from ocibench import paths
from ocibench.node import machine
from ocibench.spack import scopes as spack_config
from private_checkout import private_spack_scope

pytestmark = pytest.mark.install

BUILD_TIMEOUT_S = 2 * 3600
#: gdrcopy 2.5.1's sha256 in Spack's builtin recipe (GitHub's archive of tag v2.5.1).
GDRCOPY_SHA256 = "c6d5ebb7dabb89d798f27609511735595004da73af28d93ac041bb5290c4cbec"
#: What `make exes_install` of gdrcopy 2.5.1 installs (tests/Makefile).
GDRCOPY_TOOLS = ("gdrcopy_sanity", "gdrcopy_copylat", "gdrcopy_copybw", "gdrcopy_apiperf",
                 "gdrcopy_pplat")
HOW = ("scripts/mirror-from-checkouts.sh --shape local "
       "gdrcopy=<NVIDIA/gdrcopy git>#v2.5.1 ucx=<openucx/ucx git>#v1.19.0")


def _sources_or_skip() -> None:
    tarball = (paths.source_mirror() / "_source-cache" / "archive" / GDRCOPY_SHA256[:2]
               / f"{GDRCOPY_SHA256}.tar.gz")
    if not tarball.is_file():
        pytest.skip(f"no gdrcopy 2.5.1 source in the mirror ({tarball}): {HOW}")
    develop = spack_config.LOCAL_DEVELOP_DIR / "local.yaml"
    entries = (yaml.safe_load(develop.read_text()) or {}).get("develop", {}) \
        if develop.is_file() else {}
    ucx = entries.get("ucx", {})
    if ucx.get("spec") != "ucx@=1.19.0" or not (Path(ucx.get("path", "")) / "configure").is_file():
        pytest.skip(f"no UCX 1.19.0 develop source with a configure script in {develop}: {HOW}")


class StackEnv:
    """A private Spack environment of the derived scope, with its own module tree."""

    def __init__(self, spack_exe: Path, root: Path, cuda_prefix: Path) -> None:
        self.spack_exe, self.root, self.cuda_prefix = spack_exe, root, cuda_prefix
        self.tree = root / "modules"
        # a private install tree, the user's as a read-only upstream: nothing the user
        # installed changes (conftest.py checks), what they built is reused
        self.environ = {**os.environ,
                        "SPACK_PYTHON": os.environ.get("SPACK_PYTHON", sys.executable),
                        "SPACK_USER_CONFIG_PATH": str(private_spack_scope(root))}
        self.environ.pop("SPACK_ENV", None)

    def spack(self, *args: str, timeout: int = 600) -> str:
        done = subprocess.run([str(self.spack_exe), "-e", str(self.root / "env"), *args],
                              capture_output=True, text=True, env=self.environ,
                              timeout=timeout)
        assert done.returncode == 0, (
            f"spack {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    def install(self, name: str) -> Path:
        """Install one root of the environment and refresh the module tree; its prefix."""
        jobs = os.environ.get("OCIBENCH_JOBS") or str(os.cpu_count() or 1)
        self.spack("install", "--fail-fast", "-j", jobs, name, timeout=BUILD_TIMEOUT_S)
        # --upstream-modules, as scripts/install.sh: what is reused from the user's tree
        # (the toolkit's external included) gets its module in this tree too
        self.spack("module", "lmod", "refresh", "--delete-tree", "--upstream-modules", "-y")
        return Path(self.spack("find", "--format", "{prefix}", name).strip().splitlines()[0])


@pytest.fixture(scope="module")
def stack_env(spack_exe: Path, tmp_path_factory) -> StackEnv:
    """The environment, concretized: what `local` builds on a GPU node (gdrcopy, UCX)."""
    if not shutil.which("nvcc") and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no CUDA toolkit (nvcc) on this machine: gdrcopy and UCX +cuda need one")
    _sources_or_skip()
    found = machine.detect_machine(spack_config.GENERATED_DIR)
    if not found.has("cuda"):
        pytest.skip("Spack's detection found no CUDA toolkit here (make setup)")
    tmp = tmp_path_factory.mktemp("stack-build")
    scope = spack_config.derive(local_with_gpus(), found, machine.detect_tools(),
                                fake_root(tmp / "root"))
    wanted = scope["packages"]["ucx"]["require"][0].split()
    assert {"+cuda", "+gdrcopy", "+cma"} <= set(wanted), wanted
    env = tmp / "env"
    env.mkdir()
    (env / "local.yaml").write_text(spack_config.render("local", scope))
    shutil.copy(paths.REPO_ROOT / "modules.yaml", env / "modules.yaml")
    (env / "spack.yaml").write_text(yaml.safe_dump({"spack": {
        "include": ["local.yaml", "modules.yaml"],
        "repos": {"ocibench": str(paths.REPO_ROOT / "repos" / "spack_repo" / "ocibench")},
        "specs": ["ucx", "gdrcopy"],
        "view": False,
        "concretizer": {"unify": True, "reuse": True},
        # this environment's module tree, never the shape's real one
        "modules": {"default": {"roots": {"lmod": str(tmp / "modules")}}},
    }}, sort_keys=False))
    stack = StackEnv(spack_exe, tmp, Path(found.externals["cuda"][0]["prefix"]))
    stack.spack("concretize", "--force", timeout=1200)
    return stack


@pytest.fixture(scope="module")
def gdrcopy(stack_env: StackEnv) -> Path:
    return stack_env.install("gdrcopy")


def _nvml_or_skip(cuda: Path) -> None:
    """UCX 1.19's configure --with-cuda requires NVML: nvml.h and libnvidia-ml
    (config/m4/cuda.m4: "nvml header not found", "libnvidia-ml not found"), which a
    CUDA toolkit has from its cuda-nvml-dev component (lib64/stubs/libnvidia-ml.so)
    and a GPU node from its driver."""
    headers = [cuda / "include" / "nvml.h", Path("/usr/include/nvml.h")]
    libs = [cuda / d / "libnvidia-ml.so" for d in ("lib64/stubs", "lib/stubs", "lib64", "lib")]
    ldconfig = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    if not any(h.is_file() for h in headers):
        pytest.skip(f"the CUDA toolkit at {cuda} has no nvml.h (its cuda-nvml-dev component), "
                    "which UCX 1.19 +cuda's configure requires")
    if not any(lib.exists() for lib in libs) and "libnvidia-ml.so " not in ldconfig:
        pytest.skip(f"no libnvidia-ml (the toolkit's stub in {cuda}/lib64/stubs or the "
                    "driver's), which UCX 1.19 +cuda's configure requires")


@pytest.fixture(scope="module")
def ucx(stack_env: StackEnv, gdrcopy: Path) -> Path:
    _nvml_or_skip(stack_env.cuda_prefix)
    return stack_env.install("ucx")


def fresh_module_shell(lmod_init: Path, tree: Path, body: str) -> subprocess.CompletedProcess:
    """bash with nothing but Lmod and this tree's Core level on MODULEPATH."""
    script = f"source {lmod_init}\nmodule use {tree / 'Core'}\n{body}\nmodule -t list 2>&1\n"
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", script], capture_output=True,
                          text=True, timeout=120,
                          env={"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin"})


def _ldd(binary: Path) -> str:
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    return done.stdout + done.stderr


def test_gdrcopy_library_and_tools_are_installed(gdrcopy: Path) -> None:
    prefix = gdrcopy
    libs = list(prefix.glob("lib*/libgdrapi.so*"))
    assert libs, f"no libgdrapi in {prefix}"
    for tool in GDRCOPY_TOOLS:
        exe = prefix / "bin" / tool
        assert exe.is_file() and os.access(exe, os.X_OK), f"{exe} missing"
        # linked against this build's library, not some other libgdrapi
        assert str(prefix) in _ldd(exe) or "libgdrapi" not in _ldd(exe), _ldd(exe)
    assert "libgdrapi.so" in _ldd(prefix / "bin" / "gdrcopy_sanity")
    # the kernel module is the node's (gpu-with-ubuntu sec 3-1 loads it by a service)
    assert not list(prefix.rglob("gdrdrv.ko")), "gdrcopy built its kernel module"


def test_gdrcopy_module_puts_its_tools_on_path(stack_env: StackEnv, gdrcopy: Path,
                                              lmod_init: Path) -> None:
    """`module load gdrcopy`: the tools ocibench preflight runs (gdrcopy_sanity)."""
    done = fresh_module_shell(lmod_init, stack_env.tree, "module load gdrcopy\n" + "".join(
        f"command -v {t} || echo MISSING {t}\n" for t in GDRCOPY_TOOLS))
    assert done.returncode == 0, done.stderr
    assert "MISSING" not in done.stdout, done.stdout + done.stderr
    assert str(gdrcopy / "bin" / "gdrcopy_sanity") in done.stdout
    assert re.search(r"^gdrcopy/2\.5\.1$", done.stdout + done.stderr, re.M), done.stdout


def test_ucx_is_built_with_cuda_gdrcopy_and_cma(ucx: Path, gdrcopy: Path) -> None:
    info = subprocess.run([str(ucx / "bin" / "ucx_info"), "-b"], capture_output=True,
                          text=True, timeout=60)
    assert info.returncode == 0, info.stderr
    modules = dict(re.findall(r'#define (uct\w*_MODULES)\s+"([^"]*)"', info.stdout))
    assert "cma" in modules.get("uct_MODULES", "").split(":"), modules
    assert {"cuda", "gdrcopy"} <= set(modules.get("uct_cuda_MODULES", "").split(":")), modules
    gdr = ucx / "lib" / "ucx" / "libuct_cuda_gdrcopy.so"
    assert gdr.is_file(), f"no {gdr}"
    # UCX's gdr_copy transport loads this build's GDRCopy
    assert str(gdrcopy) in _ldd(gdr), _ldd(gdr)
    assert (ucx / "lib" / "ucx" / "libuct_cma.so").is_file()


def test_ucx_module_brings_gdrcopy_tools(stack_env: StackEnv, ucx: Path, gdrcopy: Path,
                                         lmod_init: Path) -> None:
    """`module load ucx` (what `module load openmpi` autoloads) brings gdrcopy along."""
    done = fresh_module_shell(lmod_init, stack_env.tree,
                              "module load ucx\ncommand -v gdrcopy_sanity || echo MISSING")
    assert done.returncode == 0, done.stderr
    assert str(gdrcopy / "bin" / "gdrcopy_sanity") in done.stdout, done.stdout + done.stderr
