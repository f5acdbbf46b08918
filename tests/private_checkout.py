"""A private copy of this checkout and a private Spack scope, for the tests that build.

The copy has an environment of its own (spack.lock, .spack-env, generated scopes), as a
fresh clone has; the scope installs into a private tree and reads the user's install
tree as a Spack upstream, which Spack never writes to.  Nothing the user installed
changes (conftest.py checks).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

import user_installation
from ocibench.node import machine
from ocibench.paths import REPO_ROOT
from ocibench.spack import scopes as spack_config

#: What a private copy of the checkout leaves out: git, generated and run outputs.
NOT_COPIED = (".git", ".spack-env", "spack.lock", "generated", "__pycache__", "output",
              "stage", "perflogs", "reports", ".carry", ".carry-big", ".whl", ".venv", "*.egg-info",
              ".pytest_cache", ".ruff_cache", "bundle-*")


def private_checkout(where: Path, detected: bool = True) -> Path:
    """A copy of this checkout at `where`/checkout.  With `detected`, this machine's
    Spack detection (site/spack/generated/machine.json, if `make setup` cached it) comes
    along: the same machine, and the detection need not run again."""
    clone = where / "checkout"
    shutil.copytree(REPO_ROOT, clone, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED))
    cached = spack_config.GENERATED_DIR / machine.MACHINE_FILE
    if detected and cached.is_file():
        (clone / "site" / "spack" / "generated").mkdir(parents=True)
        shutil.copy(cached, clone / "site" / "spack" / "generated" / machine.MACHINE_FILE)
    return clone


def private_spack_scope(where: Path) -> Path:
    """A Spack user scope (SPACK_USER_CONFIG_PATH) that installs into `where`/store,
    stages its builds in `where`/stage and reads the user's install tree as an
    upstream.  Its own stage: Spack keeps a develop spec's build directory between
    builds, and one configured for another session's install tree installed there
    ("Nothing was installed")."""
    scope = where / "spack-scope"
    scope.mkdir(parents=True)
    (scope / "config.yaml").write_text(yaml.safe_dump(
        {"config": {"install_tree": {"root": str(where / "store")},
                    "build_stage": [str(where / "stage")]}}))
    upstream = user_installation.user_install_tree()
    if upstream.is_dir():
        (scope / "upstreams.yaml").write_text(yaml.safe_dump(
            {"upstreams": {"user": {"install_tree": str(upstream)}}}))
    return scope
