"""A bundle's integrity: set-up uses only what SHA256SUMS lists, inside the bundle, and
what installs without a checksum is decided by an authenticated list.

Each case is a small bundle made here (real files: wheels pip can install, a .deb
dpkg-deb built, a GPG key gpg made), with one fault.  `scripts/setup.sh` runs on it with
a Python of its own (a venv, empty) that lacks the project's three base requirements, so
that pip *would* install the bundle's wheels; each fault must stop set-up before that,
with one line naming the file.  test_the_intact_bundle_installs_its_wheels shows the
same set-up on the intact bundle installing its wheels into such a venv: the proof that
the faulty runs would have shown an install.  Then the check itself case by case, the
signed list (real gpg keys), a Spack set up from a tarball, and the scripts the
documents run directly.

Set-up runs offline in every case: no Spack source is given (its step 2 stops at a path
that does not exist), and Lmod and Open MPI must be installed (skipped otherwise), so
that set-up never reaches apt-get or dnf on this machine, even with the check removed.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from ocibench import paths, requirements
from ocibench.spack import bundle_verify
from test_bundle import spack_revision

SCRIPTS = paths.REPO_ROOT / "scripts"
#: the project's base requirements (pyproject.toml), as wheels of no content
#: A wheel for each base requirement of pyproject.toml (test_the_wheels_cover_the_base_
#: requirements keeps the two lists together): set-up installs exactly these.
WHEELS = {"PyYAML": "6.0.2", "archspec": "0.2.5", "jsonschema": "4.99", "ClusterShell": "1.10.1"}
EVIL_WHEEL = "jsonschema-99.0-py3-none-any.whl"


def _wheel(where: Path, name: str, version: str, extra: dict[str, str] | None = None) -> Path:
    """A wheel pip installs (PEP 427: METADATA, WHEEL, RECORD with each file's hash)."""
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n",
             **(extra or {})}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    out = where / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)
    out.write_bytes(buf.getvalue())
    return out


def _write_sums(bundle: Path) -> str:
    """SHA256SUMS as scripts/bundle.sh writes it (find | sort | sha256sum); its sha256."""
    names = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*")
                   if p.is_file() and p.name not in ("SHA256SUMS", "SHA256SUMS.asc"))
    lines = [f"{hashlib.sha256((bundle / n).read_bytes()).hexdigest()}  {n}" for n in names]
    (bundle / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return hashlib.sha256((bundle / "SHA256SUMS").read_bytes()).hexdigest()


def _bundle(where: Path) -> Path:
    """An intact bundle: BUNDLE, the base wheels, a develop source, SHA256SUMS."""
    bundle = where / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    (bundle / "os-packages").mkdir()
    (bundle / "develop").mkdir()
    (bundle / "BUNDLE").write_text("shape=local\nspack=tarball:00\nsigned=no\n")
    for name, version in WHEELS.items():
        _wheel(bundle / "wheels", name, version)
    (bundle / "develop" / "stream-5.10.tar.gz").write_bytes(b"not read by the check")
    (bundle / "develop" / "SOURCES").write_text(f"stream 5.10 {'a' * 40}\n")
    _write_sums(bundle)
    return bundle


@pytest.fixture(scope="module")
def pristine_env(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    return venv


@pytest.fixture
def python_env(pristine_env: Path, tmp_path: Path) -> Path:
    """A venv of the test's own: none of the base requirements, pip to install them (a
    copy: `python -m pip` finds its prefix from the pyvenv.cfg beside bin/)."""
    return Path(shutil.copytree(pristine_env, tmp_path / "venv", symlinks=True))


def _installed(venv: Path) -> list[str]:
    """What was installed into the venv since it was made (pip's own packages aside)."""
    return sorted(p.name for p in venv.glob("lib/python*/site-packages/*")
                  if not p.name.startswith(("pip", "_distutils_hack", "setuptools", "pkg_",
                                            "distutils-precedence", "__pycache__")))


def _setup(bundle: Path, venv: Path, tmp: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OCIBENCH_", "PIP_", "PYTHONPATH"))}
    env.update(OCIBENCH_BUNDLE=str(bundle), OCIBENCH_PYTHON=str(venv / "bin" / "python"),
               OCIBENCH_PYTHON_EXTRAS="", OCIBENCH_CACHE=str(tmp / "cache"),
               OCIBENCH_SPACK_SOURCE=str(tmp / "no-spack-here"), OCIBENCH_SHAPE="local",
               **extra)
    return subprocess.run(["bash", str(SCRIPTS / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def machine(lmod_init, mpirun) -> None:
    """Set-up must find Lmod and Open MPI, so that it never installs them here."""


def _refused(done: subprocess.CompletedProcess, venv: Path, tmp: Path, *names: str) -> None:
    """Set-up stopped at its first step, each of `names` on a line of its own with the
    reason, and nothing was installed: the venv as made, no Spack, no marker."""
    assert _installed(venv) == [], f"installed: {_installed(venv)}\n{done.stdout}"
    assert not (tmp / "marker").exists(), "the marker's code ran"
    assert "installing python tools" not in done.stdout
    assert not (tmp / "cache").exists(), "set-up went on to Spack"
    assert done.returncode != 0, f"set-up went on:\n{done.stdout}\n{done.stderr}"
    lines = done.stderr.splitlines()
    for name in names:
        assert any(line.startswith("bundle refused: ") and name in line for line in lines), \
            f"no refusal naming {name}:\n{done.stderr}"
    assert "nothing was installed" in done.stderr


def test_an_unlisted_wheel_is_refused_before_pip(machine, python_env, tmp_path) -> None:
    bundle = _bundle(tmp_path)
    # newer than the listed jsonschema: pip would take it, and its .pth runs at the next
    # start of that Python (site.py runs every `import` line of a .pth file)
    marker = tmp_path / "marker"
    _wheel(bundle / "wheels", "jsonschema", "99.0",
           {"zz_ocibench_marker.pth": f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n"})
    assert (bundle / "wheels" / EVIL_WHEEL).is_file()
    done = _setup(bundle, python_env, tmp_path)
    _refused(done, python_env, tmp_path, f"wheels/{EVIL_WHEEL}: not listed in SHA256SUMS")


def test_an_unlisted_deb_is_refused_before_apt(machine, python_env, tmp_path) -> None:
    if not shutil.which("dpkg-deb"):
        pytest.skip("no dpkg-deb to build a .deb (Debian's dpkg)")
    bundle = _bundle(tmp_path)
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: ocibench-bundle-test\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: test <test@localhost>\nDescription: a bundle test's marker\n")
    postinst = pkg / "DEBIAN" / "postinst"
    postinst.write_text(f"#!/bin/sh\ntouch {tmp_path / 'marker'}\n")
    postinst.chmod(0o755)
    deb = bundle / "os-packages" / "ocibench-bundle-test_1.0_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(deb)],
                   check=True, capture_output=True)
    done = _setup(bundle, python_env, tmp_path)
    _refused(done, python_env, tmp_path, f"os-packages/{deb.name}: not listed in SHA256SUMS")


@pytest.mark.parametrize("outside", ["../outside.txt", "/etc/hostname"])
def test_a_line_leaving_the_bundle_is_refused(machine, python_env, tmp_path, outside) -> None:
    bundle = _bundle(tmp_path)
    target = (bundle / outside) if not outside.startswith("/") else Path(outside)
    if not outside.startswith("/"):
        target.write_text("outside the bundle\n")
    if not target.is_file():
        pytest.skip(f"no {target} on this machine")
    # its true digest: `sha256sum -c` checks it and passes
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    with (bundle / "SHA256SUMS").open("a") as sums:
        sums.write(f"{digest}  {outside}\n")
    done = _setup(bundle, python_env, tmp_path)
    _refused(done, python_env, tmp_path, f"names {outside}, outside the bundle")


def test_a_symlink_in_the_bundle_is_refused(machine, python_env, tmp_path) -> None:
    bundle = _bundle(tmp_path)
    target = Path("/etc/shadow")
    if not os.access(target, os.R_OK):
        target = Path("/etc/passwd")  # as readable to whoever runs set-up
    (bundle / "keys").mkdir()
    (bundle / "keys" / "bundle.pub").symlink_to(target)
    _write_sums(bundle)  # listed, with its target's digest: `sha256sum -c` follows it
    assert "keys/bundle.pub" in (bundle / "SHA256SUMS").read_text()
    done = _setup(bundle, python_env, tmp_path)
    _refused(done, python_env, tmp_path, f"keys/bundle.pub: a symlink (to {target})")


def test_an_edited_unchecked_is_refused_without_an_anchor(machine, python_env, tmp_path) -> None:
    bundle = _bundle(tmp_path)
    with (bundle / "BUNDLE").open("a") as info:
        info.write("unchecked=jsonschema@99.0\n")
    _write_sums(bundle)  # as scripts/bundle.sh writes it: the list matches every file
    done = _setup(bundle, python_env, tmp_path)
    _refused(done, python_env, tmp_path, "BUNDLE: unchecked=jsonschema@99.0 would install "
             "without checksums, and this bundle's SHA256SUMS is not authenticated")


def test_an_edited_unchecked_fails_the_admins_digest(machine, python_env, tmp_path) -> None:
    bundle = _bundle(tmp_path)
    with (bundle / "BUNDLE").open("a") as info:
        info.write("unchecked=gnuconfig@2024-07-27\n")
    made = _write_sums(bundle)  # the bundle as made: authenticated by its digest
    assert bundle_verify.verify(bundle, sha256=made).refusals == []
    with (bundle / "BUNDLE").open("a") as info:
        info.write("unchecked=jsonschema@99.0\n")
    _write_sums(bundle)
    done = _setup(bundle, python_env, tmp_path, OCIBENCH_BUNDLE_SHA256=made)
    _refused(done, python_env, tmp_path, "SHA256SUMS: its sha256 is ")


def test_install_reads_unchecked_only_from_a_checked_bundle(tmp_path) -> None:
    """scripts/install.sh, which passes --no-checksum for unchecked=, checks the bundle
    again before Spack (the bundle may have changed since set-up)."""
    bundle = _bundle(tmp_path)
    with (bundle / "BUNDLE").open("a") as info:
        info.write("unchecked=jsonschema@99.0\n")
    _write_sums(bundle)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OCIBENCH_", "PYTHONPATH"))}
    done = subprocess.run(["bash", str(SCRIPTS / "install.sh")], capture_output=True, text=True,
                          env={**env, "OCIBENCH_BUNDLE": str(bundle),
                               "OCIBENCH_CACHE": str(tmp_path / "cache")}, timeout=120)
    assert done.returncode != 0
    assert f"bundle refused: {bundle}/BUNDLE: unchecked=jsonschema@99.0" in done.stderr, \
        done.stdout + done.stderr
    assert "nothing was installed" in done.stderr and "spack" not in done.stdout.lower()


def test_the_wheels_cover_the_base_requirements() -> None:
    """A base requirement without a wheel here makes the control below fail at pip, far
    from its cause: say so here."""
    names = {re.split(r"[<>=!~ ]", req, maxsplit=1)[0].lower()
             for req in requirements.requirements([])}
    assert names == {name.lower() for name in WHEELS}


def test_the_intact_bundle_installs_its_wheels(machine, python_env, tmp_path) -> None:
    """The control: the same set-up on the intact bundle installs its listed wheels
    (so the runs above would have shown an install), then stops at Spack, absent here."""
    venv = python_env
    bundle = _bundle(tmp_path)
    done = _setup(bundle, venv, tmp_path)
    assert f"checksums verified: {len(WHEELS) + 3} files, all as SHA256SUMS lists them, nothing unlisted; " \
           "NOT authenticated" in done.stdout, done.stdout + done.stderr
    assert "installing python tools" in done.stdout
    assert {f"{name}-{version}.dist-info" for name, version in WHEELS.items()} \
        <= set(_installed(venv)), _installed(venv)
    assert "no-spack-here" in done.stderr and done.returncode != 0


# -- the check itself, case by case (src/ocibench/spack/bundle_verify.py) -------------------

def _refusals(bundle: Path, **anchor: str) -> list[str]:
    return bundle_verify.verify(bundle, **anchor).refusals


def test_intact_bundle_passes(tmp_path) -> None:
    result = bundle_verify.verify(_bundle(tmp_path))
    assert result.refusals == [] and result.files == len(WHEELS) + 3 and result.authenticated_by == ""


@pytest.mark.parametrize("line, why", [
    ("{d}  wheels/PyYAML-6.0.2-py3-none-any.whl", "lists wheels/PyYAML-6.0.2-py3-none-any.whl "
                                                 "again (first on line"),
    ("{d}  wheels//x.whl", "an empty or '.' part"),
    ("{d}  wheels/./x.whl", "an empty or '.' part"),
    ("{d}  wheels/-x.whl", "a leading -"),
    ("{d}  wheels/a b.whl", "a character outside"),
    ("{d}  wheels/a\tb.whl", "a character outside"),
    ("\\{d}  wheels/a\\nb.whl", "is not '<sha256>  <path>'"),   # sha256sum's escaped name
    ("{d} *wheels/x.whl", "is not '<sha256>  <path>'"),
    ("{d}  SHA256SUMS", "cannot list itself"),
])
def test_malformed_lines_are_refused(tmp_path, line, why) -> None:
    bundle = _bundle(tmp_path)
    with (bundle / "SHA256SUMS").open("a") as sums:
        sums.write(line.format(d="0" * 64) + "\n")
    refusals = _refusals(bundle)
    appended = len((bundle / "SHA256SUMS").read_text().splitlines())
    assert any(f"{bundle}/SHA256SUMS: line {appended}" in r and why in r
               for r in refusals), refusals


def test_an_altered_or_missing_file_is_named(tmp_path) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "develop" / "stream-5.10.tar.gz").write_bytes(b"other bytes")
    (bundle / "wheels" / "archspec-0.2.5-py3-none-any.whl").unlink()
    assert _refusals(bundle) == [
        f"{bundle}/wheels/archspec-0.2.5-py3-none-any.whl: listed in SHA256SUMS but absent "
        "(or not a regular file)",
        f"{bundle}/develop/stream-5.10.tar.gz: does not match its sha256 in SHA256SUMS "
        "(damaged or altered)"]


def test_other_file_types_and_odd_names_are_refused(tmp_path) -> None:
    bundle = _bundle(tmp_path)
    os.mkfifo(bundle / "mirror-fifo")
    (bundle / "wheels" / "x\ny.whl").write_text("")
    refusals = _refusals(bundle)
    assert f"{bundle}/mirror-fifo: neither a file nor a directory" in refusals
    assert f"{bundle}/'wheels/x\\ny.whl': not listed in SHA256SUMS: set-up uses listed " \
           "files only" in refusals, refusals


def test_a_symlinked_directory_is_refused_not_followed(tmp_path) -> None:
    bundle = _bundle(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "evil.whl").write_text("")
    (bundle / "mirror").symlink_to(tmp_path / "elsewhere")
    assert _refusals(bundle) == [f"{bundle}/mirror: a symlink (to {tmp_path}/elsewhere): "
                                 "a bundle holds files only"]


@pytest.mark.parametrize("line", ["../../../etc 5.10 " + "a" * 40, "stream 5.10",
                                  "stream ../x " + "a" * 40, "nccl-tests 2.19.6 " + "b" * 40])
def test_develop_sources_stay_in_their_directory(tmp_path, line) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "develop" / "SOURCES").write_text(line + "\n")
    _write_sums(bundle)
    refusals = _refusals(bundle)
    assert len(refusals) == 1 and refusals[0].startswith(f"{bundle}/develop/SOURCES: line 1"), \
        refusals


def test_bundle_keys_given_twice_are_refused(tmp_path) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "BUNDLE").write_text("shape=local\nunchecked=\nunchecked=jsonschema@99.0\n")
    digest = _write_sums(bundle)
    assert _refusals(bundle, sha256=digest) == [f"{bundle}/BUNDLE: line 3 gives unchecked again"]


@pytest.fixture(scope="module")
def gpg_keys(tmp_path_factory):
    """Two signing keys in a keyring of the test's own: the bundle's and another's."""
    if not shutil.which("gpg"):
        pytest.skip("no gpg (Debian: gnupg)")
    # gpg-agent's socket lives in the home: a short path (the socket name has a limit)
    home = Path(tempfile.mkdtemp(prefix="ocibench-gpg-"))
    home.chmod(0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--no-tty", "--quiet", "--passphrase", ""]
    fingerprints = []
    for who in ("bundle", "other"):
        subprocess.run([*gpg, "--quick-gen-key", f"{who} <{who}@localhost>", "ed25519", "sign",
                        "never"], check=True, capture_output=True)
        listing = subprocess.run([*gpg, "--with-colons", "--list-secret-keys", f"{who}@localhost"],
                                 check=True, capture_output=True, text=True).stdout
        fingerprints.append(next(line.split(":")[9] for line in listing.splitlines()
                                 if line.startswith("fpr:")))
    yield gpg, fingerprints
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"],
                   capture_output=True)
    shutil.rmtree(home, ignore_errors=True)


def _sign(gpg: list[str], bundle: Path, fingerprint: str) -> None:
    """keys/bundle.pub and SHA256SUMS.asc, as scripts/bundle.sh makes them."""
    (bundle / "keys").mkdir(exist_ok=True)
    subprocess.run([*gpg, "--yes", "--armor", "--output", str(bundle / "keys" / "bundle.pub"),
                    "--export", fingerprint], check=True, capture_output=True)
    _write_sums(bundle)
    subprocess.run([*gpg, "--yes", "--armor", "--local-user", fingerprint, "--detach-sign",
                    "--output", str(bundle / "SHA256SUMS.asc"), str(bundle / "SHA256SUMS")],
                   check=True, capture_output=True)


def test_signed_list_authenticates_unchecked(gpg_keys, tmp_path) -> None:
    gpg, (ours, _) = gpg_keys
    bundle = _bundle(tmp_path)
    with (bundle / "BUNDLE").open("a") as info:
        info.write("unchecked=gnuconfig@2024-07-27\n")
    _sign(gpg, bundle, ours)
    result = bundle_verify.verify(bundle, signer=ours)
    assert result.refusals == [] and ours in result.authenticated_by
    assert result.info["unchecked"] == "gnuconfig@2024-07-27"
    spaced = " ".join(ours[i:i + 4] for i in range(0, 40, 4))  # as gpg prints it
    assert _refusals(bundle, signer=spaced) == []


def test_edited_unchecked_with_a_new_list_fails_the_signature(gpg_keys, tmp_path) -> None:
    gpg, (ours, other) = gpg_keys
    bundle = _bundle(tmp_path)
    _sign(gpg, bundle, ours)
    with (bundle / "BUNDLE").open("a") as info:
        info.write("unchecked=jsonschema@99.0\n")
    _write_sums(bundle)  # the list regenerated; the signature is the maker's
    assert _refusals(bundle, signer=ours) == [
        f"{bundle}/SHA256SUMS.asc: no good signature of SHA256SUMS by the key {ours} "
        "(OCIBENCH_BUNDLE_SIGNER): signed by another key, or SHA256SUMS changed since"]
    _sign(gpg, bundle, other)  # signed again, by a key of the editor's, put in keys/
    refusals = _refusals(bundle, signer=ours)
    assert refusals == [f"{bundle}/SHA256SUMS.asc: no good signature of SHA256SUMS by the "
                        f"key {ours} (OCIBENCH_BUNDLE_SIGNER): signed by another key, or "
                        "SHA256SUMS changed since"], refusals
    assert _refusals(bundle, signer=other) == []  # what the editor's key does sign



def test_a_signer_needs_a_signature_and_a_key_that_is_a_file(gpg_keys, tmp_path) -> None:
    gpg, (ours, _) = gpg_keys
    bundle = _bundle(tmp_path)
    assert _refusals(bundle, signer=ours)[0].startswith(
        f"{bundle}/SHA256SUMS.asc: cannot be read ("), "an unsigned bundle passed"
    _sign(gpg, bundle, ours)
    (bundle / "keys" / "bundle.pub").unlink()
    (bundle / "keys" / "bundle.pub").symlink_to("/etc/passwd")
    refusals = _refusals(bundle, signer=ours)
    assert refusals[0].startswith(f"{bundle}/keys: a public key cannot be read ("), refusals
    assert f"{bundle}/keys/bundle.pub: a symlink (to /etc/passwd): a bundle holds files " \
           "only" in refusals


def test_the_digest_authenticates(tmp_path) -> None:
    bundle = _bundle(tmp_path)
    digest = hashlib.sha256((bundle / "SHA256SUMS").read_bytes()).hexdigest()
    result = bundle_verify.verify(bundle, sha256=digest)
    assert result.refusals == [] and result.authenticated_by == "OCIBENCH_BUNDLE_SHA256"
    assert _refusals(bundle, sha256="0" * 64) == [
        f"{bundle}/SHA256SUMS: its sha256 is {digest}, not {'0' * 64} "
        "(OCIBENCH_BUNDLE_SHA256): not the bundle that was made"]

# -- a Spack set up from a tarball (README, offline: OCIBENCH_SPACK_SOURCE=<tarball>) ----

def _tarball_of(checkout: Path, name: str, where: Path, path: str = "") -> Path:
    """The pinned checkout as a tarball: `git archive` of it, or the tarball it came from."""
    out = where / f"{name}.tar.gz"
    if (checkout / ".git").exists():
        archive = subprocess.run(["git", "-C", str(checkout), "archive", f"--prefix={name}/",
                                  "HEAD", *([path] if path else [])], check=True,
                                 capture_output=True).stdout
        out.write_bytes(gzip.compress(archive, mtime=0))
    else:
        shutil.copy((checkout / ".ocibench-source").read_text().splitlines()[0], out)
    return out


def test_bundle_of_a_spack_set_up_from_a_tarball(spack_exe, tmp_path) -> None:
    """`make bundle` where set-up unpacked Spack from a tarball: BUNDLE names it by its
    digest (tarball:<sha256>, no git commit) and carries that very file; a tarball that
    changed since set-up is refused, not carried as the Spack that was set up."""
    spack_tgz = _tarball_of(paths.spack_root(), "spack", tmp_path)
    packages_tgz = _tarball_of(paths.builtin_repo().parents[2], "spack-packages", tmp_path,
                               "repos/spack_repo/builtin")
    cache = tmp_path / "cache"
    # set-up's own unpacking (scripts/setup.sh sources it)
    unpack = subprocess.run(
        ["bash", "-c", 'say() { :; }; die() { echo "$*" >&2; exit 1; }; '
         "source scripts/fetch-source.sh; "
         'fetch spack "$1" v1.1.0 https://github.com/spack/spack "$2" && '
         'fetch spack-packages "$3" releases/v2025.11 https://github.com/spack/spack-packages "$4"',
         "-", str(cache / "spack"), str(spack_tgz), str(cache / "spack-packages"),
         str(packages_tgz)], cwd=paths.REPO_ROOT, capture_output=True, text=True)
    assert unpack.returncode == 0, unpack.stderr
    digest = hashlib.sha256(spack_tgz.read_bytes()).hexdigest()
    assert spack_revision(cache / "spack") == f"tarball:{digest}"

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OCIBENCH_", "PYTHONPATH"))}
    env.update(OCIBENCH_CACHE=str(cache), OCIBENCH_SHAPE="local", OCIBENCH_BUNDLE_PARTS="spack",
               OCIBENCH_BUNDLE=str(tmp_path / "bundle"))
    made = subprocess.run(["bash", str(SCRIPTS / "bundle.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    bundle = tmp_path / "bundle"
    info = dict(line.split("=", 1) for line in (bundle / "BUNDLE").read_text().splitlines())
    assert info["spack"] == f"tarball:{digest}" == spack_revision(cache / "spack")
    assert (bundle / "spack.tar.gz").read_bytes() == spack_tgz.read_bytes()
    assert info["spack-packages"] == spack_revision(cache / "spack-packages")
    assert bundle_verify.verify(bundle).refusals == []
    sums = hashlib.sha256((bundle / "SHA256SUMS").read_bytes()).hexdigest()
    assert f"add OCIBENCH_BUNDLE_SHA256={sums}" in made.stdout

    spack_tgz.write_bytes(spack_tgz.read_bytes() + b"\0")  # another file at that path
    again = subprocess.run(["bash", str(SCRIPTS / "bundle.sh")], env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode != 0
    assert f"{spack_tgz} is not the tarball {cache / 'spack'} was set up from" in again.stderr


# -- scripts the documents run directly ------------------------------------------------

def _run_directly(text: str) -> set[str]:
    """Scripts of this repository that a ```sh block runs as a command (not `bash X`)."""
    found = set()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for command in block.replace("\\\n", " ").splitlines():
            try:
                words = shlex.split(command, comments=True)
            except ValueError:  # not a command a shell would take as written
                continue
            while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.S):
                words.pop(0)  # VAR=value before the command
            if words and words[0].removeprefix("./").startswith(("scripts/", "bin/")):
                found.add(words[0].removeprefix("./"))
    return found


def test_scripts_the_documents_run_directly_are_executable() -> None:
    """docs/device-runs.md runs scripts/device/make-carry.sh itself: a fresh clone gets
    the mode git records (100755), or `Permission denied`."""
    documents = [paths.REPO_ROOT / "README.md", *sorted((paths.REPO_ROOT / "docs").glob("*.md"))]
    run = {script: doc.name for doc in documents for script in _run_directly(doc.read_text())}
    assert "scripts/device/make-carry.sh" in run
    listed = subprocess.run(["git", "-C", str(paths.REPO_ROOT), "ls-files", "-s", *run],
                            capture_output=True, text=True)
    modes = {line.split("\t")[1]: line.split()[0] for line in listed.stdout.splitlines()}
    for script, doc in sorted(run.items()):
        assert (paths.REPO_ROOT / script).is_file(), f"{doc} runs {script}, which is absent"
        mode = modes.get(script) or oct((paths.REPO_ROOT / script).stat().st_mode)[-6:]
        assert mode == "100755", f"{doc} runs {script} directly; its mode is {mode}"
