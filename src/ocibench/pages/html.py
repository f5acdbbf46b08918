"""The one Jinja2 environment every page of ocibench is rendered in: the report's,
the history's and the sweep's.

Autoescape is on: every text from the inputs (run names, reasons, parameters,
provenance, node names) is escaped by the templates, never by hand; an undefined name
is an error rather than an empty string.  The templates are ``templates/`` beside this
module.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).parent / "templates"


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["css"] = _css
    return environment


def template(name: str) -> jinja2.Template:
    """A page template of pages/templates, in the one environment every page uses
    (the report, the history's page, the sweep's page): escaping on, an undefined
    name an error rather than an empty string."""
    return _environment().get_template(name)


def _css(verdict: str) -> str:
    return verdict.replace(" ", "-")
