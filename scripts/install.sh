#!/usr/bin/env bash
# `make install`: build the detected shape's stack with the pinned Spack, then write
# its Lmod module tree.  Run `make setup` first (the Makefile does).
#
#   scripts/install.sh [SPEC ...]   only these roots of the environment (default: all)
#
#   OCIBENCH_SHAPE=<shape>   install another shape's stack (default: detected)
#   OCIBENCH_JOBS=<n>        parallel make jobs (default: all cores)
#   OCIBENCH_BUNDLE=<dir>    the bundle `make setup` took (scripts/bundle.sh): the packages
#                            its BUNDLE names unchecked= are installed first, each alone and
#                            with --no-checksum (their sources stand for upstream's files
#                            without being their bytes); everything else keeps its checksums
#
# Prints the `module use` line at the end; the time of the install goes to
# install-<shape>.log beside the module trees (<modules root>/install-<shape>.log).
set -euo pipefail
cd "$(dirname "$0")/.."

# die, and this checkout's ocibench on PYTHONPATH
# shellcheck source-path=SCRIPTDIR source=lib.sh
source scripts/lib.sh

# Module files and installed prefixes: readable by every user, writable by the owner
# only (packages.yaml sets the same for the install tree).
umask 022

# The bundle's unchecked= decides what Spack installs without checksums: read only
# after the bundle is checked again (set-up checked it too, but it may have changed
# since; src/ocibench/spack/bundle_verify.py refuses an unauthenticated unchecked=).
# As in set-up, the check names the directory it verified (the bundle, or the copy of
# it that only this user can change, <cache>/bundle), and that one is used.
unchecked=""
bundle=""
if [[ -n ${OCIBENCH_BUNDLE:-} ]]; then
  checked=$(python3 -m ocibench.spack.bundle_verify --stage --print unchecked "$OCIBENCH_BUNDLE") \
    || die "bundle $OCIBENCH_BUNDLE refused (the lines above name each file); nothing was installed"
  bundle=$(sed -n 1p <<<"$checked")
  unchecked=$(sed -n 2p <<<"$checked")
fi

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
if [[ -n $unchecked ]]; then
  echo "install: WARNING: the bundle's sources of $unchecked are NOT upstream's files:"
  echo "install: WARNING: they are installed WITHOUT checksums (unchecked/ of $OCIBENCH_BUNDLE)"
  # Their own mirror, in a configuration scope of this step only: no checked fetch
  # ever sees it.  --no-checksum covers a whole `spack install`, so each unchecked
  # package is installed alone (--only package) after its dependencies (checked).
  scope=$(mktemp -d)
  trap 'rm -rf "$scope"' EXIT
  printf 'mirrors:\n  ocibench-unchecked:\n    url: file://%s\n    binary: false\n' \
    "$bundle/unchecked" >"$scope/mirrors.yaml"
  # shellcheck disable=SC2086  # the list of PKG@VERSION
  specs=$(spack python src/ocibench/spack/scripts/unchecked_specs.py $unchecked)
  while read -r hash name; do
    [[ -n $hash ]] || continue
    spack install --fail-fast -j "$jobs" --only dependencies "/$hash"
    echo "install: WARNING: $name from the bundle's unchecked/, without its checksum"
    spack -C "$scope" install --fail-fast -j "$jobs" --no-checksum --only package "/$hash"
  done <<<"$specs"
fi
spack install --fail-fast -j "$jobs" "$@"
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
