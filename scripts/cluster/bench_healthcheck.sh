#!/usr/bin/env bash
# The healthcheck's speed (docs/healthcheck.md "Speed"): run `ocibench healthcheck` RUNS
# times on NODE of the running loopback cluster, inside the node's namespaces as slurmd
# runs it, against a healthy fake BM.GPU4.8 node (tests/health_fakes.py), one run after
# the other; print the wall time's percentiles.  A benchmark, not a test: it judges
# nothing.
#
#   scripts/cluster/bench_healthcheck.sh [RUNS [NODE]]     (default 100 node1)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
runs=${1:-100}
node=${2:-node1}
[[ $runs =~ ^[1-9][0-9]{0,4}$ ]] || cluster_die "RUNS must be 1..99999, got '$runs'"
if ! [[ $node =~ ^node([1-9][0-9]*)$ ]] || ((BASH_REMATCH[1] > CLUSTER_NODES)); then
  cluster_die "no node '$node' in this cluster (node1..node$CLUSTER_NODES)"
fi
index=${BASH_REMATCH[1]}
cluster_is_up || cluster_die "no cluster is up (start it with scripts/cluster/up.sh)"

fake=$CLUSTER_DIR/bench/$node
python=$(command -v python3)
"$python" -c 'import sys; from pathlib import Path
sys.path.insert(0, sys.argv[1])
from health_fakes import FakeNode
FakeNode(Path(sys.argv[2]))' "$CLUSTER_REPO/tests" "$fake"
times=$fake/times.txt
: >"$times"

# shellcheck disable=SC2016  # the inner bash expands its own arguments
cluster_on "$(cluster_node_ns "$index")" "$node" env -i \
  PATH="$fake/bin:/usr/sbin:/usr/bin:/sbin:/bin" SLURM_CONF="$CLUSTER_CONF" \
  SLURMD_NODENAME="$node" OCIBENCH_HEALTH_STATE="$fake/state.json" \
  OCIBENCH_HISTORY_DB="$fake/no-history.sqlite" OCIBENCH_PYTHON="$python" \
  bash -c 'for ((i = 0; i < $1; i++)); do
             s=$(date +%s%N)
             "$2" healthcheck --shape BM.GPU4.8 --root "$3/root" >/dev/null 2>&1 || true
             echo $(( $(date +%s%N) - s )) >>"$3/times.txt"
           done' bench "$runs" "$CLUSTER_REPO/bin/ocibench" "$fake"

"$python" - "$times" "$node" "$fake/state.json" <<'PY'
import json, math, sys
ns = sorted(int(line) for line in open(sys.argv[1]) if line.strip())
s = [n / 1e9 for n in ns]
def pct(p):  # nearest rank
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]
last = json.load(open(sys.argv[3]))
print(f"{sys.argv[2]}: {len(s)} runs: p50 {pct(50):.2f} s, p90 {pct(90):.2f} s, "
      f"p99 {pct(99):.2f} s, max {s[-1]:.2f} s; the last run's probes "
      f"{sum(p['duration_s'] for p in last['probes']):.2f} s "
      f"({', '.join(p['name'] + ' ' + p['state'] for p in last['probes'])})")
PY
