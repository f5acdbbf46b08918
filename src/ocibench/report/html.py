"""The report as one self-contained HTML page: no network, plots embedded as data URIs.

One section per shape: its physical limits and verdict counts, then per benchmark
family the plot and one table per result with its provenance, then the test cases
ReFrame skipped and the documented figures that no input measured.
"""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path
from typing import Any

from ocibench.report.load import shape_of
from ocibench.report.model import VERDICTS, Result, Row, size_text, status_counts, verdict_counts

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 90em; }
h2 { border-bottom: 2px solid #345; padding-top: .5em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: 90%; }
th, td { border: 1px solid #bbb; padding: .2em .5em; text-align: right; }
th { background: #eef; } td.text, th.text { text-align: left; }
.verdict { font-weight: bold; padding: 0 .4em; border-radius: .3em; white-space: nowrap; }
.pass { background: #cfc; } .fail { background: #f99; }
.suspicious { background: #fd8; } .no-reference { background: #ddd; }
.result { border-left: 4px solid #89a; padding-left: .8em; margin: 1em 0 2em; }
.result.not-ok { border-color: #c33; }
p.provenance { font-size: 85%; margin: .3em 0; } p.provenance i { color: #999; }
img.plot { max-width: 100%; border: 1px solid #ccc; }
.muted { color: #666; }
"""

#: Marks each plot with whether it decoded, and says so at the foot of the page.
IMAGE_CHECK = """
window.addEventListener("load", function () {
  var images = document.querySelectorAll("img.plot"), shown = 0;
  images.forEach(function (img) {
    img.dataset.naturalWidth = img.naturalWidth;
    if (img.naturalWidth > 0) { shown += 1; }
  });
  document.getElementById("image-status").textContent =
    "Plots displayed: " + shown + " of " + images.length + ".";
});
"""

COLUMNS = ("size / key", "measured", "documented", "source", "measured / documented",
           "physical limit", "of limit", "verdict")
TEXT_COLUMNS = ("size / key", "source", "physical limit")


def render(results: list[Result], plots: dict[tuple[str, str], Path],
           inputs: list[Path], generated: str) -> str:
    """The whole page; ``plots`` maps (shape, family) to its PNG."""
    shapes = list(dict.fromkeys(r.shape for r in results))
    nav = "".join(f'<li><a href="#{_anchor(s)}">{escape(s)}</a>: {_summary(_of(results, s))}</li>'
                  for s in shapes)
    sources = "".join(f"<li><code>{escape(str(p))}</code></li>" for p in inputs)
    body = "".join(_shape_section(s, _of(results, s), plots) for s in shapes)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Acceptance report: {escape(', '.join(shapes))}</title>"
        f"<style>{STYLE}</style></head><body>"
        "<h1>Acceptance report: measured vs documented vs physical limit</h1>"
        f'<p class="muted">Generated {escape(generated)}.</p>'
        f"<details><summary>Inputs ({len(inputs)} files)</summary><ul>{sources}</ul></details>"
        f"<h2>Shapes</h2><ul>{nav}</ul>{body}"
        '<footer><p id="image-status" class="muted">Plots: not checked (JavaScript off).</p>'
        f"</footer><script>{IMAGE_CHECK}</script></body></html>\n"
    )


def _of(results: list[Result], shape: str) -> list[Result]:
    return [r for r in results if r.shape == shape]


def _anchor(text: str) -> str:
    return "shape-" + "".join(c if c.isalnum() else "-" for c in text)


def _summary(results: list[Result]) -> str:
    """Figures by verdict, then runs by outcome."""
    figures = verdict_counts(results)
    runs = ", ".join(f"{n} {what}" for what, n in status_counts(results).items())
    return ("figures: " + ", ".join(f'<span class="verdict {_css(v)}">{figures[v]} {escape(v)}'
                                     "</span>" for v in VERDICTS) + f" · runs: {runs}")


def _css(verdict: str) -> str:
    return verdict.replace(" ", "-")


def _shape_section(shape: str, results: list[Result],
                   plots: dict[tuple[str, str], Path]) -> str:
    data = shape_of(shape).data
    ran = [r for r in results if not r.skipped]
    parts = [f'<section id="{_anchor(shape)}"><h2>Shape {escape(shape)}</h2>',
             f"<p>{escape(data['summary'])}</p>", _limits_table(data),
             f"<p>{_summary(results)}</p>"]
    for family in dict.fromkeys(r.family for r in ran):
        parts.append(f"<h3>{escape(family)}</h3>")
        if (shape, family) in plots:
            parts.append(_image(plots[(shape, family)], f"{shape}: {family}"))
        parts += [_result(r) for r in ran if r.family == family]
    skipped = [r for r in results if r.skipped]
    if skipped:
        items = "".join(f"<li>{escape(r.name)}: {escape(r.reason or 'no reason recorded')}</li>"
                        for r in skipped)
        parts.append(f"<h3>Skipped by ReFrame ({len(skipped)})</h3>"
                     f'<ul class="muted">{items}</ul>')
    parts.append(_not_measured(data["figures"], results))
    return "".join(parts) + "</section>"


def _limits_table(data: dict[str, Any]) -> str:
    limits = [(name, value) for name, value in data["links"].items() if value]
    memory = (data.get("memory") or {}).get("bandwidth_gbs")
    if memory:
        limits.append(("memory", memory))
    if not limits:
        return '<p class="muted">No physical limits are known for this shape.</p>'
    cells = "".join(f'<tr><td class="text">{escape(n)}</td><td>{v:g}</td></tr>'
                    for n, v in limits)
    return ('<table><tr><th class="text">physical limit</th><th>GB/s per direction</th></tr>'
            f"{cells}</table>")


def _not_measured(figures: list[dict[str, Any]], results: list[Result]) -> str:
    """The shape's documented figures that no input row was compared with."""
    seen = {row.figure for result in results for row in result.rows}
    missing = [f for f in figures if f["id"] not in seen]
    if not missing:
        return ""
    items = "".join(
        f"<li><code>{escape(f['id'])}</code> ({escape(f['source']['doc'])} sec "
        f"{escape(str(f['source']['section']))})</li>" for f in missing)
    return (f"<h3>Documented figures not measured by these inputs ({len(missing)})</h3>"
            f'<ul class="muted">{items}</ul>')


def _image(path: Path, alt: str) -> str:
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<p><img class="plot" alt="{escape(alt)}" '
            f'src="data:image/png;base64,{encoded}"></p>')


def _result(result: Result) -> str:
    status = "passed" if result.ok else \
        f"did not pass: {escape(result.reason or 'no reason given')}"
    params = ", ".join(f"{escape(k)}={escape(str(v))}" for k, v in result.params.items())
    notes = "".join(f"<br>Note: {escape(n)}" for n in result.notes)
    header = "".join(f'<th class="text">{c}</th>' if c in TEXT_COLUMNS else f"<th>{c}</th>"
                     for c in COLUMNS)
    rows = "".join(_row(r) for r in result.rows) or \
        f'<tr><td class="text" colspan="{len(COLUMNS)}">no values measured</td></tr>'
    return (
        f'<div class="result{"" if result.ok else " not-ok"}">'
        f"<h4>{escape(result.name)}</h4>"
        f"<p>Check <code>{escape(result.check)}</code>"
        f"{' with ' + params if params else ''}: {status}.{notes}<br>"
        f'<span class="muted">from {escape(result.origin)}</span></p>'
        f"{_provenance(result.provenance)}<table><tr>{header}</tr>{rows}</table></div>"
    )


def _row(row: Row) -> str:
    key = f"{row.size} ({size_text(row.size)})" if row.size and row.size >= 1024 else str(row.key)
    limit = f"{row.limit} {row.limit_gbs:g} GB/s" if row.limit and row.limit_gbs else "—"
    documented = f"{_number(row.reference)} {row.unit}" if row.reference is not None else "—"
    ratio = "—" if row.ratio is None else f"{row.ratio:.3f}"
    fraction = "—" if row.limit_fraction is None else f"{100 * row.limit_fraction:.1f} %"
    return (
        f'<tr><td class="text">{escape(key)}</td>'
        f"<td>{_number(row.measured)} {escape(row.unit)}</td><td>{escape(documented)}</td>"
        f'<td class="text">{escape(row.source or "—")}</td><td>{ratio}</td>'
        f'<td class="text">{escape(limit)}</td><td>{fraction}</td>'
        f'<td><span class="verdict {_css(row.verdict)}">{escape(row.verdict)}</span></td></tr>'
    )


def _number(value: float | None) -> str:
    """Two decimals with thousands separators, as the seeds print them: 12,254.16."""
    return "—" if value is None else f"{value:,.2f}"


def _provenance(prov: dict[str, Any]) -> str:
    specs = "; ".join(
        f"{escape(s.get('spec') or '?')} (module {escape(s.get('module') or 'not loaded')})"
        for s in prov.get("specs") or []
    )
    fields = [
        ("Spack specs", specs or None),
        ("modules", escape(" ".join(prov["modules"])) if prov.get("modules") else None),
        ("MPI", _text(prov.get("mpi"))), ("UCX", _text(prov.get("ucx"))),
        ("NCCL", _text(prov.get("nccl"))), ("CUDA", _text(prov.get("cuda"))),
        ("driver", _text(prov.get("driver"))), ("shape", _text(prov.get("shape"))),
        ("hosts", escape(", ".join(prov["hosts"])) if prov.get("hosts") else None),
        ("date", _text(prov.get("date"))),
    ]
    note = "" if prov.get("recorded") else "no provenance.json was recorded; "
    items = " · ".join(f"<b>{name}</b> {value or '<i>unknown</i>'}" for name, value in fields)
    return f'<p class="provenance">Provenance: {note}{items}</p>'


def _text(value: Any) -> str | None:
    return escape(str(value)) if value else None
