"""ReFrame: the site configuration derived from the shape files, the launchers, the
Slurm scheduler variant, and the one reader of ReFrame's run reports (runreport).

Layer 6 of ocibench (docs/architecture.md): may use every layer below it; never the
applications (``report``, ``sweep``, ``commands``).  Absolute imports only: the name
``reframe`` at top level is ReFrame itself.
"""
