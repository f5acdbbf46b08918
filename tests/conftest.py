"""Shared fixtures: each real part (Spack, Lmod, MPI, a GPU) is found or the test is
SKIPPED with the reason.  Nothing here stands in for a missing part.

The session leaves the user's installation alone (user_installation.py): every Spack
the tests start gets a private user scope and cache, and the session fails at its end
if the user's module trees, Spack store, Spack configuration or Python environment
changed while it ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import user_installation
from ocibench import paths


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
        yield home
    changed = user_installation.changes(before, user_installation.snapshot(places))
    if changed:
        pytest.fail("the test session changed the user's installation:\n  "
                    + "\n  ".join(changed), pytrace=False)


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


#: Markers of the test files that take minutes: they start first, so that under
#: pytest-xdist (scripts/test.sh: one file per process) they overlap each other instead
#: of one of them starting last.
SLOW_MARKERS = ("slow", "cluster", "install", "spack")


def pytest_collection_modifyitems(items) -> None:
    slow_files = {item.path for item in items
                  if any(item.get_closest_marker(m) for m in SLOW_MARKERS)}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: order kept within
