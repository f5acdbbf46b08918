"""Write the report's files all at once, or not at all, and never through a link.

The files are written into a temporary directory on the output directory's own
filesystem, so that moving each into place is a rename: readers of the output
directory see the old report or the new one, never half of one, and a report that
fails while being made (a plot that cannot be drawn, a full disk) leaves the old one
as it was.  A rename replaces a symbolic link itself, never the file it points to; a
link where a file of the report would go is refused all the same, because whoever put
it there meant the report to go somewhere else (a web server's directory, say) and a
report that silently breaks that link is as wrong as one written through it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Prefix of the temporary directory, hidden, so a listing of the output directory does
#: not show a half-made report (nor one left behind by a killed run).
STAGE_PREFIX = ".ocibench-report-"


class OutputError(ValueError):
    """The output directory, or a file in it, cannot be written safely; one line."""


def write(path: Path, text: str) -> None:
    """One file of a page (the sweep's JSON or page, the history's page), ``text`` into
    ``path`` through :func:`staged`: a reader sees the old file or the new one, never half
    of one.  Whatever stops it (a link, a directory in the way, a full disk) is one
    OutputError line naming the file."""
    try:
        with staged(path.parent) as stage:
            (stage / path.name).write_text(text)
    except OSError as err:
        raise OutputError(f"cannot write {err.filename or path}: {err.strerror}") from None


@contextmanager
def staged(outdir: Path) -> Iterator[Path]:
    """A new, empty directory to write the report into; when the ``with`` block ends
    without an exception, its files replace those of the same names in ``outdir``
    (created if missing).  On an exception nothing in ``outdir`` changes."""
    _check_directory(outdir)
    if outdir.exists():
        # Inside outdir itself: the same filesystem even where outdir is a mount point.
        stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=outdir))
    else:
        outdir.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=outdir.parent))
    try:
        yield stage
        _commit(stage, outdir)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _check_directory(outdir: Path) -> None:
    if outdir.is_symlink():
        raise OutputError(f"{outdir} is a symbolic link (to {os.readlink(outdir)}): "
                          "give the directory it points to, or another one")
    if outdir.exists() and not outdir.is_dir():
        raise OutputError(f"{outdir} exists and is not a directory")


def _commit(stage: Path, outdir: Path) -> None:
    """Move the staged files into ``outdir``: the whole directory where ``outdir`` does
    not exist yet, else file by file, the page last, once every target is known to be
    a plain file or absent."""
    _check_directory(outdir)  # again: the plots took time
    if not outdir.exists():
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(stage, 0o777 & ~umask)  # mkdtemp makes it private (0700)
        os.rename(stage, outdir)
        return
    files = sorted(stage.iterdir(), key=lambda f: (f.suffix == ".html", f.name))
    for staged_file in files:
        target = outdir / staged_file.name
        if target.is_symlink():
            raise OutputError(f"{target} is a symbolic link (to {os.readlink(target)}): "
                              "not replaced; remove it or choose another directory")
        if target.exists() and not target.is_file():
            raise OutputError(f"{target} exists and is not a file: not replaced")
    for staged_file in files:
        os.replace(staged_file, outdir / staged_file.name)  # replaces a link, not its target
