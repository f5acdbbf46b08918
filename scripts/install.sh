#!/usr/bin/env bash
# `make install`: build the detected shape's stack with the pinned Spack, then write
# its Lmod module tree.  Run `make setup` first (the Makefile does).
#
#   OCIBENCH_SHAPE=<shape>   install another shape's stack (default: detected)
#   OCIBENCH_JOBS=<n>        parallel make jobs (default: all cores)
#
# Prints the `module use` line at the end; the time of the install goes to
# install-<shape>.log beside the module trees (<modules root>/install-<shape>.log).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "install: $*" >&2; exit 1; }
# This checkout's ocibench (the project is never pip-installed: src/ocibench/requirements.py).
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

# Module files and installed prefixes: readable by every user, writable by the owner
# only (packages.yaml sets the same for the install tree).
umask 022

shape=$(python3 -m ocibench.cli shape) || die "cannot detect the shape"
spack_root=$(python3 -m ocibench.cli spack-config --print spack-root)
[[ -x $spack_root/bin/spack ]] || die "no Spack at $spack_root: run \`make setup\`"
generated=$(python3 -m ocibench.cli spack-config --print generated-dir)
[[ -f $generated/shapes/$shape.yaml ]] || die "no generated scope for $shape in $generated: run \`make setup\`"
modulepath=$(python3 -m ocibench.cli spack-config --print modulepath --shape "$shape")
module_root=$(python3 -m ocibench.cli spack-config --print module-root --shape "$shape")

export SPACK_PYTHON=${SPACK_PYTHON:-$(command -v python3)}
# The environment reads the shape from OCIBENCH_SHAPE (else detected.yaml): pin it.
export OCIBENCH_SHAPE=$shape
# shellcheck source=/dev/null  # Spack's own script, not this repository's
. "$spack_root/share/spack/setup-env.sh"
spack env activate .

jobs=${OCIBENCH_JOBS:-$(nproc)}
log="$(dirname "$module_root")/install-$shape.log"
mkdir -p "$(dirname "$log")"
echo "install: shape $shape, $jobs jobs, spack $(spack --version)"
start=$(date +%s)
# Re-concretize every time: spack.lock is per checkout and per shape (not committed,
# docs/spack-env.md), and the shape's generated layer may have changed since.
# reuse: true keeps what is installed and still fits.
spack concretize --force
spack install --fail-fast -j "$jobs"
end=$(date +%s)
echo "$(date -u +%FT%TZ) shape=$shape seconds=$((end - start)) jobs=$jobs" >>"$log"
echo "install: spack install took $((end - start)) s (logged in $log)"

# The tree is rebuilt from scratch, so a module of a spec no longer in the
# environment does not linger.  --upstream-modules: a spec reused from an upstream
# Spack (a site's shared install tree, `upstreams.yaml`) gets its module here too.
spack module lmod refresh --delete-tree --upstream-modules -y
[[ -d $modulepath ]] || die "no module tree at $modulepath after refresh"
echo
echo "Module tree of $shape: $module_root"
echo "  module use $modulepath"
echo "  module load openmpi omb"
