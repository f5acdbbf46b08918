"""Print the shape this machine is (or list the known shapes, or describe one)."""

from __future__ import annotations

import argparse

import yaml

from ocibench import shapes


def register(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="list the known shapes")
    group.add_argument("--show", metavar="SHAPE", help="print a shape's facts as YAML")


def run(args: argparse.Namespace) -> int:
    if args.list:
        print("\n".join(shapes.known_shapes()))
    elif args.show:
        print(yaml.safe_dump(shapes.load(args.show).data, sort_keys=False), end="")
    else:
        print(shapes.detect())
    return 0
