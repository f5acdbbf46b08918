#!/usr/bin/env bash
# Inject faults into the loopback cluster's nodes, and remove them: what a node sweep
# (`ocibench sweep`, docs/cluster.md "Faults for the sweep") must find and name.
#
#   fault.sh slow-link NODE [RATE [DELAY]]  shape NODE's link both ways (default 20mbit, 2ms)
#   fault.sh broken-modules NODE            NODE sees an empty directory where the
#                                           module tree is: `module load` fails there
#   fault.sh down NODE [--wait]             stop NODE's slurmd; --wait: until Slurm
#                                           marks it down, or a drained node drain*
#                                           (SlurmdTimeout, about 20-30 s)
#   fault.sh clear NODE|all                 remove NODE's faults (every node's); a
#                                           stopped slurmd is started and answers again
#   fault.sh list                           the faults in place, one per line: NODE KIND DETAIL
#
# slow-link: the kernel's tc on both ends of NODE's veth (its ucx_net_devices.mpi
# interface in the node's namespace, and its bridge port in the head's): netem with
# `rate RATE delay DELAY` where the kernel has netem, else tbf with `rate RATE` alone
# (a kernel built without sch_netem, as some VMs are: no delay then, it says so).
# broken-modules: an empty directory is bind-mounted over the module tree in the mount
# namespace of NODE's slurmd, the namespace every job on NODE inherits, as when a
# node's mount of the shared software tree fails; no process is restarted.  Faults are
# recorded in $OCIBENCH_CLUSTER_DIR/faults/ and go away with down.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

usage() { sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

FAULTS=$CLUSTER_DIR/faults

node_index() {  # node_index NODE -> i, or a one-line error
  if ! [[ $1 =~ ^node([1-9][0-9]*)$ ]] || ((BASH_REMATCH[1] > CLUSTER_NODES)); then
    die "no node '$1' in this cluster (node1..node$CLUSTER_NODES)"
  fi
  echo "${BASH_REMATCH[1]}"
}

# The module tree every node uses ($OCIBENCH_MODULES_ROOT/<shape>, a link to the
# local tree: up.sh), resolved: a bind mount covers the directory, not the link.
module_tree() { readlink -f "$CLUSTER_DIR/modules/$CLUSTER_SHAPE"; }

slurmd_pid() {  # the running slurmd of NODE, or nothing
  local pid
  pid=$(cat "$CLUSTER_DIR/run/slurmd.$1.pid" 2>/dev/null) || return 0
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
  return 0
}

wait_state() {  # wait_state NODE ERE SECONDS: until sinfo's %t for NODE matches
  local node=$1 want=$2 deadline=$((SECONDS + $3)) state
  while state=$(cluster_node_state "$node"); ! [[ $state =~ $want ]]; do
    ((SECONDS < deadline)) || die "$node is '$state' after ${3}s, waited for /$want/"
    sleep 1
  done
}

has_netem() {
  local probe=ocb-probe-$$ ok=1
  ip netns add "$probe" 2>/dev/null || return 1
  ip -n "$probe" link add name ocbprobe0 type dummy 2>/dev/null &&
    tc -n "$probe" qdisc add dev ocbprobe0 root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$probe" 2>/dev/null || true
  return $ok
}

slow_link() {
  local node=$1 rate=${2:-20mbit} delay=${3:-2ms} i dev qdisc detail
  i=$(node_index "$node")
  [[ $rate =~ ^[0-9]+(bit|kbit|mbit|gbit)$ ]] || die "rate '$rate': give e.g. 20mbit"
  [[ $delay =~ ^[0-9]+(us|ms)$ ]] || die "delay '$delay': give e.g. 2ms"
  dev=$(cluster_shape_field "s.ucx_net_devices['mpi']")
  if has_netem; then
    qdisc=(netem rate "$rate" delay "$delay")
    detail="netem rate $rate delay $delay"
  else
    # tbf: burst at least one 1500-byte frame plus headers; a packet waits at most 1 s.
    qdisc=(tbf rate "$rate" burst 4kb latency 1s)
    detail="tbf rate $rate (no delay: this kernel has no sch_netem)"
  fi
  tc -n "$(cluster_node_ns "$i")" qdisc replace dev "$dev" root "${qdisc[@]}"
  tc -n "$CLUSTER_HEAD_NS" qdisc replace dev "ocbport$i" root "${qdisc[@]}"
  echo "$detail on $dev and ocbport$i" >"$FAULTS/$node.slow-link"
  say "$node: link slowed: $detail"
}

broken_modules() {
  local node=$1 pid tree
  node_index "$node" >/dev/null
  pid=$(slurmd_pid "$node")
  [[ -n $pid ]] || die "$node: slurmd is not running (clear its faults first)"
  tree=$(module_tree)
  [[ -d $tree ]] || die "the module tree $tree does not exist"
  mkdir -p "$FAULTS/empty"
  chmod 755 "$FAULTS/empty"
  nsenter --mount --target "$pid" -- mount --bind "$FAULTS/empty" "$tree"
  echo "$tree hidden by an empty directory in slurmd $pid's mount namespace" \
    >"$FAULTS/$node.broken-modules"
  say "$node: module tree hidden ($tree is empty there)"
}

down() {
  local node=$1 wait=${2:-} pid
  node_index "$node" >/dev/null
  pid=$(slurmd_pid "$node")
  [[ -n $pid ]] || die "$node: slurmd is not running"
  # An empty tree mounted in the old slurmd's namespace goes with it.
  rm -f "$FAULTS/$node.broken-modules"
  kill -TERM "$pid"
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  echo "slurmd stopped (was pid $pid)" >"$FAULTS/$node.down"
  say "$node: slurmd stopped"
  if [[ $wait == --wait ]]; then
    # slurmctld pings every SlurmdTimeout/3 and marks the node down when it has not
    # answered for SlurmdTimeout (20 s, up.sh).
    # A drained node stays drained: Slurm marks it not responding (drain*) instead.
    wait_state "$node" '^(down|drain\*$)' 120
    say "$node: $(cluster_node_state "$node") ($(cluster_head sinfo -h -n "$node" -o %E))"
  fi
}

clear_node() {
  local node=$1 i dev pid tree
  i=$(node_index "$node")
  if [[ -f $FAULTS/$node.slow-link ]]; then
    dev=$(cluster_shape_field "s.ucx_net_devices['mpi']")
    tc -n "$(cluster_node_ns "$i")" qdisc del dev "$dev" root 2>/dev/null || true
    tc -n "$CLUSTER_HEAD_NS" qdisc del dev "ocbport$i" root 2>/dev/null || true
    rm -f "$FAULTS/$node.slow-link"
    say "$node: link restored"
  fi
  if [[ -f $FAULTS/$node.broken-modules ]]; then
    pid=$(slurmd_pid "$node")
    tree=$(module_tree)
    [[ -n $pid ]] && nsenter --mount --target "$pid" -- umount "$tree"
    rm -f "$FAULTS/$node.broken-modules"
    say "$node: module tree visible again"
  fi
  if [[ -f $FAULTS/$node.down ]] || [[ -z $(slurmd_pid "$node") ]]; then
    [[ -z $(slurmd_pid "$node") ]] && cluster_start_slurmd "$i"
    rm -f "$FAULTS/$node.down"
    # Answering again: no '*' (not responding) and not down; a drain stays a drain.
    wait_state "$node" '^[a-z]+$' "$CLUSTER_WAIT_S"
    wait_state "$node" '^(idle|alloc|mix|drain|drng|drained|comp)$' "$CLUSTER_WAIT_S"
    say "$node: slurmd answers ($(cluster_node_state "$node"))"
  fi
}

(($#)) || usage
if ! cluster_is_up || [[ ! -f $CLUSTER_ENV ]]; then
  die "no cluster is up (scripts/cluster/up.sh)"
fi
[[ $(id -u) -eq 0 ]] || die "not root: cannot change the cluster's nodes"
mkdir -p "$FAULTS"
cmd=$1
shift
case $cmd in
  slow-link) (($# >= 1 && $# <= 3)) || usage; slow_link "$@" ;;
  broken-modules) (($# == 1)) || usage; broken_modules "$1" ;;
  down)
    (($# == 1)) || { (($# == 2)) && [[ $2 == --wait ]]; } || usage
    down "$@" ;;
  clear)
    (($# == 1)) || usage
    if [[ $1 == all ]]; then
      for ((n = 1; n <= CLUSTER_NODES; n++)); do clear_node "$(cluster_node "$n")"; done
    else
      clear_node "$1"
    fi ;;
  list)
    (($# == 0)) || usage
    for f in "$FAULTS"/node*.*; do
      [[ -f $f ]] || continue
      name=${f##*/}
      echo "${name%%.*} ${name#*.} $(cat "$f")"
    done ;;
  *) usage ;;
esac
