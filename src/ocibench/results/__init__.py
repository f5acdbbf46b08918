"""Run reports read and judged: the one model of a run that the report, the sweep and
the history share (docs/architecture.md).

load    ReFrame JSON run reports and ``ocibench evaluate --json`` outputs, each run
        re-judged from the shape files (never a stored verdict trusted)
model   a run's :class:`~ocibench.results.model.Result`: its judged rows, verdict,
        provenance and next step; the report's benchmark families

It sits above the reframe layer (the run report's reader) and below the history and
the applications; it writes nothing.
"""
