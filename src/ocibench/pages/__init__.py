"""The pages ocibench writes, and how: the report's, the sweep's and the history's
(docs/architecture.md).

output    the staged writer: every file of a page at once or none, never through a link
html      the one Jinja2 environment (autoescape on, an undefined name an error) and
          the page templates (``templates/``)

It imports nothing of ocibench: what a page shows is its application's.
"""
