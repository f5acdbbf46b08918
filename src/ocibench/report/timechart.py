"""A figure over time as an inline SVG chart: the geometry, in numbers, for the template.

The history's pages (ocibench.report.history) draw one chart per figure: a node's
values, the cluster's median per session with its bands (quartiles, 10th to 90th
percentile), the documented figure and the floor, and vertical marks at the times
something happened (a software change, a sweep that flagged the node, a cluster event).
This module only computes where things go, as plain numbers and the texts that label
them; the template ``pages/templates/chart.html`` writes the SVG, escaping every text
(autoescape), so that a node or image name from the history is never markup.

Why not matplotlib (the acceptance report's plots): a page of 50 figures took seconds of
rendering PNGs; an SVG of a few hundred points per line is written in milliseconds, is a
few kB, stays sharp when zoomed, and its marks carry their full text as tooltips.

Every chart has at most :data:`MAX_POINTS` points per line: a longer series is thinned
to the median of consecutive runs of values (the band to their extremes), so that a
page's size does not grow with the sessions kept beyond that bound.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

#: The chart's size in SVG units (CSS pixels at 100 %), and the plot area's margins.
WIDTH, HEIGHT = 900, 250
LEFT, RIGHT, TOP, BOTTOM = 76, 14, 30, 24
#: Most points drawn per line or band: more sessions are thinned to this many.
MAX_POINTS = 400
#: Most vertical marks per chart (the newest are kept), and the least room, in SVG
#: units, between two marks whose labels are both written.
MAX_MARKS = 40
LABEL_ROOM = 70
#: The time ticks' candidate steps, seconds, shortest first.
_TIME_STEPS = (3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 91 * 86400, 365 * 86400)


@dataclass(frozen=True)
class Mark:
    """Something that happened at ``time``: drawn as a vertical line of class ``kind``
    (software, flagged, drained, resumed, event), ``label`` written beside it, ``text``
    its tooltip."""

    time: float
    kind: str
    label: str
    text: str


@dataclass
class Series:
    """What one chart shows, in the figure's unit: the builder's input."""

    title: str
    unit: str
    line: list[tuple[float, float]] = field(default_factory=list)        # (time, value)
    line_label: str = ""
    median: list[tuple[float, float]] = field(default_factory=list)
    inner: list[tuple[float, float, float]] = field(default_factory=list)  # (t, q1, q3)
    outer: list[tuple[float, float, float]] = field(default_factory=list)  # (t, p10, p90)
    documented: float | None = None
    floor: float | None = None
    marks: list[Mark] = field(default_factory=list)
    dots: list[tuple[float, float, str, str]] = field(default_factory=list)  # t, v, kind, text


def thin(points: Sequence[tuple[float, ...]], most: int = MAX_POINTS,
         band: bool = False) -> list[tuple[float, ...]]:
    """At most ``most`` points: consecutive runs of ``points`` (time, value[, high])
    become their median time and value, or, for a band (time, low, high), the lowest
    low and the highest high."""
    if len(points) <= most:
        return list(points)
    size = math.ceil(len(points) / most)
    found = []
    for start in range(0, len(points), size):
        run = points[start:start + size]
        time = statistics.median(p[0] for p in run)
        if band:
            found.append((time, min(p[1] for p in run), max(p[2] for p in run)))
        else:
            found.append((time, statistics.median(p[1] for p in run)))
    return found


def nice_ticks(low: float, high: float, count: int = 5) -> tuple[list[float], float]:
    """Round tick values covering [low, high] (steps of 1, 2, 2.5 or 5 times a power of
    ten), and the step."""
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)], step


def number_text(value: float, step: float) -> str:
    """A tick's value with as many decimals as its step needs, thousands separated."""
    decimals = next(d for d in range(12) if abs(step * 10 ** d - round(step * 10 ** d))
                    < 1e-6 * step * 10 ** d or d == 11)   # 0.25: 2, 2.5: 1, 50: 0
    return f"{value:,.{decimals}f}"


def time_ticks(start: float, end: float, most: int = 7) -> list[tuple[float, str]]:
    """Tick times between ``start`` and ``end`` (UTC), at the shortest round step that
    gives at most ``most`` of them, with their labels."""
    span = max(end - start, 1.0)
    step = next((s for s in _TIME_STEPS if span / s <= most), _TIME_STEPS[-1] *
                math.ceil(span / (_TIME_STEPS[-1] * most)))
    form = "%Y-%m-%d" if step >= 86400 else "%m-%d %H:%M"
    first = math.ceil(start / step) * step
    return [(t, datetime.fromtimestamp(t, timezone.utc).strftime(form))
            for t in (first + i * step for i in range(int((end - first) // step) + 1))]


def build(series: Series) -> dict[str, Any] | None:
    """The chart's geometry for the template, or None when there is nothing to draw."""
    line = thin(series.line)
    median = thin(series.median)
    inner = thin(series.inner, band=True)
    outer = thin(series.outer, band=True)
    times = [p[0] for group in (line, median, outer, inner) for p in group] + \
        [d[0] for d in series.dots]
    values = [v for group in (line, median) for _, v in group] + \
        [v for _, low, high in outer + inner for v in (low, high)] + \
        [d[1] for d in series.dots] + \
        [v for v in (series.documented, series.floor) if v is not None]
    values = [v for v in values if math.isfinite(v)]
    if not times or not values:
        return None
    t0, t1 = min(times), max(times)
    if t1 <= t0:
        t0, t1 = t0 - 43200, t1 + 43200   # one session: half a day either side
    v0, v1 = min(values), max(values)
    pad = (v1 - v0) * 0.06 or abs(v1) * 0.02 or 1.0
    v0, v1 = v0 - pad, v1 + pad
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM

    def x(t: float) -> float:
        return x0 + (t - t0) / (t1 - t0) * (x1 - x0)

    def y(v: float) -> float:
        return y1 - (v - v0) / (v1 - v0) * (y1 - y0)

    def polyline(points: Sequence[tuple[float, float]]) -> str:
        return " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)

    def area(points: Sequence[tuple[float, float, float]]) -> str:
        upper = [(t, high) for t, _low, high in points]
        lower = [(t, low) for t, low, _high in reversed(points)]
        return polyline(upper + lower)

    ticks, step = nice_ticks(v0, v1)
    marks, last_label = [], -math.inf
    for mark in sorted(series.marks, key=lambda m: m.time)[-MAX_MARKS:]:
        if not t0 <= mark.time <= t1:
            continue
        at = x(mark.time)
        labelled = at - last_label >= LABEL_ROOM
        if labelled:
            last_label = at
        marks.append({"x": f"{at:.1f}", "kind": mark.kind, "text": mark.text,
                      "label": mark.label if labelled else "",
                      "anchor": "end" if at > x1 - LABEL_ROOM else "start",
                      "label_x": f"{at - 3:.1f}" if at > x1 - LABEL_ROOM else f"{at + 3:.1f}"})
    return {
        "title": series.title, "unit": series.unit, "width": WIDTH, "height": HEIGHT,
        "x0": x0, "x1": x1, "y0": y0, "y1": y1,
        "yticks": [{"y": f"{y(v):.1f}", "label": number_text(v, step)} for v in ticks],
        "xticks": [{"x": f"{x(t):.1f}", "label": label} for t, label in time_ticks(t0, t1)],
        "outer": area(outer) if outer else "", "inner": area(inner) if inner else "",
        "median": polyline(median) if median else "",
        "line": polyline(line) if line else "", "line_label": series.line_label,
        "hlines": [{"kind": kind, "y": f"{y(v):.1f}", "label": f"{label} {v:,.4g}"}
                   for kind, label, v in (("documented", "documented", series.documented),
                                          ("floor", "floor", series.floor)) if v is not None],
        "marks": marks,
        "dots": [{"x": f"{x(t):.1f}", "y": f"{y(v):.1f}", "kind": kind, "text": text}
                 for t, v, kind, text in series.dots[-MAX_POINTS:]],
    }
