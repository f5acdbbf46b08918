"""Where a result came from: shape, host, date, Spack specs, and the versions of
MPI, UCX, NCCL, the GPU toolkit (CUDA, ROCm's HIP) and the GPU driver that a benchmark
ran with.  The toolkit and driver are asked of each vendor of ocibench.accelerators;
the toolkit's is written with its package: ``cuda 12.9.86``.

``python3 -m ocibench.node.provenance`` prints :func:`collect` as JSON; the ReFrame
checks run it before the benchmark and keep its output as ``provenance.json``.
Every field that cannot be found is ``null``: collecting never raises.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ocibench import accelerators

#: Prefix of the variables that the generated Lmod modules set to "<name>@<version>/<hash>".
SPEC_ENV_PREFIX = "OCIBENCH_SPEC_"

#: Seconds any one version query may take.
COMMAND_TIMEOUT_S = 20

#: Variables that may name an NCCL installation prefix (Spack, NVHPC, user).
_NCCL_PREFIX_VARS = ("NCCL_ROOT", "NCCL_HOME", "NCCL_DIR")


def collect() -> dict[str, Any]:
    """Everything known about the software and machine a benchmark runs on."""
    return {
        "shape": _shape(),
        "hostname": socket.gethostname(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "specs": specs(),
        "modules": loaded_modules(),
        "mpi": mpi_version(),
        "ucx": ucx_version(),
        "nccl": nccl_version(),
        "toolkit": toolkit_version(),
        "driver": driver_version(),
    }


def _shape() -> str | None:
    try:
        from ocibench import shapes  # needs PyYAML, which a bare interpreter may lack

        return shapes.detect()
    except (ImportError, ValueError, OSError):  # ShapeError is a ValueError
        return None


def _run(*argv: str) -> str | None:
    """stdout of a command, or None if it is absent, fails or hangs."""
    if not shutil.which(argv[0]):
        return None
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def specs() -> list[dict[str, Any]]:
    """One entry per OCIBENCH_SPEC_<NAME> variable, with the module that set it."""
    modules = loaded_modules()
    found = []
    for var in sorted(v for v in os.environ if v.startswith(SPEC_ENV_PREFIX)):
        spec = os.environ[var]
        match = re.fullmatch(r"([^@/\s]+)@([^/\s]+)/(\w+)", spec.strip())
        name, version, hash_ = match.groups() if match else (None, None, None)
        found.append({
            "variable": var,
            "spec": spec,
            "name": name,
            "version": version,
            "hash": hash_,
            "module": _module_of(name, modules),
        })
    return found


def _module_of(name: str | None, modules: list[str]) -> str | None:
    """The loaded module of a Spack package: its name before the first '/' is the
    package's module name from modules.yaml (osu-micro-benchmarks -> omb)."""
    if not name:
        return None
    from ocibench.paths import module_name  # only needed with modules loaded

    wanted = {name.lower(), module_name(name).lower()}
    return next((m for m in modules if m.split("/")[0].lower() in wanted), None)


def loaded_modules() -> list[str]:
    return [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m]


def mpi_version() -> str | None:
    return _first_line(_run("ompi_info", "--version") or _run("mpirun", "--version"))


def ucx_version() -> str | None:
    match = re.search(r"Library version:\s*(\S+)", _run("ucx_info", "-v") or "")
    return match.group(1) if match else None


def _version(query: accelerators.VersionQuery) -> str | None:
    match = re.search(query.pattern, _run(*query.command) or "", re.MULTILINE)
    return match.group(1) if match else None


def toolkit_version() -> str | None:
    """The first vendor toolkit that answers, as ``<package> <version>``."""
    for vendor in accelerators.VENDORS.values():
        version = _version(vendor.toolkit_version)
        if version:
            return f"{vendor.toolkit_packages[0]} {version}"
    return None


def driver_version() -> str | None:
    """The first vendor's GPU driver that answers."""
    return next(filter(None, (_version(v.driver_version)
                              for v in accelerators.VENDORS.values())), None)


def nccl_version() -> str | None:
    """From nccl.h under a known prefix, else the libnccl file name the loader finds."""
    prefixes = [Path(os.environ[v]) for v in _NCCL_PREFIX_VARS if os.environ.get(v)]
    prefixes += [Path(p) for p in os.environ.get("CMAKE_PREFIX_PATH", "").split(":") if p]
    for prefix in prefixes:
        version = _nccl_header_version(prefix / "include" / "nccl.h")
        if version:
            return version
    lib_dirs = [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    lib_dirs += [p / "lib" for p in prefixes] + [p / "lib64" for p in prefixes]
    for lib_dir in lib_dirs:
        version = _nccl_library_version(lib_dir / "libnccl.so")
        if version:
            return version
    match = re.search(r"=>\s*(\S*libnccl\.so\S*)", _run("ldconfig", "-p") or "")
    return _nccl_library_version(Path(match.group(1))) if match else None


def _nccl_header_version(header: Path) -> str | None:
    try:
        text = header.read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define\s+NCCL_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None


def _nccl_library_version(library: Path) -> str | None:
    """libnccl.so -> libnccl.so.2 -> libnccl.so.2.26.5: the version is in the real name."""
    try:
        real = library.resolve(strict=True).name
    except OSError:
        return None
    match = re.fullmatch(r"libnccl\.so\.(\d+\.\d+\.\d+)", real)
    return match.group(1) if match else None


def main() -> int:
    json.dump(collect(), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
