#!/usr/bin/env bash
# What the GPU machine offers for the air-gapped build (docs/device-runs.md).
# Prints facts only; changes nothing.  Output also goes to $OUT/probe.txt if set.
set -u
out=${OUT:+$OUT/probe.txt}
{
echo "## os";        head -4 /etc/os-release; uname -r; ldd --version | head -1
echo "## cpu";       nproc; lscpu | grep -E 'Model name|Socket|NUMA|Thread|Core'
lscpu -p=CPU,CORE,SOCKET,NODE | grep -v '^#' | awk -F, '{n[$4]=n[$4]" "$1} END {for (k in n) print "node " k ":" n[k]}'
echo "## numactl -H"; numactl -H 2>&1 | head -20
echo "## memory";    grep MemTotal /proc/meminfo; df -h / /tmp 2>&1
echo "## gpus";      nvidia-smi --query-gpu=index,name,compute_cap,pci.bus_id,memory.total,driver_version --format=csv
nvidia-smi topo -m 2>&1
nvidia-smi nvlink -s 2>&1 | head -30
for b in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do
  d=$(echo "$b" | tr '[:upper:]' '[:lower:]' | sed 's/^0000\(....\):/\1:/'); p=/sys/bus/pci/devices/$d
  echo "$b numa=$(cat "$p/numa_node" 2>/dev/null) width=$(cat "$p/current_link_width" 2>/dev/null) speed=$(cat "$p/current_link_speed" 2>/dev/null)"
done
echo "## tools"
for t in gcc g++ gfortran make perl autoconf automake libtool libtoolize m4 pkg-config pkgconf patch bzip2 xz gzip tar git file unzip \
         numactl lstopo hwloc-ls mpirun mpicc ompi_info nvcc python3 lua lua5.3 ssh; do
  printf '%-12s %s\n' "$t" "$(command -v $t || echo MISSING)"
done
gcc --version | head -1; nvcc --version | tail -2; perl -v | sed -n 2p
mpirun --version 2>&1 | head -2; ompi_info 2>/dev/null | grep -iE 'cuda|ucx|Configure command' | head -5
ompi_info --parsable --all 2>/dev/null | grep mpi_built_with_cuda_support
echo "## headers and libraries"
for f in /usr/local/cuda/include/nvml.h /usr/include/nvml.h /usr/include/nccl.h /usr/include/zlib.h /usr/include/numa.h /usr/include/bzlib.h \
         /usr/local/cuda/lib64/stubs/libnvidia-ml.so /usr/local/cuda/lib64/stubs/libcuda.so; do
  printf '%-50s %s\n' "$f" "$([ -e $f ] && echo yes || echo no)"
done
# shellcheck disable=SC2012  # listings for a person to read, not parsed
ls -la /usr/local/cuda /usr/local/ | head -20
# shellcheck disable=SC2012  # as above
ls /usr/local/cuda/ /usr/local/cuda/lib64 2>&1 | head -20
find / -xdev \( -name nvml.h -o -name 'nccl.h' -o -name 'libnvidia-ml.so*' \) 2>/dev/null | head
ldconfig -p | grep -E 'nccl|libcuda\.|nvidia-ml|libnuma|libz\.so|libtcl|libreadline|libbz2|liblua'
grep -E '#define NCCL_(MAJOR|MINOR|PATCH)' /usr/include/nccl.h 2>/dev/null
echo "## python"; command -v python3; python3 --version
python3 -c 'import clingo; print("clingo", clingo.__version__)' 2>&1 | tail -1
python3 -c 'import cffi, yaml, jinja2, lxml, requests, attrs, tabulate; print("cffi", cffi.__version__, "yaml", yaml.__version__, "requests", requests.__version__, "tabulate", tabulate.__version__)' 2>&1 | tail -1
python3 -c 'import archspec.cpu; print("archspec", archspec.cpu.host())' 2>&1 | tail -1
python3 -c 'import reframe; print("reframe", reframe.VERSION)' 2>&1 | tail -1
echo "## env"; env | grep -E '^(NCCL|CUDA|LD_LIBRARY|PATH|PYTHON|OMPI|UCX)' | sort
ls /usr/share/lmod 2>&1; ls /etc/apt/sources.list.d 2>&1
} 2>&1 | if [[ -n $out ]]; then tee "$out"; else cat; fi
