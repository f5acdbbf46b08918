"""The report as one self-contained HTML page: no network, plots embedded as data URIs.

One section per shape: its physical limits and verdict counts, then per benchmark
family the plot and one table per result with its provenance, then the test cases
ReFrame skipped and the documented figures that no input measured.

The page is the Jinja2 template ``pages/templates/report.html``, rendered in the one
environment of every page (:mod:`ocibench.pages.html`) with autoescape: every text from
the inputs (run names, reasons, parameters, provenance) is escaped by the template,
never by hand.  This module only puts the results into the plain
values the template shows (numbers formatted, dashes for what is unknown).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ocibench.pages.html import template
from ocibench.results.load import shape_of
from ocibench.results.model import VERDICTS, Result, Row, size_text, status_counts, verdict_counts

COLUMNS = ("size / key", "measured", "documented", "source", "floor", "measured / documented",
           "physical limit", "of limit", "of this node's ceiling", "verdict")
TEXT_COLUMNS = ("size / key", "source", "floor", "physical limit", "of this node's ceiling")


def render(results: list[Result], plots: dict[tuple[str, str], Path],
           inputs: list[Path], generated: str) -> str:
    """The whole page; ``plots`` maps (shape, family) to its PNG."""
    shapes = list(dict.fromkeys(r.shape for r in results))
    return template("report.html").render(
        generated=generated, inputs=[str(p) for p in inputs],
        columns=[(c, c in TEXT_COLUMNS) for c in COLUMNS],
        shapes=[_shape(s, [r for r in results if r.shape == s], plots) for s in shapes])


def _counts(results: list[Result]) -> dict[str, Any]:
    """Figures by verdict, then runs by outcome."""
    figures = verdict_counts(results)
    return {"figures": [(v, figures[v]) for v in VERDICTS],
            "runs": ", ".join(f"{n} {what}" for what, n in status_counts(results).items())}


def _shape(shape: str, results: list[Result],
           plots: dict[tuple[str, str], Path]) -> dict[str, Any]:
    data = shape_of(shape).data
    ran = [r for r in results if not r.skipped]
    limits = [(name, value) for name, value in data["links"].items() if value]
    memory = (data.get("memory") or {}).get("bandwidth_gbs")
    if memory:
        limits.append(("memory", memory))
    seen = {row.figure for result in results for row in result.rows}
    return {
        "name": shape,
        "anchor": "shape-" + "".join(c if c.isalnum() else "-" for c in shape),
        "summary": data["summary"],
        "limits": [(name, f"{value:g}") for name, value in limits],
        "counts": _counts(results),
        "families": [{
            "name": family,
            "plot": _data_uri(plots[(shape, family)]) if (shape, family) in plots else None,
            "results": [_result(r) for r in ran if r.family == family],
        } for family in dict.fromkeys(r.family for r in ran)],
        "skipped": [(r.name, r.reason or "no reason recorded") for r in results if r.skipped],
        # the shape's documented figures that no input row was compared with
        "not_measured": [f for f in data["figures"] if f["id"] not in seen],
    }


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _result(result: Result) -> dict[str, Any]:
    return {
        "name": result.name, "check": result.check, "ok": result.ok,
        "verdict": str(result.verdict),
        "reason": result.reason or "no reason given", "notes": result.notes,
        "disagreements": result.disagreements,
        "origin": result.origin,
        "params": ", ".join(f"{k}={v}" for k, v in result.params.items()),
        "recorded": bool(result.provenance.get("recorded")),
        "provenance": _provenance(result.provenance),
        "rows": [_row(r, result) for r in result.rows],
        "ceilings_from": result.ceilings_from,
        "next": None if result.next_step() is None else result.next_step().to_dict(),
    }


def _row(row: Row, result: Result) -> dict[str, str]:
    key = f"{row.size} ({size_text(row.size)})" if row.size and row.size >= 1024 else str(row.key)
    return {
        "key": key,
        "measured": f"{_number(row.measured)} {row.unit}",
        "documented": "—" if row.reference is None else f"{_number(row.reference)} {row.unit}",
        "source": row.source or "—",
        # OCI's acceptance floor and its own verdict, beside the documented figure's.
        "floor": "—" if row.floor is None else
                 f"{_number(row.floor)} {row.unit}: {row.floor_verdict} ({row.floor_source})",
        "ratio": "—" if row.ratio is None else f"{row.ratio:.3f}",
        "limit": f"{row.limit} {row.limit_gbs:g} GB/s" if row.limit and row.limit_gbs else "—",
        "fraction": "—" if row.limit_fraction is None else f"{100 * row.limit_fraction:.1f} %",
        # the node's own copy ceilings (checks/nvbandwidth.py) that bound the figure
        "ceiling": "; ".join(c.text() for c in result.of_ceiling(row)) or "—",
        "verdict": str(row.verdict),
    }


def _number(value: float | None) -> str:
    """Two decimals with thousands separators, as the seeds print them: 12,254.16."""
    return "—" if value is None else f"{value:,.2f}"


def _provenance(prov: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(field, text) for the provenance line; None where it is unknown."""
    specs = "; ".join(f"{s.get('spec') or '?'} (module {s.get('module') or 'not loaded'})"
                      for s in prov.get("specs") or [])
    return [
        ("Spack specs", specs or None),
        ("modules", " ".join(prov["modules"]) if prov.get("modules") else None),
        ("MPI", _text(prov.get("mpi"))), ("UCX", _text(prov.get("ucx"))),
        ("NCCL", _text(prov.get("nccl"))), ("GPU toolkit", _text(prov.get("toolkit"))),
        ("driver", _text(prov.get("driver"))), ("shape", _text(prov.get("shape"))),
        ("hosts", ", ".join(prov["hosts"]) if prov.get("hosts") else None),
        ("date", _text(prov.get("date"))),
    ]


def _text(value: Any) -> str | None:
    return str(value) if value else None
