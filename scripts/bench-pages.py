#!/usr/bin/env python3
"""The history's pages and the head node's export at a cluster's scale (docs/history.md,
"Pages at scale"; docs/monitoring.md, "Size").

On a history built by scripts/bench-history.py (1,000 nodes x 50 figures x 365 daily
sweeps by default), measures over ROUNDS rounds, each command a fresh process as an
admin runs it (the interpreter's start and imports included):

* ``ocibench history --node NODE --html FILE``: one node's page (a random node a round);
* ``ocibench history --html FILE``: the cluster's page;
* ``ocibench metrics --history DB --textfile FILE``: the head node's export;

and prints the median, the spread, the peak memory, and the share of each spent in
``drift.drifting_nodes`` (the drift module's pass; the rest is the store's reads, the
aggregation and the rendering).

A history of schema 1 (built by an older bench-history.py) is copied to WORK and
upgraded there (timed: what the first writer of this version does once); the original is
left as it was.  Before the rounds, every node's snapshot is published (``ocibench
history publish``, timed: what a sweep of the whole fleet does after its commit), as
the history of a cluster whose writers publish has them.  ``--against SRC`` runs the
same commands with another checkout's ``src`` (e.g. the previous release's), each under
``--timeout`` seconds: on a schema 2 history in every round, beside this one's (A
against B on the same data in one call, medians of the rounds); on a schema 1 history
once, on the original.

    PYTHONPATH=$PWD/src python3 scripts/bench-pages.py --db /tmp/h.sqlite \\
        [--against /tmp/ocibench-main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


# --------------------------------------------------------------------------- one command

def one(kind: str, db: Path, out: Path, node: str | None) -> dict:
    """Run one command in this process, with the drift pass (and the fleet's newest
    read, where it exists) timed; what a fresh process measures."""
    started = time.perf_counter()
    from ocibench import cli
    from ocibench.history import current, drift, store

    spent = {"drift_s": 0.0, "newest_s": 0.0}
    depth = {"drift_s": 0, "newest_s": 0}

    def timed(name, function):
        def wrapper(*args, **kwargs):
            depth[name] += 1   # a call within a timed call is counted once, outside
            begun = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                depth[name] -= 1
                if not depth[name]:
                    spent[name] += time.perf_counter() - begun
        return wrapper

    # Drift's entry points (each calls the others through the module's globals, so
    # the pass is counted once whichever a command calls): read (the one pass, with
    # what judges from it), drifting_nodes, cluster_events, of_node (a node's share of
    # a pass: its snapshot's, or a pass now); an older drift's drifting.
    # of_node sits beside the snapshots it reads (history.current) since it left drift.
    for module, name in ((drift, "read"), (drift, "drifting_nodes"),
                         (drift, "cluster_events"), (drift, "drifting"), (drift, "of_node"),
                         (current, "of_node")):
        if hasattr(module, name):
            setattr(module, name, timed("drift_s", getattr(module, name)))
    if hasattr(drift, "Fleet"):   # what is judged from the pass, after read returned it
        for name in ("drifting", "events"):
            setattr(drift.Fleet, name, timed("drift_s", getattr(drift.Fleet, name)))
    if hasattr(store.History, "newest"):
        store.History.newest = timed("newest_s", store.History.newest)
    argv = {"node": ["history", "--db", str(db), "--node", str(node), "--html", str(out)],
            "cluster": ["history", "--db", str(db), "--html", str(out)],
            "export": ["metrics", "--history", str(db), "--textfile", str(out)]}[kind]
    status = cli.main(argv)
    return {"status": status, "wall_s": time.perf_counter() - started, **spent,
            "bytes": out.stat().st_size if out.exists() else None,
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run(kind: str, db: Path, node: str | None, src: Path, timeout: float) -> dict:
    """One command as a fresh process with ``src`` on its path."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / ("page.html" if kind != "export" else "ocibench.prom")
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, str(HERE), "--one", kind, "--db", str(db), "--out", str(out)]
                + (["--node", node] if node else []), capture_output=True, text=True,
                timeout=timeout, env={**os.environ, "PYTHONPATH": str(src)})
        except subprocess.TimeoutExpired:
            return {"timed_out": timeout}
        took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{kind}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    found["process_s"] = took
    return found


def summary(found: list[dict]) -> dict:
    walls = [f["process_s"] for f in found]
    drifts = [f["drift_s"] for f in found]
    return {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "drift_median_s": statistics.median(drifts),
            "without_drift_median_s": statistics.median(w - d for w, d in zip(walls, drifts)),
            "newest_median_s": statistics.median(f["newest_s"] for f in found),
            "max_rss_mb": max(f["max_rss_mb"] for f in found),
            "bytes": statistics.median(f["bytes"] for f in found), "rounds": len(found)}


def summaries(found: dict[str, list[dict]], timeout: float) -> dict[str, dict]:
    return {kind: summary(runs) if all("timed_out" not in f for f in runs)
            else {"timed_out": timeout} for kind, runs in found.items()}


# --------------------------------------------------------------------------- the history

def publish(db: Path, src: Path) -> float:
    """``ocibench history publish`` on ``db`` with ``src``, as a fresh process: the
    seconds it took."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ocibench.cli", "history", "publish",
                           "--db", str(db)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(src)})
    if done.returncode != 0:
        raise SystemExit(f"history publish: exit {done.returncode}: {done.stderr.strip()}")
    return time.perf_counter() - started


def schema(db: Path) -> int:
    with sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True) as con:
        return con.execute("PRAGMA user_version").fetchone()[0]


def upgraded(db: Path, work: Path) -> tuple[Path, float | None]:
    """The history to measure: ``db`` itself when it is of this version's schema, else
    a copy at ``work`` upgraded by this version (and the seconds the upgrade took)."""
    from ocibench.history.store import SCHEMA_VERSION, History

    if schema(db) == SCHEMA_VERSION:
        return db, None
    if not work.exists() or schema(work) != SCHEMA_VERSION:
        shutil.copyfile(db, work)
        started = time.perf_counter()
        with History(work):   # a writer upgrades it
            pass
        return work, time.perf_counter() - started
    return work, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True,
                        help="a history built by scripts/bench-history.py")
    parser.add_argument("--work", type=Path, help="where a schema 1 history is copied and "
                        "upgraded (default: DB with .v2 before its suffix)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, metavar="SRC",
                        help="another checkout's src: its commands run once on the "
                             "schema 1 history, beside this one's")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one command may take (default 900)")
    parser.add_argument("--one", choices=("node", "cluster", "export"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--node", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        found = one(args.one, args.db, args.out, args.node)
        print(json.dumps(found))
        return found["status"]

    src = Path(__import__("ocibench").__file__).resolve().parent.parent
    load_before = os.getloadavg()
    work = args.work or args.db.with_name(args.db.stem + ".v2" + args.db.suffix)
    db, upgrade_s = upgraded(args.db, work)
    from ocibench.history.store import History

    with History(db, readonly=True) as history:
        nodes = history.nodes()
        rows = history._db.execute("SELECT count(*) FROM results").fetchone()[0]
    publish_s = publish(db, src)
    rng = random.Random(7)
    found: dict[str, list[dict]] = {"node": [], "cluster": [], "export": []}
    against: dict[str, list[dict]] = {kind: [] for kind in found}
    each_round = args.against is not None and db == args.db   # schema 2: A and B alike
    for _ in range(args.rounds):
        node = rng.choice(nodes)
        for kind in found:
            found[kind].append(run(kind, db, node if kind == "node" else None, src,
                                   args.timeout))
            if each_round:
                against[kind].append(run(kind, db, node if kind == "node" else None,
                                         args.against, args.timeout))
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), "
                   f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
        "history": str(db), "rows": rows, "nodes": len(nodes), "upgrade_s": upgrade_s,
        "publish_s": publish_s, **summaries(found, args.timeout),
    }
    if each_round:
        result["against"] = {"src": str(args.against), **summaries(against, args.timeout)}
    elif args.against:
        result["against"] = {"src": str(args.against), **{
            kind: run(kind, args.db, rng.choice(nodes) if kind == "node" else None,
                      args.against, args.timeout) for kind in found}}
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
