"""Concretize the active environment WITHOUT writing spack.lock; print the roots as JSON.

Run as ``spack -e <repo> python concretize.py``.  Used by the tests to concretize
the one environment for every shape (OCIBENCH_SHAPE=<shape>) in parallel without
touching the lockfile of the shape that is installed on this machine.
``concretize.py --lock``: the roots the environment's spack.lock holds, without solving
(what `make install` concretized).
Output: [{spec, name, namespace, version, hash, compiler, variants, deps, external}] per root.
"""

import json
import sys

import spack.environment as ev

env = ev.active_environment()
if env is None:
    sys.exit("concretize.py: no active environment (run with spack -e <env> python ...)")
if sys.argv[1:] == ["--lock"]:
    pairs = list(env.concretized_specs())
    if not pairs:
        sys.exit(f"concretize.py: no concretized specs in {env.lock_path}")
else:
    pairs = env.concretize(force=True)  # in memory only: env.write() is never called
roots = []
for user_spec, spec in pairs or env.concretized_specs():
    compilers = sorted({d.format("{name}@{version}")
                        for d in spec.dependencies(virtuals=("c", "cxx"))})
    roots.append({
        "user_spec": str(user_spec),
        "spec": spec.format("{name}{@version}{variants}{ arch=architecture}"),
        "name": spec.name,
        "namespace": spec.namespace,
        "version": str(spec.version),
        "hash": spec.dag_hash(),
        "target": str(spec.target),
        "compilers": compilers,
        "variants": {k: (sorted(v.value) if isinstance(v.value, tuple) else v.value)
                     for k, v in spec.variants.items()},
        "external": spec.external,
        "deps": {d.name: {"version": str(d.version), "external": d.external,
                          "namespace": d.namespace,
                          "variants": {k: (sorted(v.value) if isinstance(v.value, tuple)
                                           else v.value) for k, v in d.variants.items()},
                          "compilers": sorted({c.format("{name}@{version}")
                                               for c in d.dependencies(virtuals=("c",))})}
                 for d in spec.traverse(root=False)},
        "tree": spec.tree(format="{name}{@version}{variants}"),
    })
json.dump(roots, sys.stdout, indent=1, default=str)
print()
