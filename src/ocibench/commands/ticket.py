"""Build the evidence archive for a support ticket about NODE (run on the node itself).

One gzip'd tar, ``ocibench-ticket-NODE.tar.gz``: a one-page summary.txt to paste into
the ticket (the next step on the action ladder, OCI's fault codes, each failure with its
evidence and the commands that show it), the healthcheck's state, the preflight report,
``nvidia-smi -q`` or ``amd-smi``, the kernel log's GPU/NIC/PCIe lines, ``ibstat`` and the
RDMA counters, the versions, and the failing benchmark outputs given with ``--output``.
Nothing secret, size-capped, the same bytes for the same inputs.  Exit status 0 when
written, 2 on a bad input (one line naming it).  See docs/ladder.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ocibench import hostnames, shapes
from ocibench.health import state, ticket


def _output(text: str) -> tuple[str, Path]:
    check, sep, path = text.partition("=")
    if not sep or not check or not path:
        raise argparse.ArgumentTypeError(f"{text!r} is not CHECK=FILE")
    return check, Path(path)


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node", metavar="NODE", help="the node the ticket is about")
    parser.add_argument("--shape", help="its shape (default: this machine's)")
    parser.add_argument("--state", type=Path, metavar="FILE",
                        help="the healthcheck's state file (default: the healthcheck's)")
    parser.add_argument("--preflight", type=Path, metavar="FILE",
                        help="a `preflight --json` report (default: preflight runs now)")
    parser.add_argument("--output", type=_output, action="append", default=[],
                        metavar="CHECK=FILE", help="a failing benchmark's output (repeatable)")
    parser.add_argument("--root", type=Path, default=Path("/"), metavar="DIR",
                        help="the filesystem root whose sys/, proc/ and dev/ are read")
    parser.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                        help="where the archive is written (default: here)")
    parser.add_argument("--max-bytes", type=int, default=ticket.MAX_BYTES, metavar="N",
                        help=f"the archive's size cap (default {ticket.MAX_BYTES})")
    parser.add_argument("--mtime", type=int, metavar="EPOCH",
                        help="the members' time (default: $SOURCE_DATE_EPOCH, else the "
                             "healthcheck's last run, else 0)")


def run(args: argparse.Namespace) -> int:
    def bad(message: str) -> int:
        print(f"ocibench ticket: {message}", file=sys.stderr)
        return 2

    if not hostnames.is_host(args.node):
        return bad(f"NODE {hostnames.why_not(args.node)}")
    if not args.out.is_dir():
        return bad(f"--out {args.out}: not a directory")
    if not args.root.is_dir():
        return bad(f"--root {args.root}: not a directory")
    if args.max_bytes < 64 * 1024:
        return bad(f"--max-bytes {args.max_bytes}: less than 65536 holds no ticket")
    try:
        shape = shapes.load(args.shape) if args.shape else shapes.load(shapes.detect())
    except shapes.ShapeError as err:
        if args.shape:
            return bad(str(err))
        shape = None   # recorded as unknown in the summary
    state_path = args.state if args.state is not None else state.default_path()
    inputs = ticket.Inputs(node=args.node, shape=shape, root=args.root,
                           state_path=state_path, preflight_path=args.preflight,
                           outputs=args.output, max_bytes=args.max_bytes)
    try:
        collected = ticket.collect(inputs)
        mtime = args.mtime
        if mtime is None:
            epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
            mtime = int(epoch) if epoch.isdigit() else ticket.health_time(state_path)
    except ticket.TicketError as err:
        return bad(str(err))
    data = ticket.archive(collected, args.node, mtime)
    path = args.out / f"ocibench-ticket-{args.node}.tar.gz"
    try:
        ticket.write(path, data)
    except OSError as err:
        return bad(f"{path}: {err.strerror}")
    print(dict(collected.members)["summary.txt"].decode(), end="")
    print(f"written: {path} ({len(data)} bytes)")
    return 0
