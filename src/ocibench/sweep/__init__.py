"""``ocibench sweep``: every node of a Slurm cluster judged, through ReFrame (docs/sweep.md).

plan       which nodes run which check, in waves (pure)
verdicts   per-node verdicts: judged figures, robust outliers, pair attribution (pure)
actions    what a failure asks of the admin, drain reasons and the drain cap (pure)
slurm      hostlists, node states, scontrol drain / resume, reservations
rfm        the check cases (ReFrame --dry-run) and one ReFrame run per step of a wave
run        the sweep from start to end
output     the JSON and the HTML matrix
"""
