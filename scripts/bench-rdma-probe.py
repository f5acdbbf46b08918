#!/usr/bin/env python3
"""What reading every RDMA port costs the healthcheck (docs/healthcheck.md, "Speed").

Builds a fake node of a shape in a temporary directory (the tests' builder,
tests/rdma_fakes.py: every port's sysfs files as mlx5 writes them, and an ``ethtool``
script printing the port's counters), with a GID table of ``--gids`` entries per port
(255 on a ConnectX port), and times ``ocibench.node.rdma`` on it, A against B in one
call, the median of ``--rounds`` rounds each:

* **healthcheck**: ``read_ports`` with the last run's counters, the healthcheck's way
  (the ``ethtool -S`` runs side by side; the GID table read up to its first empty entry);
* **healthcheck, one at a time**: the same, ``read_port`` per port (ethtool in a row);
* **healthcheck, sysfs only**: the same with no ethtool on PATH (what the files cost);
* **preflight**: ``read_port`` per port with no counters, preflight's way (the whole
  GID table read).

    PYTHONPATH=src python3 scripts/bench-rdma-probe.py --shape BM.GPU.H100.8
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ocibench import shapes
from ocibench.node import rdma

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import rdma_fakes  # noqa: E402  (the tests' builder of a node's RDMA sysfs)


def timed(rounds: int, work) -> float:
    took = []
    for _ in range(rounds):
        began = time.perf_counter()
        work()
        took.append(time.perf_counter() - began)
    return statistics.median(took)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="BM.GPU.H100.8")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--gids", type=int, default=255,
                        help="GID table entries per port (255 on ConnectX)")
    args = parser.parse_args(argv)
    shape = shapes.load(args.shape)
    rdma_fakes.GID_TABLE = args.gids
    with tempfile.TemporaryDirectory() as where:
        root, bin_dir = Path(where) / "root", Path(where) / "bin"
        fakes = rdma_fakes.FakePorts(shape)
        fakes.write(root, bin_dir)
        ports = rdma.ports_of(shape.data, shape.ucx_net_devices, shape.gid_index)
        path = os.environ.get("PATH", "")
        os.environ["PATH"] = f"{bin_dir}:{path}"
        readings = rdma.read_ports(root, ports, since={})
        assert {r.status for r in readings} == {"present"}, [r.detail for r in readings]
        last = {k: v for r in readings for k, v in r.counters.items()}
        figures = {
            "healthcheck": timed(args.rounds, lambda: rdma.read_ports(root, ports, last)),
            "healthcheck, one at a time": timed(
                args.rounds, lambda: [rdma.read_port(root, p, last) for p in ports]),
            "preflight": timed(args.rounds, lambda: [rdma.read_port(root, p) for p in ports]),
        }
        os.environ["PATH"] = "/nonexistent"
        figures["healthcheck, sysfs only"] = timed(
            args.rounds, lambda: [rdma.read_port(root, p, last) for p in ports])
        os.environ["PATH"] = path
    print(f"{args.shape}: {len(ports)} ports, {args.gids} GIDs each, "
          f"median of {args.rounds} rounds, {os.cpu_count()} CPUs")
    for name, seconds in figures.items():
        print(f"{name:28s} {seconds * 1000:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
