#!/usr/bin/env python3
"""The healthcheck's cost with the results history in place (docs/healthcheck.md, "Speed").

A benchmark, not a test: it judges nothing.  It builds a healthy fake BM.GPU4.8 node
(tests/health_fakes.py: 8 GPUs, NVLink, PCIe, 2 RDMA ports, a kernel log, and
stand-ins for nvidia-smi and systemctl) in a temporary directory, publishes the node's
snapshot of the history (ocibench.history.current; timed once), and runs
``ocibench healthcheck --dry-run`` RUNS times, each a new process as slurmd starts it,
against the history at --history.  With --baseline-src, the same runs of another
checkout's ``src`` (main's, before the snapshots) alternate with this one's, A against
B in one call, so that both see the same machine.  It prints, for each, the
percentiles of the wall time and the median CPU time (user + system, the child's own
rusage), and the last run's probes.

* ``--hang``: every tool hangs (the stand-ins sleep: a GPU fallen off the bus hangs
  nvidia-smi in the driver; systemctl too): what a run costs at worst.
* ``--writer``: a process holds the history's write lock through the runs, as a sweep
  does while it commits (the history's readers waited SQLite's 60 s busy timeout).
* ``--load N``: N busy processes beside the runs: a loaded node (or this 2-core
  machine, shared).
* ``--build``: first build the history at --history as scripts/bench-history.py does
  (1,000 nodes x 50 figures x 365 daily sweeps: 18.25 M values, about 820 MB).

    PYTHONPATH=$PWD/src python3 scripts/bench-healthcheck.py --history /tmp/h.sqlite --build
    PYTHONPATH=$PWD/src python3 scripts/bench-healthcheck.py --history /tmp/h.sqlite \\
        --runs 100 --baseline-src ../main/src --load 4
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))   # the fake node the tests use

from health_fakes import FakeNode  # noqa: E402
from ocibench.history import current  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def build(path: Path, nodes: int, figures: int, days: int) -> float:
    spec = importlib.util.spec_from_file_location("bench_history",
                                                  REPO / "scripts" / "bench-history.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path.unlink(missing_ok=True)
    return bench.build(path, nodes, bench.figures(figures), days, random.Random(23))


def run_once(src: Path, fake: FakeNode, node: str, history: Path, state: Path,
             deadline: float) -> tuple[float, float, int, str]:
    """One healthcheck process: (wall s, CPU s, exit status, its output)."""
    env = {"PATH": f"{fake.bin}:/usr/bin:/bin", "PYTHONPATH": str(src),
           "OCIBENCH_HEALTH_STATE": str(state), "LC_ALL": "C"}
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ocibench.cli", "healthcheck", "--dry-run", "--shape",
         "BM.GPU4.8", "--root", str(fake.root), "--node", node, "--history", str(history),
         "--deadline", f"{deadline:g}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=Path, required=True, help="the history file")
    parser.add_argument("--build", action="store_true", help="build it first")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--figures", type=int, default=50)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--node", default="gpu-0001", help="the node the fake plays")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--deadline", type=float, default=3.5)
    parser.add_argument("--baseline-src", type=Path,
                        help="another checkout's src/, run alternately (A against B)")
    parser.add_argument("--hang", action="store_true", help="every tool hangs")
    parser.add_argument("--writer", action="store_true",
                        help="a process holds the history's write lock meanwhile")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside")
    args = parser.parse_args()

    if args.build:
        took = build(args.history, args.nodes, args.figures, args.days)
        print(f"built {args.history} in {took:.0f} s", file=sys.stderr)
    with sqlite3.connect(f"file:{args.history}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT count(*) FROM results").fetchone()[0]
    size = args.history.stat().st_size

    started = time.perf_counter()
    current.publish_all(args.history, [args.node], session="bench-healthcheck")
    published = time.perf_counter() - started

    work = Path(tempfile.mkdtemp(prefix="bench-healthcheck-"))
    fake = FakeNode(work / "node")
    if args.hang:
        fake.hang()
        (fake.bin / "hang-systemctl").write_text("")
    sides = {"this checkout": REPO / "src"}
    if args.baseline_src:
        sides["baseline"] = args.baseline_src.resolve()
    helpers: list[subprocess.Popen] = []
    if args.writer:
        helpers.append(subprocess.Popen(
            [sys.executable, "-c", "import sqlite3, sys, time\n"
             f"db = sqlite3.connect({str(args.history)!r}, isolation_level=None)\n"
             "db.execute('BEGIN EXCLUSIVE')\nprint('held', flush=True)\ntime.sleep(1e6)\n"],
            stdout=subprocess.PIPE, text=True))
        assert helpers[-1].stdout and helpers[-1].stdout.readline() == "held\n"
    for _ in range(args.load):
        helpers.append(subprocess.Popen([sys.executable, "-c",
                                         "while True:\n    pass\n"]))
    results: dict[str, list[tuple[float, float, int, str]]] = {name: [] for name in sides}
    try:
        for _ in range(args.runs):
            for name, src in sides.items():
                state = work / f"state-{name.replace(' ', '-')}.json"
                results[name].append(run_once(src, fake, args.node, args.history, state,
                                              args.deadline))
    finally:
        for helper in helpers:
            helper.kill()
            helper.wait()
    load = os.getloadavg()
    print(json.dumps({
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                   f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}",
        "history": {"rows": rows, "bytes": size}, "node": args.node,
        "publish_one_node_s": round(published, 3), "runs": args.runs,
        "hang": args.hang, "writer": args.writer, "load_processes": args.load,
        "load_average_after": [round(v, 1) for v in load]}, indent=1))
    for name, runs in results.items():
        if not runs:
            continue
        wall = [r[0] for r in runs]
        cpu = [r[1] for r in runs]
        codes = sorted({r[2] for r in runs})
        print(f"{name}: {len(runs)} runs, wall p50 {percentile(wall, 50):.2f} s, "
              f"p90 {percentile(wall, 90):.2f} s, p99 {percentile(wall, 99):.2f} s, "
              f"max {max(wall):.2f} s; CPU median {statistics.median(cpu):.2f} s; "
              f"exit {', '.join(map(str, codes))}")
        last = runs[-1][3].splitlines()
        for line in last:
            if line.startswith(("history:", "drift:", "gpu_count:", "fabric_manager:")):
                print(f"  {line[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
