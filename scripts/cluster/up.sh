#!/usr/bin/env bash
# Start a Slurm cluster on this machine: munged, slurmctld on a head namespace and
# OCIBENCH_CLUSTER_NODES (default 4) compute nodes, each a network namespace with its
# own slurmd.  Returns once every node is idle (or fails, naming the node, after
# OCIBENCH_CLUSTER_WAIT_S).  Needs root, `ip netns`, slurmctld/slurmd and munged.
# Tear down with scripts/cluster/down.sh (safe to run any time, also after a failure).
#
#   scripts/cluster/up.sh           start (fails if a cluster is already up)
#   scripts/cluster/up.sh --check   only say whether this machine can run it (exit 0/1)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

# ---- can this machine run it? ------------------------------------------------------
cluster_missing() {
  [[ $(id -u) -eq 0 ]] || { echo "not root (network namespaces and slurmd need root)"; return; }
  local exe
  for exe in ip nsenter unshare munged slurmctld slurmd sbatch squeue scontrol sinfo python3; do
    command -v "$exe" >/dev/null || { echo "$exe is not installed (Debian: slurm-wlm, munge, iproute2)"; return; }
  done
  local probe=ocb-probe-$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cannot create network namespaces (ip netns add failed)"; return
  fi
  ip netns del "$probe" 2>/dev/null || true
}
if [[ ${1:-} == --check ]]; then
  why=$(cluster_missing)
  [[ -z $why ]] && { echo "ok"; exit 0; }
  echo "$why"; exit 1
fi
[[ $# -eq 0 ]] || die "unknown argument '$1' (usage: up.sh [--check])"
why=$(cluster_missing)
[[ -z $why ]] || die "$why"
cluster_take_lock
cluster_is_up && die "a cluster is already up (namespace $CLUSTER_HEAD_NS); run scripts/cluster/down.sh first"

# Whatever fails below leaves nothing running.
trap 'rc=$?; if ((rc)); then say "start failed: tearing down"; OCIBENCH_CLUSTER_LOCK_HELD=1 bash "$(dirname "$0")/down.sh" >&2 || true; fi' EXIT

DEV=$(cluster_shape_field "s.ucx_net_devices['mpi']")
CPUS=$(cluster_shape_field "s.cores")
MEM_MB=$(cluster_shape_field "int(s.data['memory']['size_gib'] * 1024)")
[[ $DEV =~ ^[a-zA-Z0-9_.-]{1,15}$ ]] || die "$CLUSTER_SHAPE.yaml: ucx_net_devices.mpi '$DEV' is no interface name"

# ---- state directory ----------------------------------------------------------------
rm -rf "$CLUSTER_DIR"
mkdir -p "$CLUSTER_DIR"/{etc,ctld,log,munge,spool,run/sysfs}
chmod 700 "$CLUSTER_DIR/munge"
cluster_write_env "$DEV"

# The nodes use the local shape's Lmod tree, as cluster nodes use the tree on shared
# storage: $OCIBENCH_MODULES_ROOT/loopback-cluster points at it (ocibench.paths).
tree=${OCIBENCH_CLUSTER_MODULES:-$(python3 -c 'from ocibench import paths; print(paths.module_root("local"))')}
mkdir -p "$CLUSTER_DIR/modules"
ln -sfn "$tree" "$CLUSTER_DIR/modules/$CLUSTER_SHAPE"
echo "export OCIBENCH_MODULES_ROOT=$CLUSTER_DIR/modules" >>"$CLUSTER_ENV"
start=$SECONDS

# ---- munge: a private key and socket, never the system's -----------------------------
dd if=/dev/urandom of="$CLUSTER_DIR/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$CLUSTER_DIR/munge/munge.key"
munged --force --key-file="$CLUSTER_DIR/munge/munge.key" --socket="$CLUSTER_MUNGE_SOCKET" \
  --pid-file="$CLUSTER_DIR/munge/munged.pid" --log-file="$CLUSTER_DIR/log/munged.log" \
  --seed-file="$CLUSTER_DIR/munge/munged.seed" 9>&- \
  || die "munged did not start; see $CLUSTER_DIR/log/munged.log"

# ---- network: head namespace with a bridge, one veth per node --------------------------
hosts="127.0.0.1 localhost
$CLUSTER_HEAD_IP $CLUSTER_HEAD_HOST"
for ((i = 1; i <= CLUSTER_NODES; i++)); do
  hosts+=$'\n'"$(cluster_node_ip $i) $(cluster_node $i)"
done
echo "$hosts" >"$CLUSTER_HOSTS"
ip netns add "$CLUSTER_HEAD_NS"
ip -n "$CLUSTER_HEAD_NS" link set lo up
ip -n "$CLUSTER_HEAD_NS" link add "$CLUSTER_BRIDGE" type bridge
ip -n "$CLUSTER_HEAD_NS" addr add "$CLUSTER_HEAD_IP/24" dev "$CLUSTER_BRIDGE"
ip -n "$CLUSTER_HEAD_NS" link set "$CLUSTER_BRIDGE" up
for ((i = 1; i <= CLUSTER_NODES; i++)); do
  ns=$(cluster_node_ns $i)
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip link add name "$DEV" netns "$ns" type veth peer name "ocbport$i" netns "$CLUSTER_HEAD_NS"
  ip -n "$CLUSTER_HEAD_NS" link set "ocbport$i" master "$CLUSTER_BRIDGE"
  ip -n "$CLUSTER_HEAD_NS" link set "ocbport$i" up
  ip -n "$ns" addr add "$(cluster_node_ip $i)/24" dev "$DEV"
  ip -n "$ns" link set "$DEV" up
done

# ---- slurm.conf -------------------------------------------------------------------------
cat >"$CLUSTER_CONF" <<EOF
# written by scripts/cluster/up.sh for the loopback cluster; removed by down.sh
ClusterName=ocbloop
SlurmctldHost=$CLUSTER_HEAD_HOST($CLUSTER_HEAD_IP)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$CLUSTER_MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$CLUSTER_DIR/ctld
SlurmctldPidFile=$CLUSTER_DIR/run/slurmctld.pid
SlurmctldLogFile=$CLUSTER_DIR/log/slurmctld.log
SlurmdSpoolDir=$CLUSTER_DIR/spool/%n
SlurmdPidFile=$CLUSTER_DIR/run/slurmd.%n.pid
SlurmdLogFile=$CLUSTER_DIR/log/slurmd.%n.log
# namespaces share the cgroup tree: no cgroup plugins
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# the nodes' CPUs share the host's cores: trust the configuration, not the probe
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
# A node whose slurmd stopped is DOWN ("Not responding") 20-27 s later (pings every
# SlurmdTimeout/3): soon enough for the sweep's test (fault.sh down --wait), long
# against the sub-second answer of a slurmd on a loaded 2-core machine.
SlurmdTimeout=20
MessageTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=600
OverTimeLimit=0
Waittime=0
PropagateResourceLimits=NONE
EOF
for ((i = 1; i <= CLUSTER_NODES; i++)); do
  echo "NodeName=$(cluster_node $i) NodeAddr=$(cluster_node_ip $i) NodeHostname=$(cluster_node $i) CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM_MB State=UNKNOWN" >>"$CLUSTER_CONF"
done
echo "PartitionName=compute Nodes=$(cluster_nodelist) Default=YES MaxTime=30:00 DefaultTime=10:00 OverSubscribe=NO State=UP" >>"$CLUSTER_CONF"
for ((i = 1; i <= CLUSTER_NODES; i++)); do mkdir -p "$CLUSTER_DIR/spool/$(cluster_node $i)"; done

# ---- daemons: each in its namespace, with the node's hostname; none keeps the lock (fd 9) ---
cluster_on "$CLUSTER_HEAD_NS" "$CLUSTER_HEAD_HOST" setsid slurmctld -D -i -f "$CLUSTER_CONF" \
  >>"$CLUSTER_DIR/log/slurmctld.out" 2>&1 </dev/null 9>&- &
echo $! >"$CLUSTER_DIR/run/slurmctld.launcher.pid"

deadline=$((SECONDS + CLUSTER_WAIT_S))
until cluster_head scontrol ping 2>/dev/null | grep -q 'is UP'; do
  ((SECONDS < deadline)) || die "slurmctld did not answer in ${CLUSTER_WAIT_S}s; see $CLUSTER_DIR/log/slurmctld.log"
  kill -0 "$(cat "$CLUSTER_DIR/run/slurmctld.launcher.pid")" 2>/dev/null ||
    die "slurmctld exited; see $CLUSTER_DIR/log/slurmctld.log: $(tail -n 3 "$CLUSTER_DIR/log/slurmctld.log" 2>/dev/null)"
  sleep 0.5
done

for ((i = 1; i <= CLUSTER_NODES; i++)); do cluster_start_slurmd "$i"; done

# ---- wait until every node is idle --------------------------------------------------------
while :; do
  states=$(cluster_head sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
  notidle=$(awk '$2 != "idle"' <<<"$states")
  [[ -n $states && -z $notidle ]] && break
  if ((SECONDS >= deadline)); then
    die "nodes not idle after ${CLUSTER_WAIT_S}s: $(tr '\n' ' ' <<<"$notidle"); see $CLUSTER_DIR/log/slurmd.<node>.log"
  fi
  for ((i = 1; i <= CLUSTER_NODES; i++)); do
    node=$(cluster_node $i)
    kill -0 "$(cat "$CLUSTER_DIR/run/slurmd.$node.launcher.pid")" 2>/dev/null ||
      die "slurmd of $node exited: $(tail -n 3 "$CLUSTER_DIR/log/slurmd.$node.log" 2>/dev/null)"
  done
  sleep 0.5
done
trap - EXIT
say "up: $CLUSTER_NODES nodes idle in $((SECONDS - start))s (state in $CLUSTER_DIR; commands: scripts/cluster/exec.sh sinfo)"
