#!/usr/bin/env bash
# Install what the test suite drives for real, when it is missing: the Python tools
# the project and its tests need (ruff included; never the project itself, which the
# tests import from this checkout's src/: src/ocibench/requirements.py), the Debian packages of the real
# parts (Lmod, OpenMPI, Slurm + munge, hwloc/numactl, Chromium, Prometheus' promtool, the RDMA
# headers perftest builds with) and shellcheck for
# scripts/lint.sh.  Idempotent and quick when everything is present.  Spack is NOT
# installed here: `make setup` does that, and the Spack tests are skipped (with the
# reason) where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
mapfile -t missing < <(python3 -m ocibench.requirements --missing test report)
if ((${#missing[@]})); then
  echo "prereqs: installing python tools: ${missing[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi

# Debian package -> a command or file that proves it is installed.
declare -A probes=(
  [lmod]=/usr/share/lmod/lmod/init/bash
  [openmpi-bin]=/usr/bin/mpirun
  [libopenmpi-dev]=/usr/bin/mpicc
  [hwloc]=/usr/bin/lstopo-no-graphics
  [numactl]=/usr/bin/numactl
  [slurm-wlm]=/usr/sbin/slurmctld
  [munge]=/usr/sbin/munged
  [chromium]=/usr/bin/chromium
  [shellcheck]=/usr/bin/shellcheck
  # promtool lints the metrics export and runs the alert rules' unit tests
  [prometheus]=/usr/bin/promtool
  # perftest's build (tests/test_spack_repo_builds.py) over this machine's rdma-core,
  # a Spack external: its configure needs librdmacm and libibumad
  [librdmacm-dev]=/usr/include/rdma/rdma_cma.h
  [libibumad-dev]=/usr/include/infiniband/umad.h
)
missing=()
for pkg in "${!probes[@]}"; do
  [[ -e ${probes[$pkg]} ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "prereqs: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "prereqs: missing ${missing[*]} (not root or no apt-get): their tests (and lint steps) will be skipped" >&2
  fi
fi
