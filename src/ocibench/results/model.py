"""What a judged run is made of, for the report, the sweep and the history: one Result
per benchmark run, one Row per figure.

A Row is :class:`ocibench.figures.judge.Row`, the one comparison model of the project; the
run model never keeps a verdict it did not compute itself (see :mod:`ocibench.results.load`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ocibench import benchmarks, ladder
from ocibench.figures import ceilings as node_ceilings
from ocibench.figures import evaluate as evaluation
from ocibench.figures.judge import Row
from ocibench.metrics import RUN_VERDICTS, VERDICTS, RunVerdict

__all__ = ["FAMILIES", "VERDICTS", "Result", "Row", "size_text", "status_counts",
           "verdict_counts"]

#: check name -> benchmark family (each registry entry's ``family``); a family is one
#: plot and one part of a shape's page.
FAMILIES: dict[str, str] = {name: spec.family for name, spec in benchmarks.CHECKS.items()}


@dataclass
class Result:
    """One benchmark run: a ReFrame test case, or one offline evaluation."""

    check: str
    shape: str
    params: dict[str, Any]
    rows: list[Row]
    #: PASS, FAIL, UNJUDGED or RECORDED, as ocibench.figures.evaluate.run_verdict re-derives it.
    verdict: RunVerdict
    reason: str | None
    origin: str                    # the input file, and the test case within it
    name: str
    provenance: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)   # why figures have no reference
    #: Where the input's own verdict differs from the report's re-judgement.
    disagreements: list[str] = field(default_factory=list)
    skipped: bool = False          # ReFrame skipped the test case: nothing was run
    #: The node's copy ceilings (MB/s by ocibench.figures.outputs.NVBANDWIDTH_KEYS), from the
    #: nvbandwidth result of the same shape (and hosts, where both are known).
    ceilings: dict[str, float] = field(default_factory=dict)
    ceilings_from: str | None = None
    #: The NCCL path's fault by name (figures.nccl_path.FAULTS), where the input gives it.
    path_kind: str | None = None

    def next_step(self) -> ladder.Decision | None:
        """A failed run's entry of the action ladder (figures.evaluate.ladder_entry)."""
        if self.skipped or self.verdict is not RunVerdict.FAIL:
            return None
        rung = evaluation.ladder_entry(self.check, self.rows, self.path_kind, self.reason)
        return None if rung is None else ladder.Decision(rung, rung.step, 0)

    def of_ceiling(self, row: Row) -> list[node_ceilings.Ceiling]:
        """``row`` as a fraction of each of the node's ceilings that bounds it."""
        return node_ceilings.of(self.check, self.params, row.measured, row.unit,
                                self.ceilings)

    @property
    def ok(self) -> bool:
        """Nothing failed and nothing was left unjudged."""
        return not self.skipped and self.verdict in (RunVerdict.PASS, RunVerdict.RECORDED)

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
            "verdict": "skipped" if self.skipped else str(self.verdict),
            "ok": self.ok,
            "skipped": self.skipped,
            "reason": self.reason,
            "notes": self.notes,
            "disagreements": self.disagreements,
            "origin": self.origin,
            "provenance": self.provenance,
            "rows": [{**row.to_dict(),
                      "of_ceiling": [c.to_dict() for c in self.of_ceiling(row)]}
                     for row in self.rows],
            "ceilings_from": self.ceilings_from,
        }


def size_text(size: float) -> str:
    """A message size the way people say it: 256 MiB."""
    for factor, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if size >= factor:
            return f"{size / factor:g} {suffix}"
    return f"{size:g} B"


def status_counts(results: list[Result]) -> dict[str, int]:
    """Test cases (or evaluations) per verdict -- UNJUDGED apart from pass and fail --
    and those skipped."""
    counts = {str(v): sum(not r.skipped and r.verdict is v for r in results)
              for v in RUN_VERDICTS}
    return {**counts, "skipped": sum(r.skipped for r in results)}


def verdict_counts(results: list[Result]) -> dict[str, int]:
    counts = {str(v): 0 for v in VERDICTS}
    for result in results:
        for row in result.rows:
            counts[str(row.verdict)] += 1
    return counts
