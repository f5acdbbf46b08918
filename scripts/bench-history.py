#!/usr/bin/env python3
"""The history store at a cluster's scale (docs/history.md, "Scale").

Builds a history of NODES nodes x FIGURES figures x DAYS daily sweeps (1,000 x 50 x
365, about 18 M values, by default), then measures what a cluster does with it:

* inserting one sweep (every node's every figure, one session) through
  ``History.add``, as ``ocibench sweep`` does;
* reading one node's history (every figure, every day) through ``History.history``,
  as ``ocibench history --node`` does, from a freshly opened file;

each ROUNDS times, and prints the median, the spread and the file's size.

The build is a bulk load, not DAYS calls of ``History.add``: the series and sessions are
created through ``History.add`` (one day), then the remaining days are written straight
into the results table in its key order (session, series) with executemany in large
transactions, and their summaries computed (``History.summarise``), which takes minutes
instead of hours.  The file is the same as the one the daily sweeps would have left.
scripts/bench-pages.py measures the pages and the export on it.

    PYTHONPATH=$PWD/src python3 scripts/bench-history.py --db /tmp/h.sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

from ocibench.history.store import History, Record

DAY = 86400.0
START = 1_767_225_600.0   # 2026-01-01 UTC
#: Figures of a GPU node's sweep: checks, variants, sizes and figure names like the
#: real ones (osu_bw at several sizes, nccl columns, STREAM kernels, nvbandwidth).
_CHECKS = (("osu_bw", "buffers=D-D nodes=2", "bandwidth", "MB/s", 24000.0),
           ("osu_latency", "buffers=D-D nodes=2", "latency", "us", 2.5),
           ("nccl_all_reduce_perf", "nodes=1", "out_of_place", "GB/s", 480.0),
           ("ib_write_bw", "nodes=2", "bandwidth", "Gb/s", 390.0),
           ("stream", "", "Triad", "MB/s", 1.2e6))


def figures(count: int) -> list[tuple[str, str, int | None, str, str, float]]:
    found = []
    for i in range(count):
        check, variant, figure, unit, base = _CHECKS[i % len(_CHECKS)]
        size = None if check == "stream" else 2 ** (i // len(_CHECKS) + 3)
        if check == "stream":
            figure = ("Copy", "Scale", "Add", "Triad")[(i // len(_CHECKS)) % 4]
            variant = f"threads={i // len(_CHECKS)}"
        found.append((check, variant, size, figure, unit, base))
    return found


def sweep(nodes: int, figs: list, day: int, rng: random.Random) -> list[Record]:
    # never ahead of the clock: History.add refuses a record stamped in the future
    # (the year built ends after today; the measured sweeps come after it)
    t = min(START + day * DAY, time.time() - nodes)
    return [Record(f"gpu-{n:04d}", check, variant, size, figure,
                   base * (1 + rng.gauss(0, 0.01)), unit, "pass", t + n, f"sweep-{day:04d}",
                   documented=base, floor=base * 0.9, image="Oracle-Linux-8.10-Gen2-GPU",
                   driver="550.127.08")
            for n in range(nodes) for check, variant, size, figure, unit, base in figs]


def build(path: Path, nodes: int, figs: list, days: int, rng: random.Random) -> float:
    started = time.perf_counter()
    with History(path) as history:
        history.add(sweep(nodes, figs, 0, rng))   # the series, session 1, software 1
        db = history._db   # the bulk load below writes the same tables History.add does
        series = [(sid, figs[(sid - 1) % len(figs)][5]) for (sid,) in
                  db.execute("SELECT id FROM series ORDER BY id")]
        rows: list[tuple] = []
        for d in range(1, days):   # in key order (session, series): appended
            t = START + d * DAY
            db.execute("BEGIN")
            session = db.execute("INSERT INTO sessions (name, time) VALUES (?, ?)",
                                 (f"sweep-{d:04d}", t + nodes)).lastrowid
            db.execute("COMMIT")
            rows += [(session, sid, t + (sid - 1) // len(figs),
                      base * (1 + rng.gauss(0, 0.01)), "pass", base, base * 0.9, 1)
                     for sid, base in series]
            if len(rows) >= 2_000_000 or d == days - 1:
                _write(db, rows)
                rows = []
                print(f"  day {d}/{days}", file=sys.stderr, flush=True)
        history.summarise()   # the summaries History.add keeps, of the bulk-loaded days
    return time.perf_counter() - started


def _write(db, rows) -> None:
    db.execute("BEGIN")
    db.executemany("INSERT INTO results (session, series, time, value, verdict, documented, "
                   "floor, software) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.execute("COMMIT")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="the history file to build")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--figures", type=int, default=50)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reuse", action="store_true",
                        help="measure an existing file built by an earlier run")
    args = parser.parse_args()
    rng = random.Random(23)
    figs = figures(args.figures)
    built = None
    if not args.reuse:
        if args.db.exists():
            args.db.unlink()
        built = build(args.db, args.nodes, figs, args.days, rng)
    with History(args.db, readonly=True) as history:
        rows_before = history._db.execute("SELECT count(*) FROM results").fetchone()[0]
        # new sessions after every one already there (a rerun with --reuse adds more)
        first = history._db.execute("SELECT count(*) FROM sessions").fetchone()[0] + 1000
    inserts, reads, series_reads, latest_reads, medians = [], [], [], [], []
    insert_cpu, read_cpu = [], []   # this process's CPU seconds: the share of a loaded machine
    for r in range(args.rounds):
        records = sweep(args.nodes, figs, first + r, rng)
        with History(args.db) as history:
            started, cpu = time.perf_counter(), time.process_time()
            added = history.add(records)
            inserts.append(time.perf_counter() - started)
            insert_cpu.append(time.process_time() - cpu)
        assert added == len(records), added
        node = f"gpu-{rng.randrange(args.nodes):04d}"
        started, cpu = time.perf_counter(), time.process_time()
        with History(args.db, readonly=True) as history:
            found = history.history(node)
        reads.append(time.perf_counter() - started)
        read_cpu.append(time.process_time() - cpu)
        check, variant, size, figure, _, _ = figs[r % len(figs)]
        started = time.perf_counter()
        with History(args.db, readonly=True) as history:
            one = history.series(node, check, variant, size, figure)
        series_reads.append(time.perf_counter() - started)
        started = time.perf_counter()
        with History(args.db, readonly=True) as history:
            newest = history.latest(node)
        latest_reads.append(time.perf_counter() - started)
        started = time.perf_counter()
        with History(args.db, readonly=True) as history:
            history.cluster_median(check, variant, size, figure)
        medians.append(time.perf_counter() - started)
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), "
                   f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "load_average": os.getloadavg(),
        "nodes": args.nodes, "figures": args.figures, "days": args.days,
        "rows": rows_before, "build_s": built, "rounds": args.rounds,
        "insert_sweep_s": {"median": statistics.median(inserts), "min": min(inserts),
                           "max": max(inserts), "cpu_median": statistics.median(insert_cpu),
                           "rows": len(records)},
        "read_node_s": {"median": statistics.median(reads), "min": min(reads),
                        "max": max(reads), "cpu_median": statistics.median(read_cpu),
                        "rows": len(found)},
        "read_series_s": {"median": statistics.median(series_reads), "rows": len(one)},
        "latest_node_s": {"median": statistics.median(latest_reads), "rows": len(newest)},
        "cluster_median_s": {"median": statistics.median(medians), "nodes": args.nodes},
        "db_bytes": args.db.stat().st_size,
    }
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
