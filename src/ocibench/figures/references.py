"""The documented figures that apply to a run, and the value each gives a key.

A figure applies when its check equals the run's and each of its ``params`` equals the
run's value of that parameter (the run has more parameters - the size range, for
instance - which no figure names).  Values compare as text, so ``nodes: 1`` in a shape
file matches ``nodes=1`` typed on a command line or set by ReFrame.

A figure gives a key a documented value (``values``), OCI's acceptance floor
(``floor.values``), or both.  Judging a value against them is :mod:`ocibench.figures.judge`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ocibench import benchmarks, shapes

Figure = dict[str, Any]


def _shape(shape: shapes.Shape | str) -> shapes.Shape:
    return shape if isinstance(shape, shapes.Shape) else shapes.load(shape)


def matching(shape: shapes.Shape | str, check: str,
             params: Mapping[str, Any]) -> list[Figure]:
    """The shape's figures for this check whose params are a subset of the run's."""
    spec = benchmarks.spec(check)
    run_sizes = benchmarks.expected_sizes(check, params) if spec.sizes_in_variant else None
    run = {name: str(value) for name, value in params.items()}
    return [
        figure for figure in _shape(shape).figures
        if figure["check"] == check
        and all(run.get(name) == str(value) for name, value in figure["params"].items())
        # values keyed by name hold for the figure's own size range only
        and (run_sizes is None or benchmarks.figure_sizes(check, figure["params"]) == run_sizes)
    ]


def figure_keys(figure: Figure) -> list[int | str]:
    """The keys a figure documents: those of its values, then those only its floor has."""
    keys = list(figure.get("values") or {})
    return keys + [k for k in (figure.get("floor") or {}).get("values") or {} if k not in keys]


def lookup(figures: list[Figure], metric: str,
           key: int | str) -> tuple[Figure, float | None, float | None] | None:
    """The figure documenting ``metric`` at ``key`` (a size or a name): (figure,
    documented value or None, floor or None); None when no figure documents it."""
    found = []
    for figure in figures:
        if figure["metric"] != metric:
            continue
        for k in figure_keys(figure):
            if str(k) == str(key):
                value = (figure.get("values") or {}).get(k)
                floor = ((figure.get("floor") or {}).get("values") or {}).get(k)
                found.append((figure, None if value is None else float(value),
                              None if floor is None else float(floor)))
    if len(found) > 1:
        ids = " and ".join(figure["id"] for figure, _, _ in found)
        raise shapes.ShapeError(f"figures {ids} both document {metric} at {key} for this run")
    return found[0] if found else None


def source_text(source: Any) -> str | None:
    """A figure's ``source`` as the reader sees it: "<seed doc> sec <section>"."""
    if isinstance(source, dict):
        return f"{source.get('doc')} sec {source.get('section')}"
    return None if source is None else str(source)


def perf_var(metric: str, key: int | str) -> str:
    """The ReFrame performance variable of one figure: latency_1, busbw_out_of_place."""
    return f"{metric}_{key}"
