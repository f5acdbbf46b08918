"""The Python packages the tools need, read from pyproject.toml (their one list).

`make setup` and `make test` install what is missing of them, and never this project
itself: every script, test and `spack env activate .` imports the checkout's own
``src/`` (PYTHONPATH), and its ``bin/ocibench`` is the command.  A `pip install -e .`
would point the one global ``ocibench`` at whichever clone ran it last.

    python3 -m ocibench.requirements [--missing] [EXTRA ...]

prints one requirement per line (all of them, or only those not installed).
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata

from ocibench.paths import REPO_ROOT

try:
    import tomllib
except ImportError:  # Python < 3.11: pip vendors the same parser
    from pip._vendor import tomli as tomllib  # type: ignore[no-redef]


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"ocibench.requirements: no extra {', '.join(unknown)} in pyproject.toml "
                         f"(known: {', '.join(optional)})")
    found = list(project.get("dependencies", []))
    for extra in extras:
        found += optional[extra]
    return found


def installed(requirement: str) -> bool:
    """True when a distribution satisfying `requirement` is installed."""
    name = re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0]
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    try:
        from packaging.requirements import Requirement
    except ImportError:  # without packaging, presence is all that can be told
        return True
    return Requirement(requirement).specifier.contains(version, prereleases=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m ocibench.requirements")
    parser.add_argument("--missing", action="store_true", help="only those not installed")
    parser.add_argument("extras", nargs="*", help="optional-dependency groups (test, report)")
    args = parser.parse_args(argv)
    for req in requirements(args.extras):
        if not (args.missing and installed(req)):
            print(req)
    return 0


if __name__ == "__main__":
    sys.exit(main())
