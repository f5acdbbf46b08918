"""Which of the node's own copy ceilings bounds a GPU figure.

The copy engines move data between two GPUs and between a GPU and host memory; an MPI
benchmark over UCX cannot move it faster than they do.  ``checks/nvbandwidth.py``
measures them on the node (NVIDIA's nvbandwidth, pinned memory) together with the rate
of a copy from pageable host memory (ocibench.node.pageable_copy), which is what OMB's
host buffers get unless a single-copy path (XPMEM, CMA) or pinning helps.  The report
shows each bounded figure as a fraction of them ("of this node's ceiling"), beside the
fraction of the physical link that it already shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ocibench import benchmarks, metrics

#: (check, buffers, nodes) -> the ceilings (ocibench.benchmarks.NVBANDWIDTH_KEYS) that
#: bound it, the one OMB's buffers get first: each registry entry's ``ceilings``.
BOUNDS: dict[tuple[str, str, int], tuple[str, ...]] = {
    (name, buffers, nodes): keys
    for name, spec in benchmarks.CHECKS.items()
    for (buffers, nodes), keys in spec.ceilings.items()
}
#: How the report names each ceiling.
NAMES = {
    "host_to_device": "pinned host->GPU",
    "device_to_host": "GPU->pinned host",
    "device_to_device_read": "GPU->GPU read",
    "device_to_device_write": "GPU->GPU write",
    "pageable_host_to_device": "pageable host->GPU",
    "pageable_device_to_host": "GPU->pageable host",
}


@dataclass(frozen=True)
class Ceiling:
    key: str
    gbs: float          # the ceiling, GB/s (of both directions for a bidirectional check)
    fraction: float     # the measured value / the ceiling
    directions: int = 1  # 2: the ceiling of both directions, twice the one-way copy

    def text(self) -> str:
        both = f"{self.directions} x " if self.directions > 1 else ""
        return (f"{100 * self.fraction:.1f} % of {both}{NAMES[self.key]} "
                f"{self.gbs / self.directions:.1f} GB/s")

    def to_dict(self) -> dict[str, Any]:
        return {"ceiling": self.key, "gbs": self.gbs, "fraction": self.fraction,
                "directions": self.directions}


def bounding(check: str, params: Mapping[str, Any]) -> tuple[str, ...]:
    return BOUNDS.get((check, str(params.get("buffers")), int(params.get("nodes") or 0)), ())


def of(check: str, params: Mapping[str, Any], measured: float | None, unit: str,
       node: Mapping[str, float]) -> list[Ceiling]:
    """The value as a fraction of each ceiling that bounds it; ``node``: the node's
    ceilings in MB/s (the nvbandwidth check's values).  A ceiling is a copy in one
    direction: a value of both directions at once (osu_bibw) is measured against twice
    it, as its physical limit is (ocibench.figures.judge.physical_limit)."""
    gbs = metrics.to_gbs(measured, unit) if metrics.is_number(measured) else None
    if gbs is None:
        return []
    spec = benchmarks.CHECKS.get(check)
    directions = spec.directions if spec else 1
    found = []
    for key in bounding(check, params):
        ceiling = node.get(key)
        if metrics.is_number(ceiling) and ceiling > 0:
            ceiling_gbs = directions * metrics.to_gbs(ceiling,
                                                      metrics.default_unit("bandwidth"))
            found.append(Ceiling(key, ceiling_gbs, gbs / ceiling_gbs, directions))
    return found
