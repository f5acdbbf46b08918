"""Why a job failed, from its output: the one line that says so.

A failed benchmark job (a module tree that is unsafe, a modulefile that does not load,
mpirun that cannot start, a crash) leaves its reason somewhere in pages of stderr and
stdout; the checks report it with :func:`failure_line`, so that a failed run names its
cause rather than ReFrame's bare "job exited with exit code 1".
"""

from __future__ import annotations

import re

from ocibench.figures import outputs

#: Lines of a failed job's output that say why it failed, most telling first, after
#: our own "ocibench:" lines, Lmod's error and a crash (see failure_line).
_FAILURE_LINES = (
    # UCX_NET_DEVICES names a device the node lacks (a wrong mlx5_N:1 in a shape file)
    re.compile(r".*network device '[^']+' is not available.*"),
    re.compile(r".*(?:command not found|No such file or directory).*"),
    re.compile(r".*(?:not enough slots|There are not enough slots).*"),
)
#: Looked for in stderr only: STREAM's stdout says "Solution Validates: avg error less
#: than 1.000000e-13", which is no error.
_ERROR_LINE = re.compile(r"(?i).*error.*")

_LMOD_ERROR = "Lmod has detected the following error:"
#: How Lua reports a modulefile it cannot run, once Lmod's wrapped lines are joined:
#: '<file>: [string "<its first line>..."]:<line>: <why>'.
_LMOD_LUA = re.compile(r'(\S+): \[string ".*?"\]:(\d+): (.*)')


def failure_line(stderr: str, stdout: str = "") -> str | None:
    """The line of a failed job's output that best says why it failed.

    In order: an ``ocibench:`` line (our own checks in the job script), Lmod's error
    (with the modulefile and line it names), a crash (the shell's or mpirun's line
    naming the signal), the specific errors above, then any stderr line with "error".
    """
    err = [line.strip() for line in stderr.splitlines() if line.strip()]
    out = [line.strip() for line in stdout.splitlines() if line.strip()]
    ours = next((line for line in err + out if line.startswith("ocibench: ")), None)
    if ours:
        return ours
    lmod = lmod_error(err)
    if lmod:
        return lmod
    for lines in (err, out):
        crash = outputs.first_crash("\n".join(lines))
        if crash:
            return "benchmark crashed: " + _paragraph(lines, crash.string, crash.start())
    for pattern in _FAILURE_LINES:
        found = next((line for line in err + out if pattern.search(line)), None)
        if found:
            return found
    found = next((line for line in err if _ERROR_LINE.search(line)), None)
    return found or (err or out or [None])[-1]


def _paragraph(lines: list[str], text: str, offset: int) -> str:
    """The line holding ``offset`` of ``text`` (the lines joined), with the lines that
    continue its sentence: mpirun wraps 'noticed that process ... exited on' / 'signal
    11 (Segmentation fault).' over two."""
    index = text.count("\n", 0, offset)
    found = lines[index]
    for more in lines[index + 1:index + 3]:
        if found.endswith((".", ")")) or not found.startswith(("mpirun", "prterun")):
            break
        found = f"{found} {more}"
    return found


def lmod_error(lines: list[str]) -> str | None:
    """Lmod's error in one line, naming the modulefile and line where it names them.

    Lmod wraps its message to the terminal width and lists the module it was loading
    below it ("While processing the following module(s): ... Module Filename")."""
    start = next((i for i, line in enumerate(lines) if line.startswith(_LMOD_ERROR)), None)
    if start is None:
        return None
    block, files = [], []
    rest = iter(lines[start:])
    for line in rest:
        if line.startswith(("Please check", "While processing")):
            break
        block.append(line)
    for line in rest:   # the table of "While processing the following module(s):"
        if line.startswith(_LMOD_ERROR):
            break
        if line.split()[-1].startswith("/"):
            files.append(line.split()[-1])
    message = " ".join(" ".join(block)[len(_LMOD_ERROR):].split())
    lua = _LMOD_LUA.search(message)
    if lua:
        return (f"{_LMOD_ERROR[:-1]} in modulefile {lua.group(1)} line {lua.group(2)}: "
                f"{lua.group(3)}")
    where = f" (modulefile {files[0]})" if files else ""
    return f"{_LMOD_ERROR} {message}{where}"
