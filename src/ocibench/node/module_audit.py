"""Audit Lmod module trees before anything loads a module from them.

A module tree is shared by every user of a cluster, and a modulefile is a Lua program
that Lmod runs in the shell of whoever loads it (``os.execute`` included).  Whoever can
change a modulefile, or anything on the way to one, can therefore run commands as every
user who runs ``module load`` or a check - as root, when root runs them.

Who may own what: root, and the user running the audit (who is the user that then
loads the modules: the audit runs in the job, just before ``module use``).  Nobody
else.  A tree installed by another unprivileged user is refused even when that user
meant no harm: between the audit and the load they could change it, and what they put
there would run as the loader.

A tree is safe when nobody but root and the caller can change what Lmod will read:

* **In the tree** (the top directory, everything below it, and everything a link in
  it leads to, directories listed in full as Lmod lists them): every file and
  directory is owned by root or the caller and writable by neither group nor others.
  The sticky bit does not help here: it still lets others *create* entries, and a new
  ``openmpi/9.9.lua`` in a listed directory is loaded as the default version.
* **On the way** (every directory and link from ``/`` down to the top, and to each
  link's target, followed component by component as the kernel does): every one is
  owned by root or the caller, and a directory holding the next component is not
  writable by group or others - unless it is sticky (``/tmp``).  Only the one named
  entry matters on the way, and in a sticky directory an entry can be renamed or
  removed by its owner, the directory's owner and root only (``unlink(2)``, EPERM):
  since both owners are root or the caller, nobody else can replace it.
* **Could not judge is unsafe**: an entry that cannot be read or listed, a link whose
  target does not exist, more than 40 links in one lookup (a loop), a link back to a
  directory above it, anything but files, directories and links.
* A tree that does not exist yet (a ``MODULEPATH`` entry) is safe only where nobody
  else can create it: its nearest existing directory is not writable by group or
  others, sticky or not.

Group and others write bits are enough to read POSIX ACLs too: with an ACL the group
bits are the mask, which bounds every named user and group entry (``acl(5)``).

Audit and load cannot be raced because of the first rule: the audit refuses any tree
that anyone but root and the caller can change, so what it judged is what Lmod reads.
And the audit itself cannot be fooled by a change during its walk: it walks from
``/`` through entries only root and the caller can change, so the first entry another
user controls is always reached, and reported, whatever that user does to it.

The same rule guards what ocibench writes or installs as root (one rule, here): the
healthcheck's state and lock directories and the Prometheus textfile's directory
(:func:`audit_directory`, :func:`own_directory`), and an air-gapped bundle, which is
verified in place only when :func:`audit_tree` finds it safe (else a copy of the
caller's is: ocibench.spack.bundle_verify).

``ocibench audit-modules`` runs :func:`audit` on a shape's tree and every
``MODULEPATH`` entry; every ReFrame job runs ``python3 -m ocibench.node.module_audit``
before its first ``module use`` (:func:`ocibench.reframe.site.module_use_cmds`), so a
check whose tree is unsafe fails, naming the path, without loading anything from it.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
import sys
from collections.abc import Iterable
from pathlib import Path, PurePath

#: Write permission for the group or others.
_SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH

#: Linux gives up a lookup after 40 links (MAXSYMLINKS, include/linux/namei.h): ELOOP.
MAX_LINKS = 40


def may_own(uid: int) -> bool:
    """The ownership rule: only root and the user running this may own what it trusts."""
    return uid in (0, os.geteuid())


def who(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _writable_by(mode: int) -> str | None:
    """'group', 'others', 'group and others' or None."""
    who = [name for bit, name in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "others"))
           if mode & bit]
    return " and ".join(who) or None


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    return "directory" if stat.S_ISDIR(mode) else "file"


def _shown(shown: Path, real: Path) -> str:
    """A path as found in the tree, and where it really is when a link led elsewhere."""
    return str(shown) if shown == real else f"{shown} -> {real}"


class _Found:
    """What a lookup reached: its real path (no link in it) and its lstat."""

    def __init__(self, real: Path, info: os.stat_result) -> None:
        self.real, self.info = real, info


class _Missing:
    """A lookup that reached a name that does not exist, in an existing directory."""

    def __init__(self, entry: Path, parent: Path, parent_info: os.stat_result) -> None:
        self.entry, self.parent, self.parent_info = entry, parent, parent_info


class _Audit:
    """One audit: its problems, each a line naming its path, in the order found, once."""

    def __init__(self, what: str = "what Lmod loads") -> None:
        self.caller = os.geteuid()
        self.what = what   # what the owners guard, in the owner's line
        self.problems: dict[str, None] = {}

    def add(self, line: str) -> None:
        # A file name that is not UTF-8 must not make the report itself fail to print.
        self.problems.setdefault(line.encode("utf-8", "backslashreplace").decode("utf-8"))

    def owner(self, path: str, info: os.stat_result) -> None:
        if may_own(info.st_uid):
            return
        allowed = ("root (who runs this audit)" if self.caller == 0
                   else f"root and {who(self.caller)}, who runs this audit,")
        self.add(f"{path}: {_kind(info.st_mode)} owned by {who(info.st_uid)}; only "
                 f"{allowed} may own {self.what}: they can change it")

    def on_the_way(self, parent: Path, info: os.stat_result, entry: Path) -> None:
        """``entry`` lies in ``parent``: can another user replace it there?"""
        writable = _writable_by(info.st_mode)
        if writable and not info.st_mode & stat.S_ISVTX:
            self.add(f"{parent}: directory writable by {writable} without the sticky bit "
                     f"(mode {stat.S_IMODE(info.st_mode):04o}): they can replace {entry}")

    def in_tree(self, path: str, info: os.stat_result) -> None:
        """A file or directory Lmod reads or lists: only its owner may write it."""
        writable = _writable_by(info.st_mode)
        if writable:
            self.add(f"{path}: {_kind(info.st_mode)} writable by {writable} "
                     f"(mode {stat.S_IMODE(info.st_mode):04o}; chmod go-w)")

    def lookup(self, path: Path) -> _Found | _Missing | None:
        """Follow ``path`` (absolute) from ``/`` one component at a time, links
        included, as the kernel does (path_resolution(7)), judging every directory and
        link on the way; None when it stopped on a problem (already added)."""
        root = Path("/")
        try:
            root_info = os.lstat(root)
        except OSError as err:
            self.add(f"/: cannot be read ({err.strerror})")
            return None
        self.owner("/", root_info)
        current, info = root, root_info
        pending = list(path.parts[1:])
        links = 0
        while pending:
            name = pending.pop(0)
            if name == "..":
                # ``current`` holds no link (every one was replaced by its target),
                # so its lexical parent is its real parent, already judged.
                current = current.parent
                try:
                    info = os.lstat(current)
                except OSError as err:
                    self.add(f"{current}: cannot be read ({err.strerror}), on the way to {path}")
                    return None
                continue
            entry = current / name
            # Before looking: whether the name is there or not, others who may write
            # its directory can put something else there.
            self.on_the_way(current, info, entry)
            try:
                entry_info = os.lstat(entry)
            except FileNotFoundError:
                return _Missing(entry, current, info)
            except OSError as err:
                self.add(f"{entry}: cannot be read ({err.strerror}), on the way to {path}")
                return None
            self.owner(str(entry), entry_info)
            if stat.S_ISLNK(entry_info.st_mode):
                links += 1
                if links > MAX_LINKS:
                    self.add(f"{path}: more than {MAX_LINKS} links to follow, the last "
                             f"{entry} (a loop of symbolic links)")
                    return None
                try:
                    target = PurePath(os.readlink(entry))
                except OSError as err:
                    self.add(f"{entry}: link cannot be read ({err.strerror})")
                    return None
                pending = list(target.parts) + pending
                if target.is_absolute():
                    pending.pop(0)
                    current, info = root, root_info
                continue
            if pending and not stat.S_ISDIR(entry_info.st_mode):
                self.add(f"{entry}: not a directory, on the way to {path}")
                return None
            current, info = entry, entry_info
        return _Found(current, info)

    def tree(self, top: Path) -> None:
        found = self.lookup(top)
        if found is None:
            return
        if isinstance(found, _Missing):
            self.missing(top, found)
            return
        # (path as shown, real path, lstat of the real path, directories above it)
        stack = [(top, found.real, found.info, frozenset[tuple[int, int]]())]
        listed: set[tuple[int, int]] = set()
        while stack:
            shown, real, info, above = stack.pop()
            where = _shown(shown, real)
            key = (info.st_dev, info.st_ino)
            if stat.S_ISREG(info.st_mode):
                self.in_tree(where, info)
                continue
            if not stat.S_ISDIR(info.st_mode):
                self.add(f"{where}: neither a file nor a directory "
                         f"(mode {stat.filemode(info.st_mode)})")
                continue
            if key in above:
                self.add(f"{where}: a directory above itself (a loop of links)")
                continue
            if key in listed:   # reached twice through links: judged once
                continue
            listed.add(key)
            self.in_tree(where, info)
            try:
                names = sorted(os.listdir(real))
            except OSError as err:
                self.add(f"{where}: cannot be listed ({err.strerror})")
                continue
            items = [self.entry(shown / name, real / name) for name in names]
            # reversed: the stack pops them in sorted order
            stack.extend((*item, above | {key}) for item in reversed(items) if item)

    def entry(self, shown: Path, real: Path) -> tuple[Path, Path, os.stat_result] | None:
        """An entry of a listed directory, its link followed to the end."""
        try:
            info = os.lstat(real)
        except OSError as err:
            self.add(f"{_shown(shown, real)}: cannot be read ({err.strerror})")
            return None
        if not stat.S_ISLNK(info.st_mode):
            self.owner(_shown(shown, real), info)
            return shown, real, info
        found = self.lookup(real)   # judges the link itself too
        if isinstance(found, _Missing):
            self.add(f"{shown}: a link to {found.entry}, which does not exist")
            return None
        return None if found is None else (shown, found.real, found.info)

    def missing(self, top: Path, found: _Missing) -> None:
        if os.path.islink(top):
            self.add(f"{top}: a link to {found.entry}, which does not exist")
            return
        # Not there (yet): safe while nobody else can create it, the sticky bit or not.
        writable = _writable_by(found.parent_info.st_mode)
        if writable:
            self.add(f"{top}: does not exist, and {found.parent} is writable by {writable} "
                     f"(mode {stat.S_IMODE(found.parent_info.st_mode):04o}): "
                     "anyone there can create it")


def _absolute(path: Path) -> Path:
    """Relative to the working directory, which is judged with the rest; not
    normalised: "link/.." is the link target's parent, not the link's directory."""
    return path if path.is_absolute() else Path(os.getcwd()) / path


def audit_tree(top: Path, what: str = "what Lmod loads") -> list[str]:
    """Every problem of one tree, each a line naming its path; [] when it is safe.
    ``what`` names what the owners guard, for the owner's line (an air-gapped bundle is
    audited so too: ocibench.spack.bundle_verify)."""
    checker = _Audit(what)
    try:
        checker.tree(_absolute(Path(top)))
    except OSError as err:   # getcwd: the working directory was removed
        checker.add(f"{top}: the working directory cannot be read ({err.strerror})")
    return list(checker.problems)


def audit_directory(directory: Path, what: str) -> list[str]:
    """Every problem of one directory a program writes its own files in (the
    healthcheck's state and lock, a Prometheus textfile, a bundle's staged copy), each a
    line naming its path; [] when it is safe.  The same rules as a module tree's, for
    the directory alone (its contents are not listed): the way to it as above, and the
    directory itself owned by root or the caller and writable by neither group nor
    others, sticky or not (in /tmp, anyone can create the name first: a link, a lock
    they hold).  One that does not exist is safe only where nobody else can create it.
    ``what`` names what the owners guard, for the owner's line."""
    checker = _Audit(what)
    try:
        top = _absolute(Path(directory))
        found = checker.lookup(top)
    except OSError as err:   # getcwd: the working directory was removed
        checker.add(f"{directory}: the working directory cannot be read ({err.strerror})")
        return list(checker.problems)
    if isinstance(found, _Missing):
        checker.missing(top, found)
    elif isinstance(found, _Found):
        if stat.S_ISDIR(found.info.st_mode):
            checker.in_tree(_shown(top, found.real), found.info)
        else:
            checker.add(f"{_shown(top, found.real)}: not a directory")
    return list(checker.problems)


def own_directory(directory: Path, mode: int, what: str) -> list[str]:
    """A directory of the caller's with ``mode``, for files only the caller may change
    (root's lock directory, 0700; a bundle's staged copy, 0700; a state directory, 0755):
    :func:`audit_directory` first; a missing one is then made (its missing parents
    0755) and an existing one given ``mode``, each mode set on the directory's
    descriptor, never by name; one owned by anyone but the caller is refused; then
    audited again.  The problems, each a line naming its path; [] when it is ready."""
    directory = _absolute(Path(directory))
    problems = audit_directory(directory, what)
    if problems:
        return problems
    made = []
    try:
        for part in reversed((directory, *directory.parents)):
            if not os.path.lexists(part):
                os.mkdir(part, 0o700)   # the audit below judges one made meanwhile
                made.append(part)
        for part in made:
            _chmod_directory(part, mode if part == directory else 0o755, own=True)
        if directory not in made:
            _chmod_directory(directory, mode, own=True)
    except OSError as err:
        why = "a symbolic link (never followed)" if err.errno == errno.ELOOP \
            else err.strerror or str(err)
        return [f"{err.filename or directory}: {why}"]
    return audit_directory(directory, what)


def _chmod_directory(directory: Path, mode: int, own: bool) -> None:
    """``chmod mode`` on the directory's descriptor (opened without following a link);
    PermissionError naming its owner when ``own`` and the caller is not it."""
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        info = os.fstat(handle)
        if own and info.st_uid != os.geteuid():
            raise PermissionError(f"owned by {who(info.st_uid)}, not {who(os.geteuid())}")
        if stat.S_IMODE(info.st_mode) != mode:
            os.fchmod(handle, mode)
    finally:
        os.close(handle)


def audit(trees: Iterable[Path]) -> list[str]:
    """The problems of every tree, trees inside another listed tree audited once."""
    unique: list[Path] = []
    for tree in trees:
        try:
            tree = _absolute(Path(tree))
        except OSError:
            pass   # audit_tree says so
        if tree not in unique:
            unique.append(tree)
    inside = {t for t in unique for other in unique if other != t and other in t.parents}
    problems: dict[str, None] = {}
    for tree in unique:
        if tree not in inside:
            problems.update(dict.fromkeys(audit_tree(tree)))
    return list(problems)


def modulepath_entries(environ: dict[str, str] | None = None) -> list[Path]:
    """The directories of $MODULEPATH, in order."""
    value = (os.environ if environ is None else environ).get("MODULEPATH", "")
    return [Path(entry) for entry in value.split(":") if entry]


def main(argv: list[str] | None = None) -> int:
    """In a job, before ``module use``: audit the trees named and $MODULEPATH; on a
    problem print each as an ``ocibench:`` line (the check's failure reason) and
    exit 1, so that the job stops before Lmod runs any modulefile."""
    trees = [Path(arg) for arg in (sys.argv[1:] if argv is None else argv)]
    problems = audit(trees + modulepath_entries())
    for problem in problems:
        print(f"ocibench: unsafe module tree: {problem}", file=sys.stderr)
    if problems:
        print("ocibench: refusing to load modules from an unsafe tree "
              "(ocibench audit-modules lists the problems)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
