"""Print the hash of every spec of the active environment that a build cache can carry.

Run as ``spack -e <repo> python bundle_specs.py`` (scripts/bundle.sh).  That is each
installed node of the concretized environment that this host built: not an external
(the node has its own), not a develop spec (its hash names this host's source
directory, dev_path=..., so no other host concretizes to it).
"""

import spack.environment as ev
import spack.traverse as traverse

env = ev.active_environment()
if env is None:
    raise SystemExit("bundle_specs.py: no active environment (spack -e <env> python ...)")
for spec in traverse.traverse_nodes(env.concrete_roots(), key=traverse.by_dag_hash):
    if spec.external or "dev_path" in spec.variants or not spec.installed:
        continue
    print(spec.dag_hash())
