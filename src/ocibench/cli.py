"""The ``ocibench`` command: one sub-command per module in ocibench.commands."""

from __future__ import annotations

import argparse
import importlib
import sys

from ocibench.shapes import ShapeError

#: sub-command name -> module in ocibench.commands (each has register() and run()).
COMMANDS = {
    "shape": "shape",
    "spack-config": "spack_config",
    "evaluate": "evaluate",
    "report": "report",
    "audit-modules": "audit_modules",
    "preflight": "preflight",
    "sweep": "sweep",
    "history": "history",
    "healthcheck": "healthcheck",
    "ticket": "ticket",
    "metrics": "metrics",
    "placement": "placement",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ocibench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(f"ocibench.commands.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"ocibench.commands.{module}":
                raise
            continue  # a command whose module is not there yet is simply absent
        mod.register(sub.add_parser(name, help=mod.__doc__.splitlines()[0]))
        sub.choices[name].set_defaults(handler=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except ShapeError as err:
        print(f"ocibench: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `ocibench ... | head`: the reader left; say nothing more, as cat would.
        sys.stderr.close()
        return 141


if __name__ == "__main__":
    sys.exit(main())
