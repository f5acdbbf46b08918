#!/usr/bin/env python3
"""ReFrame's start-up: how long ``reframe -C site/reframe_config.py -c checks/ -l`` takes
before it lists the checks (docs/checks.md, "Start-up").

The listing builds the whole configuration (every shape file: systems, partitions,
environments) and loads every check (their parameters read the shapes too): what every
``reframe`` command pays before its first test runs.  Measured over ROUNDS rounds, each
listing a fresh process as an admin runs it, on the ``local`` shape (its machine probe
included), alternating A (the git revision ``--against``, default ``main``, exported to a
temporary directory) and B (this checkout), so that both see the same machine load.
Prints the median and the spread of each, and, from one more listing of each (not
timed), how many times the shape files' YAML was parsed.

    python3 scripts/bench-reframe-start.py [--rounds 7] [--against main]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Run ReFrame after wrapping ocibench.shapes._parse (where a shape file's YAML is
#: parsed, in both revisions): every parse appends the file's name to $PARSE_LOG.
COUNTING = """
import os, runpy, sys
import ocibench.shapes as shapes
real = shapes._parse
def counted(*args, **kwargs):
    with open(os.environ["PARSE_LOG"], "a") as log:
        log.write(str(args[1]) + "\\n")
    return real(*args, **kwargs)
shapes._parse = counted
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def export(ref: str, into: Path) -> Path:
    """The tree of git revision ``ref`` under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def listing(tree: Path, work: Path, exe: str, log: Path | None = None) -> float:
    """Seconds one ``reframe -l`` of ``tree`` takes (a fresh process)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RFM_") and k not in ("OCIBENCH_SHAPES_DIR", "PYTHONPATH")}
    env.update(OCIBENCH_SHAPE="local", PYTHONPATH=str(tree / "src"),
               OCIBENCH_PERFLOG_DIR=str(work / "perflogs"),
               OCIBENCH_REPORT_DIR=str(work / "reports"))
    command = [exe, "-C", str(tree / "site" / "reframe_config.py"), "-c", str(tree / "checks"),
               "--nocolor", "--prefix", str(work), "-l"]
    if log is not None:
        env["PARSE_LOG"] = str(log)
        command = [sys.executable, "-c", COUNTING, *command]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=tree, env=env)
    spent = time.perf_counter() - started
    if done.returncode != 0 or "Found" not in done.stdout:
        sys.exit(f"bench-reframe-start: the listing of {tree} failed:\n"
                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return spent


def parses(tree: Path, work: Path, exe: str) -> tuple[int, int]:
    """(YAML parses of shape files, distinct files) in one listing of ``tree``."""
    log = work / "parses.log"
    log.unlink(missing_ok=True)
    listing(tree, work, exe, log)
    counted = collections.Counter(log.read_text().split())
    return sum(counted.values()), len(counted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--against", metavar="REF", default="main",
                        help="the git revision measured as A (default: main)")
    args = parser.parse_args()
    exe = shutil.which("reframe")
    if not exe:
        sys.exit("bench-reframe-start: reframe is not on PATH")
    with tempfile.TemporaryDirectory(prefix="bench-reframe-") as tmp:
        work = Path(tmp)
        trees = {f"A ({args.against[:12]})": export(args.against, work / "a"), "B (this)": REPO}
        times: dict[str, list[float]] = {name: [] for name in trees}
        for tree in trees.values():   # a first listing of each, not timed: warm caches
            listing(tree, work, exe)
        for _ in range(args.rounds):
            for name, tree in trees.items():
                times[name].append(listing(tree, work, exe))
        print(f"reframe -c checks/ -l on shape local, {args.rounds} rounds, "
              f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        for name, tree in trees.items():
            spent = sorted(times[name])
            count, files = parses(tree, work, exe)
            print(f"  {name:<16} median {statistics.median(spent):6.2f} s  "
                  f"(min {spent[0]:.2f}, max {spent[-1]:.2f})  "
                  f"shape files parsed {count} times for {files} files")


if __name__ == "__main__":
    main()
