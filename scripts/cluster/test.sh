#!/usr/bin/env bash
# `make test-cluster`: the loopback cluster's tests (tests/test_cluster.py, then
# tests/test_sweep_cluster.py): start the cluster, the multi-node checks through
# ReFrame (profile "full": the 4-node collectives too), the faults, `ocibench sweep`
# with injected faults, teardown.  Whatever
# happens (a failure, Ctrl-C), the cluster is torn down on exit.  Results (ReFrame
# stage/output, perflogs, run reports, figures.txt) stay in output/cluster/.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The cluster's names, and this checkout's ocibench on PYTHONPATH (lib.sh).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source scripts/cluster/lib.sh
trap 'bash scripts/cluster/down.sh >/dev/null 2>&1 || true' EXIT
export OCIBENCH_CLUSTER_RESULTS=${OCIBENCH_CLUSTER_RESULTS:-$PWD/output/cluster}
export OCIBENCH_CLUSTER_PROFILE=${OCIBENCH_CLUSTER_PROFILE:-full}
python3 -m pytest -ra -v -m cluster tests/test_cluster.py tests/test_sweep_cluster.py \
  tests/test_healthcheck_cluster.py "$@"
