"""Figures: from a benchmark's output to a verdict.

Layer 3 of ocibench (docs/architecture.md): may use the vocabulary (benchmarks,
metrics, capabilities, paths) and ``shapes``; never ``node``, ``spack``, ``reframe``
or the applications above them.  ``outputs`` parses, ``references`` finds the shape's
figure, ``policy`` holds the tolerance, ``judge`` compares and names causes
(``ucx_proto``, ``nccl_path``, ``ceilings``), ``evaluate`` ties them into one verdict.
"""
