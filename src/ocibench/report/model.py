"""What the report is made of: one Result per benchmark run, one Row per figure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: check name -> benchmark family; a family is one plot and one part of a shape's page.
FAMILIES: dict[str, str] = {
    "osu_latency": "OSU point-to-point",
    "osu_bw": "OSU point-to-point",
    "osu_alltoall": "OSU collectives",
    "osu_allreduce": "OSU collectives",
    "osu_xccl_allreduce": "OSU collectives",
    "imb_pingpong": "Intel MPI Benchmarks",
    "imb_allreduce": "Intel MPI Benchmarks",
    "nccl_all_reduce_perf": "nccl-tests",
    "stream": "STREAM",
    "ib_write_bw": "perftest (RDMA)",
    "ib_write_lat": "perftest (RDMA)",
}

VERDICTS = ("pass", "fail", "suspicious", "no reference")


@dataclass
class Row:
    """One figure: a measured value beside its documented value and physical limit."""

    key: str                       # message size in bytes, or a STREAM kernel / nccl column
    metric: str                    # latency | bandwidth | busbw
    measured: float | None
    unit: str
    verdict: str
    reference: float | None = None
    lower: float | None = None
    upper: float | None = None
    source: str | None = None      # "<seed doc> sec <section>"
    figure: str | None = None      # the documented figure's id in the shape file
    limit: str | None = None       # key of the shape's links, or "memory"
    limit_gbs: float | None = None
    limit_fraction: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.reference:
            return None
        return self.measured / self.reference

    @property
    def size(self) -> int | None:
        """The message size, or None where the key is a name."""
        return int(self.key) if self.key.isdigit() else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio}


@dataclass
class Result:
    """One benchmark run: a ReFrame test case, or one offline evaluation."""

    check: str
    shape: str
    params: dict[str, Any]
    rows: list[Row]
    ok: bool
    reason: str | None
    origin: str                    # the input file, and the test case within it
    name: str
    provenance: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)   # why figures have no reference
    skipped: bool = False          # ReFrame skipped the test case: nothing was run

    @property
    def family(self) -> str:
        return FAMILIES[self.check]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "check": self.check,
            "family": self.family,
            "shape": self.shape,
            "params": self.params,
            "ok": self.ok,
            "skipped": self.skipped,
            "reason": self.reason,
            "notes": self.notes,
            "origin": self.origin,
            "provenance": self.provenance,
            "rows": [row.to_dict() for row in self.rows],
        }


def size_text(size: float) -> str:
    """A message size the way people say it: 256 MiB."""
    for factor, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if size >= factor:
            return f"{size / factor:g} {suffix}"
    return f"{size:g} B"


def status_counts(results: list[Result]) -> dict[str, int]:
    """Test cases (or evaluations) that passed, did not pass, or were skipped."""
    skipped = sum(r.skipped for r in results)
    passed = sum(r.ok for r in results)
    return {"passed": passed, "not passed": len(results) - passed - skipped,
            "skipped": skipped}


def verdict_counts(results: list[Result]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for result in results:
        for row in result.rows:
            counts[row.verdict] = counts.get(row.verdict, 0) + 1
    return counts
