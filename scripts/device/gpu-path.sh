#!/usr/bin/env bash
# The GPU path end to end on an air-gapped GPU machine (docs/device-runs.md):
#
#   gpu-path.sh start            join the bundle's halves, unpack what the image lacks, and
#                                start the pipeline detached
#   gpu-path.sh collect SECONDS  wait up to SECONDS for the pipeline, then put its logs and
#                                results under $OUT (or print where they are)
#   gpu-path.sh status           one line: the step the pipeline is in
#   gpu-path.sh stash            keep the checkout's .carry-big/ (the bundle's largest files,
#                                Debian packages) in $STASH for the next call's `start`
#   gpu-path.sh pipeline         (what `start` runs detached; steps below)
#
# The pipeline, with the `local` shape, in a private copy of the checkout:
#   1. make setup (scripts/setup.sh) from the bundle (OCIBENCH_BUNDLE): its SHA256SUMS,
#      Spack, the source mirror, the develop sources (OMB 7.4, nccl-tests)
#   2. site scope: the versions the bundle has sources of (its unchecked Open MPI and
#      UCX), this image's externals
#   3. spack concretize; scripts/install.sh (the bundle's unchecked packages alone with
#      --no-checksum, the rest checked): UCX +cuda, OpenMPI +cuda fabrics=ucx, OMB
#      +cuda +nccl, nccl-tests, nvbandwidth; the Lmod module tree
#   4. beside it, the seeds' hand build (seed 000 sec 1, seed 003 sec 2) of the same
#      OMB and nccl-tests sources against the same OpenMPI
#   5. sanity: modules, the PML chosen (with and without pml = ucx), both PMLs' D D
#      bandwidth, both osu_latency binaries alternating, the node's copy ceilings
#   6. ROUNDS x (reframe -c checks/ -r -t gpu, then the seeds' command lines by hand)
#   7. scripts/device/summarize.py: both sets of figures, ratios, fractions of the links
#   8. OCIBENCH_BUILDCACHE=1: push UCX and Open MPI to a build cache and reinstall them
#      from it (collect returns it in 15 MiB parts; a later start carries .carry/buildcache)
#
# Needs the carry of scripts/device/make-carry.sh: .carry/ in the checkout, .carry-big/
# stashed by an earlier call.  NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0) in everything.
set -uo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)          # the checkout as it arrived
WORK=${OCIBENCH_DEVICE_WORK:-/tmp/ocibench-gpu}   # everything this script writes
REPO=$WORK/repo                                   # private copy the pipeline runs in
LOGS=$WORK/logs
RES=$WORK/results
STATE=$WORK/state
HAND=$WORK/hand                                   # the seeds' hand build
STASH=${OCIBENCH_DEVICE_STASH:-/tmp/ocibench-stash}  # outlives `start`'s rm -rf of $WORK
BUNDLE=$WORK/bundle                               # the two halves joined
JOBS=${OCIBENCH_JOBS:-$(nproc)}
ROUNDS=${OCIBENCH_ROUNDS:-2}
CACHE=${OCIBENCH_CACHE:-$HOME/.cache/oci-hpc-bench}
LMOD_INIT=/usr/share/lmod/lmod/init/bash
# OMB's options in the seeds' command lines (seed 000 sec 2-1/2-2)
SEED_LAT="-x 1000 -i 10000 -m 1:1"
SEED_BW="-x 10 -i 10 -m 268435456:268435456"

common_env() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  # Every run prints the protocols and transports UCX chose (issue: named causes).
  export UCX_PROTO_INFO=y
  export OCIBENCH_SHAPE=local
  # make setup and make install take everything from the bundle; the node's tools are
  # pyproject.toml's node group (no test tools, no plots)
  export OCIBENCH_BUNDLE=$BUNDLE OCIBENCH_PYTHON_EXTRAS=node
  export PYTHONPATH=$WORK/site:$REPO/src
  export PATH=$WORK/site/bin:$PATH
  export SPACK_PYTHON=${SPACK_PYTHON:-$(command -v python3)}
  # Lmod's fast Tcl interpreter needs libtcl8.6, which the image lacks; Spack writes
  # Lua module files, so Tcl is never needed.
  export LMOD_FAST_TCL_INTERP=no
  # The image sets OMPI_MCA_plm=isolated for its OpenMPI 4.1 (ORTE); OpenMPI 5's
  # PRRTE has no such component.  Single-node runs need no launcher agent.
  unset OMPI_MCA_plm
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

log() { echo "$(date -u +%T) $*" | tee -a "$LOGS/pipeline.log"; }
step() {  # the next step; OCIBENCH_DEVICE_STOP_BEFORE=<step> ends the pipeline there (dry runs)
  if [[ $1 == "${OCIBENCH_DEVICE_STOP_BEFORE:-}" ]]; then log "stopping before $1"; touch "$STATE/done"; exit 0; fi
  echo "$1" >"$STATE/step"; echo "$(date +%s) $1" >>"$STATE/steps"; log "== $1"
}
fail() { log "FAILED: $*"; echo "$*" >"$STATE/failed"; touch "$STATE/done"; exit 1; }
spack_() { "$CACHE/spack/bin/spack" "$@"; }

# --------------------------------------------------------------------------- start
start() {
  if [[ -f $STATE/step && ! -f $STATE/done ]]; then
    echo "gpu-path: a pipeline is running ($(cat "$STATE/step")); use collect"; return 0
  fi
  rm -rf "$WORK"
  mkdir -p "$REPO" "$LOGS" "$RES" "$STATE" "$HAND"
  common_env
  [[ -f $SRC/.carry/bundle/BUNDLE ]] || { echo "gpu-path: no .carry/bundle: run make-carry.sh and carry .carry"; return 1; }
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
  [[ -f $SRC/.carry/bundle.sha256 ]] || { echo "gpu-path: no .carry/bundle.sha256: run make-carry.sh"; return 1; }
  export OCIBENCH_BUNDLE_SHA256; OCIBENCH_BUNDLE_SHA256=$(cat "$SRC/.carry/bundle.sha256")
  PYTHONPATH=$REPO/src python3 -m ocibench.spack.bundle_verify "$BUNDLE" \
    || { echo "gpu-path: the bundle's halves do not join (stash .carry-big first)"; return 1; }
  # The image's Python is externally managed (PEP 668): the tools go into a directory of
  # their own on PYTHONPATH (common_env), and setup finds them present.
  if ! python3 -c 'import clingo, reframe, archspec' 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$WORK/site" "$BUNDLE"/wheels/*.whl || { echo "gpu-path: wheels did not install"; return 1; }
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
  grep -q "LMOD BROKEN" "$LOGS/00-start.log" && { echo "gpu-path: Lmod does not run"; return 1; }
  setsid nohup bash "$REPO/scripts/device/gpu-path.sh" pipeline >"$LOGS/pipeline.out" 2>&1 </dev/null &
  echo "gpu-path: pipeline started (pid $!), logs in $LOGS"
}

# --------------------------------------------------------------------------- pipeline
site_scope() {  # the admin scope of this machine: site/local/site.yaml
  local nccl_v zlib_v numa_v ompi_v ucx_v
  # the versions the bundle has the sources of (BUNDLE: unchecked=openmpi@5.0.7 ucx@1.19.0)
  ompi_v=$(sed -n 's/^unchecked=//p' "$BUNDLE/BUNDLE" | tr ' ' '\n' | sed -n 's/^openmpi@//p')
  ucx_v=$(sed -n 's/^unchecked=//p' "$BUNDLE/BUNDLE" | tr ' ' '\n' | sed -n 's/^ucx@//p')
  nccl_v=$(awk '/#define NCCL_MAJOR/{a=$3} /#define NCCL_MINOR/{b=$3} /#define NCCL_PATCH/{c=$3} END{print a"."b"."c}' /usr/include/nccl.h 2>/dev/null)
  zlib_v=$(sed -nE 's/^#define ZLIB_VERSION "([0-9.]+)".*/\1/p' /usr/include/zlib.h 2>/dev/null)
  numa_v=$(dpkg-query -W -f='${Version}' libnuma-dev 2>/dev/null | sed -E 's/^([0-9.]+).*/\1/')
  mkdir -p site/local
  {
    echo "# GENERATED by scripts/device/gpu-path.sh: this air-gapped GPU machine's site scope."
    echo "packages:"
    echo "  # The sources this machine has (the bundle's); the shape leaves versions open."
    echo "  # OpenMPI's bundled PMIx/PRRTE/hwloc/libevent (in the release tarball) instead of"
    echo "  # four more packages to fetch and build; no ssh on the image (~rsh), one node only."
    echo "  openmpi:"
    echo "    # ~fortran: the GPU path's benchmarks are C/C++ (and it saves the mpi_f08 build)."
    echo "    require: ['@$ompi_v +internal-pmix +internal-hwloc +internal-libevent ~rsh ~fortran']"
    echo "  # The tech tip gpu-with-ubuntu's UCX (configure-release --with-cuda --with-gdrcopy;"
    echo "  # CMA from UCX's own default), GDRCopy 2.5.1; no XPMEM: this machine has no /dev/xpmem."
    echo "  ucx:"
    echo "    require: ['@$ucx_v +cuda +gdrcopy +cma']"
    echo "  gdrcopy:"
    echo "    require: ['@2.5.1 cuda_arch=90']"
    echo "  nvbandwidth:"
    echo "    require: ['@v0.8 cuda_arch=90']"
    local dp=$WORK/debs-prefix/usr
    if [[ -f /usr/include/check.h ]]; then echo "  check: {externals: [{spec: check@0.15.2, prefix: /usr}], buildable: false}"
    elif [[ -f $dp/include/check.h ]]; then echo "  check: {externals: [{spec: check@0.15.2, prefix: $dp}], buildable: false}"; fi
    # (the image may have Boost's headers without the program_options library)
    if [[ -e /usr/lib/x86_64-linux-gnu/libboost_program_options.so ]]; then
      echo "  boost: {externals: [{spec: boost@$(sed -nE 's/^#define BOOST_LIB_VERSION \"([0-9]+)_([0-9]+).*/\1.\2.0/p' /usr/include/boost/version.hpp)+program_options, prefix: /usr}], buildable: false}"
    elif [[ -f $dp/include/boost/program_options.hpp ]]; then
      echo "  boost: {externals: [{spec: boost@1.74.0+program_options, prefix: $dp}], buildable: false}"
    fi
    echo "  # Libraries of the image (Ubuntu packages) that Spack's detection does not report."
    if [[ -n $zlib_v ]]; then
      # Not prefix /usr: OpenMPI passes --with-zlib=<prefix> to its bundled PMIx, whose
      # configure looks in <prefix>/lib and lib64 only, and Ubuntu's libz.so is in
      # /usr/lib/x86_64-linux-gnu ("checking for zlib library (z) in /usr... not found").
      # A prefix of links to the image's own zlib files gives it the plain layout.
      local zp=$CACHE/image-prefixes/zlib
      mkdir -p "$zp/include" "$zp/lib"
      ln -sf /usr/include/zlib.h "$zp/include/"
      for h in /usr/include/zconf.h /usr/include/x86_64-linux-gnu/zconf.h; do
        [[ -e $h ]] && { ln -sf "$h" "$zp/include/zconf.h"; break; }
      done
      for f in /usr/lib/x86_64-linux-gnu/libz.so* /usr/lib/x86_64-linux-gnu/libz.a; do
        [[ -e $f ]] && ln -sf "$f" "$zp/lib/"
      done
      echo "  zlib: {externals: [{spec: zlib@$zlib_v, prefix: $zp}], buildable: false}"
      echo "  zlib-ng: {buildable: false}"
    fi
    [[ -n $numa_v ]] && echo "  numactl: {externals: [{spec: numactl@$numa_v, prefix: /usr}], buildable: false}"
    if [[ -n $nccl_v ]] && ! python3 - <<'EOF'
import sys, yaml
scope = yaml.safe_load(open("site/spack/generated/shapes/local.yaml"))
sys.exit(0 if scope["packages"].get("nccl", {}).get("externals") else 1)
EOF
    then
      echo "  # ocibench's NCCL detection looks for include/ beside lib/; Ubuntu's libnccl-dev"
      echo "  # has /usr/lib/x86_64-linux-gnu/libnccl.so and /usr/include/nccl.h."
      echo "  nccl: {externals: [{spec: nccl@$nccl_v, prefix: /usr}], buildable: false}"
    fi
  } >site/local/site.yaml
  cat site/local/site.yaml
}

hand_build() {  # seed 000 sec 1 and seed 003 sec 2, by hand, against Spack's OpenMPI
  local ompi=$1
  local t0=$SECONDS
  # Installed means in Spack's database (the prefix and .spack/ exist from the start).
  until [[ -f $STATE/done ]] || spack_ -e . find --format '{prefix}' openmpi 2>/dev/null | grep -qxF "$ompi"; do
    sleep 10
  done
  [[ -x $ompi/bin/mpicc ]] || { echo "hand build: OpenMPI never got installed"; return 1; }
  echo "hand build: OpenMPI at $ompi after $((SECONDS - t0)) s"
  export PATH=$ompi/bin:$PATH     # seeds: module load nvhpc openmpi
  [[ $(command -v mpicc) == "$ompi/bin/mpicc" ]] || { echo "hand build: mpicc is $(command -v mpicc)"; return 1; }
  local omb nccl_tests  # the develop sources' tarballs: the same as Spack builds
  omb=$(awk '$1 == "osu-micro-benchmarks" {print $1 "-" $2}' "$BUNDLE/develop/SOURCES")
  nccl_tests=$(awk '$1 == "nccl-tests" {print $1 "-" $2}' "$BUNDLE/develop/SOURCES")
  (
    set -e
    tar -xzf "$BUNDLE/develop/$omb.tar.gz" -C "$HAND" && cd "$HAND/$omb"
    # The one deviation from the seed: CUDA 13 changed cudaMemPrefetchAsync; the same
    # patch the Spack recipe applies.
    patch -p1 <"$REPO/repos/spack_repo/ocibench/packages/osu_micro_benchmarks/cuda13-mem-prefetch.patch"
    ./configure CC=mpicc CXX=mpicxx --prefix="$HAND/omb" --enable-cuda \
      --with-cuda-include=/usr/local/cuda/include --with-cuda-libpath=/usr/local/cuda/lib64 \
      --enable-ncclomb --with-nccl=/usr >"$LOGS/hand-omb-configure.log" 2>&1
    # (seed 000's libtool edit puts NVHPC's compilers/bin on PATH: no NVHPC here)
    make -j "$JOBS" >"$LOGS/hand-omb-make.log" 2>&1 && make install >>"$LOGS/hand-omb-make.log" 2>&1
    echo "hand build: OMB done after $((SECONDS - t0)) s"
  ) &
  local omb_pid=$!
  (
    set -e
    tar -xzf "$BUNDLE/develop/$nccl_tests.tar.gz" -C "$HAND" && mv "$HAND/$nccl_tests" "$HAND/nccl-tests"
    cd "$HAND/nccl-tests"
    make -j "$JOBS" MPI=1 MPI_HOME="$ompi" CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr \
      >"$LOGS/hand-nccl-tests-make.log" 2>&1
    echo "hand build: nccl-tests done after $((SECONDS - t0)) s"
  ) &
  local nccl_pid=$!
  local rc=0
  wait $omb_pid || { echo "hand build: OMB FAILED"; rc=1; }
  wait $nccl_pid || { echo "hand build: nccl-tests FAILED"; rc=1; }
  return $rc
}

modules_env() {  # Lmod with the shape's tree
  # shellcheck source=/dev/null  # Lmod's own script, not this repository's
  source "$LMOD_INIT"
  module use "$(python3 -m ocibench.cli spack-config --print modulepath --shape local)"
}

seed_env() {  # the seeds' run environment (module load nvhpc openmpi), after modules_env
  module load cuda nccl openmpi
  # nvhpc's module puts the CUDA libraries on LD_LIBRARY_PATH, and the seeds' openmpi
  # module its lib/ (seed 003 runs nccl-tests with -x LD_LIBRARY_PATH); Spack's do
  # not (RPATHs).  nccl-tests' Makefile links -lmpi without an RPATH, so without it
  # all_reduce_perf loads the image's Open MPI 4.1 and starts as a singleton (seen:
  # "plm_rsh_agent: ssh : rsh").
  LD_LIBRARY_PATH=/usr/local/cuda/lib64:$(dirname "$(command -v mpirun)")/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
}

pe_list() {  # the cores of an H-D or D-H run ($1), in rank order, as the checks place them
  python3 - "$1" <<'EOF'
import sys
from checks.base import host_device_cores
from ocibench import shapes
from ocibench.reframe import site as reframe_site
cores, why = host_device_cores(reframe_site.partition_extras(shapes.load("local"), nodes=1),
                               sys.argv[1], "same-numa")
sys.exit(why) if cores is None else print(",".join(map(str, cores)))
EOF
}

hand_runs() {  # the seeds' command lines (seed 000 sec 2-1/2-2/2-5, seed 003 sec 3-1); $2: all|pt2pt
  local d=$1 hd dh
  mkdir -p "$d"
  if ! hd=$(pe_list H-D) || ! dh=$(pe_list D-H); then
    echo "hand runs: the checks give no same-NUMA H-D/D-H placement (above)"; return 1
  fi
  (
    modules_env
    seed_env
    root=$HAND/omb/libexec/osu-micro-benchmarks  # seed 000's omb module file
    # shellcheck disable=SC2030  # the runs' subshell: PATH is meant to stay there
    export PATH=$root:$root/mpi/collective:$root/mpi/congestion:$root/mpi/one-sided:$root/mpi/pt2pt:$root/mpi/startup:$root/xccl/collective:$root/xccl/pt2pt:$PATH
    read -ra lat <<<"$SEED_LAT"; read -ra bw <<<"$SEED_BW"  # option lists, one word each
    run() { local name=$1; shift; echo "\$ $*" >"$d/$name.out"; timeout 300 "$@" >>"$d/$name.out" 2>&1; echo "rc=$?" >>"$d/$name.out"; }
    run osu_latency_D-D mpirun -n 2 --report-bindings osu_latency "${lat[@]}" -d cuda D D
    run osu_bw_D-D      mpirun -n 2 --report-bindings osu_bw "${bw[@]}" -d cuda D D
    run osu_latency_H-D_same-numa mpirun -n 2 --map-by "pe-list=$hd:ordered" --report-bindings numactl -l osu_latency "${lat[@]}" -d cuda H D
    run osu_latency_D-H_same-numa mpirun -n 2 --map-by "pe-list=$dh:ordered" --report-bindings numactl -l osu_latency "${lat[@]}" -d cuda D H
    run osu_bw_H-D_same-numa      mpirun -n 2 --map-by "pe-list=$hd:ordered" --report-bindings numactl -l osu_bw "${bw[@]}" -d cuda H D
    run osu_bw_D-H_same-numa      mpirun -n 2 --map-by "pe-list=$dh:ordered" --report-bindings numactl -l osu_bw "${bw[@]}" -d cuda D H
    # -M as in checks/osu.py: OMB 7.4 caps messages at 512 MiB without it
    [[ ${2:-all} == all ]] || exit 0   # pt2pt: the point-to-point figures only
    run osu_xccl_allreduce mpirun -n 2 osu_xccl_allreduce -x 10 -i 10 -m 1073741824:1073741824 -M 1073741824 -d cuda D D
    cd "$HAND/nccl-tests" && run nccl_all_reduce_perf mpirun -n 2 ./build/all_reduce_perf -b 10G -e 10G -t 1 -g 1
  )
}

reframe_run() {  # ours: the checks through the module tree; $2...: more reframe options
  local d=$1; shift
  mkdir -p "$d"
  OCIBENCH_PERFLOG_DIR=$d/perflogs OCIBENCH_REPORT_DIR=$d/reports \
    reframe -C site/reframe_config.py -c checks/ -r -t gpu "$@" -o "$d/output" -s "$d/stage" \
    >"$d/reframe.log" 2>&1
  echo "reframe exit $?" >>"$d/reframe.log"
  tail -30 "$d/reframe.log"
}

transports() (  # (a subshell: its modules stay out of the runs after it) what the node has and what UCX makes of it: preflight, gdr_copy, CMA on/off, ceilings
  modules_env
  local m; for m in openmpi omb nvbandwidth ucx gdrcopy; do module load "$m" 2>&1 || echo "no module $m"; done
  # gdrcopy's tools: from its module where the tree has one, else from its prefix.
  # shellcheck disable=SC2031  # this function is a subshell of its own
  command -v gdrcopy_sanity >/dev/null || PATH=$(spack_ -e . location -i gdrcopy)/bin:$PATH
  echo "-- ocibench preflight --shape local"
  python3 -m ocibench.cli preflight --shape local; echo "preflight exit $?"
  python3 -m ocibench.cli preflight --shape local --json >"$RES/preflight.json"
  python3 -m ocibench.cli preflight --shape BM.GPU4.8 --json >"$RES/preflight-BM.GPU4.8.json"
  python3 -m ocibench.cli preflight --shape BM.GPU4.8; echo "preflight BM.GPU4.8 exit $?"
  echo "-- ucx_info -v / -b / -d"
  ucx_info -v; ucx_info -b | grep -E 'MODULES|HAVE_CMA|GDR'; ucx_info -d | grep -E 'Transport|Memory domain|Component'
  echo "-- UCX's diagnostics on gdr_copy (no /dev/gdrdrv here)"
  UCX_LOG_LEVEL=diag ucx_info -d 2>&1 | grep -iE 'gdr' | head -10
  ls -la /dev/gdrdrv /dev/xpmem 2>&1; lsmod 2>/dev/null | grep -E 'gdrdrv|xpmem|peermem' || echo "no gdrdrv/xpmem/peermem module"
  echo "-- gdrcopy's own tools"
  for t in gdrcopy_sanity gdrcopy_copylat gdrcopy_copybw; do printf '%s: ' "$t"; command -v "$t" || echo "not on PATH"; done
  timeout 60 gdrcopy_sanity 2>&1 | tail -5
  echo "-- nvbandwidth (copy engines and SMs)"
  timeout 300 nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce \
    device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce \
    host_to_device_memcpy_sm device_to_host_memcpy_sm 2>&1 | tee "$RES/nvbandwidth.txt"
  echo "-- CMA on and off (UCX_TLS=^cma), alternating, 3 rounds; D-D latency, H-D/D-H bandwidth"
  local hd dh
  hd=$(pe_list H-D); dh=$(pe_list D-H)
  read -ra lat <<<"$SEED_LAT"; read -ra bw <<<"$SEED_BW"
  for i in 1 2 3; do
    for cma in on off; do
      tls=(); [[ $cma == off ]] && tls=(-x UCX_TLS=^cma)
      printf 'CMA %s round %s D-D lat: ' "$cma" "$i"
      timeout 60 mpirun -n 2 "${tls[@]}" osu_latency "${lat[@]}" -d cuda D D 2>&1 | awk '$1 == 1 {print $2}'
      printf 'CMA %s round %s H-D bw: ' "$cma" "$i"
      timeout 60 mpirun -n 2 "${tls[@]}" --map-by "pe-list=$hd:ordered" numactl -l osu_bw "${bw[@]}" -d cuda H D 2>&1 | awk '$1 == 268435456 {print $2}'
      printf 'CMA %s round %s D-H bw: ' "$cma" "$i"
      timeout 60 mpirun -n 2 "${tls[@]}" --map-by "pe-list=$dh:ordered" numactl -l osu_bw "${bw[@]}" -d cuda D H 2>&1 | awk '$1 == 268435456 {print $2}'
    done
  done
  echo "-- protocol tables, one run each (kept whole)"
  timeout 60 mpirun -n 2 osu_latency "${lat[@]}" -d cuda D D >"$RES/proto-osu_latency-D-D.txt" 2>&1
  timeout 60 mpirun -n 2 -x UCX_TLS=^cma osu_latency "${lat[@]}" -d cuda D D >"$RES/proto-osu_latency-D-D-nocma.txt" 2>&1
  timeout 60 mpirun -n 2 --map-by "pe-list=$hd:ordered" numactl -l osu_bw "${bw[@]}" -d cuda H D >"$RES/proto-osu_bw-H-D.txt" 2>&1
  timeout 60 mpirun -n 2 osu_latency -x 100 -i 1000 -d cuda H H >"$RES/proto-osu_latency-H-H.txt" 2>&1
)

pipeline() {
  common_env
  cd "$REPO" || fail "no $REPO"
  log "pipeline: $JOBS jobs, $ROUNDS rounds, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"

  step setup
  bash scripts/setup.sh >"$LOGS/01-setup.log" 2>&1 || fail "make setup (logs/01-setup.log)"

  step site-scope
  {
    gen=site/spack/generated
    # (ocibench spack-config builds Open MPI +cuda when the image's is not CUDA-aware)
    site_scope
    cat "$gen/shapes/local.yaml"
    spack_ -e . add nvbandwidth
  } >"$LOGS/02-site-scope.log" 2>&1 || fail "site scope (logs/02-site-scope.log)"

  step concretize
  spack_ -e . concretize --force >"$LOGS/03-concretize.log" 2>&1 || fail "concretize (logs/03-concretize.log)"
  ompi=$(spack_ -e . python -c 'import spack.environment as ev; print(next(s.prefix for s in ev.active_environment().all_specs() if s.name == "openmpi"))' \
         2>>"$LOGS/03-concretize.log")
  [[ -n $ompi ]] || fail "no openmpi in the concretized environment"
  log "openmpi prefix: $ompi"
  spack_ -e . find -c -l -v >>"$LOGS/03-concretize.log" 2>&1

  step install
  if [[ -d $WORK/buildcache-in ]]; then
    spack_ -e . mirror add --unsigned --type binary carried-buildcache "$WORK/buildcache-in" \
      || fail "the carried build cache cannot be added as a mirror"
    log "binary mirror: the carried build cache ($(find "$WORK/buildcache-in" -name '*.spack' -o -name '*.tar.*' | wc -l) files)"
  fi
  hand_build "$ompi" >"$LOGS/05-hand-build.log" 2>&1 &
  hand_pid=$!
  local t0=$SECONDS
  # OpenMPI's bundled hwloc 2.7.1 takes --without-rocm (from the recipe's ~rocm) as the
  # ROCm directory "no" and, where OpenCL headers exist (/usr/include/CL on this image),
  # builds its OpenCL plugin with -Ino/opencl/include -Lno/opencl/lib, which libtool
  # rejects.  hwloc skips OpenCL when enable_opencl=no, which configure inherits.
  export enable_opencl=no
  # (also the module tree: spack module lmod refresh)
  bash scripts/install.sh openmpi osu-micro-benchmarks nccl-tests nvbandwidth >"$LOGS/04-install.log" 2>&1
  rc=$?
  log "spack install: rc=$rc after $((SECONDS - t0)) s"
  if ((rc != 0)); then
    mkdir -p "$LOGS/failed-builds"
    find /tmp -path '*spack-stage*' \( -name spack-build-out.txt -o -name config.log \) -newer "$STATE/steps" \
      -exec sh -c 'cp "$1" "$2/$(echo "$1" | tr / _)"' _ {} "$LOGS/failed-builds" \; 2>/dev/null
    fail "spack install (logs/04-install.log, logs/failed-builds/)"
  fi
  spack_ -e . find -l -v >>"$LOGS/04-install.log" 2>&1

  step hand-build-wait
  wait $hand_pid; hrc=$?
  log "hand build: rc=$hrc"
  tail -3 "$LOGS/05-hand-build.log" | while read -r l; do log "  $l"; done

  step sanity
  (
    modules_env
    module avail 2>&1
    module load openmpi omb && module list 2>&1
    command -v mpirun osu_latency osu_xccl_allreduce
    ompi_info --parsable --all | grep -E 'mpi_built_with_cuda_support:value'
    ompi_info | grep -iE 'MCA (pml|accelerator|btl)'
    module load ucx && ucx_info -v && ucx_info -d | grep -E 'Transport|Device|Memory domain' | head -40
    grep -v '^#' "$(dirname "$(command -v mpirun)")/../etc/openmpi-mca-params.conf" | grep .
    pml_selected() {
      timeout 60 mpirun -n 2 --mca pml_base_verbose 10 osu_latency -x 1 -i 10 -m 1:1 -d cuda D D 2>&1 \
        | grep -iE 'select|pml|Latency|^1 ' | head -20
    }
    echo "-- the PML with the site's default (our recipe's pml = ucx):"
    pml_selected
    echo "-- the PML Open MPI picks by itself (no parameter file):"
    OMPI_MCA_mca_base_param_files=/dev/null pml_selected
    # What each PML gives for the D D bandwidth figure, and the copy engines' ceiling
    for pml in ucx ob1; do
      echo "-- osu_bw D D 256 MiB, pml $pml:"
      # shellcheck disable=SC2086  # $SEED_BW is an option list: split on purpose
      timeout 120 mpirun -n 2 --mca pml "$pml" osu_bw $SEED_BW -d cuda D D 2>&1 | tail -3
    done
    # osu_latency D D, Spack's binary and the hand-built one, alternating, in one
    # environment (the hand runs'): a difference left is the binaries'.
    # shellcheck disable=SC2034  # `hand` is read through ${!who} below
    ours=$(command -v osu_latency) hand=$HAND/omb/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency
    cp "${ours%/libexec/*}"/.spack/spack-build-out.txt* "$LOGS/"
    (
      seed_env
      for who in ours hand; do echo "-- ldd $who: ${!who}"; ldd "${!who}"; done
      for i in 1 2 3; do
        for who in ours hand; do
          printf 'A/B %s %s: ' "$i" "$who"
          # shellcheck disable=SC2086
          timeout 60 mpirun -n 2 "${!who}" $SEED_LAT -d cuda D D 2>&1 | awk '$1 == 1 {print $2}'
        done
      done
    )
    # The node's copy ceilings: the nvbandwidth check (copy engines and the pageable
    # copy) runs with the checks; here the same two commands, for the summary
    # (nvbandwidth at its default buffer size: checks/nvbandwidth.py says why).
    module load nvbandwidth && nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce \
      device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce | tee "$RES/copy-ceiling.txt"
    python3 -m ocibench.node.pageable_copy --size $((256 * 2**20)) | tee -a "$RES/copy-ceiling.txt"
  ) >"$LOGS/07-sanity.log" 2>&1

  step transports
  transports >"$LOGS/08-transports.log" 2>&1

  for ((r = 1; r <= ROUNDS; r++)); do
    step "reframe-$r"
    # Round 1 runs every GPU check; later rounds the point-to-point ones the
    # ours/hand ratios are taken on (the collectives' rounds cost minutes each).
    select=(); ((r > 1)) && select=(-n 'osu_latency|osu_bw')
    reframe_run "$RES/reframe-$r" "${select[@]}" >>"$LOGS/pipeline.log" 2>&1
    if ((hrc == 0)); then
      step "hand-$r"
      if ((r > 1)); then hand_runs "$RES/hand-$r" pt2pt; else hand_runs "$RES/hand-$r" all; fi
    fi
    python3 "$REPO/scripts/device/summarize.py" "$RES" >"$RES/summary.txt" 2>&1
  done

  if [[ ${OCIBENCH_BUILDCACHE:-0} != 1 ]]; then step finished; touch "$STATE/done"; return; fi
  # The binary build cache of what takes the build's time (UCX, OpenMPI: ~7 of its
  # ~8 minutes), for the next run on a machine without them (start: .carry/buildcache).
  step buildcache
  mkdir -p "$WORK/buildcache"
  local t1=$SECONDS
  spack_ -e . buildcache push --unsigned --update-index --only package "$WORK/buildcache" ucx openmpi \
    >"$LOGS/08-buildcache.log" 2>&1 || { log "buildcache push failed"; step finished; touch "$STATE/done"; return; }
  log "buildcache push: $((SECONDS - t1)) s, $(du -sh "$WORK/buildcache" | cut -f1)"
  # The round trip a later run makes: both removed, then installed from the cache alone.
  {
    spack_ -e . mirror add --unsigned --type binary gpu-path-buildcache "$WORK/buildcache"
    spack_ -e . uninstall -y -f openmpi ucx
  } >>"$LOGS/08-buildcache.log" 2>&1
  t1=$SECONDS
  spack_ -e . install --cache-only openmpi >>"$LOGS/08-buildcache.log" 2>&1
  log "openmpi and ucx from the build cache alone: rc=$? after $((SECONDS - t1)) s"
  (modules_env; module load openmpi && ompi_info --parsable --all | grep mpi_built_with_cuda_support:value) \
    >>"$LOGS/08-buildcache.log" 2>&1
  step finished
  touch "$STATE/done"
}

# --------------------------------------------------------------------------- collect
collect() {
  local seconds=${1:-0} last="" now
  local deadline=$((SECONDS + seconds))
  while [[ ! -f $STATE/done ]] && ((SECONDS < deadline)); do
    now=$(cat "$STATE/step" 2>/dev/null)
    [[ $now != "$last" ]] && echo "$(date -u +%T) step: $now" && last=$now
    sleep 5
  done
  echo "== pipeline.log"; tail -40 "$LOGS/pipeline.log" 2>/dev/null
  if [[ -f $STATE/failed ]]; then
    echo "== FAILED: $(cat "$STATE/failed")"
    for f in "$LOGS"/0*.log; do echo "== tail $f"; tail -15 "$f"; done
  fi
  [[ -f $RES/summary.txt ]] && { echo "== summary"; cat "$RES/summary.txt"; }
  if [[ -n ${OUT:-} ]]; then
    tar -C "$WORK" --exclude='*.so' -czf "$OUT/gpu-path.tgz" logs results state 2>/dev/null
    [[ -f $RES/summary.txt ]] && cp "$RES/summary.txt" "$RES/summary.json" "$OUT/" 2>/dev/null
    if [[ -f $STATE/done && -d $WORK/buildcache ]]; then
      # In parts, joined again with `cat buildcache.tar.part-* | tar -x -C .carry`
      # (docs/device-runs.md).
      tar -C "$WORK" -cf - buildcache | split -b 15M - "$OUT/buildcache.tar.part-"
      du -ch "$OUT"/buildcache.tar.part-* | tail -1
    fi
    ls -la "$OUT"
  fi
}

case ${1:-} in
  start) start ;;
  stash) rm -rf "$STASH"; mkdir -p "$STASH" && cp -r "$SRC/.carry-big/." "$STASH/" && du -sh "$STASH" ;;
  pipeline) mkdir -p "$LOGS" "$STATE"; pipeline ;;
  collect) collect "${2:-0}" ;;
  status) cat "$STATE/step" 2>/dev/null || echo "not started" ;;
  *) sed -n '2,28p' "$0"; exit 2 ;;
esac
