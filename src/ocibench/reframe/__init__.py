"""ReFrame: the site configuration derived from the shape files, the launchers and the
Slurm scheduler variant.

Layer 6 of ocibench (docs/architecture.md): may use every layer below it; never the
applications (``report``, ``sweep``, ``commands``).  Absolute imports only: the name
``reframe`` at top level is ReFrame itself.
"""
