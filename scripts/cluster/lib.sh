# shellcheck shell=bash
# Sourced by scripts/cluster/*.sh: the cluster's names, addresses and helpers.
#
# The cluster: one network namespace per node (ocb-node1..N), each process tree in
# it with the node's hostname (a UTS namespace) and the cluster's /etc/hosts (bound
# in a private mount namespace); a head namespace (ocb-head) holding a bridge,
# slurmctld and every client command (sbatch, squeue, ReFrame).  Namespaces are
# entered with nsenter, not `ip netns exec`: that one remounts /sys, which hides
# /sys/fs/cgroup, and slurmd 22.05 refuses to start without it.  Each node's veth
# end is named after the shape file's network.ucx_net_devices.mpi.  munged runs in
# the root namespace: its socket is a file, reachable from every namespace.
#
# Everything can be moved with environment variables:
#   OCIBENCH_CLUSTER_NODES  compute nodes (default 9: docs/cluster.md says why)
#   OCIBENCH_CLUSTER_DIR    state: configs, spools, logs, munge key and socket
#                           (default ${TMPDIR:-/tmp}/ocibench-cluster)
#   OCIBENCH_CLUSTER_NET    the /24 used inside the namespaces, three octets
#                           (default 10.233.0); it exists nowhere else
#   OCIBENCH_CLUSTER_WAIT_S seconds to wait for slurmctld / nodes (default 60)
#   OCIBENCH_CLUSTER_MODULES the Lmod tree the nodes use (default: the local shape's,
#                           ocibench.paths.module_root("local"))
#
# One cluster per machine: namespace names are machine-wide, so up.sh and down.sh take
# the lock $OCIBENCH_CLUSTER_LOCK (default /run/lock/ocibench-cluster.lock) for their
# own run, or trust a caller that holds it for a whole session (the tests) and says so
# with OCIBENCH_CLUSTER_LOCK_HELD=1.  Another session's cluster is never torn down.

# say, die, and this checkout's ocibench for every python3 the cluster's scripts, tests
# and jobs start (scripts/lib.sh); every line says "cluster: ...".
SAY_AS=cluster
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CLUSTER_SHAPE=loopback-cluster
CLUSTER_NODES=${OCIBENCH_CLUSTER_NODES:-9}
CLUSTER_DIR=${OCIBENCH_CLUSTER_DIR:-${TMPDIR:-/tmp}/ocibench-cluster}
CLUSTER_NET=${OCIBENCH_CLUSTER_NET:-10.233.0}
CLUSTER_WAIT_S=${OCIBENCH_CLUSTER_WAIT_S:-60}
CLUSTER_NS_PREFIX=ocb-
CLUSTER_HEAD_NS=${CLUSTER_NS_PREFIX}head
CLUSTER_HEAD_HOST=ocb-head
# shellcheck disable=SC2034  # used by up.sh, which sources this file
CLUSTER_HEAD_IP=${CLUSTER_NET}.1
# shellcheck disable=SC2034  # used by up.sh, which sources this file
CLUSTER_BRIDGE=ocbbr0
CLUSTER_CONF=$CLUSTER_DIR/etc/slurm.conf
# shellcheck disable=SC2034  # used by up.sh, which sources this file
CLUSTER_MUNGE_SOCKET=$CLUSTER_DIR/munge/munge.socket.2
CLUSTER_ENV=$CLUSTER_DIR/env.sh
CLUSTER_HOSTS=$CLUSTER_DIR/etc/hosts
CLUSTER_LOCK=${OCIBENCH_CLUSTER_LOCK:-/run/lock/ocibench-cluster.lock}
CLUSTER_LOCK_WAIT_S=${OCIBENCH_CLUSTER_LOCK_WAIT_S:-10}

# Validate the knobs: bad input is a clear error, not a half-built cluster.
if ! [[ $CLUSTER_NODES =~ ^[0-9]+$ ]] || ! ((CLUSTER_NODES >= 1 && CLUSTER_NODES <= 32)); then
  die "OCIBENCH_CLUSTER_NODES must be 1..32, got '$CLUSTER_NODES'"
fi
if ! [[ $CLUSTER_NET =~ ^(10|172\.(1[6-9]|2[0-9]|3[01])|192\.168)\.[0-9]+(\.[0-9]+)?$ ]] ||
  ! [[ $(tr -cd . <<<"$CLUSTER_NET") == .. ]]; then
  die "OCIBENCH_CLUSTER_NET must be three octets of a private range (e.g. 10.233.0), got '$CLUSTER_NET'"
fi
[[ $CLUSTER_WAIT_S =~ ^[0-9]+$ ]] || die "OCIBENCH_CLUSTER_WAIT_S must be seconds, got '$CLUSTER_WAIT_S'"
[[ $CLUSTER_LOCK_WAIT_S =~ ^[0-9]+$ ]] || die "OCIBENCH_CLUSTER_LOCK_WAIT_S must be seconds, got '$CLUSTER_LOCK_WAIT_S'"
[[ $CLUSTER_DIR == /* ]] || die "OCIBENCH_CLUSTER_DIR must be an absolute path, got '$CLUSTER_DIR'"

# The shape file is the single source of truth for what a node looks like.
cluster_shape_field() {  # cluster_shape_field <python expression on shape `s`>
  python3 -c "from ocibench import shapes; s = shapes.load('$CLUSTER_SHAPE'); print($1)"
}

cluster_node() { echo "node$1"; }                       # node name of index i (1-based)
cluster_node_ns() { echo "${CLUSTER_NS_PREFIX}node$1"; }
cluster_node_ip() { echo "${CLUSTER_NET}.$((10 + $1))"; }
cluster_nodelist() { echo "node[1-$CLUSTER_NODES]"; }

# Run a command as if on a host of the cluster: the namespace's network, the host's
# name, the cluster's /etc/hosts, a /sys that shows the namespace's interfaces (UCX
# finds its devices in /sys/class/net) with the host's /sys/fs/cgroup kept inside
# it.  The mounts live in a private mount namespace: the host sees none of them.
#   cluster_on <netns> <hostname> COMMAND...
cluster_on() {
  local ns=$1 host=$2
  shift 2
  # shellcheck disable=SC2016  # the inner sh expands $0..$2 and $@, its own arguments
  nsenter --net="/run/netns/$ns" -- unshare --mount --uts --propagation private -- \
    sh -c 'hostname "$0" && mount --bind "$1" /etc/hosts &&
           mount -t sysfs sysfs "$2" &&
           { ! mountpoint -q /sys/fs/cgroup || mount --rbind /sys/fs/cgroup "$2/fs/cgroup"; } &&
           mount --move "$2" /sys && shift 2 && exec "$@"' \
    "$host" "$CLUSTER_HOSTS" "$CLUSTER_DIR/run/sysfs" "$@"
}

# Run a command on the head node (where users log in), in the cluster's environment.
cluster_head() {
  # shellcheck disable=SC2016  # the inner bash expands $0 and $@, its own arguments
  cluster_on "$CLUSTER_HEAD_NS" "$CLUSTER_HEAD_HOST" \
    bash -c 'source "$0" && exec "$@"' "$CLUSTER_ENV" "$@"
}

# Take the machine-wide cluster lock for the rest of this script (fd 9), unless the
# caller holds it.  Fails, naming the holder, after OCIBENCH_CLUSTER_LOCK_WAIT_S.
cluster_take_lock() {
  [[ ${OCIBENCH_CLUSTER_LOCK_HELD:-} == 1 ]] && return 0
  exec 9>>"$CLUSTER_LOCK" || die "cannot open the lock $CLUSTER_LOCK"
  flock -w "$CLUSTER_LOCK_WAIT_S" 9 ||
    die "another loopback-cluster session holds $CLUSTER_LOCK ($(head -c 200 "$CLUSTER_LOCK" 2>/dev/null)); waited ${CLUSTER_LOCK_WAIT_S}s"
  echo "pid $$: $0" >"$CLUSTER_LOCK"
}

cluster_is_up() { ip netns list 2>/dev/null | grep -q "^$CLUSTER_HEAD_NS\b"; }

# Start node i's slurmd in its namespace, in the background, with the node's hostname;
# it never keeps the cluster lock (fd 9).  Used by up.sh and by fault.sh (restarting a
# node whose slurmd it stopped).
cluster_start_slurmd() {
  local i=$1 node
  node=$(cluster_node "$i")
  cluster_on "$(cluster_node_ns "$i")" "$node" setsid slurmd -D -N "$node" -f "$CLUSTER_CONF" \
    >>"$CLUSTER_DIR/log/slurmd.$node.out" 2>&1 </dev/null 9>&- &
  echo $! >"$CLUSTER_DIR/run/slurmd.$node.launcher.pid"
}

# The state of a node as `sinfo -N -o %t` prints it (idle, drain, down*, ...).
cluster_node_state() { cluster_head sinfo -h -n "$1" -o %t 2>/dev/null | head -n 1; }

# The environment every cluster command and job sees (written to $CLUSTER_ENV).
cluster_write_env() {
  local dev=$1
  cat >"$CLUSTER_ENV" <<EOF
# written by scripts/cluster/up.sh: the environment of the loopback cluster
export SLURM_CONF=$CLUSTER_CONF
export OCIBENCH_SHAPE=$CLUSTER_SHAPE
export OCIBENCH_CLUSTER_DIR=$CLUSTER_DIR
# Open MPI with UCX (Debian's 4.1 + UCX 1.13, or the module tree's): the UCX PML over
# UCX's tcp transport, so the launcher's -x UCX_NET_DEVICES=<dev> selects the link
# exactly as on an OCI shape (where it names an RDMA port); UCX_NET_DEVICES is not
# set here, only on the mpirun line.  ORTE's own wire-up uses the same interface.
export OMPI_MCA_pml=ucx
export OMPI_MCA_pml_ucx_tls=any
export OMPI_MCA_pml_ucx_devices=any
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_tcp_if_include=$dev
export OMPI_MCA_oob_tcp_if_include=$dev
export OMPI_MCA_osc=ucx,sm,pt2pt
# every node shares two cores: ranks yield instead of spinning
export OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# jobs run as root here (the cluster is root's own)
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export UCX_WARN_UNUSED_ENV_VARS=n
EOF
}
