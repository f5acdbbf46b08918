"""Print ``HASH NAME@VERSION`` of the environment's specs whose sources are unchecked.

Run as ``spack -e <repo> python unchecked_specs.py NAME@VERSION ...`` (scripts/install.sh)
with the bundle's ``unchecked=`` list.  Each such spec is installed on its own with
``--no-checksum --only package`` after its dependencies (installed with checksums), so
the order is a dependency order: an unchecked dependency (UCX) before its unchecked
dependent (Open MPI).  Externals are skipped; an entry the environment does not use is
named on stderr.
"""

import sys

import spack.environment as ev
import spack.traverse as traverse

env = ev.active_environment()
if env is None:
    raise SystemExit("unchecked_specs.py: no active environment (spack -e <env> python ...)")
wanted = {arg: f"{arg.split('@', 1)[0]}@={arg.split('@', 1)[1]}" for arg in sys.argv[1:]}
used = set()
for spec in traverse.traverse_nodes(env.concrete_roots(), order="post",
                                    key=traverse.by_dag_hash):
    if spec.external:
        continue
    for arg, constraint in wanted.items():
        if spec.satisfies(constraint):
            used.add(arg)
            print(spec.dag_hash(), spec.format("{name}@{version}"))
for arg in sorted(set(wanted) - used):
    print(f"unchecked_specs.py: {arg} is not in the environment", file=sys.stderr)
