"""The per-node results store: every judged figure of every node, kept (docs/history.md).

One SQLite file (the standard library's ``sqlite3``; no server), written by ``ocibench
sweep`` and ``ocibench history add``, read by ``ocibench history``, the drift flag and
the healthcheck.  :class:`Record` is one figure of one node in one session (a sweep or
a ReFrame run); adding a session again adds nothing (each figure of a node is kept once
per session).

**Layout.**  Rows repeat a few names (node, check, variant, figure) millions of times,
so each distinct figure of a node is one row of ``series`` and each of its values one
row of ``results``, keyed ``(series, session)`` in a WITHOUT ROWID table: one node's
history of one figure lies together on disk, and reading a node's year (50 figures x
365 sweeps) reads a few hundred pages, not one page per value.  ``series`` has a unique
index on (node, check, variant, size, figure) and one on (check, variant, size, figure)
for the cluster's median; time is filtered within a series, whose rows are contiguous.
A size-less figure (STREAM, nvbandwidth) keeps size -1 in the file, since SQLite's
UNIQUE treats NULLs as distinct; :class:`Record` says None.

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
import sqlite3
import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocibench import metrics

#: ``PRAGMA application_id`` of an ocibench history ("ocbh"): another program's SQLite
#: file is not taken for ours (https://www.sqlite.org/pragma.html#pragma_application_id).
APPLICATION_ID = 0x6F636268
#: ``PRAGMA user_version``: the schema this module writes and reads.
SCHEMA_VERSION = 1
#: Seconds a writer waits for another writer's lock before it gives up.
BUSY_TIMEOUT_S = 60.0
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
CREATE TABLE sessions (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
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
    PRIMARY KEY (series, session)
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
    """Every field of a record of the right type: one line naming the record's field."""
    where = f"record {index}"
    if not isinstance(record, Record):
        raise HistoryError(f"{where}: {type(record).__name__} is not a history Record")
    for name in ("node", "check", "figure", "unit", "verdict", "session"):
        text = getattr(record, name)
        if not isinstance(text, str) or not text.strip():
            raise HistoryError(f"{where}.{name}: {text!r} is not a non-empty string")
    if not isinstance(record.variant, str):
        raise HistoryError(f"{where}.variant: {record.variant!r} is not a string")
    if record.size is not None and (not isinstance(record.size, int)
                                    or isinstance(record.size, bool) or record.size < 0):
        raise HistoryError(f"{where}.size: {record.size!r} is not a message size in bytes")
    for name in ("value", "time"):
        if not metrics.is_number(getattr(record, name)):
            raise HistoryError(f"{where}.{name}: {getattr(record, name)!r} is not a finite "
                               "number")
    for name in ("documented", "floor"):
        value = getattr(record, name)
        if value is not None and not metrics.is_number(value):
            raise HistoryError(f"{where}.{name}: {value!r} is not a finite number")
    for name in ("image", "driver"):
        value = getattr(record, name)
        if value is not None and not isinstance(value, str):
            raise HistoryError(f"{where}.{name}: {value!r} is not a string")


class History:
    """One history file; a context manager (closed on exit)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly and not self.path.is_file():
            raise HistoryError(f"{self.path}: no history there (nothing was added yet)")
        try:
            if not readonly:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            uri = self.path.resolve().as_uri() + ("?mode=ro" if readonly else "")
            # isolation_level=None: transactions are this module's own BEGIN/COMMIT.
            self._db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S,
                                       isolation_level=None)
        except (OSError, sqlite3.Error) as err:
            raise HistoryError(f"{self.path}: cannot open: {_why(err)}") from None
        try:
            self._open()
        except HistoryError:
            self._db.close()
            raise

    def _open(self) -> None:
        """Check the file is ours and of a schema this module reads; create it when it
        is an empty file (a new history)."""
        try:
            app = self._db.execute("PRAGMA application_id").fetchone()[0]
        except sqlite3.DatabaseError as err:   # "file is not a database"
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
            sessions = self._ids("sessions", "name", {r.session for r in records})
            software = self._software_ids({(r.image or "", r.driver or "") for r in records})
            rows = []
            for record in records:
                sid, unit = series[(record.node, *_stored_key(record.key))]
                try:
                    value, documented, floor = (
                        None if v is None else metrics.convert(v, record.unit, unit)
                        for v in (record.value, record.documented, record.floor))
                except metrics.UnknownMetric as err:
                    raise HistoryError(f"{self.path}: {record.node} {record.check} "
                                       f"{record.figure}: kept in {unit}, given in "
                                       f"{record.unit}: {err}") from None
                rows.append((sid, sessions[record.session], record.time, value,
                             record.verdict, documented, floor,
                             software[(record.image or "", record.driver or "")]))
            cursor = self._db.executemany(
                "INSERT OR IGNORE INTO results (series, session, time, value, verdict, "
                "documented, floor, software) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            return cursor.rowcount

    def _series_ids(self, records: list[Record]) -> dict[tuple[Any, ...], tuple[int, str]]:
        """(node, check, variant, stored size, figure) -> (series id, its unit), new
        series created with the unit of their first record."""
        wanted = {(r.node, *_stored_key(r.key)): r.unit for r in records}
        self._db.executemany(
            'INSERT OR IGNORE INTO series (node, "check", variant, size, figure, unit) '
            "VALUES (?, ?, ?, ?, ?, ?)", [(*k, u) for k, u in wanted.items()])
        # The ids through a temporary table joined on the unique index: one query for
        # a sweep's 50,000 series, not 50,000.
        self._db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted "
                         '(node TEXT, "check" TEXT, variant TEXT, size INTEGER, figure TEXT)')
        self._db.execute("DELETE FROM temp.wanted")
        self._db.executemany("INSERT INTO temp.wanted VALUES (?, ?, ?, ?, ?)", list(wanted))
        found = self._db.execute(
            'SELECT s.node, s."check", s.variant, s.size, s.figure, s.id, s.unit '
            "FROM temp.wanted w JOIN series s ON s.node = w.node AND s.\"check\" = w.\"check\" "
            "AND s.variant = w.variant AND s.size = w.size AND s.figure = w.figure")
        return {tuple(row[:5]): (row[5], row[6]) for row in found}

    def _ids(self, table: str, column: str, names: set[str]) -> dict[str, int]:
        self._db.executemany(f"INSERT OR IGNORE INTO {table} ({column}) VALUES (?)",
                             [(n,) for n in names])
        return {n: self._db.execute(f"SELECT id FROM {table} WHERE {column} = ?",
                                    (n,)).fetchone()[0] for n in names}

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
        if not isinstance(node, str) or not node.strip():
            raise HistoryError(f"event node {node!r}: not a node name")
        if not metrics.is_number(time):
            raise HistoryError(f"event time {time!r}: not a finite number")
        if self.readonly:
            raise HistoryError(f"{self.path}: opened read-only")
        with self._errors("write"), self._transaction():
            self._db.execute("INSERT INTO events (node, time, kind, reason, session) "
                             "VALUES (?, ?, ?, ?, ?)", (node, time, kind, reason, session))

    # ------------------------------------------------------------------ reading

    _SELECT = ('SELECT s.node, s."check", s.variant, s.size, s.figure, r.value, s.unit, '
               "r.verdict, r.time, n.name, r.documented, r.floor, w.image, w.driver "
               "FROM results r JOIN series s ON s.id = r.series "
               "JOIN sessions n ON n.id = r.session JOIN software w ON w.id = r.software ")

    def _records(self, where: str, args: tuple[Any, ...]) -> list[Record]:
        with self._errors("read"):
            rows = self._db.execute(self._SELECT + where, args).fetchall()
        return [Record(node, check, variant_, None if size == _NO_SIZE else size, figure,
                       value, unit, verdict, time, session, documented, floor,
                       image or None, driver or None)
                for (node, check, variant_, size, figure, value, unit, verdict, time, session,
                     documented, floor, image, driver) in rows]

    def latest(self, node: str) -> list[Record]:
        """The newest record of each figure of ``node`` (check, variant, size, figure)."""
        return self._records(
            "WHERE s.node = ? AND r.session = (SELECT session FROM results "
            "WHERE series = s.id ORDER BY time DESC, session DESC LIMIT 1) "
            'ORDER BY s."check", s.variant, s.size, s.figure',
            (node,))

    def history(self, node: str, check: str | None = None,
                since: float | None = None) -> list[Record]:
        """Every record of ``node`` (of one check, at or after ``since``), by figure
        and time: what ``ocibench history --node`` reads."""
        where, args = "WHERE s.node = ?", [node]
        if check is not None:
            where, args = where + ' AND s."check" = ?', args + [check]
        if since is not None:
            where, args = where + " AND r.time >= ?", args + [since]
        return self._records(where + ' ORDER BY s."check", s.variant, s.size, s.figure, '
                             "r.time", tuple(args))

    def series(self, node: str, check: str, variant: str, size: int | None, figure: str,
               since: float | None = None) -> list[Record]:
        """One figure of one node over time, oldest first (at or after ``since``)."""
        args: tuple[Any, ...] = (node, *_stored_key((check, variant, size, figure)),
                                 -math.inf if since is None else since)
        return self._records(
            'WHERE s.node = ? AND s."check" = ? AND s.variant = ? AND s.size = ? '
            "AND s.figure = ? AND r.time >= ? ORDER BY r.time", args)

    def cluster_median(self, check: str, variant: str, size: int | None, figure: str,
                       since: float | None = None) -> float | None:
        """The median over nodes of each node's newest value of the figure (at or after
        ``since``): each node counts once, however often it was swept.  None when no
        node has one."""
        key = _stored_key((check, variant, size, figure))
        with self._errors("read"):
            values = [v for (v,) in self._db.execute(
                "SELECT (SELECT r.value FROM results r WHERE r.series = s.id AND r.time >= ? "
                "ORDER BY r.time DESC LIMIT 1) FROM series s "
                'WHERE s."check" = ? AND s.variant = ? AND s.size = ? AND s.figure = ?',
                (-math.inf if since is None else since, *key)) if v is not None]
        return statistics.median(values) if values else None

    def cluster_medians(self, check: str, variant: str, size: int | None, figure: str,
                        since: float | None = None) -> list[tuple[float, float]]:
        """(time, median) per session of the figure, over the nodes that session
        measured, oldest first; a session's time is its earliest record's."""
        key = _stored_key((check, variant, size, figure))
        with self._errors("read"):
            rows = self._db.execute(
                "SELECT r.session, r.time, r.value FROM results r JOIN series s "
                'ON s.id = r.series WHERE s."check" = ? AND s.variant = ? AND s.size = ? '
                "AND s.figure = ? AND r.time >= ?",
                (*key, -math.inf if since is None else since)).fetchall()
        sessions: dict[int, tuple[float, list[float]]] = {}
        for session, time, value in rows:
            start, values = sessions.setdefault(session, (time, []))
            sessions[session] = (min(start, time), values)
            values.append(value)
        return sorted((start, statistics.median(values))
                      for start, values in sessions.values())

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


def _stored_key(key: tuple[str, str, int | None, str]) -> tuple[str, str, int, str]:
    check, variant_, size, figure = key
    return (check, variant_, _NO_SIZE if size is None else size, figure)


def _why(err: BaseException) -> str:
    """An OSError's or SQLite's words, one line."""
    text = getattr(err, "strerror", None) or str(err) or type(err).__name__
    return " ".join(str(text).split())
