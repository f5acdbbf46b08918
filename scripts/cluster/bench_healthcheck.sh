#!/usr/bin/env bash
# The healthcheck's speed (docs/healthcheck.md "Speed"): run `ocibench healthcheck` RUNS
# times on NODE of the running loopback cluster, inside the node's namespaces as slurmd
# runs it, against a healthy fake BM.GPU4.8 node (tests/health_fakes.py), one run after
# the other; print the percentiles of its wall time and CPU time (/usr/bin/time).  A benchmark, not a test: it judges
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
             /usr/bin/time -f "%e %U %S" -a -o "$3/times.txt" \
               "$2" healthcheck --shape BM.GPU4.8 --root "$3/root" >/dev/null 2>&1 || true
           done' bench "$runs" "$CLUSTER_REPO/bin/ocibench" "$fake"

"$python" - "$times" "$node" "$fake/state.json" <<'PY'
import json, math, sys
# /usr/bin/time: "<wall> <user> <sys>" per run ("Command exited ..." lines skipped)
rows = [line.split() for line in open(sys.argv[1])]
runs = [(float(r[0]), float(r[1]) + float(r[2])) for r in rows
        if len(r) == 3 and r[0].replace(".", "", 1).isdigit()]
def pct(values, p):  # nearest rank
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]
last = json.load(open(sys.argv[3]))
for what, i in (("wall", 0), ("cpu (user+sys)", 1)):
    v = [run[i] for run in runs]
    print(f"{sys.argv[2]}: {len(v)} runs, {what}: p50 {pct(v, 50):.2f} s, p90 {pct(v, 90):.2f} s, "
          f"p99 {pct(v, 99):.2f} s, max {max(v):.2f} s")
print(f"the last run's probes: {sum(p['duration_s'] for p in last['probes']):.2f} s "
      f"({', '.join(p['name'] + ' ' + p['state'] for p in last['probes'])})")
PY
