#!/usr/bin/env bash
# Make the benchmark sources available to an air-gapped machine from local git
# checkouts (snapshots) of their upstream repositories, honestly.
#
#   scripts/mirror-from-checkouts.sh [--shape SHAPE] PKG=GITDIR[#REV][@VERSION] ...
#
#   PKG      a Spack package name (osu-micro-benchmarks, nccl-tests, intel-mpi-benchmarks,
#            stream, ucx, gdrcopy, ucc, nvbandwidth, ...)
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
# The generated layer of the shape includes that file (ocibench.spack.scopes).
# Real sites use a real source mirror instead (docs/spack-env.md, "Air-gapped").
#
# Two exceptions, both honest:
# * A tag whose GitHub archive the recipe downloads (archive/refs/tags/<tag>.tar.gz:
#   `git archive --prefix=<pkg>-<version>/ <tag> | gzip -n`, e.g. gdrcopy, ucc,
#   nvbandwidth, xpmem 2.6.3) can be made again byte for byte.  When the result has
#   exactly the sha256 the recipe declares, it goes into the source mirror
#   ($OCIBENCH_SOURCE_MIRROR, default <cache>/mirror) under that digest, and Spack
#   verifies it as if downloaded: no develop entry, checksums stay on.
# * A git tree with autogen.sh but no configure (UCX: its release tarballs ship the
#   generated configure, the recipe does not run autoreconf) gets ./autogen.sh run in
#   the extracted copy (needs autoconf, automake, libtool), so it builds as a release.
# Entries of other packages already in <cache>/develop/<shape>.yaml are kept.
set -euo pipefail
cd "$(dirname "$0")/.."

# die, and this checkout's ocibench on PYTHONPATH
# shellcheck source-path=SCRIPTDIR source=lib.sh
source scripts/lib.sh

shape=""
args=()
while (($#)); do
  case $1 in
    --shape) shape=${2:?--shape needs a value}; shift 2 ;;
    --shape=*) shape=${1#--shape=}; shift ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *=*) args+=("$1"); shift ;;
    *) die "unexpected argument '$1' (expected PKG=GITDIR[#REV][@VERSION])" ;;
  esac
done
# shellcheck source=scripts/source-args.sh
source scripts/source-args.sh
((${#args[@]})) || source_args_from_env
((${#args[@]})) || die "no sources given: pass PKG=GITDIR[#REV][@VERSION] or set OCIBENCH_SRC_OMB/_NCCL_TESTS/_IMB/_STREAM"

# ocibench needs its Python tools, which `make setup` installs: name them, rather than
# let the first import fail with a traceback.
missing=$(python3 -m ocibench.requirements --missing) || die "cannot read the Python tools ocibench needs (pyproject.toml)"
[[ -z $missing ]] || die "python3 lacks the Python tools ocibench needs (${missing//$'\n'/ }): run \`make setup\` first"
shape=${shape:-$(python3 -m ocibench.cli shape)} || die "cannot detect the shape (the line above says why)"
python3 -c "import sys; from ocibench import shapes; shapes.shape_path(sys.argv[1])" "$shape" \
  || die "unknown shape '$shape'"
cache=$(python3 -c "from ocibench import paths; print(paths.cache_dir())")
mirror=$(python3 -c "from ocibench import paths; print(paths.source_mirror())")
spack=$(python3 -c "from ocibench import paths; print(paths.spack_root() / 'bin' / 'spack')")
dest_root="$cache/dev-src"
scope_dir="$cache/develop"  # beside the sources, so every clone on this machine sees it
mkdir -p "$dest_root" "$scope_dir"

# The sha256 the package's recipe declares for a version ("" when none), from Spack.
recipe_sha256() {  # pkg version
  [[ -x $spack ]] || return 0
  local probe
  probe=$(mktemp --suffix=.py)
  cat >"$probe" <<'PY'
import sys
import spack.repo
from spack.version import Version
cls = spack.repo.PATH.get_pkg_class(sys.argv[1])
print(cls.versions.get(Version(sys.argv[2]), {}).get("sha256", ""))
PY
  SPACK_PYTHON=${SPACK_PYTHON:-$(command -v python3)} "$spack" python "$probe" "$1" "$2" 2>/dev/null || true
  rm -f "$probe"
}

# Put the tag's GitHub archive into the mirror if it is byte for byte the recipe's.
to_mirror() {  # pkg gitdir tag version -> 0 when it is in the mirror
  local pkg=$1 dir=$2 tag=$3 version=$4 want spack_version tmp got
  git -C "$dir" rev-parse -q --verify "refs/tags/$tag" >/dev/null || return 1
  for spack_version in "$version" "v$version"; do
    want=$(recipe_sha256 "$pkg" "$spack_version")
    [[ -n $want ]] && break
  done
  if [[ -z $want ]]; then
    [[ -x $spack ]] || echo "mirror-from-checkouts: $pkg@$version: no Spack at $spack yet, so the archive of $tag cannot be checked against its recipe: a develop source (after \`make setup\`, run this again to put it in the mirror if it is the recipe's)"
    return 1
  fi
  local digest="$mirror/_source-cache/archive/${want:0:2}/$want.tar.gz"
  if [[ ! -s $digest ]]; then
    tmp=$(mktemp)
    git -C "$dir" archive --format=tar --prefix="$pkg-$version/" "$tag" | gzip -n -6 >"$tmp"
    got=$(sha256sum "$tmp" | cut -d' ' -f1)
    if [[ $got != "$want" ]]; then
      rm -f "$tmp"
      echo "mirror-from-checkouts: $pkg@$spack_version: the archive of $tag is not the recipe's ($got != $want); a develop source instead"
      return 1
    fi
    mkdir -p "$(dirname "$digest")" "$mirror/$pkg"
    mv "$tmp" "$digest"
    chmod 644 "$digest"
    # the human-readable alias `spack mirror create` writes beside it
    ln -sfn "../_source-cache/archive/${want:0:2}/$want.tar.gz" "$mirror/$pkg/$pkg-$spack_version.tar.gz"
  fi
  echo "mirror-from-checkouts: $pkg@$spack_version <- $dir $tag: sha256 $want as in the recipe -> $digest"
  return 0
}

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

entries="" written="" mirrored=""
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
  if [[ $rev != HEAD ]] && to_mirror "$pkg" "$dir" "$rev" "$version"; then
    mirrored+=" $pkg"
    continue
  fi
  dest="$dest_root/$pkg-$version"
  stamp="$dest/.ocibench-source"
  if [[ -f $stamp && $(cat "$stamp") == "$commit" ]]; then
    echo "mirror-from-checkouts: $pkg@$version already at $dest ($commit)"
  else
    rm -rf "$dest"
    mkdir -p "$dest"
    git -C "$dir" archive --format=tar "$commit" | tar -x -C "$dest"
    if [[ -x $dest/autogen.sh && ! -e $dest/configure ]]; then
      echo "mirror-from-checkouts: $pkg@$version: ./autogen.sh (a release tarball has configure)"
      (cd "$dest" && ./autogen.sh >"$dest/.ocibench-autogen.log" 2>&1) \
        || die "$pkg: ./autogen.sh failed (autoconf, automake, libtool installed?): $dest/.ocibench-autogen.log"
    fi
    echo "$commit" >"$stamp"
    echo "mirror-from-checkouts: $pkg@$version <- $dir $rev ($commit) -> $dest"
  fi
  written+=" $pkg"
  entries+="  $pkg:
    # from $(basename "$(dirname "$dir")")/$(basename "$dir") at $commit
    spec: $pkg@=$version
    path: $dest
"
done

out="$scope_dir/$shape.yaml"
# Keep the entries of packages not given this time (and drop those now in the mirror).
kept=""
if [[ -f $out ]]; then
  kept=$(awk -v drop=" $written $mirrored " '
    /^develop:/ { inside = 1; next }
    inside && /^  [^ #][^ ]*:$/ { name = $1; sub(/:$/, "", name); skip = index(drop, " " name " ") > 0 }
    inside && !skip && /^  / { print }' "$out")
fi
[[ -n $entries || -n $kept ]] || { echo "mirror-from-checkouts: no develop entries for $shape"; rm -f "$out"; exit 0; }
{
  echo "# GENERATED by scripts/mirror-from-checkouts.sh for shape $shape: packages built"
  echo "# from local checkouts (Spack develop specs, dev_path=...), not upstream tarballs."
  echo "# Kept in the per-user cache, never in a checkout.  Delete this file to build from"
  echo "# upstream sources (a source mirror or the network) again."
  echo "develop:"
  [[ -z $kept ]] || printf '%s\n' "$kept"
  printf '%s' "$entries"
} >"$out"
echo "mirror-from-checkouts: wrote $out"
