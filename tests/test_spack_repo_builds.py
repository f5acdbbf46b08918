"""Every recipe of our Spack repository (repos/spack_repo/ocibench), built here.

tests/test_spack_repo.py concretizes our recipes; this file runs `spack install` of
each, as the stack builds it on this machine: the `local` scope of a GPU node where
this machine has a CUDA toolkit (tests/gpu_node.py; no GPU is needed to compile and
link), else this machine's own.  The environment is private (its own install tree,
the user's as a read-only upstream: tests/private_checkout.py), its sources those of
the user's cache: the source mirror and the develop sources of
scripts/mirror-from-checkouts.sh (docs/spack-env.md, "Air-gapped sites").

A recipe this machine cannot build is SKIPPED with the reason: its toolchain is not
here (ROCm), the scope takes the machine's own build (an external), a dependency's
configure needs what this toolkit lacks (UCX +cuda and NVML), or a source is not
available offline (naming each, and how to add it).  BabelStream's override once lost
the builtin's CMake builder and never built (issue 31); its install here is the proof.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpu_node import fake_root, local_with_gpus
from ocibench import paths, shapes
from ocibench.node import machine
from ocibench.spack import scopes as spack_config
from private_checkout import private_spack_scope

pytestmark = pytest.mark.install

REPO = paths.REPO_ROOT / "repos" / "spack_repo" / "ocibench"
PROBE = Path(__file__).with_name("spack_repo_probe.py")
RECIPES = sorted(p.parent.name.replace("_", "-") for p in (REPO / "packages").glob("*/package.py"))

#: Built (and run) with the local stack of `make install` by tests/test_local_install.py.
LOCAL_STACK = {"osu-micro-benchmarks", "stream", "nccl-tests"}
#: Our recipes that need UCX: Open MPI over UCX (fabrics=ucx, our override's
#: `ucx +cuda` under +cuda) and UCC (its transport layer).
NEEDS_UCX = {"openmpi", "ucc"}
#: What each installed prefix must hold: the program the checks or the stack use.
INSTALLS = {"babelstream": "bin/cuda-stream", "gdrcopy": "bin/gdrcopy_sanity",
            "perftest": "bin/ib_write_bw", "openmpi": "bin/mpirun", "ucc": "lib/libucc.so",
            "hwloc": "bin/lstopo", "transferbench": "bin/TransferBench"}
#: How a missing source is added offline.
HOW = ("scripts/mirror-from-checkouts.sh --shape local PKG=<its upstream git>#<tag> "
       "(docs/spack-env.md, \"Air-gapped sites\"), or a source mirror")
BUILD_TIMEOUT_S = 2 * 3600
SOLVE_TIMEOUT_S = 1800


def nvml_missing(cuda: Path) -> str | None:
    """Why UCX 1.19 +cuda cannot configure with this toolkit (no NVML), or None;
    tests/test_local_stack_build.py skips its UCX build for the same reason."""
    headers = [cuda / "include" / "nvml.h", Path("/usr/include/nvml.h")]
    libs = [cuda / d / "libnvidia-ml.so" for d in ("lib64/stubs", "lib/stubs", "lib64", "lib")]
    ldconfig = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    if not any(h.is_file() for h in headers):
        return (f"UCX +cuda (which it needs here) cannot configure: the CUDA toolkit at "
                f"{cuda} has no nvml.h (its cuda-nvml-dev component)")
    if not any(lib.exists() for lib in libs) and "libnvidia-ml.so " not in ldconfig:
        return "UCX +cuda (which it needs here) cannot configure: no libnvidia-ml"
    return None


class Builds:
    """The private environment: every recipe's root, concretized in one solve."""

    def __init__(self, spack_exe: Path, root: Path, scope: dict, why_not: dict[str, str]):
        self.spack_exe, self.root, self.scope, self.why_not = spack_exe, root, scope, why_not
        self.environ = {k: v for k, v in os.environ.items() if k != "SPACK_ENV"}
        self.environ.update(SPACK_PYTHON=os.environ.get("SPACK_PYTHON", sys.executable),
                            SPACK_USER_CONFIG_PATH=str(private_spack_scope(root)))
        self.sources: dict[str, dict] = {}

    def spack(self, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.spack_exe), "-e", str(self.root / "env"), *args],
                              capture_output=True, text=True, env=self.environ,
                              timeout=timeout)


def _why_not_here(recipe: str, found: machine.Machine, scope: dict) -> str | None:
    """Why this machine cannot build ``recipe`` as its stack would, before any solve."""
    if recipe in LOCAL_STACK:
        return ("built and run with the local stack by tests/test_local_install.py "
                "(make install's own environment)")
    if recipe == "transferbench" and not found.has("hip"):
        return ("TransferBench is a ROCm (HIP) program: Spack's detection found no ROCm "
                "on this machine (no hip)")
    if recipe in ("babelstream", "gdrcopy") and not found.has("cuda"):
        return "no CUDA toolkit here: the stack builds it only on a machine with one"
    conf = scope["packages"].get(recipe, {})
    if conf.get("buildable") is False:
        mine = ", ".join(e["spec"] for e in conf.get("externals", []))
        return (f"the stack takes this machine's own {mine or recipe} (an external of its "
                "scope, not buildable): it never builds the recipe here")
    if recipe in NEEDS_UCX and found.has("cuda"):
        return nvml_missing(Path(found.externals["cuda"][0]["prefix"]))
    if recipe == "perftest" and found.has("rdma-core"):
        return rdma_headers_missing(Path(found.externals["rdma-core"][0]["prefix"]))
    return None


def rdma_headers_missing(prefix: Path) -> str | None:
    """Why perftest's configure stops over this machine's rdma-core (an external), or
    None: it needs librdmacm's and libibumad's headers beside libibverbs'."""
    wanted = {"rdma/rdma_cma.h": "librdmacm-dev", "infiniband/umad.h": "libibumad-dev"}
    lacking = [f"{h} ({pkg})" for h, pkg in wanted.items()
               if not (prefix / "include" / h).is_file()]
    if not lacking:
        return None
    return (f"this machine's rdma-core (an external at {prefix}) lacks "
            f"{', '.join(lacking)}, which perftest's configure needs: scripts/prereqs.sh "
            "installs them on Debian as root")


@pytest.fixture(scope="module")
def builds(spack_exe: Path, tmp_path_factory) -> Builds:
    found = machine.detect_machine(spack_config.GENERATED_DIR)
    tmp = tmp_path_factory.mktemp("recipe-builds")
    shape = local_with_gpus() if found.has("cuda") else shapes.load(shapes.LOCAL)
    scope = spack_config.derive(shape, found, machine.detect_tools(), fake_root(tmp / "root"))
    why_not = {r: why for r in RECIPES if (why := _why_not_here(r, found, scope))}
    stack = Builds(spack_exe, tmp, scope, why_not)
    roots = [r for r in RECIPES if r not in why_not]
    if not roots:
        return stack
    env = tmp / "env"
    env.mkdir()
    (env / "local.yaml").write_text(spack_config.render("local", scope))
    (env / "spack.yaml").write_text(yaml.safe_dump({"spack": {
        "include": ["local.yaml"],
        "repos": {"ocibench": str(REPO)},
        "specs": roots,
        "view": False,
        "concretizer": {"unify": True, "reuse": True},
    }}, sort_keys=False))
    done = stack.spack("concretize", "--force", timeout=SOLVE_TIMEOUT_S)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    done = stack.spack("python", str(PROBE), "sources")
    assert done.returncode == 0, done.stderr[-3000:]
    stack.sources = json.loads(done.stdout)
    return stack


def test_every_recipe_is_listed():
    """A recipe added to the repository is built here, or says why not (INSTALLS)."""
    assert set(RECIPES) - LOCAL_STACK == set(INSTALLS)


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_recipe_builds_here(builds: Builds, recipe: str) -> None:
    if recipe in builds.why_not:
        pytest.skip(f"{recipe}: {builds.why_not[recipe]}")
    planned = builds.sources[recipe]
    if planned["missing"]:
        pytest.skip(f"{recipe}: no source offline for {', '.join(planned['missing'])}: {HOW}")
    jobs = os.environ.get("OCIBENCH_JOBS") or str(os.cpu_count() or 1)
    done = builds.spack("install", "--fail-fast", "-j", jobs, f"/{planned['hash']}",
                        timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, (
        f"spack install {recipe} (building {', '.join(planned['build']) or 'nothing'}):\n"
        f"{done.stdout[-4000:]}\n{done.stderr[-3000:]}")
    found = builds.spack("find", "--format", "{namespace} {prefix}", f"/{planned['hash']}")
    namespace, prefix = found.stdout.split()
    assert namespace == "ocibench", found.stdout   # our recipe, not the builtin's
    program = Path(prefix) / INSTALLS[recipe]
    assert program.exists(), (f"{recipe} installed no {INSTALLS[recipe]} in {prefix}: "
                              f"{sorted(p.name for p in Path(prefix).rglob('*'))[:40]}")
    if program.parent.name == "bin":
        assert os.access(program, os.X_OK) and shutil.which(program.name, path=str(program.parent))
