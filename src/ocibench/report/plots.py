"""One PNG per shape and benchmark family, one panel per metric.

A panel whose runs cover several message sizes plots each run against the size (log2
axis) with its documented table dashed in the same colour and the physical limit dotted
(size 0, which IMB prints, has no place on a log axis: it is in the tables only).
A panel of single-size runs or named keys (STREAM kernels, nccl-tests' busbw columns)
is a horizontal bar chart: measured beside documented, with the physical limit of each
bar's link or memory marked across it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402  (after choosing the backend)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter  # noqa: E402

from ocibench.metrics import GBS_PER_UNIT, METRICS  # noqa: E402
from ocibench.results.model import Result, Row, size_text  # noqa: E402

#: metric -> its title (ocibench.metrics), in the vocabulary's order.
METRIC_TITLES = {name: m.title for name, m in METRICS.items()}

#: Measured values by verdict: bar colours; rings around failed/suspicious points.
VERDICT_COLOURS = {"pass": "#3a9a3a", "fail": "#d62728", "suspicious": "#f0a000",
                   "no reference": "C0"}

#: Most size ticks on a log2 axis (every power of two would overlap).
MAX_SIZE_TICKS = 8

#: Every text of a plot is drawn as written.  Run names, file names and parameter
#: values come from the inputs: two "$" in one would start matplotlib's mathtext, which
#: raises while drawing what is not TeX (a file run$\x$.txt), and a user's matplotlibrc
#: with text.usetex would hand every label to LaTeX.  Set for the whole figure, ticks
#: and legends included, rather than escaped label by label, so that no text is missed.
PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}

Series = list[tuple[str, list[Row]]]   # (label, one run's rows of one metric)


def plot_family(results: list[Result], shape: str, family: str, outdir: Path) -> Path:
    """Write the family's PNG and return its path."""
    with matplotlib.rc_context(PLAIN_TEXT):
        return _plot_family(results, shape, family, outdir)


def _plot_family(results: list[Result], shape: str, family: str, outdir: Path) -> Path:
    metrics = [m for m in METRIC_TITLES if any(r.metric == m for res in results for r in res.rows)]
    panels = [_series(results, metric) for metric in metrics]
    height = max([3.0] + [5.0 if _is_sweep(series) else 1.6 + 0.45 * sum(len(r) for _, r in series)
                          for series in panels])
    figure = Figure(figsize=(7.0 * len(metrics), height), dpi=100, layout="constrained")
    figure.suptitle(f"{shape}: {family}")
    all_axes = figure.subplots(1, len(metrics), squeeze=False)[0]
    bar_legend: dict[str, Any] = {}
    for axes, metric, series in zip(all_axes, metrics, panels):
        value_title = f"{METRIC_TITLES[metric]} ({series[0][1][0].unit})"
        if _is_sweep(series):
            _lines(axes, series, value_title)
        else:
            _bars(axes, series, value_title)
            handles, labels = axes.get_legend_handles_labels()
            bar_legend.update(zip(labels, handles))
        checks = dict.fromkeys(r.check for r in results if any(x.metric == metric for x in r.rows))
        axes.set_title(f"{METRIC_TITLES[metric]}: {', '.join(checks)}")
        axes.grid(True, which="major", alpha=0.3)
    if bar_legend:  # one legend for the bar panels, below them: the bars fill the panels
        figure.legend(list(bar_legend.values()), list(bar_legend), loc="outside lower center",
                      ncols=len(bar_legend), fontsize="small")
    path = outdir / f"{_slug(shape)}-{_slug(family)}.png"
    figure.savefig(path)
    return path


def _series(results: list[Result], metric: str) -> Series:
    """The runs with rows of ``metric``, labelled by the parameters that tell them apart
    (and by their names where runs of the same parameters are in the same panel)."""
    runs = [(res, [r for r in res.rows if r.metric == metric]) for res in results]
    runs = [(res, rows) for res, rows in runs if rows]
    names = list(dict.fromkeys(k for res, _ in runs for k in res.params))
    varying = [k for k in names if len({str(res.params.get(k)) for res, _ in runs}) > 1]
    checks = len({res.check for res, _ in runs}) > 1
    labels = [" ".join(([res.check] if checks or not varying else [])
                       + [f"{k}={res.params[k]}" for k in varying if k in res.params])
              for res, _ in runs]
    return [(f"{label} ({res.name})" if labels.count(label) > 1 else label, rows)
            for label, (res, rows) in zip(labels, runs)]


def _is_sweep(series: Series) -> bool:
    """Whether the runs are message-size sweeps (else: single sizes or named keys)."""
    sizes = [r.size for _, rows in series for r in rows]
    return None not in sizes and any(len(rows) > 1 for _, rows in series)


def _lines(axes: Axes, series: Series, value_title: str) -> None:
    plotted: list[float] = []
    for index, (label, rows) in enumerate(series):
        color = f"C{index % 10}"
        rows = sorted((r for r in rows if r.size), key=lambda r: r.size or 0)
        measured = [(r.size, r.measured) for r in rows if r.measured is not None]
        documented = [(r.size, r.reference) for r in rows if r.reference]
        if measured:
            axes.plot(*zip(*measured), "o-", color=color, label=label, markersize=4)
        if documented:
            axes.plot(*zip(*documented), "x--", color=color, alpha=0.6)
        plotted += [v for _, v in measured + documented]
    if any(r.reference for _, rows in series for r in rows):
        axes.plot([], [], "x--", color="grey", label="documented (dashed, same colour)")
    for verdict in ("fail", "suspicious"):
        marked = [(r.size, r.measured) for _, rows in series for r in rows
                  if r.verdict == verdict and r.size and r.measured is not None]
        if marked:
            axes.plot(*zip(*marked), "o", markersize=11, markerfacecolor="none",
                      markeredgewidth=2, color=VERDICT_COLOURS[verdict], label=verdict)
    for limit, gbs, unit in sorted({(r.limit, r.limit_gbs, r.unit) for _, rows in series
                                    for r in rows if r.limit_gbs and r.unit in GBS_PER_UNIT}):
        axes.axhline(gbs / GBS_PER_UNIT[unit], color="black", linestyle=":",
                     label=f"physical limit: {limit} {gbs:g} GB/s")
    sizes = [r.size for _, rows in series for r in rows if r.size]
    low, high = int(math.log2(min(sizes))), int(math.log2(max(sizes)))
    step = max(1, math.ceil((high - low + 1) / MAX_SIZE_TICKS))
    axes.set_xscale("log", base=2)
    axes.set_xticks([2**k for k in range(low, high + 1, step)])
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: size_text(x)))
    axes.xaxis.set_minor_formatter(NullFormatter())
    axes.set_xlabel("message size")
    positive = [v for v in plotted if v > 0]
    if positive and max(positive) > 20 * min(positive):  # values over decades: a log axis
        axes.set_yscale("log")
        axes.yaxis.set_minor_formatter(NullFormatter())
    axes.yaxis.set_major_formatter(_numbers())
    axes.set_ylabel(value_title)
    axes.legend(fontsize="small", loc="best")


def _bars(axes: Axes, series: Series, value_title: str) -> None:
    groups = [(label, row) for label, rows in series for row in rows]
    names = [f"{label} {_key_text(row)}".strip() for label, row in groups]
    positions = list(range(len(groups)))
    colours = [VERDICT_COLOURS[r.verdict] for _, r in groups]
    axes.barh([p - 0.2 for p in positions], [r.measured or 0 for _, r in groups], 0.4,
              color=colours)
    for verdict in dict.fromkeys(r.verdict for _, r in groups):
        axes.barh([0], [0], color=VERDICT_COLOURS[verdict], label=f"measured: {verdict}")
    if any(r.reference for _, r in groups):
        axes.barh([p + 0.2 for p in positions], [r.reference or 0 for _, r in groups], 0.4,
                  color="0.8", hatch="//", edgecolor="0.45", label="documented")
    limits = [(p, r.limit_gbs / GBS_PER_UNIT[r.unit]) for p, (_, r) in zip(positions, groups)
              if r.limit_gbs and r.unit in GBS_PER_UNIT]
    for index, (position, limit) in enumerate(limits):
        axes.vlines(limit, position - 0.45, position + 0.45, color="black", linestyle=":",
                    label=None if index else "physical limit")
    axes.set_yticks(positions, names, fontsize="small")
    axes.set_ylim(max(len(groups), 2) - 0.5, -0.5)  # the first run on top; thin lone bars
    axes.xaxis.set_major_locator(MaxNLocator(nbins=4))
    axes.xaxis.set_major_formatter(_numbers())
    axes.set_xlabel(value_title)


def _key_text(row: Row) -> str:
    return f"@ {size_text(row.size)}" if row.size is not None else str(row.key)


def _numbers() -> FuncFormatter:
    """Tick labels as plain numbers with thousands separators (a formatter per axis)."""
    return FuncFormatter(lambda value, _pos: f"{value:,.0f}" if value >= 10 else f"{value:g}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()
