"""Files a program running as root may trust, and locks nobody else can hold.

The healthcheck and the sweep run as root, unattended: what they read decides a drain
or a resume, and what they lock decides whether they run at all.  The rule is the
module audit's (ocibench.node.module_audit): a file they trust or hold is a regular
file owned by root or the caller, opened without following a link, in a directory
only root or the caller can change (the caller audits the directory first:
:func:`module_audit.audit_directory` / :func:`module_audit.own_directory`).  A file
another user owns, or a link, is not this run's memory, whatever it says.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ocibench.node import module_audit


class Untrusted(Exception):
    """A file this run may not trust or hold; the message names it and says why."""


def why(err: OSError) -> str:
    """An open's failure in words (a planted link is named as one)."""
    if err.errno == errno.ELOOP:
        return "a symbolic link (never followed)"
    return err.strerror or str(err)


def not_ours(path: Path, info: os.stat_result) -> str | None:
    """Why an opened file is not one this run may trust or hold, or None."""
    if not stat.S_ISREG(info.st_mode):
        return f"{path}: not a regular file"
    if not module_audit.may_own(info.st_uid):
        me = "root" if os.geteuid() == 0 else f"root or {module_audit.who(os.geteuid())}"
        return f"{path}: owned by {module_audit.who(info.st_uid)}, not {me}"
    return None


def open_lock(lock: Path) -> int:
    """The descriptor of ``lock``, a file of the caller's with mode 0600: created
    exclusively, or an existing one of root's or the caller's; never through a link,
    its mode set on the descriptor.  Nobody else can open it, so nobody else can hold
    it.  :class:`Untrusted` names the lock otherwise."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            handle = os.open(lock, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            handle = os.open(lock, flags)
    except OSError as err:
        raise Untrusted(f"{lock}: {why(err)}") from None
    try:
        info = os.fstat(handle)
        problem = not_ours(lock, info)
        if problem:
            raise Untrusted(problem)
        if stat.S_IMODE(info.st_mode) != 0o600:
            os.fchmod(handle, 0o600)
    except BaseException:
        os.close(handle)
        raise
    return handle


def read(path: Path, max_bytes: int) -> bytes | None:
    """At most ``max_bytes + 1`` bytes of ``path`` (one more than allowed tells the
    caller it is too large); None when it does not exist.  :class:`Untrusted` when it
    is a link, not a regular file, or owned by anyone but root and the caller."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise Untrusted(f"{path}: {why(err)}") from None
    with os.fdopen(handle, "rb") as opened:
        problem = not_ours(path, os.fstat(handle))
        if problem:
            raise Untrusted(problem)
        return opened.read(max_bytes + 1)
