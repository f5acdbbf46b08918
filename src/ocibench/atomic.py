"""Replacing a file whole: the one way ocibench writes a file others read while it runs.

The text goes to a hidden temporary file beside the target (same directory, so the
same filesystem, where rename(2) is atomic), is synced, and is renamed over the
target: a reader sees the old file or the new one, never half of one.  The temporary
name starts with a dot and ends in ``.tmp``, so a reader that globs the directory
(node_exporter's textfile collector reads ``*.prom``) never picks it up.  Used by the
sweep's drain record, the healthcheck's state file, the Prometheus textfile, the
site scope and the support ticket's archive.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace(path: Path, text: str | bytes, mode: int | None = None,
            parents: bool = False) -> None:
    """Write ``text`` (or bytes: an archive) to ``path`` atomically; ``mode`` sets the
    new file's permissions (a temporary file is created 0600); ``parents`` creates
    missing directories (a caller whose directory is someone else's, node_exporter's,
    leaves it False: a missing one is a wrong path).  Raises OSError, with nothing left behind.

    Nothing here follows a name another user could have changed: the temporary file
    is created exclusively and without following a link (mkstemp: O_EXCL, O_NOFOLLOW),
    its mode is set on its descriptor, never by name (in a directory another user can
    write, they can swap the name for a link to any file between the write and a
    chmod, which would follow it), and rename(2) replaces the target's name, never
    what a link there points to.  Who may write the directory is the caller's to
    judge (the healthcheck's state and the textfile refuse one others can change)."""
    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb" if isinstance(text, bytes) else "w") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
