#!/usr/bin/env bash
# Fill the git-ignored carry folders that an air-gapped GPU machine needs to run
# scripts/device/gpu-path.sh (docs/device-runs.md):
#
#   .carry/spack.tar.gz            Spack v1.1.0 (git archive of a checkout)
#   .carry/spack-packages.tar.gz   spack-packages releases/v2025.11, repos/spack_repo/builtin only
#   .carry/mirror/                 a Spack source mirror: OpenMPI 5.0.7, UCX (1.19.0) and the URL
#                                  patch the builtin openmpi recipe applies to 5.0.7; VERSIONS
#   .carry/src/*.git, SOURCES      minimal bare git repositories of OMB 7.4 and nccl-tests
#                                  (for scripts/mirror-from-checkouts.sh and the hand build)
#   .carry/debs/                   Debian packages the machine lacks: Lmod + Lua, libtool
#   .whl/                          wheels for the machine's Python 3.12: clingo (Spack's solver),
#                                  ReFrame, archspec and their dependencies
#   .carry/buildcache/             not made here: an earlier run's build cache of UCX and Open MPI,
#                                  `cat buildcache.tar.part-* | tar -x -C .carry` (gpu-path.sh collect)
#
# Every input is named by an environment variable (nothing here knows a machine path):
#
#   OCIBENCH_SPACK_SOURCE            Spack checkout (git)                     [required]
#   OCIBENCH_SPACK_PACKAGES_SOURCE   spack-packages checkout (git)            [required]
#   OCIBENCH_SRC_OMB                 OMB 7.4 git repo, GITDIR#REV              [required]
#   OCIBENCH_SRC_NCCL_TESTS          nccl-tests git repo, GITDIR#REV           [required]
#   OCIBENCH_SRC_UCX                 UCX git repo, GITDIR#vX.Y.Z (v1.19.0 was built on
#                                    the GPU machine, docs/device-runs.md) [required]
#   OCIBENCH_OPENMPI_TARBALL         openmpi-5.0.7 release tarball (.tar.bz2/.gz/.xz) [required]
#   OCIBENCH_SRC_OMPI                Open MPI git repo holding commit d10e976 (the 5.0.7 patch)
#                                    [required unless the mirror already has the patch]
#
# UCX comes as a git tree: ./autogen.sh runs here (autoconf, automake, libtool), so the
# tarball has a configure script as a release tarball does.  None of these archives has
# the recipe's sha256 (re-made from snapshots), which is why the device installs with
# --no-checksum; a real site makes its mirror with `spack mirror create` on an online
# host and keeps the checks (docs/spack-env.md "Air-gapped sites").
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { echo "prepare-carry: $*" >&2; exit 1; }
say() { echo "prepare-carry: $*"; }

for v in OCIBENCH_SPACK_SOURCE OCIBENCH_SPACK_PACKAGES_SOURCE OCIBENCH_SRC_OMB \
         OCIBENCH_SRC_NCCL_TESTS OCIBENCH_SRC_UCX OCIBENCH_OPENMPI_TARBALL; do
  [[ -n ${!v:-} ]] || die "set $v (see the header of $0)"
done

carry=.carry
mkdir -p "$carry"/{mirror,src,debs} .whl
if ! git check-ignore -q "$carry" || ! git check-ignore -q .whl; then
  die ".carry/ and .whl/ must be git-ignored (they hold fetched code and binaries)"
fi

split() {  # GITDIR#REV -> "GITDIR REV"
  local spec=$1
  if [[ $spec == *'#'* ]]; then echo "${spec%%#*} ${spec##*#}"; else echo "$spec HEAD"; fi
}

# -- Spack and its builtin packages ---------------------------------------------------
if [[ ! -s $carry/spack.tar.gz ]]; then
  say "spack.tar.gz <- $(git -C "$OCIBENCH_SPACK_SOURCE" describe --tags --always)"
  git -C "$OCIBENCH_SPACK_SOURCE" archive --prefix=spack/ HEAD | gzip -6 >"$carry/spack.tar.gz"
fi
if [[ ! -s $carry/spack-packages.tar.gz ]]; then
  say "spack-packages.tar.gz <- $(git -C "$OCIBENCH_SPACK_PACKAGES_SOURCE" log -1 --format=%h)"
  git -C "$OCIBENCH_SPACK_PACKAGES_SOURCE" archive --prefix=spack-packages/ HEAD repos/spack_repo/builtin \
    | gzip -6 >"$carry/spack-packages.tar.gz"
fi

# -- source mirror ------------------------------------------------------------------------
# Spack fetches from a mirror by digest: _source-cache/archive/<sha256[:2]>/<sha256>[.<ext>],
# with the sha256 the recipe declares (spack/mirrors/layout.py DefaultLayout; URL patches
# likewise, with no extension).  `spack mirror create` stores files there too, with a
# human-readable alias <pkg>/<pkg>-<version>.<ext> beside them; fetching never uses it.
builtin_pkgs=$OCIBENCH_SPACK_PACKAGES_SOURCE/repos/spack_repo/builtin/packages
recipe_sha() {  # package version -> the sha256 its builtin recipe declares
  grep -oE "\"$2\", *sha256=\"[0-9a-f]{64}\"" "$builtin_pkgs/$1/package.py" | grep -oE '[0-9a-f]{64}' | head -1
}
digest_path() {  # sha256 [ext]
  echo "$carry/mirror/_source-cache/archive/${1:0:2}/$1${2:+.$2}"
}
read -r ucx_dir ucx_rev <<<"$(split "$OCIBENCH_SRC_UCX")"
ucx_version=${ucx_rev#v}
[[ $ucx_version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "OCIBENCH_SRC_UCX: give a release tag (#vX.Y.Z), not $ucx_rev"
ompi_sha=$(recipe_sha openmpi 5.0.7); ucx_sha=$(recipe_sha ucx "$ucx_version")
[[ -n $ompi_sha && -n $ucx_sha ]] || die "openmpi 5.0.7 / ucx $ucx_version not in $builtin_pkgs"
ompi=$(digest_path "$ompi_sha" tar.bz2)
if [[ ! -s $ompi ]]; then
  mkdir -p "$(dirname "$ompi")"
  say "openmpi-5.0.7.tar.bz2 <- $OCIBENCH_OPENMPI_TARBALL"
  case $OCIBENCH_OPENMPI_TARBALL in
    *.tar.bz2) cp "$OCIBENCH_OPENMPI_TARBALL" "$ompi" ;;
    *.tar.xz)  xz -dc "$OCIBENCH_OPENMPI_TARBALL" | bzip2 -9 >"$ompi" ;;
    *.tar.gz)  gzip -dc "$OCIBENCH_OPENMPI_TARBALL" | bzip2 -9 >"$ompi" ;;
    *) die "OCIBENCH_OPENMPI_TARBALL: expected .tar.bz2, .tar.xz or .tar.gz" ;;
  esac
  tar -tjf "$ompi" openmpi-5.0.7/configure >/dev/null || die "$ompi has no openmpi-5.0.7/configure"
fi
# builtin openmpi: patch("https://github.com/open-mpi/ompi/commit/d10e976....patch?full_index=1",
#                        sha256="38529b55...", when="@4.1.8,5.0.7")
patch_sha=$(grep -A3 'd10e9765bdd28e62621395aef6bbb7710bae2e82' "$builtin_pkgs/openmpi/package.py" \
            | grep -oE '[0-9a-f]{64}' | head -1)
[[ -n $patch_sha ]] || die "the builtin openmpi recipe no longer applies patch d10e976: check $0"
patch_file=$(digest_path "$patch_sha")
if [[ ! -s $patch_file ]]; then
  [[ -n ${OCIBENCH_SRC_OMPI:-} ]] || die "set OCIBENCH_SRC_OMPI (an Open MPI git repo) for the 5.0.7 patch"
  mkdir -p "$(dirname "$patch_file")"
  git -C "$OCIBENCH_SRC_OMPI" format-patch --stdout --full-index -1 \
    d10e9765bdd28e62621395aef6bbb7710bae2e82 >"$patch_file"
  say "openmpi 5.0.7 patch d10e976 (git format-patch; GitHub's .patch bytes differ) -> $patch_file"
fi
ucx=$(digest_path "$ucx_sha" tar.gz)
if [[ ! -s $ucx ]]; then
  mkdir -p "$(dirname "$ucx")"
  tmp=$(mktemp -d)
  mkdir "$tmp/ucx-$ucx_version"
  git -C "$ucx_dir" archive "$ucx_rev" | tar -x -C "$tmp/ucx-$ucx_version"
  say "ucx-$ucx_version.tar.gz <- $ucx_dir $ucx_rev ($(git -C "$ucx_dir" rev-parse "$ucx_rev^{commit}")), ./autogen.sh"
  (cd "$tmp/ucx-$ucx_version" && ./autogen.sh >"$tmp/autogen.log" 2>&1) || die "ucx autogen.sh failed: $tmp/autogen.log"
  tar -C "$tmp" -czf "$ucx" "ucx-$ucx_version"
  rm -rf "$tmp"
fi
# What the mirror holds, for the device's site scope (gpu-path.sh pins these versions).
printf 'openmpi 5.0.7\nucx %s\n' "$ucx_version" >"$carry/mirror/VERSIONS"

# -- benchmark sources as minimal bare repositories -------------------------------------
: >"$carry/src/SOURCES"
# shellcheck disable=SC2153  # OCIBENCH_SRC_* come from the environment (checked above)
for pair in "osu-micro-benchmarks $OCIBENCH_SRC_OMB" "nccl-tests $OCIBENCH_SRC_NCCL_TESTS"; do
  read -r pkg spec <<<"$pair"
  read -r dir rev <<<"$(split "$spec")"
  commit=$(git -C "$dir" rev-parse --verify "$rev^{commit}") || die "$pkg: no $rev in $dir"
  bare=$carry/src/$pkg.git
  [[ -d $bare ]] || git init -q --bare "$bare"
  if [[ $rev == v* ]] && git -C "$dir" rev-parse -q --verify "refs/tags/$rev" >/dev/null; then
    git -C "$dir" push -q "$(realpath "$bare")" "refs/tags/$rev:refs/tags/$rev"
  else
    git -C "$dir" push -q "$(realpath "$bare")" "$commit:refs/heads/release"
  fi
  echo "$pkg $rev $commit" >>"$carry/src/SOURCES"
  say "$pkg <- $dir $rev ($commit)"
done

# -- Debian packages: Lmod (+Lua 5.3 modules) and libtool --------------------------------
# The GPU image has neither; these are Debian 12's, unpacked there only if missing.
if ! ls "$carry"/debs/lmod_*.deb >/dev/null 2>&1 || ! ls "$carry"/debs/libtool_*.deb >/dev/null 2>&1; then
  (if cd "$carry/debs"; then
     apt-get download lmod lua5.3 lua-filesystem lua-json lua-posix lua-term \
       lua-bit32 lua-lpeg libtool 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
   fi)
fi

# -- wheels for the machine's Python 3.12 ------------------------------------------------
pipdl() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$@"
}
# clingo for Spack's concretizer; ReFrame and what the image lacks of its requirements
# (the image has PyYAML, Jinja2, lxml, requests, attrs, filelock).
pipdl clingo==5.8.3 cffi==2.0.0 pycparser archspec==0.2.7 reframe-hpc==4.10.4 \
  'argcomplete~=3.6' 'clustershell~=1.9' 'fasteners~=0.20' 'tabulate~=0.10' \
  'jsonschema~=4.26' jsonschema-specifications referencing rpds-py 'semver~=3.0'

du -sh "$carry" .whl
total=$(du -sm "$carry" .whl | awk '{s+=$1} END {print s}')
((total < 60)) || die "carry folders hold ${total} MiB: over what one device call takes (64 MiB with the tree)"
say "done (${total} MiB)"
