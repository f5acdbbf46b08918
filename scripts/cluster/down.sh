#!/usr/bin/env bash
# Tear the loopback cluster down and leave nothing running: every process in the
# cluster's namespaces (slurmd, slurmctld, job steps), munged, the namespaces and
# the state directory (all but its log/ folder).  Idempotent; safe after a failed start.
# Processes are ended by the ids recorded at start and those `ip netns pids` lists
# for the cluster's own namespaces, nothing else.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || die "not root: cannot tear down namespaces"
cluster_take_lock

namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${CLUSTER_NS_PREFIX}(head|node[0-9]+)$"; }

ns_pids() {
  local ns
  for ns in $(namespaces); do ip netns pids "$ns" 2>/dev/null; done
  local f
  for f in "$CLUSTER_DIR"/run/*.pid "$CLUSTER_DIR"/munge/munged.pid; do
    [[ -f $f ]] && cat "$f"
  done
}

alive() {
  local p out=()
  for p in "$@"; do kill -0 "$p" 2>/dev/null && out+=("$p"); done
  echo "${out[@]:-}"
}

pids=$(ns_pids | grep -E '^[0-9]+$' | sort -un | tr '\n' ' ')
if [[ -n ${pids// /} ]]; then
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 1 50); do   # 10 s, then SIGKILL
    # shellcheck disable=SC2086
    left=$(alive $pids)
    [[ -z $left ]] && break
    sleep 0.2
  done
  # shellcheck disable=SC2086
  left=$(alive $pids)
  if [[ -n $left ]]; then
    say "killing what did not stop: $left"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
  fi
fi

# Processes started in the namespaces after the first sweep (a job step racing us).
for ns in $(namespaces); do
  late=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  # shellcheck disable=SC2086
  [[ -n ${late// /} ]] && kill -KILL $late 2>/dev/null
  ip netns del "$ns" 2>/dev/null || say "could not delete namespace $ns"
done

case $CLUSTER_DIR in
  / | /tmp | /root | /home | "") die "refusing to remove OCIBENCH_CLUSTER_DIR=$CLUSTER_DIR" ;;
esac
# Keep the logs (the next up.sh starts afresh); everything else goes.
if [[ -d $CLUSTER_DIR ]]; then
  find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name log -exec rm -rf {} +
fi

left=$(namespaces)
[[ -z $left ]] || die "namespaces left: $left"
say "down (logs kept in $CLUSTER_DIR/log)"
