"""What this machine provides to Spack: compilers, externals, the GPU toolkit and driver.

Machine-described shapes (``local`` and any shape file that lists no compilers) take
their compilers and externals from here: ``spack compiler find`` / ``spack external
find`` run once at set-up time, cached in the generated layer (``MACHINE_FILE``).
ocibench.spack.scopes derives and renders the Spack scope from the result; this
module only looks at the machine.  ocibench.shapes.probe describes the hardware (CPU, NUMA,
GPUs) and ocibench.node.preflight compares a node with its shape.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibench import accelerators, paths, shapes

#: Cached result of machine detection (spack compiler find / external find).
MACHINE_FILE = "machine.json"

#: Packages that machine detection looks for on machine-described shapes:
#: compilers, the MPI and GPU stack the seeds use, and build tools (so that a
#: 2-core machine does not rebuild perl or cmake).
DETECT_COMPILERS = ("gcc", "llvm", "aocc", "intel-oneapi-compilers", "nvhpc")
DETECT_EXTERNALS = (
    "openmpi", "hwloc", "rdma-core", "slurm", "libfabric",
    # each vendor's toolkit (ocibench.accelerators): cuda, hip
    *(a.toolkit_packages[0] for a in accelerators.VENDORS.values()),
    # build tools only: a library found without its headers would break builds
    "cmake", "gmake", "perl", "autoconf", "automake", "libtool", "m4", "pkgconf",
    "python", "bison", "flex", "gawk", "diffutils", "findutils", "tar", "git",
)


class MachineError(shapes.ShapeError):
    """Detection that cannot give an answer, with the reason (one line)."""



@dataclass
class Machine:
    """What this machine provides, for machine-described shapes and for tools."""

    #: package name -> list of external entries ({spec, prefix, extra_attributes?})
    externals: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: package name -> why Spack's detection dropped it (a timeout, an exception)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def compilers(self) -> dict[str, list[dict[str, Any]]]:
        return {n: e for n, e in self.externals.items() if n in DETECT_COMPILERS}

    def has(self, name: str) -> bool:
        return bool(self.externals.get(name))


def spack_exe() -> Path:
    return paths.spack_root() / "bin" / "spack"


def _spack_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPACK_PYTHON", sys.executable)
    return env


def detect_machine(out_dir: Path, refresh: bool = False) -> Machine:
    """Run Spack's compiler/external detection once, caching the result in out_dir
    (the generated Spack layer's directory: ocibench.spack.scopes.GENERATED_DIR)."""
    cache = out_dir / MACHINE_FILE
    if cache.is_file() and not refresh:
        cached = json.loads(cache.read_text())
        if "externals" not in cached:   # written before skips were kept: externals only
            cached = {"externals": cached}
        return Machine(cached["externals"], cached.get("skipped") or {})
    exe = spack_exe()
    if not exe.is_file():
        raise MachineError(
            f"machine-described shapes need Spack's detection, and there is no Spack at "
            f"{paths.spack_root()}: run `make setup`")
    script = Path(__file__).parents[1] / "spack" / "scripts" / "detect.py"
    done = subprocess.run(
        [str(exe), "python", str(script), *DETECT_COMPILERS, *DETECT_EXTERNALS],
        capture_output=True, text=True, env=_spack_env(), check=False)
    if done.returncode != 0:
        raise MachineError(f"spack external detection failed: {done.stderr.strip()[-500:]}")
    detected = json.loads(done.stdout)
    found = _clean_detected(detected["externals"])
    skipped = dict(detected["skipped"])
    # A recipe that raised on one prefix: Spack's worker warns on stderr and goes on.
    for name, prefix in re.findall(r'error detecting "([^"]+)" from prefix (\S+)', done.stderr):
        if name not in found:
            skipped.setdefault(name, f"Spack's recipe failed on {prefix}")
    nccl = detect_nccl()
    if nccl:
        found["nccl"] = [nccl]
    boost = detect_boost()
    if boost:
        found["boost"] = [boost]
    out_dir.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"externals": found, "skipped": skipped},
                                indent=1, sort_keys=True) + "\n")
    return Machine(found, skipped)


def _clean_detected(found: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Drop detection artefacts: pyenv shims as a Python prefix, a GPU toolkit 'prefix'
    that only holds a wrapper of its compiler (/usr/local), duplicate specs."""
    compilers = {a.toolkit_packages[0]: a.toolkit_compiler
                 for a in accelerators.VENDORS.values() if a.toolkit_compiler}
    clean: dict[str, list[dict[str, Any]]] = {}
    for name, entries in found.items():
        kept, seen = [], set()
        if name in compilers:
            entries = [_toolkit_entry(e, compilers[name]) for e in entries]
        for entry in entries:
            prefix = Path(entry["prefix"])
            if "shims" in prefix.parts:
                continue
            if entry["spec"] in seen:
                continue
            seen.add(entry["spec"])
            kept.append(entry)
        if kept:
            clean[name] = kept
    return clean


def _toolkit_entry(entry: dict[str, Any], name: str) -> dict[str, Any]:
    """The toolkit's entry with the toolkit's own prefix (``name``: its compiler).

    Spack names a CUDA prefix after the directory of the first nvcc on PATH.  Some
    images put shell wrappers (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`) in
    /usr/local/bin; with the toolkit's bin/ off PATH, Spack then reports the prefix
    /usr/local, which has neither the toolkit's libraries nor its driver stub, and
    OMB's configure fails to link -lcuda.  nvcc itself knows its toolkit: its
    dry run prints `TOP=<toolkit>/bin/..`.
    """
    compiler = Path(entry["prefix"]) / "bin" / name
    if _is_elf(compiler):
        return entry
    toolkit = toolkit_of(compiler)
    if toolkit is None:
        raise MachineError(
            f"{compiler} is not the compiler itself and does not name its toolkit "
            f"(`{name} --dryrun` printed no TOP=): put the toolkit's bin/ on PATH")
    return {**entry, "prefix": str(toolkit)}


def toolkit_of(compiler: Path) -> Path | None:
    """The prefix of the toolkit that ``compiler`` (a vendor's ``toolkit_compiler`` or
    a wrapper of it) runs, from the TOP= line of its dry run; None when it names none."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cu"   # nvcc compiles by suffix: an empty CUDA source
        source.write_text("")
        try:
            done = subprocess.run([str(compiler), "--dryrun", "-c", str(source)], cwd=tmp,
                                  capture_output=True, text=True, timeout=60, check=False)
        except OSError:
            return None
    match = re.search(r"^#\$ TOP=(\S+)$", done.stdout + done.stderr, re.MULTILINE)
    if not match:
        return None
    toolkit = Path(match.group(1)).resolve()
    return toolkit if _is_elf(toolkit / "bin" / compiler.name) else None


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def detect_nccl() -> dict[str, Any] | None:
    """NCCL from the dynamic linker cache (Spack's library detection misses a libnccl
    that sits in a CUDA toolkit's lib/ directory), with its version from nccl.h."""
    if not shutil.which("ldconfig") and not Path("/sbin/ldconfig").exists():
        return None
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        match = re.search(r"libnccl\.so(\.\d+)?\s.*=>\s*(\S+)", line)
        if not match:
            continue
        libdir = Path(match.group(2)).resolve().parent
        prefix = libdir.parent
        header = prefix / "include" / "nccl.h"
        if not header.is_file():
            continue
        text = header.read_text(errors="replace")
        parts = [re.search(rf"#define NCCL_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
        if not all(parts):
            continue
        version = ".".join(p.group(1) for p in parts)  # type: ignore[union-attr]
        return {"spec": f"nccl@{version}", "prefix": str(prefix)}
    return None


#: Where an XPMEM user library may sit, relative to the node's root: first where OCI's
#: tech tips install it (gpu-with-ubuntu sec 3-1 and build-openmpi sec 1-1-4: `git
#: clone https://github.com/hpc/xpmem`, `./configure --prefix=/opt/xpmem`; the kernel
#: module of the same build is what provides /dev/xpmem), then the system's prefixes.
XPMEM_PREFIXES = ("opt/xpmem", "usr/local", "usr")
#: The version an XPMEM external is declared with.  hpc/xpmem has had no release since
#: 2.6.3; the tech tips build the head of its master branch, which is what Spack's
#: xpmem recipe calls `master`.
XPMEM_VERSION = "master"


def has_device(name: str, root: Path = Path("/")) -> bool:
    """Whether this node has /dev/<name> (a loaded kernel module's device node).

    ``root`` is the filesystem root the probe reads (``/`` on a node; a fake tree in
    the tests), as in ocibench.node.preflight."""
    return (root / "dev" / name).exists()


def detect_xpmem(root: Path = Path("/")) -> dict[str, Any] | None:
    """The XPMEM user library that goes with this node's kernel module, as an external
    entry (prefix as the node sees it), or None without /dev/xpmem or without a
    library beside a header in :data:`XPMEM_PREFIXES`."""
    if not has_device("xpmem", root):
        return None
    for rel in XPMEM_PREFIXES:
        prefix = root / rel
        if not (prefix / "include" / "xpmem.h").is_file():
            continue
        if any((prefix / lib / "libxpmem.so").exists() for lib in ("lib", "lib64")):
            # ~kernel-module: the library is used; the module is the node's own.
            return {"spec": f"xpmem@{XPMEM_VERSION} ~kernel-module", "prefix": f"/{rel}"}
    return None


#: Where a distribution puts Boost's libraries, relative to the root (Debian/Ubuntu, EL).
BOOST_LIBDIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib")


def detect_boost(root: Path = Path("/")) -> dict[str, Any] | None:
    """The system's Boost with program_options (nvbandwidth's one Boost library), as an
    external entry, or None.  Spack's boost recipe cannot detect an installation, and
    without one Spack builds all of Boost for nvbandwidth.  nvbandwidth's CMakeLists
    links Boost statically on every distribution but Fedora, so the static library
    must be there too (Debian: libboost-program-options-dev ships both)."""
    header = root / "usr/include/boost/version.hpp"
    if not header.is_file():
        return None
    match = re.search(r"#define BOOST_VERSION (\d+)", header.read_text(errors="replace"))
    if not match:
        return None
    number = int(match.group(1))
    version = f"{number // 100000}.{number // 100 % 1000}.{number % 100}"
    for libdir in BOOST_LIBDIRS:
        if (root / libdir / "libboost_program_options.a").is_file():
            return {"spec": f"boost@{version} +program_options", "prefix": "/usr"}
    return None


def has_driver(library: str) -> bool:
    """True when the driver's ``library`` (libcuda.so.1) is known to the dynamic linker."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return False
    return f"{library} " in out


def driver_stub(vendor: accelerators.Accelerator, toolkit_prefix: str) -> Path | None:
    """A directory whose driver library is the toolkit's stub, for machines with the
    vendor's toolkit but not its driver (no GPU); None without a stub.

    Binaries built for the GPUs (OMB +cuda links libcuda) cannot even start without the
    driver's library.  The stub lets them start and run host-buffer benchmarks; every
    driver call returns CUDA_ERROR_STUB_LIBRARY, so nothing pretends there is a GPU.
    Only the toolkit's module of such a machine puts it on LD_LIBRARY_PATH.
    """
    known = vendor.driver_stub
    if known is None:
        return None
    for libdir in known.stub_dirs:
        stub = Path(toolkit_prefix) / libdir / known.stub
        if stub.is_file():
            break
    else:
        return None
    stub_dir = paths.cache_dir() / f"{vendor.vendor}-driver-stub"
    link = stub_dir / known.library
    stub_dir.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() or os.readlink(link) != str(stub):
        link.unlink(missing_ok=True)
        link.symlink_to(stub)
    return stub_dir


def detect_tools() -> dict[str, list[dict[str, Any]]]:
    """ReFrame (pip, installed by `make setup`) and Lmod (the OS package), as externals.

    They are what `make setup` installs outside Spack; declaring them external keeps
    anything in the environment from rebuilding them.
    """
    tools: dict[str, list[dict[str, Any]]] = {}
    try:
        import reframe  # noqa: PLC0415  (optional: the [test] extra)

        scripts = Path(sysconfig.get_path("scripts"))
        if (scripts / "reframe").exists():
            tools["reframe"] = [{"spec": f"reframe@{reframe.VERSION}",
                                 "prefix": str(scripts.parent)}]
    except ImportError:
        pass
    lmod_pkg = Path(os.environ.get("LMOD_PKG") or "/usr/share/lmod/lmod")
    version_lua = lmod_pkg / "libexec" / "Version.lua"
    if version_lua.is_file():
        match = re.search(r'M\.tag\(\)\s+return\s+"([\d.]+)"', version_lua.read_text())
        if match:
            # Spack's lmod package puts Lmod under <prefix>/lmod/lmod: the same layout.
            tools["lmod"] = [{"spec": f"lmod@{match.group(1)}",
                              "prefix": str(lmod_pkg.resolve().parent.parent)}]
    return tools
