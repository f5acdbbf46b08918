"""The per-node results store: every judged figure of every node, kept (docs/history.md).

One SQLite file (the standard library's ``sqlite3``; no server), written by ``ocibench
sweep`` and ``ocibench history add``, read by ``ocibench history``, the drift flag and
the healthcheck.  :class:`Record` is one figure of one node in one session (a sweep or
a ReFrame run); adding a session again adds nothing (each figure of a node is kept once
per session).

**Layout.**  Rows repeat a few names (node, check, variant, figure) millions of times,
so each distinct figure of a node is one row of ``series`` (a unique index on node,
check, variant, size, figure; another on check, variant, size, figure for the cluster's
median), each session one row of ``sessions``, and each value one row of ``results``,
keyed ``(session, series)`` in a WITHOUT ROWID table.  Keyed by session first, a sweep
is appended at the end of the file: adding one touches a few thousand new pages and
journals almost nothing, where a table keyed by series first would rewrite one page
per series (50,000 at 1,000 nodes x 50 figures: 230 MB of journal and 12 s a sweep,
measured: docs/history.md).  A node's series are created together, so their ids are
one range and, within each session, its values lie side by side: reading a node's
year is one probe per session (365 pages), not a scan.  A size-less figure (STREAM,
nvbandwidth) keeps size -1 in the file, since SQLite's UNIQUE treats NULLs as
distinct; :class:`Record` says None.

**Journal.**  The rollback journal (SQLite's default, ``journal_mode=DELETE``), not
WAL: WAL keeps its index in shared memory (the ``-shm`` file, mmapped), which works
only between processes of one host (https://www.sqlite.org/wal.html, "all processes
using a database must be on the same host computer; WAL does not work over a network
filesystem").  This file is read by the healthcheck on every node and written by the
sweep on a login node, so it lives on shared storage, where only the rollback journal
and POSIX locks are safe (NFS: the locks need a working lock manager; ``nolock`` mounts
corrupt it: https://www.sqlite.org/howtocorrupt.html section 2.1).  A writer waits up to
:data:`BUSY_TIMEOUT_S` for another's lock.

**Summaries.**  Each session's values of each figure are also kept summarised, one row
of ``summaries`` per (session, figure): how many nodes, the median, the quartiles, the
10th and 90th percentiles, the extremes, the failures, the most common software.  The
cluster's page and the cluster's median per session read those (18,000 rows for a year
of 50 figures) instead of every node's values (18 M): a writer recomputes the rows of
the sessions it adds, from the results of those sessions only.

**Time.**  "Newest" is the order of arrival, never the largest timestamp: a session's
id is given when its first record is added (SQLite's rowid: one more than the largest),
so the rows of a series are read in the order their sessions arrived, and a node's
events in the order they were kept.  A record or event stamped ahead of this machine's
clock by more than :data:`MAX_SKEW_S` (a node or a login node with a bad clock: year
3000) is refused with one line naming it; one that a history written before that rule
still holds reads with the newest trusted time before its session arrived
(:meth:`History._trusted`), so that no clock can make a record "newer" than the ones
that came after it, or newer than a person's resume forever (docs/history.md, "Time").

**Version.**  ``PRAGMA application_id`` marks the file as ours, ``PRAGMA user_version``
is the schema's version (:data:`SCHEMA_VERSION`).  Schema 2 added the summaries: a
writer that opens a schema 1 file adds them, for every session already kept, in one
transaction (:meth:`History._upgrade`); a reader of a schema 1 file computes them from
the results, slowly, and never writes.  A file that is not SQLite, another
program's database, or one of a newer schema is refused with one line
(:class:`HistoryError`), never a traceback, and never changed.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import statistics
import time as clock
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibench import hostnames, metrics

#: ``PRAGMA application_id`` of an ocibench history ("ocbh"): another program's SQLite
#: file is not taken for ours (https://www.sqlite.org/pragma.html#pragma_application_id).
APPLICATION_ID = 0x6F636268
#: ``PRAGMA user_version``: the schema this module writes and reads.
SCHEMA_VERSION = 2
#: Seconds a record's or an event's time may be ahead of the clock of the machine that
#: adds it: Kerberos' default clock skew (MIT krb5.conf ``clockskew``, 300 s), the
#: tolerance of a protocol that also refuses a stamp from a clock that is not kept; an
#: NTP-kept cluster is within milliseconds, and a run cannot have ended in the future.
MAX_SKEW_S = 300.0
#: Seconds a writer waits for another writer's lock before it gives up.
BUSY_TIMEOUT_S = 60.0
#: Page cache of a connection, KiB (SQLite's default is 2,000).
CACHE_KIB = 64 * 1024
#: Sessions probed per query when looking for each series' newest row.
_PROBE = 8
#: Above this many series wanted, their newest rows are found by reading each session
#: whole rather than by probing each series in it (the fleet's 50,000: one range of the
#: key per session, against 50,000 probes).
_SCAN_ABOVE = 2048
#: The node events drift's repeat offenders are told from.
EVENT_KINDS = ("flagged", "drained", "resumed")
#: Stored size of a figure that has none (SQLite's UNIQUE treats NULLs as distinct).
_NO_SIZE = -1

_SCHEMA = f"""
CREATE TABLE series (
    id INTEGER PRIMARY KEY,
    node TEXT NOT NULL,
    "check" TEXT NOT NULL,
    variant TEXT NOT NULL,
    size INTEGER NOT NULL,
    figure TEXT NOT NULL,
    unit TEXT NOT NULL
);
CREATE UNIQUE INDEX series_key ON series (node, "check", variant, size, figure);
CREATE INDEX series_figure ON series ("check", variant, size, figure);
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    time REAL NOT NULL       -- its newest record's: the order of "newest"
);
CREATE TABLE software (
    id INTEGER PRIMARY KEY,
    image TEXT NOT NULL,     -- '' where unknown: UNIQUE treats NULLs as distinct
    driver TEXT NOT NULL,
    UNIQUE (image, driver)
);
CREATE TABLE results (
    series INTEGER NOT NULL REFERENCES series (id),
    session INTEGER NOT NULL REFERENCES sessions (id),
    time REAL NOT NULL,
    value REAL NOT NULL,
    verdict TEXT NOT NULL,
    documented REAL,
    floor REAL,
    software INTEGER NOT NULL REFERENCES software (id),
    PRIMARY KEY (session, series)
) WITHOUT ROWID;
CREATE TABLE events (
    node TEXT NOT NULL,
    time REAL NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN {EVENT_KINDS!r}),
    reason TEXT NOT NULL,
    session TEXT NOT NULL
);
CREATE INDEX events_node ON events (node, time);
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
"""

#: Schema 2: each session's values of each figure, summarised (:class:`Summary`).  Keyed
#: by session first, as ``results`` is: a sweep's rows are appended.
_SUMMARIES = """
CREATE TABLE summaries (
    session INTEGER NOT NULL REFERENCES sessions (id),
    "check" TEXT NOT NULL,
    variant TEXT NOT NULL,
    size INTEGER NOT NULL,
    figure TEXT NOT NULL,
    unit TEXT NOT NULL,      -- every value converted to it
    time REAL NOT NULL,      -- the session's earliest value of the figure
    nodes INTEGER NOT NULL,  -- values summarised: one per node
    least REAL NOT NULL,
    low REAL NOT NULL,       -- 10th percentile
    q1 REAL NOT NULL,
    median REAL NOT NULL,
    q3 REAL NOT NULL,
    high REAL NOT NULL,      -- 90th percentile
    most REAL NOT NULL,
    fails INTEGER NOT NULL,  -- values whose verdict is fail
    software INTEGER NOT NULL REFERENCES software (id),   -- the most common
    softwares INTEGER NOT NULL,                           -- how many distinct
    PRIMARY KEY (session, "check", variant, size, figure)
) WITHOUT ROWID
"""


class HistoryError(RuntimeError):
    """The history cannot be opened, read or written, or a record is malformed; one
    line naming the file (or the record's field)."""


class _HotJournal(Exception):
    """A read-only open found a journal a dead writer left (History._open)."""


#: SQLite's extended result code for a read-only connection that found a hot journal,
#: and its code for a lock another connection held past the busy timeout.
_SQLITE_READONLY_ROLLBACK = 776
_SQLITE_BUSY = 5


@dataclass(frozen=True)
class Record:
    """One judged figure of one node in one session."""

    node: str            # one host ("gpu-3"); pair/group results attributed as the sweep does
    check: str           # benchmark name (ocibench.benchmarks), e.g. "osu_bw"
    variant: str         # the figure's params, canonical "buffers=D-D nodes=2"
    size: int | None     # message size in bytes, None for size-less figures
    figure: str          # value key: "bandwidth", "latency", "out_of_place", "Triad", ...
    value: float
    unit: str            # as ocibench.metrics names it ("MB/s", "GB/s", "us", ...)
    verdict: str         # a metrics.Verdict / RunVerdict value ("pass", "fail", ...)
    time: float          # epoch seconds of the run
    session: str         # sweep id or ReFrame session uuid
    documented: float | None = None   # the shape's documented figure, same unit
    floor: float | None = None        # the lowest passing value (policy), same unit
    image: str | None = None          # OS image / release
    driver: str | None = None         # GPU driver version

    @property
    def key(self) -> tuple[str, str, int | None, str]:
        """(check, variant, size, figure): which figure of a node this is."""
        return (self.check, self.variant, self.size, self.figure)


@dataclass(frozen=True)
class Summary:
    """One figure's values in one session, over the nodes that session measured: what
    the cluster's page plots (a median and its bands) instead of every node's value."""

    check: str
    variant: str
    size: int | None
    figure: str
    session: str
    time: float          # the session's earliest value of the figure
    unit: str            # every value converted to it (the unit most of them had)
    nodes: int           # values summarised: one per node
    least: float
    low: float           # 10th percentile
    q1: float
    median: float
    q3: float
    high: float          # 90th percentile
    most: float
    fails: int           # values whose verdict is fail
    image: str | None    # the most common software among the values
    driver: str | None
    softwares: int       # how many distinct (image, driver) pairs the values had

    @property
    def key(self) -> tuple[str, str, int | None, str]:
        return (self.check, self.variant, self.size, self.figure)


@dataclass(frozen=True)
class Event:
    """A node flagged (drifting), drained or resumed, and the session that did it."""

    node: str
    time: float
    kind: str
    reason: str
    session: str


def variant(params: dict[str, Any]) -> str:
    """A figure's params as the store keys them: sorted ``key=value``, space-separated;
    params that are None or empty are left out."""
    return " ".join(f"{k}={params[k]}" for k in sorted(params)
                    if params[k] is not None and params[k] != "")


def _check(record: Any, index: int) -> None:
    """Every field of a record of the right type: one line naming the record's field.
    Written for speed (a sweep of 1,000 nodes adds 50,000 records): the common case is
    a few type tests, the message is built only for a bad field."""
    if type(record) is not Record:
        raise HistoryError(f"record {index}: {type(record).__name__} is not a history Record")
    for name in _TEXT_FIELDS:
        text = getattr(record, name)
        if type(text) is not str or not text or text.isspace():
            raise HistoryError(f"record {index}.{name}: {text!r} is not a non-empty string")
    if type(record.variant) is not str:
        raise HistoryError(f"record {index}.variant: {record.variant!r} is not a string")
    if not hostnames.HOST.fullmatch(record.node):
        # printed on terminals, a file name of its snapshot (history.current)
        raise HistoryError(f"record {index}.node: {hostnames.why_not(record.node)}")
    size = record.size
    if size is not None and (type(size) is not int or size < 0):
        raise HistoryError(f"record {index}.size: {size!r} is not a message size in bytes")
    for name in _NUMBER_FIELDS:
        value = getattr(record, name)
        if value is None and name in _OPTIONAL:
            continue
        if type(value) not in (float, int) or not math.isfinite(value):
            raise HistoryError(f"record {index}.{name}: {value!r} is not a finite number")
    for name in ("image", "driver"):
        value = getattr(record, name)
        if value is not None and type(value) is not str:
            raise HistoryError(f"record {index}.{name}: {value!r} is not a string")


def _not_ahead(records: list[Record], now: float) -> None:
    """Refuse the records when one is stamped more than MAX_SKEW_S ahead of ``now``:
    one line naming the first, and how many more."""
    limit = now + MAX_SKEW_S
    ahead = [i for i, r in enumerate(records) if r.time > limit]
    if ahead:
        first = records[ahead[0]]
        more = f" (and {len(ahead) - 1} more)" if len(ahead) > 1 else ""
        raise HistoryError(
            f"record {ahead[0]}.time: {first.time!r} ({_utc(first.time)}) of {first.node} "
            f"{first.check} {first.figure}, session {first.session}{more}: "
            f"{_ahead(first.time, now)}; nothing added")


def _ahead(stamp: float, now: float) -> str:
    return (f"{stamp - now:.0f} s ahead of this machine's clock ({_utc(now)}), more than "
            f"the {MAX_SKEW_S:g} s allowed (a bad clock where it ran?)")


def _utc(stamp: float) -> str:
    try:
        return clock.strftime("%Y-%m-%d %H:%M:%S UTC", clock.gmtime(stamp))
    except (OverflowError, OSError, ValueError):   # beyond what gmtime can show
        return "beyond the calendar"


_TEXT_FIELDS = ("node", "check", "figure", "unit", "verdict", "session")
_NUMBER_FIELDS = ("value", "time", "documented", "floor")
_OPTIONAL = frozenset({"documented", "floor"})
#: Record's fields in order: records read back are built from them (see _records).
_FIELDS = tuple(Record.__dataclass_fields__)


class History:
    """One history file; a context manager (closed on exit)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly and not self.path.is_file():
            raise HistoryError(f"{self.path}: no history there (nothing was added yet)")
        if not readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise HistoryError(f"{self.path}: cannot open: {_why(err)}") from None
        self._db = self._connect(readonly)
        try:
            try:
                self._open()
            except _HotJournal:
                # A writer died mid-commit: its journal must be played back before the
                # file reads as it was, and a read-only connection cannot (SQLite:
                # SQLITE_READONLY_ROLLBACK).  A reader that may write rolls it back, as
                # any writer's first read would; one that may not says so.
                self._db.close()
                self._roll_back()
                self._db = self._connect(readonly)
                self._open()
            # A sweep is a few MB of new pages: held in the cache until the commit
            # rather than spilled to the file mid-transaction.
            self._db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        except HistoryError:
            self._db.close()
            raise

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        try:
            uri = self.path.resolve().as_uri() + ("?mode=ro" if readonly else "")
            # isolation_level=None: transactions are this module's own BEGIN/COMMIT.
            return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S,
                                   isolation_level=None)
        except (OSError, sqlite3.Error) as err:
            raise HistoryError(f"{self.path}: cannot open: {_why(err)}") from None

    @property
    def journal(self) -> Path:
        """SQLite's rollback journal of the file (``<file>-journal``)."""
        return self.path.with_name(self.path.name + "-journal")

    def _hot_journal(self, err: sqlite3.Error) -> bool:
        """Whether ``err``, on a read-only connection, is SQLite refusing to read a file
        whose journal must be rolled back first."""
        code = getattr(err, "sqlite_errorcode", None)   # Python 3.11+
        if code is not None:
            return code == _SQLITE_READONLY_ROLLBACK
        try:
            return self.journal.stat().st_size > 0
        except OSError:
            return False

    def _roll_back(self) -> None:
        """Play back the journal a dead writer left: a read on a connection that may
        write does it (https://www.sqlite.org/lockingv3.html, "Hot Journals")."""
        where = self.path.parent
        if not (os.access(self.path, os.W_OK) and os.access(where, os.W_OK)):
            raise HistoryError(
                f"{self.path}: a writer stopped mid-commit and left its journal "
                f"{self.journal.name}, which must be rolled back before the history can be "
                f"read; its next writer does, or any ocibench history command run by a "
                f"user who may write {where}")
        try:
            db = sqlite3.connect(self.path.resolve().as_uri(), uri=True,
                                 timeout=BUSY_TIMEOUT_S, isolation_level=None)
            try:
                db.execute("PRAGMA application_id").fetchone()
            finally:
                db.close()
        except sqlite3.Error as err:
            raise HistoryError(f"{self.path}: cannot roll back the journal a writer left "
                               f"({self.journal.name}): {_why(err)}") from None

    def _open(self) -> None:
        """Check the file is ours and of a schema this module reads; create it when it
        is an empty file (a new history)."""
        try:
            app = self._db.execute("PRAGMA application_id").fetchone()[0]
        except sqlite3.DatabaseError as err:   # "file is not a database"
            if self.readonly and self._hot_journal(err):
                raise _HotJournal() from None
            if getattr(err, "sqlite_errorcode", None) == _SQLITE_BUSY or \
                    "database is locked" in str(err):
                raise HistoryError(f"{self.path}: cannot read: a writer held it past "
                                   f"{BUSY_TIMEOUT_S:g} s ({_why(err)})") from None
            raise HistoryError(f"{self.path}: not an ocibench history ({_why(err)})") from None
        with self._errors("read"):
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            tables = self._db.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
        if app == 0 and version == 0 and tables == 0:
            if self.readonly:
                raise HistoryError(f"{self.path}: an empty database, not yet a history")
            with self._errors("create"), self._transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(_SUMMARIES)
            self.version = SCHEMA_VERSION
            return
        if app != APPLICATION_ID:
            raise HistoryError(f"{self.path}: not an ocibench history (a SQLite database "
                               f"of another program: application_id {app:#x})")
        if version > SCHEMA_VERSION:
            raise HistoryError(f"{self.path}: a history of schema {version}, written by a "
                               f"newer ocibench; this one reads schema {SCHEMA_VERSION}")
        if version < 1:
            raise HistoryError(f"{self.path}: a history of no schema version "
                               f"(user_version {version})")
        self.version = version
        if version < 2 and not self.readonly:
            self._upgrade()

    def _upgrade(self) -> None:
        """Schema 1 to 2: the summaries of every session already kept, in one
        transaction (about a minute for a year of 1,000 nodes x 50 figures: once, by the
        first writer of this version; readers go on reading meanwhile).  Another writer
        that upgraded first leaves nothing to do."""
        with self._errors("upgrade"), self._transaction():
            if self._db.execute("PRAGMA user_version").fetchone()[0] >= 2:
                self.version = 2
                return
            self._db.execute(_SUMMARIES)
            self._store_summaries([i for (i,) in self._db.execute("SELECT id FROM sessions")])
            self._db.execute("PRAGMA user_version = 2")
        self.version = 2

    # ------------------------------------------------------------------ plumbing

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """SQLite's errors as one line naming the file."""
        try:
            yield
        except sqlite3.Error as err:
            raise HistoryError(f"{self.path}: cannot {doing}: {_why(err)}") from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        # IMMEDIATE: the write lock is taken at the start, so that two writers wait
        # for each other (busy timeout) rather than one failing half-way.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def add(self, records: Iterable[Record], *, now: float | None = None) -> int:
        """Add ``records`` in one transaction; returns how many were new.  A record of
        a (node, figure, session) already kept is left out (a session added twice adds
        nothing); all or nothing: a malformed record, or one stamped more than
        :data:`MAX_SKEW_S` ahead of ``now`` (this machine's clock), adds none."""
        records = list(records)
        for index, record in enumerate(records):
            _check(record, index)
        _not_ahead(records, clock.time() if now is None else now)
        if not records:
            return 0
        if self.readonly:
            raise HistoryError(f"{self.path}: opened read-only")
        with self._errors("write"), self._transaction():
            series = self._series_ids(records)
            sessions = self._session_ids(records)
            software = self._software_ids({(r.image or "", r.driver or "") for r in records})
            rows = []
            for record in records:
                sid, unit = series[(record.node, record.check, record.variant,
                                    _NO_SIZE if record.size is None else record.size,
                                    record.figure)]
                value, documented, floor = record.value, record.documented, record.floor
                if unit != record.unit:
                    value, documented, floor = self._converted(record, unit)
                rows.append((sid, sessions[record.session], record.time, value,
                             record.verdict, documented, floor,
                             software[(record.image or "", record.driver or "")]))
            # In key order (session, series): a new session's rows are appended.
            rows.sort(key=lambda row: (row[1], row[0]))
            cursor = self._db.executemany(
                "INSERT OR IGNORE INTO results (series, session, time, value, verdict, "
                "documented, floor, software) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            added = cursor.rowcount
            if added:
                self._store_summaries(sorted(set(sessions.values())))
            return added

    def _converted(self, record: Record, unit: str) -> tuple[float | None, ...]:
        """A record's value, documented figure and floor in the series' unit."""
        try:
            return tuple(None if v is None else metrics.convert(v, record.unit, unit)
                         for v in (record.value, record.documented, record.floor))
        except metrics.UnknownMetric as err:
            raise HistoryError(f"{self.path}: {record.node} {record.check} {record.figure}: "
                               f"kept in {unit}, given in {record.unit}: {err}") from None

    def _series_ids(self, records: list[Record]) -> dict[tuple[Any, ...], tuple[int, str]]:
        """(node, check, variant, stored size, figure) -> (series id, its unit), new
        series created with the unit of their first record."""
        wanted: dict[tuple[Any, ...], str] = {}
        for r in records:
            wanted.setdefault((r.node, r.check, r.variant,
                               _NO_SIZE if r.size is None else r.size, r.figure), r.unit)
        # The known ones node by node, on the unique index (node, ...): 1,000 small
        # queries for a sweep of 1,000 nodes.
        found: dict[tuple[Any, ...], tuple[int, str]] = {}
        for node in {key[0] for key in wanted}:
            for row in self._db.execute(
                    'SELECT node, "check", variant, size, figure, id, unit FROM series '
                    "WHERE node = ?", (node,)):
                found[tuple(row[:5])] = (row[5], row[6])
        for key, unit in wanted.items():
            if key not in found:
                cursor = self._db.execute(
                    'INSERT INTO series (node, "check", variant, size, figure, unit) '
                    "VALUES (?, ?, ?, ?, ?, ?)", (*key, unit))
                found[key] = (cursor.lastrowid, unit)
        return found

    def _session_ids(self, records: list[Record]) -> dict[str, int]:
        newest: dict[str, float] = {}
        for r in records:
            newest[r.session] = max(newest.get(r.session, r.time), r.time)
        self._db.executemany(
            "INSERT INTO sessions (name, time) VALUES (?, ?) ON CONFLICT (name) "
            "DO UPDATE SET time = max(time, excluded.time)", list(newest.items()))
        return {n: self._db.execute("SELECT id FROM sessions WHERE name = ?",
                                    (n,)).fetchone()[0] for n in newest}

    def _software_ids(self, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
        self._db.executemany("INSERT OR IGNORE INTO software (image, driver) VALUES (?, ?)",
                             list(pairs))
        return {p: self._db.execute("SELECT id FROM software WHERE image = ? AND driver = ?",
                                    p).fetchone()[0] for p in pairs}

    def add_event(self, node: str, kind: str, time: float, reason: str,
                  session: str = "") -> None:
        """A node flagged (drifting), drained or resumed: what repeat offenders are
        told from."""
        if kind not in EVENT_KINDS:
            raise HistoryError(f"event kind {kind!r}: not one of {', '.join(EVENT_KINDS)}")
        if not hostnames.is_host(node):
            raise HistoryError(f"event node: {hostnames.why_not(node)}")
        if not metrics.is_number(time):
            raise HistoryError(f"event time {time!r}: not a finite number")
        if time > clock.time() + MAX_SKEW_S:
            raise HistoryError(f"event time {time!r} ({_utc(time)}) of {node}: "
                               f"{_ahead(time, clock.time())}; not kept")
        if self.readonly:
            raise HistoryError(f"{self.path}: opened read-only")
        with self._errors("write"), self._transaction():
            self._db.execute("INSERT INTO events (node, time, kind, reason, session) "
                             "VALUES (?, ?, ?, ?, ?)", (node, time, kind, reason, session))

    # ------------------------------------------------------------------ reading

    def _series(self, where: str, args: tuple[Any, ...]) -> dict[int, tuple[Any, ...]]:
        """Series id -> (node, check, variant, size, figure, unit) of the series
        ``where`` selects."""
        with self._errors("read"):
            return {row[0]: row[1:] for row in self._db.execute(
                'SELECT id, node, "check", variant, size, figure, unit FROM series ' + where,
                args)}

    def _rows(self, series: dict[int, tuple[Any, ...]] | None, since: float | None,
              sessions: Iterable[int] | None = None) -> list[tuple[Any, ...]]:
        """The results rows of ``series`` (None: of every series; at or after ``since``;
        of ``sessions``, else of every session), in the order their sessions arrived
        (see "Time").  Sessions are the outer loop (CROSS JOIN keeps SQLite to that
        order, which it cannot know is the fast one without statistics) and each is one
        range of the key (session, series): a node's series are one run of ids, read as
        ``BETWEEN``, else probed one by one (``IN``); every series, the session's whole
        range.  That loop is already in the order asked for, so ORDER BY costs no sort
        (EXPLAIN QUERY PLAN: no temporary B-tree)."""
        within = ""
        if series is not None:
            if not series:
                return []
            ids = sorted(int(i) for i in series)   # integers from this file
            within = f"AND r.series BETWEEN {ids[0]} AND {ids[-1]}" \
                if ids[-1] - ids[0] + 1 == len(ids) \
                else f"AND r.series IN ({','.join(map(str, ids))})"
        only = "" if sessions is None else \
            f"AND n.id IN ({','.join(str(int(i)) for i in sessions)}) "
        with self._errors("read"):
            rows = self._db.execute(
                "SELECT r.series, r.value, r.verdict, r.time, n.name, r.documented, "
                "r.floor, r.software FROM sessions n CROSS JOIN results r "
                f"ON r.session = n.id {within} WHERE r.time >= ? {only}"
                "ORDER BY n.id, r.series",
                (-math.inf if since is None else since,)).fetchall()
        return rows

    def _records(self, series: dict[int, tuple[Any, ...]],
                 rows: list[tuple[Any, ...]]) -> list[Record]:
        rows = self._trusted(rows)
        software = self.software_index()
        found = []
        new, fields = object.__new__, _FIELDS
        for sid, value, verdict, time, session, documented, floor, soft in rows:
            node, check, variant_, size, figure, unit = series[sid]
            # A frozen dataclass's __init__ sets each field through object.__setattr__;
            # filling __dict__ at once builds the same Record in a fraction of the time
            # (a node's year is 18,000 of them).
            record = new(Record)
            record.__dict__.update(zip(fields, (
                node, check, variant_, None if size == _NO_SIZE else size, figure, value,
                unit, verdict, time, session, documented, floor, *software[soft])))
            found.append(record)
        return found

    def _trusted(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """``rows`` where a time ahead of this machine's clock by more than MAX_SKEW_S
        (kept before add() refused such times) is read as the newest trusted time of
        the sessions that arrived before its own: when it was measured is unknown, and
        that is the latest time known to have come before it.  Where no session came
        before, the clock's time (a finding is never made older than it may be)."""
        now = clock.time()
        limit = now + MAX_SKEW_S
        if not any(row[3] > limit for row in rows):
            return rows
        trusted: dict[str, float] = {}
        with self._errors("read"):
            for name in {row[4] for row in rows if row[3] > limit}:
                (before,) = self._db.execute(
                    "SELECT max(time) FROM sessions WHERE time <= ? AND id < "
                    "(SELECT id FROM sessions WHERE name = ?)", (limit, name)).fetchone()
                trusted[name] = now if before is None else before
        return [row if row[3] <= limit else (*row[:3], trusted[row[4]], *row[4:])
                for row in rows]

    def _newest(self, series: dict[int, tuple[Any, ...]],
                since: float | None) -> list[tuple[Any, ...]]:
        """The newest row of each of ``series`` (at or after ``since``): sessions are
        probed in the reverse order of their arrival until every series has its row
        (usually the first)."""
        wanted, found = dict(series), []
        with self._errors("read"):
            sessions = [i for (i,) in self._db.execute(
                "SELECT id FROM sessions WHERE time >= ? ORDER BY id DESC",
                (-math.inf if since is None else since,))]
        start = 0
        while wanted and start < len(sessions):
            # Many series (the fleet's): each session read whole, one range of the key,
            # rather than probed series by series.
            scan = len(wanted) > _SCAN_ABOVE
            batch = sessions[start:start + (1 if scan else _PROBE)]
            start += len(batch)
            rows = self._rows(None if scan else wanted, since, batch)
            newest: dict[int, tuple[Any, ...]] = {}   # rows are by arrival: the last wins
            for row in rows:
                if row[0] in wanted:
                    newest[row[0]] = row
            found += newest.values()
            for sid in newest:
                wanted.pop(sid, None)
        return found

    def latest(self, node: str) -> list[Record]:
        """The newest record of each figure of ``node`` (check, variant, size, figure):
        of the session that arrived last, whatever the records' times say."""
        series = self._series("WHERE node = ?", (node,))
        found = self._records(series, self._newest(series, None))
        return sorted(found, key=lambda r: (r.check, r.variant, r.size or -1, r.figure))

    def newest(self, check: str | None = None) -> list[Record]:
        """Every node's :meth:`latest` (of one check), read session by session, not node
        by node: what the cluster's page and the head node's export read."""
        series = self._series("" if check is None else 'WHERE "check" = ?',
                              () if check is None else (check,))
        found = self._records(series, self._newest(series, None))
        return sorted(found, key=lambda r: (r.node, r.check, r.variant, r.size or -1,
                                            r.figure))

    def history(self, node: str, check: str | None = None,
                since: float | None = None) -> list[Record]:
        """Every record of ``node`` (of one check, at or after ``since``), by figure
        and time: what ``ocibench history --node`` reads."""
        series = self._series("WHERE node = ?" if check is None else
                              'WHERE node = ? AND "check" = ?',
                              (node,) if check is None else (node, check))
        rank = {sid: i for i, sid in enumerate(sorted(
            series, key=lambda sid: (*series[sid][1:3], series[sid][3], series[sid][4])))}
        rows = self._rows(series, since)
        rows.sort(key=lambda row: rank[row[0]])   # stable: by figure, then time
        return self._records(series, rows)

    def series(self, node: str, check: str, variant: str, size: int | None, figure: str,
               since: float | None = None) -> list[Record]:
        """One figure of one node over time, oldest first (at or after ``since``)."""
        series = self._series('WHERE node = ? AND "check" = ? AND variant = ? AND size = ? '
                              "AND figure = ?",
                              (node, *_stored_key((check, variant, size, figure))))
        return self._records(series, self._rows(series, since))

    def _figure_series(self, key: tuple[str, str, int | None, str]) -> dict[int, tuple]:
        return self._series('WHERE "check" = ? AND variant = ? AND size = ? AND figure = ?',
                            _stored_key(key))

    def figure(self, check: str, variant: str, size: int | None, figure: str,
               since: float | None = None) -> dict[str, list[Record]]:
        """Every node's records of one figure (at or after ``since``), oldest first."""
        series = self._figure_series((check, variant, size, figure))
        found: dict[str, list[Record]] = {}
        for record in self._records(series, self._rows(series, since)):
            found.setdefault(record.node, []).append(record)
        return dict(sorted(found.items()))

    def cluster_median(self, check: str, variant: str, size: int | None, figure: str,
                       since: float | None = None) -> float | None:
        """The median over nodes of each node's newest value of the figure (at or after
        ``since``): each node counts once, however often it was swept.  None when no
        node has one."""
        series = self._figure_series((check, variant, size, figure))
        values = [row[1] for row in self._newest(series, since)]
        return statistics.median(values) if values else None

    def cluster_medians(self, check: str, variant: str, size: int | None, figure: str,
                        since: float | None = None) -> list[tuple[float, float]]:
        """(time, median) per session of the figure, over the nodes that session
        measured, oldest first; a session's time is its earliest record's
        (:meth:`summaries`)."""
        found = self.summaries(check, since).get((check, variant, size, figure), [])
        return [(s.time, s.median) for s in found]

    def summaries(self, check: str | None = None,
                  since: float | None = None) -> dict[tuple[str, str, int | None, str],
                                                      list[Summary]]:
        """Each figure's :class:`Summary` per session (of one check; of the sessions
        whose earliest value of it is at or after ``since``), oldest first."""
        with self._errors("read"):
            software = {i: (image or None, driver or None) for i, image, driver in
                        self._db.execute("SELECT id, image, driver FROM software")}
            names = dict(self._db.execute("SELECT id, name FROM sessions"))
            if self.version >= 2:
                rows = self._db.execute(
                    "SELECT * FROM summaries" + ("" if check is None else
                                                 ' WHERE "check" = ?'),
                    () if check is None else (check,)).fetchall()
            else:   # schema 1, read-only: computed from every value (slow)
                rows = [row for session in names for row in self._summary_rows(session)
                        if check is None or row[1] == check]
        found: dict[tuple[str, str, int | None, str], list[Summary]] = {}
        for (session, check_, variant_, size, figure, unit, time, nodes, least, low, q1,
             median, q3, high, most, fails, soft, softwares) in rows:
            if since is not None and time < since:
                continue
            size = None if size == _NO_SIZE else size
            found.setdefault((check_, variant_, size, figure), []).append(Summary(
                check_, variant_, size, figure, names[session], time, unit, nodes, least,
                low, q1, median, q3, high, most, fails, *software[soft], softwares))
        for summaries in found.values():
            summaries.sort(key=lambda s: s.time)
        return found

    def summarise(self, sessions: Iterable[str] | None = None) -> None:
        """Recompute the summaries of ``sessions`` (names; None: every session) from
        their results: for a file whose results were written without :meth:`add` (a
        bulk load: scripts/bench-history.py)."""
        if self.readonly:
            raise HistoryError(f"{self.path}: opened read-only")
        names = None if sessions is None else set(sessions)
        with self._errors("write"), self._transaction():
            ids = [i for i, name in self._db.execute("SELECT id, name FROM sessions")
                   if names is None or name in names]
            self._store_summaries(ids)

    def _store_summaries(self, sessions: Iterable[int]) -> None:
        """Replace the summaries rows of ``sessions`` (ids), inside the caller's
        transaction."""
        for session in sessions:
            self._db.execute("DELETE FROM summaries WHERE session = ?", (session,))
            self._db.executemany(f"INSERT INTO summaries VALUES ({','.join('?' * 18)})",
                                 self._summary_rows(session))

    def _summary_rows(self, session: int) -> list[tuple[Any, ...]]:
        """The summaries rows of one session (an id), from its results: one range of
        the results' key, each row's series found by its id."""
        figures: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for row in self._db.execute(
                'SELECT s."check", s.variant, s.size, s.figure, s.unit, r.value, r.verdict, '
                "r.time, r.software FROM results r CROSS JOIN series s ON s.id = r.series "
                "WHERE r.session = ?", (session,)):
            figures.setdefault(row[:4], []).append(row[4:])
        found = []
        for key, values in figures.items():
            row = _summary_row(key, values)
            if row is not None:
                found.append((session, *key, *row))
        return found

    def event_log(self, node: str | None = None, since: float | None = None) -> list[Event]:
        """The events (of one node; at or after ``since``) in the order they were kept,
        with the session that wrote each."""
        where = " AND ".join(w for w, on in (("node = ?", node is not None),
                                             ("time >= ?", since is not None)) if on)
        args = tuple(a for a in (node, since) if a is not None)
        with self._errors("read"):
            return [Event(*row) for row in self._db.execute(
                "SELECT node, time, kind, reason, session FROM events"
                + (f" WHERE {where}" if where else "") + " ORDER BY rowid", args)]

    # ------------------------------------------------------------------ the fleet, by session

    def series_index(self) -> dict[int, tuple[str, str, str, int | None, str, str]]:
        """Every series: id -> (node, check, variant, size, figure, unit)."""
        return {sid: (node, check, variant_, None if size == _NO_SIZE else size, figure, unit)
                for sid, (node, check, variant_, size, figure, unit)
                in self._series("", ()).items()}

    def software_index(self) -> dict[int, tuple[str | None, str | None]]:
        """Every software id of the results: id -> (image, driver), None where unknown."""
        with self._errors("read"):
            return {i: (image or None, driver or None) for i, image, driver in
                    self._db.execute("SELECT id, image, driver FROM software")}

    def arrivals(self) -> list[tuple[int, str]]:
        """(id, name) of every session, newest arrival first."""
        with self._errors("read"):
            return [tuple(row) for row in self._db.execute(
                "SELECT id, name FROM sessions ORDER BY id DESC")]

    def session_values(self, session: int, verdicts: Iterable[str]) -> list[tuple[Any, ...]]:
        """The values of ``session`` (an id from :meth:`arrivals`) whose verdict is one of
        ``verdicts``, as (series, value, time, software): one range of the key, the
        whole fleet's figures of a sweep at once (what drift reads)."""
        verdicts = list(verdicts)
        with self._errors("read"):
            return self._db.execute(
                "SELECT series, value, time, software FROM results WHERE session = ? AND "
                f"verdict IN ({','.join('?' * len(verdicts))})",
                (int(session), *verdicts)).fetchall()

    def session_counts(self) -> dict[int, tuple[int, int]] | None:
        """Per session id, from the summaries: (values summarised, the most nodes that
        measured one figure of it); None for a schema 1 history, which has none.  What
        tells that the history moved since drift judged it (current.NodeJudgement)."""
        if self.version < 2:
            return None
        with self._errors("read"):
            return {session: (int(values), most) for session, values, most in self._db.execute(
                "SELECT session, total(nodes), max(nodes) FROM summaries GROUP BY session")}

    def series_of(self, sessions: Iterable[int]) -> set[int]:
        """The ids of the series ``sessions`` hold a value of, whatever its verdict."""
        ids = ",".join(str(int(i)) for i in sessions)
        if not ids:
            return set()
        with self._errors("read"):
            return {sid for (sid,) in self._db.execute(
                f"SELECT series FROM results WHERE session IN ({ids})")}

    def nodes(self) -> list[str]:
        with self._errors("read"):
            return [n for (n,) in self._db.execute(
                "SELECT DISTINCT node FROM series ORDER BY node")]

    def events(self, node: str) -> list[tuple[float, str, str]]:
        """(time, kind, reason) of ``node``'s events in the order they were kept (the
        newest last, whatever its time says: see "Time")."""
        with self._errors("read"):
            return [tuple(row) for row in self._db.execute(
                "SELECT time, kind, reason FROM events WHERE node = ? ORDER BY rowid",
                (node,))]


def _summary_row(key: tuple[Any, ...], values: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """(unit, time, nodes, least, low, q1, median, q3, high, most, fails, software,
    softwares) of one figure's ``values`` (unit, value, verdict, time, software) in one
    session; None when no value converts to the figure's unit."""
    units: dict[str, int] = {}
    for unit, *_ in values:
        units[unit] = units.get(unit, 0) + 1
    unit = min(units, key=lambda u: (-units[u], u))   # the most common; ties by name
    numbers, fails, times, software = [], 0, [], {}
    for their, value, verdict, time, soft in values:
        if their != unit:
            try:
                value = metrics.convert(value, their, unit)
            except metrics.UnknownMetric:
                continue   # a unit of another metric: kept in its series, not summarised
        numbers.append(value)
        fails += verdict == "fail"
        times.append(time)
        software[soft] = software.get(soft, 0) + 1
    if not numbers:
        return None
    numbers.sort()
    return (unit, min(times), len(numbers), numbers[0], quantile(numbers, 0.1),
            quantile(numbers, 0.25), quantile(numbers, 0.5), quantile(numbers, 0.75),
            quantile(numbers, 0.9), numbers[-1], fails,
            min(software, key=lambda s: (-software[s], s)), len(software))


def quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, linearly interpolated between the two nearest
    (numpy's default, and ``statistics.quantiles``' "inclusive"): at 0.5, the median."""
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _stored_key(key: tuple[str, str, int | None, str]) -> tuple[str, str, int, str]:
    check, variant_, size, figure = key
    return (check, variant_, _NO_SIZE if size is None else size, figure)


def _why(err: BaseException) -> str:
    """An OSError's or SQLite's words, one line."""
    text = getattr(err, "strerror", None) or str(err) or type(err).__name__
    return " ".join(str(text).split())
