"""``ocibench history --html``: each node's figure over time beside the cluster's median,
the documented figure and the floor, as one self-contained page (docs/history.md).

One plot per figure (check, variant, size, figure): the node asked for (``--node``) in
colour, else every node's values as thin grey lines; the cluster's median per session
(:meth:`ocibench.history.store.History.cluster_medians`) in black, and the newest
documented figure and floor as horizontal lines.  The page is the Jinja2 template
``templates/history.html`` with autoescape on; the plots are PNGs embedded as data URIs
and draw every text as written (:data:`ocibench.report.plots.PLAIN_TEXT`).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ocibench.history.store import History, Record  # noqa: E402
from ocibench.report import html  # noqa: E402
from ocibench.report.model import size_text  # noqa: E402
from ocibench.report.plots import PLAIN_TEXT, VERDICT_COLOURS  # noqa: E402

Key = tuple[str, str, int | None, str]   # check, variant, size, figure


def when(time: float) -> str:
    return datetime.fromtimestamp(time, timezone.utc).isoformat(timespec="seconds")


def title(key: Key) -> str:
    check, variant, size, figure = key
    parts = [check, variant, figure] + ([size_text(size)] if size is not None else [])
    return " ".join(p for p in parts if p)


def _dates(times: Sequence[float]) -> list[datetime]:
    return [datetime.fromtimestamp(t, timezone.utc) for t in times]


def plot(key: Key, by_node: dict[str, list[Record]], medians: list[tuple[float, float]],
         node: str | None) -> str:
    """One figure's PNG, as a data URI."""
    with matplotlib.rc_context(PLAIN_TEXT):
        figure = Figure(figsize=(9.0, 3.6), dpi=100, layout="constrained")
        axes = figure.subplots()
        for name, records in sorted(by_node.items()):
            if name == node:
                continue
            axes.plot(_dates([r.time for r in records]), [r.value for r in records],
                      color="#bbbbbb", linewidth=0.8, marker=".", markersize=3,
                      label="other nodes" if not axes.get_legend_handles_labels()[1] else None)
        if node in by_node:
            records = by_node[node]
            axes.plot(_dates([r.time for r in records]), [r.value for r in records],
                      color="C0", linewidth=1.6, label=node)
            for verdict in ("fail", "suspicious"):
                bad = [r for r in records if r.verdict == verdict]
                if bad:
                    axes.scatter(_dates([r.time for r in bad]), [r.value for r in bad],
                                 s=40, facecolors="none", edgecolors=VERDICT_COLOURS[verdict],
                                 label=verdict, zorder=3)
        if medians:
            axes.plot(_dates([t for t, _ in medians]), [m for _, m in medians],
                      color="black", linewidth=1.4, label="cluster median")
        newest = max((r for records in by_node.values() for r in records),
                     key=lambda r: r.time, default=None)
        if newest is not None and newest.documented is not None:
            axes.axhline(newest.documented, color="C2", linestyle="--", label="documented")
        if newest is not None and newest.floor is not None:
            axes.axhline(newest.floor, color="#d62728", linestyle=":", label="floor")
        locator = AutoDateLocator()
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        axes.set_ylabel(newest.unit if newest is not None else "")
        axes.set_title(title(key))
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize="small", loc="best")
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(history: History, records: list[Record], node: str | None,
           since: float | None, source: Path) -> str:
    """The page of ``records`` (what the filters selected); the cluster's median and the
    other nodes' lines come from ``history``."""
    keys = list(dict.fromkeys(r.key for r in records))
    figures = []
    for key in keys:
        by_node = history.figure(*key, since=since)
        if node:
            by_node = {node: by_node.get(node, [])}
        medians = history.cluster_medians(*key, since=since)
        newest = [r for r in records if r.key == key]
        figures.append({
            "title": title(key), "plot": plot(key, by_node, medians, node),
            "rows": [{"node": r.node, "time": when(r.time), "value": _number(r.value),
                      "unit": r.unit, "documented": _number(r.documented),
                      "floor": _number(r.floor), "verdict": r.verdict,
                      "session": r.session, "image": r.image or "-",
                      "driver": r.driver or "-"}
                     for r in (newest[-1:] if node else newest)],
        })
    return html.template("history.html").render(
        generated=when(datetime.now(timezone.utc).timestamp()), source=str(source),
        node=node, since=when(since) if since is not None else None, figures=figures)

