"""Where things live: the repository, and the per-user cache that `make setup` fills.

The cache holds what is never committed: the pinned Spack, the builtin package
repository, a source mirror and a binary build cache.  Each path can be moved
with an environment variable, so an admin can point them at shared storage.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SITE_DIR = REPO_ROOT / "site"
CHECKS_DIR = REPO_ROOT / "checks"
#: The Lmod module naming of every shape (Spack's modules.yaml, at the environment root).
MODULES_YAML = REPO_ROOT / "modules.yaml"


def cache_dir() -> Path:
    """$OCIBENCH_CACHE, else $XDG_CACHE_HOME/oci-hpc-bench, else ~/.cache/oci-hpc-bench."""
    if os.environ.get("OCIBENCH_CACHE"):
        return Path(os.environ["OCIBENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "oci-hpc-bench"


def spack_root() -> Path:
    return Path(os.environ.get("OCIBENCH_SPACK_ROOT") or cache_dir() / "spack")


def builtin_repo() -> Path:
    """The spack-packages checkout's builtin repository (package API v2)."""
    base = os.environ.get("OCIBENCH_SPACK_PACKAGES") or cache_dir() / "spack-packages"
    return Path(base) / "repos" / "spack_repo" / "builtin"


def source_mirror() -> Path:
    return Path(os.environ.get("OCIBENCH_SOURCE_MIRROR") or cache_dir() / "mirror")


def build_cache() -> Path:
    return Path(os.environ.get("OCIBENCH_BUILD_CACHE") or cache_dir() / "buildcache")


def history_db() -> Path:
    """The per-node results store (ocibench.history.store): $OCIBENCH_HISTORY_DB, else
    <cache>/history.sqlite.  It needs a filesystem whose POSIX locks work (docs/history.md)."""
    return Path(os.environ.get("OCIBENCH_HISTORY_DB") or cache_dir() / "history.sqlite")


def module_root(shape: str) -> Path:
    """The Lmod tree of one shape: $OCIBENCH_MODULES_ROOT/<shape>.

    The default sits beside the Spack install tree, so a Spack placed on shared
    storage puts the module trees there too, readable by every user.
    """
    base = os.environ.get("OCIBENCH_MODULES_ROOT") or spack_root().parent / "modules"
    return Path(base) / shape


def module_name(package: str) -> str:
    """The module name users type for a Spack package (modules.yaml projections)."""
    import yaml  # local: paths is imported by scripts that need no YAML

    conf = yaml.safe_load(MODULES_YAML.read_text())
    projections = conf["modules"]["default"]["lmod"].get("projections", {})
    projection = projections.get(package, projections.get("all", "{name}/{version}"))
    return projection.split("/")[0].replace("{name}", package)
