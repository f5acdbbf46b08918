"""One run's judged rows as history Records: the one conversion the sweep and
``ocibench history add`` share.

A row (:class:`ocibench.figures.judge.Row`) is keyed by a message size, or by a name (a
STREAM kernel, an nccl-tests column, an nvbandwidth copy).  Its Record is keyed by

* ``variant``: the run's parameters without those that only choose which message sizes
  it prints (:data:`SIZE_PARAMS`): an osu_bw run over 1..4 MiB and one over 8 KiB..4 MiB
  measure the same figure at 8 KiB;
* ``size``: the row's size; for a named key, the size its values are at (nccl-tests'
  busbw columns are the largest size's: ocibench.figures.outputs, ``Measurement.size``),
  None where the check has none (STREAM, nvbandwidth);
* ``figure``: the metric for a sized row ("bandwidth", "latency"), the name otherwise
  ("out_of_place", "Triad", "host_to_device").

A row with no measured value (the run stopped before it) is no Record: there is nothing
to keep of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ocibench import benchmarks, metrics
from ocibench.figures.judge import Row
from ocibench.history.store import Record, variant

#: Parameters that choose which message sizes a run prints (ocibench.benchmarks:
#: OMB/IMB ranges, perftest's one size, nccl-tests' -b/-e/-f/-i), not what is measured.
SIZE_PARAMS = frozenset({"sizes", "msglog", "size", "begin", "end", "factor", "step"})


def run_variant(params: Mapping[str, Any]) -> str:
    return variant({k: v for k, v in params.items() if k not in SIZE_PARAMS})


def _named_size(check: str, params: Mapping[str, Any]) -> int | None:
    try:
        sizes = benchmarks.expected_sizes(check, params) if check in benchmarks.CHECKS else []
    except benchmarks.ParamError:
        return None
    return max(sizes) if sizes else None


def worst_passing(row: Row) -> float | None:
    """The lowest passing value of a rate (the highest of a latency): the tighter of the
    tolerance bound and OCI's floor, where either is known."""
    if metrics.metric(row.metric).higher_is_better:
        bounds = [b for b in (row.lower, row.floor) if b is not None]
        return max(bounds) if bounds else None
    bounds = [b for b in (row.upper, row.floor) if b is not None]
    return min(bounds) if bounds else None


def records(node: str, check: str, params: Mapping[str, Any], rows: Iterable[Row], *,
            time: float, session: str, image: str | None = None,
            driver: str | None = None) -> list[Record]:
    """The Records of one node's rows of one run."""
    named = _named_size(check, params)
    found = []
    for row in rows:
        if not metrics.is_number(row.measured):
            continue
        sized = isinstance(row.key, int)
        found.append(Record(
            node=node, check=check, variant=run_variant(params),
            size=row.key if sized else named,
            figure=row.metric if sized else str(row.key),
            value=float(row.measured), unit=row.unit, verdict=str(row.verdict),
            time=time, session=session, documented=row.reference,
            floor=worst_passing(row), image=image, driver=driver))
    return found
