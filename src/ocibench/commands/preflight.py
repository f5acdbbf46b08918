"""Probe this node and compare it with its shape (GPUs, links, kernel modules, UCX, Open MPI).

One line per item: present, absent, unexpected or unknown, with the evidence.  Exit
status: 0 when the node has everything the shape requires; 1 (naming each missing
item on stderr) when it lacks something; 3 when nothing required is missing but a
required item could not be read (unknown: neither present nor absent, named on
stderr); 2 on a usage error.  See docs/preflight.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ocibench import shapes
from ocibench.node import preflight


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", help="the shape to compare with (default: this machine's)")
    parser.add_argument("--json", action="store_true", help="print the items as JSON")
    parser.add_argument("--root", type=Path, default=Path("/"), metavar="DIR",
                        help="the filesystem root whose sys/, proc/ and dev/ are probed "
                             "(default: /)")


def run(args: argparse.Namespace) -> int:
    if not args.root.is_dir():
        print(f"ocibench preflight: --root {args.root}: not a directory", file=sys.stderr)
        return 2
    try:
        shape = shapes.load(args.shape or shapes.detect())
    except shapes.ShapeError as err:
        print(f"ocibench preflight: {err}", file=sys.stderr)
        return 2
    result = preflight.preflight(shape, args.root)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(f"preflight of this node against {result.shape}")
        print("\n".join(item.line() for item in result.items))
        # what to do about each missing item: its entry of the action ladder
        for step in result.next_steps():
            print(f"next for {step['item']}: {step['step']} {step['fault']}: {step['fix']}")
    if result.missing:
        print(f"ocibench preflight: FAIL: {result.shape} requires what this node lacks: "
              + ", ".join(f"{i.name} ({i.status})" for i in result.missing), file=sys.stderr)
        return 1
    if result.undecided:
        print(f"ocibench preflight: UNJUDGED: could not tell whether this node has what "
              f"{result.shape} requires: "
              + "; ".join(f"{i.name} unknown ({i.detail})" for i in result.undecided),
              file=sys.stderr)
        return 3
    return 0
