"""How a drain is worded: every Slurm reason ocibench writes, the sweep's and the
healthcheck's alike.

The prefix names ocibench as the writer for the people reading ``sinfo -R``, and the
drain budget (:mod:`ocibench.cluster.budget`) counts the drains that carry it.  It
proves nothing: the sweep's --undrain trusts its own record of what it drained
(ocibench.sweep.state), never a reason.
"""

from __future__ import annotations

#: Prefix of every Slurm reason this tool writes, for the people reading ``sinfo -R``.
REASON_PREFIX = "ocibench:"
#: Slurm keeps a node's reason as given; a short one reads whole in ``sinfo -R``.
MAX_REASON = 200


def worded(text: str) -> str:
    """``ocibench: <text>`` on one line (every run of spaces and line ends made one
    space), within :data:`MAX_REASON` characters: a longer one is cut and ends in
    ``...``."""
    reason = " ".join(f"{REASON_PREFIX} {text}".split())
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON - 3] + "..."
