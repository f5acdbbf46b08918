# shellcheck shell=bash disable=SC2034  # its variables are the verbs', which source it
# Sourced by the device verbs (scripts/device/*.sh): where the GPU pipeline keeps
# everything, its environment and its helpers (docs/device-runs.md).
#
#   start.sh            join the bundle's halves, unpack what the image lacks, and
#                       start pipeline.sh detached
#   collect.sh SECONDS  wait up to SECONDS for the pipeline, then put its logs and
#                       results under $OUT (or print where they are)
#   status.sh           one line: the step the pipeline is in
#   stash.sh            keep the checkout's .carry-big/ (the bundle's largest files,
#                       Debian packages) in $STASH for the next call's start.sh
#   pipeline.sh         (what start.sh runs detached: its steps are in pipeline.sh)
#
# Needs the carry of scripts/device/make-carry.sh: .carry/ in the checkout, .carry-big/
# stashed by an earlier call.  NCCL's NVLink multicast stays off (NCCL_NVLS_ENABLE=0) in
# everything.

SAY_AS=gpu-path
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # say, die, OCIBENCH_REPO

SRC=$OCIBENCH_REPO                                # the checkout as it arrived
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

skipped() {  # whether OCIBENCH_DEVICE_SKIP (words: hand transports) leaves step $1 out
  [[ " ${OCIBENCH_DEVICE_SKIP:-} " == *" $1 "* ]]
}

node_gpus() {  # the GPUs of this node, as nvidia-smi -L lists them (0 without it)
  nvidia-smi -L 2>/dev/null | grep -c '^GPU '
}

# The buffers of the runs that compare PMLs, binaries and CMA (no D-D figure): D D
# copies GPU 0 to GPU 1, which a node of one GPU lacks (both ranks would measure the
# same GPU); there they run H D, which needs one.  $1: the node's GPUs.
pair_buffers() {
  if (($1 >= 2)); then echo "D D"; else echo "H D"; fi
}

two_gpus() {  # $1: the node's GPUs; $2...: the runs that need two (said where skipped)
  local gpus=$1; shift
  ((gpus >= 2)) || { echo "skipped on this node of $gpus GPU(s): $* needs two"; return 1; }
}

pe_list() {  # the cores of an H-D or D-H run ($1), in rank order, as the checks place them
  python3 -m ocibench.cli placement "$1" --placement same-numa --shape local
}
