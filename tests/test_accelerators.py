"""The vendor table (ocibench.accelerators) and what derives from a row.

An AMD shape here is BM.GPU4.8's file with its GPUs, toolkit and collective tests
swapped for AMD's: it stands for the shape files the AMD issue adds, so that what the
table derives for a second vendor is checked in this tree.  The Spack scope is derived
by the real ocibench.spack.scopes (no Spack run: tests/test_spack_env.py concretizes).
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

from ocibench import accelerators, shapes
from ocibench.figures import judge, ucx_proto
from ocibench.metrics import Action
from ocibench.paths import REPO_ROOT
from ocibench.reframe import site
from ocibench.results.load import _provenance as report_provenance
from ocibench.shapes import probe, rules
from ocibench.spack import scopes
from ocibench.sweep import actions

ROCM = {"hip": {"spec": "hip@6.4.3", "prefix": "/opt/rocm-6.4.3"},
        "rccl": {"spec": "rccl@6.4.3", "prefix": "/opt/rocm-6.4.3"}}


def amd_shape(arch: str = "gfx942") -> shapes.Shape:
    """BM.GPU4.8 made an AMD shape: vendor, arch, ROCm externals, rccl-tests, and no
    NVIDIA-only capability (GPUDirect through dma-buf)."""
    base = shapes.load("BM.GPU4.8")
    data = copy.deepcopy(base.data)
    data["gpus"].update(vendor="amd", arch=arch, model="AMD Instinct MI300X")
    externals = data["software"]["externals"]
    del externals["cuda"], externals["nccl"]
    externals.update(ROCM)
    stack = data["software"]["stack"]
    stack["rccl-tests"] = stack.pop("nccl-tests")
    caps = data["capabilities"]
    for name in ("gdrdrv", "nvidia_peermem", "nvlink", "fabric_manager"):
        caps.pop(name, None)
    caps["dmabuf"] = True
    data["figures"] = []
    return shapes.Shape(name="BM.GPU.AMD-test.8", data=data, path=base.path)


#: Fields a vendor may leave None: what its stack does not have (a driver stub, a
#: compiler wrapper to resolve) or what ocibench does not measure on it yet (OCI's
#: node doctor's MIG, SRAM and CDFP checks: its test limits enable them on NVIDIA shapes only).
OPTIONAL = {"probe_parse", "toolkit_compiler", "driver_stub", "host_copy",
            "fabric_manager_service", "mig_query", "sram_query", "module_query",
            "clock_query",
            # AMD's HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES: not read yet (the local
            # shape then describes every GPU amd-smi lists)
            "visible_devices"}


def test_every_row_fills_every_field() -> None:
    for row in accelerators.VENDORS.values():
        for name, value in vars(row).items():
            if name not in OPTIONAL:
                assert value not in ("", (), None), f"{row.vendor}.{name} is empty"
                # a record of fields (the ticket's evidence) left at its empty default
                if dataclasses.is_dataclass(value):
                    try:
                        empty = type(value)()
                    except TypeError:      # no defaults: it cannot be left empty
                        continue
                    assert value != empty, f"{row.vendor}.{name} is left empty"


@pytest.mark.parametrize("vendor, arch, variant, device", [
    ("nvidia", "80", "cuda_arch=80", "sm_80"),
    ("amd", "gfx942", "amdgpu_target=gfx942", "gfx942"),
    ("amd", "gfx950", "amdgpu_target=gfx950", "gfx950"),
])
def test_a_row_spells_the_arch_for_spack_and_reframe(vendor, arch, variant, device) -> None:
    row = accelerators.VENDORS[vendor]
    assert row.arch_problem(arch) is None
    assert row.spack_arch(arch) == variant
    assert row.device_arch(arch) == device


def test_the_amd_shape_is_valid() -> None:
    assert rules.problem(amd_shape().data) is None


def test_reframe_partitions_of_each_vendor() -> None:
    nvidia = site._partitions(shapes.load("BM.GPU4.8"), False, None)[0]
    amd = site._partitions(amd_shape(), False, None)[0]
    assert nvidia["devices"] == [{"type": "gpu", "arch": "sm_80", "num_devices": 8}]
    assert amd["devices"] == [{"type": "gpu", "arch": "gfx942", "num_devices": 8}]
    assert {"gpu", "nvgpu", "nccl"} <= set(nvidia["features"])
    assert {"gpu", "amdgpu", "rccl"} <= set(amd["features"])
    assert not {"nvgpu", "nccl"} & set(amd["features"])


def _scope(shape: shapes.Shape) -> tuple[dict, list[str]]:
    scope = scopes.derive(shape)
    pkgs = scope["packages"]
    return ({name: pkgs[name]["require"][0].split() for name in pkgs
             if isinstance((pkgs[name].get("require") or [None])[0], str)},
            scope["definitions"][0][scopes.SPECS_DEFINITION])


def test_an_amd_shape_builds_the_rocm_stack() -> None:
    require, specs = _scope(amd_shape())
    assert "+rocm" in require["openmpi"] and "+cuda" not in require["openmpi"]
    assert {"+rocm", "+rccl", "amdgpu_target=gfx942"} <= set(require["osu-micro-benchmarks"])
    assert "+rocm" in require["ucx"]
    # spack-packages' ucx: conflicts("+rocm", when="+gdrcopy"), and no gdrcopy root
    assert "+gdrcopy" not in require["ucx"] and "gdrcopy" not in require
    assert {"+rocm", "+rccl"} <= set(require["ucc"])
    # rccl-tests has no amdgpu_target variant (not a ROCmPackage)
    assert "+mpi" in require["rccl-tests"]
    assert not any(r.startswith("amdgpu_target") for r in require["rccl-tests"])
    roots = {s.split()[0] for s in specs}
    assert {"hip", "rccl", "transferbench", "rccl-tests"} <= roots
    assert not {"cuda", "nccl", "nvbandwidth", "nccl-tests", "gdrcopy"} & roots


def test_the_other_vendors_collective_tests_are_left_out() -> None:
    shape = amd_shape()
    shape.data["software"]["stack"]["nccl-tests"] = "2.16.3"
    scope = scopes.derive(shape)
    assert "nccl-tests" not in scope["packages"]
    assert any(n.startswith("nccl-tests: left out, nccl-tests runs on nvidia GPUs")
               for n in scope["_notes"]), scope["_notes"]


def test_an_amd_shape_without_rocm_externals_names_the_missing_one() -> None:
    shape = amd_shape()
    del shape.data["software"]["externals"]["hip"]
    with pytest.raises(scopes.SpackConfigError,
                       match="vendor amd needs software.externals.hip"):
        scopes.derive(shape)


def test_the_image_packages_are_never_built() -> None:
    assert {"cuda", "nccl", "hip", "rccl", "hsa-rocr-dev"} <= scopes.NOT_BUILDABLE


def test_a_provenance_from_before_the_table_still_names_its_toolkit() -> None:
    """provenance.json named the toolkit by its package ("cuda": "12.9.86") before the
    vendor table; the report reads that as the toolkit field."""
    assert report_provenance({"cuda": "12.9.86"})["toolkit"] == "cuda 12.9.86"
    assert report_provenance({"toolkit": "hip 6.4.43484"})["toolkit"] == "hip 6.4.43484"
    assert report_provenance({})["toolkit"] is None


def _fake_tool(bin_dir, name: str, output: str) -> None:
    tool = bin_dir / name
    # echo, a shell builtin: PATH holds only the fake tools
    tool.write_text("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in output.splitlines()))
    tool.chmod(0o755)


NUMA = [{"id": 0, "socket": 0, "cores": [0, 7]}]


def test_the_local_probe_reads_the_vendors_tool(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    # nvidia-smi --query-gpu=index,name,compute_cap,pci.bus_id --format=csv,noheader
    _fake_tool(tmp_path, "nvidia-smi", "0, NVIDIA H100 80GB HBM3, 9.0, 00000000:18:00.0\n"
                                       "1, NVIDIA H100 80GB HBM3, 9.0, 00000000:2A:00.0")
    found = probe.gpus(NUMA)
    assert found == {"vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "arch": "90",
                     "devices": [{"index": 0, "numa_node": 0}, {"index": 1, "numa_node": 0}]}
    # what the probe describes is a valid gpus section (vendor and arch checked)
    data = copy.deepcopy(shapes.load("BM.GPU4.8").data)
    data["gpus"] = {**found, "devices": [{"index": i, "numa_node": 3} for i in range(2)]}
    # its NICs serve GPUs 0 to 7 (network.rdma_nics): only the two GPUs probed here
    for nic in data["network"]["rdma_nics"]:
        nic["gpu"] %= 2
    assert rules.problem(data) is None


def test_a_probe_listing_no_gpu_is_unknown_not_absent(tmp_path, monkeypatch) -> None:
    """amd-smi there but listing nothing: the GPUs are unknown (tests/test_amd_probe.py
    reads real amd-smi outputs)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    _fake_tool(tmp_path, "amd-smi", "[]")
    with pytest.raises(probe.ProbeError, match="listed no GPU"):
        probe.gpus(NUMA)


def test_no_vendor_tool_means_no_gpus(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe.gpus(NUMA) is None


@pytest.mark.parametrize("reason", [
    "ocibench: this Open MPI is not CUDA-aware: osu_latency -d cuda D D needs it",
    "ocibench: this Open MPI is not ROCM-aware: osu_latency -d rocm D D needs it",
])
def test_an_mpi_without_the_vendors_gpu_support_is_a_software_fix(reason) -> None:
    assert actions.for_failure(reason) is Action.FIX_SOFTWARE


#: A real UCX 1.19 capture of osu_latency D-D on 2 x H200 (tests/data/ucx_proto/index.yaml:
#: a 1-byte GPU message staged through host memory, eager copy-in copy-out over sysv).
D2D_CAPTURE = REPO_ROOT / "tests" / "data" / "ucx_proto" / "osu_latency.d-d.h200x2.ucx-1.19.txt"


@pytest.mark.parametrize("vendor", ["cuda", "rocm"])
def test_a_device_buffer_is_any_vendors_ucx_memory(vendor) -> None:
    """The judge reads UCX's tables of a run's device buffers whatever their vendor:
    the H200 capture as it is, and with UCX's ROCm names (memory type rocm, src/uct/rocm)
    in place of CUDA's, tables of the same format."""
    text = D2D_CAPTURE.read_text().replace("cuda", vendor)
    facts = judge.Facts(tables=tuple(ucx_proto.parse(text))).for_run(
        "osu_latency", {"buffers": "D-D", "nodes": 1})
    routes = ucx_proto.taken(facts.tables, 1, facts.memories, facts.nodes)
    assert [(t.memory, t.route.protocol, t.route.lanes) for t in routes] == [
        (vendor, "eager copy-in copy-out", ("sysv/memory",))]


TWO_H200 = ("0, NVIDIA H200, 9.0, 00000000:00:05.0\n"
            "1, NVIDIA H200, 9.0, 00000000:00:06.0")


@pytest.mark.parametrize("value, listed", [
    (None, [0, 1]), ("0", [0]), ("1", [1]), ("1,0", [1, 0]), ("", []),
    ("0,7,1", [0]), ("0,0", [0]), ("-1", []), (" 1 ", [1])])
def test_the_local_probe_sees_the_gpus_cuda_leaves_visible(tmp_path, monkeypatch, value,
                                                           listed) -> None:
    """CUDA_VISIBLE_DEVICES=0 on 2 x H200 (how the GPU machine's one-GPU round runs,
    docs/device-runs.md) is a node of one GPU to every benchmark started there:
    nvidia-smi still lists both, and the checks ran two ranks on one GPU.  CUDA
    renumbers the visible GPUs from 0; an index naming no GPU ends the list."""
    monkeypatch.setenv("PATH", str(tmp_path))
    _fake_tool(tmp_path, "nvidia-smi", TWO_H200)
    if value is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    bus = {0: "00000000:00:05.0", 1: "00000000:00:06.0"}
    seen = {"00000000:00:05.0": 0, "00000000:00:06.0": 0}
    monkeypatch.setattr(probe, "_pci_numa_node", lambda b: seen[b])
    found = probe.gpus(NUMA)
    if not listed:
        assert found is None
        return
    assert [d["index"] for d in found["devices"]] == list(range(len(listed)))
    assert probe.visible([probe.accelerators.ProbedGpu(i, "H200", "90", bus[i])
                          for i in (0, 1)], "nvidia") == [
        probe.accelerators.ProbedGpu(i, "H200", "90", bus[i]) for i in listed]


def test_a_gpu_named_by_uuid_is_unknown_not_guessed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    _fake_tool(tmp_path, "nvidia-smi", TWO_H200)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5fb0e7aa-0000-0000-0000-000000000000")
    with pytest.raises(probe.ProbeError, match="CUDA_VISIBLE_DEVICES=.*not a GPU index"):
        probe.gpus(NUMA)
