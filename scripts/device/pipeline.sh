#!/usr/bin/env bash
# The GPU path end to end, with the `local` shape, in a private copy of the checkout
# (start.sh runs it detached; docs/device-runs.md):
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
#      bandwidth, both osu_latency binaries alternating, the node's copy ceilings (on a
#      node of one GPU, H D in the place of D D, and the D-D and one-node collective
#      runs skipped, saying so: they need two GPUs)
#   6. ROUNDS x (reframe -c checks/ -r -t gpu, then the seeds' command lines by hand)
#   7. scripts/device/summarize.py: both sets of figures, ratios, fractions of the links
#   8. OCIBENCH_BUILDCACHE=1: push UCX and Open MPI to a build cache and reinstall them
#      from it (collect.sh returns it in 15 MiB parts; a later start.sh carries
#      .carry/buildcache)
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

site_scope() {  # the admin scope of this machine: site/local/site.yaml (ocibench writes it)
  local nccl_v zlib_v numa_v ompi_v ucx_v boost_v dp=$WORK/debs-prefix/usr
  # the versions the bundle has the sources of (BUNDLE: unchecked=openmpi@5.0.7 ucx@1.19.0)
  ompi_v=$(sed -n 's/^unchecked=//p' "$BUNDLE/BUNDLE" | tr ' ' '\n' | sed -n 's/^openmpi@//p')
  ucx_v=$(sed -n 's/^unchecked=//p' "$BUNDLE/BUNDLE" | tr ' ' '\n' | sed -n 's/^ucx@//p')
  nccl_v=$(awk '/#define NCCL_MAJOR/{a=$3} /#define NCCL_MINOR/{b=$3} /#define NCCL_PATCH/{c=$3} END{print a"."b"."c}' /usr/include/nccl.h 2>/dev/null)
  zlib_v=$(sed -nE 's/^#define ZLIB_VERSION "([0-9.]+)".*/\1/p' /usr/include/zlib.h 2>/dev/null)
  numa_v=$(dpkg-query -W -f='${Version}' libnuma-dev 2>/dev/null | sed -E 's/^([0-9.]+).*/\1/')
  local scope=(
    # The sources this machine has (the bundle's); the shape leaves versions open.
    # OpenMPI's bundled PMIx/PRRTE/hwloc/libevent (in the release tarball) instead of
    # four more packages to fetch and build; no ssh on the image (~rsh), one node only;
    # ~fortran: the GPU path's benchmarks are C/C++ (and it saves the mpi_f08 build).
    --require "openmpi=@$ompi_v +internal-pmix +internal-hwloc +internal-libevent ~rsh ~fortran"
    # The tech tip gpu-with-ubuntu's UCX (configure-release --with-cuda --with-gdrcopy;
    # CMA from UCX's own default), GDRCopy 2.5.1; no XPMEM: this machine has no /dev/xpmem.
    --require "ucx=@$ucx_v +cuda +gdrcopy +cma"
    --require "gdrcopy=@2.5.1 cuda_arch=90"
    --require "nvbandwidth=@v0.8 cuda_arch=90"
  )
  # Libraries of the image (Ubuntu packages) that Spack's detection does not report.
  if [[ -f /usr/include/check.h ]]; then scope+=(--external "check@0.15.2=/usr")
  elif [[ -f $dp/include/check.h ]]; then scope+=(--external "check@0.15.2=$dp"); fi
  # (the image may have Boost's headers without the program_options library)
  if [[ -e /usr/lib/x86_64-linux-gnu/libboost_program_options.so ]]; then
    boost_v=$(sed -nE 's/^#define BOOST_LIB_VERSION "([0-9]+)_([0-9]+).*/\1.\2.0/p' /usr/include/boost/version.hpp)
    scope+=(--external "boost@$boost_v+program_options=/usr")
  elif [[ -f $dp/include/boost/program_options.hpp ]]; then
    scope+=(--external "boost@1.74.0+program_options=$dp")
  fi
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
    scope+=(--external "zlib@$zlib_v=$zp" --not-buildable zlib-ng)
  fi
  [[ -n $numa_v ]] && scope+=(--external "numactl@$numa_v=/usr")
  # ocibench's NCCL detection looks for include/ beside lib/; Ubuntu's libnccl-dev has
  # /usr/lib/x86_64-linux-gnu/libnccl.so and /usr/include/nccl.h: named here where the
  # shape's generated scope has no NCCL external.
  if [[ -n $nccl_v ]] && ! python3 -c 'import sys, yaml
scope = yaml.safe_load(open(sys.argv[1]))
sys.exit(0 if scope["packages"].get("nccl", {}).get("externals") else 1)' site/spack/generated/shapes/local.yaml
  then
    scope+=(--external "nccl@$nccl_v=/usr")
  fi
  python3 -m ocibench.cli spack-config --site site/local/site.yaml "${scope[@]}" || return 1
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

GPUS=$(node_gpus)
read -ra PAIR <<<"$(pair_buffers "$GPUS")"

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
    if two_gpus "$GPUS" "osu_latency and osu_bw D-D"; then
      run osu_latency_D-D mpirun -n 2 --report-bindings osu_latency "${lat[@]}" -d cuda D D
      run osu_bw_D-D      mpirun -n 2 --report-bindings osu_bw "${bw[@]}" -d cuda D D
    fi
    run osu_latency_H-D_same-numa mpirun -n 2 --map-by "pe-list=$hd:ordered" --report-bindings numactl -l osu_latency "${lat[@]}" -d cuda H D
    run osu_latency_D-H_same-numa mpirun -n 2 --map-by "pe-list=$dh:ordered" --report-bindings numactl -l osu_latency "${lat[@]}" -d cuda D H
    run osu_bw_H-D_same-numa      mpirun -n 2 --map-by "pe-list=$hd:ordered" --report-bindings numactl -l osu_bw "${bw[@]}" -d cuda H D
    run osu_bw_D-H_same-numa      mpirun -n 2 --map-by "pe-list=$dh:ordered" --report-bindings numactl -l osu_bw "${bw[@]}" -d cuda D H
    # -M as in checks/osu.py: OMB 7.4 caps messages at 512 MiB without it
    [[ ${2:-all} == all ]] || exit 0   # pt2pt: the point-to-point figures only
    two_gpus "$GPUS" "the one-node collectives (osu_xccl_allreduce, all_reduce_perf)" || exit 0
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
      printf 'CMA %s round %s %s lat: ' "$cma" "$i" "${PAIR[*]}"
      timeout 60 mpirun -n 2 "${tls[@]}" osu_latency "${lat[@]}" -d cuda "${PAIR[@]}" 2>&1 | awk '$1 == 1 {print $2}'
      printf 'CMA %s round %s H-D bw: ' "$cma" "$i"
      timeout 60 mpirun -n 2 "${tls[@]}" --map-by "pe-list=$hd:ordered" numactl -l osu_bw "${bw[@]}" -d cuda H D 2>&1 | awk '$1 == 268435456 {print $2}'
      printf 'CMA %s round %s D-H bw: ' "$cma" "$i"
      timeout 60 mpirun -n 2 "${tls[@]}" --map-by "pe-list=$dh:ordered" numactl -l osu_bw "${bw[@]}" -d cuda D H 2>&1 | awk '$1 == 268435456 {print $2}'
    done
  done
  echo "-- protocol tables, one run each (kept whole)"
  if two_gpus "$GPUS" "the D-D protocol tables"; then
    timeout 60 mpirun -n 2 osu_latency "${lat[@]}" -d cuda D D >"$RES/proto-osu_latency-D-D.txt" 2>&1
    timeout 60 mpirun -n 2 -x UCX_TLS=^cma osu_latency "${lat[@]}" -d cuda D D >"$RES/proto-osu_latency-D-D-nocma.txt" 2>&1
  fi
  timeout 60 mpirun -n 2 --map-by "pe-list=$hd:ordered" numactl -l osu_bw "${bw[@]}" -d cuda H D >"$RES/proto-osu_bw-H-D.txt" 2>&1
  timeout 60 mpirun -n 2 osu_latency -x 100 -i 1000 -d cuda H H >"$RES/proto-osu_latency-H-H.txt" 2>&1
)

one_gpu() (  # the node as a node of one GPU: CUDA_VISIBLE_DEVICES=0, in this subshell only
  local d=$RES/one-gpu
  mkdir -p "$d"
  export CUDA_VISIBLE_DEVICES=0   # the local shape then describes one GPU (shapes/probe.py)
  python3 -m ocibench.cli shape --show local 2>&1 | grep -A8 'gpus' || true
  reframe_run "$d"
  # nccl-tests on one rank, as a one-GPU user runs it (the check needs two GPUs to be a
  # collective): its algbw recorded, or UNJUDGED; never FAIL.
  (
    modules_env
    for m in cuda nccl openmpi nccl-tests; do module load "$m" || echo "no module $m"; done
    command -v all_reduce_perf
    timeout 300 mpirun -n 1 all_reduce_perf -b 10G -e 10G -t 1 -g 1 \
      >"$d/all_reduce_perf.1rank.txt" 2>&1
    echo "rc=$?" >>"$d/all_reduce_perf.1rank.txt"
    cat "$d/all_reduce_perf.1rank.txt"
    python3 -m ocibench.cli evaluate nccl_all_reduce_perf "$d/all_reduce_perf.1rank.txt" \
      --shape local --set nodes=1 --set gpus_per_node=1 --set begin=10G --set end=10G
    echo "evaluate exit $?"
  )
)

nccl_paths() {  # the NCCL checks under ReFrame, forced off NVLink: each must FAIL naming the path
  local name
  for name in shm socket; do
    (
      export NCCL_P2P_DISABLE=1
      [[ $name == socket ]] && export NCCL_SHM_DISABLE=1
      echo "-- $name: NCCL_P2P_DISABLE=$NCCL_P2P_DISABLE NCCL_SHM_DISABLE=${NCCL_SHM_DISABLE:-}"
      reframe_run "$RES/nccl-$name" -n 'nccl_all_reduce_perf|osu_xccl_allreduce'
    )
  done
}

pipeline() {
  common_env
  cd "$REPO" || fail "no $REPO"
  log "pipeline: $JOBS jobs, $ROUNDS rounds, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE, $GPUS GPU(s)"
  # how the GPUs are joined (the local shape's links.nvlink_gbs is read from the first)
  nvidia-smi nvlink --status >"$RES/nvidia-smi-nvlink-status.txt" 2>&1
  nvidia-smi topo -m >"$RES/nvidia-smi-topo.txt" 2>&1

  step setup
  bash scripts/setup.sh >"$LOGS/01-setup.log" 2>&1 || fail "make setup (logs/01-setup.log)"

  step site-scope
  {
    gen=site/spack/generated
    # (ocibench spack-config builds Open MPI +cuda when the image's is not CUDA-aware)
    site_scope &&
    cat "$gen/shapes/local.yaml" &&
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
  if skipped hand; then
    echo "skipped (OCIBENCH_DEVICE_SKIP)" >"$LOGS/05-hand-build.log"; hand_pid=
  else
    hand_build "$ompi" >"$LOGS/05-hand-build.log" 2>&1 &
    hand_pid=$!
  fi
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
  hrc=1; [[ -n $hand_pid ]] && { wait "$hand_pid"; hrc=$?; }
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
      timeout 60 mpirun -n 2 --mca pml_base_verbose 10 osu_latency -x 1 -i 10 -m 1:1 -d cuda "${PAIR[@]}" 2>&1 \
        | grep -iE 'select|pml|Latency|^1 ' | head -20
    }
    echo "-- the PML with the site's default (our recipe's pml = ucx):"
    pml_selected
    echo "-- the PML Open MPI picks by itself (no parameter file):"
    OMPI_MCA_mca_base_param_files=/dev/null pml_selected
    # What each PML gives for the D D bandwidth figure (H D on one GPU)
    for pml in ucx ob1; do
      echo "-- osu_bw ${PAIR[*]} 256 MiB, pml $pml:"
      # shellcheck disable=SC2086  # $SEED_BW is an option list: split on purpose
      timeout 120 mpirun -n 2 --mca pml "$pml" osu_bw $SEED_BW -d cuda "${PAIR[@]}" 2>&1 | tail -3
    done
    # osu_latency D D (H D on one GPU), Spack's binary and the hand-built one, alternating, in one
    # environment (the hand runs'): a difference left is the binaries'.
    # shellcheck disable=SC2034  # `hand` is read through ${!who} below
    ours=$(command -v osu_latency) hand=$HAND/omb/libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency
    cp "${ours%/libexec/*}"/.spack/spack-build-out.txt* "$LOGS/"
    (
      seed_env
      for who in ours hand; do echo "-- ldd $who: ${!who}"; ldd "${!who}"; done
      for i in 1 2 3; do
        for who in ours hand; do
          [[ -x ${!who} ]] || continue   # no hand build (OCIBENCH_DEVICE_SKIP=hand)
          printf 'A/B %s %s: ' "$i" "$who"
          # shellcheck disable=SC2086
          timeout 60 mpirun -n 2 "${!who}" $SEED_LAT -d cuda "${PAIR[@]}" 2>&1 | awk '$1 == 1 {print $2}'
        done
      done
    )
    # The node's copy ceilings: the nvbandwidth check (copy engines and the pageable
    # copy) runs with the checks; here the same two commands, for the summary
    # (nvbandwidth at its default buffer size: checks/nvbandwidth.py says why).
    # (the peer copies with two GPUs only: nvbandwidth waives them on one; the pageable
    # copy takes the GPUs OMB's H-D and D-H runs take on this node)
    peer=(); ((GPUS >= 2)) && peer=(device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce)
    module load nvbandwidth && nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce \
      "${peer[@]}" | tee "$RES/copy-ceiling.txt"
    python3 -m ocibench.node.pageable_copy --size $((256 * 2**20)) | tee -a "$RES/copy-ceiling.txt"
  ) >"$LOGS/07-sanity.log" 2>&1

  if ! skipped transports; then
    step transports
    transports >"$LOGS/08-transports.log" 2>&1
  fi

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

  if [[ ${OCIBENCH_DEVICE_PATHS:-0} == 1 ]]; then
    step one-gpu
    one_gpu >"$LOGS/10-one-gpu.log" 2>&1
    step nccl-paths
    nccl_paths >"$LOGS/11-nccl-paths.log" 2>&1
  fi

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

mkdir -p "$LOGS" "$STATE"
pipeline
