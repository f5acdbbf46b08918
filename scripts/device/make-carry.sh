#!/usr/bin/env bash
# The GPU machine's carry (docs/device-runs.md): `make bundle` of the `local` shape for
# its Python, plus the Debian packages its image lacks, split into the two git-ignored
# folders that reach it in two calls, `stash.sh` (.carry-big/) and then `start.sh`
# (.carry/).  start.sh joins the halves and checks them against
# SHA256SUMS, whose digest .carry/bundle.sha256 keeps.
#
#   scripts/device/make-carry.sh PKG=SOURCE[@VERSION] ...   scripts/bundle.sh's sources
#
#   OCIBENCH_BUNDLE_PATCH_REPOS  as for scripts/bundle.sh (Open MPI 5.0.7's URL patch)
#   OCIBENCH_DEVICE_DEBS         .deb files the image lacks besides Lmod: check (gdrcopy's
#                                tests), Boost.Program_options (nvbandwidth); libtool is
#                                downloaded here (apt-get download)
#   OCIBENCH_DEVICE_HALF_MIB     how much of the bundle .carry/ keeps (default 40): the
#                                largest files go to .carry-big/ until the rest fits
#
# This host's own `local` concretization (no GPU) is not the GPU node's, so the bundle
# holds the sources named here and no `spack mirror create` of this host's environment
# (OCIBENCH_BUNDLE_PARTS without mirror), nor its build cache.
set -euo pipefail
cd "$(dirname "$0")/../.."

# shellcheck source-path=SCRIPTDIR source=../lib.sh
source scripts/lib.sh   # die
mkdir -p .carry .carry-big
for d in .carry .carry-big; do
  git check-ignore -q "$d" || die "$d/ must be git-ignored (it holds fetched code and binaries)"
done
rm -rf .carry/bundle .carry/debs .carry-big  # .carry/buildcache (an earlier run's) stays
mkdir -p .carry-big/bundle .carry-big/debs

# The image: Python 3.12 (CPython, manylinux x86_64) without clingo and ReFrame; the
# wheels are the closure of what the node needs (pyproject.toml: the node group) but
# ReFrame's analytics (polars), which the device pipeline's checks do without (--no-deps).
OCIBENCH_SHAPE=local OCIBENCH_BUNDLE=$PWD/.carry/bundle \
OCIBENCH_BUNDLE_PARTS="spack sources wheels os" OCIBENCH_PYTHON_EXTRAS=node \
OCIBENCH_BUNDLE_PIP_EXCLUDE="polars polars-runtime-32" \
OCIBENCH_BUNDLE_PIP_ARGS="--only-binary=:all: --python-version 3.12 --implementation cp \
--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any" \
  bash scripts/bundle.sh "$@"
# The bundle's trust anchor, beside it and outside it (src/ocibench/spack/bundle_verify.py): its
# unchecked= (Open MPI, UCX) installs without checksums only from an authenticated list.
sha256sum .carry/bundle/SHA256SUMS | cut -d' ' -f1 >.carry/bundle.sha256

# Debian packages for start.sh to unpack (dpkg -x) where the image lacks them.
(cd .carry-big/debs && { apt-get download libtool 2>&1 | grep -v unsandboxed || true; })
ls .carry-big/debs/libtool_*.deb >/dev/null 2>&1 || die "apt-get download libtool failed"
for deb in ${OCIBENCH_DEVICE_DEBS:-}; do cp "$deb" .carry-big/debs/; done

# The split: the largest files first, each to the same path under .carry-big/bundle/.
limit=$((${OCIBENCH_DEVICE_HALF_MIB:-40} * 1024 * 1024))
kept=$(du -sb .carry/bundle | cut -f1)
while ((kept > limit)) && read -r size rel; do
  mkdir -p ".carry-big/bundle/$(dirname "$rel")"
  mv ".carry/bundle/$rel" ".carry-big/bundle/$rel"
  kept=$((kept - size))
done < <(cd .carry/bundle && find . -type f ! -name SHA256SUMS ! -name BUNDLE -printf '%s %P\n' \
         | sort -rn)
du -sh .carry .carry-big
echo "make-carry: device calls: stash with .carry-big, then start with .carry (docs/device-runs.md)"
