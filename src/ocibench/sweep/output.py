"""The sweep's files: JSON for dashboards, and the node x check matrix as one offline page.

Both are written through :func:`ocibench.pages.output.write`: a reader sees the old
file or the new one, never half of one, and never one written through a link.  The
page is the Jinja2 template ``pages/templates/sweep.html`` with autoescape on.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ocibench.metrics import NODE_VERDICTS
from ocibench.pages import html
from ocibench.sweep.plan import NODE_SEPARATOR, describe
from ocibench.sweep.run import Sweep


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def to_json(result: Sweep) -> str:
    return json.dumps({**result.to_dict(), "generated": _now()}, indent=1) + "\n"


def _anchor(node: str) -> str:
    return "node-" + "".join(c if c.isalnum() or c in "-." else "_" for c in node)


def _value(cell: dict[str, Any]) -> str:
    value = cell.get("value")
    return "" if value is None else f"{value:.2f} {cell.get('unit') or ''}".strip()


def to_html(result: Sweep) -> str:
    data = result.to_dict()
    cases = [c.name for c in result.plan.cases if c.name not in result.plan.not_run]
    nodes = []
    for name, node in data["nodes"].items():
        checks = node["checks"]
        row = []
        for case in cases:
            cell = checks.get(case)
            if cell is None:
                row.append({"css": "none", "text": "—", "title": f"{case}: not run on {name}"})
            else:
                row.append({"css": cell["verdict"], "text": _value(cell) or cell["verdict"],
                            "title": f"{case}: {cell['verdict']}: {cell['reason']}"})
        nodes.append({
            "name": name, "anchor": _anchor(name), "verdict": node["verdict"],
            "action": node["action"], "reason": node["reason"], "next": node["next"],
            "drain_reason": node["drain_reason"], "row": row,
            "details": [{"case": case, "verdict": cell["verdict"], "action": cell["action"],
                         "step": cell["step"], "fault": cell["fault"],
                         "value": _value(cell), "reason": cell["reason"],
                         "jobs": ", ".join(NODE_SEPARATOR.join(j) for j in cell["jobs"])}
                        for case, cell in checks.items()],
        })
    summary = data["summary"]
    return html.template("sweep.html").render(
        generated=_now(), partition=result.partition, outlier_k=result.outlier_k,
        setvars=list(result.setvars), stopped=result.stopped, errors=list(result.errors),
        summary=[(str(v), summary[str(v)]) for v in NODE_VERDICTS],
        plan_line=describe(result.plan).splitlines()[0], drain=data["drain"],
        cases=cases, nodes=nodes, skipped=sorted(result.skipped.items()))
