"""Shared fixtures: each real part (Spack, Lmod, MPI, a GPU) is found or the test is
SKIPPED with the reason.  Nothing here stands in for a missing part."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibench import paths


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
