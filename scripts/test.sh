#!/usr/bin/env bash
# `make test`: prerequisites, lint (ruff, shellcheck: scripts/lint.sh; a finding
# fails the run before any test), then the whole pytest suite.  Tests whose real part
# is absent (Spack, a source mirror, a GPU, root for the Slurm cluster) SKIP with
# the reason; pytest's summary (-ra) lists every skip and why.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/prereqs.sh
bash scripts/lint.sh
# This checkout's ocibench (never a pip-installed copy of another clone).
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
exec python3 -m pytest -ra "$@"
