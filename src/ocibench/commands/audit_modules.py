"""Audit Lmod module trees: nobody but root and the caller may change what Lmod would
load from them (ocibench.node.module_audit).

Exit status: 0 every tree is safe; 1 a problem (each printed on one line naming its
path: a file or directory writable by group or others, owned by another user than
root and the caller, a directory on the way that others may write without the sticky
bit, something unreadable, a dangling link, a loop); 2 a usage error (a PATH that does
not exist, an empty or unknown --shape).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ocibench import paths, shapes
from ocibench.node import module_audit


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="trees to audit (default: the shape's tree and $MODULEPATH)")
    parser.add_argument("--shape", help="whose tree is the default (default: this machine's)")


def run(args: argparse.Namespace) -> int:
    if args.paths:
        # lexists: a dangling link or a loop of links is the audit's to report
        missing = [p for p in args.paths if not os.path.lexists(p)]
        if missing:
            print(f"ocibench audit-modules: no such file or directory: {missing[0]}",
                  file=sys.stderr)
            return 2
        trees = [Path(p) for p in args.paths]
    else:
        if args.shape is not None and not args.shape.strip():
            print("ocibench audit-modules: --shape is empty: give a shape name "
                  "(ocibench shape --list)", file=sys.stderr)
            return 2
        shape = args.shape or shapes.detect()
        shapes.shape_path(shape)   # an unknown name: ShapeError, exit 2 (ocibench.cli)
        trees = [paths.module_root(shape)] + module_audit.modulepath_entries()
        if not trees[0].exists():
            print(f"note: {trees[0]} (the tree of {shape}) does not exist yet")
    problems = module_audit.audit(trees)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s) in " + ", ".join(str(t) for t in trees)
          if problems else "safe: " + ", ".join(str(t) for t in trees))
    return 1 if problems else 0
