"""The node: what this machine has and runs (preflight, provenance, the module audit).

Layer 4 of ocibench (docs/architecture.md): may use the vocabulary, ``shapes`` and
``figures``; never ``spack``, ``reframe`` or the applications above them.
"""
