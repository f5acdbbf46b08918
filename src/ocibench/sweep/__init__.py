"""``ocibench sweep``: every node of a Slurm cluster judged, through ReFrame (docs/sweep.md).

plan       which nodes run which check, in waves (pure)
verdicts   per-node verdicts: judged figures, robust outliers, pair attribution (pure)
actions    what a failure asks of the admin, drain reasons and the drain cap (pure)
rfm        the check cases (ReFrame --dry-run) and one ReFrame run per step of a wave
run        the sweep from start to end
output     the JSON and the HTML matrix

What it asks of Slurm, the drain budget and the wording of a drain are
:mod:`ocibench.cluster`'s, shared with the healthcheck; each run report is read and
judged by :mod:`ocibench.results`, as the report and the history read theirs.
"""
