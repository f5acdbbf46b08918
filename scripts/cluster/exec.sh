#!/usr/bin/env bash
# Run a command on the loopback cluster's head node: in its namespace, with its
# hostname and the cluster's environment (SLURM_CONF, the MPI settings of lib.sh).
#   scripts/cluster/exec.sh sinfo
#   scripts/cluster/exec.sh sbatch -N2 job.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
(($#)) || die "usage: exec.sh COMMAND [ARG...]"
if ! cluster_is_up || [[ ! -f $CLUSTER_ENV ]]; then
  die "no cluster is up (start it with scripts/cluster/up.sh)"
fi
cluster_head "$@"
