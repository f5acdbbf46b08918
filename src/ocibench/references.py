"""The documented figures that apply to a run, as values and as ReFrame references.

A figure applies when its check equals the run's and each of its ``params`` equals the
run's value of that parameter (the run has more parameters - the size range, for
instance - which no figure names).  Values compare as text, so ``nodes: 1`` in a shape
file matches ``nodes=1`` typed on a command line or set by ReFrame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ocibench import checkspec, policy, shapes

Figure = dict[str, Any]


def _shape(shape: shapes.Shape | str) -> shapes.Shape:
    return shape if isinstance(shape, shapes.Shape) else shapes.load(shape)


def matching(shape: shapes.Shape | str, check: str,
             params: Mapping[str, Any]) -> list[Figure]:
    """The shape's figures for this check whose params are a subset of the run's."""
    spec = checkspec.spec(check)
    run_sizes = checkspec.expected_sizes(check, params) if spec.sizes_in_variant else None
    run = {name: str(value) for name, value in params.items()}
    return [
        figure for figure in _shape(shape).figures
        if figure["check"] == check
        and all(run.get(name) == str(value) for name, value in figure["params"].items())
        # values keyed by name hold for the figure's own size range only
        and (run_sizes is None or checkspec.figure_sizes(check, figure["params"]) == run_sizes)
    ]


def lookup(figures: list[Figure], metric: str, key: int | str) -> tuple[Figure, float] | None:
    """The figure documenting ``metric`` at ``key`` (a size or a name) and its value."""
    found = [(figure, float(value)) for figure in figures if figure["metric"] == metric
             for k, value in (figure.get("values") or {}).items() if str(k) == str(key)]
    if len(found) > 1:
        ids = " and ".join(figure["id"] for figure, _ in found)
        raise shapes.ShapeError(f"figures {ids} both document {metric} at {key} for this run")
    return found[0] if found else None


def perf_var(metric: str, key: int | str) -> str:
    """The ReFrame performance variable of one figure: latency_1, busbw_out_of_place."""
    return f"{metric}_{key}"


def reframe_reference(shape: shapes.Shape | str, check: str, params: Mapping[str, Any],
                      targets: list[str]) -> dict[str, dict[str, tuple]]:
    """ReFrame's ``reference``: {target: {perf_var: (ref, lower, upper, unit)}}.

    ``lower``/``upper`` are ReFrame's relative thresholds from :mod:`ocibench.policy`
    (None: unbounded on that side).  Each target is an explicit ``system:partition``;
    a '*' target would apply the figures to systems that are not this shape.  The
    "suspicious" verdict has no ReFrame counterpart: the report shows it.
    """
    for target in targets:
        if not target or "*" in target:
            raise ValueError(f"ReFrame target {target!r}: name a system:partition, not a wildcard")
    variables: dict[str, tuple] = {}
    for figure in matching(shape, check, params):
        for key, value in (figure.get("values") or {}).items():  # a floor-only figure has none
            lower, upper = policy.bounds(figure["metric"], value)
            variables[perf_var(figure["metric"], key)] = (
                value, _relative(lower, value), _relative(upper, value), figure["unit"])
    if not variables:
        return {}
    return {target: dict(variables) for target in targets}


def _relative(bound: float | None, reference: float) -> float | None:
    # Rounded so that 0.9 - 1 reads -0.1, not -0.09999999999999998.
    return None if bound is None else round(bound / reference - 1, 6)
