"""Every stopping signal handled as Ctrl-C is, and Slurm actions no signal cuts in half.

A sweep is stopped by Ctrl-C (SIGINT), by ``kill`` or a batch system's time limit
(SIGTERM), or by its terminal going away (SIGHUP).  Python turns only SIGINT into an
exception (KeyboardInterrupt), and so only Ctrl-C ran the sweep's clean-up: a node
resumed for its re-test inside an unlimited reservation stayed in service after a
SIGTERM.  :func:`as_ctrl_c` makes SIGTERM and SIGHUP raise :class:`Interrupted`, a
KeyboardInterrupt, so that every ``finally`` and ``except KeyboardInterrupt`` of the
sweep handles the three alike.

:func:`shielded` holds the three back for a block of Slurm actions (resume the nodes
and record them; drain the nodes and record them; the clean-up): a signal that comes
meanwhile is noted, and raised when the block is done, at a point where what was done
is recorded.  (Not by blocking the signals with the thread's mask: a signal sent to
the process is then delivered to any other thread that does not block it.)  The
``scontrol`` of such a block runs in a session of its own (ocibench.cluster.slurm), so
that a Ctrl-C at the terminal, which reaches the whole foreground process group, does
not kill it half-way either.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

#: The signals that stop a sweep.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The sweep got a stopping signal; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signum_of(err: KeyboardInterrupt) -> int:
    """The signal behind a KeyboardInterrupt (SIGINT for Python's own)."""
    return getattr(err, "signum", signal.SIGINT)


#: Depth of nested shielded blocks, and the signals noted meanwhile (main thread only:
#: Python runs signal handlers there).
_shield = {"depth": 0}
_pending: list[int] = []


def _handler(signum: int, _frame) -> None:
    if _shield["depth"]:
        _pending.append(signum)
        return
    raise Interrupted(signum)


def _main_thread() -> bool:
    # Python delivers signals to the main thread only, and only it may set handlers.
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def as_ctrl_c() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` inside the block."""
    if not _main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handler) for s in STOPPING}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """The stopping signals held back for the block (inside :func:`as_ctrl_c`), the
    first of them raised after it; an exception of the block itself goes first."""
    _shield["depth"] += 1
    try:
        yield
    finally:
        _shield["depth"] -= 1
    if not _shield["depth"] and _pending:
        signum = _pending[0]
        _pending.clear()
        raise Interrupted(signum)
