#!/usr/bin/env bash
# Join the bundle's halves (this call's .carry/ and the stashed .carry-big/), check
# them, unpack what the image lacks, and start pipeline.sh detached (docs/device-runs.md).
#   bash scripts/device/start.sh
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

start() {
  if [[ -f $STATE/step && ! -f $STATE/done ]]; then
    say "a pipeline is running ($(cat "$STATE/step")); use collect.sh"; return 0
  fi
  rm -rf "$WORK"
  mkdir -p "$REPO" "$LOGS" "$RES" "$STATE" "$HAND"
  common_env
  [[ -f $SRC/.carry/bundle/BUNDLE ]] || die "no .carry/bundle: run make-carry.sh and carry .carry"
  # The private copy: the checkout may be synced again while the pipeline runs.
  tar -C "$SRC" --exclude=./.carry --exclude=./.carry-big --exclude=./.git --exclude=./site/local \
      --exclude=./site/spack/generated --exclude=./.spack-env --exclude=./spack.lock \
      --exclude=./output --exclude=./stage --exclude=./perflogs --exclude=./reports -cf - . \
    | tar -C "$REPO" -xf -
  # The bundle, joined from this call's half and the stashed one, whole again.
  mkdir -p "$BUNDLE"
  cp -r "$SRC/.carry/bundle/." "$BUNDLE/"
  [[ -d $STASH/bundle ]] && cp -r "$STASH/bundle/." "$BUNDLE/"
  # The one check of a bundle (nothing unlisted, no symlink, authenticated by the digest
  # make-carry.sh kept outside it), before any wheel of it is installed.
  [[ -f $SRC/.carry/bundle.sha256 ]] || die "no .carry/bundle.sha256: run make-carry.sh"
  export OCIBENCH_BUNDLE_SHA256; OCIBENCH_BUNDLE_SHA256=$(cat "$SRC/.carry/bundle.sha256")
  PYTHONPATH=$REPO/src python3 -m ocibench.spack.bundle_verify "$BUNDLE" \
    || die "the bundle's halves do not join (stash.sh .carry-big first)"
  # The image's Python is externally managed (PEP 668): the tools go into a directory of
  # their own on PYTHONPATH (common_env), and setup finds them present.
  if ! python3 -c 'import clingo, reframe, archspec' 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$WORK/site" "$BUNDLE"/wheels/*.whl || die "wheels did not install"
  fi
  # What the image lacks, from Debian packages (unpacked only when missing): the
  # bundle's Lmod and its Lua modules (Debian's os-packages may not apt-get install on
  # Ubuntu; the rest of them, libc and the like, the image has), libtool.
  if [[ ! -f $LMOD_INIT ]]; then
    for deb in "$BUNDLE"/os-packages/lmod_*.deb "$BUNDLE"/os-packages/lua*.deb; do
      dpkg -x "$deb" /
    done
  fi
  if ! command -v libtoolize >/dev/null; then dpkg -x "$STASH"/debs/libtool_*.deb /; fi
  mkdir -p "$CACHE"
  # gdrcopy's tests link libcheck; nvbandwidth needs Boost.Program_options (neither is on
  # the image): Debian packages unpacked into a prefix of their own, Spack externals.
  if [[ ! -f /usr/include/check.h ]] || ! ls /usr/lib/x86_64-linux-gnu/libboost_program_options.so >/dev/null 2>&1; then
    mkdir -p "$WORK/debs-prefix"
    for deb in "$STASH"/debs/check_*.deb "$STASH"/debs/libboost*.deb; do
      [[ -f $deb ]] && dpkg -x "$deb" "$WORK/debs-prefix"
    done
  fi
  # A build cache of an earlier run (collect's buildcache.tar parts, joined and
  # unpacked into .carry/buildcache): its UCX and OpenMPI are installed, not built.
  [[ -d $SRC/.carry/buildcache ]] && cp -r "$SRC/.carry/buildcache" "$WORK/buildcache-in"
  {
    echo "## start $(date -u +%FT%TZ) on $(hostname), $(nproc) cores"
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader
    bash -c "source $LMOD_INIT && module --version" 2>&1 | grep -m1 -i 'modules based on lua' || echo "LMOD BROKEN"
    python3 -c 'import clingo, reframe, archspec, ocibench; print("python:", "clingo", clingo.__version__, "reframe", reframe.VERSION)'
    command -v libtoolize
  } 2>&1 | tee "$LOGS/00-start.log"
  grep -q "LMOD BROKEN" "$LOGS/00-start.log" && die "Lmod does not run"
  setsid nohup bash "$REPO/scripts/device/pipeline.sh" >"$LOGS/pipeline.out" 2>&1 </dev/null &
  say "pipeline started (pid $!), logs in $LOGS"
}

start
