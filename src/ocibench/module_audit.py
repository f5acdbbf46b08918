"""Audit Lmod module trees before anything loads a module from them.

A module tree is shared by every user of a cluster, and a modulefile is a Lua program
that Lmod runs in the shell of whoever loads it (``os.execute`` included).  Whoever can
write a modulefile, or a directory above one, can therefore run commands as every user
who runs ``module load`` or a check.  A tree is safe when only its owner can change it:

* no file or directory in it is writable by group or others;
* everything in it belongs to the tree's owner (the owner of its top directory) or to
  root (who can change any file anyway);
* no directory above it lets another user replace it: each is owned by root or the
  tree's owner and not writable by group or others, unless its sticky bit is set
  (``/tmp``: others may create entries there but not rename or remove the tree);
* a tree that does not exist yet (a ``MODULEPATH`` entry) has no directory above it
  where others may create it.

Symbolic links are followed, as Lmod follows them, and their targets audited.

``ocibench audit-modules`` runs :func:`audit` on a shape's tree and every
``MODULEPATH`` entry; every ReFrame job runs ``python3 -m ocibench.module_audit``
before its first ``module use`` (see :mod:`ocibench.reframe_site`), so a check whose
tree is unsafe fails, naming the path, without loading anything from it.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

#: Write permission for the group or others.
_SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _who(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _writable_by(mode: int) -> str | None:
    """'group', 'others', 'group and others' or None."""
    who = [name for bit, name in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "others"))
           if mode & bit]
    return " and ".join(who) or None


def _entry(path: Path, info: os.stat_result, owner: int, top: Path) -> Iterator[str]:
    kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
    writable = _writable_by(info.st_mode)
    if writable:
        yield (f"{path}: {kind} writable by {writable} (mode {stat.S_IMODE(info.st_mode):04o}; "
               f"chmod go-w)")
    if info.st_uid not in (owner, 0):
        yield (f"{path}: {kind} owned by {_who(info.st_uid)}, not by {_who(owner)} "
               f"who owns the tree {top}")


def _ancestors(top: Path, owner: int) -> Iterator[str]:
    """Directories above ``top`` (and above what it links to) where another user
    could replace it."""
    parents = list(top.parents) + [p for p in top.resolve().parents if p not in top.parents]
    for parent in parents:
        try:
            info = parent.stat()
        except OSError as err:
            yield f"{parent}: directory above the tree {top} cannot be read ({err.strerror})"
            continue
        writable = _writable_by(info.st_mode)
        if writable and not info.st_mode & stat.S_ISVTX:
            yield (f"{parent}: directory above the tree {top} is writable by {writable} "
                   f"(mode {stat.S_IMODE(info.st_mode):04o}): they can replace the tree")
        if info.st_uid not in (owner, 0):
            yield (f"{parent}: directory above the tree {top} is owned by "
                   f"{_who(info.st_uid)}, not by root or {_who(owner)}")


def _missing(top: Path) -> Iterator[str]:
    """A tree that does not exist: whoever may create it could fill it."""
    existing = next(p for p in top.parents if p.exists())
    info = existing.stat()
    writable = _writable_by(info.st_mode)
    if writable:
        yield (f"{top}: does not exist, and {existing} is writable by {writable} "
               f"(mode {stat.S_IMODE(info.st_mode):04o}): anyone there can create it")


def audit_tree(top: Path) -> list[str]:
    """Every problem of one tree, each a line naming its path; [] when it is safe."""
    top = Path(os.path.abspath(top))
    if not top.exists():
        return list(_missing(top))
    owner = top.stat().st_uid
    problems = list(_ancestors(top, owner))
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        path = stack.pop()
        try:
            info = path.stat()   # follows links, as Lmod does
        except OSError as err:
            problems.append(f"{path}: cannot be read ({err.strerror})")
            continue
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        problems.extend(_entry(path, info, owner, top))
        if stat.S_ISDIR(info.st_mode):
            try:
                stack.extend(sorted(path.iterdir(), reverse=True))
            except OSError as err:
                problems.append(f"{path}: cannot be listed ({err.strerror})")
    return problems


def audit(trees: Iterable[Path]) -> list[str]:
    """The problems of every tree, trees inside another listed tree audited once."""
    unique: list[Path] = []
    for tree in (Path(os.path.abspath(t)) for t in trees):
        if tree not in unique:
            unique.append(tree)
    inside = {t for t in unique for other in unique if other != t and other in t.parents}
    problems: list[str] = []
    for tree in unique:
        if tree not in inside:
            problems.extend(audit_tree(tree))
    return problems


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
