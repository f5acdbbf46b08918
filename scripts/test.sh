#!/usr/bin/env bash
# `make test`: prerequisites, lint (ruff, shellcheck: scripts/lint.sh; a finding
# fails the run before any test), then the whole pytest suite, in OCIBENCH_TEST_JOBS
# processes (default 2) where pytest-xdist is installed.  Tests whose real part
# is absent (Spack, a source mirror, a GPU, root for the Slurm cluster) SKIP with
# the reason; pytest's summary (-ra) lists every skip and why.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prereqs.sh
bash scripts/lint.sh
# This checkout's ocibench (never a pip-installed copy of another clone).
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# Test files in parallel (pytest-xdist), one file per process at a time: the slow files
# (the loopback cluster, the concretization of every shape, the bundle round trip,
# the local install) spend much of their time waiting on Slurm, MPI and Spack's
# subprocesses, so on 2 cores two of them overlap well.  Each file keeps its session
# and module fixtures in one process; the longest files start first (tests/conftest.py,
# FILE_COSTS).  OCIBENCH_TEST_JOBS=1: one process.
jobs=${OCIBENCH_TEST_JOBS:-2}
parallel=()
if ((jobs > 1)) && python3 -c 'import xdist' 2>/dev/null; then
  parallel=(-n "$jobs" --dist loadfile)
fi
exec python3 -m pytest -ra "${parallel[@]}" "$@"
