#!/usr/bin/env bash
# Make the benchmark sources available to an air-gapped machine from local git
# checkouts (snapshots) of their upstream repositories, honestly.
#
#   scripts/mirror-from-checkouts.sh [--shape SHAPE] PKG=GITDIR[#REV][@VERSION] ...
#
#   PKG      a Spack package name (osu-micro-benchmarks, nccl-tests, intel-mpi-benchmarks, stream)
#   GITDIR   a git repository (bare or not) of that package's upstream sources
#   REV      the commit or tag to take (default HEAD)
#   VERSION  the version it is (default: read from REV's tag, configure.ac or stream.c)
#
# Without PKG=... arguments it reads OCIBENCH_SRC_OMB, OCIBENCH_SRC_NCCL_TESTS,
# OCIBENCH_SRC_IMB and OCIBENCH_SRC_STREAM (each GITDIR[#REV][@VERSION]).
#
# Why `develop` and not a source mirror: an archive made from a git checkout is not
# the upstream release tarball, so its sha256 differs from the one in the recipe.
# Putting it into a mirror under the recipe's name would need a checksum exemption
# and would hide where the code came from.  Instead each package becomes a Spack
# *develop* spec: the sources are extracted (read-only snapshots stay untouched)
# into $OCIBENCH_CACHE/dev-src/<pkg>-<version>/, and a git-ignored scope
# <cache>/develop/<shape>.yaml lists them.  Spack then builds from that
# directory and records it: every such spec carries dev_path=<dir> in
# `spack find -v`, in its hash and in the module's OCIBENCH_SPEC_* provenance.
# The generated layer of the shape includes that file (ocibench.spack_config).
# Real sites use a real source mirror instead (docs/spack-env.md, "Air-gapped").
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "mirror-from-checkouts: $*" >&2; exit 1; }
# This checkout's ocibench (the project is never pip-installed: src/ocibench/requirements.py).
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

shape=""
args=()
while (($#)); do
  case $1 in
    --shape) shape=${2:?--shape needs a value}; shift 2 ;;
    --shape=*) shape=${1#--shape=}; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *=*) args+=("$1"); shift ;;
    *) die "unexpected argument '$1' (expected PKG=GITDIR[#REV][@VERSION])" ;;
  esac
done
if ((${#args[@]} == 0)); then
  [[ -n ${OCIBENCH_SRC_OMB:-} ]] && args+=("osu-micro-benchmarks=$OCIBENCH_SRC_OMB")
  [[ -n ${OCIBENCH_SRC_NCCL_TESTS:-} ]] && args+=("nccl-tests=$OCIBENCH_SRC_NCCL_TESTS")
  [[ -n ${OCIBENCH_SRC_IMB:-} ]] && args+=("intel-mpi-benchmarks=$OCIBENCH_SRC_IMB")
  [[ -n ${OCIBENCH_SRC_STREAM:-} ]] && args+=("stream=$OCIBENCH_SRC_STREAM")
fi
((${#args[@]})) || die "no sources given: pass PKG=GITDIR[#REV][@VERSION] or set OCIBENCH_SRC_OMB/_NCCL_TESTS/_IMB/_STREAM"

shape=${shape:-$(python3 -m ocibench.cli shape)} || die "cannot detect the shape (is ocibench installed? run make setup)"
python3 -c "import sys; from ocibench import shapes; shapes.shape_path(sys.argv[1])" "$shape" \
  || die "unknown shape '$shape'"
cache=$(python3 -c "from ocibench import paths; print(paths.cache_dir())")
dest_root="$cache/dev-src"
scope_dir="$cache/develop"  # beside the sources, so every clone on this machine sees it
mkdir -p "$dest_root" "$scope_dir"

# The version a revision of a package is.
version_of() {  # pkg gitdir rev
  local pkg=$1 dir=$2 rev=$3 tag
  if tag=$(git -C "$dir" describe --tags --exact-match "$rev" 2>/dev/null); then
    # v2.19.6, IMB-v2021.7 -> 2.19.6, 2021.7
    echo "$tag" | sed -E 's/^[^0-9]*//'
    return
  fi
  case $pkg in
    osu-micro-benchmarks)  # AC_INIT([OSU-Micro-Benchmarks], [7.4], ...)
      git -C "$dir" show "$rev:configure.ac" | sed -nE 's/^AC_INIT\(\[[^]]*\], *\[([0-9.]+)\].*/\1/p' | head -1 ;;
    stream)  # Revision: $Id: stream.c,v 5.10 ...
      git -C "$dir" show "$rev:stream.c" | sed -nE 's/.*stream\.c,v ([0-9.]+) .*/\1/p' | head -1 ;;
  esac
}

entries=""
for arg in "${args[@]}"; do
  pkg=${arg%%=*}; rest=${arg#*=}
  version=""; rev=HEAD
  if [[ $rest == *@* ]]; then version=${rest##*@}; rest=${rest%@*}; fi
  if [[ $rest == *'#'* ]]; then rev=${rest##*#}; rest=${rest%%#*}; fi
  dir=$rest
  git -C "$dir" rev-parse --git-dir >/dev/null 2>&1 || die "$pkg: $dir is not a git repository"
  commit=$(git -C "$dir" rev-parse --verify --quiet "$rev^{commit}") || die "$pkg: no revision '$rev' in $dir"
  version=${version:-$(version_of "$pkg" "$dir" "$rev")}
  [[ -n $version ]] || die "$pkg: cannot tell the version of $rev; give it as $pkg=$dir#$rev@VERSION"
  dest="$dest_root/$pkg-$version"
  stamp="$dest/.ocibench-source"
  if [[ -f $stamp && $(cat "$stamp") == "$commit" ]]; then
    echo "mirror-from-checkouts: $pkg@$version already at $dest ($commit)"
  else
    rm -rf "$dest"
    mkdir -p "$dest"
    git -C "$dir" archive --format=tar "$commit" | tar -x -C "$dest"
    echo "$commit" >"$stamp"
    echo "mirror-from-checkouts: $pkg@$version <- $dir $rev ($commit) -> $dest"
  fi
  entries+="  $pkg:
    # from $(basename "$(dirname "$dir")")/$(basename "$dir") at $commit
    spec: $pkg@=$version
    path: $dest
"
done

out="$scope_dir/$shape.yaml"
{
  echo "# GENERATED by scripts/mirror-from-checkouts.sh for shape $shape: packages built"
  echo "# from local checkouts (Spack develop specs, dev_path=...), not upstream tarballs."
  echo "# Kept in the per-user cache, never in a checkout.  Delete this file to build from"
  echo "# upstream sources (a source mirror or the network) again."
  echo "develop:"
  printf '%s' "$entries"
} >"$out"
echo "mirror-from-checkouts: wrote $out"
