"""Spack: the per-shape configuration scopes, the bundle's integrity check and the
scripts run inside ``spack python``.

Layer 5 of ocibench (docs/architecture.md): may use every layer below it; never
``reframe`` or the applications.  Absolute imports only: inside ``spack python`` the
name ``spack`` is Spack's own package, never this one.
"""
