#!/usr/bin/env bash
# An MPI job through the loopback cluster without ReFrame or the module tree: build
# scripts/cluster/mpi_smoke.c with the distribution's mpicc, sbatch it, and mpirun it
# over the allocation's hosts the way the seeds (and ocibench's ReFrame launcher) do:
#   mpirun -n <nodes x ppn> -N <ppn> -hostfile <hosts> -x UCX_NET_DEVICES=<dev> ...
# Prints the job's output; exits with the job's exit status.  Every wait is bounded.
#
#   scripts/cluster/smoke.sh [-N nodes] [-p ranks-per-node] [-d ucx-device]
#                            [-f hostfile] [-t time-limit-minutes]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

nodes=2 ppn=1 dev="" hostfile="" minutes=2
while getopts "N:p:d:f:t:h" opt; do
  case $opt in
    N) nodes=$OPTARG ;;
    p) ppn=$OPTARG ;;
    d) dev=$OPTARG ;;
    f) hostfile=$OPTARG ;;
    t) minutes=$OPTARG ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
for v in nodes ppn minutes; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "-${v:0:1} must be a positive number, got '${!v}'"
done
((nodes <= CLUSTER_NODES)) || die "-N $nodes: the cluster has $CLUSTER_NODES nodes"
if ! cluster_is_up || [[ ! -f $CLUSTER_ENV ]]; then
  die "no cluster is up (scripts/cluster/up.sh)"
fi
command -v mpicc >/dev/null || die "mpicc not found (Debian: libopenmpi-dev)"
[[ -n $dev ]] || dev=$(cluster_shape_field "s.ucx_net_devices['mpi']")

work=$CLUSTER_DIR/smoke/$$
mkdir -p "$work"
mpicc -O2 -o "$work/mpi_smoke" "$here/mpi_smoke.c"
cat >"$work/job.sh" <<EOF
#!/bin/bash
set -eu
hostfile='$hostfile'
if [[ -z \$hostfile ]]; then
  hostfile=$work/hosts.\$SLURM_JOB_ID
  scontrol show hostnames "\$SLURM_JOB_NODELIST" >"\$hostfile"
fi
echo "smoke job \$SLURM_JOB_ID on \$(hostname): nodes \$SLURM_JOB_NODELIST, hostfile \$hostfile, UCX_NET_DEVICES=$dev"
exec mpirun -n $((nodes * ppn)) -N $ppn -hostfile "\$hostfile" -x UCX_NET_DEVICES=$dev \\
  -x PATH \${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} $work/mpi_smoke
EOF
chmod +x "$work/job.sh"

# sbatch --wait returns when the job ends; the outer timeout covers a job that never
# starts (a drained node): then it is cancelled and reported.
limit_s=$((minutes * 60 + 120))
set +e
jobid=$(cluster_head sbatch --parsable -N "$nodes" --ntasks-per-node="$ppn" --exclusive \
  --time="$minutes" -o "$work/out.txt" -e "$work/out.txt" -D "$work" "$work/job.sh")
rc=$?
[[ $rc -eq 0 && -n $jobid ]] || die "sbatch failed (exit $rc)"
say "submitted job $jobid (${nodes} nodes x ${ppn} ranks, time limit ${minutes} min)"
deadline=$((SECONDS + limit_s))
while state=$(cluster_head squeue -h -j "$jobid" -o %T 2>/dev/null) && [[ -n $state ]]; do
  if ((SECONDS >= deadline)); then
    reason=$(cluster_head squeue -h -j "$jobid" -o %r 2>/dev/null)
    cluster_head scancel "$jobid" || true
    die "job $jobid still $state after ${limit_s}s (reason: $reason): cancelled"
  fi
  sleep 1
done
info=$(cluster_head scontrol show job -o "$jobid" 2>/dev/null)
set -e
cat "$work/out.txt" 2>/dev/null || true
state=$(grep -o 'JobState=[A-Z_]*' <<<"$info" | cut -d= -f2)
code=$(grep -o 'ExitCode=[0-9]*:[0-9]*' <<<"$info" | cut -d= -f2)
echo "smoke job $jobid: JobState=${state:-unknown} ExitCode=${code:-unknown}"
status=${code%%:*} signal=${code##*:}
[[ ${signal:-0} -ne 0 ]] && exit $((128 + signal))
[[ $state == COMPLETED ]] && exit "${status:-1}"
exit "$(( ${status:-1} ? status : 1 ))"
