"""Print the cores of a host<->GPU run in one node, in rank order, as the checks place it.

    ocibench placement H-D                      # 24,25 on BM.GPU4.8 (same-numa)
    ocibench placement D-H --placement other-socket --shape BM.GPU4.8

The cores are ocibench.placement.host_device_cores of the shape's topology, the same the
osu_*_host_device checks pin their ranks to; what ``mpirun --map-by pe-list=<cores>:ordered``
takes (Open MPI 5).  A placement the node cannot offer is one line on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import sys

from ocibench import placement, shapes


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("buffers", choices=("H-D", "D-H"),
                        help="which rank holds host memory and which GPU memory")
    parser.add_argument("--placement", choices=placement.PLACEMENTS, default="same-numa",
                        help="the host rank's core relative to the GPU (default: same-numa)")
    parser.add_argument("--shape", default=None,
                        help="the shape (default: this machine's, `ocibench shape`)")


def run(args: argparse.Namespace) -> int:
    shape = shapes.load(args.shape or shapes.detect())
    cores, why = placement.host_device_cores(shape.topology, args.buffers, args.placement)
    if cores is None:
        print(f"ocibench: placement: {args.placement} {args.buffers} is impossible on "
              f"{shape.name}: {why}", file=sys.stderr)
        return 1
    print(",".join(map(str, cores)))
    return 0
