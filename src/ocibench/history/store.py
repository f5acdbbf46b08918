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

**Version.**  ``PRAGMA application_id`` marks the file as ours, ``PRAGMA user_version``
is the schema's version (:data:`SCHEMA_VERSION`).  A file that is not SQLite, another
program's database, or one of a newer schema is refused with one line
(:class:`HistoryError`), never a traceback, and never changed.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibench import hostnames, metrics

#: ``PRAGMA application_id`` of an ocibench history ("ocbh"): another program's SQLite
#: file is not taken for ours (https://www.sqlite.org/pragma.html#pragma_application_id).
APPLICATION_ID = 0x6F636268
#: ``PRAGMA user_version``: the schema this module writes and reads.
SCHEMA_VERSION = 1
#: Seconds a writer waits for another writer's lock before it gives up.
BUSY_TIMEOUT_S = 60.0
#: Page cache of a connection, KiB (SQLite's default is 2,000).
CACHE_KIB = 64 * 1024
#: Sessions probed per query when looking for each series' newest row.
_PROBE = 8
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


class HistoryError(RuntimeError):
    """The history cannot be opened, read or written, or a record is malformed; one
    line naming the file (or the record's field)."""


class _HotJournal(Exception):
    """A read-only open found a journal a dead writer left (History._open)."""


#: SQLite's extended result code for a read-only connection that found a hot journal.
_SQLITE_READONLY_ROLLBACK = 776


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

    def add(self, records: Iterable[Record]) -> int:
        """Add ``records`` in one transaction; returns how many were new.  A record of
        a (node, figure, session) already kept is left out (a session added twice adds
        nothing); all or nothing: a malformed record adds none."""
        records = list(records)
        for index, record in enumerate(records):
            _check(record, index)
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
            return cursor.rowcount

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

    def _rows(self, series: dict[int, tuple[Any, ...]], since: float | None,
              sessions: Iterable[int] | None = None) -> list[tuple[Any, ...]]:
        """The results rows of ``series`` (at or after ``since``; of ``sessions``, else
        of every session), oldest first.  Sessions are the outer loop (CROSS JOIN keeps
        SQLite to that order, which it cannot know is the fast one without statistics)
        and each is one range of the key (session, series): a node's series are one
        run of ids, read as ``BETWEEN``, else probed one by one (``IN``)."""
        if not series:
            return []
        ids = sorted(int(i) for i in series)   # integers from this file
        within = f"BETWEEN {ids[0]} AND {ids[-1]}" if ids[-1] - ids[0] + 1 == len(ids) \
            else f"IN ({','.join(map(str, ids))})"
        only = "" if sessions is None else \
            f"AND n.id IN ({','.join(str(int(i)) for i in sessions)}) "
        with self._errors("read"):
            rows = self._db.execute(
                "SELECT r.series, r.value, r.verdict, r.time, n.name, r.documented, "
                "r.floor, r.software FROM sessions n CROSS JOIN results r "
                f"ON r.session = n.id AND r.series {within} WHERE r.time >= ? {only}",
                (-math.inf if since is None else since,)).fetchall()
        rows.sort(key=_by_time)   # in Python: SQLite would sort through a temporary B-tree
        return rows

    def _records(self, series: dict[int, tuple[Any, ...]],
                 rows: list[tuple[Any, ...]]) -> list[Record]:
        with self._errors("read"):
            software = {i: (image or None, driver or None) for i, image, driver in
                        self._db.execute("SELECT id, image, driver FROM software")}
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

    def _newest(self, series: dict[int, tuple[Any, ...]],
                since: float | None) -> list[tuple[Any, ...]]:
        """The newest row of each of ``series`` (at or after ``since``): sessions are
        probed newest first until every series has its row (usually the first)."""
        wanted, found = dict(series), []
        with self._errors("read"):
            sessions = [i for (i,) in self._db.execute(
                "SELECT id FROM sessions WHERE time >= ? ORDER BY time DESC, id DESC",
                (-math.inf if since is None else since,))]
        for start in range(0, len(sessions), _PROBE):
            if not wanted:
                break
            rows = self._rows(wanted, since, sessions[start:start + _PROBE])
            newest: dict[int, tuple[Any, ...]] = {}   # rows are by time: the last wins
            for row in rows:
                newest[row[0]] = row
            found += newest.values()
            for sid in newest:
                wanted.pop(sid, None)
        return found

    def latest(self, node: str) -> list[Record]:
        """The newest record of each figure of ``node`` (check, variant, size, figure)."""
        series = self._series("WHERE node = ?", (node,))
        found = self._records(series, self._newest(series, None))
        return sorted(found, key=lambda r: (r.check, r.variant, r.size or -1, r.figure))

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
        measured, oldest first; a session's time is its earliest record's."""
        series = self._figure_series((check, variant, size, figure))
        sessions: dict[str, tuple[float, list[float]]] = {}
        for _sid, value, _verdict, time, session, *_ in self._rows(series, since):
            start, values = sessions.setdefault(session, (time, []))
            values.append(value)
        return sorted((start, statistics.median(values))
                      for start, values in sessions.values())

    def counts(self, node: str, verdicts: Iterable[str] | None = None
               ) -> dict[tuple[str, str, int | None, str], int]:
        """How many values each figure of ``node`` holds (of those whose verdict is one
        of ``verdicts``), counted in SQLite: the node's rows of each session, as
        :meth:`history` reads them, without building a Record of each (what the
        published snapshot says of the history drift had: ocibench.history.current)."""
        series = self._series("WHERE node = ?", (node,))
        if not series:
            return {}
        ids = sorted(int(i) for i in series)   # integers from this file
        within = f"BETWEEN {ids[0]} AND {ids[-1]}" if ids[-1] - ids[0] + 1 == len(ids) \
            else f"IN ({','.join(map(str, ids))})"
        wanted = sorted(set(verdicts)) if verdicts is not None else None
        only = "" if wanted is None else f"AND r.verdict IN ({','.join('?' * len(wanted))})"
        with self._errors("read"):
            rows = self._db.execute(
                "SELECT r.series, count(*) FROM sessions n CROSS JOIN results r "
                f"ON r.session = n.id AND r.series {within} WHERE 1 {only} "
                "GROUP BY r.series", wanted or ()).fetchall()
        found = {}
        for sid, count in rows:
            _node, check, variant_, size, figure, _unit = series[sid]
            found[(check, variant_, None if size == _NO_SIZE else size, figure)] = count
        return found

    def nodes(self) -> list[str]:
        with self._errors("read"):
            return [n for (n,) in self._db.execute(
                "SELECT DISTINCT node FROM series ORDER BY node")]

    def events(self, node: str) -> list[tuple[float, str, str]]:
        """(time, kind, reason) of ``node``'s events, oldest first."""
        with self._errors("read"):
            return [tuple(row) for row in self._db.execute(
                "SELECT time, kind, reason FROM events WHERE node = ? ORDER BY time, rowid",
                (node,))]


def _by_time(row: tuple[Any, ...]) -> tuple[float, int]:
    return (row[3], row[0])


def _stored_key(key: tuple[str, str, int | None, str]) -> tuple[str, str, int, str]:
    check, variant_, size, figure = key
    return (check, variant_, _NO_SIZE if size is None else size, figure)


def _why(err: BaseException) -> str:
    """An OSError's or SQLite's words, one line."""
    text = getattr(err, "strerror", None) or str(err) or type(err).__name__
    return " ".join(str(text).split())
