"""The NCCL checks under ReFrame on 2 x H200, forced off NVLink: captured there.

tests/data/nccl_path/reframe/ holds the job outputs of ``reframe -c checks/ -r -t gpu``
on the GPU machine (2 x H200, NV18; README.md there): each NCCL check as it ran
healthy (P2P over NVLink), with ``NCCL_P2P_DISABLE=1`` (SHM) and with
``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`` (a socket), and nccl-tests on one rank with
``CUDA_VISIBLE_DEVICES=0``.  There the forced runs FAILED naming the path, and the
report held each run's path.  Here the same outputs are judged again on ``local`` as
that machine described it (a fake nvidia-smi printing its own answers), and replayed
through ReFrame itself by stand-in benchmarks that print them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibench import paths
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict

DATA = paths.REPO_ROOT / "tests" / "data" / "nccl_path"
RUNS = DATA / "reframe"
#: The checks' parameters there: one node, both GPUs; nccl-tests' seeds' sizes.
PARAMS = {"nccl_all_reduce_perf": {"nodes": 1, "gpus_per_node": 2, "begin": "10G",
                                   "end": "10G"},
          "osu_xccl_allreduce": {"nodes": 1, "gpus_per_node": 2}}
#: What each forced run's failure names: the transport and NCCL's own echo of the cause.
FORCED = {"shm": ("SHM/direct/direct", "NVLink-connected (links.nvlink_gbs 478.1 GB/s)",
                  "NCCL_P2P_DISABLE set by environment to 1"),
          "socket": ("over NET/Socket", "not peer access or shared memory",
                     "NCCL_SHM_DISABLE set by environment to 1")}
#: nvidia-smi as the GPU machine answered the local probe's two questions.
FAKE_SMI = f"""#!/bin/sh
case "$*" in
  *--query-gpu=index,name,compute_cap,pci.bus_id*)
    printf '0, NVIDIA H200, 9.0, 00000000:00:06.0\\n1, NVIDIA H200, 9.0, 00000000:00:07.0\\n' ;;
  "nvlink --status") cat {DATA}/nvidia-smi-nvlink-status.h200x2.txt ;;
  *) echo "nvidia-smi: $*: not in this fake" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def h200x2(tmp_path, monkeypatch) -> Path:
    """This process and its children see the GPU machine's nvidia-smi."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return bin_dir


def _run(check: str, path: str) -> str:
    return (RUNS / f"{check}.{path}.txt").read_text()


@pytest.mark.parametrize("check", sorted(PARAMS))
@pytest.mark.parametrize("forced", sorted(FORCED))
def test_a_run_forced_off_nvlink_fails_naming_its_path(h200x2, check, forced):
    result = evaluate(check, _run(check, forced), "local", PARAMS[check])
    assert result.verdict is RunVerdict.FAIL, result.reason
    for words in FORCED[forced]:
        assert words in result.reason, result.reason


@pytest.mark.parametrize("check", sorted(PARAMS))
def test_the_healthy_run_is_recorded_with_its_path(h200x2, check):
    result = evaluate(check, _run(check, "p2p"), "local", PARAMS[check])
    assert result.verdict is RunVerdict.RECORDED and result.ok
    assert result.path.startswith("within a host P2P/CUMEM (48 channels)")


@pytest.mark.parametrize("shape, verdict", [("local", RunVerdict.RECORDED),
                                            ("BM.GPU.H200.8", RunVerdict.UNJUDGED)])
def test_one_rank_on_one_gpu_records_algbw_and_never_fails(shape, verdict):
    """``CUDA_VISIBLE_DEVICES=0 mpirun -n 1 all_reduce_perf -b 10G -e 10G``: busbw 0.00
    by definition, algbw 2119.4 GB/s (out of place; in place one rank moves nothing)."""
    result = evaluate("nccl_all_reduce_perf", _run("nccl_all_reduce_perf", "1rank"), shape,
                      {"nodes": 1, "gpus_per_node": 1, "begin": "10G", "end": "10G"})
    assert result.verdict is verdict, result.reason
    assert [(r.metric, r.key, r.measured) for r in result.rows] == [
        ("bandwidth", "out_of_place", 2119400.0)]


# ---------------------------------------------------------------- through ReFrame itself

def _stand_in_tree(tmp: Path, check: str, capture: Path) -> Path:
    """A real Lmod tree whose benchmark module puts a stand-in first on PATH: rank 0
    prints the captured job output; real mpirun starts it, real Lmod loads it."""
    bench = tmp / "bench"
    bench.mkdir()
    exe = "all_reduce_perf" if check == "nccl_all_reduce_perf" else "osu_xccl_allreduce"
    (bench / exe).write_text(
        f"#!/bin/sh\n[ \"${{OMPI_COMM_WORLD_RANK:-0}}\" = 0 ] || exit 0\ncat {capture}\n")
    (bench / exe).chmod(0o755)
    core = tmp / "modules" / "local" / "linux-test-x86_64" / "Core"
    for name in ("cuda", "nccl", "openmpi", "nccl-tests", "omb"):
        (core / name).mkdir(parents=True)
        (core / name / "1.0.lua").write_text(f'prepend_path("PATH", "{bench}")\n')
    return tmp / "modules"


@pytest.mark.parametrize("check, name", [
    ("nccl_all_reduce_perf", "nccl_all_reduce_perf %nodes=1 %size_range=0"),
    ("osu_xccl_allreduce", "osu_xccl_allreduce %nodes=1")])
def test_the_live_check_fails_the_shm_run_and_its_report_holds_each_path(
        h200x2, tmp_path, lmod_init, mpirun, check, name):
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not on PATH")
    cases = {}
    for forced in ("p2p", "shm"):
        tmp = tmp_path / forced
        tmp.mkdir()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("RFM_") and k not in ("OCIBENCH_SHAPE", "OCIBENCH_HOSTFILE")}
        env.update(OCIBENCH_MODULES_ROOT=str(_stand_in_tree(tmp, check, RUNS / f"{check}.{forced}.txt")),
                   OCIBENCH_PERFLOG_DIR=str(tmp / "perflogs"),
                   OCIBENCH_REPORT_DIR=str(tmp / "reports"))
        report = tmp / "report.json"
        done = subprocess.run(
            [exe, "-C", str(paths.REPO_ROOT / "site" / "reframe_config.py"),
             "-c", str(paths.CHECKS_DIR), "--nocolor", "--prefix", str(tmp), "-r",
             "--system", "local", "-n", check, "--report-file", str(report)],
            capture_output=True, text=True, cwd=paths.REPO_ROOT, timeout=900, env=env)
        assert report.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
        found = {c["display_name"]: c for run in json.loads(report.read_text())["runs"]
                 for c in run["testcases"]}
        cases[forced] = found[name]
    healthy, shm = cases["p2p"], cases["shm"]
    assert healthy["result"] == "pass", healthy["fail_reason"]
    assert healthy["nccl_path"] == "within a host P2P/CUMEM (48 channels); network Socket"
    assert shm["result"] == "fail"
    assert shm["nccl_path"] == "within a host SHM/direct/direct (8 channels); network Socket"
    assert shm["fail_reason"].startswith("sanity error: NCCL connected GPUs of one host over "
                                         "SHM/direct/direct (host memory)"), shm["fail_reason"]
