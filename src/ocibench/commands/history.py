"""Every node's figures over time: a table, or a page beside the cluster's median (docs/history.md).

``ocibench history [--node N] [--check C] [--since WHEN]`` prints each node's newest
figures (with --node: every value of that node, oldest first); ``--html FILE`` writes
one page with each figure over time beside the cluster's median, the documented figure
and the floor.  ``ocibench history add REPORT...`` adds ReFrame runs to the history
(``ocibench sweep`` adds its own).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from ocibench import benchmarks, hostnames, paths

_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400}


def since(text: str, now: float | None = None) -> float:
    """--since: an ISO date or time (UTC unless it says), or an age: 12h, 30d, 2w."""
    found = re.fullmatch(r"(\d+)([hdw])", text.strip())
    if found:
        return (time.time() if now is None else now) - int(found.group(1)) * _UNITS[found.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a date (2026-01-31, 2026-01-31T12:00) nor an age "
            "(12h, 30d, 2w)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def _db_option(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--db", type=Path, default=default, metavar="FILE",
                        help="the history (default $OCIBENCH_HISTORY_DB, else "
                             "<cache>/history.sqlite)")


def register(parser: argparse.ArgumentParser) -> None:
    _db_option(parser, None)
    parser.add_argument("--node", metavar="NODE", help="one node: every value, oldest first")
    parser.add_argument("--check", metavar="CHECK", help="one check (osu_bw, stream, ...)")
    parser.add_argument("--since", type=since, metavar="WHEN",
                        help="values at or after WHEN: a date (2026-01-31, UTC) or an age "
                             "(12h, 30d, 2w)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="write the figures over time as one offline HTML page")
    sub = parser.add_subparsers(dest="action", metavar="{add,publish}")
    add = sub.add_parser("add", help="add ReFrame runs (their JSON run reports) to the history")
    add.add_argument("reports", nargs="+", type=Path, metavar="REPORT",
                     help="a ReFrame JSON run report (--report-file)")
    _db_option(add, argparse.SUPPRESS)
    publish = sub.add_parser("publish", help="write every node's snapshot for the "
                             "healthcheck afresh (each sweep and `add` publish theirs)")
    publish.add_argument("nodes", nargs="*", metavar="NODE",
                         help="only these nodes (default: every node of the history)")
    _db_option(publish, argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from ocibench.history.current import PublishError
    from ocibench.history.store import HistoryError

    args.db = args.db or paths.history_db()
    try:
        if args.action == "add":
            return _add(args)
        if args.action == "publish":
            return _publish(args)
        return _show(args)
    except (HistoryError, PublishError) as err:
        return _usage(str(err))


def _usage(message: str) -> int:
    print(f"ocibench history: {message}", file=sys.stderr)
    return 2


# --------------------------------------------------------------------------- add

def _add(args: argparse.Namespace) -> int:
    from ocibench.history import current, runs

    found, sessions = [], []
    for path in args.reports:
        try:
            records, unplaced = runs.read(path)
        except runs.UNREADABLE as err:
            return _usage(str(err))
        for name in unplaced:
            print(f"ocibench history: {path}: {name}: no node named (no job_nodelist, no "
                  "provenance host): not kept", file=sys.stderr)
        found += records
        sessions.append((path, records))
    # all reports, one transaction; their nodes' snapshots published for the healthcheck
    added = current.add(args.db, found, "history add")
    for path, records in sessions:
        session = records[0].session if records else "-"
        print(f"{path}: {len(records)} figure(s) of {len({r.node for r in records})} "
              f"node(s), session {session}")
    print(f"{args.db}: {added} added, {len(found) - added} already kept")
    return 0


def _publish(args: argparse.Namespace) -> int:
    from ocibench.history import current

    bad = next((hostnames.why_not(n) for n in args.nodes if hostnames.why_not(n)), None)
    if bad:
        return _usage(f"NODE {bad}")
    written = current.publish_all(args.db, args.nodes or None)
    print(f"{current.directory(args.db)}: {written} node snapshot(s) published")
    return 0


# --------------------------------------------------------------------------- show

COLUMNS = ("node", "check", "variant", "size", "figure", "value", "unit", "documented",
           "floor", "verdict", "time (UTC)", "session")


def _show(args: argparse.Namespace) -> int:
    from ocibench.history.store import History

    if args.node is not None and hostnames.why_not(args.node):
        return _usage(f"--node {hostnames.why_not(args.node)}")
    if args.check is not None and args.check not in benchmarks.CHECKS:
        return _usage(f"--check {args.check}: unknown check; known: "
                      f"{', '.join(benchmarks.CHECKS)}")
    with History(args.db, readonly=True) as history:
        nodes = history.nodes()
        if args.node is not None and args.node not in nodes:
            shown = ", ".join(nodes[:5]) + (", ..." if len(nodes) > 5 else "")
            return _usage(f"--node {args.node}: no such node in {args.db} "
                          f"({len(nodes)} node(s): {shown or 'none'})")
        if args.html is not None:
            return _page(args, history)
        if args.node is not None:
            records = history.history(args.node, args.check, args.since)
        else:   # the fleet's newest, read session by session (not node by node)
            records = [r for r in history.newest(args.check)
                       if args.since is None or r.time >= args.since]
    print(_table(records))
    if not records:
        print("ocibench history: no figure matches", file=sys.stderr)
    return 0


def _page(args: argparse.Namespace, history) -> int:
    try:  # here, not at the top: every ocibench command imports this module
        from ocibench.pages.output import OutputError, write
        from ocibench.report import history as page
    except ModuleNotFoundError as err:
        if err.name != "jinja2":   # the pages' charts are SVG: no matplotlib
            raise
        return _usage(f"the page needs {err.name}: pip install 'ocibench[report]'")
    if args.node is not None:
        done = page.node_page(history, args.node, args.check, args.since, args.db)
    else:
        done = page.cluster_page(history, args.check, args.since, args.db)
    try:
        write(args.html, done.text)   # a reader sees the old page or the new
    except OutputError as err:
        return _usage(str(err))
    print(f"{args.html}: {done.figures} figure(s) of {done.nodes} node(s)")
    return 0


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(records) -> str:
    lines = [COLUMNS] + [
        (r.node, r.check, r.variant or "-", "-" if r.size is None else str(r.size), r.figure,
         _number(r.value), r.unit, _number(r.documented), _number(r.floor), r.verdict,
         datetime.fromtimestamp(r.time, timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
         r.session) for r in records]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                     for line in lines)

