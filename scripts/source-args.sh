# Sourced by scripts/mirror-from-checkouts.sh and scripts/bundle.sh: the benchmark
# sources a user names through OCIBENCH_SRC_* (README, variables), as the
# PKG=GITDIR[#REV][@VERSION] arguments both scripts take.  Appends to the array `args`.
# shellcheck shell=bash
source_args_from_env() {
  # shellcheck disable=SC2034  # args is the caller's array
  {
    [[ -z ${OCIBENCH_SRC_OMB:-} ]] || args+=("osu-micro-benchmarks=$OCIBENCH_SRC_OMB")
    [[ -z ${OCIBENCH_SRC_NCCL_TESTS:-} ]] || args+=("nccl-tests=$OCIBENCH_SRC_NCCL_TESTS")
    [[ -z ${OCIBENCH_SRC_IMB:-} ]] || args+=("intel-mpi-benchmarks=$OCIBENCH_SRC_IMB")
    [[ -z ${OCIBENCH_SRC_STREAM:-} ]] || args+=("stream=$OCIBENCH_SRC_STREAM")
  }
}
