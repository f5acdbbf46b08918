"""A bundle's unchecked sources: named, warned about, and the only ones installed
without a checksum.

`make bundle` takes a release tarball that is not upstream's bytes (here a tarball of
GNU config's two scripts standing for gnuconfig 2024-07-27, as a distribution's
recompressed .orig tarball stands for Open MPI's) into the bundle's unchecked/ and names
it in BUNDLE.  scripts/install.sh then installs that package alone with --no-checksum,
offline.  The same bytes placed as a checked source (mirror/) are refused: Spack's
checksum stays on for everything the bundle does not name.

gnuconfig has no dependencies and its install copies two files: seconds, no compiler.
Each install has its own store and source cache, and no upstream, so nothing of the
user's installation (where gnuconfig may be installed from upstream's tarball) is reused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from ocibench import paths
from private_checkout import private_checkout
from test_bundle import _env, _offline

pytestmark = [pytest.mark.spack, pytest.mark.install]

VERSION = "2024-07-27"
#: the sha256 builtin/packages/gnuconfig declares for VERSION: Spack's mirror layout
#: keeps the file under it, whatever its bytes
DIGEST = "1135044961853c7f116145cee9bb15c3d29b1b081cf8293954efd0f05d801a7c"
ARCHIVE = Path("_source-cache", "archive", DIGEST[:2], f"{DIGEST}.tar.gz")
GNU_CONFIG = Path("/usr/share/misc")  # Debian/Ubuntu's autotools-dev
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def made(spack_exe, tmp_path_factory) -> tuple[Path, Path, str]:
    """(the bundle, the checkout that made it, make bundle's output)"""
    if not all((GNU_CONFIG / f).is_file() for f in ("config.guess", "config.sub")):
        pytest.skip(f"no config.guess/config.sub in {GNU_CONFIG} (autotools-dev)")
    where = tmp_path_factory.mktemp("unchecked")
    shapes = where / "shapes"
    shapes.mkdir()
    local = yaml.safe_load((paths.SITE_DIR / "shapes" / "local.yaml").read_text())
    local["software"]["stack"] = {"gnuconfig": VERSION}
    (shapes / "local.yaml").write_text(yaml.safe_dump(local, sort_keys=False))
    shutil.copy(paths.SITE_DIR / "shapes" / "schema.json", shapes / "schema.json")
    tarball = where / f"gnuconfig_{VERSION}.orig.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        for name in ("config.guess", "config.sub"):
            tar.add(GNU_CONFIG / name, f"gnuconfig-{VERSION}/{name}")
    checkout = private_checkout(where)
    bundle = where / "bundle"
    env = _env(OCIBENCH_SHAPES_DIR=str(shapes), OCIBENCH_BUNDLE=str(bundle),
               OCIBENCH_CACHE=str(paths.cache_dir()), OCIBENCH_BUNDLE_PARTS="sources",
               PYTHONPATH=str(checkout / "src"))
    done = subprocess.run(["bash", "scripts/bundle.sh", f"gnuconfig={tarball}@{VERSION}"],
                          cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return bundle, checkout, done.stdout + done.stderr


def _install(bundle: Path, checkout: Path, where: Path) -> subprocess.CompletedProcess:
    """scripts/install.sh from `bundle`, offline, into a store of its own."""
    scope = where / "spack-scope"
    scope.mkdir(parents=True)
    (scope / "config.yaml").write_text(yaml.safe_dump({"config": {
        "install_tree": {"root": str(where / "store")},
        "source_cache": str(where / "source-cache")}}))
    env = _env(OCIBENCH_SHAPES_DIR=str(checkout.parent / "shapes"),
               OCIBENCH_CACHE=str(paths.cache_dir()), OCIBENCH_BUNDLE=str(bundle),
               OCIBENCH_SOURCE_MIRROR=str(bundle / "mirror"),
               OCIBENCH_BUILD_CACHE=str(where / "no-build-cache"),
               OCIBENCH_MODULES_ROOT=str(where / "modules"),
               SPACK_USER_CONFIG_PATH=str(scope), SPACK_USER_CACHE_PATH=str(where / "cache"),
               PYTHONPATH=str(checkout / "src"))
    generated = subprocess.run([sys.executable, "-m", "ocibench.cli", "spack-config",
                                "--shape", "local"], cwd=checkout, env=env,
                               capture_output=True, text=True)
    assert generated.returncode == 0, generated.stderr
    return subprocess.run([*_offline(), "bash", "scripts/install.sh"], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def test_bundle_names_the_unchecked_source(made) -> None:
    bundle, _, out = made
    assert f"unchecked=gnuconfig@{VERSION}" in (bundle / "BUNDLE").read_text().splitlines()
    assert (bundle / "unchecked" / ARCHIVE).is_file()
    assert not (bundle / "mirror" / ARCHIVE).exists()
    assert f"WARNING: gnuconfig@{VERSION} is NOT upstream's file" in out
    listed = (bundle / "SHA256SUMS").read_text()
    assert f"unchecked/{ARCHIVE}" in listed


def test_unchecked_source_installs_alone_without_checksum(made, tmp_path) -> None:
    bundle, checkout, _ = made
    done = _install(bundle, checkout, tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert f"WARNING: gnuconfig@{VERSION} from the bundle's unchecked/" in out
    prefix = next((tmp_path / "store").rglob("config.guess"), None)
    assert prefix is not None, "gnuconfig not installed"


def test_checked_source_with_other_bytes_is_refused(made, tmp_path) -> None:
    """The same file as a checked source: the bundle does not name it unchecked, so
    Spack checks it against the recipe and stops."""
    bundle, checkout, _ = made
    checked = tmp_path / "bundle"
    shutil.copytree(bundle, checked)
    (checked / "mirror" / ARCHIVE).parent.mkdir(parents=True)
    (checked / "unchecked" / ARCHIVE).rename(checked / "mirror" / ARCHIVE)
    info = [line for line in (checked / "BUNDLE").read_text().splitlines()
            if not line.startswith("unchecked=")]
    (checked / "BUNDLE").write_text("\n".join(info) + "\n")
    done = _install(checked, checkout, tmp_path / "node")
    out = done.stdout + done.stderr
    assert done.returncode != 0, f"installed a checked source with other bytes:\n{out[-3000:]}"
    assert "sha256 checksum failed" in out, out[-3000:]
    assert not list((tmp_path / "node" / "store").rglob("config.guess"))
