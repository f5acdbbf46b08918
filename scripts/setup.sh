#!/usr/bin/env bash
# `make setup`: everything `make install` needs, in the per-user cache
# (~/.cache/oci-hpc-bench, or $OCIBENCH_CACHE; see src/ocibench/paths.py):
#
#   1. the Python tools this package needs (clingo, ReFrame, ...; never the package
#      itself: it runs from this checkout's src/, the command is bin/ocibench);
#      Lmod from the OS when it is absent (Debian/Ubuntu apt-get, EL dnf)
#   2. the pinned Spack (v1.1.0) and its builtin packages (releases/v2025.11):
#      git clone from GitHub when online; offline from a checkout or tarball named
#      by OCIBENCH_SPACK_SOURCE / OCIBENCH_SPACK_PACKAGES_SOURCE
#   3. Spack's builtin repository pointed at that checkout
#   4. site/spack/generated/: the Spack scope of every shape, derived from its shape
#      file (ocibench spack-config), including `spack compiler find` / `spack external
#      find` results for machine-described shapes (local), and detected.yaml
#
# Idempotent: what is in place is checked, not redone.  The source mirror and binary
# build cache ($OCIBENCH_SOURCE_MIRROR, $OCIBENCH_BUILD_CACHE) are used when present.
#
# OCIBENCH_BUNDLE=<dir> (scripts/bundle.sh wrote it): everything comes from there, with
# no network.  Before anything else, src/ocibench/spack/bundle_verify.py checks it: every file
# listed in SHA256SUMS and matching it, nothing unlisted, no symlink, no path leaving the
# bundle; authenticated when the admin gives OCIBENCH_BUNDLE_SHA256 or
# OCIBENCH_BUNDLE_SIGNER (docs/spack-env.md).  A bundle another user could change is
# copied first (<cache>/bundle, 0700), and the copy is checked and used.  Then Spack, the builtin packages, the
# Python wheels, Lmod's packages, the source mirror, the develop sources and the build
# cache (signed: its key is trusted) are taken from it.
set -euo pipefail
cd "$(dirname "$0")/.."

SPACK_TAG=v1.1.0
SPACK_URL=https://github.com/spack/spack
PACKAGES_BRANCH=releases/v2025.11
PACKAGES_URL=https://github.com/spack/spack-packages

say() { echo "setup: $*"; }
die() { echo "setup: ERROR: $*" >&2; exit 1; }

python=${OCIBENCH_PYTHON:-$(command -v python3 || true)}
[[ -n $python ]] || die "no python3 on PATH"
# This checkout's ocibench, by PYTHONPATH: the project itself is never pip-installed
# (src/ocibench/requirements.py says why), only what it needs.
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

# -- 0. an air-gapped bundle -------------------------------------------------------
bundle=${OCIBENCH_BUNDLE:-}
bundle_value() { sed -n "s/^$1=//p" "$bundle/BUNDLE"; }
if [[ -n $bundle ]]; then
  # First of all: pip, apt-get/dnf and Spack take whatever lies in their directories.
  # The check's first line is the directory it verified: the bundle itself where only
  # root and this user can change it, else a copy only this user can change
  # (<cache>/bundle).  Everything below takes that one: what was verified is what is
  # installed, whatever another user does to the bundle meanwhile.
  checked=$("$python" -m ocibench.spack.bundle_verify --stage "$bundle") \
    || die "bundle $bundle refused (the lines above name each file); nothing was installed"
  bundle=$(sed -n 1p <<<"$checked")
  say "$(sed -n '2,$p' <<<"$checked")"
  say "bundle of shape $(bundle_value shape), signed=$(bundle_value signed)"
  [[ -f $bundle/spack.tar.gz ]] \
    && export OCIBENCH_SPACK_SOURCE=${OCIBENCH_SPACK_SOURCE:-$bundle/spack.tar.gz}
  [[ -f $bundle/spack-packages.tar.gz ]] \
    && export OCIBENCH_SPACK_PACKAGES_SOURCE=${OCIBENCH_SPACK_PACKAGES_SOURCE:-$bundle/spack-packages.tar.gz}
  [[ -d $bundle/mirror ]] && export OCIBENCH_SOURCE_MIRROR=${OCIBENCH_SOURCE_MIRROR:-$bundle/mirror}
  if [[ -d $bundle/buildcache ]]; then
    export OCIBENCH_BUILD_CACHE=${OCIBENCH_BUILD_CACHE:-$bundle/buildcache}
    [[ $(bundle_value signed) == yes ]] && export OCIBENCH_BUILD_CACHE_SIGNED=1
  fi
  [[ -d $bundle/wheels ]] && export PIP_NO_INDEX=1 PIP_FIND_LINKS=$bundle/wheels
fi

# -- 1. Python tools and Lmod ---------------------------------------------------
# OCIBENCH_PYTHON_EXTRAS: the optional groups (pyproject.toml) beside what the tools
# need; "" on a node that only builds and runs checks (no test tools, no plots).
# shellcheck disable=SC2086  # a list of group names
mapfile -t missing < <("$python" -m ocibench.requirements --missing ${OCIBENCH_PYTHON_EXTRAS-test report})
if ((${#missing[@]} == 0)); then
  say "python tools present (clingo, reframe, ...); ocibench runs from $PWD/src (bin/ocibench)"
else
  say "installing python tools: ${missing[*]}"
  hint="offline? point pip at a wheel house: PIP_FIND_LINKS=... PIP_NO_INDEX=1"
  left_out=""
  [[ -z $bundle ]] || left_out=$(bundle_value wheels_left_out)
  if [[ -n $left_out ]]; then
    hint="the bundle left out the wheels of $left_out (OCIBENCH_BUNDLE_PIP_EXCLUDE): install those first, or pip install --no-deps the wheels of $bundle/wheels"
  fi
  "$python" -m pip install --quiet --disable-pip-version-check "${missing[@]}" \
    || die "pip install failed ($hint)"
fi

# The bundle's OS packages that this machine lacks: the bundle holds Lmod with all it
# depends on, as if nothing were installed (scripts/bundle.sh); what is installed here
# already stays as it is (handing apt or dnf an installed package's file would ask for
# a reinstall or a downgrade).
missing_os_packages() {
  local file name
  [[ -n $bundle && -d $bundle/os-packages ]] || return 0
  while IFS= read -r -d '' file; do
    if [[ $file == *.deb ]]; then
      name=$(dpkg-deb -f "$file" Package)
      dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q ' installed$' && continue
    else
      name=$(rpm -qp --qf '%{NAME}' "$file" 2>/dev/null)
      rpm -q "$name" >/dev/null 2>&1 && continue
    fi
    printf '%s\n' "$file"
  done < <(find "$bundle/os-packages" \( -name '*.deb' -o -name '*.rpm' \) -print0 | sort -z)
}

lmod_init=${LMOD_PKG:-/usr/share/lmod/lmod}/init/bash
os_packages=()
[[ -f $lmod_init ]] || mapfile -t os_packages < <(missing_os_packages)
if [[ -f $lmod_init ]]; then
  say "lmod present ($lmod_init)"
elif ((${#os_packages[@]})) && [[ $(id -u) -eq 0 ]]; then
  say "installing lmod from the bundle's OS packages: ${#os_packages[@]} this machine lacks"
  if command -v apt-get >/dev/null; then
    # The files themselves: apt copies them (no network); --no-download would refuse
    # to, "Unable to fetch some archives".
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${os_packages[@]}" \
      >/dev/null || die "apt-get install of the bundle's Lmod packages failed"
  else
    dnf install -y -q --disablerepo='*' "${os_packages[@]}" \
      || die "dnf install of the bundle's Lmod packages failed"
  fi
elif [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  say "installing lmod (apt-get)"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lmod >/dev/null; }; then
    die "apt-get install lmod failed"
  fi
elif [[ $(id -u) -eq 0 ]] && command -v dnf >/dev/null; then
  say "installing Lmod (dnf)"
  dnf install -y -q Lmod || die "dnf install Lmod failed"
else
  say "WARNING: Lmod is absent and cannot be installed here (not root): install it, or"
  say "         build it with Spack (spack install lmod); module tests will be skipped"
fi

# The local shape builds against this machine's Open MPI (docs/spack-env.md): install
# it like Lmod when it is absent, so that Spack's detection finds it below.
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  say "system MPI present ($(command -v mpirun))"
elif [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  say "installing Open MPI (apt-get)"
  if ! { apt-get update -qq &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null; }; then
    die "apt-get install openmpi-bin libopenmpi-dev failed"
  fi
elif [[ $(id -u) -eq 0 ]] && command -v dnf >/dev/null; then
  say "installing Open MPI (dnf); put /usr/lib64/openmpi/bin on PATH for Spack to find it"
  dnf install -y -q openmpi openmpi-devel || die "dnf install openmpi openmpi-devel failed"
else
  say "WARNING: no mpicc/mpirun on PATH and they cannot be installed here (not root):"
  say "         the local shape needs this machine's Open MPI (with its headers)"
fi

# -- 2. Spack and its builtin packages ---------------------------------------------
read -r spack_root packages_root cache <<<"$("$python" - <<'EOF'
from ocibench import paths
print(paths.spack_root(), paths.builtin_repo().parents[2], paths.cache_dir())
EOF
)"
mkdir -p "$cache"

# shellcheck source=scripts/fetch-source.sh
source scripts/fetch-source.sh

fetch spack "$spack_root" "$SPACK_TAG" "$SPACK_URL" "${OCIBENCH_SPACK_SOURCE:-}"
fetch spack-packages "$packages_root" "$PACKAGES_BRANCH" "$PACKAGES_URL" \
  "${OCIBENCH_SPACK_PACKAGES_SOURCE:-}"
[[ -x $spack_root/bin/spack ]] || die "$spack_root has no bin/spack"

export SPACK_PYTHON=${SPACK_PYTHON:-$python}
version=$("$spack_root/bin/spack" --version 2>/dev/null | awk '{print $1}') \
  || die "$spack_root/bin/spack does not run (SPACK_PYTHON=$SPACK_PYTHON)"
[[ $version == "${SPACK_TAG#v}" ]] \
  || say "WARNING: Spack at $spack_root is $version, the project pins ${SPACK_TAG#v}"

# -- 3. builtin repository ----------------------------------------------------------
builtin=$("$python" -c "from ocibench import paths; print(paths.builtin_repo())")
[[ -f $builtin/repo.yaml ]] || die "no builtin repository at $builtin"
repos_yaml="$spack_root/etc/spack/repos.yaml"
if grep -qF "builtin: $builtin" "$repos_yaml" 2>/dev/null; then
  say "builtin repository configured ($builtin)"
else
  say "pointing Spack's builtin repository at $builtin ($repos_yaml)"
  printf 'repos:\n  builtin: %s\n' "$builtin" >"$repos_yaml"
fi

# -- 4. generated scopes --------------------------------------------------------------
shape=$("$python" -m ocibench.cli shape) || die "shape detection failed"
say "this machine is shape $shape"
if [[ -n $bundle ]]; then
  [[ $(bundle_value shape) == "$shape" ]] || die "bundle $bundle was made for shape \
$(bundle_value shape), this machine is $shape (OCIBENCH_SHAPE=$(bundle_value shape) uses it anyway)"
  if [[ -d $bundle/keys ]]; then
    "$spack_root/bin/spack" gpg trust "$bundle"/keys/*.pub >/dev/null \
      || die "cannot trust the bundle's signing key ($bundle/keys)"
    say "trusting the bundle's signing key ($bundle/keys)"
  fi
  if [[ -s $bundle/develop/SOURCES ]]; then
    # Sources that are git revisions, not release files: develop specs, as
    # scripts/mirror-from-checkouts.sh makes them (dev_path= in every spec built so).
    mkdir -p "$cache/dev-src" "$cache/develop"
    develop="$cache/develop/$shape.yaml"
    printf '# GENERATED by scripts/setup.sh from the bundle %s\ndevelop:\n' "$bundle" >"$develop"
    while read -r pkg version commit; do
      dest="$cache/dev-src/$pkg-$version"
      if [[ ! -f $dest/.ocibench-source || $(cat "$dest/.ocibench-source") != "$commit" ]]; then
        rm -rf "$dest"
        tar -xzf "$bundle/develop/$pkg-$version.tar.gz" -C "$cache/dev-src"
        echo "$commit" >"$dest/.ocibench-source"
      fi
      printf '  %s:\n    # git %s\n    spec: %s@=%s\n    path: %s\n' \
        "$pkg" "$commit" "$pkg" "$version" "$dest" >>"$develop"
    done <"$bundle/develop/SOURCES"
    say "develop sources of the bundle: $develop"
  fi
fi
# --detect: compilers and externals of this machine, found again on every setup
# (quick) so that a newly installed compiler or CUDA is picked up.
"$python" -m ocibench.cli spack-config --detect >/dev/null || die "ocibench spack-config failed"
say "generated $("$python" -m ocibench.cli spack-config --print generated-dir)"
for what in source_mirror build_cache; do
  dir=$("$python" -c "from ocibench import paths; print(paths.$what())")
  if [[ -d $dir ]]; then say "${what/_/ } in use: $dir"; fi
done

cat <<EOF
setup: done.  Use the environment with:
  export SPACK_PYTHON=$SPACK_PYTHON
  . $spack_root/share/spack/setup-env.sh
  spack env activate $(pwd)
then \`make install\` (or \`spack install\`) builds the $shape stack.
EOF
