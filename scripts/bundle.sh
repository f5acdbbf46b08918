#!/usr/bin/env bash
# `make bundle`: everything an air-gapped node needs for `make install`, in one directory
# made on a host that has the sources (docs/spack-env.md, "Air-gapped sites"):
#
#   BUNDLE                   shape, Spack and builtin-package revisions, signed or not
#   SHA256SUMS               the sha256 of every other file (checked before anything is used;
#                            nothing unlisted, no symlink: src/ocibench/spack/bundle_verify.py)
#   SHA256SUMS.asc           its signature by the build cache's key (when signed)
#   spack.tar.gz             the pinned Spack (git archive of the checkout in the cache)
#   spack-packages.tar.gz    its builtin packages (repos/spack_repo/builtin)
#   mirror/                  a Spack source mirror of the shape's specs (`spack mirror create`)
#                            and of the sources below that are upstream's bytes: installed
#                            with their recipes' sha256 checked
#   develop/                 sources given as git revisions whose archive is not the release
#                            file (e.g. OMB 7.4's import commit): Spack develop specs
#   unchecked/               sources that stand for a release file without being its bytes
#                            (below), in a mirror of their own; BUNDLE names them
#                            (unchecked=PKG@VERSION ...) and `make install` warns about each
#   buildcache/              `spack buildcache push` of what this host installed: signed
#                            (public key in keys/), unsigned only with OCIBENCH_BUNDLE_UNSIGNED=1
#   wheels/                  the Python tools (pip download, for OCIBENCH_PYTHON's version)
#   os-packages/             Lmod and its Lua modules as the OS's packages (apt-get/dnf download)
#
#   OCIBENCH_BUNDLE=<dir>    where to write it (default: bundle-<shape> in the checkout)
#   PKG=SOURCE[@VERSION] ... (arguments, or OCIBENCH_SRC_OMB/_NCCL_TESTS/_IMB/_STREAM as
#                            for scripts/mirror-from-checkouts.sh), each SOURCE one of:
#     GITDIR[#REV]           a git revision.  Where `git archive | gzip -n` gives the recipe's
#                            sha256 (GitHub's release archives: IMB, gdrcopy, nvbandwidth), the
#                            file goes into mirror/, checked like a download.  A release tag
#                            with autogen.sh but no configure (UCX) is made into the release
#                            tarball's content (./autogen.sh) in unchecked/.  Anything else
#                            goes into develop/ (provenance dev_path=..., no checksum claimed)
#     FILE.tar[.gz|.bz2|.xz] a release tarball that is not upstream's bytes (a distribution's
#                            recompressed .orig tarball): recompressed as the recipe's
#                            file, into unchecked/ (@VERSION required)
#   OCIBENCH_BUNDLE_PATCH_REPOS  git repositories (space-separated) holding the commits of the
#                            GitHub URL patches the recipes of unchecked packages apply
#                            (`git format-patch`: not GitHub's bytes, so unchecked/ too)
#   OCIBENCH_BUNDLE_PARTS    what to write (default: spack sources mirror buildcache wheels
#                            os; sources: the PKG= arguments; mirror: `spack mirror create` of
#                            the environment, which needs the network or a mirror of it)
#   OCIBENCH_BUNDLE_PIP_ARGS  extra `pip download` options for a node with another Python,
#                            e.g. "--only-binary=:all: --python-version 3.12
#                            --platform manylinux2014_x86_64"
#   OCIBENCH_BUNDLE_PIP_EXCLUDE  projects whose wheels are left out (e.g. "polars
#                            polars-runtime-32"; the node then installs with --no-deps)
#   OCIBENCH_PYTHON_EXTRAS   the optional tool groups of pyproject.toml (default: test report;
#                            "" for a node that only builds and runs checks), as for setup
#   OCIBENCH_BUNDLE_KEY      the Spack GPG key that signs (default: the first signing key in
#                            Spack's keyring; one is created if there is none)
#
# On the node: `make install OCIBENCH_BUNDLE=<dir>` (scripts/setup.sh) checks SHA256SUMS,
# then takes Spack, the tools, Lmod, the mirror, the develop sources and the build cache
# from the bundle, with no network; scripts/install.sh installs the unchecked packages
# first, alone, with --no-checksum, and everything else with checksums.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "bundle: $*"; }
die() { echo "bundle: ERROR: $*" >&2; exit 1; }
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
python=${OCIBENCH_PYTHON:-python3}

args=()
for arg in "$@"; do
  [[ $arg == *=* ]] || die "unexpected argument '$arg' (expected PKG=GITDIR[#REV][@VERSION])"
  args+=("$arg")
done
# shellcheck source=scripts/source-args.sh
source scripts/source-args.sh
((${#args[@]})) || source_args_from_env

shape=$("$python" -m ocibench.cli shape) || die "cannot detect the shape"
out=${OCIBENCH_BUNDLE:-$PWD/bundle-$shape}
parts=" ${OCIBENCH_BUNDLE_PARTS:-spack sources mirror buildcache wheels os} "
want() { [[ $parts == *" $1 "* ]]; }
read -r spack_root packages_root <<<"$("$python" -c \
  'from ocibench import paths; print(paths.spack_root(), paths.builtin_repo().parents[2])')"
spack=$spack_root/bin/spack
[[ -x $spack ]] || die "no Spack at $spack_root: run \`make setup\` first"
export SPACK_PYTHON=${SPACK_PYTHON:-$(command -v "$python")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ ! -e $out/SHA256SUMS ]] || rm "$out/SHA256SUMS"  # rewritten at the end

# -- Spack and its builtin packages: git archives of the pinned checkouts -------------
archive() {  # name checkout dest [path]: the checkout's HEAD, or the tarball it came from
  local name=$1 dir=$2 dest=$3 path=${4:-}
  if git -C "$dir" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$dir" archive --prefix="$name/" HEAD ${path:+"$path"} | gzip -n >"$dest"
    git -C "$dir" rev-parse HEAD
  elif [[ -f $dir/.ocibench-source ]]; then
    # set up from a tarball (scripts/setup.sh): that file, if it is still the same
    local tarball recorded sha
    tarball=$(sed -n 1p "$dir/.ocibench-source")
    recorded=$(sed -n 's/^sha256 //p' "$dir/.ocibench-source")
    [[ -f $tarball ]] || die "$dir was set up from $tarball, which is gone: set it up again \
(OCIBENCH_SPACK_SOURCE / OCIBENCH_SPACK_PACKAGES_SOURCE) or give that tarball back"
    cp "$tarball" "$dest"
    sha=$(sha256sum "$dest" | cut -d' ' -f1)
    [[ -z $recorded || $sha == "$recorded" ]] \
      || die "$tarball is not the tarball $dir was set up from (sha256 $sha, set up from $recorded)"
    echo "tarball:$sha"
  else
    die "$dir is neither a git checkout nor set up from a tarball"
  fi
}
info=("shape=$shape")
if want spack; then
  info+=("spack=$(archive spack "$spack_root" "$out/spack.tar.gz")")
  info+=("spack-packages=$(archive spack-packages "$packages_root" "$out/spack-packages.tar.gz" \
          repos/spack_repo/builtin)")
  say "spack.tar.gz, spack-packages.tar.gz <- $spack_root, $packages_root"
fi

# -- sources named by arguments: checked (mirror/), develop/, or unchecked/ ----------
builtin=$("$python" -c 'from ocibench import paths; print(paths.builtin_repo())')
unchecked=()
# Put a source that is not upstream's bytes where Spack's mirror layout wants the
# recipe's file, in unchecked/: the archive made by "$@" (writes a tar stream to
# stdout) and the recipe's URL patches (GitHub commit patches by `git format-patch`
# from a repository in OCIBENCH_BUNDLE_PATCH_REPOS; one that happens to have the
# recipe's bytes goes into mirror/, checked).  `make install` installs these packages
# alone with --no-checksum (scripts/install.sh), everything else stays checked.
add_unchecked() {  # pkg version command...
  local pkg=$1 version=$2; shift 2
  local files kind sha url rel dest commit repo found
  files=$(recipe_files "$pkg" "$version") || die "$pkg@$version: not a version of its recipe"
  while read -r kind sha url rel; do
    if [[ $kind == archive ]]; then
      dest=$out/unchecked/$url  # (an archive has no URL: its line is "archive SHA PATH")
      mkdir -p "$(dirname "$dest")"
      case $dest in
        *.tar.bz2) "$@" | bzip2 -9 >"$dest" ;;
        *.tar.xz)  "$@" | xz -6 >"$dest" ;;
        *.tar.gz|*.tgz) "$@" | gzip -n -6 >"$dest" ;;
        *) die "$pkg@$version: the recipe's archive $dest is no tarball this script makes" ;;
      esac
      continue
    fi
    commit=$(sed -nE 's|^https://github\.com/[^/]+/[^/]+/commit/([0-9a-f]{7,40})\.patch.*|\1|p' <<<"$url")
    found=""
    for repo in ${OCIBENCH_BUNDLE_PATCH_REPOS:-}; do
      if [[ -n $commit ]] && git -C "$repo" rev-parse -q --verify "$commit^{commit}" >/dev/null; then
        found=$repo; break
      fi
    done
    [[ -n $found ]] || die "$pkg@$version: the recipe applies $url; give a git repository \
holding that commit in OCIBENCH_BUNDLE_PATCH_REPOS"
    dest=$(mktemp)
    git -C "$found" format-patch --stdout --full-index -1 "$commit" >"$dest"
    if [[ $(sha256sum "$dest" | cut -d' ' -f1) == "$sha" ]]; then
      mkdir -p "$(dirname "$out/mirror/$rel")"; mv "$dest" "$out/mirror/$rel"
    else
      mkdir -p "$(dirname "$out/unchecked/$rel")"; mv "$dest" "$out/unchecked/$rel"
    fi
  done <<<"$files"
  unchecked+=("$pkg@$version")
  say "WARNING: $pkg@$version is NOT upstream's file (made from $src_desc): unchecked/, installed without its checksum"
}
# The recipe's sha256 and mirror paths of the version's files (spack_scripts/source_files.py),
# for VERSION or vVERSION (nvbandwidth's v0.8); fails when the recipe declares neither.
recipe_files() {  # pkg version
  "$spack" python src/ocibench/spack/scripts/source_files.py "$1" "$2" \
    || "$spack" python src/ocibench/spack/scripts/source_files.py "$1" "v$2"
}
tar_file() { case $1 in  # a release tarball, any compression, as a tar stream
  *.tar.bz2) bzip2 -dc "$1" ;; *.tar.xz) xz -dc "$1" ;; *.tar.gz|*.tgz) gzip -dc "$1" ;;
  *.tar) cat "$1" ;; *) die "$1: expected .tar, .tar.gz, .tar.bz2 or .tar.xz" ;; esac; }
tar_tree() { tar -C "$1" -cf - --owner=0 --group=0 --sort=name "$2"; }

want sources || args=()
((${#args[@]} == 0)) || rm -rf "$out/develop" "$out/unchecked"  # made again below
for arg in "${args[@]}"; do
  pkg=${arg%%=*}; rest=${arg#*=}; version=""; rev=HEAD
  if [[ $rest == *@* ]]; then version=${rest##*@}; rest=${rest%@*}; fi
  if [[ -f $rest ]]; then
    # A release file that is not upstream's bytes (e.g. a distribution's recompressed
    # .orig tarball): only its content is the release's.
    [[ -n $version ]] || die "$pkg: give the version of $rest as $pkg=$rest@VERSION"
    src_desc=$(basename "$rest")
    add_unchecked "$pkg" "$version" tar_file "$rest"
    continue
  fi
  if [[ $rest == *'#'* ]]; then rev=${rest##*#}; rest=${rest%%#*}; fi
  commit=$(git -C "$rest" rev-parse --verify --quiet "$rev^{commit}") \
    || die "$pkg: no revision '$rev' in $rest"
  if [[ -z $version ]]; then
    version=$(git -C "$rest" describe --tags --exact-match "$commit" 2>/dev/null \
              | sed -E 's/^[^0-9]*//') || true
  fi
  [[ -n $version ]] || die "$pkg: cannot tell the version of $rev; give it as $pkg=$rest#$rev@VERSION"
  recipe=$builtin/packages/${pkg//-/_}/package.py
  # the recipe's sha256 and where a mirror keeps the file (source_files.py: Spack's layout)
  read -r sha where < <(recipe_files "$pkg" "$version" 2>/dev/null \
                        | awk '$1 == "archive" {print $2, $3}') || true
  tmp=$(mktemp)
  # GitHub's release archives are `git archive` of the tag, gzip -n, prefixed <repo>-<tag>/
  tag=$(git -C "$rest" describe --tags --exact-match "$commit" 2>/dev/null || true)
  # the repository's name, for the archive's top directory: the recipe's GitHub URL
  repo=$(grep -oE 'github\.com/[^/]+/[^/]+/archive' "$recipe" 2>/dev/null | head -1 | cut -d/ -f3) \
    || true
  matched=""
  if [[ -n $sha && -n $tag && -n $repo ]]; then
    for prefix in "$repo-${tag#v}" "$repo-$tag"; do
      git -C "$rest" archive --format=tar --prefix="$prefix/" "$commit" | gzip -n >"$tmp"
      if [[ $(sha256sum "$tmp" | cut -d' ' -f1) == "$sha" ]]; then matched=$prefix; break; fi
    done
  fi
  if [[ -n $matched ]]; then
    dest=$out/mirror/$where
    mkdir -p "$(dirname "$dest")"
    mv "$tmp" "$dest"
    say "$pkg@$version <- $rest $rev: the release archive (sha256 $sha, as the recipe): mirror"
    continue
  fi
  rm -f "$tmp"
  if [[ -n $sha ]] && git -C "$rest" cat-file -e "$commit:autogen.sh" 2>/dev/null \
      && ! git -C "$rest" cat-file -e "$commit:configure" 2>/dev/null; then
    # A release tag whose release tarball ships the generated configure (UCX): the
    # recipe builds that tarball, so the tag is made into one (./autogen.sh: autoconf,
    # automake, libtool), as the release was: the same content, not the same bytes.
    tree=$(mktemp -d)
    mkdir "$tree/$pkg-$version"
    git -C "$rest" archive "$commit" | tar -x -C "$tree/$pkg-$version"
    (cd "$tree/$pkg-$version" && ./autogen.sh >"$tree/autogen.log" 2>&1) \
      || die "$pkg: ./autogen.sh failed (autoconf, automake, libtool installed?): $tree/autogen.log"
    src_desc="$rest $rev ($commit) with ./autogen.sh"
    add_unchecked "$pkg" "$version" tar_tree "$tree" "$pkg-$version"
    rm -rf "$tree"
    continue
  fi
  mkdir -p "$out/develop"
  git -C "$rest" archive --format=tar --prefix="$pkg-$version/" "$commit" | gzip -n \
    >"$out/develop/$pkg-$version.tar.gz"
  echo "$pkg $version $commit" >>"$out/develop/SOURCES"
  say "$pkg@$version <- $rest $rev ($commit): not the release file, a develop spec"
done
((${#unchecked[@]} == 0)) || info+=("unchecked=${unchecked[*]}")

# -- the shape's environment: sources of what it needs, binaries of what is built -----
if want mirror || want buildcache; then
  # shellcheck source=/dev/null  # Spack's own script, not this repository's
  . "$spack_root/share/spack/setup-env.sh"
  export OCIBENCH_SHAPE=$shape
  spack -e . concretize --force >/dev/null
fi
if want mirror; then
  # Every source the environment fetches (not the externals, not develop specs), from the
  # configured mirrors or upstream, each checked against its recipe.
  spack -e . mirror create -d "$out/mirror" --all --exclude-specs "dev_path=*" \
    || die "spack mirror create failed (sources unreachable? see above)"
  # Spack links each file's readable name (<pkg>/<pkg>-<version>.<ext>) to its digest
  # path (_source-cache/...); a node refuses every symlink in a bundle, and Spack
  # fetches the digest path first (spack/mirrors/layout.py, DefaultLayout.__iter__).
  find "$out/mirror" -type l -delete
fi
signed=no
if want buildcache; then
  mapfile -t hashes < <(spack -e . python src/ocibench/spack/scripts/bundle_specs.py)
  if ((${#hashes[@]} == 0)); then
    say "nothing installed to push (make install first): no build cache"
  else
    sign=(--unsigned)
    if [[ ${OCIBENCH_BUNDLE_UNSIGNED:-} != 1 ]]; then
      key=${OCIBENCH_BUNDLE_KEY:-$(spack gpg list --signing 2>/dev/null \
                                   | awk '/^sec/ {getline; print $1; exit}')}
      if [[ -z $key ]]; then
        say "no signing key in Spack's keyring: creating one (spack gpg create)"
        spack gpg create "oci-hpc-bench bundle" "ocibench@$(hostname)" >/dev/null
        key=$(spack gpg list --signing | awk '/^sec/ {getline; print $1; exit}')
      fi
      mkdir -p "$out/keys"
      spack gpg export "$out/keys/bundle.pub" "$key" >/dev/null
      sign=(--key "$key")  # signs (--key implies --signed)
      signed=yes
    fi
    spack -e . buildcache push "${sign[@]}" --only package --update-index "$out/buildcache" \
      "${hashes[@]/#//}" >/dev/null
    say "build cache: ${#hashes[@]} specs, signed=$signed"
  fi
fi
info+=("signed=$signed")

# -- Python tools and Lmod ---------------------------------------------------------------
if want wheels; then
  # shellcheck disable=SC2086  # a list of group names
  mapfile -t reqs < <("$python" -m ocibench.requirements ${OCIBENCH_PYTHON_EXTRAS-test report})
  # shellcheck disable=SC2086  # OCIBENCH_BUNDLE_PIP_ARGS is a list of options
  "$python" -m pip download --quiet --disable-pip-version-check -d "$out/wheels" \
    ${OCIBENCH_BUNDLE_PIP_ARGS:-} "${reqs[@]}" \
    || die "pip download failed (offline? OCIBENCH_BUNDLE_PARTS without wheels)"
  # Dependencies the node does without (pip resolves optional ones too: ReFrame's
  # analytics pull polars, 50 MiB, for reports the checks never make); such a node
  # installs the wheels with pip's --no-deps.  Wheel names: project_name-version-...
  for project in ${OCIBENCH_BUNDLE_PIP_EXCLUDE:-}; do
    rm -fv "$out/wheels/${project//-/_}"-[0-9]*.whl | sed 's/^/bundle: left out /'
  done
  # set-up names them if pip then misses them
  [[ -z ${OCIBENCH_BUNDLE_PIP_EXCLUDE:-} ]] \
    || info+=("wheels_left_out=$(echo "$OCIBENCH_BUNDLE_PIP_EXCLUDE" | xargs)")
fi
if want os; then
  mkdir -p "$out/os-packages"
  # Lmod and everything it depends on, as the package manager resolves it for a
  # machine with nothing installed: a node lacks what this host has (Tcl, Lua, ...),
  # and setup.sh installs only what the node lacks.
  if command -v apt-get >/dev/null; then
    # an empty dpkg status and package cache: apt lists every package Lmod needs
    empty=$(mktemp -d)
    mkdir "$empty/partial"
    mapfile -t debs < <(apt-get -qq -y -o Debug::NoLocking=1 -o Dir::State::status=/dev/null \
                          -o Dir::Cache::archives="$empty" --no-install-recommends \
                          --print-uris install lmod \
                        | awk '{sub(/_.*/, "", $2); print $2}')
    rm -rf "$empty"
    ((${#debs[@]})) || die "apt-get resolves no packages for Lmod (apt-get update first)"
    # (apt-get warns that root downloads unsandboxed: harmless, and not shown)
    (cd "$out/os-packages" && apt-get download "${debs[@]}" 2>&1 >/dev/null \
       | grep -v 'unsandboxed' >&2 || true
     ls lmod_*.deb >/dev/null) || die "apt-get download of Lmod failed"
    say "os-packages: Lmod with what a bare system needs for it (${#debs[@]} packages)"
  elif command -v dnf >/dev/null; then
    dnf download -q --resolve --alldeps --destdir "$out/os-packages" Lmod \
      || die "dnf download Lmod failed"
  else
    die "neither apt-get nor dnf: leave os out of OCIBENCH_BUNDLE_PARTS"
  fi
fi

printf '%s\n' "${info[@]}" >"$out/BUNDLE"
if ((${#unchecked[@]})); then
  say "WARNING: ${#unchecked[@]} package(s) of this bundle are NOT upstream's bytes and will be"
  say "WARNING: installed without their checksums: ${unchecked[*]} (unchecked/, BUNDLE)"
fi
rm -f "$out/SHA256SUMS.asc"
odd=$(find "$out" ! -type f ! -type d -printf '%P\n' | head -3)
[[ -z $odd ]] || die "$out holds other than files and directories (a node refuses them): $odd"
sums=$(cd "$out" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs -r -d '\n' sha256sum)
printf '%s\n' "$sums" >"$out/SHA256SUMS"  # written after the listing: it is not in itself
digest=$(sha256sum "$out/SHA256SUMS" | cut -d' ' -f1)
anchor="OCIBENCH_BUNDLE_SHA256=$digest"
if [[ $signed == yes ]]; then
  # The list signed with the build cache's key: a node that knows the key's fingerprint
  # authenticates every bundle it signs (src/ocibench/spack/bundle_verify.py).
  spack gpg sign --output "$out/SHA256SUMS.asc" --key "$key" "$out/SHA256SUMS" >/dev/null \
    || die "spack gpg sign of SHA256SUMS with $key failed"
  gpghome=$(mktemp -d)  # --show-keys reads the file; a keyring of its own, left empty
  fingerprint=$(gpg --homedir "$gpghome" --show-keys --with-colons "$out/keys/bundle.pub" \
                  2>/dev/null | awk -F: '$1 == "fpr" {print $10; exit}')
  rm -rf "$gpghome"
  anchor+=" (or OCIBENCH_BUNDLE_SIGNER=$fingerprint for every bundle this key signs)"
fi
# the node's check, with the anchor the node would be given
OCIBENCH_BUNDLE_SIGNER="" OCIBENCH_BUNDLE_SHA256=$digest \
  "$python" -m ocibench.spack.bundle_verify "$out" >/dev/null \
  || die "$out does not pass the node's check (lines above)"
say "wrote $out ($(du -sh "$out" | cut -f1)); sha256 of its SHA256SUMS: $digest"
say "on the node: make install OCIBENCH_BUNDLE=$out"
say "  authenticated (needed when BUNDLE names unchecked=): add $anchor"
