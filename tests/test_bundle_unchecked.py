"""A bundle's unchecked sources: named, warned about, and the only ones installed
without a checksum.

`make bundle` takes a release tarball that is not upstream's bytes (here a tarball of
GNU config's two scripts standing for gnuconfig 2024-07-27, as a distribution's
recompressed .orig tarball stands for Open MPI's) into the bundle's unchecked/ and names
it in BUNDLE.  scripts/install.sh then installs that package alone with --no-checksum,
offline, and keeps Spack's checksum on for everything the bundle does not name: in the
same install, a checked source with other bytes than upstream's (a file standing for
ca-certificates-mozilla's in mirror/) is refused.  One install shows both, because
each costs a concretization (half a minute on 2 cores).

gnuconfig and ca-certificates-mozilla have no dependencies and their installs copy
files: no compiler.  The install has its own store and source cache, and no upstream,
so nothing of the user's installation is reused.  Spack's indexes of the package
repositories are the session's (conftest.py): rebuilding them costs a minute of CPU,
and the cold Spack is tests/test_bundle.py's.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from ocibench import paths
from ocibench.spack import bundle_verify
from private_checkout import private_checkout
from test_bundle import _env, _offline
from test_bundle_integrity import _write_sums

pytestmark = [pytest.mark.spack, pytest.mark.install]

VERSION = "2024-07-27"
#: the sha256 builtin/packages/gnuconfig declares for VERSION: Spack's mirror layout
#: keeps the file under it, whatever its bytes
DIGEST = "1135044961853c7f116145cee9bb15c3d29b1b081cf8293954efd0f05d801a7c"
ARCHIVE = Path("_source-cache", "archive", DIGEST[:2], f"{DIGEST}.tar.gz")
#: a checked source: ca-certificates-mozilla's .pem (builtin recipe's sha256, not expanded)
CERTS_VERSION = "2025-08-12"
CERTS_DIGEST = "64dfd5b1026700e0a0a324964749da9adc69ae5e51e899bf16ff47d6fd0e9a5e"
CERTS_FILE = Path("_source-cache", "archive", CERTS_DIGEST[:2], CERTS_DIGEST)  # no extension: not expanded
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
    local["software"]["stack"] = {"gnuconfig": VERSION,
                                  "ca-certificates-mozilla": CERTS_VERSION}
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


def _install(bundle: Path, checkout: Path, where: Path, sha256: str) -> subprocess.CompletedProcess:
    """scripts/install.sh from `bundle`, offline, into a store of its own; `sha256`: the
    digest of its SHA256SUMS, the admin's trust anchor that unchecked= needs."""
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
               SPACK_USER_CONFIG_PATH=str(scope), PYTHONPATH=str(checkout / "src"),
               OCIBENCH_BUNDLE_SHA256=sha256)
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
    # what the admin gives the node to authenticate unchecked= (src/ocibench/spack/bundle_verify.py)
    digest = hashlib.sha256((bundle / "SHA256SUMS").read_bytes()).hexdigest()
    assert f"add OCIBENCH_BUNDLE_SHA256={digest}" in out
    assert bundle_verify.verify(bundle, sha256=digest).refusals == []
    assert bundle_verify.verify(bundle).refusals == [
        f"{bundle}/BUNDLE: unchecked=gnuconfig@{VERSION} would install without checksums, "
        "and this bundle's SHA256SUMS is not authenticated: give OCIBENCH_BUNDLE_SHA256 or "
        "OCIBENCH_BUNDLE_SIGNER as `make bundle` printed them"]


def test_unchecked_source_alone_without_checksum_the_rest_checked(made, tmp_path) -> None:
    bundle, checkout, _ = made
    node = tmp_path / "bundle"
    shutil.copytree(bundle, node)
    # Not named unchecked: Spack must check it against the recipe and stop.
    (node / "mirror" / CERTS_FILE).parent.mkdir(parents=True)
    (node / "mirror" / CERTS_FILE).write_text("not Mozilla's certificates\n")
    # listed and authenticated, as a bundle maker's mistake would be: Spack still refuses it
    digest = _write_sums(node)
    done = _install(node, checkout, tmp_path / "node", digest)
    out = done.stdout + done.stderr
    assert f"WARNING: gnuconfig@{VERSION} from the bundle's unchecked/" in out, out[-4000:]
    store = tmp_path / "node" / "store"
    assert next(store.rglob("config.guess"), None) is not None, \
        f"the unchecked gnuconfig was not installed:\n{out[-4000:]}"
    assert done.returncode != 0, f"installed a checked source with other bytes:\n{out[-3000:]}"
    assert "sha256 checksum failed" in out, out[-3000:]
    assert not list(store.rglob("cacert.pem"))
