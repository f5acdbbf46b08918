# Sourced by scripts/setup.sh: put the pinned Spack or its builtin packages in place,
# from GitHub, a local git repository or a tarball (OCIBENCH_SPACK_SOURCE,
# OCIBENCH_SPACK_PACKAGES_SOURCE).  A tarball leaves .ocibench-source in DEST: the
# tarball's absolute path, then `sha256 <digest>`; `make bundle` carries that same file
# (scripts/bundle.sh, `archive`) and BUNDLE names it tarball:<digest>.
# Needs the caller's `say` and `die`.
# shellcheck shell=bash

# fetch NAME DEST REF URL SOURCE: put REF of a git repository into DEST.
# SOURCE (optional): a local git repository/checkout or a .tar(.gz|.xz) of one.
fetch() {
  local name=$1 dest=$2 ref=$3 url=$4 source=${5:-}
  if [[ -d $dest/.git || -f $dest/.ocibench-source ]]; then
    say "$name present at $dest"
    return 0
  fi
  if [[ -n $source ]]; then
    if [[ -d $source ]]; then
      say "$name: cloning $ref from $source"
      git -c advice.detachedHead=false clone --quiet --branch "$ref" "$source" "$dest" \
        || die "$name: cannot clone $ref from $source"
    elif [[ -f $source ]]; then
      say "$name: unpacking $source"
      mkdir -p "$dest"
      tar -xf "$source" -C "$dest" --strip-components=1 || die "$name: cannot unpack $source"
      # where it came from and its digest: `make bundle` carries that same file and
      # names it tarball:<sha256> in BUNDLE (scripts/bundle.sh)
      printf '%s\nsha256 %s\n' "$(cd "$(dirname "$source")" && pwd -P)/$(basename "$source")" \
        "$(sha256sum "$source" | cut -d' ' -f1)" >"$dest/.ocibench-source"
    else
      die "$name: $source (from the environment) is neither a directory nor a file"
    fi
    return 0
  fi
  say "$name: cloning $ref from $url"
  if ! git -c advice.detachedHead=false clone --quiet --depth 1 --branch "$ref" "$url" "$dest" 2>/dev/null; then
    rm -rf "$dest"
    die "$name is not in $dest and cannot be cloned from $url (offline?).
       Set $( [[ $name == spack ]] && echo OCIBENCH_SPACK_SOURCE || echo OCIBENCH_SPACK_PACKAGES_SOURCE )=<git checkout or tarball of $ref> and run make setup again."
  fi
}
