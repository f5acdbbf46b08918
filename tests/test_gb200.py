"""OCI's GB200 NVL72 shape (issue 33): BM.GPU.GB200.4, 4 GPUs per host and 18 hosts per
NVLink domain, Grace (aarch64) hosts.

The shape file is held to what it cites, transcribed under tests/data/published/ (OCI's
node doctor for the GPUs, NICs and RDMA settings; oci-hpc v3.1.0 for the cores, memory,
NCCL_IB_HCA and IMEX; oci-hpc-oke for NCCL's settings).  Its Spack scope concretizes for
neoverse_v2 in tests/test_spack_env.py (every shape is concretized there).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ocibench import accelerators, paths, shapes
from ocibench.shapes import rules
from ocibench.spack import scopes as spack_config

PUBLISHED = Path(__file__).parent / "data" / "published"
GB200 = "BM.GPU.GB200.4"


def _doctor() -> dict:
    return json.loads((PUBLISHED / "oci-dr-hpc-v2-BM.GPU.GB200.4.json").read_text())


def test_shape_file_validates() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ocibench.cli", "shape", "--check",
         str(shapes.shape_path(GB200))],
        capture_output=True, text=True, cwd=paths.REPO_ROOT,
        env={"PYTHONPATH": str(paths.REPO_ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"{GB200}.yaml: ok"


def test_gpus_and_nics_are_the_node_doctors() -> None:
    """oci-dr-hpc-v2's BM.GPU.GB200.4: 4 GPUs, 4 cluster-network ConnectX-7 NICs, each
    serving one GPU, in OCI's NCCL_IB_HCA order; the VCN NICs are not among them."""
    doctor = _doctor()
    shape = shapes.load(GB200)
    assert len(doctor["gpu"]) == len(shape.gpus["devices"]) == 4
    assert [g["id"] for g in doctor["gpu"]] == [d["index"] for d in shape.gpus["devices"]]
    network = shape.data["network"]
    assert shape.hcas == [nic["device_name"] for nic in doctor["rdma-nics"]]
    assert [(n["pci"], n["gpu"]) for n in network["rdma_nics"]] == [
        (nic["pci"], int(nic["gpu_id"])) for nic in doctor["rdma-nics"]]
    assert not {nic["device_name"] for nic in doctor["vcn-nics"]} & set(shape.hcas)
    assert network["collective_env"]["NCCL_IB_HCA"] == ",".join(shape.hcas)
    assert network["ports"] == 4 and network["port_gbps"] == 400
    assert shape.data["links"]["rdma_node_gbs"] == 4 * 400 / 8
    # each GPU and its NIC on the same Grace (PCI domain 00xx: socket 0, 001x: socket 1)
    for nic in network["rdma_nics"]:
        gpu_pci = next(g["pci"] for g in doctor["gpu"] if g["id"] == nic["gpu"])
        assert int(gpu_pci[:4], 16) >> 4 == int(nic["pci"][:4], 16) >> 4
        assert shape.gpus["devices"][nic["gpu"]]["numa_node"] == int(nic["pci"][:4], 16) >> 4


def test_rdma_settings_are_the_node_doctors() -> None:
    settings = json.loads(
        (PUBLISHED / "oci-dr-hpc-v2-BM.GPU.GB200.4-rdma-settings.json").read_text())
    assert settings["shapes"] == [GB200]
    assert "ConnectX-7" in settings["model"]
    assert settings["settings"]["mlxconfig"]["MAX_ACC_OUT_READ"] == "128"


def test_nvl72_domain_and_nvlink5() -> None:
    """18 hosts x 4 GPUs share one NVLink domain; NVLink 5, 18 links per GPU; Grace is
    aarch64 (archspec neoverse_v2), 144 cores without SMT."""
    shape = shapes.load(GB200)
    assert shape.gpus["nvlink_domain"] == {"hosts": 18, "gpus": 72}
    assert shape.gpus["arch"] == "100"
    assert accelerators.of(shape.gpus) is accelerators.VENDORS["nvidia"]
    assert shape.data["links"]["nvlink_gbs"] == 900
    assert shape.data["capabilities"]["nvlink"] == 18
    assert shape.cpu["spack_target"] == "neoverse_v2"
    assert (shape.cpu["cores"], shape.cpu["smt"]) == (144, False)
    env = shape.data["network"]["collective_env"]
    assert env["NCCL_MNNVL_ENABLE"] == "1" and env["NCCL_CUMEM_ENABLE"] == "1"


def test_a_domain_that_does_not_add_up_is_refused() -> None:
    data = json.loads(json.dumps(shapes.load(GB200).data))
    data["gpus"]["nvlink_domain"]["gpus"] = 64
    assert any("18 hosts x 4 GPUs is 72, not gpus 64" in p for p in rules._gpu_problems(data))
    del data["links"]["nvlink_gbs"]
    assert any("an NVLink domain needs links.nvlink_gbs" in p
               for p in rules._gpu_problems(data))


def test_spack_scope_targets_grace() -> None:
    shape = shapes.load(GB200)
    scope = spack_config.derive(shape, None, {})
    pkgs = scope["packages"]
    assert pkgs["all"]["require"] == ["target=neoverse_v2"]
    assert "cuda_arch=100" in pkgs["nccl-tests"]["require"][0]
    assert "target=neoverse_v2" in pkgs["nccl-tests"]["require"][0]
    specs = scope["definitions"][0][spack_config.SPECS_DEFINITION]
    assert all(s.endswith("target=neoverse_v2") for s in specs)
    assert any(s.startswith("perftest") for s in specs)
    # Spack on an x86-64 login node still concretizes for the Grace nodes
    assert scope["concretizer"]["targets"]["host_compatible"] is False
