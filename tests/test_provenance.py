"""ocibench.node.provenance: every field present, a missing or failing tool gives null."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from ocibench import paths
from ocibench.node import provenance

FIELDS = {"shape", "hostname", "date", "specs", "modules", "mpi", "ucx", "nccl", "toolkit",
          "driver"}


@pytest.fixture
def bare_env(monkeypatch, tmp_path) -> Path:
    """No tools on PATH, no module loaded, no NCCL anywhere; returns the PATH dir."""
    for var in list(os.environ):
        if var.startswith(provenance.SPEC_ENV_PREFIX) or var in (
                "LOADEDMODULES", "LD_LIBRARY_PATH", "CMAKE_PREFIX_PATH", "NCCL_ROOT",
                "NCCL_HOME", "NCCL_DIR"):
            monkeypatch.delenv(var)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("OCIBENCH_SHAPE", "local")
    return bin_dir


def test_without_any_tool_every_field_is_there_and_null(bare_env):
    found = provenance.collect()
    assert set(found) == FIELDS
    assert {k: found[k] for k in ("mpi", "ucx", "nccl", "toolkit", "driver")} == dict.fromkeys(
        ("mpi", "ucx", "nccl", "toolkit", "driver"))
    assert (found["shape"], found["specs"], found["modules"]) == ("local", [], [])
    assert datetime.fromisoformat(found["date"]).utcoffset().total_seconds() == 0


def test_a_failing_tool_gives_null(bare_env):
    smi = bare_env / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not "
                   "communicate with the NVIDIA driver.'\nexit 9\n")
    smi.chmod(0o755)
    assert provenance.driver_version() is None


def test_spec_variables_and_their_modules(bare_env, monkeypatch):
    monkeypatch.setenv("OCIBENCH_SPEC_OPENMPI", "openmpi@5.0.8/abc1234")
    monkeypatch.setenv("OCIBENCH_SPEC_NCCL_TESTS", "nccl-tests@2.13.9/def5678")
    monkeypatch.setenv("LOADEDMODULES", "openmpi/5.0.8:nccl-tests/2.13.9-def5678")
    assert provenance.specs() == [
        {"variable": "OCIBENCH_SPEC_NCCL_TESTS", "spec": "nccl-tests@2.13.9/def5678",
         "name": "nccl-tests", "version": "2.13.9", "hash": "def5678",
         "module": "nccl-tests/2.13.9-def5678"},
        {"variable": "OCIBENCH_SPEC_OPENMPI", "spec": "openmpi@5.0.8/abc1234",
         "name": "openmpi", "version": "5.0.8", "hash": "abc1234", "module": "openmpi/5.0.8"},
    ]


def test_nccl_version_from_the_header_of_the_module_prefix(bare_env, monkeypatch, tmp_path):
    include = tmp_path / "nccl" / "include"
    include.mkdir(parents=True)
    (include / "nccl.h").write_text(
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 5\n")
    monkeypatch.setenv("NCCL_ROOT", str(tmp_path / "nccl"))
    assert provenance.nccl_version() == "2.26.5"


def test_nccl_version_from_the_library_file_name(bare_env, monkeypatch, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libnccl.so.2.21.5").write_bytes(b"")
    (lib / "libnccl.so.2").symlink_to("libnccl.so.2.21.5")
    (lib / "libnccl.so").symlink_to("libnccl.so.2")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    assert provenance.nccl_version() == "2.21.5"


@pytest.mark.skipif(not shutil.which("ompi_info") and not shutil.which("nvcc"),
                    reason="neither Open MPI's ompi_info nor CUDA's nvcc on PATH")
def test_real_tools_are_read():
    if shutil.which("ompi_info"):
        assert re.match(r"Open MPI v?\d+\.\d+", provenance.mpi_version() or "")
    if shutil.which("nvcc"):
        assert re.fullmatch(r"cuda \d+\.\d+\.\d+", provenance.toolkit_version() or "")


def _tool(bin_dir: Path, name: str, output: str) -> None:
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
    tool.chmod(0o755)


@pytest.mark.parametrize("tools, toolkit, driver", [
    # nvcc --version's last line (CUDA 12.9), nvidia-smi's driver query
    ({"nvcc": "Cuda compilation tools, release 12.9, V12.9.86",
      "nvidia-smi": "575.57.08"}, "cuda 12.9.86", "575.57.08"),
    # hipconfig --version; amd-smi version's line (ROCm/amdsmi VersionCommands.version)
    ({"hipconfig": "6.4.43484-123eb6fb5",
      "amd-smi": "AMDSMI Tool: 25.5.1+41065ee | AMDSMI Library version: 25.5.1 | "
                 "ROCm version: 6.4.3 | amdgpu version: 6.12.12"}, "hip 6.4.43484", "6.12.12"),
])
def test_each_vendors_toolkit_and_driver_are_read(bare_env, tools, toolkit, driver):
    for name, output in tools.items():
        _tool(bare_env, name, output)
    assert provenance.toolkit_version() == toolkit
    assert provenance.driver_version() == driver


def test_module_prints_json():
    done = subprocess.run([sys.executable, "-m", "ocibench.node.provenance"], capture_output=True,
                          text=True, check=True, timeout=120,
                          env={**os.environ, "OCIBENCH_SHAPE": "local",
                               "PYTHONPATH": str(paths.REPO_ROOT / "src")})
    assert set(json.loads(done.stdout)) == FIELDS


def test_module_of_uses_the_module_names_users_type() -> None:
    # modules.yaml projects osu-micro-benchmarks to `omb`: provenance must find it.
    from ocibench.node.provenance import _module_of

    loaded = ["openmpi/4.1.4", "omb/7.4", "imb/2021.7"]
    assert _module_of("osu-micro-benchmarks", loaded) == "omb/7.4"
    assert _module_of("intel-mpi-benchmarks", loaded) == "imb/2021.7"
    assert _module_of("nccl-tests", loaded) is None
