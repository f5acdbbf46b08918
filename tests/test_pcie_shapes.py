"""OCI's PCIe GPU shapes (issue 33): BM.GPU.L40S.4 and the A10 shapes, no NVLink.

Each shape file is held to what it cites, transcribed under tests/data/published/
(OCI's node doctor for the L40S hardware, oci-hpc v3.1.0 for the A10 shapes' cores and
GPU counts).  NCCL's path on them: P2P over PCIe and SHM are healthy inside a host, a
socket is not (published PCIe logs and the H200 captures, tests/data/nccl_path).  A
one-GPU VM runs what one GPU can run and skips the rest with the reason.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ocibench import accelerators, paths, shapes
from ocibench.figures import nccl_path
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict
from ocibench.spack import scopes as spack_config

PUBLISHED = Path(__file__).parent / "data" / "published"
PATHS = Path(__file__).parent / "data" / "nccl_path"
#: shape -> (GPU count, CUDA arch as Spack spells it)
PCIE = {"BM.GPU.L40S.4": (4, "89"), "BM.GPU.A10.4": (4, "86"),
        "VM.GPU.A10.2": (2, "86"), "VM.GPU.A10.1": (1, "86")}
A10 = [name for name in PCIE if ".A10." in name]
#: The H200 captures' command line: two ranks of one host, 8 B .. 1 GiB (socket: 256 MiB).
H200_RUN = {"nodes": 1, "gpus_per_node": 2, "begin": "8", "end": "1G", "factor": 2}


def _h200(name: str) -> str:
    return (PATHS / f"all_reduce_perf.{name}.h200x2.txt").read_text()


# --------------------------------------------------------------------------- shape files

@pytest.mark.parametrize("name", PCIE)
def test_shape_file_validates(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ocibench.cli", "shape", "--check",
         str(shapes.shape_path(name))],
        capture_output=True, text=True, cwd=paths.REPO_ROOT,
        env={"PYTHONPATH": str(paths.REPO_ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"{name}.yaml: ok"


@pytest.mark.parametrize("name", PCIE)
def test_gpus_are_pcie_without_nvlink(name: str) -> None:
    """NVIDIA's datasheets: L40S and A10 are PCIe Gen4 x16 cards without NVLink."""
    shape = shapes.load(name)
    count, arch = PCIE[name]
    assert accelerators.of(shape.gpus) is accelerators.VENDORS["nvidia"]
    assert shape.gpus["arch"] == arch and len(shape.gpus["devices"]) == count
    assert "nvlink_gbs" not in shape.data["links"]
    assert shape.data["links"]["pcie_gbs"] == 32          # Gen4 x16, per direction
    caps = shape.data["capabilities"]
    assert caps["nvlink"] == 0 and caps["pcie"] == {"gen": 4, "width": 16}
    assert "fabric_manager" not in caps                   # no NVSwitch to configure
    assert shape.figures == []                            # no OCI floor, no published run


def test_l40s_is_the_node_doctors_hardware() -> None:
    """oci-dr-hpc-v2's BM.GPU.L40S.4: 4 'NVIDIA L40S' GPUs and 2 cluster-network RDMA
    NICs, mlx5_0 and mlx5_2 (OCI's 800 Gbps RDMA: 2 x 400 Gbps)."""
    doctor = json.loads((PUBLISHED / "oci-dr-hpc-v2-BM.GPU.L40S.4.json").read_text())
    shape = shapes.load("BM.GPU.L40S.4")
    assert {gpu["model"] for gpu in doctor["gpu"]} == {shape.gpus["model"]}
    assert len(doctor["gpu"]) == len(shape.gpus["devices"])
    network = shape.data["network"]
    assert shape.hcas == [nic["device_name"] for nic in doctor["rdma-nics"]]
    assert [(n["pci"], n["gpu"]) for n in network["rdma_nics"]] == [
        (nic["pci"], int(nic["gpu_id"])) for nic in doctor["rdma-nics"]]
    assert network["ports"] == len(doctor["rdma-nics"]) and network["port_gbps"] == 400
    assert network["rdma"] == "RoCEv2"
    assert shape.data["links"]["rdma_node_gbs"] == 800 / 8
    # the VCN NICs are not on the cluster network
    assert not {nic["device_name"] for nic in doctor["vcn-nics"]} & set(shape.hcas)


@pytest.mark.parametrize("name", A10)
def test_a10_shapes_are_oci_hpcs_and_have_no_cluster_network(name: str) -> None:
    """oci-hpc v3.1.0 get_node_configuration: sockets, cores per socket, Gres gpu:A10:N;
    OCI's shape page lists no RDMA for the A10 shapes."""
    text = (PUBLISHED / "oci-hpc-v3.1.0-pcie-shapes.txt").read_text()
    block = text.split(f'"{name}": {{', 1)[1].split("--", 1)[0]
    sockets = int(re.search(r'"SocketsPerBoard": (\d+)', block).group(1))
    per_socket = int(re.search(r'"CoresPerSocket": (\d+)', block).group(1))
    gpus = int(re.search(r'"Gres": "gpu:A10:(\d+)"', block).group(1))
    shape = shapes.load(name)
    assert (shape.cpu["sockets"], shape.cpu["cores"]) == (sockets, sockets * per_socket)
    assert len(shape.gpus["devices"]) == gpus == PCIE[name][0]
    assert "network" not in shape.data
    assert set(shape.data["links"]) == {"pcie_gbs"}


@pytest.mark.parametrize("name", PCIE)
def test_spack_scope_derives_for_the_shapes_gpu(name: str) -> None:
    shape = shapes.load(name)
    scope = spack_config.derive(shape, None, {})
    pkgs = scope["packages"]
    target = shape.cpu["spack_target"]
    assert pkgs["all"]["require"] == [f"target={target}"]
    assert f"cuda_arch={PCIE[name][1]}" in pkgs["nccl-tests"]["require"][0]
    assert pkgs["cuda"]["externals"][0]["spec"] == shape.data["software"]["externals"]["cuda"]["spec"]
    specs = " ".join(scope["definitions"][0][spack_config.SPECS_DEFINITION])
    # perftest (ib_write_bw/lat) only where there is an RDMA network
    assert ("perftest" in specs) is ("network" in shape.data)


# --------------------------------------------------------------------------- NCCL's path

@pytest.mark.parametrize("name", PCIE)
def test_published_pcie_p2p_passes(name: str) -> None:
    """4 x RTX 4090 (the L40S's Ada die), PCIe only: NCCL's P2P/direct pointer between
    GPUs of one host is the healthy path of a shape without NVLink."""
    path = nccl_path.parse((PATHS / "all_reduce_perf.p2p_direct.rtx4090x4.txt").read_text())
    assert path.transports(local=True) == {"P2P/direct pointer": 6}
    assert nccl_path.fault(path, shapes.load(name).data, {"nodes": 1}) is None


@pytest.mark.parametrize("name", PCIE)
def test_shm_passes_on_a_shape_without_nvlink(name: str) -> None:
    """The same SHM run fails on BM.GPU.H200.8 (NVLink expected) and is recorded on the
    PCIe shapes: host memory is one of their healthy paths."""
    text = _h200("shm")
    assert evaluate("nccl_all_reduce_perf", text, "BM.GPU.H200.8",
                    H200_RUN).verdict is RunVerdict.FAIL
    result = evaluate("nccl_all_reduce_perf", text, name, H200_RUN)
    assert result.verdict is RunVerdict.RECORDED, result.reason
    assert "SHM/direct/direct" in result.path


@pytest.mark.parametrize("name", PCIE)
def test_a_socket_inside_a_host_still_fails(name: str) -> None:
    result = evaluate("nccl_all_reduce_perf", _h200("socket"), name,
                      {**H200_RUN, "end": "256M"})
    assert result.verdict is RunVerdict.FAIL
    assert "over NET/Socket" in result.reason
    assert "NCCL_SHM_DISABLE set by environment to 1" in result.reason


def test_a_shape_declaring_no_nvlink_gets_no_nvlink_rule() -> None:
    """capabilities.nvlink: 0 wins over a stated links.nvlink_gbs (a site file copied
    from an NVLink shape, or an NVLink board whose links OCI leaves off): the shape
    says its GPUs are not NVLink-connected, and SHM is then not a fallback from NVLink."""
    path = nccl_path.parse(_h200("shm"))
    data = copy.deepcopy(shapes.load("BM.GPU.H200.8").data)
    assert nccl_path.fault(path, data, H200_RUN) is not None
    data["capabilities"]["nvlink"] = 0
    assert nccl_path.fault(path, data, H200_RUN) is None
    del data["capabilities"]["nvlink"]          # not declared: links.nvlink_gbs decides
    assert nccl_path.fault(path, data, H200_RUN) is not None


# --------------------------------------------------------------------------- one GPU

def _dry_run(system: str, tmp: Path) -> dict[str, str | None]:
    """ReFrame's dry run of every check on ``system``: display name -> skip reason,
    None for a case that would run."""
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not on PATH (pip install -e '.[test]')")
    env = {"PATH": "/usr/bin:/bin:" + str(Path(exe).parent),
           "PYTHONPATH": str(paths.REPO_ROOT / "src"), "HOME": str(tmp),
           "OCIBENCH_PERFLOG_DIR": str(tmp / "perflogs"),
           "OCIBENCH_REPORT_DIR": str(tmp / "reports")}
    report = tmp / "report.json"
    done = subprocess.run(
        [exe, "-C", str(paths.REPO_ROOT / "site" / "reframe_config.py"),
         "-c", str(paths.CHECKS_DIR), "--nocolor", "--prefix", str(tmp), "--dry-run",
         "--system", system, "--report-file", str(report)],
        capture_output=True, text=True, cwd=paths.REPO_ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    cases = [c for run in json.loads(report.read_text())["runs"] for c in run["testcases"]]
    return {c["display_name"]: ((c.get("skip_reason") or "") if c["result"] == "skip" else None)
            for c in cases}


GPU_COLLECTIVES = ("nccl_all_reduce_perf", "osu_xccl_allreduce")


def test_one_gpu_vm_runs_what_one_gpu_can_and_no_collective(tmp_path: Path) -> None:
    cases = _dry_run("VM_GPU_A10_1", tmp_path)
    skipped = {name: why for name, why in cases.items() if why is not None}
    # every GPU collective is skipped, each with its reason
    collectives = [name for name in cases if name.startswith(GPU_COLLECTIVES)]
    assert collectives and set(collectives) <= set(skipped)
    for name in collectives:
        if "%nodes=1" in name:
            assert "needs 2 GPU(s) per node; VM.GPU.A10.1 has 1" in skipped[name], name
        else:
            assert "VM.GPU.A10.1 has no cluster network" in skipped[name], name
    assert "needs 2 GPU(s) per node" in skipped["osu_bw %buffers=D-D %nodes=1"]
    # host <-> device needs one GPU: it runs, on the VM's one NUMA node
    for check in ("osu_latency_host_device", "osu_bw_host_device"):
        for buffers in ("H-D", "D-H"):
            assert cases[f"{check} %buffers={buffers} %placement=same-numa"] is None
            assert "placement impossible on VM.GPU.A10.1" in skipped[
                f"{check} %buffers={buffers} %placement=other-socket"]
    for name in ("nvbandwidth", "babelstream", "osu_bw %buffers=D-D %nodes=2"):
        assert cases[name] is None, name
    assert all("no RDMA devices" in skipped[n] for n in cases if n.startswith("ib_write_"))


def test_l40s_plans_its_collectives_over_its_cluster_network(tmp_path: Path) -> None:
    cases = _dry_run("BM_GPU_L40S_4", tmp_path)
    for name in ("nccl_all_reduce_perf %nodes=1 %size_range=0",
                 "nccl_all_reduce_perf %nodes=2 %size_range=0",
                 "osu_xccl_allreduce %nodes=1", "osu_xccl_allreduce %nodes=2"):
        assert cases[name] is None, (name, cases[name])
