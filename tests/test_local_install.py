"""The real install of the `local` shape and its Lmod module tree, kept private.

`make install` (scripts/install.sh) with OCIBENCH_SHAPE=local runs in a private copy of
this checkout (its own spack.lock, .spack-env and generated scopes), with a temporary
module root and its own Spack scope: a private install tree, with the user's install
tree as a read-only Spack upstream.  What the user built already is reused from there
(a no-op `spack install` on a machine that ran `make install`), the rest is built into
the private tree; nothing the user installed changes (conftest.py checks that).
What it concretized (its spack.lock) must be the stack every shape's concretization is
(tests/concretized_stack.py), over this machine's Open MPI: the suite's one solve of
`local`.  Then, in a fresh shell with nothing but Lmod, `module load openmpi omb` must
give the benchmarks of the seeds, and `mpirun -n 2 osu_latency` must run.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import concretized_stack
from ocibench import paths
from ocibench.spack import scopes as spack_config
from private_checkout import private_checkout, private_spack_scope

pytestmark = pytest.mark.install

SHAPE = "local"
INSTALL_TIMEOUT_S = 3 * 3600
#: The concretize script of the private checkout, at its place in this one (a path
#: spelled out here went stale when the package's layers moved it).
CONCRETIZE_SCRIPT = (Path(spack_config.__file__).with_name("scripts") / "concretize.py"
                     ).relative_to(paths.REPO_ROOT)

def _sources_or_skip() -> str:
    """Where the local install gets its sources from, or SKIP saying what is missing."""
    develop = spack_config.LOCAL_DEVELOP_DIR / f"{SHAPE}.yaml"
    if develop.is_file():
        return f"develop sources ({develop})"
    if paths.source_mirror().is_dir():
        return f"source mirror {paths.source_mirror()}"
    pytest.skip(
        f"no sources for an offline build: neither {develop} "
        f"(scripts/mirror-from-checkouts.sh) nor a source mirror at {paths.source_mirror()} "
        "(spack mirror create; docs/spack-env.md)")


@pytest.fixture(scope="session")
def private(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("local-install")


@pytest.fixture(scope="session")
def install_env(private: Path) -> dict[str, str]:
    """The private checkout's environment variables (the checkout is made here)."""
    clone = private_checkout(private)
    return {**os.environ, "OCIBENCH_SHAPE": SHAPE,
            "OCIBENCH_MODULES_ROOT": str(private / "modules"),
            "SPACK_USER_CONFIG_PATH": str(private_spack_scope(private)),
            "PYTHONPATH": str(clone / "src")}


@pytest.fixture(scope="session")
def installed(spack_exe: Path, private: Path,
              install_env: dict[str, str]) -> subprocess.CompletedProcess:
    _sources_or_skip()
    clone, env = private / "checkout", install_env
    # the generated scopes are `make setup`'s; generate them in the copy for this shape
    subprocess.run([sys.executable, "-m", "ocibench.cli", "spack-config", "--shape", SHAPE],
                   cwd=clone, env=env, check=True, capture_output=True)
    done = subprocess.run(["bash", "scripts/install.sh"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    assert done.returncode == 0, f"make install failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="session")
def concretized(installed, spack_exe: Path, private: Path,
                install_env: dict[str, str]) -> concretized_stack.Roots:
    """The roots `make install` concretized (its spack.lock), read without solving."""
    clone = private / "checkout"
    done = subprocess.run(
        [str(spack_exe), "-e", str(clone), "python",
         str(clone / CONCRETIZE_SCRIPT), "--lock"],
        env={**install_env, "SPACK_PYTHON": install_env.get("SPACK_PYTHON", sys.executable)},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return concretized_stack.roots_by_name(done.stdout)


def test_concretizes_the_stack(concretized: concretized_stack.Roots) -> None:
    """What tests/test_spack_env.py asserts of every other shape's concretization."""
    concretized_stack.assert_stack(SHAPE, concretized)


def test_uses_this_machines_mpi_and_cuda(concretized: concretized_stack.Roots) -> None:
    concretized_stack.assert_local_uses_the_machines_mpi_and_cuda(concretized)


@pytest.fixture(scope="session")
def module_root(installed, private: Path) -> Path:
    return private / "modules" / SHAPE


@pytest.fixture(scope="session")
def modulepath(module_root: Path) -> Path:
    return module_root / "Core"


@pytest.fixture(scope="session")
def expects_nccl(installed, private: Path) -> bool:
    """Whether the private checkout's generated scope asks OMB for +nccl (CUDA found)."""
    scope = (private / "checkout" / "site" / "spack" / "generated" / spack_config.SHAPES_SUBDIR
             / f"{SHAPE}.yaml")
    req = yaml.safe_load(scope.read_text())["packages"].get(
        "osu-micro-benchmarks", {}).get("require", [""])
    return "+nccl" in req[0]


def fresh_shell(lmod_init: Path, script: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """bash with an empty environment (env -i) that has only sourced Lmod."""
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
           "LANG": "C.UTF-8", "USER": os.environ.get("USER", "root")}
    if os.geteuid() == 0:  # OpenMPI refuses root unless told; only the test runs as root
        env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return subprocess.run(
        ["env", "-i", *(f"{k}={v}" for k, v in env.items()),
         "bash", "--noprofile", "--norc", "-c", f"source {lmod_init}\n{script}"],
        capture_output=True, text=True, timeout=timeout)


def test_install_reports_the_module_use_line(installed, modulepath: Path) -> None:
    assert f"module use {modulepath}" in installed.stdout


def test_module_tree_exists(module_root: Path, modulepath: Path) -> None:
    assert modulepath.is_dir(), f"no module tree at {modulepath}"
    names = {p.parent.name for p in modulepath.rglob("*.lua")}
    assert "openmpi" in names
    # omb sits below the MPI level of the hierarchy, not in Core
    omb = list(module_root.rglob("omb/*.lua"))
    assert omb and all(modulepath not in p.parents for p in omb), omb


def _assert_world_readable_owner_writable(root: Path) -> int:
    checked = 0
    bad = []
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        need = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
        if path.is_dir():
            need |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
        if mode & need != need or mode & (stat.S_IWGRP | stat.S_IWOTH) or not mode & stat.S_IWUSR:
            bad.append(f"{oct(mode & 0o7777)} {path}")
        checked += 1
    assert not bad, "not readable by all / writable by the owner only:\n" + "\n".join(bad[:20])
    return checked


def test_module_tree_permissions(module_root: Path) -> None:
    assert _assert_world_readable_owner_writable(module_root) > 0


def test_installed_prefixes_permissions(lmod_init: Path, modulepath: Path) -> None:
    done = fresh_shell(lmod_init, f"module use {modulepath}\nmodule load openmpi omb\n"
                                  "echo OMB=$OCIBENCH_SPEC_OSU_MICRO_BENCHMARKS\n"
                                  "command -v osu_latency")
    assert done.returncode == 0, done.stderr
    exe = Path(done.stdout.strip().splitlines()[-1])
    prefix = next(p for p in exe.parents if p.name.startswith("osu-micro-benchmarks-"))
    assert _assert_world_readable_owner_writable(prefix) > 10


def test_module_load_puts_the_benchmarks_on_path(lmod_init: Path, modulepath: Path,
                                                 expects_nccl: bool) -> None:
    wanted = ["osu_latency", "osu_bw", "osu_alltoall", "osu_allreduce"]
    if expects_nccl:
        wanted += ["osu_xccl_allreduce", "osu_xccl_latency"]
    script = f"module use {modulepath}\nmodule load openmpi omb\n" + "".join(
        f"command -v {exe} || echo MISSING {exe}\n" for exe in wanted)
    script += "echo SPEC=$OCIBENCH_SPEC_OSU_MICRO_BENCHMARKS\nmodule -t list 2>&1\n"
    done = fresh_shell(lmod_init, script)
    assert done.returncode == 0, done.stderr
    assert "MISSING" not in done.stdout, done.stdout
    spec = re.search(r"SPEC=(\S+)", done.stdout)
    assert spec and re.fullmatch(r"osu-micro-benchmarks@[\w.]+/[a-z0-9]{32}", spec.group(1)), done.stdout
    loaded = done.stdout + done.stderr
    assert re.search(r"^omb/", loaded, re.M) and re.search(r"^openmpi/", loaded, re.M)
    if expects_nccl:  # cuda and nccl come along with omb (autoload)
        assert re.search(r"^cuda/", loaded, re.M) and re.search(r"^nccl/", loaded, re.M)


def test_omb_module_has_help_and_whatis(module_root: Path) -> None:
    omb = next(module_root.rglob("omb/*.lua"))
    text = omb.read_text()
    assert "help([[" in text and "whatis([[" in text
    assert "OCIBENCH_SPEC_OSU_MICRO_BENCHMARKS" in text


def test_osu_latency_runs_on_two_ranks(lmod_init: Path, modulepath: Path) -> None:
    done = fresh_shell(
        lmod_init,
        f"module use {modulepath}\nmodule load openmpi omb\n"
        "mpirun -n 2 --oversubscribe --bind-to none osu_latency -m 1:1 -x 10 -i 100",
        timeout=300)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "# OSU MPI" in done.stdout and "Latency Test" in done.stdout, done.stdout
    line = re.search(r"^1\s+(\d+\.\d+)\s*$", done.stdout, re.M)
    assert line, f"no size-1 line in:\n{done.stdout}"
    assert float(line.group(1)) > 0


def test_missing_module_fails_clearly(lmod_init: Path, modulepath: Path) -> None:
    done = fresh_shell(lmod_init, f"module use {modulepath}\nmodule load nosuchmodule")
    assert done.returncode != 0
    assert "nosuchmodule" in done.stderr
    assert re.search(r"unknown|not found|cannot be loaded", done.stderr, re.I), done.stderr
