"""Judge one benchmark output offline: sanity first, then every measured figure against
the shape's documented figure under the tolerance policy, with its physical limit.

The same parsers (:mod:`ocibench.outputs`), references (:mod:`ocibench.references`)
and policy (:mod:`ocibench.policy`) serve the live ReFrame checks, so a hand-run
output and a ReFrame run of the same command get the same verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ocibench import checkspec, outputs, policy, references, shapes
from ocibench.checkspec import CHECKS  # noqa: F401  (the registry, re-exported here)

from ocibench.metrics import GBS_PER_UNIT  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class Row:
    """One measured figure beside its documented value, bounds and physical limit."""

    metric: str
    key: int | str                 # message size in bytes, STREAM kernel, nccl column
    measured: float
    unit: str
    verdict: str                   # pass | fail | suspicious | no reference
    reference: float | None = None
    lower: float | None = None
    upper: float | None = None
    source: str | None = None      # "<seed doc> sec <section>"
    figure: str | None = None      # the figure's id in the shape file
    limit: str | None = None       # key of the shape's links, or "memory"
    limit_fraction: float | None = None   # measured / physical limit

    @property
    def label(self) -> str:
        return f"size {self.key}" if isinstance(self.key, int) else str(self.key)

    def failure(self) -> str:
        """Why this row failed, in one line."""
        if self.upper is not None and self.measured > self.upper:
            how = f"> ceiling {_num(self.upper)}"
        else:
            how = f"< floor {_num(self.lower)}"
        return (f"{self.metric} at {self.label}: {_num(self.measured)} {self.unit} {how} "
                f"{self.unit} (documented {_num(self.reference)} {self.unit}, {self.source})")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class Evaluation:
    check: str
    shape: str
    params: dict[str, Any]
    rows: tuple[Row, ...] = ()
    sanity: str | None = None      # the SanityError message when the output is not sane
    notes: tuple[str, ...] = ()    # why figures have no reference, for the reader

    @property
    def ok(self) -> bool:
        return self.sanity is None and all(row.verdict != "fail" for row in self.rows)

    @property
    def reason(self) -> str | None:
        """The first failure in one line; None when the evaluation passed."""
        if self.sanity:
            return self.sanity
        return next((row.failure() for row in self.rows if row.verdict == "fail"), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "shape": self.shape,
            "params": self.params,
            "ok": self.ok,
            "reason": self.reason,
            "notes": list(self.notes),
            "rows": [asdict(row) for row in self.rows],
        }


def evaluate(check: str, text: str, shape: shapes.Shape | str,
             params: Mapping[str, Any]) -> Evaluation:
    """Evaluate ``text``, one run's output.  Raises ParamError for an unknown check or
    parameter and ShapeError for an unknown shape; a bad output is a failed Evaluation."""
    resolved = checkspec.resolve(check, params)
    shape = shape if isinstance(shape, shapes.Shape) else shapes.load(shape)
    figures = references.matching(shape, check, resolved)
    notes = _notes(shape, check, resolved, figures)
    try:
        measurement = outputs.parse(check, text, resolved)
    except outputs.SanityError as err:
        return Evaluation(check, shape.name, resolved, sanity=str(err), notes=notes)
    rows = tuple(
        # the primary metric in the unit the output printed (perftest: Gb/s)
        _row(shape, figures, metric, key, value,
             measurement.unit if metric == measurement.metric else outputs.UNITS[metric])
        for metric, values in measurement.series().items()
        for key, value in values.items()
    )
    return Evaluation(check, shape.name, resolved, rows, notes=notes)


def _row(shape: shapes.Shape, figures: list[references.Figure], metric: str,
         key: int | str, measured: float, unit: str) -> Row:
    found = references.lookup(figures, metric, key)
    if found is None:
        return Row(metric, key, measured, unit, policy.verdict(metric, None, measured))
    figure, reference = found
    lower, upper = policy.bounds(metric, reference)
    limit = figure.get("limit")
    physical = _limit_gbs(shape, limit)
    return Row(
        metric, key, measured, unit,
        verdict=policy.verdict(metric, reference, measured),
        reference=reference, lower=lower, upper=upper,
        source=f"{figure['source']['doc']} sec {figure['source']['section']}",
        figure=figure["id"], limit=limit,
        limit_fraction=measured * GBS_PER_UNIT[unit] / physical if physical else None,
    )


def _limit_gbs(shape: shapes.Shape, limit: str | None) -> float | None:
    """The physical limit a figure names, GB/s per direction."""
    if limit == "memory":
        value = (shape.data.get("memory") or {}).get("bandwidth_gbs")
    else:
        value = shape.data["links"].get(limit) if limit else None
    return float(value) if value else None


def _notes(shape: shapes.Shape, check: str, params: dict[str, Any],
           figures: list[references.Figure]) -> tuple[str, ...]:
    if figures:
        return ()
    documented = [f for f in shape.figures if f["check"] == check]
    if not documented:
        return (f"{shape.name} documents no {check} figure: values are recorded "
                "without a reference",)
    if checkspec.CHECKS[check].sizes_in_variant:
        ranges = sorted({_size_range(check, f["params"]) for f in documented})
        if _size_range(check, params) not in ranges:
            return (f"{shape.name} documents {check} only over the sizes "
                    f"{'; '.join(ranges)}; this run's sizes differ",)
    variants = sorted({" ".join(f"{k}={v}" for k, v in f["params"].items())
                       for f in documented})
    return (f"{shape.name} documents {check} only for: {'; '.join(variants)} "
            "(choose one with --set)",)


def _size_range(check: str, params: Mapping[str, Any]) -> str:
    sizes = checkspec.figure_sizes(check, params)
    return f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)"
