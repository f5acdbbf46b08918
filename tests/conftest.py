"""Shared fixtures: each real part (Spack, Lmod, MPI, a GPU) is found or the test is
SKIPPED with the reason.  Nothing here stands in for a missing part.

The session leaves the user's installation alone (user_installation.py): every Spack
the tests start gets a private user scope and cache, every test its own results history
and healthcheck state (temporary files: $OCIBENCH_HISTORY_DB, $OCIBENCH_HEALTH_STATE),
and the session fails at its end if the user's module trees, Spack store, Spack
configuration, Python environment, history or healthcheck state changed while it ran.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

import user_installation
from ocibench import paths, shapes


@pytest.fixture(scope="session", autouse=True)
def user_installation_untouched(tmp_path_factory):
    """Snapshot the user's installation, give every Spack of the session its own user
    scope and cache (SPACK_USER_CONFIG_PATH, SPACK_USER_CACHE_PATH: Spack writes
    detected compilers and its indexes there), and fail the session if anything the
    user installed changed by the end."""
    places = user_installation.watched()
    before = user_installation.snapshot(places)
    home = tmp_path_factory.mktemp("spack-user")
    # Spack's indexes (providers, tags, patches) are a cache: start from the user's,
    # read, so that the first Spack command of the session does not rebuild them.
    user_cache = places["~/.spack"] / "cache"
    if user_cache.is_dir():
        shutil.copytree(user_cache, home / "cache", symlinks=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPACK_USER_CONFIG_PATH", str(home))
        patch.setenv("SPACK_USER_CACHE_PATH", str(home))
        # what module- and session-scoped fixtures write; each test gets its own below
        pin_user_files(patch, tmp_path_factory.mktemp("user-files"))
        yield home
    changed = user_installation.changes(before, user_installation.snapshot(places))
    if changed:
        pytest.fail("the test session changed the user's installation:\n  "
                    + "\n  ".join(changed), pytrace=False)


#: The variables that move what ocibench writes in the user's cache by default.
USER_FILES = {"OCIBENCH_HISTORY_DB": "history.sqlite",
              "OCIBENCH_HEALTH_STATE": "healthcheck.json"}


def pin_user_files(patch: pytest.MonkeyPatch, where: Path) -> None:
    for name, file in USER_FILES.items():
        patch.setenv(name, str(where / file))


@pytest.fixture(autouse=True)
def own_user_files(tmp_path_factory, monkeypatch) -> None:
    """Each test's own history and healthcheck state: a sweep in one test is never
    another test's history (test_sweep_cluster.py once drained a node of
    test_healthcheck_cluster.py so).  A test that sets its own keeps it."""
    pin_user_files(monkeypatch, tmp_path_factory.mktemp("user-files", numbered=True))


@pytest.fixture(autouse=True)
def fresh_shapes() -> None:
    """Each test loads its shapes as a new process would: what ocibench.shapes kept for
    another test (whose fake nvidia-smi described another machine) is dropped."""
    shapes.forget()


@pytest.fixture(scope="session", autouse=True)
def roots_run_dir(tmp_path_factory):
    """root's lock directory (ocibench.health.state.run_dir, /run/ocibench) for the
    session: a healthcheck the tests run as root never makes one on the machine."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OCIBENCH_RUN_DIR", str(tmp_path_factory.mktemp("run") / "ocibench"))
        yield


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return paths.REPO_ROOT


@pytest.fixture(scope="session")
def spack_exe() -> Path:
    """The pinned Spack that `make setup` placed in the per-user cache."""
    exe = paths.spack_root() / "bin" / "spack"
    if not exe.is_file():
        pytest.skip(f"no Spack at {paths.spack_root()}: run `make setup` "
                    "(offline: OCIBENCH_SPACK_SOURCE=<checkout or tarball> make setup)")
    if not paths.builtin_repo().is_dir():
        pytest.skip(f"no builtin package repository at {paths.builtin_repo()}: run `make setup`")
    return exe


@pytest.fixture(scope="session")
def lmod_init() -> Path:
    for candidate in (os.environ.get("LMOD_PKG", ""), "/usr/share/lmod/lmod"):
        init = Path(candidate) / "init" / "bash"
        if candidate and init.is_file():
            return init
    pytest.skip("Lmod is not installed (Debian: apt-get install lmod)")


@pytest.fixture(scope="session")
def mpirun() -> str:
    exe = shutil.which("mpirun")
    if not exe:
        pytest.skip("no mpirun on PATH")
    return exe


@pytest.fixture(scope="session")
def gpu_count() -> int:
    if not shutil.which("nvidia-smi"):
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return out.stdout.count("GPU ") if out.returncode == 0 else 0


#: The test files that take minutes, with their cost: seconds of wall time on 2 cores
#: (the bundle and cluster files timed alone, the others from --durations of a whole
#: run; test_spack_env.py's solves, 2 at a time, estimated).  Under pytest-xdist
#: (scripts/test.sh: one file per process at a time) the files start longest first,
#: each on the process that is free first: the longest-processing-time-first rule,
#: whose makespan is within 4/3 of the best (Graham 1969, "Bounds on multiprocessing
#: timing anomalies").  xdist's own order (most tests first) started the bundle round
#: trip and the fault sweep last.
#: A file not listed costs seconds.  The figures only order the files: stale ones cost
#: time, never a test.
FILE_COSTS = {
    "test_spack_env.py": 300,
    "test_bundle.py": 210,
    "test_spack_repo.py": 140,
    "test_cluster.py": 125,
    "test_sweep_cluster.py": 110,
    "test_reframe.py": 110,
    "test_local_install.py": 65,
    "test_spack_repo_builds.py": 160,
    "test_local_stack_build.py": 50,
    "test_bundle_unchecked.py": 45,
    "test_report.py": 16,
    "test_sweep.py": 16,
    "test_shape_schema.py": 6,
    "test_judge.py": 6,
    "test_preflight.py": 5,
}
#: The files that start the loopback cluster (marker `cluster`).  It is machine-wide, one
#: at a time (cluster_support.take_session_lock), so they are one unit of work: one
#: process runs them one after the other, instead of one process idling on the lock
#: while the other holds it.
CLUSTER_FILES = ("test_cluster.py", "test_sweep_cluster.py", "test_drift_cluster.py",
                 "test_healthcheck_cluster.py")
CLUSTER_UNIT = "the loopback cluster"


def work_unit(path: str) -> str:
    """The unit of work (one process, one after the other) of a test file's path."""
    return CLUSTER_UNIT if Path(path).name in CLUSTER_FILES else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("cluster") and item.path.name not in CLUSTER_FILES:
            raise pytest.UsageError(f"{item.path.name} starts the loopback cluster (marker "
                                    "cluster) but is not in tests/conftest.py CLUSTER_FILES")
    cost: dict[str, float] = {}
    for path in {str(item.path) for item in items}:
        unit = work_unit(path)
        cost[unit] = cost.get(unit, 0.0) + FILE_COSTS.get(Path(path).name, 0.0)
    # stable: the order within a file is kept
    items.sort(key=lambda item: (-cost[work_unit(str(item.path))], work_unit(str(item.path))))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, when it is installed
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadfile in the order of pytest_collection_modifyitems (longest first),
    the cluster's files as one unit, each unit to the process that is free first."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    # The methods below are xdist's own (3.x); another xdist keeps its own scheduler.
    if not all(hasattr(LoadFileScheduling, name)
               for name in ("_split_scope", "_reschedule", "_pending_of")):
        return None
    # xdist's own order is by number of tests (many quick tests first): keep ours.
    config.option.loadscopereorder = False

    class LongestFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(super()._split_scope(nodeid))

        def _reschedule(self, node) -> None:
            # xdist hands a process its next unit when 2 of its tests are left, so a
            # file that ends in two long tests (the bundle's) holds the next unit for
            # minutes while the other process may be idle.  Hand it over when 1 is
            # left: a process keeps its last test until it knows the next (pytest's
            # teardown needs it), so then it is idle.
            if (not node.shutting_down and self.workqueue
                    and self._pending_of(self.assigned_work[node]) > 1):
                return
            super()._reschedule(node)

    return LongestFirst(config, log)


#: The system's Python, which the user `nobody` runs (the tests' own may sit where
#: nobody cannot read it).
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture
def nobody() -> pwd.struct_passwd:
    """The real unprivileged user, for what only another user can do."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    if not shutil.which("setpriv"):
        pytest.skip("no setpriv (util-linux) to run as nobody")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON} for nobody to run")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody on this machine")
