"""Scripts that run inside Spack's own interpreter (``spack python <file>``).

They import ``spack`` and nothing from ``ocibench``; ocibench runs them as
subprocesses and reads the JSON they print.  Not imported by ocibench itself.
"""
