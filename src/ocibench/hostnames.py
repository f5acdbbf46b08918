"""Node names: what a host name may hold, checked where a name comes in.

A node's name reaches ocibench from Slurm (``$SLURMD_NODENAME``, sinfo), from the
command line (``--node``) and from files other machines wrote (a ReFrame run report's
``job_nodelist``, a check's ``provenance.json``, a healthcheck state file).  It is then
printed on a terminal, written into a drain reason, a file name (the history's
published snapshots: ``<node>.json``) and a Prometheus label.  So a name that is not
a host name is refused where it comes in, with one line that shows it escaped: a name
holding a terminal's escape sequence is never printed raw, and a name holding ``/``
never becomes a path.

A host name is RFC 1123's letters, digits, ``-`` and ``.``, and ``_``, which Slurm's
node names allow (as ``ocibench.cluster.slurm`` reads its hostlists), at most 253
characters (DNS's longest name), starting with a letter or digit.
"""

from __future__ import annotations

import re
from typing import Any

#: A node's name: see the module's docstring.
HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def is_host(name: Any) -> bool:
    return isinstance(name, str) and HOST.fullmatch(name) is not None


def shown(text: Any, limit: int = 80) -> str:
    """``text`` as it may be printed: Python's ``ascii``, a string quoted with every
    character that is not printable ASCII escaped (``'\\x1b[31m'``), cut at
    ``limit`` characters."""
    quoted = ascii(text)
    return quoted if len(quoted) <= limit else quoted[:limit - 4] + "...'"


def why_not(name: Any) -> str | None:
    """Why ``name`` is not a host name (one phrase naming it, escaped), or None."""
    if is_host(name):
        return None
    if not isinstance(name, str):
        return f"{shown(name)} is not a host name (not a string)"
    return (f"{shown(name)} is not a host name (letters, digits, '-', '.', '_'; at most "
            "253 characters)")
