"""OCI's node-doctor checks (ocibench.node.doctor): MIG mode, SRAM ECC counts and the
driver's version, read from the tools' published outputs (tests/data/node_doctor,
SOURCES.md) and from fakes on PATH for the faults (tests/health_fakes.py), in the
healthcheck and in preflight; judged against the shape file's node_doctor section."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from health_fakes import FakeNode, bus_id
from ocibench import accelerators, shapes
from ocibench.health import check, probes, state
from ocibench.health.state import FAIL, PASS, UNKNOWN
from ocibench.node import doctor, preflight
from ocibench.node import rdma as rdma_ports

DATA = Path(__file__).parent / "data" / "node_doctor"
NVIDIA = accelerators.VENDORS["nvidia"]
GPU_ITEMS = ("mig_mode", "sram_errors", "driver_version", "cdfp_cabling", "gpu_clocks")
#: The checks of the node, not its GPUs: judged whatever the GPU tool does.
NODE_ITEMS = ("eth0_presence", "eth_link", "missing_interface")
DOCTOR_ITEMS = GPU_ITEMS + NODE_ITEMS


@pytest.fixture
def h100(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNode:
    """A healthy BM.GPU.H100.8 node (its shape file lists OCI's checks); its nvidia-smi
    first on PATH."""
    fake = FakeNode(tmp_path / "h100", "BM.GPU.H100.8")
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    return fake


def judged(fake: FakeNode) -> dict[str, tuple[str, str]]:
    """name -> (state, evidence) of the doctor's findings in a healthcheck run."""
    ctx = probes.Context(root=fake.root, shape=fake.shape, node="gpu-1",
                         deadline=time.monotonic() + 20, tool_timeout=2.0)
    return {r.name: (r.state, r.evidence) for r in check.run_probes(ctx)
            if r.name in DOCTOR_ITEMS}


# --------------------------------------------------------------------------- the readers


def test_the_published_nvidia_smi_q_gives_each_gpus_aggregate_sram_counts() -> None:
    """NVIDIA/DCGM#232's A10G: Volatile and Aggregate both list SRAM counts; only the
    Aggregate ones count, and "Aggregate Uncorrectable SRAM Sources" is not them."""
    text = (DATA / "nvidia-smi-q.A10G.txt").read_text()
    assert NVIDIA.sram_query.parse(text) == [
        accelerators.SramCounts("00000000:00:1E.0", uncorrectable=0, correctable=0)]
    # the published GPU with errors in the Volatile table and the SRAM sources: the
    # aggregate counts are still read from the Aggregate table alone
    broken = text.replace("            SRAM Uncorrectable SEC-DED    : 0\n"
                          "            DRAM Correctable              : 1",
                          "            SRAM Uncorrectable SEC-DED    : 7\n"
                          "            DRAM Correctable              : 1")
    broken = broken.replace("SRAM L2                       : 0", "SRAM L2                       : 9")
    # the first Parity line is the Volatile table's (errors since the driver loaded)
    broken = broken.replace("SRAM Uncorrectable Parity     : 0",
                            "SRAM Uncorrectable Parity     : 4", 1)
    assert NVIDIA.sram_query.parse(broken)[0].uncorrectable == 7


def test_the_published_mig_query_gives_each_gpus_mode() -> None:
    modes = NVIDIA.mig_query.parse((DATA / "mig-modes.csv").read_text())
    assert [m.current for m in modes] == ["Enabled", "Disabled", "Disabled", "Disabled"]
    assert modes[0].gpu == "GPU-ec845691-fb46-e16d-abfb-b135308cb39f"


@pytest.mark.parametrize("out", ["GPU-1, Enabled\n", "GPU-1, On, On\n",
                                 "No devices were found\n"])
def test_a_mig_answer_not_asked_for_is_a_format_error(out: str) -> None:
    with pytest.raises(accelerators.ProbeFormatError):
        NVIDIA.mig_query.parse(out)


def test_nvidia_smi_q_without_a_gpu_section_is_a_format_error() -> None:
    with pytest.raises(accelerators.ProbeFormatError):
        NVIDIA.sram_query.parse("NVIDIA-SMI has failed because it couldn't communicate "
                                "with the NVIDIA driver.\n")


# --------------------------------------------------------------------------- healthcheck


def test_a_healthy_h100_passes_the_doctors_checks(h100: FakeNode) -> None:
    got = judged(h100)
    assert {n: s for n, (s, _) in got.items()} == dict.fromkeys(DOCTOR_ITEMS, PASS), got
    assert "MIG mode Disabled on 8 GPUs" in got["mig_mode"][1]
    assert "at most 0 aggregate SRAM uncorrectable (the shape's limit 5)" in \
        got["sram_errors"][1]
    assert "driver 550.90.12, on the shape's allowed list" in got["driver_version"][1]
    assert "8 GPUs each in the shape's module" in got["cdfp_cabling"][1]
    assert "applications graphics clock 1980 MHz at the least (the shape's floor 1782); " \
        "now 345 MHz" in got["gpu_clocks"][1]
    assert "eth0 present" in got["eth0_presence"][1]
    assert "eth0 up at 100 Gb/s" in got["eth_link"][1]
    assert "8 PCI devices, 0 reading revision ff" in got["missing_interface"][1]


def test_a_shape_without_the_section_runs_none_of_them(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNode(tmp_path / "a100")          # BM.GPU4.8: OCI's doctor has no entry
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    assert judged(fake) == {}


def test_mig_mode_on_fails_naming_the_gpu_and_oci_fault(h100: FakeNode) -> None:
    # the published answer of a node whose first GPU is in MIG mode
    (h100.bin / "mig.csv").write_text((DATA / "mig-modes.csv").read_text())
    state, evidence = judged(h100)["mig_mode"]
    assert state == FAIL, evidence
    assert "MIG mode Enabled on 1 of 4 GPUs (GPU-ec845691-fb46-e16d-abfb-b135308cb39f)" \
        in evidence and "HPCGPU-0001-0002" in evidence
    assert "(nvidia-smi -mig 0, then a GPU reset; OCI's HPCGPU-0001-0002)" in evidence


def test_mig_mode_pending_is_said_and_a_gpu_without_mig_passes(h100: FakeNode) -> None:
    h100.mig(pending=(3,))
    state, evidence = judged(h100)["mig_mode"]
    assert state == PASS and "GPU-00000003-0000-0000-0000-000000000000: Disabled until " \
        "its next reset, then Enabled" in evidence, evidence
    # "[N/A]": a GPU without MIG (Syllo/nvtop#470)
    (h100.bin / "mig.csv").write_text("GPU-1, [N/A], [N/A]\n")
    assert judged(h100)["mig_mode"][0] == PASS


def test_sram_uncorrectable_over_the_shapes_threshold_fails(h100: FakeNode) -> None:
    h100.ecc(uncorrectable={2: 6})                    # the shape's limit: 5
    state, evidence = judged(h100)["sram_errors"]
    assert state == FAIL, evidence
    assert f"GPU {bus_id(2)}: 6 uncorrectable" in evidence and "over the shape's 5" in \
        evidence and "HPCGPU-0006-0001" in evidence
    h100.ecc(uncorrectable={2: 5})                    # at the limit: OCI fails above it
    assert judged(h100)["sram_errors"][0] == PASS


def test_sram_correctable_over_the_threshold_is_said_not_failed(h100: FakeNode) -> None:
    h100.ecc(correctable={1: 1001})
    state, evidence = judged(h100)["sram_errors"]
    assert state == PASS and f"GPU {bus_id(1)}: 1001 correctable, over the shape's " \
        "1000 (OCI's doctor warns)" in evidence, evidence


def test_the_published_single_gpu_output_passes_against_the_h100_limits(h100: FakeNode) -> None:
    (h100.bin / "ecc.txt").write_text((DATA / "nvidia-smi-q.A10G.txt").read_text())
    state, evidence = judged(h100)["sram_errors"]
    assert state == PASS and "1 GPUs: at most 0" in evidence, evidence


@pytest.mark.parametrize("how, piece", [
    ("na", "no aggregate SRAM uncorrectable count"),
    ("garbage", "no GPU section of nvidia-smi -q"),
    ("missing", "nvidia-smi"),
])
def test_sram_counts_not_read_are_unknown(h100: FakeNode, how: str, piece: str) -> None:
    if how == "na":
        h100.ecc(uncorrectable={0: "N/A"})
    elif how == "garbage":
        (h100.bin / "ecc.txt").write_text("Unable to determine the device handle\n")
    else:
        (h100.bin / "ecc.txt").unlink()              # the fake's cat then fails
    state, evidence = judged(h100)["sram_errors"]
    assert state == UNKNOWN and piece in evidence, evidence


@pytest.mark.parametrize("versions, state, piece", [
    (("470.57.02",), FAIL, "driver 470.57.02 is on the shape's refused list (OCI's "
     "HPCGPU-0007-0001)"),
    (("550.90.12",) * 7 + ("535.104.12",), FAIL, "GPUs on different driver versions: "
     "535.104.12, 550.90.12"),
    # the published A10G's driver (NVIDIA/DCGM#232): on none of the H100's lists
    (("535.247.01",), UNKNOWN, "driver 535.247.01 is on none of the shape's lists"),
    (("Failed to initialize NVML: Driver/library version mismatch",), UNKNOWN,
     "not a driver version per GPU"),
])
def test_the_driver_against_the_shapes_lists(h100: FakeNode, versions, state: str,
                                             piece: str) -> None:
    h100.driver(*versions)
    got, evidence = judged(h100)["driver_version"]
    assert got == state and piece in evidence, evidence


def test_a_hanging_gpu_tool_leaves_them_unknown_without_waiting_again(h100: FakeNode) -> None:
    h100.hang()
    start = time.monotonic()
    got = judged(h100)
    assert {got[n][0] for n in GPU_ITEMS} == {UNKNOWN} and set(got) == set(DOCTOR_ITEMS)
    assert {got[n][0] for n in NODE_ITEMS} == {PASS}
    assert time.monotonic() - start < 8          # the listing's 2 s, once, and the rest


def test_a_node_without_nvidia_smi_is_unknown_never_fail(h100: FakeNode) -> None:
    (h100.bin / "nvidia-smi").unlink()
    got = judged(h100)
    assert {got[n][0] for n in GPU_ITEMS} == {UNKNOWN}, got


# --------------------------------------------------------------------------- preflight


def test_preflight_lists_the_doctors_items_of_the_shape(h100: FakeNode) -> None:
    h100.mig(enabled=(5,))
    result = preflight.preflight(shapes.load("BM.GPU.H100.8"), h100.root)
    got = {i.name: i for i in result.items if i.name in DOCTOR_ITEMS}
    assert set(got) == set(DOCTOR_ITEMS)
    assert got["mig_mode"].missing and "GPU-00000005" in got["mig_mode"].detail
    assert got["sram_errors"].status == "present" and got["driver_version"].status == "present"
    assert "mig_mode" in result.to_dict()["missing"]


def test_the_shape_files_thresholds_are_oci_doctors() -> None:
    """The H100's entry of oci-dr-hpc-v2's test_limits.json: uncorrectable 5,
    correctable 1000, 470.57.02 refused (cited in the shape file)."""
    exp = preflight.expectations(shapes.load("BM.GPU.H100.8"))
    assert doctor.declared(exp, "sram_errors")["uncorrectable"] == 5
    assert doctor.declared(exp, "sram_errors")["correctable"] == 1000
    assert doctor.declared(exp, "driver")["refused"] == ["470.57.02"]
    assert "test_limits.json" in doctor.declared(exp, "mig")["source"]


# --------------------------------------------------------------------------- PCIe errors


def kmsg_text(name: str) -> list[str]:
    """A published log's lines as /dev/kmsg's records hold them (no dmesg timestamp)."""
    return [re.sub(r"^\[\s*[0-9.]+\] ", "", line)
            for line in (DATA / name).read_text().splitlines()]


def kernel(fake: FakeNode, **kw) -> dict[str, tuple[str, str]]:
    ctx = probes.Context(root=fake.root, shape=fake.shape, node="gpu-1",
                         deadline=time.monotonic() + 20, tool_timeout=2.0, **kw)
    return {r.name: (r.state, r.evidence) for r in check.run_probes(ctx, only=["kernel_log"])}


def test_the_published_fatal_aer_error_fails_naming_the_device_and_oci_fault(
        h100: FakeNode) -> None:
    h100.kernel_log(*kmsg_text("aer-gpu-burn-1.dmesg"))
    got = kernel(h100)
    state, evidence = got["pcie_errors"]
    assert state == FAIL, evidence
    assert "PCIe Uncorrected (Fatal) error (Transaction Layer) on 0000:00:02.0" in evidence
    assert "PCIe Corrected error (Data Link Layer) on 0000:00:02.0" in evidence
    assert "(OCI's HPCGPU-0002-0001)" in evidence
    assert got["xid"][0] == FAIL              # the same log's Xid 79, judged beside it


def test_the_newer_kernels_aer_line_is_read_too(h100: FakeNode) -> None:
    h100.kernel_log(*kmsg_text("aer-intel-7265.log"))
    state, evidence = kernel(h100)["pcie_errors"]
    assert state == FAIL and "PCIe Corrected error (Physical Layer) on 0000:00:1c.5" in \
        evidence, evidence


def test_a_log_without_aer_errors_passes(h100: FakeNode) -> None:
    # AER's and DPC's lines at boot, which name errors without one having happened
    h100.kernel_log("pcieport 0000:00:01.0: AER: enabled with IRQ 24",
                    "pcieport 0000:00:01.0: DPC: error containment capabilities: Int Msg #0, "
                    "RPExt+ PoisonedTLP+ SwTrigger+ RP PIO Log 4, DL_ActiveErr+")
    got = kernel(h100)
    assert {n: s for n, (s, _) in got.items()} == {"xid": PASS, "pcie_errors": PASS,
                                                    "hca_errors": PASS}
    assert "no PCIe AER error ('PCIe Bus Error') in 3 log lines" in got["pcie_errors"][1]


def test_an_aer_error_keeps_the_kernel_logs_mark_where_it_was(h100: FakeNode) -> None:
    """The state file's mark of records judged clean moves only when every scan of the
    log passed: a PCIe error beside no Xid is judged again next run."""
    h100.kernel_log(*kmsg_text("aer-intel-7265.log"))
    ctx = probes.Context(root=h100.root, shape=h100.shape, node="gpu-1",
                         deadline=time.monotonic() + 20, tool_timeout=2.0)
    results = check.run_probes(ctx, only=["kernel_log"])
    assert {r.name: r.state for r in results} == {"xid": PASS, "pcie_errors": FAIL,
                                                  "hca_errors": PASS}
    fields = check._kernel_fields(ctx, results, None, dry_run=False)
    assert fields["kernel_seq_passed"] == -1 and fields["kernel_seq_read"] == 9, fields


def test_an_acknowledged_aer_error_passes(h100: FakeNode) -> None:
    h100.kernel_log(*kmsg_text("aer-gpu-burn-1.dmesg"))
    state, evidence = kernel(h100, acknowledge_kernel_log=True)["pcie_errors"]
    assert state == PASS and "acknowledged" in evidence, evidence


def test_a_shape_without_pcie_errors_does_not_scan_for_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNode(tmp_path / "a100")
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    fake.kernel_log(*kmsg_text("aer-intel-7265.log"))
    assert set(kernel(fake)) == {"xid"}


# --------------------------------------------------------------------------- RDMA settings


def rdma(fake: FakeNode) -> dict[str, tuple[str, str]]:
    ctx = probes.Context(root=fake.root, shape=fake.shape, node="gpu-1",
                         deadline=time.monotonic() + 20, tool_timeout=2.0)
    return {r.name: (r.state, r.evidence) for r in check.run_probes(ctx, only=["rdma"])}


def test_every_h100_port_has_oci_settings(h100: FakeNode) -> None:
    got = rdma(h100)
    assert len(got) == 16 and {s for s, _ in got.values()} == {PASS}, got
    evidence = got["rdma mlx5_0:1"][1]
    for piece in ("MTU 4220", "trust dscp, PFC on priorities 0, 5", "`mlnx_qos -i enp12s0f0np0`",
                  "device/net/enp12s0f0np0/mtu"):
        assert piece in evidence, evidence


def test_the_published_qos_of_another_site_fails_naming_setting_value_and_expected(
        h100: FakeNode) -> None:
    """att/netarbiter's port: trust dscp, PFC on priority 3 (not OCI's 0 and 5)."""
    netdev = h100.ports["mlx5_6:1"].netdev
    (h100.bin / "mlnx_qos.d" / netdev).write_text((DATA / "mlnx_qos.netarbiter.txt").read_text())
    got = rdma(h100)
    state, evidence = got["rdma mlx5_6:1"]
    assert state == FAIL, evidence
    assert f"{netdev}: PFC enabled on priorities 3, the shape's 0, 5" in evidence
    assert [n for n, (s, _) in got.items() if s != PASS] == ["rdma mlx5_6:1"]


@pytest.mark.parametrize("field, value, piece", [
    ("mtu", 1500, "MTU 1500 on enp88s0f1np0, the shape's 4220"),
    ("trust", "pcp", "priority trust state pcp, the shape's dscp"),
    ("pfc", [0] * 8, "PFC enabled on priorities none, the shape's 0, 5"),
])
def test_a_wrong_setting_fails_naming_it(h100: FakeNode, field: str, value, piece: str) -> None:
    h100.port("mlx5_8:1", **{field: value})
    state, evidence = rdma(h100)["rdma mlx5_8:1"]
    assert state == FAIL and piece in evidence, evidence


@pytest.mark.parametrize("how, piece", [
    ("missing", "QoS not read: "),
    ("garbage", "printed no 'Priority trust state' line"),
    ("mtu", "MTU of enp12s0f0np0 not read"),
])
def test_a_setting_not_read_is_unknown_never_fail(h100: FakeNode, how: str, piece: str) -> None:
    if how == "missing":
        (h100.bin / "mlnx_qos").unlink()
    elif how == "garbage":
        (h100.bin / "mlnx_qos.d" / "enp12s0f0np0").write_text("Netlink error: Bad value\n")
    else:
        (h100.root / "sys/class/infiniband/mlx5_0/device/net/enp12s0f0np0/mtu").write_text("x\n")
    got = rdma(h100)
    state, evidence = got["rdma mlx5_0:1"]
    assert state == UNKNOWN and piece in evidence, evidence
    assert FAIL not in {s for s, _ in got.values()}


def test_preflight_judges_the_settings_too(h100: FakeNode) -> None:
    h100.port("mlx5_1:1", mtu=9000)
    result = preflight.preflight(shapes.load("BM.GPU.H100.8"), h100.root)
    item = next(i for i in result.items if i.name == "rdma mlx5_1:1")
    assert item.missing and "MTU 9000 on enp12s0f1np0, the shape's 4220" in item.detail


def test_preflight_reads_each_cards_firmware_settings(h100: FakeNode) -> None:
    result = preflight.preflight(shapes.load("BM.GPU.H100.8"), h100.root)
    items = {i.name: i for i in result.items if i.name.startswith("rdma ")}
    card = items["rdma mlx5_0:1"]
    assert card.status == "present" and "MAX_ACC_OUT_READ 128, ADVANCED_PCI_SETTINGS True(1)" \
        in card.detail and "`mlxconfig -d 0000:0c:00.0 query MAX_ACC_OUT_READ " \
        "ADVANCED_PCI_SETTINGS`" in card.evidence, card
    # function 1 is the same card: asked once, on function 0
    assert "mlxconfig" not in items["rdma mlx5_1:1"].evidence


@pytest.mark.parametrize("firmware, state, piece", [
    ({"MAX_ACC_OUT_READ": "0", "ADVANCED_PCI_SETTINGS": "False(0)"}, "unexpected",
     "card at 0000:41:00.0: ADVANCED_PCI_SETTINGS False(0), the shape's True(1) (OCI's "
     "HPCGPU-0017-0001)"),
    ({"MAX_ACC_OUT_READ": "64", "ADVANCED_PCI_SETTINGS": "True(1)"}, "unexpected",
     "MAX_ACC_OUT_READ 64, the shape's 0 or 44 or 128"),
    ({"ADVANCED_PCI_SETTINGS": "True(1)"}, "unknown", "printed no MAX_ACC_OUT_READ"),
])
def test_a_cards_firmware_setting_not_the_shapes_fails(h100: FakeNode, firmware, state: str,
                                                       piece: str) -> None:
    h100.port("mlx5_5:1", firmware=firmware)
    result = preflight.preflight(shapes.load("BM.GPU.H100.8"), h100.root)
    item = next(i for i in result.items if i.name == "rdma mlx5_5:1")
    assert item.status == state and piece in item.detail, item


def test_the_healthcheck_does_not_run_mlxconfig(h100: FakeNode) -> None:
    (h100.bin / "mlxconfig").write_text("#!/bin/sh\nexit 1\n")
    got = rdma(h100)
    assert {s for s, _ in got.values()} == {PASS}
    assert not any("mlxconfig" in e for _, e in got.values())


# --------------------------------------------------------------------------- CDFP cabling


def test_the_module_query_reads_each_gpu_sections_module_id() -> None:
    # R535's "Module ID" at the GPU's first level (the published A10G, NVIDIA/DCGM#232) and
    # R580's "Module Id" under "Platform Info" (captured on an H200 node, 580.159.04,
    # whose nvidia-smi refuses --query-gpu=module_id: the query OCI's doctor makes)
    a10g = (DATA / "nvidia-smi-q.A10G.txt").read_text()
    assert NVIDIA.module_query.parse(a10g) == [accelerators.GpuModule("00000000:00:1E.0", "1")]
    h200 = (DATA / "nvidia-smi-q.H200.r580.txt").read_text()
    assert NVIDIA.module_query.parse(h200) == [accelerators.GpuModule("00000000:00:06.0", "4")]
    assert NVIDIA.module_query.command == ("nvidia-smi", "-q")
    with pytest.raises(accelerators.ProbeFormatError):
        NVIDIA.module_query.parse("Field \"module_id\" is not a valid field to query.\n")


def test_two_gpus_in_each_others_modules_fail_naming_both(h100: FakeNode) -> None:
    h100.modules(swap=(0, 1))
    state, evidence = judged(h100)["cdfp_cabling"]
    assert state == FAIL, evidence
    assert "GPU at 0000:0f:00.0 is module 4, the shape's 2" in evidence
    assert "GPU at 0000:2d:00.0 is module 2, the shape's 4" in evidence
    assert "HPCGPU-0010-0001" in evidence


def test_a_gpu_missing_from_its_address_fails(h100: FakeNode) -> None:
    sections = (h100.bin / "smi-q.txt").read_text().split("GPU ")[1:]
    (h100.bin / "smi-q.txt").write_text("".join("GPU " + s for s in sections[:-1]))
    state, evidence = judged(h100)["cdfp_cabling"]
    assert state == FAIL and "no GPU at 0000:d8:00.0 (the shape's module 6)" in evidence, \
        evidence


@pytest.mark.parametrize("first, piece", [
    ("GPU 00000000:0F:00.0\n    Platform Info\n        Module Id : N/A\n",
     "no module id for the GPU at 0000:0f:00.0"),
    ("No devices were found\n", "no GPU section with its Module Id"),
])
def test_module_ids_not_read_are_unknown(h100: FakeNode, first: str, piece: str) -> None:
    sections = (h100.bin / "smi-q.txt").read_text().split("GPU ")[2:]
    rest = "".join("GPU " + s for s in sections) if "N/A" in first else ""
    (h100.bin / "smi-q.txt").write_text(first + rest)
    state, evidence = judged(h100)["cdfp_cabling"]
    assert state == UNKNOWN and piece in evidence, evidence


# --------------------------------------------------------------------------- RDMA authentication


def test_every_h100_port_is_authenticated(h100: FakeNode) -> None:
    # the published state lines of a node OCI's tutorial admitted, on one port
    netdev = h100.ports["mlx5_3:1"].netdev
    (h100.bin / "wpa_cli.d" / netdev).write_text(
        (DATA / "wpa_cli-status.ocitutorials.txt").read_text())
    got = rdma(h100)
    assert {s for s, _ in got.values()} == {PASS}, got
    assert "802.1X AUTHENTICATED" in got["rdma mlx5_3:1"][1]
    assert f"`wpa_cli -i {netdev} status`" in got["rdma mlx5_3:1"][1]


@pytest.mark.parametrize("pae", ["CONNECTING", "HELD", "DISCONNECTED"])
def test_a_port_not_authenticated_fails_naming_it(h100: FakeNode, pae: str) -> None:
    h100.port("mlx5_12:1", pae=pae)
    got = rdma(h100)
    state, evidence = got["rdma mlx5_12:1"]
    netdev = h100.ports["mlx5_12:1"].netdev
    assert state == FAIL and f"{netdev} not authenticated to the cluster network: " \
        f"Supplicant PAE state {pae} (OCI's HPCGPU-0008-0001" in evidence, evidence
    assert [n for n, (s, _) in got.items() if s != PASS] == ["rdma mlx5_12:1"]


@pytest.mark.parametrize("how", ["no supplicant", "no wpa_cli"])
def test_authentication_not_read_is_unknown(h100: FakeNode, how: str) -> None:
    netdev = h100.ports["mlx5_12:1"].netdev
    if how == "no supplicant":
        (h100.bin / "wpa_cli.d" / netdev).unlink()      # wpa_cli cannot reach it: exit 255
    else:
        (h100.bin / "wpa_cli").unlink()
    state, evidence = rdma(h100)["rdma mlx5_12:1"]
    assert state == UNKNOWN and "authentication not read" in evidence, evidence
    # the tool's own failure is said, not read as output without the state
    assert "no 'Supplicant PAE state'" not in evidence, evidence


# --------------------------------------------------------------------------- GPU clocks


def test_the_published_clock_sections_give_each_gpus_graphics_clocks() -> None:
    """DCGM#232's A10G at 1710 MHz under load; the H200 capture idle at 345 MHz, its
    applications clock 1980 MHz (what a job runs at)."""
    a10g = NVIDIA.clock_query.parse((DATA / "nvidia-smi-q.A10G.txt").read_text())
    assert a10g == [accelerators.GpuClocks("00000000:00:1E.0", 1710, 1710, 1710)]
    h200 = NVIDIA.clock_query.parse((DATA / "nvidia-smi-q.H200.r580.txt").read_text())
    assert h200 == [accelerators.GpuClocks("00000000:00:06.0", 1980, 1980, 345)]
    with pytest.raises(accelerators.ProbeFormatError):
        NVIDIA.clock_query.parse("No devices were found\n")


def test_an_idle_gpu_passes_and_a_slow_applications_clock_fails(h100: FakeNode) -> None:
    # idle (345 MHz now) passes: OCI's current-clock reading would fail every idle node
    assert judged(h100)["gpu_clocks"][0] == PASS
    h100.clocks(applications={6: 1410})
    state, evidence = judged(h100)["gpu_clocks"]
    assert state == FAIL, evidence
    assert f"GPU {bus_id(6)}: 1410 MHz (its default 1980 MHz)" in evidence
    assert "below the shape's 1782 MHz (1980 less OCI's 10%)" in evidence
    assert "(nvidia-smi -rac restores the default; OCI's HPCGPU-0011-0001)" in evidence
    h100.clocks(applications={6: 1782})       # OCI's own floor holds
    assert judged(h100)["gpu_clocks"][0] == PASS


def test_no_applications_clock_or_no_tool_is_unknown(h100: FakeNode) -> None:
    h100.clocks(applications={2: "N/A"})
    state, evidence = judged(h100)["gpu_clocks"]
    assert state == UNKNOWN and f"N/A) for GPU {bus_id(2)}" in evidence, evidence
    h100.clocks()
    (h100.bin / "clocks.txt").unlink()          # the stand-in prints nothing, exits 1
    assert judged(h100)["gpu_clocks"][0] == UNKNOWN


# --------------------------------------------------------------------------- the front end


def test_eth0_missing_fails_naming_what_is_there(h100: FakeNode) -> None:
    h100.frontend(name="ens300")
    got = judged(h100)
    state, evidence = got["eth0_presence"]
    assert state == FAIL and "no interface eth0 (the node has ens300, lo" in evidence
    assert "HPCGPU-0010-0001" in evidence
    # the link check of the same interface says so too, with its own code
    assert got["eth_link"][0] == FAIL and "HPCGPU-0007-0001" in got["eth_link"][1]


def test_no_sysfs_of_the_network_is_unknown(h100: FakeNode) -> None:
    import shutil
    shutil.rmtree(h100.root / "sys/class/net")
    got = judged(h100)
    assert got["eth0_presence"][0] == UNKNOWN and "cannot list" in got["eth0_presence"][1]
    (h100.root / "sys/class/net").mkdir()
    assert judged(h100)["eth0_presence"][0] == UNKNOWN


@pytest.mark.parametrize("operstate, speed, state, said", [
    ("down", "-1", FAIL, "eth0 link down (operstate)"),
    ("up", "25000", FAIL, "eth0 up at 25 Gb/s, below the shape's 100 Gb/s"),
    ("up", "200000", PASS, "eth0 up at 200 Gb/s"),
    ("up", "-1", UNKNOWN, "eth0 up, its speed not read: '-1'"),
    ("unknown", "100000", UNKNOWN, "says no link state"),
    ("sideways", "100000", UNKNOWN, "operstate of eth0 not read"),
])
def test_the_front_end_link(h100: FakeNode, operstate: str, speed: str, state: str,
                            said: str) -> None:
    h100.frontend(operstate=operstate, speed=speed)
    got_state, evidence = judged(h100)["eth_link"]
    assert got_state == state and said in evidence, evidence


def test_gb200_checks_eth0_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OCI enables eth0_presence_check on BM.GPU.GB200.4, not the link, clocks or lspci."""
    exp = preflight.expectations(shapes.load("BM.GPU.GB200.4"))
    assert [k for k in ("eth0", "eth_link", "gpu_clocks", "missing_interface", "hca_errors")
            if doctor.declared(exp, k) is not None] == ["eth0"]


# --------------------------------------------------------------------------- PCI devices gone


def lspci_d(name: str) -> str:
    """A published listing as ``lspci -D`` prints it (the domain before each address)."""
    return "".join(f"0000:{line}\n" for line in (DATA / name).read_text().splitlines())


def test_the_published_rev_ff_devices_fail_naming_them(h100: FakeNode) -> None:
    h100.lspci(lspci_d("lspci-nn.i350-rev-ff.txt"))
    state, evidence = judged(h100)["missing_interface"]
    assert state == FAIL, evidence
    assert "2 PCI devices read revision ff" in evidence and "over the shape's 0" in evidence
    assert "0000:01:00.1 Ethernet controller [0200]: Intel Corporation I350" in evidence
    assert "HPCGPU-0012-0001" in evidence
    h100.lspci(lspci_d("lspci.radeon-rev-ff.txt"))
    state, evidence = judged(h100)["missing_interface"]
    assert state == FAIL and "1 PCI devices read revision ff" in evidence
    assert "0000:05:00.0 Display controller" in evidence


def test_a_listing_without_rev_ff_passes_and_one_of_no_device_is_unknown(h100: FakeNode) -> None:
    healthy = "".join(line for line in lspci_d("lspci.radeon-rev-ff.txt").splitlines(True)
                      if "(rev ff)" not in line)
    h100.lspci(healthy)
    state, evidence = judged(h100)["missing_interface"]
    assert state == PASS and "18 PCI devices, 0 reading revision ff" in evidence, evidence
    h100.lspci("pcilib: Cannot open /proc/bus/pci\n")
    assert judged(h100)["missing_interface"][0] == UNKNOWN


def test_no_lspci_is_unknown(h100: FakeNode, monkeypatch: pytest.MonkeyPatch) -> None:
    (h100.bin / "lspci").unlink()
    monkeypatch.setenv("PATH", str(h100.bin))   # whether or not this machine has one
    ctx = probes.Context(root=h100.root, shape=h100.shape, node="gpu-1",
                         deadline=time.monotonic() + 20, tool_timeout=2.0)
    [result] = check.run_probes(ctx, only=["missing_interface"])
    assert result.state == UNKNOWN and "lspci not on PATH" in result.evidence, result


# --------------------------------------------------------------------------- mlx5 errors


def test_the_published_mlx5_fatal_error_fails_naming_the_nic(h100: FakeNode) -> None:
    h100.kernel_log(*kmsg_text("mlx5-fatal.lkml.dmesg"))
    got = kernel(h100)
    state, evidence = got["hca_errors"]
    assert state == FAIL, evidence
    assert "mlx5 fatal error (Fatal error 1 detected) on 0000:01:00.0" in evidence
    assert "(OCI's HPCGPU-0011-0001)" in evidence
    # the AER lines' "NonFatalErr" bits are PCIe errors of their own scan, not mlx5's
    assert "NonFatal" not in evidence and got["pcie_errors"][0] == FAIL


def test_mlx5_errors_that_are_not_fatal_pass(h100: FakeNode) -> None:
    h100.kernel_log(*kmsg_text("mlx5-nonfatal.rp-ext-129.dmesg"))
    state, evidence = kernel(h100)["hca_errors"]
    assert state == PASS and "no fatal mlx5 error" in evidence, evidence


def test_hca_errors_are_read_as_oci_words_them() -> None:
    read = doctor.HCA_ERRORS.read
    assert read("mlx5_core 0000:c4:00.0: poll_health:803: Fatal error 1 detected") == \
        ("0000:c4:00.0", "mlx5 fatal error (Fatal error 1 detected)")
    assert read("infiniband mlx5_3: fatal async event") == \
        ("mlx5_3", "mlx5 fatal error (fatal async event)")
    assert read("mlx5_core 0000:01:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
                "type=Transaction Layer, (Requester ID)") is None
    assert read("nvme 0000:01:00.0: fatal error") is None


# --------------------------------------------------------------------------- finer codes


def test_each_failing_port_check_carries_its_own_code_in_the_drain_reason(
        h100: FakeNode) -> None:
    """OCI codes the RDMA port's GID table, RX discards and 802.1X state on their own
    (gid_index_check, rx_discards_check, auth_check): the drain reason leads with that
    code, the next step with that check's fix.  Seen failing without the finer entries
    (every port failure was HPCGPU-0008-0001, its fix a reboot)."""
    h100.port("mlx5_0:1", discards=[0, 0, 0, 500, 0, 0, 0, 0])
    h100.port("mlx5_3:1", pae="CONNECTING")
    # the healthcheck's reading after one that read no discards (its state file's)
    last = {rdma_ports.RX_DISCARDS_KEY.format(port=p.name): 0 for p in h100.exp.rdma_ports}
    items = [r.item(True) for r in rdma_ports.read_ports(h100.root, h100.exp.rdma_ports, last)]
    failed = [state.ProbeResult(i.name, FAIL, f"{i.detail} [{i.evidence}]", 0, 0)
              for i in items if i.status == "unexpected"]
    assert [r.name for r in failed] == ["rdma mlx5_0:1", "rdma mlx5_3:1"], items
    reason = check.drain_reason(failed)       # cut at Slurm's length: the first's code
    assert reason.startswith("ocibench: [HPCGPU-0004-0001] rdma mlx5_0:1 (rx_discards: ")
    reason = check.drain_reason(failed[1:])
    assert reason.startswith("ocibench: [HPCGPU-0008-0001] rdma mlx5_3:1 (auth: "), reason
    steps = check.next_steps(failed, {})
    assert "restart the oracle-cloud-agent plugin" in steps[1], steps


def test_preflight_names_the_firmware_settings_own_code(h100: FakeNode) -> None:
    h100.port("mlx5_5:1", firmware={"MAX_ACC_OUT_READ": "64",
                                    "ADVANCED_PCI_SETTINGS": "True(1)"})
    result = preflight.preflight(shapes.load("BM.GPU.H100.8"), h100.root)
    step = next(s for s in result.next_steps() if s["item"] == "rdma mlx5_5:1")
    assert step["fault"] == "HPCGPU-0017-0001" and step["name"] == "rdma:mlxconfig", step
