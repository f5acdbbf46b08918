"""The air-gapped bundle round trip, which is also the cold-cache offline install.

`make bundle` on this machine, in the role of the connected host (the pinned Spack of the
per-user cache, sources from git), then `make install OCIBENCH_BUNDLE=<bundle>` in a fresh
copy of the checkout with a new, empty OCIBENCH_CACHE and no network, on its first run.

The bundle is small: a `local` shape whose stack is this machine's Open MPI and STREAM.
The Open MPI is an external that Spack's detection must find on the freshly unpacked
Spack: there it once took 70 s on 2 cores against Spack's 60 s limit, Open MPI was
dropped and the install planned it from source (src/ocibench/spack/scripts/detect.py).
STREAM is built from its git source (a develop spec); Spack's compiler wrapper and
gcc-runtime come from the bundle's signed build cache.

This is the suite's one cold Spack (minutes): every other Spack test reuses the pinned
Spack of the per-user cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ocibench import paths
from ocibench.spack import bundle_verify
from ocibench.spack import scopes as spack_config
from private_checkout import private_checkout

pytestmark = [pytest.mark.install, pytest.mark.slow]

TIMEOUT_S = 1800
#: The test's shape: `local` with only what the round trip needs.
STACK = {"openmpi": "any", "stream": "any"}
#: The files of STREAM's repository (github.com/jeffhammond/STREAM): the develop
#: source of the user's cache also holds what a build left there.
STREAM_FILES = ("HISTORY.txt", "LICENSE.txt", "Makefile", "README", "mysecond.c",
                "stream.c", "stream.f")


def _offline() -> list[str]:
    """The command prefix that takes the network away: a network namespace of its own
    (root), else proxies to a closed port (Spack's and git's downloads fail)."""
    if shutil.which("unshare") and subprocess.run(
            ["unshare", "-n", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-n"]
    return ["env", "http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9",
            "HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9"]


def _stream_git(where: Path) -> Path:
    """A git repository of STREAM 5.10, from the develop source in the user's cache
    (scripts/mirror-from-checkouts.sh put it there), or SKIP."""
    develop = spack_config.LOCAL_DEVELOP_DIR / "local.yaml"
    entries = (yaml.safe_load(develop.read_text()) or {}).get("develop", {}) \
        if develop.is_file() else {}
    source = Path(entries.get("stream", {}).get("path", "/nonexistent"))
    if not all((source / name).is_file() for name in STREAM_FILES):
        pytest.skip(f"no STREAM source: {develop} names none with {', '.join(STREAM_FILES)} "
                    "(scripts/mirror-from-checkouts.sh stream=<STREAM git>)")
    repo = where / "STREAM"
    repo.mkdir()
    for name in STREAM_FILES:
        shutil.copy(source / name, repo / name)
    git = ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@localhost"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "STREAM 5.10"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return repo


def spack_revision(root: Path) -> str:
    """What BUNDLE's spack= says of the Spack at `root` (scripts/bundle.sh, `archive`): its
    git commit, or tarball:<sha256> when set-up unpacked it from a tarball (README, offline:
    OCIBENCH_SPACK_SOURCE=<tarball>; scripts/fetch-source.sh records the tarball)."""
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"],
                            capture_output=True, text=True)
    if commit.returncode == 0 and (root / ".git").exists():
        return commit.stdout.strip()
    source = (root / ".ocibench-source").read_text().splitlines()
    recorded = [line.split()[1] for line in source[1:] if line.startswith("sha256 ")]
    if recorded:
        return f"tarball:{recorded[0]}"
    # a set-up from before the digest was recorded: the tarball, if it is still there
    return f"tarball:{hashlib.sha256(Path(source[0]).read_bytes()).hexdigest()}"


def _env(**extra: str) -> dict[str, str]:
    """The session's environment without any of the user's ocibench settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OCIBENCH_", "SPACK_ENV", "SPACK_ROOT"))}
    env["SPACK_USER_CONFIG_PATH"] = os.environ["SPACK_USER_CONFIG_PATH"]
    env["SPACK_USER_CACHE_PATH"] = os.environ["SPACK_USER_CACHE_PATH"]
    return {**env, "OCIBENCH_SHAPE": "local", "SPACK_PYTHON": sys.executable, **extra}


@pytest.fixture(scope="module")
def shapes_dir(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("bundle-shapes")
    local = yaml.safe_load((paths.SITE_DIR / "shapes" / "local.yaml").read_text())
    local["software"]["stack"] = STACK
    (where / "local.yaml").write_text(yaml.safe_dump(local, sort_keys=False))
    shutil.copy(paths.SITE_DIR / "shapes" / "schema.json", where / "schema.json")
    return where


@pytest.fixture(scope="module")
def bundle(spack_exe, shapes_dir: Path, tmp_path_factory) -> Path:
    """`make bundle` with the user's pinned Spack; its keyring and store stay untouched
    (the signing key is made in a keyring of the test's own)."""
    where = tmp_path_factory.mktemp("bundle-host")
    stream = _stream_git(where)
    host = private_checkout(where)
    out = where / "bundle"
    env = _env(OCIBENCH_SHAPES_DIR=str(shapes_dir), OCIBENCH_BUNDLE=str(out),
               OCIBENCH_CACHE=str(paths.cache_dir()),
               OCIBENCH_BUNDLE_PARTS="spack sources mirror buildcache",
               OCIBENCH_SRC_STREAM=f"{stream}#HEAD@5.10",
               SPACK_GNUPGHOME=str(where / "gnupg"), PYTHONPATH=str(host / "src"))
    for cmd in ([sys.executable, "-m", "ocibench.cli", "spack-config", "--shape", "local"],
                ["make", "bundle"]):
        done = subprocess.run(cmd, cwd=host, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        assert done.returncode == 0, f"{cmd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return out


def test_bundle_holds_spack_sources_and_signed_binaries(bundle: Path) -> None:
    info = dict(line.split("=", 1) for line in (bundle / "BUNDLE").read_text().splitlines())
    assert info["shape"] == "local" and info["signed"] == "yes"
    assert info["spack"] == spack_revision(paths.spack_root())
    assert (bundle / "spack.tar.gz").is_file() and (bundle / "spack-packages.tar.gz").is_file()
    assert (bundle / "develop" / "stream-5.10.tar.gz").is_file()
    assert (bundle / "develop" / "SOURCES").read_text().startswith("stream 5.10 ")
    assert list((bundle / "keys").glob("*.pub"))
    pushed = {p.parent.name for p in (bundle / "buildcache").rglob("*.spec.manifest.json")}
    assert {"compiler-wrapper", "gcc-runtime"} <= pushed, f"build cache: {pushed}"
    listed = {line.split()[1] for line in (bundle / "SHA256SUMS").read_text().splitlines()}
    # the mirror's aliases (symlinks) removed: a node refuses any symlink in a bundle
    assert not [p for p in bundle.rglob("*") if p.is_symlink()]
    files = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()}
    assert files - {"SHA256SUMS", "SHA256SUMS.asc"} == listed
    # the list signed with the build cache's key: OCIBENCH_BUNDLE_SIGNER authenticates it
    listing = subprocess.run(
        ["gpg", "--homedir", str(bundle.parent / "gnupg"), "--with-colons", "--show-keys",
         str(next((bundle / "keys").glob("*.pub")))], capture_output=True, text=True,
        check=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines()
                       if line.startswith("fpr:"))
    checked = bundle_verify.verify(bundle, signer=fingerprint)
    assert checked.refusals == [] and fingerprint in checked.authenticated_by


@pytest.fixture(scope="module")
def node(tmp_path_factory, shapes_dir: Path) -> tuple[Path, dict[str, str]]:
    where = tmp_path_factory.mktemp("bundle-node")
    checkout = private_checkout(where, detected=False)  # a fresh clone detects again
    # a new user's Spack configuration and caches: nothing warm
    env = _env(OCIBENCH_SHAPES_DIR=str(shapes_dir), OCIBENCH_CACHE=str(where / "cache"),
               PYTHONPATH=str(checkout / "src"), SPACK_USER_CONFIG_PATH=str(where / "spack-user"),
               SPACK_USER_CACHE_PATH=str(where / "spack-user"))
    return checkout, env


def test_a_damaged_bundle_stops_before_anything_is_used(bundle: Path, node) -> None:
    checkout, env = node
    sources = bundle / "develop" / "SOURCES"
    kept, stat = sources.read_bytes(), sources.stat()
    try:
        sources.write_bytes(kept + b"\n")
        done = subprocess.run(["make", "install", f"OCIBENCH_BUNDLE={bundle}"], cwd=checkout,
                              env=env, capture_output=True, text=True, timeout=300)
    finally:
        sources.write_bytes(kept)
        os.utime(sources, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert done.returncode != 0
    assert f"bundle refused: {bundle}/develop/SOURCES: does not match its sha256 in " \
           "SHA256SUMS" in done.stderr, done.stderr
    assert not (Path(env["OCIBENCH_CACHE"]) / "spack").exists(), "Spack unpacked anyway"


def test_offline_first_install_from_the_bundle(bundle: Path, node) -> None:
    checkout, env = node
    done = subprocess.run([*_offline(), "make", "install", f"OCIBENCH_BUNDLE={bundle}"],
                          cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"first offline install failed:\n{out[-5000:]}"
    assert "checksums verified" in out and "trusting the bundle's signing key" in out
    cache = Path(env["OCIBENCH_CACHE"])
    detected = (checkout / "site" / "spack" / "generated" / "machine.json").read_text()
    assert '"openmpi"' in detected, "Spack's detection found no Open MPI"
    # the compiler wrapper and gcc-runtime from the signed build cache, STREAM built
    assert "from binary cache" in out, out[-3000:]
    assert list((cache / "modules" / "local").rglob("stream/*.lua")), \
        f"no stream module under {cache / 'modules'}"
    stamp = cache / "dev-src" / "stream-5.10" / ".ocibench-source"
    assert stamp.read_text().split() == [(bundle / "develop" / "SOURCES").read_text().split()[2]]
