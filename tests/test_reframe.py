"""The ReFrame configuration (site/reframe_config.py) and the checks (checks/).

Everything here drives the real `reframe` command.  One `--dry-run` per system (six
invocations, the fewest ReFrame allows: one system per invocation) gives the test cases
each shape lists, the skips and their reasons, and the job scripts, whose mpirun lines
are compared with the seeds' command lines.  The expected lists are written out below,
not computed from the code under test.

A real run on the `local` shape needs the local Lmod module tree (`make install`); the
test is skipped, naming the directory it looked in, until that tree exists.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibench import paths, placement, shapes
from ocibench.figures.joblog import failure_line

CONFIG = paths.SITE_DIR / "reframe_config.py"

# --------------------------------------------------------------------------- expected

#: Test cases by where they run: (display name, environment).
HOST_SINGLE = [
    ("preflight", "omb"),  # the node against its shape, on every system
    ("osu_latency %buffers=H-H %nodes=1", "omb"),
    ("osu_bw %buffers=H-H %nodes=1", "omb"),
    ("osu_bibw %buffers=H-H %nodes=1", "omb"),
    ("osu_alltoall", "omb"),
    ("stream %nps=1", "stream"),
    ("stream %nps=4", "stream"),
    ("imb_pingpong %mpi=openmpi %nodes=1", "imb-openmpi"),
    ("imb_pingpong %mpi=intel-mpi %nodes=1", "imb-intelmpi"),
    ("imb_allreduce %mpi=openmpi %nodes=1", "imb-openmpi"),
    ("imb_allreduce %mpi=intel-mpi %nodes=1", "imb-intelmpi"),
]
HOST_MULTI = [
    ("osu_latency %buffers=H-H %nodes=2", "omb"),
    ("osu_bw %buffers=H-H %nodes=2", "omb"),
    ("osu_bibw %buffers=H-H %nodes=2", "omb"),
    ("osu_allreduce", "omb"),
    ("imb_pingpong %mpi=openmpi %nodes=2", "imb-openmpi"),
    ("imb_pingpong %mpi=intel-mpi %nodes=2", "imb-intelmpi"),
    ("imb_allreduce %mpi=openmpi %nodes=4", "imb-openmpi"),
    ("imb_allreduce %mpi=intel-mpi %nodes=4", "imb-intelmpi"),
]
GPU_SINGLE = [
    ("osu_latency %buffers=D-D %nodes=1", "omb"),
    ("osu_bw %buffers=D-D %nodes=1", "omb"),
    ("osu_bibw %buffers=D-D %nodes=1", "omb"),   # D-D only in one node
    ("osu_latency_host_device %buffers=H-D %placement=same-numa", "omb"),
    ("osu_latency_host_device %buffers=H-D %placement=same-socket", "omb"),
    ("osu_latency_host_device %buffers=H-D %placement=other-socket", "omb"),
    ("osu_latency_host_device %buffers=D-H %placement=same-numa", "omb"),
    ("osu_latency_host_device %buffers=D-H %placement=same-socket", "omb"),
    ("osu_latency_host_device %buffers=D-H %placement=other-socket", "omb"),
    ("osu_bw_host_device %buffers=H-D %placement=same-numa", "omb"),
    ("osu_bw_host_device %buffers=H-D %placement=same-socket", "omb"),
    ("osu_bw_host_device %buffers=H-D %placement=other-socket", "omb"),
    ("osu_bw_host_device %buffers=D-H %placement=same-numa", "omb"),
    ("osu_bw_host_device %buffers=D-H %placement=same-socket", "omb"),
    ("osu_bw_host_device %buffers=D-H %placement=other-socket", "omb"),
    ("osu_xccl_allreduce %nodes=1", "omb"),
    # one case per documented size range at the node count (checks/nccl_tests.py)
    ("nccl_all_reduce_perf %nodes=1 %size_range=0", "nccl-tests"),
    ("nccl_all_reduce_perf %nodes=1 %size_range=1", "nccl-tests"),
    ("nvbandwidth", "nvbandwidth"),
    ("transferbench_p2p", "transferbench"),   # AMD's: skipped on NVIDIA GPUs
    ("transferbench_a2a", "transferbench"),
    ("babelstream", "babelstream"),
]
GPU_MULTI = [
    ("osu_latency %buffers=D-D %nodes=2", "omb"),
    ("osu_bw %buffers=D-D %nodes=2", "omb"),
    ("osu_xccl_allreduce %nodes=2", "omb"),
    ("nccl_all_reduce_perf %nodes=2 %size_range=0", "nccl-tests"),
    ("nccl_all_reduce_perf %nodes=2 %size_range=1", "nccl-tests"),
]
INTEL = {name for name, env in HOST_SINGLE + HOST_MULTI if env == "imb-intelmpi"}
#: perftest between 2 nodes, one case per HCA index up to the most HCAs of any shape (16).
HCAS = 16
PERFTEST = [(f"{check} %hca={i}", "perftest") for check in ("ib_write_bw", "ib_write_lat")
            for i in range(HCAS)]


def _cases(single, multi, single_part="single", multi_part="multi"):
    return ({(name, single_part, env) for name, env in single}
            | {(name, multi_part, env) for name, env in multi})


#: ReFrame system -> the test cases it lists: (display name, partition, environment).
EXPECTED = {
    "BM_GPU4_8": _cases(HOST_SINGLE + GPU_SINGLE, HOST_MULTI + GPU_MULTI + PERFTEST),
    "BM_GPU_A100-v2_8": _cases(HOST_SINGLE + GPU_SINGLE, HOST_MULTI + GPU_MULTI + PERFTEST),
    "BM_Optimized3_36": _cases(HOST_SINGLE, HOST_MULTI + PERFTEST),
    "BM_Standard_E5_192": _cases(HOST_SINGLE, HOST_MULTI + PERFTEST),
    "loopback-cluster": _cases(HOST_SINGLE, HOST_MULTI + PERFTEST),
    # local lists every check on its one partition; what the machine cannot run is
    # skipped with the reason (below), never left out silently.
    "local": _cases(HOST_SINGLE + GPU_SINGLE, HOST_MULTI + GPU_MULTI + PERFTEST,
                    "default", "default"),
}
COUNTS = {"BM_GPU4_8": 78, "BM_GPU_A100-v2_8": 78, "BM_Optimized3_36": 51,
          "BM_Standard_E5_192": 51, "loopback-cluster": 51, "local": 78}

NO_INTEL = "has no Intel MPI in software.stack"
#: AMD's peer-to-peer tool on NVIDIA GPUs (ocibench.reframe.site: its environment).
OTHER_VENDOR = "transferbench measures another vendor's GPUs"
TRANSFERBENCH = {"transferbench_p2p": OTHER_VENDOR, "transferbench_a2a": OTHER_VENDOR}


def expected_skips(system: str, gpus: int) -> dict[str, str]:
    """Display name -> a piece of the skip reason, for a dry run with nothing set up."""
    no_rdma = {name: "has no RDMA devices: no network.rdma_nics" for name, _ in PERFTEST}
    if system == "BM_GPU4_8":   # 16 HCAs: every index runs; 2 nccl size ranges per count
        return {**{name: NO_INTEL for name in INTEL}, **TRANSFERBENCH}
    if system == "BM_GPU_A100-v2_8":   # OCI's floors only: one nccl size range per count
        return {**{name: NO_INTEL for name in INTEL}, **TRANSFERBENCH,
                **{f"nccl_all_reduce_perf %nodes={n} %size_range=1":
                   f"documents 1 size range(s) of nccl_all_reduce_perf on {n} node(s)"
                   for n in (1, 2)}}
    if system == "loopback-cluster":
        return {**{name: NO_INTEL for name in INTEL}, **no_rdma}
    if system == "BM_Optimized3_36":
        # the one shape with Intel MPI, Slurm, and no GPU check to skip; one HCA (mlx5_2)
        return {name: "has 1 cluster-network HCA(s)" for name, _ in PERFTEST
                if not name.endswith("%hca=0")}
    if system == "BM_Standard_E5_192":  # no scheduler, no host file: one node
        skips = {name: "partition BM_Standard_E5_192:multi has 1" for name, _ in HOST_MULTI}
        return {**skips, **{name: NO_INTEL for name in INTEL}, **no_rdma}
    assert system == "local"
    skips = {name: "the local shape runs on this machine only"
             for name, _ in HOST_MULTI + GPU_MULTI}
    skips.update({name: "no RDMA devices on this machine (/sys/class/infiniband is empty)"
                  for name, _ in PERFTEST})
    if gpus == 0:
        skips.update({name: "no GPU on this machine" for name, _ in GPU_SINGLE})
    elif gpus == 1:
        skips.update({name: "needs 2 GPU(s)" for name in (
            "osu_latency %buffers=D-D %nodes=1", "osu_bw %buffers=D-D %nodes=1",
            "osu_bibw %buffers=D-D %nodes=1", "osu_xccl_allreduce %nodes=1",
            "nccl_all_reduce_perf %nodes=1 %size_range=0",
            "nccl_all_reduce_perf %nodes=1 %size_range=1")})
    if gpus >= 2:
        skips["nccl_all_reduce_perf %nodes=1 %size_range=1"] = "local documents 1 size range"
    if gpus >= 1:   # local's probe lists NVIDIA's GPUs (nvidia-smi)
        skips.update(TRANSFERBENCH)
    return {**skips, **{name: NO_INTEL for name in INTEL}}


# --------------------------------------------------------------------------- helpers

def reframe_env(tmp: Path, **extra: str | None) -> dict[str, str]:
    """The test's environment for ReFrame; a variable given as None is left out."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RFM_") and k not in ("OCIBENCH_SHAPE", "OCIBENCH_HOSTFILE")}
    env.update(OCIBENCH_PERFLOG_DIR=str(tmp / "perflogs"),
               OCIBENCH_REPORT_DIR=str(tmp / "reports"))
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def reframe(args: list[str], tmp: Path, timeout: int = 600, **env: str | None):
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not on PATH (pip install -e '.[test]')")
    return subprocess.run(
        [exe, "-C", str(CONFIG), "-c", str(paths.CHECKS_DIR), "--nocolor",
         "--prefix", str(tmp), *args],
        capture_output=True, text=True, cwd=paths.REPO_ROOT, timeout=timeout,
        env=reframe_env(tmp, **env))


_SKIP_LINE = re.compile(r"^\[\s*SKIP\s*\] \(\s*\d+/\d+\) (.+?) /[0-9a-f]{8} @(\S+) \[(.*)\]$")


def skip_reasons(stdout: str) -> dict[str, str]:
    return {m.group(1): m.group(3) for m in map(_SKIP_LINE.match, stdout.splitlines()) if m}


def report_cases(report: Path) -> list[dict]:
    data = json.loads(report.read_text())
    return [case for run in data["runs"] for case in run["testcases"]]


def job_lines(case: dict) -> list[str]:
    return (Path(case["stagedir"]) / "rfm_job.sh").read_text().splitlines()


def launch_line(case: dict) -> str:
    """The benchmark's command line in a job script, the host file named HOSTFILE."""
    line = next(line for line in job_lines(case) if line.startswith("mpirun "))
    return re.sub(r'"\$\{OCIBENCH_HOSTFILE:\?[^}]*\}"', "HOSTFILE", line)


def every_module_tree(root: Path) -> Path:
    """A real Lmod tree of `local` under ``root`` holding every module an environment
    of any shape loads (empty modulefiles): the dry runs then list the same cases and
    skips whatever this machine installed (a module not in the tree is skipped as not
    installed, checks/base.py)."""
    from ocibench import accelerators
    from ocibench.reframe import site

    names = {env.module for env in site.ENVIRONMENTS} | {env.mpi for env in site.ENVIRONMENTS
                                                         if env.mpi}
    for vendor in accelerators.VENDORS.values():
        names |= {*vendor.gpu_modules, vendor.collective_tests_package}
    _local_tree(root, {name: "" for name in sorted(names)})
    return root


@pytest.fixture(scope="session")
def dry_runs(tmp_path_factory) -> dict[str, dict]:
    """--dry-run of every check on every system: {system: {cases, skips, result}}."""
    runs = {}
    modules = every_module_tree(tmp_path_factory.mktemp("modules"))
    for system in EXPECTED:
        tmp = tmp_path_factory.mktemp(f"dry-{system}")
        report = tmp / "report.json"
        result = reframe(["--dry-run", "--system", system, "--report-file", str(report)], tmp,
                         OCIBENCH_MODULES_ROOT=str(modules))
        assert report.is_file(), f"{system}: no report\n{result.stdout}\n{result.stderr}"
        cases = report_cases(report)
        runs[system] = {"result": result, "cases": cases, "skips": skip_reasons(result.stdout),
                        "by_name": {c["display_name"]: c for c in cases}, "report": report}
    return runs


# --------------------------------------------------------------------------- listing

@pytest.mark.parametrize("system", list(EXPECTED))
def test_lists_exactly_the_expected_checks(dry_runs, system):
    cases = dry_runs[system]["cases"]
    listed = {(c["display_name"], c["partition"], c["environ"]) for c in cases}
    assert len(cases) == COUNTS[system] == len(EXPECTED[system])
    assert listed == EXPECTED[system], (
        f"missing: {sorted(EXPECTED[system] - listed)}\nextra: {sorted(listed - EXPECTED[system])}")
    assert all(c["system"] == system for c in cases)


def test_list_option_agrees_with_the_dry_run(dry_runs, tmp_path):
    result = reframe(["-lC", "--system", "BM_GPU4_8"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    listed = set(re.findall(r"^- (.+?) /[0-9a-f]{8} @BM_GPU4_8:(\w+)\+(\S+)$",
                            result.stdout, re.MULTILINE))
    assert listed == EXPECTED["BM_GPU4_8"]
    assert "Concretized 78 test case(s)" in result.stdout


@pytest.mark.parametrize("system", list(EXPECTED))
def test_dry_run_passes_and_skips_with_reasons(dry_runs, system, gpu_count):
    run = dry_runs[system]
    assert run["result"].returncode == 0, run["result"].stdout[-3000:] + run["result"].stderr
    results = {c["display_name"]: c["result"] for c in run["cases"]}
    assert not [n for n, r in results.items() if r not in ("pass", "skip")], results
    expected = expected_skips(system, gpu_count)
    if system == "local" and gpu_count >= 1:
        # Which NUMA placements a GPU machine can offer depends on its topology.
        placements = {n for n, _ in GPU_SINGLE if "_host_device" in n}
        assert set(run["skips"]) - placements == set(expected)
    else:
        assert set(run["skips"]) == set(expected), sorted(set(run["skips"]) ^ set(expected))
    for name, reason in expected.items():
        assert reason in run["skips"][name], f"{name}: {run['skips'][name]}"
    assert {n for n, r in results.items() if r == "skip"} == set(run["skips"])
    # the JSON report keeps each printed reason (checks/base.py records it)
    assert {n: run["by_name"][n]["skip_reason"] for n in run["skips"]} == run["skips"]


def test_report_lists_every_skip_with_its_reason(dry_runs, tmp_path):
    from ocibench import cli
    run = dry_runs["local"]
    assert cli.main(["report", str(run["report"]), "-o", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "report.json").read_text())
    skipped = {r["name"]: r["reason"] for shape in summary["shapes"].values()
               for r in shape["results"] if r["skipped"]}
    assert skipped == run["skips"]
    page = (tmp_path / "report.html").read_text()
    for name, reason in run["skips"].items():
        assert f"<li>{html.escape(name)}: {html.escape(reason)}</li>" in page


# --------------------------------------------------------------------------- command lines

def test_gpu_command_lines_are_the_seeds(dry_runs):
    """Seed 000 sec 2-1..2-6 and seed 003 sec 3-1/3-2 on BM.GPU4.8; the host<->device
    core lists come from the shape's NUMA layout (GPUs 0-1 on NUMA 3 = cores 24-31)."""
    case = dry_runs["BM_GPU4_8"]["by_name"]
    seed_000 = {
        "osu_latency %buffers=D-D %nodes=1":
            "mpirun -n 2 --report-bindings osu_latency -x 1000 -i 10000 -m 1:1 -d cuda D D",
        "osu_latency_host_device %buffers=H-D %placement=same-numa":
            "mpirun -n 2 --map-by pe-list=24,25:ordered --report-bindings numactl -l "
            "osu_latency -x 1000 -i 10000 -m 1:1 -d cuda H D",
        "osu_latency_host_device %buffers=H-D %placement=same-socket":
            "mpirun -n 2 --map-by pe-list=0,25:ordered --report-bindings numactl -l "
            "osu_latency -x 1000 -i 10000 -m 1:1 -d cuda H D",
        "osu_latency_host_device %buffers=H-D %placement=other-socket":
            "mpirun -n 2 --map-by pe-list=32,25:ordered --report-bindings numactl -l "
            "osu_latency -x 1000 -i 10000 -m 1:1 -d cuda H D",
        "osu_latency_host_device %buffers=D-H %placement=same-numa":
            "mpirun -n 2 --map-by pe-list=25,24:ordered --report-bindings numactl -l "
            "osu_latency -x 1000 -i 10000 -m 1:1 -d cuda D H",
        "osu_latency_host_device %buffers=D-H %placement=same-socket":
            "mpirun -n 2 --map-by pe-list=25,0:ordered --report-bindings numactl -l "
            "osu_latency -x 1000 -i 10000 -m 1:1 -d cuda D H",
        "osu_latency_host_device %buffers=D-H %placement=other-socket":
            "mpirun -n 2 --map-by pe-list=25,32:ordered --report-bindings numactl -l "
            "osu_latency -x 1000 -i 10000 -m 1:1 -d cuda D H",
        "osu_bw_host_device %buffers=H-D %placement=other-socket":
            "mpirun -n 2 --map-by pe-list=32,25:ordered --report-bindings numactl -l "
            "osu_bw -x 10 -i 10 -m 268435456:268435456 -d cuda H D",
        # no seed runs osu_bibw: osu_bw's seed options (its registry entry)
        "osu_bibw %buffers=D-D %nodes=1":
            "mpirun -n 2 --report-bindings osu_bibw -x 10 -i 10 -m 268435456:268435456 "
            "-d cuda D D",
        "osu_bw %buffers=D-D %nodes=2":
            "mpirun -n 2 -N 1 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
            "-x UCX_NET_DEVICES=mlx5_6:1 -x UCX_PROTO_INFO=y "
            "osu_bw -x 10 -i 10 -m 268435456:268435456 -d cuda D D",
        "osu_xccl_allreduce %nodes=1":
            "mpirun -n 8 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV -x UCX_NET_DEVICES=mlx5_6:1 osu_xccl_allreduce -x 10 -i 10 "
            "-m 1073741824:1073741824 -M 1073741824 -d cuda D D",
        "osu_xccl_allreduce %nodes=2":
            "mpirun -n 16 -N 8 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV "
            "-x UCX_NET_DEVICES=mlx5_6:1 -x UCX_PROTO_INFO=y osu_xccl_allreduce -x 10 -i 10 "
            "-m 1073741824:1073741824 -M 1073741824 -d cuda D D",
        # seed 003 at 10 GiB, then OCI's floors' sizes (BM.GPU4.8.yaml)
        "nccl_all_reduce_perf %nodes=1 %size_range=0":
            "mpirun -n 8 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV all_reduce_perf -b 10G -e 10G -t 1 -g 1",
        "nccl_all_reduce_perf %nodes=1 %size_range=1":
            "mpirun -n 8 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV all_reduce_perf -b 1G -e 10G -f 2 -t 1 -g 1",
        "nccl_all_reduce_perf %nodes=2 %size_range=1":
            "mpirun -n 16 -N 8 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV "
            "-x UCX_NET_DEVICES=mlx5_4:1 -x NCCL_IGNORE_CPU_AFFINITY=1 -x UCX_PROTO_INFO=y "
            "all_reduce_perf -b 1G -e 10G -i 9G -t 1 -g 1",
        "nccl_all_reduce_perf %nodes=2 %size_range=0":
            "mpirun -n 16 -N 8 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV "
            "-x UCX_NET_DEVICES=mlx5_4:1 -x NCCL_IGNORE_CPU_AFFINITY=1 -x UCX_PROTO_INFO=y "
            "all_reduce_perf -b 10G -e 10G -t 1 -g 1",
    }
    for name, line in seed_000.items():
        assert launch_line(case[name]) == line, name
        # UCX says which protocols and transports the GPU messages took
        assert "export UCX_PROTO_INFO=y" in job_lines(case[name]), name
    script = job_lines(case["osu_latency %buffers=D-D %nodes=1"])
    assert script.index("module load cuda") < script.index("module load openmpi") \
        < script.index("module load omb")


def test_cpu_command_lines_are_the_seeds(dry_runs):
    """Seed 002 sec 3-1..3-4 and seed 004 sec 1, 2 on BM.Optimized3.36 (36 cores)."""
    case = dry_runs["BM_Optimized3_36"]["by_name"]
    seeds = {
        "osu_alltoall": "mpirun -n 36 osu_alltoall -x 10 -i 10 -m 1:67108864",
        "osu_latency %buffers=H-H %nodes=2":
            "mpirun -n 2 -N 1 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
            "-x UCX_NET_DEVICES=mlx5_2:1 osu_latency -x 1000 -i 10000 -m 1:1",
        "osu_bw %buffers=H-H %nodes=2":
            "mpirun -n 2 -N 1 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
            "-x UCX_NET_DEVICES=mlx5_2:1 osu_bw -x 10 -i 10 -m 268435456:268435456",
        "osu_bibw %buffers=H-H %nodes=2":
            "mpirun -n 2 -N 1 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
            "-x UCX_NET_DEVICES=mlx5_2:1 osu_bibw -x 10 -i 10 -m 268435456:268435456",
        "osu_allreduce":
            "mpirun -n 144 -N 36 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
            "-x UCX_NET_DEVICES=mlx5_2:1 osu_allreduce -x 10 -i 10 -m 4:268435456",
        "imb_pingpong %mpi=openmpi %nodes=2":
            "mpirun -n 2 -N 1 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
            "-x UCX_NET_DEVICES=mlx5_2:1 IMB-MPI1 -msglog 3:28 PingPong",
        "imb_allreduce %mpi=openmpi %nodes=4":
            "mpirun -n 144 -N 36 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
            "-x UCX_NET_DEVICES=mlx5_2:1 IMB-MPI1 -msglog 3:28 -npmin 144 allreduce",
        "imb_pingpong %mpi=intel-mpi %nodes=2":
            "mpirun -n 2 -ppn 1 -hostfile HOSTFILE -genv UCX_NET_DEVICES=mlx5_2:1 "
            "IMB-MPI1 -msglog 3:28 PingPong",
        "imb_allreduce %mpi=intel-mpi %nodes=4":
            "mpirun -n 144 -ppn 36 -hostfile HOSTFILE -genv UCX_NET_DEVICES=mlx5_2:1 "
            "IMB-MPI1 -msglog 3:28 -npmin 144 allreduce",
    }
    for name, line in seeds.items():
        assert launch_line(case[name]) == line, name
        assert not any("UCX_PROTO_INFO" in line for line in job_lines(case[name])), name
    multi = job_lines(case["osu_allreduce"])
    assert "#SBATCH --ntasks=144" in multi and "#SBATCH --ntasks-per-node=36" in multi
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" > ocibench_hosts.txt' in multi
    intel = job_lines(case["imb_pingpong %mpi=intel-mpi %nodes=2"])
    assert "module load intel-mpi" in intel and "module load imb" in intel


def test_stream_places_one_thread_per_two_cores(dry_runs):
    """Seed 001 sec 3-2 on BM.Standard.E5.192 (192 cores): OMP_PLACES=0:96:2."""
    script = job_lines(dry_runs["BM_Standard_E5_192"]["by_name"]["stream %nps=1"])
    for line in ("export OMP_NUM_THREADS=96", "export OMP_PLACES=0:96:2",
                 "export OMP_PROC_BIND=spread", "stream_c.exe", "module load stream"):
        assert line in script
    assert not any(line.startswith("mpirun") for line in script)


def test_alltoall_sizes_scale_to_memory(dry_runs):
    """2 x 64 MiB x 36 ranks per rank fits BM.Optimized3.36 (seed 002's full range);
    with 192 ranks, BM.Standard.E5.192's 2304 GiB holds up to 16 MiB."""
    assert launch_line(dry_runs["BM_Standard_E5_192"]["by_name"]["osu_alltoall"]) == \
        "mpirun -n 192 osu_alltoall -x 10 -i 10 -m 1:16777216"
    assert launch_line(dry_runs["BM_GPU4_8"]["by_name"]["osu_alltoall"]) == \
        "mpirun -n 64 osu_alltoall -x 10 -i 10 -m 1:67108864"


def test_failure_line_names_the_cause():
    lmod = ('Lmod has detected the following error: The following module(s) are unknown:\n'
            '"omb"\n\nPlease check the spelling or version number.\n')
    assert failure_line(lmod).endswith('module(s) are unknown: "omb"')
    assert failure_line("x\nocibench: no Lmod module tree for shape local\n") == \
        "ocibench: no Lmod module tree for shape local"


def _lmod_load(init: Path, tree: Path, *modules: str) -> subprocess.CompletedProcess:
    """`module use TREE; module load MODULES` in a real Lmod shell."""
    script = f'source "{init}"; module use "{tree}"; module load {" ".join(modules)}'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


#: A modulefile Lua cannot parse: the ')' of line 2 is missing.
BROKEN_LUA = 'whatis("omb")\nsetenv("OMB_HOME", "/opt/omb"\nprepend_path("PATH", "/opt/omb")\n'


def test_failure_line_names_the_modulefile_and_line_lmod_prints(tmp_path, lmod_init):
    """Lmod wraps its message to the terminal and names the file in a table below; the
    reason joins them: the modulefile and the line Lua stopped at."""
    deep = tmp_path / ("shared-storage-" * 4) / "modules" / "BM.GPU4.8" / "Core"
    (deep / "omb").mkdir(parents=True)
    (deep / "omb" / "7.5.lua").write_text(BROKEN_LUA)
    done = _lmod_load(lmod_init, deep, "omb")
    assert done.returncode != 0
    assert failure_line(done.stderr) == (
        f"Lmod has detected the following error in modulefile {deep}/omb/7.5.lua line 3: "
        "')' expected (to close '(' at line 2) near 'prepend_path'")
    (deep / "omb" / "7.5.lua").write_text('LmodError("omb is retired here")\n')
    assert failure_line(_lmod_load(lmod_init, deep, "omb").stderr) == (
        "Lmod has detected the following error: omb is retired here "
        f"(modulefile {deep}/omb/7.5.lua)")


STREAM_OUT = """Number of Threads counted = 1
Function    Best Rate MB/s  Avg time     Min time     Max time
Copy:           20000.1     0.008100     0.008000     0.008200
Scale:          19000.2     0.008500     0.008400     0.008600
Add:            21000.3     0.011500     0.011400     0.011600
Triad:          21000.4     0.011500     0.011400     0.011600
Solution Validates: avg error less than 1.000000e-13 on all three arrays
"""


def test_failure_line_prefers_the_crash_to_an_error_word():
    """A crashed STREAM's stdout says "avg error less than": the crash is the reason."""
    stderr = "/stage/rfm_job.sh: line 21: 4242 Segmentation fault (core dumped) stream_c.exe\n"
    assert failure_line(stderr, STREAM_OUT) == (
        "benchmark crashed: /stage/rfm_job.sh: line 21: 4242 Segmentation fault "
        "(core dumped) stream_c.exe")
    mpirun = ("-" * 74 + "\nmpirun noticed that process rank 1 with PID 0 on node gpu-a "
              "exited on\nsignal 11 (Segmentation fault).\n" + "-" * 74 + "\n")
    assert failure_line(mpirun) == (
        "benchmark crashed: mpirun noticed that process rank 1 with PID 0 on node gpu-a "
        "exited on signal 11 (Segmentation fault).")


def _open_mpi_major(mpirun: str) -> str:
    first = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"\(Open MPI\) (\d+)\.", first)
    if not found:
        pytest.skip(f"{mpirun} is not Open MPI: {first.splitlines()[:1]}")
    return found.group(1)


def test_host_device_pinning_on_this_open_mpi(tmp_path, mpirun):
    """placement.pin_ranks with the real mpirun: rank 0 on core 1, rank 1 on core 0 (the
    order matters: D-H puts the device rank first), chosen in the job or named by the
    shape; a shape naming the other major fails, saying which version is needed."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 cores")
    major = _open_mpi_major(mpirun)
    other = "4.1.6" if major == "5" else "5.0.8"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    rank_cpus = "echo rank $OMPI_COMM_WORLD_RANK cpus $(taskset -pc $$ | cut -d: -f2)"
    for version in ("any", f"{major}.0.0", other):
        options, prepare = placement.pin_ranks([1, 0], version)
        script = "\n".join(["trap 'exit 1' ERR", *prepare,
                            f"mpirun -n 2 {' '.join(options)} sh -c '{rank_cpus}'"])
        work = tmp_path / version
        work.mkdir()
        done = subprocess.run(["bash", "-c", script], cwd=work, capture_output=True,
                              text=True, timeout=120, env=env)
        if version == other:
            assert done.returncode == 1
            assert done.stderr == (
                f"ocibench: the host<->GPU placement is written for Open MPI "
                f"{other[0]}.x (software.stack.openmpi: {other}); this job's mpirun is "
                f"Open MPI {major}\n")
            continue
        assert done.returncode == 0, done.stderr
        assert sorted(done.stdout.split("\n")[:2]) == ["rank 0 cpus 1", "rank 1 cpus 0"], \
            done.stdout


def test_every_job_records_provenance(dry_runs):
    for case in dry_runs["BM_Optimized3_36"]["cases"]:
        if case["result"] == "skip":
            continue
        script = job_lines(case)
        prov = [line for line in script if "-m ocibench.node.provenance" in line]
        assert prov and prov[0].endswith(" -m ocibench.node.provenance > provenance.json")
        assert Path(prov[0].split()[0]).is_file()   # ReFrame's own interpreter
        bench = next(i for i, line in enumerate(script)
                     if (line.startswith("mpirun ") or line.split()[:1] == [case["executable"]])
                     and line != prov[0])
        assert script.index(prov[0]) < bench
        assert "provenance.json" in case["keep_files"]


# --------------------------------------------------------------------------- clear errors

def test_unknown_system_fails_clearly(tmp_path):
    result = reframe(["-l", "--system", "nosuch"], tmp_path)
    assert result.returncode != 0
    text = result.stdout + result.stderr
    assert "unknown system 'nosuch'" in text
    for system in EXPECTED:
        assert system in text


def test_shape_name_as_system_names_the_reframe_system(tmp_path):
    result = reframe(["-l", "--system", "BM.GPU4.8"], tmp_path)
    assert result.returncode != 0
    assert "--system BM_GPU4_8" in result.stdout + result.stderr


def test_unknown_ocibench_shape_lists_the_known_shapes(tmp_path):
    result = reframe(["-l"], tmp_path, OCIBENCH_SHAPE="unknown")
    assert result.returncode != 0
    text = result.stdout + result.stderr
    assert "unknown shape 'unknown'" in text
    for shape in ("BM.GPU4.8", "BM.GPU.A100-v2.8", "BM.Optimized3.36",
                  "BM.Standard.E5.192", "local"):
        assert shape in text


def test_ocibench_shape_selects_the_system(tmp_path):
    result = reframe(["-l"], tmp_path, OCIBENCH_SHAPE="BM.Optimized3.36")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "selected system:   'BM_Optimized3_36'" in result.stdout
    assert "Found 51 check(s)" in result.stdout   # 19 + 2 perftest checks x 16 HCA indices


def test_the_partitions_carry_the_shapes_hardware(monkeypatch):
    """ReFrame's own processor and devices records, from the shape (BM.GPU4.8: 2 x 32
    cores without SMT, 8 A100 = compute capability 80), and the system found by
    ReFrame's autodetection, through the shape this machine is."""
    from ocibench.reframe import site

    monkeypatch.setenv(shapes.SHAPE_ENV, "BM.GPU4.8")
    config = site.build([])
    assert config["autodetect_methods"] == ["py::ocibench.reframe.site.detected_system"]
    assert site.detected_system() == "BM_GPU4_8"
    system = next(s for s in config["systems"] if s["name"] == "BM_GPU4_8")
    assert system["hostnames"] == ["^BM_GPU4_8$"]
    for partition in system["partitions"]:
        assert partition["processor"] == {"num_cpus": 64, "num_cpus_per_core": 1,
                                          "num_sockets": 2, "num_cpus_per_socket": 32}
        assert partition["devices"] == [{"type": "gpu", "arch": "sm_80", "num_devices": 8}]
    cpu = next(s for s in config["systems"] if s["name"] == "BM_Optimized3_36")
    assert all(p["devices"] == [] for p in cpu["partitions"])
    # every other system's name is its only "host name": none matches another's
    names = [s["name"] for s in config["systems"]]
    for system in config["systems"]:
        assert [n for n in names if re.match(system["hostnames"][0], n)] == [system["name"]]


# --------------------------------------------------------------------------- real runs

def _run_local(tmp: Path, names: list[str], *options: str, **env: str | None):
    args = ["-r", "--system", "local", *options]
    for name in names:
        args += ["-n", name]
    report = tmp / "report.json"
    result = reframe(args + ["--report-file", str(report)], tmp, timeout=1800, **env)
    assert report.is_file(), result.stdout + result.stderr
    return result, {c["display_name"]: c for c in report_cases(report)}


def test_a_module_not_installed_skips_the_check_naming_it(tmp_path, lmod_init):
    """A real tree without the omb module (a partial install): the check is SKIPPED,
    naming the module, its Spack package and `make install`, never failed; a check
    whose modules are there still runs (STREAM's, a stand-in that prints a table);
    `ocibench report` counts the skip as one, with its reason."""
    bench = tmp_path / "bin"
    bench.mkdir()
    stream = bench / "stream_c.exe"
    stream.write_text(f"#!/bin/sh\ncat <<'EOF'\n{STREAM_OUT}EOF\n")
    stream.chmod(0o755)
    modules = tmp_path / "modules"
    _local_tree(modules, {"openmpi": 'whatis("an openmpi module with no omb beside it")\n',
                          "stream": f'prepend_path("PATH", "{bench}")\n'})
    result, cases = _run_local(tmp_path, ["osu_latency%buffers=H-H%nodes=1", "stream"],
                               OCIBENCH_MODULES_ROOT=str(modules))
    case = cases["osu_latency %buffers=H-H %nodes=1"]
    assert case["result"] == "skip", case["fail_reason"]
    assert case["skip_reason"] == (
        "not installed: no module omb (Spack package osu-micro-benchmarks) in the Lmod "
        f"tree {modules}/local (`make install` builds the local stack into it)")
    ran = [c for name, c in cases.items() if name.startswith("stream") and c["result"] != "skip"]
    assert [c["result"] for c in ran] == ["pass"], result.stdout[-3000:]
    assert result.returncode == 0, result.stdout[-3000:]
    from ocibench import cli
    assert cli.main(["report", str(tmp_path / "report.json"), "-o", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "report.json").read_text())
    results = {r["name"]: r for shape in summary["shapes"].values() for r in shape["results"]}
    skipped = results["osu_latency %buffers=H-H %nodes=1"]
    assert skipped["skipped"] and skipped["reason"] == case["skip_reason"], skipped


def test_a_missing_module_tree_on_local_skips_the_check(tmp_path, lmod_init):
    """No tree at all where `local`'s jobs run (this machine): nothing is installed."""
    empty = tmp_path / "no-modules"
    result, cases = _run_local(tmp_path, ["osu_latency%buffers=H-H%nodes=1"],
                               OCIBENCH_MODULES_ROOT=str(empty))
    case = cases["osu_latency %buffers=H-H %nodes=1"]
    assert result.returncode == 0 and case["result"] == "skip", case["fail_reason"]
    assert case["skip_reason"] == (f"not installed: no Lmod module tree for shape local at "
                                   f"{empty}/local (`make install` builds the stack and its tree)")


def test_a_module_that_does_not_load_still_fails_the_check(tmp_path, lmod_init):
    """A module that is installed but whose Lua stops Lmod is a broken install, not an
    absent one: the check fails with Lmod's line."""
    _local_tree(tmp_path / "modules", {"openmpi": 'whatis("openmpi")\n',
                                       "omb": 'LmodError("omb: its prefix is gone")\n'})
    result, cases = _run_local(tmp_path, ["osu_latency%buffers=H-H%nodes=1"],
                               OCIBENCH_MODULES_ROOT=str(tmp_path / "modules"))
    case = cases["osu_latency %buffers=H-H %nodes=1"]
    assert result.returncode != 0 and case["result"] == "fail"
    assert "omb: its prefix is gone" in case["fail_reason"], case["fail_reason"]


def _local_tree(root: Path, modulefiles: dict[str, str]) -> Path:
    """A real Lmod tree of the local shape under ``root``: {name: Lua} as
    <root>/local/linux-test-x86_64/Core/<name>/1.0.lua; returns the Core directory."""
    core = root / "local" / "linux-test-x86_64" / "Core"
    for name, lua in modulefiles.items():
        (core / name).mkdir(parents=True)
        (core / name / "1.0.lua").write_text(lua)
    return core


def test_failed_jobs_name_the_modulefile_line_and_the_crash(tmp_path, lmod_init):
    """A malformed omb modulefile: the reason names its file and line (not rfm_job.err).
    A STREAM that crashes after printing its table: the reason is the crash, not the
    'Solution Validates: avg error ...' line of its stdout."""
    bench = tmp_path / "bin"
    bench.mkdir()
    stream = bench / "stream_c.exe"   # prints a whole STREAM table, then segfaults
    stream.write_text(f"#!/bin/sh\ncat <<'EOF'\n{STREAM_OUT}EOF\nkill -SEGV $$\n")
    stream.chmod(0o755)
    core = _local_tree(tmp_path / "modules", {
        "openmpi": 'whatis("openmpi")\n', "omb": BROKEN_LUA,
        "stream": f'prepend_path("PATH", "{bench}")\n'})
    result, cases = _run_local(tmp_path, ["osu_latency%buffers=H-H%nodes=1", "stream"],
                               OCIBENCH_MODULES_ROOT=str(tmp_path / "modules"))
    omb = cases["osu_latency %buffers=H-H %nodes=1"]
    assert result.returncode != 0 and omb["result"] == "fail"
    assert f"error in modulefile {core}/omb/1.0.lua line 3: ')' expected" in omb["fail_reason"]
    ran = [c for name, c in cases.items() if name.startswith("stream") and c["result"] != "skip"]
    assert len(ran) == 1 and ran[0]["result"] == "fail"
    assert "job exit code 139: benchmark crashed: " in ran[0]["fail_reason"]
    assert "Segmentation fault" in ran[0]["fail_reason"]


def test_an_unsafe_module_tree_fails_before_any_module_loads(tmp_path, lmod_init):
    """A world-writable copy of a real tree whose modulefile runs os.execute: the check
    fails naming the path, and Lmod never runs the modulefile."""
    marker = tmp_path / "modulefile-ran"
    _local_tree(tmp_path / "modules", {
        "openmpi": f'os.execute("touch {marker}")\nwhatis("openmpi")\n',
        "omb": 'whatis("omb")\n'})
    tree = tmp_path / "modules" / "local"
    everything = [tree, *tree.rglob("*")]
    for path in everything:   # chmod -R go+w, as a careless admin would
        path.chmod(path.stat().st_mode | 0o022)
    result, cases = _run_local(tmp_path, ["osu_latency%buffers=H-H%nodes=1"],
                               OCIBENCH_MODULES_ROOT=str(tmp_path / "modules"))
    case = cases["osu_latency %buffers=H-H %nodes=1"]
    assert result.returncode != 0 and case["result"] == "fail"
    assert case["fail_reason"] == (
        f"sanity error: job exit code 1: ocibench: unsafe module tree: {tree}: directory "
        "writable by group and others (mode 0777; chmod go-w)")
    assert not marker.exists(), "Lmod ran a modulefile of the unsafe tree"
    # the same tree made safe: the modulefile loads (and runs)
    for path in everything:
        path.chmod(path.stat().st_mode & ~0o022)
    _run_local(tmp_path / "again", ["osu_latency%buffers=H-H%nodes=1"],
               OCIBENCH_MODULES_ROOT=str(tmp_path / "modules"))
    assert marker.exists()


@pytest.fixture(scope="session")
def local_tree(lmod_init, mpirun) -> Path:
    root = paths.module_root("local")
    cores = sorted(root.glob("Core")) + sorted(root.glob("*/Core"))
    if not cores:
        pytest.skip(f"no local Lmod module tree: nothing matches {root}/Core or "
                    f"{root}/*/Core (make install builds it; OCIBENCH_MODULES_ROOT moves it)")
    return root


def test_host_checks_run_and_pass_on_local(local_tree, tmp_path):
    """osu_latency/osu_bw (H-H, 2 ranks), osu_alltoall (all cores), IMB if the tree
    has it, STREAM: for real, through the local module tree."""
    names = ["osu_latency%buffers=H-H%nodes=1", "osu_bw%buffers=H-H%nodes=1",
             "osu_alltoall", "stream"]
    has_imb = any(local_tree.glob("**/imb"))
    if has_imb:
        names += ["imb_pingpong%mpi=openmpi%nodes=1", "imb_allreduce%mpi=openmpi%nodes=1"]
    # osu_bw at the seed's 256 MiB, with 2 iterations instead of the seed's 20: 32 GiB
    # moved instead of 320 (a minute of the suite's 2 cores); the dry-run tests assert
    # the seed's own command line.
    result, cases = _run_local(tmp_path, names, "-S", "osu_bw.iterations=2")
    failed = {n: c["fail_reason"] for n, c in cases.items() if c["result"] == "fail"}
    assert not failed and result.returncode == 0, failed or result.stdout[-3000:]
    for name in ("osu_latency %buffers=H-H %nodes=1", "osu_bw %buffers=H-H %nodes=1",
                 "osu_alltoall"):
        assert cases[name]["result"] == "pass"
        assert cases[name]["perfvalues"], f"{name}: no performance values"
    assert cases["osu_latency %buffers=H-H %nodes=1"]["num_tasks"] == 2
    bw_script = Path(cases["osu_bw %buffers=H-H %nodes=1"]["outputdir"]) / "rfm_job.sh"
    assert "osu_bw -x 2 -i 2 -m 268435456:268435456" in bw_script.read_text()
    alltoall = cases["osu_alltoall"]   # one rank per physical core of this machine
    assert alltoall["num_tasks"] == alltoall["ranks_per_node"] == shapes.load("local").cores
    stream = [cases["stream %nps=1"], cases["stream %nps=4"]]
    assert sorted(c["result"] for c in stream) == ["pass", "skip"]
    if has_imb:
        assert cases["imb_pingpong %mpi=openmpi %nodes=1"]["result"] == "pass"
        assert cases["imb_allreduce %mpi=openmpi %nodes=1"]["result"] == "pass"
    for case in cases.values():
        if case["result"] == "pass":
            assert (Path(case["outputdir"]) / "provenance.json").is_file()
    assert list((tmp_path / "perflogs" / "local" / "default").glob("*.log"))


def test_preflight_runs_and_passes_on_local(tmp_path, lmod_init):
    """checks/preflight.py for real: `ocibench preflight --json` in the omb environment
    (here a tree of empty openmpi and omb modules: the machine's own tools), its JSON
    kept; local requires nothing, so it passes whatever this machine lacks.  ReFrame
    runs as docs/checks.md writes it, outside `spack env activate .`: no PYTHONPATH
    (site/reframe_config.py finds this checkout's ocibench, and so does the job)."""
    core = tmp_path / "modules" / "local" / "linux-test-x86_64" / "Core"
    for name in ("openmpi", "omb"):
        (core / name).mkdir(parents=True)
        (core / name / "1.0.lua").write_text("")
    listed = reframe(["-l"], tmp_path / "list", PYTHONPATH=None)
    assert listed.returncode == 0 and "Found " in listed.stdout, listed.stderr[-3000:]
    result, cases = _run_local(tmp_path, ["preflight"], PYTHONPATH=None,
                               OCIBENCH_MODULES_ROOT=str(tmp_path / "modules"))
    case = cases["preflight"]
    assert case["result"] == "pass", case["fail_reason"] or result.stdout[-3000:]
    kept = json.loads((Path(case["outputdir"]) / "preflight.json").read_text())
    assert kept["shape"] == "local" and kept["ok"] and kept["missing"] == []
    assert {"gpus", "cma", "memlock", "ucx built", "openmpi pml"} <= {
        i["name"] for i in kept["items"]}


def _forged_tree(tmp: Path, bandwidth: str) -> Path:
    """A module tree whose omb puts a stand-in osu_bw first on PATH: it prints OMB's
    table with ``bandwidth`` MB/s, as an edited binary or a broken run could.  Real
    Lmod loads it and real mpirun starts it; only the benchmark's number is forged."""
    bin_dir = tmp / "forged-bin"
    bin_dir.mkdir()
    script = bin_dir / "osu_bw"
    script.write_text("#!/bin/sh\n"
                      "[ \"${OMPI_COMM_WORLD_RANK:-0}\" = 0 ] || exit 0\n"
                      "printf '# OSU MPI Bandwidth Test v7.4\\n# Datatype: MPI_CHAR.\\n"
                      f"# Size      Bandwidth (MB/s)\\n268435456  {bandwidth}\\n'\n")
    script.chmod(0o755)
    core = tmp / "modules" / "local" / "linux-test-x86_64" / "Core"
    for name, body in (("openmpi", ""), ("omb", f'prepend_path("PATH", "{bin_dir}")\n')):
        (core / name).mkdir(parents=True)
        (core / name / "1.0.lua").write_text(body)
    return tmp / "modules"


@pytest.mark.parametrize("bandwidth, why", [
    ("1000000000000.00", "above what any node moves"),
    ("0.00", "a zero bandwidth is impossible"),
])
def test_impossible_value_fails_the_live_check(tmp_path, lmod_init, mpirun, bandwidth, why):
    """The live check judges plausibility as `ocibench evaluate` does: 1e12 MB/s and
    0 MB/s fail sanity even on the local shape, which documents no figure."""
    result, cases = _run_local(tmp_path, ["osu_bw%buffers=H-H%nodes=1"],
                               OCIBENCH_MODULES_ROOT=str(_forged_tree(tmp_path, bandwidth)))
    case = cases["osu_bw %buffers=H-H %nodes=1"]
    assert result.returncode != 0 and case["result"] == "fail", case
    assert why in case["fail_reason"]


def missed_cma_figure(tmp_path: Path) -> tuple[Path, Path]:
    """A module tree whose osu_bw prints a real run's output (UCX 1.13, CMA off:
    tests/data/ucx_proto), and a copy of the shapes whose local shape documents an
    H-H figure that requires CMA: the run misses it, for a cause its output names."""
    capture = paths.REPO_ROOT / "tests" / "data" / "ucx_proto" / "osu_bw.h-h.no-cma.ucx-1.13.txt"
    modules = _forged_tree(tmp_path, "0")
    (tmp_path / "forged-bin" / "osu_bw").write_text(
        f"#!/bin/sh\n[ \"${{OMPI_COMM_WORLD_RANK:-0}}\" = 0 ] || exit 0\ncat {capture}\n")
    shapes_dir = tmp_path / "shapes"
    shutil.copytree(paths.REPO_ROOT / "site" / "shapes", shapes_dir)
    local = shapes_dir / "local.yaml"
    local.write_text(local.read_text().replace("figures: []", """figures:
  - id: test_osu_bw_h_h_cma
    check: osu_bw
    params: {buffers: H-H, nodes: 1}
    metric: bandwidth
    unit: MB/s
    source: {doc: tests/test_reframe.py, section: named causes}
    values: {268435456: 20000.0}
    requires: [cma]
    why: a single-copy host path (test figure)"""))
    return modules, shapes_dir


def test_a_missed_figure_names_its_cause_in_the_live_check(tmp_path, lmod_init, mpirun):
    """The live check's performance failure names the cause, from the UCX protocol
    tables in its own output: a stand-in osu_bw prints a real run's output (UCX 1.13,
    CMA off: tests/data/ucx_proto), judged against a figure that requires CMA, added
    to the local shape for this test."""
    modules, shapes_dir = missed_cma_figure(tmp_path)
    result, cases = _run_local(tmp_path, ["osu_bw%buffers=H-H%nodes=1"],
                               OCIBENCH_MODULES_ROOT=str(modules),
                               OCIBENCH_SHAPES_DIR=str(shapes_dir))
    case = cases["osu_bw %buffers=H-H %nodes=1"]
    assert case["result"] == "fail", case["fail_reason"] or result.stdout[-3000:]
    assert case["fail_reason"].startswith("performance error")
    assert case["fail_reason"].endswith(
        ": the documented 20000.00 MB/s needs cma; this run's 256 MiB messages from host "
        "memory went rendezvous fragmented copy-in copy-out over sysv/memory (UCX's "
        "tables name no cma lane)"), case["fail_reason"]


def test_perftest_runs_ocis_command_per_hca(dry_runs):
    """oci-hpc v3.1.0 multi_node_active_healthcheck.py: server and client over ssh,
    `ib_write_bw -F -q 2 -x 3 --report_gbits -d <HCA>`, three attempts; BM.GPU4.8's
    HCAs in the order of OCI's NCCL_IB_HCA (mlx5_0, mlx5_2, mlx5_6, ...)."""
    case = dry_runs["BM_GPU4_8"]["by_name"]
    script = "\n".join(job_lines(case["ib_write_bw %hca=2"]))
    assert 'ssh "$server" "$exe -F -q 2 -x 3 --report_gbits -d mlx5_6 -i 1"' in script
    assert 'ssh "$client" "$exe -F -q 2 -x 3 --report_gbits -d mlx5_6 -i 1 $server"' in script
    assert "for attempt in $(seq 3); do" in script and "module load perftest" in script
    lat = "\n".join(job_lines(case["ib_write_lat %hca=0"]))
    assert '"$exe -F -x 3 -s 8 -n 10000 -d mlx5_0 -i 1 $server"' in lat
    assert "#SBATCH --ntasks=2" in lat and "#SBATCH --ntasks-per-node=1" in lat


def test_new_shapes_run_their_published_command_lines(tmp_path):
    """ocitutorials run-nccltests-h100 sec 3 (2 nodes: -b 1G -e 16G -f 2, UCX_NET_DEVICES
    =eth0) and run-stream-e6 sec 3-2 (OMP_PLACES=0:32:8 OMP_NUM_THREADS=32)."""
    lines = {}
    for system, names in (("BM_GPU_H100_8", "nccl_all_reduce_perf"),
                          ("BM_Standard_E6_256", "stream")):
        report = tmp_path / f"{system}.json"
        result = reframe(["--dry-run", "--system", system, "-n", names,
                          "--report-file", str(report)], tmp_path / system)
        assert report.is_file(), result.stdout + result.stderr
        # (a size range the shape does not document is skipped: no job script)
        lines[system] = {c["display_name"]: job_lines(c) for c in report_cases(report)
                         if c["result"] != "skip"}
    h100 = lines["BM_GPU_H100_8"]
    assert launch_line({"stagedir": _stagedir(h100, "nccl_all_reduce_perf %nodes=2 %size_range=0")}) == (
        "mpirun -n 16 -N 8 -hostfile HOSTFILE -x PATH -x LD_LIBRARY_PATH "
        "-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV "
        "-x UCX_NET_DEVICES=eth0 -x NCCL_IGNORE_CPU_AFFINITY=1 -x UCX_PROTO_INFO=y "
        "all_reduce_perf -b 1G -e 16G -f 2 -t 1 -g 1")
    # one node: no published run; OCI's floor (health check) at -b 1G -e 16G -f 2
    assert "all_reduce_perf -b 1G -e 16G -f 2 -t 1 -g 1" in "\n".join(
        h100["nccl_all_reduce_perf %nodes=1 %size_range=0"])
    for line in ("export OMP_NUM_THREADS=32", "export OMP_PLACES=0:32:8",
                 "export OMP_PROC_BIND=spread"):
        assert line in lines["BM_Standard_E6_256"]["stream %nps=1"]


def _stagedir(cases: dict[str, list[str]], name: str) -> str:
    """launch_line reads rfm_job.sh from a stage directory: write the lines to one."""
    import tempfile
    stage = Path(tempfile.mkdtemp())
    (stage / "rfm_job.sh").write_text("\n".join(cases[name]) + "\n")
    return str(stage)


def test_nvbandwidth_measures_at_its_default_buffer_size(tmp_path):
    """The copy ceilings at nvbandwidth's own buffer size: with a smaller -b (256 MiB)
    nvbandwidth warns that it reads below peak, and it read about 1 % low, under OMB's
    own 256 MiB D-D figure (checks/nvbandwidth.py).  Our pageable copy stays at OMB's size."""
    report = tmp_path / "report.json"
    result = reframe(["--dry-run", "--system", "BM_GPU4_8", "-n", "nvbandwidth",
                      "--report-file", str(report)], tmp_path / "run")
    assert report.is_file(), result.stdout + result.stderr
    (case,) = report_cases(report)
    script = job_lines(case)
    assert "nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce " \
           "device_to_device_memcpy_read_ce device_to_device_memcpy_write_ce" in script, script
    pageable = next(line for line in script if "ocibench.node.pageable_copy" in line)
    assert "--size 268435456 " in pageable
