"""Each node's current verdicts, published beside the history for the healthcheck.

The healthcheck runs on every node every few minutes with a budget of seconds; the
history is one SQLite file on shared storage, 800 MB after a year of a 1,000-node
cluster, written by the head node.  Opening it from every node cost seconds per run,
growing with the history (the drift rule reads every sweep of the node and of its
peers), and waited on SQLite's busy timeout whenever a writer held it.  So every
writer of the history publishes, after its commit, what the healthcheck asks of each
node it wrote, in a small file per node that a reader opens in O(1) and never waits on
(docs/history.md, "Published snapshots"):

``<history>.current/<node>.json``, replaced atomically (ocibench.atomic)::

    {"format": "ocibench-node-snapshot", "version": 1, "node": "gpu-3",
     "published": 1790000000.0, "session": "sweep-...",
     "history": {"figures": 50, "newest": 1789990000.0,
                 "failed": [{"figure": "osu_bw ... 80 GB/s (floor 95)",
                             "time": 1789990000.0, "session": "sweep-..."}]},
     "drift": {"figures": 50, "judged": 48, "needed": 18,
               "drifting": [{"reason": "...", "persists": true,
                             "time": 1789990000.0}]}}

``page`` (since the history's pages read it, absent from older snapshots): what the
node's page shows of the same pass (its drifting figures, the cluster events of its
figures) and what the pass read (:class:`Basis`), so that the page shows the pass's
judgement without judging the fleet again while the history has not moved
:func:`of_node`); the healthcheck ignores it.

``history``: the node's newest value of each figure (History.latest), its failures
listed; ``drift``: the figures drift judged (those with the baseline the rule needs)
and those drifting (ocibench.history.drift), each with whether it persists
(Drift.persists: the sweep's "rerun, then drain if it persists") and its newest
value's time, against which the healthcheck holds a person's resume (its state file's
``history_since``).

**Never stale unnoticed.**  A writer first leaves ``<history>.current/writing/<id>.json``
naming the nodes it is about to write (and holds a POSIX lock on it while it lives),
commits, publishes those nodes, then removes it.  A reader finds its node named there
and says unknown (a write in flight, or one whose writer died between its commit and
its publishing); a later writer, finding the lock free, publishes the dead writer's
nodes too and removes its file.  So a snapshot either describes the history or its
node is named as being written: the healthcheck never passes on a snapshot the history
has moved past.  (A writer of an ocibench older than this module publishes nothing:
``ocibench history publish`` writes every node's snapshot afresh.)

The writer is root or the admin on the head node; the files are 0644 in a 0755
directory on the shared storage, for the nodes' healthchecks to read.  Writing, this
module reads the history (ocibench.history.store, drift); reading, it imports neither:
the healthcheck starts without SQLite.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocibench import atomic, hostnames, jsonfile, metrics

if TYPE_CHECKING:   # the writer's: the reader (the healthcheck) never loads SQLite
    from ocibench.history import drift
    from ocibench.history.store import History, Record

FORMAT = "ocibench-node-snapshot"
VERSION = 1
#: The write-intent files' format.
INTENT_FORMAT = "ocibench-history-write"
#: A snapshot is a few KB (50 figures); anything far larger is not one.
MAX_BYTES = 1 << 20
#: An intent names every node of a sweep: 100,000 names fit.
MAX_INTENT_BYTES = 8 << 20
#: Intent files a reader looks at; more is not a history being written, but a mess
#: (its node is unknown until it is cleaned up: ``ocibench history publish``).
MAX_INTENTS = 64
#: Items of a list a snapshot keeps (a node has about 50 figures).
MAX_ITEMS = 1000


class PublishError(RuntimeError):
    """The snapshots cannot be written; one line naming the path."""


class NotPublished(Exception):
    """No snapshot the reader may trust: the reason, one line (the healthcheck's
    unknown)."""


def directory(history: Path) -> Path:
    """Where the snapshots of the history at ``history`` live: ``<history>.current``."""
    history = Path(history)
    return history.with_name(history.name + ".current")


def snapshot_path(history: Path, node: str) -> Path:
    return directory(history) / f"{node}.json"


# --------------------------------------------------------------------------- what it says


@dataclass(frozen=True)
class Failure:
    figure: str         # the figure and its value, one line
    time: float         # when it was measured
    session: str


@dataclass(frozen=True)
class Drifting:
    reason: str         # drift's line
    persists: bool      # flagged by the previous sweep too (drift: >= 2 separate low values)
    time: float         # the figure's newest value's time


Key = tuple[str, str, "int | None", str]


@dataclass(frozen=True)
class Basis:
    """What a pass of drift over the history read, taken just before it (so never
    more than it read): the newest session that had arrived, the values the history's
    summaries count in it and the sessions before it, and the node's events.  A history
    that has the same, no sweep having arrived since, is judged the same by the pass
    (:func:`still`)."""

    newest: int         # the session's id (the order of arrival)
    values: int
    events: int


@dataclass(frozen=True)
class Seen:
    """A finding of drift's pass as a node's page shows it: the figure, drift's line (a
    drifting figure's reason, a cluster event's text), whether the drift persists, and
    a cluster event's first session and its time."""

    check: str
    variant: str
    size: int | None
    figure: str
    text: str
    persists: bool = False
    session: str = ""
    time: float = 0.0

    @property
    def key(self) -> Key:
        return (self.check, self.variant, self.size, self.figure)


@dataclass(frozen=True)
class Judged:
    """The node's page's share of the pass (``page`` in the file)."""

    basis: Basis
    drifts: tuple[Seen, ...]
    events: tuple[Seen, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"basis": {"newest": self.basis.newest, "values": self.basis.values,
                          "events": self.basis.events},
                "drifts": [_seen_dict(s) for s in self.drifts],
                "events": [_seen_dict(s) for s in self.events]}


def _seen_dict(seen: Seen) -> dict[str, Any]:
    return {"check": seen.check, "variant": seen.variant, "size": seen.size,
            "figure": seen.figure, "text": seen.text, "persists": seen.persists,
            "session": seen.session, "time": seen.time}


@dataclass(frozen=True)
class Snapshot:
    node: str
    published: float
    session: str                    # the write that published it
    figures: int                    # the node's figures in the history
    newest: float                   # its newest value's time
    failed: tuple[Failure, ...]
    drift_figures: int              # figures drift looked at (a unit with a direction)
    drift_judged: int               # of those, with the sweeps the rule needs
    drift_needed: int               # the sweeps the rule needs
    drifting: tuple[Drifting, ...]
    path: Path = Path()
    judged: Judged | None = None    # the page's share; None from an older publisher

    def to_dict(self) -> dict[str, Any]:
        return {**({"page": self.judged.to_dict()} if self.judged else {}),
            "format": FORMAT, "version": VERSION, "node": self.node,
            "published": self.published, "session": self.session,
            "history": {"figures": self.figures, "newest": self.newest,
                        "failed": [{"figure": f.figure, "time": f.time,
                                    "session": f.session} for f in self.failed]},
            "drift": {"figures": self.drift_figures, "judged": self.drift_judged,
                      "needed": self.drift_needed,
                      "drifting": [{"reason": d.reason, "persists": d.persists,
                                    "time": d.time} for d in self.drifting]}}


def figure_line(record: Record) -> str:
    """One figure of a node and its value, as a drain reason and the healthcheck show it."""
    size = f" {record.size} B" if record.size is not None else ""
    variant = f" {record.variant}" if record.variant else ""
    floor = f" (floor {record.floor:g})" if record.floor is not None else ""
    return (f"{record.check}{variant}{size} {record.figure} {record.value:g} "
            f"{record.unit}{floor}")


# --------------------------------------------------------------------------- writing


def snapshots(history: History, nodes: Sequence[str], session: str,
              now: float | None = None) -> dict[str, Snapshot]:
    """The snapshot of each of ``nodes`` that the history holds figures of, read from
    ``history``; drift judged once for all of them, from one pass over the history
    (drift.read, as drift.drifting_nodes reads it)."""
    from ocibench.history import drift

    now = time.time() if now is None else now
    nodes = list(dict.fromkeys(nodes))
    bases = basis(history, nodes)   # before the pass: what it reads, or less
    fleet = drift.read(history)
    drifts = fleet.drifting(nodes)
    judged = _judged(fleet, set(nodes))
    events = [seen_event(e) for e in fleet.events()]
    found = {}
    for node in nodes:
        latest = history.latest(node)
        if not latest:
            continue
        measured = {r.key: r.time for r in latest}
        drifting = [Drifting(d.reason, d.persists,
                             measured.get((d.check, d.variant, d.size, d.figure), 0.0))
                    for d in drifts.get(node, [])]
        failed = [Failure(figure_line(r), r.time, r.session) for r in latest
                  if r.verdict == metrics.Verdict.FAIL.value]
        found[node] = Snapshot(
            node=node, published=now, session=session, figures=len(latest),
            newest=max(r.time for r in latest), failed=tuple(failed[:MAX_ITEMS]),
            drift_figures=sum(1 for r in latest if drift.higher_is_better(r.unit) is not None),
            drift_judged=judged.get(node, 0),
            drift_needed=drift.MIN_BASELINE + drift.PERSIST_WINDOW,
            drifting=tuple(drifting[:MAX_ITEMS]),
            judged=None if node not in bases else Judged(
                bases[node], tuple(seen_drift(d) for d in drifts.get(node, []))[:MAX_ITEMS],
                tuple(e for e in events if e.key in measured)[:MAX_ITEMS]))
    return found


def _judged(fleet: drift.Fleet, nodes: set[str]) -> dict[str, int]:
    """How many figures of each of ``nodes`` drift could judge: those whose residuals
    since their baseline began give the rule its numbers (drift.assess: a baseline of
    MIN_BASELINE sweeps before the recent ones, peers to compare with, a spread of the
    figure).  The others it never flags: a node none of whose figures it could judge
    is unknown, never a pass."""
    from ocibench.history import drift

    mads = fleet.mads()
    judged: dict[str, int] = {}
    for sid in fleet.series:
        node, figure = fleet.meta[sid]
        mad = mads[figure]
        if node in nodes and mad is not None and \
                drift.assess(fleet.residuals(sid)[0], mad) is not None:
            judged[node] = judged.get(node, 0) + 1
    return judged


def publish(path: Path, history: History, nodes: Iterable[str], session: str,
            now: float | None = None, mine: Path | None = None) -> int:
    """Write the snapshot of each of ``nodes`` beside the history at ``path`` (read
    through ``history``, opened on it), and of the nodes of writes whose writer died
    before publishing (their intent files no longer locked; removed once published);
    a node the history holds nothing of has its snapshot removed.  ``mine``: the
    caller's own intent file, left to it.  Returns how many snapshots were written;
    raises PublishError.

    One publisher at a time (``.publish.lock``): a publisher that read the history
    before another's commit writes before that other publishes, never after."""
    nodes = list(nodes)
    bad = next((hostnames.why_not(n) for n in nodes if hostnames.why_not(n)), None)
    if bad:
        raise PublishError(f"{path}: node {bad}")
    where = directory(path)
    try:
        where.mkdir(mode=0o755, exist_ok=True)
        lock = open(where / ".publish.lock", "a")
    except OSError as err:
        raise PublishError(f"cannot publish the snapshots in {where}: "
                           f"{err.strerror or err}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        dead = _dead_intents(where / "writing", mine)
        try:
            nodes += [n for _fd, _file, names in dead for n in names]
            nodes = list(dict.fromkeys(nodes))
            found = snapshots(history, nodes, session, now)
            try:
                for node in nodes:
                    target = snapshot_path(path, node)
                    if node in found:
                        text = json.dumps(found[node].to_dict(), indent=1,
                                          sort_keys=True) + "\n"
                        # 0644: every node's healthcheck reads it
                        atomic.replace(target, text, mode=0o644)
                    else:
                        target.unlink(missing_ok=True)
                for _fd, file, _names in dead:
                    file.unlink(missing_ok=True)
            except OSError as err:
                raise PublishError(f"cannot publish the snapshots in {where}: "
                                   f"{err.strerror or err}") from None
        finally:
            for fd, _file, _names in dead:
                os.close(fd)
    return len(found)


class Intent:
    """A write to the history in flight: ``<history>.current/writing/<id>.json`` names
    its nodes, locked while this process lives (see the module's docstring).  Made
    before the write; :meth:`finish` once it is committed, :meth:`abandon` where
    nothing was."""

    def __init__(self, path: Path, nodes: Iterable[str], session: str) -> None:
        self.history = Path(path)
        self.nodes = list(dict.fromkeys(nodes))
        self.session = session
        bad = next((hostnames.why_not(n) for n in self.nodes if hostnames.why_not(n)), None)
        if bad:
            raise PublishError(f"{path}: node {bad}")
        where = directory(path) / "writing"
        body = json.dumps({"format": INTENT_FORMAT, "session": session,
                           "nodes": self.nodes, "began": time.time(),
                           "host": socket.gethostname(), "pid": os.getpid()})
        try:
            where.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=".intent.", suffix=".tmp", dir=where)
        except OSError as err:
            raise PublishError(f"cannot mark a write to the history in {where}: "
                               f"{err.strerror or err}") from None
        try:
            os.fchmod(fd, 0o644)
            os.write(fd, body.encode())
            # held while this writer lives: flock, whose lock is the open file's (a
            # POSIX lock would go when this process closed any other descriptor of it)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.file = where / f"{os.getpid()}-{os.path.basename(name)[8:-4]}.json"
            os.rename(name, self.file)   # seen by readers only once complete and locked
        except OSError as err:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise PublishError(f"cannot mark a write to the history in {where}: "
                               f"{err.strerror or err}") from None
        self._fd: int | None = fd

    def finish(self, history: History | None = None, now: float | None = None) -> int:
        """Publish this write's nodes (and dead writers', :func:`publish`), then remove
        the file: the nodes' snapshots describe the history again.  ``history``: an
        open History on the file (else opened read-only here).  Returns the snapshots
        written; raises PublishError or store.HistoryError and then leaves the file
        (its nodes stay unknown to the healthcheck until a later write publishes)."""
        from ocibench.history.store import History

        if self._fd is None:
            return 0
        if history is None:
            with History(self.history, readonly=True) as opened:
                written = publish(self.history, opened, self.nodes, self.session, now,
                                  mine=self.file)
        else:
            written = publish(self.history, history, self.nodes, self.session, now,
                              mine=self.file)
        self.abandon()
        return written

    def abandon(self) -> None:
        """Remove the file: published, or nothing was written after all (the write
        failed before its commit)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self.file.unlink()
            os.close(self._fd)
            self._fd = None


def _dead_intents(where: Path, mine: Path | None) -> list[tuple[int, Path, list[str]]]:
    """The intent files in ``where`` whose writer is gone (their lock taken here, and
    held until the caller closes the descriptor), with their nodes."""
    found = []
    try:
        names = sorted(p for p in where.iterdir() if p.suffix == ".json" and p != mine)
    except OSError:
        return []
    for file in names:
        try:
            fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            data = jsonfile.parse(os.read(fd, MAX_INTENT_BYTES), str(file))
            nodes = [n for n in (data.get("nodes") or []) if hostnames.is_host(n)] \
                if isinstance(data, dict) else []
        except (OSError, jsonfile.JsonFileError):
            os.close(fd)   # alive (locked), or unreadable: left as it is
            continue
        found.append((fd, file, nodes))
    return found


def add(path: Path, records: Sequence[Record], session: str) -> int:
    """Add ``records`` to the history at ``path`` and publish their nodes' snapshots:
    the intent, the commit, the publishing (the module's docstring).  Returns how many
    records were new; raises store.HistoryError (nothing added) or PublishError (added,
    not published: the nodes stay unknown to the healthcheck until a later write)."""
    from ocibench.history.store import History

    intent = Intent(path, sorted({r.node for r in records}), session)
    added = 0
    try:
        with History(path) as history:
            added = history.add(records)
            if added:
                intent.finish(history)
                return added
    except BaseException:
        if not added:       # History.add is all or nothing: nothing was committed
            intent.abandon()
        raise               # else the intent stays: its nodes are unknown, not stale
    intent.abandon()        # nothing new: the snapshots still describe the history
    return 0


def publish_all(path: Path, nodes: Sequence[str] | None = None,
                session: str = "publish") -> int:
    """``ocibench history publish``: every node's snapshot (or ``nodes``') afresh, and
    the nodes of writes whose writer died; their intent files removed."""
    from ocibench.history.store import History

    with History(path, readonly=True) as history:
        return publish(path, history, list(nodes) if nodes else history.nodes(), session)


# --------------------------------------------------------------------------- one node's page

def seen_drift(found: drift.Drift) -> Seen:
    """A drifting figure as a node's page shows it."""
    return Seen(found.check, found.variant, found.size, found.figure, found.reason,
                found.persists)


def seen_event(event: drift.ClusterEvent) -> Seen:
    """A cluster event as a node's page shows it."""
    return Seen(event.check, event.variant, event.size, event.figure, event.text,
                session=event.session, time=event.time)


def basis(history: History, nodes: Iterable[str]) -> dict[str, Basis]:
    """Each of ``nodes``' :class:`Basis` now: taken before a
    pass, what the pass reads or less.  Empty for a schema 1 history (no summaries to
    count the values by)."""
    counts = history.session_counts()
    if counts is None:
        return {}
    newest = max((session for session, _name in history.arrivals()), default=0)
    values = _values(counts, newest)
    return {node: Basis(newest, values, len(history.events(node))) for node in nodes}


def still(history: History, node: str, was: Basis) -> bool:
    """The pass would judge ``node`` now as it did on ``was``: no sweep arrived since
    (a session that no figure of which more than MIN_PEERS nodes measured is not one:
    it changes no node's residuals, no figure's spread, no fleet median), no value was
    added to the sessions it read, and no event of the node (its repeat offences) was
    kept.  The summaries count every verdict where drift counts the sane ones: a
    session they call a sweep may not be one, never the other way, so "not still" may
    be said of a history the pass would judge the same, never the other way."""
    from ocibench.history import drift

    counts = history.session_counts()
    if counts is None:
        return False
    if any(most > drift.MIN_PEERS for session, (_values_, most) in counts.items()
           if session > was.newest):
        return False
    return _values(counts, was.newest) == was.values and \
        len(history.events(node)) == was.events


def _values(counts: dict[int, tuple[int, int]], newest: int) -> int:
    return sum(values for session, (values, _most) in counts.items() if session <= newest)


@dataclass(frozen=True)
class NodeJudgement:
    """The pass's findings for one node: its drifting figures, the fleet's cluster
    events, and when a writer's pass found them (None: judged now)."""

    drifts: list[Seen]
    events: list[Seen]
    published: float | None


def of_node(history: History, node: str) -> NodeJudgement:
    """What the pass finds for ``node`` (see the module's text): from its published
    snapshot where that has the page's share and the history is :func:`still` since,
    else from a pass made now (drift.read)."""
    from ocibench.history import drift

    try:
        snapshot = read(history.path, node)
    except NotPublished:
        snapshot = None
    judged = snapshot.judged if snapshot is not None else None
    if judged is not None and still(history, node, judged.basis):
        return NodeJudgement(list(judged.drifts), list(judged.events), snapshot.published)
    fleet = drift.read(history)
    return NodeJudgement([seen_drift(d) for d in fleet.drifting([node])[node]],
                         [seen_event(e) for e in fleet.events()], None)


# --------------------------------------------------------------------------- reading


def read(history: Path, node: str) -> Snapshot:
    """The node's snapshot beside the history at ``history``, without opening the
    history: a stat of it, a listing of the writes in flight, one small file.  Raises
    NotPublished, with the reason, where there is none the healthcheck may trust."""
    history = Path(history)
    try:
        owner = history.stat().st_uid
    except OSError:
        owner = None
    if owner is None or not history.is_file():
        raise NotPublished(f"no history at {history} (no run recorded yet; --history "
                           "names it)")
    where = directory(history)
    for place in (where, where / "writing"):
        doubt = _untrusted(place, owner)
        if doubt:
            raise NotPublished(doubt)
    busy = _being_written(where / "writing", node)
    if busy:
        raise NotPublished(busy)
    path = snapshot_path(history, node)
    try:
        data = jsonfile.load(path, limit=MAX_BYTES)
    except jsonfile.JsonFileError as err:
        if not os.path.lexists(path):
            raise NotPublished(
                f"no snapshot of {node} at {path} (each sweep and `ocibench history add` "
                "publishes the nodes it measured; `ocibench history publish` writes every "
                "node's)") from None
        raise NotPublished(f"{err} (not a node's snapshot)") from None
    doubt = _untrusted(path, owner)
    if doubt:
        raise NotPublished(doubt)
    try:
        return _snapshot(data, node, path)
    except (KeyError, TypeError, ValueError) as err:
        raise NotPublished(f"{path}: not a node's snapshot ({err})") from None


def _untrusted(path: Path, owner: int) -> str:
    """Why what is at ``path`` may have been written by someone other than the
    history's writer (the healthcheck drains on what a snapshot says): owned by
    another user than root and the history's owner, or writable by others.  "" when
    it is not there (said elsewhere) or trusted."""
    try:
        found = path.stat()
    except OSError:
        return ""
    if found.st_uid not in (0, owner):
        return (f"{path} belongs to uid {found.st_uid}, neither root nor the history's "
                f"owner (uid {owner}): not trusted")
    if found.st_mode & 0o022:
        return (f"{path} may be written by others (mode {found.st_mode & 0o777:o}): "
                "not trusted")
    return ""


def _being_written(where: Path, node: str) -> str:
    """Why ``node``'s snapshot may be behind the history (a write naming it in flight,
    or whose writer died before publishing), or ""."""
    try:
        names = sorted(p for p in where.iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return ""
    except OSError as err:
        return f"cannot list the writes in flight in {where}: {err.strerror or err}"
    if len(names) > MAX_INTENTS:
        return (f"{len(names)} writes to the history in flight in {where}: more than "
                f"{MAX_INTENTS}; `ocibench history publish` clears those of dead writers")
    for file in names:
        try:
            data = jsonfile.load(file, limit=MAX_INTENT_BYTES)
        except jsonfile.JsonFileError as err:
            if not os.path.lexists(file):
                continue    # finished while listed
            return f"a write in flight that cannot be read: {err}"
        nodes = data.get("nodes") if isinstance(data, dict) else None
        if not isinstance(nodes, list):
            return f"{file}: not a write in flight (no list of nodes)"
        if node in nodes:
            began = data.get("began")
            when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(began))
                    if metrics.is_number(began) and 0 <= began < 2**37 else "?")
            return (f"a write to the history (session {hostnames.shown(data.get('session'))}, "
                    f"begun {when} by pid {hostnames.shown(data.get('pid'))} on "
                    f"{hostnames.shown(data.get('host'))}) has not published {node}'s "
                    f"snapshot yet [{file}]")
    return ""


def _number(value: Any, where: str) -> float:
    if not metrics.is_number(value):
        raise ValueError(f"{where} is {value!r:.40}, not a finite number")
    return float(value)


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        raise ValueError(f"{where} is {value!r:.40}, not a count")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} is {value!r:.40}, not a string")
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{where} is {value!r:.40}, not true or false")
    return value


def _items(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS or \
            not all(isinstance(item, dict) for item in value):
        raise ValueError(f"{where} is not a list of at most {MAX_ITEMS} objects")
    return value


def _snapshot(data: Any, node: str, path: Path) -> Snapshot:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"format is not {FORMAT!r}")
    if data.get("version") != VERSION:
        raise ValueError(f"version {hostnames.shown(data.get('version'))}; this ocibench "
                         f"reads {VERSION}")
    if data.get("node") != node:
        raise ValueError(f"the snapshot of {hostnames.shown(data.get('node'))}, not {node}")
    hist, drift = data["history"], data["drift"]
    if not isinstance(hist, dict) or not isinstance(drift, dict):
        raise ValueError("history or drift is not an object")
    return Snapshot(
        node=node, published=_number(data["published"], "published"),
        session=_text(data["session"], "session"),
        figures=_count(hist["figures"], "history.figures"),
        newest=_number(hist["newest"], "history.newest"),
        failed=tuple(Failure(_text(f["figure"], "history.failed[].figure"),
                             _number(f["time"], "history.failed[].time"),
                             _text(f["session"], "history.failed[].session"))
                     for f in _items(hist["failed"], "history.failed")),
        drift_figures=_count(drift["figures"], "drift.figures"),
        drift_judged=_count(drift["judged"], "drift.judged"),
        drift_needed=_count(drift["needed"], "drift.needed"),
        drifting=tuple(Drifting(_text(d["reason"], "drift.drifting[].reason"),
                                _flag(d["persists"], "drift.drifting[].persists"),
                                _number(d["time"], "drift.drifting[].time"))
                       for d in _items(drift["drifting"], "drift.drifting")),
        path=path,
        judged=_judged_of(data.get("page")))


def _size(value: Any, where: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or not 0 <= value < 2**63):
        raise ValueError(f"{where} is {value!r:.40}, not a size in bytes")
    return value


def _seen(item: dict[str, Any], where: str) -> Seen:
    return Seen(_text(item["check"], f"{where}.check"), _text(item["variant"], f"{where}.variant"),
                _size(item["size"], f"{where}.size"), _text(item["figure"], f"{where}.figure"),
                _text(item["text"], f"{where}.text"), _flag(item["persists"], f"{where}.persists"),
                _text(item["session"], f"{where}.session"), _number(item["time"], f"{where}.time"))


def _judged_of(page: Any) -> Judged | None:
    """The page's share, None where there is none (an older publisher) or it is not
    one: the page then judges the fleet itself; the healthcheck never reads it."""
    try:
        return _page_share(page) if page is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def _page_share(page: Any) -> Judged:
    if not isinstance(page, dict) or not isinstance(page.get("basis"), dict):
        raise ValueError("page is not an object with a basis")
    basis = page["basis"]
    return Judged(
        Basis(_whole(basis["newest"], "page.basis.newest"),
              _whole(basis["values"], "page.basis.values"),
              _count(basis["events"], "page.basis.events")),
        tuple(_seen(d, "page.drifts[]") for d in _items(page["drifts"], "page.drifts")),
        tuple(_seen(e, "page.events[]") for e in _items(page["events"], "page.events")))


def _whole(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ValueError(f"{where} is {value!r:.40}, not a count")
    return value
