"""A node with one GPU (OCI's single-GPU shapes, a workstation): every check that needs
one GPU runs on it, and only those that need two skip, saying so (issue 31 item 3).

ReFrame itself lists and dry-runs the checks on `local`, whose partition is probed from
this machine: a fake nvidia-smi on PATH (the practice of tests/health_fakes.py) lists
one H100, as ``nvidia-smi --query-gpu=index,name,compute_cap,pci.bus_id`` prints it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ocibench import paths
from ocibench.reframe import site

CONFIG = paths.REPO_ROOT / "site" / "reframe_config.py"

#: nvidia-smi of a node with one GPU: the probe's query and -L.
FAKE_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=*) echo "0, NVIDIA H100 80GB HBM3, 9.0, 00000000:18:00.0" ;;
  *-L*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5fb0e7aa-0000-0000-0000-000000000000)" ;;
  *) echo "nvidia-smi: $*: not in this fake" >&2; exit 2 ;;
esac
"""

_SKIP = re.compile(r"^\[\s*SKIP\s*\] \(\s*\d+/\d+\) (.+?) /[0-9a-f]{8} @\S+ \[(.*)\]$")
#: The checks that need two GPUs of one node: a copy between GPU 0 and GPU 1, a
#: collective of one node's GPUs, TransferBench's GPU pairs.
TWO_GPUS = ("osu_latency %buffers=D-D %nodes=1", "osu_bw %buffers=D-D %nodes=1",
            "osu_bibw %buffers=D-D %nodes=1", "osu_xccl_allreduce %nodes=1",
            "nccl_all_reduce_perf %nodes=1 %size_range=0")


@pytest.fixture(scope="module")
def one_gpu(tmp_path_factory) -> dict:
    """--dry-run of every check on `local` with one GPU: skips, cases, job scripts."""
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not on PATH")
    tmp = tmp_path_factory.mktemp("one-gpu")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith("RFM_") and k not in ("OCIBENCH_SHAPE", "OCIBENCH_HOSTFILE")}
    # A dry run loads no module, but a check whose module is absent from the tree is
    # skipped as not installed (site.absent_modules): the checks' command lines are
    # judged here, whatever this machine's `make install` built, so the tree names
    # every module a check loads (empty modulefiles no job ever loads).
    tree = tmp / "modules"
    wanted = {e.module for e in site.ENVIRONMENTS} | {e.mpi for e in site.ENVIRONMENTS
                                                      if e.mpi} | {"cuda", "nccl"}
    for name in wanted:
        (tree / "local" / "Core" / name).mkdir(parents=True)
        (tree / "local" / "Core" / name / "0.lua").write_text("-- a dry run's stand-in\n")
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '')}", OCIBENCH_MODULES_ROOT=str(tree),
               OCIBENCH_PERFLOG_DIR=str(tmp / "perflogs"),
               OCIBENCH_REPORT_DIR=str(tmp / "reports"))
    report = tmp / "report.json"
    done = subprocess.run(
        [exe, "-C", str(CONFIG), "-c", str(paths.CHECKS_DIR), "--nocolor", "--prefix",
         str(tmp), "--dry-run", "--system", "local", "--report-file", str(report)],
        capture_output=True, text=True, cwd=paths.REPO_ROOT, timeout=600, env=env)
    assert report.is_file(), done.stdout[-3000:] + done.stderr
    cases = [case for run in json.loads(report.read_text())["runs"]
             for case in run["testcases"]]
    skips = {m.group(1): m.group(2) for m in map(_SKIP.match, done.stdout.splitlines()) if m}
    return {"done": done, "skips": skips, "by_name": {c["display_name"]: c for c in cases}}


def _job(case: dict) -> str:
    return (Path(case["stagedir"]) / "rfm_job.sh").read_text()


def test_host_device_checks_run_on_one_gpu(one_gpu):
    host_device = [name for name in one_gpu["by_name"] if "_host_device" in name]
    assert len(host_device) == 12
    for name in host_device:
        # a placement the machine's NUMA layout cannot offer may still skip, for that
        assert "needs 2 GPU" not in one_gpu["skips"].get(name, ""), one_gpu["skips"][name]
    ran = [name for name in host_device if name not in one_gpu["skips"]]
    assert ran, one_gpu["skips"]
    for name in ran:
        job = _job(one_gpu["by_name"][name])
        assert re.search(r"-d cuda (H D|D H)$", job.splitlines()[-1]), job


@pytest.mark.parametrize("name", TWO_GPUS)
def test_only_what_needs_two_gpus_skips_and_says_so(one_gpu, name):
    assert "needs 2 GPU(s) per node; local has 1" in one_gpu["skips"][name]


def test_the_ceilings_and_memory_bandwidth_of_the_one_gpu(one_gpu):
    nvb = _job(one_gpu["by_name"]["nvbandwidth"])
    assert "device_to_device" not in nvb     # nvbandwidth waives peer copies on one GPU
    assert "--h2d-gpu 0 --d2h-gpu 0" in nvb  # the pageable copy on the GPU there is
    babel = one_gpu["by_name"]["babelstream"]
    assert babel["result"] == "pass" and "--device" in _job(babel)


@pytest.mark.parametrize("count, gpus", [(1, (0, 0)), (2, (1, 0)), (8, (1, 0))])
def test_the_pageable_copy_takes_the_gpus_omb_takes(count, gpus):
    # scripts/device/pipeline.sh runs it without --h2d-gpu: on one GPU it asked for GPU 1
    from ocibench.node import pageable_copy
    assert pageable_copy.default_gpus(count) == gpus


@pytest.mark.parametrize("gpus, pair, two", [(1, "H D", False), (2, "D D", True),
                                             (8, "D D", True)])
def test_the_device_pipeline_picks_gpus_the_node_has(tmp_path, gpus, pair, two):
    """scripts/device/pipeline.sh on a node of ``gpus`` GPUs (a fake nvidia-smi -L):
    its PML, binary and CMA comparisons run D D only where there are two GPUs (one GPU
    measured twice is no D-D), and the D-D and one-node collective runs skip, saying
    why, where there are not."""
    (tmp_path / "nvidia-smi").write_text(
        "#!/bin/sh\n" + "".join(f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})'\n"
                                for i in range(gpus)))
    (tmp_path / "nvidia-smi").chmod(0o755)
    lib = paths.REPO_ROOT / "scripts" / "device" / "lib.sh"
    done = subprocess.run(
        ["bash", "-c", f'source "{lib}"; g=$(node_gpus); echo "$g|$(pair_buffers "$g")";'
                       ' two_gpus "$g" "osu_bw D-D" && echo two'],
        capture_output=True, text=True, env={**__import__("os").environ,
                                             "PATH": f"{tmp_path}:/usr/bin:/bin"})
    lines = done.stdout.splitlines()
    assert lines[0] == f"{gpus}|{pair}", done.stdout + done.stderr
    if two:
        assert lines[1] == "two"
    else:
        assert lines[1] == "skipped on this node of 1 GPU(s): osu_bw D-D needs two"


@pytest.mark.parametrize("skip, step, left_out", [
    ("hand transports", "hand", True), ("hand transports", "transports", True),
    ("hand", "transports", False), ("", "hand", False), ("handy", "hand", False)])
def test_the_device_pipeline_leaves_out_only_the_steps_named(skip, step, left_out):
    """OCIBENCH_DEVICE_SKIP (docs/device-runs.md): the steps a short device session
    leaves out, by whole word."""
    lib = paths.REPO_ROOT / "scripts" / "device" / "lib.sh"
    done = subprocess.run(["bash", "-c", f'source "{lib}"; skipped {step}'],
                          env={**__import__("os").environ, "OCIBENCH_DEVICE_SKIP": skip})
    assert (done.returncode == 0) is left_out
