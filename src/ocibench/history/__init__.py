"""The history layer: every judged figure of every node, kept over time (docs/history.md).

store   the per-node results store: one SQLite file, :class:`store.Record` rows
        (node, check, variant, size, figure, value, verdict, time, session, image,
        driver) and node events (flagged, drained, resumed)
rows    judged rows (:class:`ocibench.figures.judge.Row`) of one run as Records: the
        one conversion the sweep and ``ocibench history add`` share
drift   a node's figures drifting below its own past (docs/drift.md)
current each node's current verdicts, published beside the history for the
        healthcheck, which reads them in O(1) and never opens the history
runs    ReFrame run reports read into Records (``ocibench history add``)

It sits above the results layer (the run reader that judges each run) and below the
report, the sweep and the healthcheck, which all read or write it; it imports nothing
above results.
"""
