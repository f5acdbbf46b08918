"""What ocibench asks of Slurm, for the sweep and the healthcheck alike
(docs/architecture.md).

slurm     hostlists, node states and listings, scontrol drain / resume, reservations,
          the NVLink domains of topology/block
budget    the drain budget: how many nodes ocibench may hold drained at once, shared by
          every drain it makes (the sweep's --drain, the healthcheck, the prolog)
reason    how a drain is worded: the ``ocibench:`` prefix of every reason ocibench
          writes and the length Slurm shows whole

It imports nothing of ocibench above the vocabulary: what to drain is the sweep's and
the healthcheck's decision.
"""
