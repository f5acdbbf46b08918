"""Export the figures and the healthcheck as Prometheus metrics (node_exporter textfile collector).

The head node renders the history database (--history: every node's latest figures,
verdicts and drift flags); each node renders its own healthcheck state file
(--healthcheck: probe states and freshness).  --textfile replaces FILE atomically
(node_exporter reads *.prom files in its --collector.textfile.directory); without it
the text goes to stdout.  Exit status 0, or 2 with one line when a source cannot be
read or FILE cannot be written (FILE is then left as it was).  See docs/monitoring.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ocibench import paths
from ocibench.health import export
from ocibench.health import state as health_state

#: "--history" / "--healthcheck" given with no path: the default one, found at run time.
DEFAULT = Path("")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--textfile", type=Path, metavar="FILE",
                        help="write the metrics to FILE, atomically (a *.prom file in "
                             "node_exporter's textfile directory); default: stdout")
    parser.add_argument("--history", type=Path, nargs="?", const=DEFAULT, metavar="DB",
                        help="export every node's latest figures and drift flags from the "
                             "history database (default DB: $OCIBENCH_HISTORY_DB, else the "
                             "cache's history.sqlite)")
    parser.add_argument("--healthcheck", type=Path, nargs="?", const=DEFAULT, metavar="STATE",
                        help="export this node's healthcheck state file (default STATE: "
                             "$OCIBENCH_HEALTH_STATE, else /var/lib/ocibench/healthcheck.json "
                             "as root, else the cache's healthcheck.json)")


def run(args: argparse.Namespace) -> int:
    if args.history is None and args.healthcheck is None:
        print("ocibench metrics: say what to export: --history [DB] (the head node) and/or "
              "--healthcheck [STATE] (each node)", file=sys.stderr)
        return 2
    families, notes = [], []
    try:
        if args.history is not None:
            db = paths.history_db() if args.history == DEFAULT else args.history
            found, notes = export.from_history(db)
            families += found
        if args.healthcheck is not None:
            path = health_state.default_path() if args.healthcheck == DEFAULT \
                else args.healthcheck
            families += export.from_state(path)
        text = export.render(families)
        if args.textfile is None:
            sys.stdout.write(text)
        else:
            export.write_textfile(text, args.textfile)
    except (export.ExportError, health_state.StateError) as err:
        print(f"ocibench metrics: {err}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"ocibench metrics: {note}", file=sys.stderr)
    return 0
