"""Print the shape this machine is (or list the known shapes, describe or check them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from ocibench import shapes


def register(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="list the known shapes")
    group.add_argument("--show", metavar="SHAPE", help="print a shape's facts as YAML")
    group.add_argument(
        "--check", nargs="*", metavar="FILE",
        help="validate every shape file (or the FILEs named) against site/shapes/schema.json "
             "and the rules across fields: one line per file; exit 0 when all are valid, "
             "1 otherwise")


def run(args: argparse.Namespace) -> int:
    if args.check is not None:
        return check(args.check)
    if args.list:
        # Names only, nothing loaded: a broken file is still listed (--check says why).
        print("\n".join(shapes.known_shapes()))
    elif args.show:
        print(yaml.safe_dump(shapes.load(args.show).data, sort_keys=False), end="")
    else:
        print(shapes.detect())
    return 0


def check(files: list[str]) -> int:
    """One line per shape file, 'NAME: ok' or its error; 0 all valid, 1 any not, 2 usage."""
    paths = [Path(f) for f in files] or sorted(shapes.shapes_dir().glob("*.yaml"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"ocibench: shape --check: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not paths:
        print(f"ocibench: shape --check: no shape files in {shapes.shapes_dir()}",
              file=sys.stderr)
        return 2
    broken = 0
    for path in paths:
        try:
            shapes.load_file(path)
        except shapes.ShapeError as err:
            print(err)
            broken += 1
        else:
            print(f"{path.name}: ok")
    return 1 if broken else 0
