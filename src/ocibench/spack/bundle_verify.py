"""The one check of an air-gapped bundle, before set-up uses any of it.

scripts/setup.sh (and scripts/install.sh, which reads `unchecked=`) run
``python3 -m ocibench.spack.bundle_verify <bundle>`` before pip, apt/dnf or Spack touch
anything.  It refuses, one line per finding naming the file:

* anything in the bundle that ``SHA256SUMS`` does not list (a wheel in wheels/, a .deb in
  os-packages/, a file in mirror/, develop/, unchecked/, buildcache/, keys/ ...): pip's
  --find-links, apt-get and Spack's mirrors take whatever lies in their directories,
  so only a bundle whose every file is listed can be used;
* a symlink anywhere inside, and anything that is neither a file nor a directory;
* a listed path that leaves the bundle (``../x``, ``/etc/hostname``), has an empty,
  ``.`` or ``..`` part, or a character outside a conservative set (control characters,
  spaces, backslashes, a leading ``-``: `sha256sum` escapes such names, and they would
  reach apt-get and pip as arguments);
* a path listed twice, a line that is not ``<sha256>  <path>``, a file missing, or one
  whose sha256 differs;
* a BUNDLE line given twice.

``SHA256SUMS`` is only as trustworthy as whoever last wrote the bundle: anyone who can
edit ``BUNDLE`` can write a matching ``SHA256SUMS`` (scripts/bundle.sh writes it with
`sha256sum`).  The list is *authenticated* when the admin gives, on the node, a trust
anchor from outside the bundle (docs/spack-env.md, "Air-gapped sites"):

* ``OCIBENCH_BUNDLE_SHA256``: the sha256 of ``SHA256SUMS``, as `make bundle` printed it;
* ``OCIBENCH_BUNDLE_SIGNER``: the fingerprint of the GPG key that signed ``SHA256SUMS``
  (``SHA256SUMS.asc``, made by `make bundle` with the build cache's signing key); the
  signature is checked with gpg in a keyring of its own.

Without an anchor the bundle is still checked against its own list (damage, stray
files), and says it is not authenticated; but ``unchecked=`` in BUNDLE, which makes
scripts/install.sh pass ``--no-checksum`` to Spack, is then refused.

What is verified is what is installed.  With ``--stage`` (as set-up and install run
it), a bundle that anyone but root and the caller could change (the module audit's
rule, ocibench.node.module_audit) is copied into a directory only the caller can open
(<cache>/bundle, 0700), and the copy is verified and used: a file swapped in the
bundle after the check never reaches apt-get, pip or Spack (:func:`stage`).  The first
line printed is the directory verified, the one set-up and install then use.

Standard library only (with ocibench.paths and ocibench.node.module_audit, which are
too): it runs before any Python tool is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ocibench import paths
from ocibench.node import module_audit

LIST = "SHA256SUMS"
SIGNATURE = "SHA256SUMS.asc"
#: written after the list (they cannot be in it); used only here
UNLISTED_OK = frozenset({LIST, SIGNATURE})
#: `sha256sum`'s text-mode line (coreutils md5sum.c: digest, two spaces, name); a name
#: it had to escape starts the line with a backslash and fails this pattern
LINE = re.compile(r"([0-9a-f]{64})  (.+)")
#: a part of a listed path: what Spack's mirror and build-cache layouts, wheel names
#: (PEP 427), Debian file names (epochs as %3a) and RPM names use
PART = re.compile(r"[A-Za-z0-9_.+~%@=,:][A-Za-z0-9_.+~%@=,:-]*")
#: PKG@VERSION of BUNDLE's unchecked= and develop/SOURCES: Spack package names, versions
SPEC = re.compile(r"[a-z0-9][a-z0-9_-]*@[A-Za-z0-9_][A-Za-z0-9_.+-]*")
#: bounds on what is read before anything is known about the bundle
MAX_LIST_BYTES = 64 << 20
MAX_REPORTED = 50
ENV_SHA256 = "OCIBENCH_BUNDLE_SHA256"
ENV_SIGNER = "OCIBENCH_BUNDLE_SIGNER"


def show(name: str) -> str:
    """A name printable on one line: odd ones as Python writes them."""
    return name if name.isascii() and name.isprintable() and " " not in name else ascii(name)


@dataclass
class Result:
    root: Path
    refusals: list[str] = field(default_factory=list)
    files: int = 0
    authenticated_by: str = ""
    info: dict[str, str] = field(default_factory=dict)
    #: the bundle as the admin named it, where ``root`` is a copy of it (:func:`stage`):
    #: refusals name the bundle's files
    shown: Path | None = None

    def refuse(self, name: str, why: str) -> None:
        top = self.shown or self.root
        self.refusals.append(f"{top / name if name else top}: {why}")


def _sha256(path: Path) -> str:
    """The file's sha256, opened without following a symlink swapped in since the walk."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _read_small(path: Path, limit: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data


def _walk(result: Result) -> set[str]:
    """Every regular file under the root (relative, '/'-separated); symlinks and other
    file types refused.  Symlinks are never followed."""
    found: set[str] = set()
    pending = [""]
    while pending:
        rel = pending.pop()
        try:
            entries = list(os.scandir(result.root / rel if rel else result.root))
        except OSError as err:
            result.refuse(rel, f"cannot be listed ({err.strerror})")
            continue
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                result.refuse(show(name), f"a symlink (to {show(os.readlink(entry.path))}): "
                              "a bundle holds files only")
            elif entry.is_dir(follow_symlinks=False):
                pending.append(name)
            elif entry.is_file(follow_symlinks=False):
                found.add(name)
            else:
                result.refuse(show(name), "neither a file nor a directory")
    return found


def _listed(result: Result, text: str) -> dict[str, str]:
    """SHA256SUMS as {path: sha256}; every malformed, unsafe or repeated line refused."""
    listed: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), 1):
        if not line and number == len(text.split("\n")):
            break  # the final newline
        match = LINE.fullmatch(line)
        if not match:
            result.refuse(LIST, f"line {number} is not '<sha256>  <path>': {show(line[:80])}")
            continue
        digest, name = match.groups()
        parts = name.split("/")
        if name.startswith("/"):
            result.refuse(LIST, f"line {number} names {show(name)}, outside the bundle "
                          "(an absolute path)")
        elif ".." in parts:
            result.refuse(LIST, f"line {number} names {show(name)}, outside the bundle (..)")
        elif not all(part not in ("", ".") and PART.fullmatch(part) for part in parts):
            result.refuse(LIST, f"line {number} names {show(name)}: an empty or '.' part, "
                          "or a character outside [A-Za-z0-9_.+~%@=,:-] (or a leading -)")
        elif name in UNLISTED_OK:
            result.refuse(LIST, f"line {number} names {name}, which cannot list itself")
        elif name in listed:
            result.refuse(LIST, f"line {number} lists {name} again "
                          f"(first on line {first_line[name]})")
        else:
            listed[name] = digest
            first_line[name] = number
    return listed


def _signed_by(result: Result, signer: str, listing: bytes) -> bool:
    """SHA256SUMS.asc is a good signature of `listing` (the bytes of SHA256SUMS this check
    parses: gpg reads them from stdin, not the file again) by the key `signer` (a
    fingerprint), checked by gpg in a keyring of its own holding the bundle's keys/*.pub:
    a key there that is not `signer` verifies nothing.  Key and signature files are read
    without following symlinks."""
    fingerprint = re.sub(r"\s", "", signer).upper()
    if not re.fullmatch(r"[0-9A-F]{40}|[0-9A-F]{64}", fingerprint):
        result.refuse("", f"{ENV_SIGNER}={signer!r} is not a key fingerprint (40 hex digits)")
        return False
    try:
        signature = _read_small(result.root / SIGNATURE, 1 << 20)
    except (OSError, ValueError) as err:
        result.refuse(SIGNATURE, f"cannot be read ({err}): {ENV_SIGNER} needs the list signed "
                      "(make bundle signs it, unless OCIBENCH_BUNDLE_UNSIGNED=1)")
        return False
    keydir = result.root / "keys"
    keys = sorted(keydir.glob("*.pub")) if keydir.is_dir() and not keydir.is_symlink() else []
    try:
        material = b"".join(_read_small(key, 1 << 20) for key in keys)
    except (OSError, ValueError) as err:
        result.refuse("keys", f"a public key cannot be read ({err})")
        return False
    if not material:
        result.refuse("keys", f"no public key (*.pub) to check {SIGNATURE} with")
        return False
    with tempfile.TemporaryDirectory(prefix="ocibench-gpg-") as home:
        gpg = ["gpg", "--homedir", home, "--batch", "--no-tty", "--quiet"]
        (Path(home) / "list.asc").write_bytes(signature)
        try:
            imported = subprocess.run([*gpg, "--import"], input=material, capture_output=True,
                                      timeout=60)
            if imported.returncode != 0:
                result.refuse("keys", f"gpg cannot import {', '.join(k.name for k in keys)}")
                return False
            checked = subprocess.run(
                [*gpg, "--status-fd", "1", "--verify", str(Path(home) / "list.asc"), "-"],
                input=listing, capture_output=True, timeout=60)
        except FileNotFoundError:
            result.refuse(SIGNATURE, f"cannot be checked: no gpg on PATH ({ENV_SIGNER} is set)")
            return False
        except subprocess.TimeoutExpired:
            result.refuse(SIGNATURE, "gpg did not answer within 60 s")
            return False
    # gpg's status lines (doc/DETAILS): VALIDSIG <signing key fpr> ... <primary key fpr>
    for line in checked.stdout.decode("utf-8", "replace").splitlines():
        fields = line.split()
        if checked.returncode == 0 and fields[:2] == ["[GNUPG:]", "VALIDSIG"] \
                and fingerprint in (fields[2], fields[-1]):
            return True
    result.refuse(SIGNATURE, f"no good signature of {LIST} by the key {fingerprint} "
                  f"({ENV_SIGNER}): signed by another key, or {LIST} changed since")
    return False


def _develop_sources(result: Result, listed: dict[str, str]) -> None:
    """develop/SOURCES: `PKG VERSION COMMIT` lines (scripts/bundle.sh), each naming a listed
    develop/PKG-VERSION.tar.gz.  setup.sh makes <cache>/dev-src/PKG-VERSION of them (and
    removes what is there): a name with / or .. would reach outside that directory."""
    if "develop/SOURCES" not in listed:
        return
    text = (result.root / "develop" / "SOURCES").read_text("utf-8", "replace")
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) != 3 or not SPEC.fullmatch(f"{fields[0]}@{fields[1]}") \
                or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", fields[2]):
            result.refuse("develop/SOURCES", f"line {number} is not 'PKG VERSION COMMIT': "
                          f"{show(line[:80])}")
        elif f"develop/{fields[0]}-{fields[1]}.tar.gz" not in listed:
            result.refuse("develop/SOURCES", f"line {number}: develop/{fields[0]}-{fields[1]}"
                          f".tar.gz is not listed in {LIST}")


def verify(root: Path, sha256: str = "", signer: str = "", shown: Path | None = None) -> Result:
    result = Result(root, shown=shown)
    for name in ("BUNDLE", LIST):
        path = root / name
        if path.is_symlink() or not path.is_file():
            result.refuse(name, "absent (or not a file): `make bundle` writes one")
    if result.refusals:
        return result
    try:
        raw = _read_small(root / LIST, MAX_LIST_BYTES)
        text = raw.decode("utf-8")
    except (OSError, ValueError) as err:
        result.refuse(LIST, f"cannot be read: {err}")
        return result

    # the trust anchor first: from outside the bundle, or none
    anchors = []
    if sha256:
        if hashlib.sha256(raw).hexdigest() == sha256.strip().lower():
            anchors.append(f"{ENV_SHA256}")
        else:
            result.refuse(LIST, f"its sha256 is {hashlib.sha256(raw).hexdigest()}, "
                          f"not {sha256.strip()} ({ENV_SHA256}): not the bundle that was made")
    if signer and _signed_by(result, signer, raw):
        anchors.append(f"the signature of {re.sub(r'[^0-9A-Fa-f]', '', signer).upper()} "
                       f"({ENV_SIGNER})")
    result.authenticated_by = " and ".join(anchors) if not result.refusals else ""

    listed = _listed(result, text)
    present = _walk(result)
    for name in sorted(present - set(listed) - UNLISTED_OK):
        result.refuse(show(name), f"not listed in {LIST}: set-up uses listed files only")
    for name in sorted(set(listed) - present):
        result.refuse(name, f"listed in {LIST} but absent (or not a regular file)")
    for name in sorted(set(listed) & present):
        try:
            if _sha256(root / name) != listed[name]:
                result.refuse(name, f"does not match its sha256 in {LIST} (damaged or altered)")
        except OSError as err:
            result.refuse(name, f"cannot be read ({err.strerror})")
    result.files = len(listed)
    if "BUNDLE" not in listed:
        result.refuse("BUNDLE", f"not listed in {LIST}")
    if result.refusals:
        return result

    # BUNDLE: key=value lines, each key once (setup.sh and install.sh read them with sed)
    for number, line in enumerate((root / "BUNDLE").read_text("utf-8", "replace").splitlines(), 1):
        key, sep, value = line.partition("=")
        if not sep:
            result.refuse("BUNDLE", f"line {number} is not KEY=VALUE: {show(line[:80])}")
        elif key in result.info:
            result.refuse("BUNDLE", f"line {number} gives {show(key)} again")
        else:
            result.info[key] = value
    for spec in result.info.get("unchecked", "").split():
        if not SPEC.fullmatch(spec):
            result.refuse("BUNDLE", f"unchecked= names {show(spec)}, not PKG@VERSION")
    _develop_sources(result, listed)
    if result.info.get("unchecked", "").strip() and not result.authenticated_by:
        result.refuse("BUNDLE", f"unchecked={result.info['unchecked']} would install without "
                      f"checksums, and this bundle's {LIST} is not authenticated: give "
                      f"{ENV_SHA256} or {ENV_SIGNER} as `make bundle` printed them")
    return result


# --- A copy only the caller can change ----------------------------------------------
# Verified in place, a bundle is what set-up and install use only while nobody else can
# change it: apt-get, pip and Spack read its files long after the check.  Where another
# user could (a directory of theirs, or one they may write, anywhere in the bundle or on
# the way to it: the module audit's rule, ocibench.node.module_audit), it is copied
# into a directory that only the caller can open, and the copy is verified and used.

#: What the owners guard, in the module audit's line about an owner.
GUARDED = "what set-up installs"


def _open_below(top: int, name: str) -> int:
    """The listed file ``name`` of the bundle whose directory ``top`` is open, opened
    one component at a time without following a link (O_NOFOLLOW): a link swapped in
    anywhere on the way fails (ELOOP, ENOTDIR); a regular file only."""
    parts = name.split("/")
    opened: list[int] = []
    here = top
    try:
        for part in parts[:-1]:
            here = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=here)
            opened.append(here)
        handle = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=here)
    finally:
        for fd in opened:
            os.close(fd)
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise OSError(errno.EINVAL, "not a regular file")
    return handle


def _read_below(top: int, name: str, limit: int) -> bytes | None:
    """A small file of the bundle (its list, its signature), read as :func:`_open_below`
    opens it; None when absent."""
    try:
        handle = _open_below(top, name)
    except FileNotFoundError:
        return None
    with os.fdopen(handle, "rb") as reader:
        data = reader.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data


def _write_in(dest: Path, name: str, copy) -> None:
    """Replace ``dest/name`` (in the caller's own directory) with what ``copy(writer)``
    writes; 0644 under the 0700 copy (root's tools read it as root)."""
    target = dest / name
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                         dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as writer:
            os.fchmod(writer.fileno(), 0o644)
            copy(writer)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _copy_in(top: int, name: str, dest: Path) -> None:
    """The bundle's file ``name`` into the copy ``dest``."""
    with os.fdopen(_open_below(top, name), "rb") as reader:
        _write_in(dest, name, lambda writer: shutil.copyfileobj(reader, writer, 1 << 20))


def _prune(dest: Path, keep: set[str]) -> None:
    """Remove from the copy everything that is not a file to keep or a directory on
    the way to one (what an earlier bundle left)."""
    needed = {"/".join(name.split("/")[:depth]) for name in keep
              for depth in range(1, name.count("/") + 1)}
    for here, dirs, files in os.walk(dest):
        rel = os.path.relpath(here, dest)
        prefix = "" if rel == "." else f"{rel}/"
        for name in list(dirs):
            path = os.path.join(here, name)
            if prefix + name not in needed or os.path.islink(path):
                dirs.remove(name)
                if os.path.islink(path):
                    os.unlink(path)
                else:
                    shutil.rmtree(path)
        for name in files:
            if prefix + name not in keep:
                os.unlink(os.path.join(here, name))


def _why(err: OSError) -> str:
    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a symbolic link on the way (never followed)"
    return err.strerror or str(err)


def stage(source: Path, dest: Path, sha256: str = "", signer: str = "") -> Result:
    """The bundle ``source`` as a copy in ``dest`` (made the caller's, 0700), verified
    (:func:`verify`, refusals naming the bundle's files): what was verified is then
    what set-up and install use, whatever happens to ``source``.

    The bundle's own refusals come first, before any large file is copied: a list that
    cannot be used, unlisted files, links, other types.  A copy in ``dest`` made from
    the same list (SHA256SUMS and its signature, byte for byte) is verified again, not
    copied again (install.sh after setup.sh); otherwise ``dest`` is emptied of what the
    list does not name and every listed file is copied, the list last: a copy cut short
    has no list, and is never taken for a finished one."""
    result = Result(dest, shown=source)
    problems = module_audit.own_directory(dest, 0o700, "a bundle's copy")
    if problems:
        result.refusals += [f"{line} (the bundle's copy goes there: OCIBENCH_CACHE or "
                            "--stage-dir moves it)" for line in problems]
        return result
    try:
        top = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as err:
        result.refuse("", f"cannot be opened ({err.strerror})")
        return result
    try:
        try:
            listing = _read_below(top, LIST, MAX_LIST_BYTES)
            signature = _read_below(top, SIGNATURE, 1 << 20)
            text = listing.decode("utf-8") if listing is not None else ""
        except (OSError, ValueError) as err:
            result.refuse(LIST, f"cannot be read: {_why(err) if isinstance(err, OSError) else err}")
            return result
        if listing is None:
            result.refuse(LIST, "absent (or not a file): `make bundle` writes one")
            return result
        listed = _listed(result, text)
        walked = Result(source)   # names only, never followed: the bundle's own refusals
        present = _walk(walked)
        result.refusals += walked.refusals
        for name in sorted(present - set(listed) - UNLISTED_OK):
            result.refuse(show(name), f"not listed in {LIST}: set-up uses listed files only")
        if result.refusals:
            return result
        if _same(dest / LIST, listing) and _same(dest / SIGNATURE, signature):
            again = verify(dest, sha256, signer, shown=source)
            if not again.refusals:
                return again
        # a new copy: first no list, so that a copy cut short is never taken for one
        for name in (LIST, SIGNATURE):
            with contextlib.suppress(FileNotFoundError):
                (dest / name).unlink()
        _prune(dest, set(listed))
        for name in sorted(listed):
            try:
                _copy_in(top, name, dest)
            except FileNotFoundError:   # verify says "listed but absent"
                with contextlib.suppress(FileNotFoundError):
                    (dest / name).unlink()
            except OSError as err:
                result.refuse(name, f"cannot be copied ({_why(err)})")
        if result.refusals:
            return result
        # the list and signature as read above: the ones the walk and the copy followed
        if signature is not None:
            _write_in(dest, SIGNATURE, lambda writer: writer.write(signature))
        _write_in(dest, LIST, lambda writer: writer.write(listing))
    except OSError as err:   # the copy itself (a full disk)
        result.refuse("", f"cannot be copied to {dest} ({_why(err)})")
        return result
    finally:
        os.close(top)
    return verify(dest, sha256, signer, shown=source)


def _same(path: Path, data: bytes | None) -> bool:
    """``path`` (in the caller's copy) holds exactly ``data``; None: it is absent."""
    try:
        return _read_small(path, MAX_LIST_BYTES) == data
    except FileNotFoundError:
        return data is None
    except (OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m ocibench.spack.bundle_verify",
        description="check a bundle of scripts/bundle.sh before set-up uses it "
                    f"(trust anchors: ${ENV_SHA256}, ${ENV_SIGNER})")
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--print", dest="key", metavar="KEY",
                        help="after the check, print BUNDLE's KEY (empty when absent)")
    parser.add_argument("--stage", action="store_true",
                        help="verify the bundle where it is if nobody but root and you can "
                             "change it (as `ocibench audit-modules` judges a tree), else "
                             "verify a copy of it in --stage-dir, which only you can open; "
                             "first line printed: the directory verified, the one to use")
    parser.add_argument("--stage-dir", type=Path, metavar="DIR",
                        help="where --stage copies a bundle (default: <cache>/bundle)")
    args = parser.parse_args(argv)
    root = Path(os.path.realpath(args.bundle))
    if not root.is_dir():
        print(f"bundle refused: {args.bundle}: not a directory", file=sys.stderr)
        return 1
    anchors = os.environ.get(ENV_SHA256, ""), os.environ.get(ENV_SIGNER, "")
    use, problems = root, []
    if args.stage:
        problems = module_audit.audit_tree(Path(os.path.abspath(args.bundle)), GUARDED)
    if problems:
        use = Path(os.path.abspath(args.stage_dir or paths.cache_dir() / "bundle"))
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        print(f"bundle {root}: another user can change it: {problems[0]}{more}; verifying "
              f"and using a copy that only you can change, in {use}", file=sys.stderr)
        result = stage(root, use, *anchors)
    else:
        result = verify(root, *anchors)
    if result.refusals:
        for line in result.refusals[:MAX_REPORTED]:
            print(f"bundle refused: {line}", file=sys.stderr)
        if len(result.refusals) > MAX_REPORTED:
            print(f"bundle refused: {root}: {len(result.refusals) - MAX_REPORTED} more "
                  "findings not shown", file=sys.stderr)
        return 1
    if args.stage:
        print(use)
    if args.key:
        print(result.info.get(args.key, ""))
        return 0
    how = (f"authenticated by {result.authenticated_by}" if result.authenticated_by else
           f"NOT authenticated (no {ENV_SHA256} or {ENV_SIGNER}): checked against its own "
           "list only")
    where = f"{root} (its copy in {use})" if use != root else f"{root}"
    print(f"bundle {where}: checksums verified: {result.files} files, all as {LIST} lists "
          f"them, nothing unlisted; {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
