"""GDRCopy and UCX as the `local` shape builds them on a GPU node, built for real here.

What a GPU node's `local` scope asks for (tests/gpu_node.py: this machine's compilers
and externals, plus GPUs; ocibench.spack_config derives the rest) is concretized and
installed with the pinned Spack in a private environment: GDRCopy 2.5.1 (library and
tools; the gdrdrv kernel module is the node's and is not built) and UCX 1.19.0 +cuda
+gdrcopy +cma.  A machine with a CUDA toolkit and no GPU compiles and links them
(`-lcuda` from the toolkit's stub), as it does OMB +cuda.  Then the module tree of
that environment must give gdrcopy's tools, alone and through `module load ucx`.

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
from ocibench import machine, paths, spack_config

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


@pytest.fixture(scope="module")
def built(spack_exe: Path, tmp_path_factory) -> dict[str, Path]:
    """Install gdrcopy and UCX from the derived scope; their prefixes and the tree."""
    if not shutil.which("nvcc") and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no CUDA toolkit (nvcc) on this machine: UCX +cuda cannot build")
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
    tree = tmp / "modules"
    (env / "spack.yaml").write_text(yaml.safe_dump({"spack": {
        "include": ["local.yaml", "modules.yaml"],
        "repos": {"ocibench": str(paths.REPO_ROOT / "repos" / "spack_repo" / "ocibench")},
        "specs": ["ucx", "gdrcopy"],
        "view": False,
        "concretizer": {"unify": True, "reuse": True},
        # this environment's module tree, never the shape's real one
        "modules": {"default": {"roots": {"lmod": str(tree)}}},
    }}, sort_keys=False))
    environ = {**os.environ, "SPACK_PYTHON": os.environ.get("SPACK_PYTHON", sys.executable)}
    environ.pop("SPACK_ENV", None)

    def spack(*args: str, timeout: int = 600) -> str:
        done = subprocess.run([str(spack_exe), "-e", str(env), *args], capture_output=True,
                              text=True, env=environ, timeout=timeout)
        assert done.returncode == 0, (
            f"spack {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    spack("concretize", "--force", timeout=1200)
    jobs = os.environ.get("OCIBENCH_JOBS") or str(os.cpu_count() or 1)
    spack("install", "--fail-fast", "-j", jobs, timeout=BUILD_TIMEOUT_S)
    spack("module", "lmod", "refresh", "--delete-tree", "-y")
    prefixes = {}
    for name in ("ucx", "gdrcopy"):
        prefixes[name] = Path(spack("find", "--format", "{prefix}", name).strip().splitlines()[0])
    prefixes["tree"] = tree
    return prefixes


def _ldd(binary: Path) -> str:
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    return done.stdout + done.stderr


def test_gdrcopy_library_and_tools_are_installed(built) -> None:
    prefix = built["gdrcopy"]
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


def test_ucx_is_built_with_cuda_gdrcopy_and_cma(built) -> None:
    prefix = built["ucx"]
    info = subprocess.run([str(prefix / "bin" / "ucx_info"), "-b"], capture_output=True,
                          text=True, timeout=60)
    assert info.returncode == 0, info.stderr
    modules = dict(re.findall(r'#define (uct\w*_MODULES)\s+"([^"]*)"', info.stdout))
    assert "cma" in modules.get("uct_MODULES", "").split(":"), modules
    assert {"cuda", "gdrcopy"} <= set(modules.get("uct_cuda_MODULES", "").split(":")), modules
    gdr = prefix / "lib" / "ucx" / "libuct_cuda_gdrcopy.so"
    assert gdr.is_file(), f"no {gdr}"
    # UCX's gdr_copy transport loads this build's GDRCopy
    assert str(built["gdrcopy"]) in _ldd(gdr), _ldd(gdr)
    assert (prefix / "lib" / "ucx" / "libuct_cma.so").is_file()


def test_gdrcopy_tools_come_with_the_ucx_module(built, lmod_init: Path) -> None:
    """`module load ucx` (what `module load openmpi` autoloads) brings gdrcopy's tools,
    as ocibench preflight runs gdrcopy_sanity from PATH."""
    core = built["tree"] / "Core"
    script = (f"source {lmod_init}\nmodule use {core}\nmodule load ucx\n"
              + "".join(f"command -v {t} || echo MISSING {t}\n"
                        for t in ("gdrcopy_sanity", "gdrcopy_copylat", "gdrcopy_copybw"))
              + "module -t list 2>&1\n")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], capture_output=True,
                          text=True, timeout=120,
                          env={"HOME": os.environ.get("HOME", "/root"),
                               "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "MISSING" not in done.stdout, done.stdout + done.stderr
    assert str(built["gdrcopy"] / "bin" / "gdrcopy_sanity") in done.stdout
    assert re.search(r"^gdrcopy/2\.5\.1$", done.stdout + done.stderr, re.M), done.stdout
