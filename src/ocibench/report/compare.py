"""Put a measured value beside its documented value and its physical limit.

The documented value and the verdict come from :mod:`ocibench.references` and
:mod:`ocibench.policy`, exactly as ``ocibench evaluate`` and the ReFrame checks get them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ocibench import policy, references, shapes
from ocibench.evaluate import GBS_PER_UNIT
from ocibench.report.model import Row


@lru_cache(maxsize=None)
def shape(name: str) -> shapes.Shape:
    return shapes.load(name)


def limit_gbs(shape_name: str, limit: str | None) -> float | None:
    """The physical limit a figure's ``limit`` names, in GB/s per direction."""
    data = shape(shape_name).data
    if limit == "memory":
        value = (data.get("memory") or {}).get("bandwidth_gbs")
    else:
        value = data["links"].get(limit) if limit else None
    return float(value) if value else None


def row(shape_name: str, check: str, params: dict[str, Any], metric: str, key: str,
        measured: float | None, unit: str) -> Row:
    """A Row for a measured value (a ReFrame performance variable)."""
    found = references.lookup(references.matching(shape(shape_name), check, params),
                              metric, key)
    if found is None:
        return Row(key=key, metric=metric, measured=measured, unit=unit,
                   verdict=policy.verdict(metric, None, measured))
    figure, reference = found
    lower, upper = policy.bounds(metric, reference)
    physical = limit_gbs(shape_name, figure.get("limit"))
    return Row(
        key=key, metric=metric, measured=measured, unit=unit,
        verdict=policy.verdict(metric, reference, measured),
        reference=reference, lower=lower, upper=upper,
        source=f"{figure['source']['doc']} sec {figure['source']['section']}",
        figure=figure["id"], limit=figure.get("limit"), limit_gbs=physical,
        limit_fraction=_fraction(measured, unit, physical),
    )


def complete(shape_name: str, raw: dict[str, Any]) -> Row:
    """A Row from a row of ``ocibench evaluate --json``, with the limit in GB/s added."""
    return Row(
        key=str(raw["key"]), metric=raw["metric"], measured=raw["measured"],
        unit=raw["unit"], verdict=raw["verdict"], reference=raw.get("reference"),
        lower=raw.get("lower"), upper=raw.get("upper"), source=raw.get("source"),
        figure=raw.get("figure"), limit=raw.get("limit"),
        limit_gbs=limit_gbs(shape_name, raw.get("limit")),
        limit_fraction=raw.get("limit_fraction"),
    )


def _fraction(measured: float | None, unit: str, limit: float | None) -> float | None:
    if measured is None or limit is None or unit not in GBS_PER_UNIT:
        return None
    return measured * GBS_PER_UNIT[unit] / limit
