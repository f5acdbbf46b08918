"""The acceptance report: every measured figure beside its documented value (with
the document it comes from) and the physical limit of the link or memory involved.

Inputs are ReFrame JSON run reports and ``ocibench evaluate --json`` outputs; see
docs/report.md.  :func:`build` writes ``report.html``, ``report.json`` and the PNG plots,
all of them or none (:mod:`ocibench.pages.output`).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ocibench.pages.output import OutputError, staged
from ocibench.results.load import InputError, load, shape_of
from ocibench.results.model import Result, status_counts, verdict_counts

__all__ = ["InputError", "OutputError", "build"]


def build(inputs: list[Path], outdir: Path, provenance: Path | None = None) -> dict[str, Any]:
    """Write the report into ``outdir`` and return what report.json holds.

    Every input is read and checked before anything is written; the files are then
    made in a temporary directory and moved into ``outdir`` only once all of them are.
    """
    # here, not at the top: the history's pages import this package and need neither
    # matplotlib (a third of a second to import) nor the report's plots
    from ocibench.report import html, plots

    results = load(inputs, provenance)
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    measured = [r for r in results if r.rows]
    with staged(outdir) as stage:
        written = {
            (shape, family): plots.plot_family(
                [r for r in measured if (r.shape, r.family) == (shape, family)],
                shape, family, stage)
            for shape, family in dict.fromkeys((r.shape, r.family) for r in measured)
        }
        summary = _summary(results, written, inputs, generated)
        (stage / "report.json").write_text(json.dumps(summary, indent=2) + "\n")
        (stage / "report.html").write_text(html.render(results, written, inputs, generated))
    return summary


def _summary(results: list[Result], written: dict[tuple[str, str], Path],
             inputs: list[Path], generated: str) -> dict[str, Any]:
    shapes: dict[str, Any] = {}
    for shape in dict.fromkeys(r.shape for r in results):
        mine = [r for r in results if r.shape == shape]
        data = shape_of(shape).data
        shapes[shape] = {
            "links_gbs": data["links"],
            "memory_bandwidth_gbs": (data.get("memory") or {}).get("bandwidth_gbs"),
            "verdicts": verdict_counts(mine),
            "runs": status_counts(mine),
            "plots": {f: p.name for (s, f), p in written.items() if s == shape},
            "results": [r.to_dict() for r in mine],
        }
    return {
        "generated": generated,
        "inputs": [str(p) for p in inputs],
        "verdicts": verdict_counts(results),
        "runs": status_counts(results),
        "shapes": shapes,
    }
