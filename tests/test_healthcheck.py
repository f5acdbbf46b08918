"""The healthcheck's probes on a fake GPU node (tests/health_fakes.py), its decision
where Slurm is not needed, and its command line.  Slurm's own health loop is
tests/test_healthcheck_cluster.py."""

from __future__ import annotations

import ast
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from health_fakes import FakeNode
from ocibench import accelerators, cli, shapes
from ocibench.health import check, probes, state
from ocibench.health.state import FAIL, PASS, UNKNOWN
from ocibench.history import current, store
from rdma_fakes import ZERO_GID


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNode:
    """A healthy BM.GPU4.8 node; its nvidia-smi first on PATH, and only the system's
    directories after it (this machine has no nvidia-smi of its own)."""
    fake = FakeNode(tmp_path / "node")
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    monkeypatch.setenv("OCIBENCH_HEALTH_STATE", str(tmp_path / "state.json"))
    monkeypatch.setenv("OCIBENCH_HISTORY_DB", str(tmp_path / "no-history.sqlite"))
    return fake


def no_slurm_path(fake: FakeNode, tmp_path: Path) -> str:
    """A PATH with the node's nvidia-smi and what it runs (sh, dirname, cat, sleep),
    without Slurm's commands: a run that asked Slurm would say it could not."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    for tool in ("sh", "dirname", "cat", "sleep"):
        found = shutil.which(tool)
        assert found, tool
        (tools / tool).symlink_to(found)
    return f"{fake.bin}:{tools}"


def context(fake: FakeNode, previous: state.HealthState | None = None,
            deadline_s: float = 20.0) -> probes.Context:
    return probes.Context(root=fake.root, shape=fake.shape, node="gpu-1",
                          deadline=time.monotonic() + deadline_s, tool_timeout=1.0,
                          previous=previous)


def found(fake: FakeNode, name: str, **kw) -> dict[str, tuple[str, str]]:
    """name -> (state, evidence) of the probe ``name`` (all its findings)."""
    results = check.run_probes(context(fake, **kw))
    return {r.name: (r.state, r.evidence) for r in results
            if r.name == name or r.name.startswith(name + " ")}


def one(fake: FakeNode, name: str, **kw) -> tuple[str, str]:
    got = found(fake, name, **kw)
    assert len(got) == 1, got
    return next(iter(got.values()))


def test_a_healthy_node_passes_every_probe(node: FakeNode) -> None:
    results = check.run_probes(context(node))
    # every port of the shape: its 16 cluster-network NICs and the UCX port mlx5_4:1
    ports = {f"rdma {p}": PASS for p in node.exp.rdma_devices}
    assert len(ports) == 17 and "rdma mlx5_4:1" in ports and "rdma mlx5_17:1" in ports
    assert {r.name: r.state for r in results} == {
        "gpu_count": PASS, "xid": PASS, "row_remap": PASS, "pcie": PASS, "nvlink": PASS,
        **ports, "fabric_manager": PASS}
    assert all(r.evidence and r.duration_s >= 0 for r in results)


# --------------------------------------------------------------------------- gpu_count


def test_fewer_gpus_than_the_shape_fail(node: FakeNode) -> None:
    node.gpus(7)
    got, evidence = one(node, "gpu_count")
    assert got == FAIL and "7x NVIDIA A100-SXM4-40GB; the shape: 8x" in evidence


def test_another_gpu_model_fails(node: FakeNode) -> None:
    node.gpus(8, model="NVIDIA A100-SXM4-80GB")
    assert one(node, "gpu_count")[0] == FAIL


def test_no_gpu_listed_fails(node: FakeNode) -> None:
    node.gpus(0)
    got, evidence = one(node, "gpu_count")
    assert got == FAIL and "lists no GPU" in evidence


def test_a_missing_gpu_tool_is_unknown_never_fail(node: FakeNode) -> None:
    (node.bin / "nvidia-smi").unlink()
    results = {r.name: r for r in check.run_probes(context(node))}
    for name in ("gpu_count", "row_remap", "pcie", "nvlink"):
        assert results[name].state == UNKNOWN, results[name]
        assert "nvidia-smi not on PATH" in results[name].evidence


def test_a_hanging_gpu_tool_is_unknown_and_costs_its_timeout_once(node: FakeNode) -> None:
    node.hang()
    began = time.monotonic()
    results = {r.name: r for r in check.run_probes(context(node))}
    took = time.monotonic() - began
    assert results["gpu_count"].state == UNKNOWN
    assert "ran past 1 s (killed)" in results["gpu_count"].evidence
    # the later GPU probes read the listing's outcome instead of waiting again
    for name in ("row_remap", "pcie", "nvlink"):
        assert results[name].state == UNKNOWN and "ran past" in results[name].evidence
        assert "--query-gpu" in results[name].evidence, results[name]
    assert results["xid"].state == PASS and results["rdma mlx5_4:1"].state == PASS
    assert took < 1.0 * 2 + 5, took     # one timeout, not four (a bound, not a benchmark)


def test_gpu_tool_output_not_understood_is_unknown(node: FakeNode) -> None:
    (node.bin / "gpus.csv").write_text("NVIDIA-SMI has failed because it couldn't "
                                       "communicate with the NVIDIA driver.\n")
    got, evidence = one(node, "gpu_count")
    assert got == UNKNOWN and "not the CSV asked for" in evidence


# --------------------------------------------------------------------------- xid


@pytest.mark.parametrize("xid", [48, 79, 94, 95])
def test_an_xid_that_takes_a_gpu_out_fails(node: FakeNode, xid: int) -> None:
    node.kernel_log(f"NVRM: Xid (PCI:0000:20:00): {xid}, pid=0, name=python, Ch 00000008")
    got, evidence = one(node, "xid")
    assert got == FAIL, evidence
    assert f"Xid {xid} {accelerators.XIDS[xid]} on PCI:0000:20:00 at 2 s after boot" in evidence


def test_other_xids_and_other_lines_pass(node: FakeNode) -> None:
    node.kernel_log("NVRM: Xid (PCI:0000:20:00): 13, pid=4, Graphics Exception",
                    "NVRM: Xid (PCI:0000:20:00): 790, pid=4, not Xid 79",
                    "mlx5_core 0000:0c:00.0: Port module event: module 0, Cable plugged")
    got, evidence = one(node, "xid")
    assert got == PASS and "in 4 log lines" in evidence


def test_an_unreadable_kernel_log_is_unknown(node: FakeNode) -> None:
    (node.root / "dev" / "kmsg").unlink()
    assert one(node, "xid") == (UNKNOWN, f"no {node.root / 'dev/kmsg'}")
    (node.root / "dev" / "kmsg").mkdir()
    got, evidence = one(node, "xid")
    assert got == UNKNOWN and "Is a directory" in evidence


def test_the_kernel_log_device_is_read_without_blocking(tmp_path: Path) -> None:
    """/dev/kmsg itself, where this process may read it: every record, then the end
    (EAGAIN), not a wait for the next one."""
    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("/dev/kmsg is not readable here")
    began = time.monotonic()
    lines, why = probes.read_kernel_log(Path("/dev/kmsg"), time.monotonic() + 10)
    assert lines is not None, why
    assert time.monotonic() - began < 9


# --------------------------------------------------------------------------- row remaps


@pytest.mark.parametrize("pending, failure, says", [
    ("Yes", "No", "remap pending"), ("No", "Yes", "remap failure"), ("1", "0", "remap pending")])
def test_a_pending_or_failed_row_remap_fails(node: FakeNode, pending: str, failure: str,
                                             says: str) -> None:
    node.remap(pending, failure, gpu=3)
    got, evidence = one(node, "row_remap")
    assert got == FAIL and f"00000000:40:00.0: {says}" in evidence


def test_a_gpu_without_a_row_remapper_is_unknown(node: FakeNode) -> None:
    node.remap("[N/A]", "[N/A]", gpu=0)
    got, evidence = one(node, "row_remap")
    assert got == UNKNOWN and "[N/A]" in evidence


# --------------------------------------------------------------------------- pcie, nvlink


def test_a_narrower_pcie_link_fails(node: FakeNode) -> None:
    node.pcie(width={5: 8})
    got, evidence = one(node, "pcie")
    assert got == FAIL and "GPU 5: Gen4 x8 (max Gen4 x16)" in evidence


def test_an_unreadable_pcie_link_is_unknown(node: FakeNode) -> None:
    (node.root / "sys/bus/pci/devices/0000:30:00.0/max_link_width").unlink()
    assert one(node, "pcie")[0] == UNKNOWN


def test_nvlink_links_down_fail(node: FakeNode) -> None:
    node.nvlink(inactive={2: 3})
    got, evidence = one(node, "nvlink")
    assert got == FAIL and "GPU 2: 9/12" in evidence


def test_nvlink_status_not_given_is_unknown(node: FakeNode) -> None:
    (node.bin / "nvlink.txt").unlink()   # the stand-in then exits non-zero, as a failing tool
    assert one(node, "nvlink")[0] == UNKNOWN


# --------------------------------------------------------------------------- rdma


def test_a_port_not_active_fails(node: FakeNode) -> None:
    node.port("mlx5_6:1", state="1: DOWN")
    got = found(node, "rdma")
    assert got["rdma mlx5_6:1"][0] == FAIL and "port state 1: DOWN" in got["rdma mlx5_6:1"][1]
    assert got["rdma mlx5_4:1"][0] == PASS


def test_a_port_gone_fails(node: FakeNode) -> None:
    shutil.rmtree(node.root / "sys/class/infiniband/mlx5_4/ports/1")
    got, evidence = found(node, "rdma")["rdma mlx5_4:1"]
    assert got == FAIL and "no port 1 of mlx5_4" in evidence


def test_a_device_gone_fails(node: FakeNode) -> None:
    shutil.rmtree(node.root / "sys/class/infiniband/mlx5_4")
    got, evidence = found(node, "rdma")["rdma mlx5_4:1"]
    assert got == FAIL and "no RDMA device mlx5_4" in evidence


def _previous(counters: dict[str, int]) -> state.HealthState:
    return state.HealthState(node="gpu-1", time=1.0, duration_s=0.1, interval_s=300,
                             action=state.NONE, reason="", link_downed=counters)


def test_a_link_down_counter_rising_since_the_last_run_is_flapping(node: FakeNode) -> None:
    node.port("mlx5_4:1", link_downed=5)
    ctx = context(node, previous=_previous({"mlx5_4:1": 2, "mlx5_6:1": 0}))
    got = {r.name: r for r in check.run_probes(ctx)}
    assert got["rdma mlx5_4:1"].state == FAIL
    assert "link_downed rose from 2 to 5 since the last run" in got["rdma mlx5_4:1"].evidence
    assert got["rdma mlx5_6:1"].state == PASS
    assert ctx.counters["mlx5_4:1"] == 5 and ctx.counters["mlx5_6:1"] == 0


def test_a_counter_that_held_or_was_reset_passes(node: FakeNode) -> None:
    node.port("mlx5_4:1", link_downed=1)
    got = found(node, "rdma", previous=_previous({"mlx5_4:1": 7, "mlx5_6:1": 0}))
    assert got["rdma mlx5_4:1"][0] == PASS and "(was 7)" in got["rdma mlx5_4:1"][1]
    assert got["rdma mlx5_6:1"][0] == PASS


def test_an_active_port_whose_counter_cannot_be_read_is_unknown(node: FakeNode) -> None:
    node.port("mlx5_4:1", link_downed=None)
    got, evidence = found(node, "rdma")["rdma mlx5_4:1"]
    assert got == UNKNOWN and "link_downed not read: missing" in evidence


#: A GID of an IPv6 address (a unique local one), as sysfs prints it.
IPV6_GID = "fd00:0000:0000:0000:0a00:01ff:fe00:0001"

# A BM.GPU.H100.8 node: 16 ports at 200 Gb/s, RoCE GID index 3 (OCI's), each NIC at its
# PCI address; each fault fails the run with the port named, and only that port.
H100_FAULTS = {
    # case: (port, what changes on it (rdma_fakes.FakePort), a piece of the evidence)
    "rate 100 instead of 200 Gb/s": (
        "mlx5_9:1", lambda p: setattr(p, "rate", "100 Gb/sec (4X EDR)"),
        "rate 100 Gb/s, the shape's 200 Gb/s"),
    "port down": ("mlx5_3:1", lambda p: setattr(p, "state", "1: DOWN"), "port state 1: DOWN"),
    "GID index 3 missing": ("mlx5_12:1", lambda p: (p.gids.pop(3), p.types.pop(3)),
                            "no GID index 3"),
    "GID index 3 RoCE v1": ("mlx5_12:1", lambda p: p.types.update({3: "IB/RoCE v1"}),
                            "GID index 3 is 'IB/RoCE v1', not 'RoCE v2'"),
    "GID index 3 empty": ("mlx5_12:1", lambda p: p.gids.update({3: ZERO_GID}),
                          "GID index 3 is empty"),
    "GID index 3 not IPv4": ("mlx5_12:1", lambda p: p.gids.update({3: IPV6_GID}),
                             "GID index 3 is RoCE v2 but no IPv4 address"),
    "a GID beyond OCI's 0-3": ("mlx5_16:1", lambda p: p.gids.update({4: IPV6_GID}),
                               "GIDs beyond OCI's indexes 0-3: 4 (fd00:"),
    "a NIC gone from the node": ("mlx5_17:1", lambda p: setattr(p, "present", False),
                                 "no RDMA device mlx5_17"),
    "a NIC at another PCI address": (
        "mlx5_5:1", lambda p: setattr(p, "pci", "0000:42:00.0"),
        "mlx5_5 is the NIC at 0000:42:00.0, the shape's is at 0000:41:00.0"),
}


@pytest.fixture
def h100(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNode:
    fake = FakeNode(tmp_path / "h100", "BM.GPU.H100.8")
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    return fake


def _set_port(fake: FakeNode, port: str, change) -> None:
    change(fake.ports[port])
    fake.ports.write(fake.root, fake.bin)


def test_every_port_of_an_h100_node_is_checked_and_passes(h100: FakeNode) -> None:
    got = found(h100, "rdma")
    assert len(got) == 16 and {s for s, _ in got.values()} == {PASS}, got
    state_, evidence = got["rdma mlx5_17:1"]
    for piece in ("at 0000:d5:00.1, GPU 7's", "4: ACTIVE", "200 Gb/s", "GID 3 RoCE v2 192.168.",
                  "link_downed 0", "rx_prio*_discards of enp213s0f1np0 0",
                  "`ethtool -S enp213s0f1np0`"):
        assert piece in evidence, evidence


@pytest.mark.parametrize("case", list(H100_FAULTS))
def test_each_port_fault_fails_naming_the_port(h100: FakeNode, case: str) -> None:
    port, change, piece = H100_FAULTS[case]
    _set_port(h100, port, change)
    got = found(h100, "rdma")
    assert got[f"rdma {port}"][0] == FAIL and piece in got[f"rdma {port}"][1], got[f"rdma {port}"]
    assert [n for n, (s, _) in got.items() if s != PASS] == [f"rdma {port}"]
    reason = check.drain_reason([state.ProbeResult(f"rdma {port}", FAIL, got[f"rdma {port}"][1],
                                                   0, 0)])
    # the rdma entry's fault code on the action ladder (OCI's link_check), or the
    # finer one of the check that failed (a GID beyond 0-3: OCI's gid_index_check)
    code = "HPCGPU-0005-0001" if "beyond" in case else "HPCGPU-0008-0001"
    assert reason.startswith(f"ocibench: [{code}] rdma {port} (") \
        and piece[:30] in reason, reason


def test_a_shifted_name_says_where_the_shapes_nic_went(h100: FakeNode) -> None:
    """The kernel names mlx5 devices in probe order: a NIC lost from the bus moves the
    names after it.  Here mlx5_16 is gone and its address answers as mlx5_15."""
    _set_port(h100, "mlx5_16:1", lambda p: setattr(p, "present", False))
    _set_port(h100, "mlx5_15:1", lambda p: setattr(p, "pci", "0000:d5:00.0"))
    got = found(h100, "rdma")
    assert "the NIC at 0000:d5:00.0 is mlx5_15 now" in got["rdma mlx5_16:1"][1]
    assert "mlx5_15 is the NIC at 0000:d5:00.0, the shape's is at 0000:bd:00.1" \
        in got["rdma mlx5_15:1"][1]


@pytest.mark.parametrize("before, now, expected, piece", [
    # rose by 190 since the last run: more than OCI's 100
    (10, 200, FAIL, "rose by 190 since the last run (10 to 200), over OCI's 100"),
    (10, 110, PASS, "rx_prio*_discards of enp134s0f0np0 110 (+100)"),   # 100 is not over
    (None, 5000, UNKNOWN, "5000 since the counters were reset, over OCI's 100"),  # first run
    (None, 100, PASS, "100 (first reading)"),
    (5000, 150, FAIL, "rose by 150"),   # fell: reset since, so all 150 are new
])
def test_rx_discards_are_judged_by_what_they_added_since_the_last_run(
        h100: FakeNode, before, now, expected, piece) -> None:
    # the sum over the priorities, as the kernel counts them per priority
    _set_port(h100, "mlx5_9:1",
              lambda p: setattr(p, "discards", [now - now // 2, 0, 0, now // 2, 0, 0, 0, 0]))
    counters = {} if before is None else {"mlx5_9:1 rx_discards": before}
    ctx = context(h100, previous=_previous(counters) if counters else None)
    got = {r.name: r for r in check.run_probes(ctx) if r.name.startswith("rdma ")}
    assert got["rdma mlx5_9:1"].state == expected and piece in got["rdma mlx5_9:1"].evidence, \
        got["rdma mlx5_9:1"]
    assert ctx.counters["mlx5_9:1 rx_discards"] == now      # kept for the next run


UNREADABLE = {
    # case: (what to do to port mlx5_9:1's files, a piece of the evidence)
    "rate a directory": (lambda root, base: _replace_by_dir(root / base / "ports/1/rate"),
                         "rate not read"),
    "rate not the kernel's": (lambda root, base: (root / base / "ports/1/rate").write_text(
        "fast\n"), "rate not read: 'fast'"),
    "GID unreadable": (lambda root, base: _replace_by_dir(root / base / "ports/1/gids/3"),
                       "GID 3 not read"),
    "GID type unreadable": (lambda root, base: _replace_by_dir(
        root / base / "ports/1/gid_attrs/types/3"), "the type of GID 3 not read"),
    "PCI address unreadable": (lambda root, base: _replace_by_dir(root / base / "device/uevent"),
                               "PCI address of mlx5_9 not read"),
    "no network interface": (lambda root, base: shutil.rmtree(root / base / "device/net"),
                             "RX discards not read: no network interface"),
}


def _replace_by_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_a_port_file_that_cannot_be_read_is_unknown_never_fail(h100: FakeNode, case) -> None:
    breaks, piece = UNREADABLE[case]
    breaks(h100.root, "sys/class/infiniband/mlx5_9")
    got, evidence = found(h100, "rdma")["rdma mlx5_9:1"]
    assert got == UNKNOWN and piece in evidence, evidence


@pytest.mark.parametrize("ethtool, piece", [
    (None, "RX discards not read: ethtool not on PATH"),
    ("echo 'Cannot get stats strings information: Operation not supported' >&2; exit 95",
     "RX discards not read: exit 95"),
    ("echo 'NIC statistics:'; echo '     rx_packets: 5'",
     "printed no rx_prio*_discards counter"),
])
def test_ethtool_silent_or_without_the_counters_is_unknown(h100: FakeNode, ethtool, piece) -> None:
    script = h100.bin / "ethtool"
    if ethtool is None:
        script.unlink()
    else:
        script.write_text(f"#!/bin/sh\n{ethtool}\n")
    got = found(h100, "rdma")
    assert {s for s, _ in got.values()} == {UNKNOWN}
    assert piece in got["rdma mlx5_0:1"][1], got["rdma mlx5_0:1"][1]


# --------------------------------------------------------------------------- fabric manager


@pytest.mark.parametrize("said", ["inactive", "failed"])
def test_a_fabric_manager_not_running_fails(node: FakeNode, said: str) -> None:
    node.service("nvidia-fabricmanager", said)
    got, evidence = one(node, "fabric_manager")
    assert got == FAIL and f"nvidia-fabricmanager {said}" in evidence


def test_a_fabric_manager_starting_or_not_told_is_unknown(node: FakeNode) -> None:
    node.service("nvidia-fabricmanager", "activating")
    assert one(node, "fabric_manager")[0] == UNKNOWN
    (node.bin / "hang-systemctl").write_text("")
    got, evidence = one(node, "fabric_manager")
    assert got == UNKNOWN and "ran past" in evidence
    (node.bin / "systemctl").unlink()
    (node.bin / "hang-systemctl").unlink()
    os.environ["PATH"] = str(node.bin)     # no systemctl anywhere (monkeypatched PATH)
    got, evidence = one(node, "fabric_manager")
    assert got == UNKNOWN and "systemctl not on PATH" in evidence


def test_a_shape_that_declares_no_fabric_manager_has_no_such_probe(tmp_path: Path,
                                                                monkeypatch) -> None:
    fake = FakeNode(tmp_path / "node", "BM.GPU.B200.8")
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    assert "fabric_manager" not in {r.name for r in check.run_probes(context(fake))}

# --------------------------------------------------------------------------- history


def _record(node: str, verdict: str, when: float, value: float = 90.0) -> store.Record:
    return store.Record(node=node, check="osu_bw", variant="buffers=D-D nodes=2",
                        size=4194304, figure="bandwidth", value=value, unit="GB/s",
                        verdict=verdict, time=when, session=f"sweep-{when:.0f}",
                        documented=100.0, floor=95.0)


def _history(tmp_path: Path, *records: store.Record) -> Path:
    """A history of ``records``, its nodes' snapshots published (as every writer does:
    ocibench.history.current)."""
    path = tmp_path / "history.sqlite"
    current.add(path, records, "test")
    return path


def history_finding(fake: FakeNode, db: Path, since: float = 0.0) -> tuple[str, str]:
    ctx = context(fake)
    ctx.history_db, ctx.history_since = db, since
    return {r.name: (r.state, r.evidence) for r in check.run_probes(ctx)}["history"]


def test_a_figure_failed_in_the_nodes_latest_run_fails(node: FakeNode, tmp_path: Path) -> None:
    db = _history(tmp_path, _record("gpu-1", "pass", 1000.0, 99.0),
                  _record("gpu-1", "fail", 2000.0, 80.0), _record("gpu-2", "pass", 2000.0))
    got, evidence = history_finding(node, db)
    assert got == FAIL, evidence
    assert "osu_bw buffers=D-D nodes=2 4194304 B bandwidth 80 GB/s (floor 95)" in evidence


def test_a_figure_that_failed_before_and_passes_now_passes(node: FakeNode,
                                                           tmp_path: Path) -> None:
    db = _history(tmp_path, _record("gpu-1", "fail", 1000.0, 80.0),
                  _record("gpu-1", "pass", 2000.0, 99.0))
    got, evidence = history_finding(node, db)
    assert got == PASS and "1 figures, none failed" in evidence


def test_no_history_or_none_of_this_node_is_unknown(node: FakeNode, tmp_path: Path) -> None:
    assert history_finding(node, tmp_path / "none.sqlite")[0] == UNKNOWN
    db = _history(tmp_path, _record("gpu-2", "fail", 2000.0))
    got, evidence = history_finding(node, db)
    assert got == UNKNOWN and "no snapshot of gpu-1" in evidence
    # the history itself is never opened: a file that is not one has no snapshots
    (tmp_path / "bad.sqlite").write_text("not a database")
    got, evidence = history_finding(node, tmp_path / "bad.sqlite")
    assert got == UNKNOWN and "no snapshot of gpu-1" in evidence


def test_failures_older_than_a_persons_resume_are_not_held(node: FakeNode,
                                                           tmp_path: Path) -> None:
    db = _history(tmp_path, _record("gpu-1", "fail", 2000.0, 80.0))
    got, evidence = history_finding(node, db, since=3000.0)
    assert got == PASS and "1 failed before a person resumed the node" in evidence


def _steady(sweeps: int, low: dict[int, float] | None = None) -> list[store.Record]:
    """``sweeps`` sweeps of 4 nodes at 100 GB/s give or take 0.2; gpu-1 at ``low``'s
    value in the sweeps it names."""
    records = []
    for sweep in range(sweeps):
        for n in range(1, 5):
            value = 100.0 + 0.2 * ((sweep + n) % 3 - 1)
            if n == 1 and sweep in (low or {}):
                value = (low or {})[sweep]
            records.append(_record(f"gpu-{n}", "pass", 1000.0 * (sweep + 1), value))
    return records


def _drifting_history(tmp_path: Path, persists: bool) -> Path:
    """gpu-1 below its 3 peers in its last sweeps (drift's rule, against the peers of
    the same sweep: ocibench.history.drift): at 90 in the last 2 (two separate low
    sweeps: it persists), or at 80 in the last one only (the median of its last 2 is
    10 % low: flagged, once)."""
    return _history(tmp_path, *_steady(20, {18: 90.0, 19: 90.0} if persists else {19: 80.0}))


def drift_finding(fake: FakeNode, db: Path, since: float = 0.0) -> tuple[str, str]:
    ctx = context(fake)
    ctx.history_db, ctx.history_since = db, since
    return {r.name: (r.state, r.evidence) for r in check.run_probes(ctx)}["drift"]


def test_a_drift_that_persists_fails(node: FakeNode, tmp_path: Path) -> None:
    got, evidence = drift_finding(node, _drifting_history(tmp_path, persists=True))
    assert got == FAIL, evidence
    assert "osu_bw" in evidence and "drifting" in evidence and "persists" in evidence


def test_a_first_drift_flag_is_unknown_never_a_drain(node: FakeNode, tmp_path: Path) -> None:
    got, evidence = drift_finding(node, _drifting_history(tmp_path, persists=False))
    assert got == UNKNOWN and "not yet persisting" in evidence, evidence


def test_a_drift_before_a_persons_resume_is_not_held(node: FakeNode, tmp_path: Path) -> None:
    db = _drifting_history(tmp_path, persists=True)
    got, evidence = drift_finding(node, db, since=30000.0)
    assert got == UNKNOWN and "measured before a person resumed" in evidence, evidence


def test_no_drift_passes(node: FakeNode, tmp_path: Path) -> None:
    got, evidence = drift_finding(node, _history(tmp_path, *_steady(20)))
    assert got == PASS and "no figure of gpu-1 drifting: 1 judged" in evidence, evidence


def test_drift_on_one_sweep_is_unknown_never_a_pass(node: FakeNode, tmp_path: Path) -> None:
    """Nothing compared: drift needs 18 sweeps of a figure (ocibench.history.drift)."""
    got, evidence = drift_finding(node, _history(tmp_path, _record("gpu-1", "pass", 1000.0)))
    assert got == UNKNOWN, evidence
    assert "none of the 1 figures of gpu-1 has the 18 sweeps drift needs" in evidence


# --------------------------------------------------------------------------- snapshots
# The history and drift probes read the node's snapshot (ocibench.history.current),
# never the history: 800 MB after a year of a 1,000-node cluster, on shared storage,
# and held by its writer for as long as a sweep commits.


def test_the_history_probes_never_open_the_history(node: FakeNode, tmp_path: Path) -> None:
    db = _history(tmp_path, _record("gpu-1", "fail", 2000.0, 80.0))
    db.write_bytes(b"not a database any more")      # what the probes read is published
    assert history_finding(node, db)[0] == FAIL


def test_a_writer_holding_the_history_costs_the_healthcheck_nothing(node: FakeNode,
                                                                     tmp_path: Path) -> None:
    """A writer holding the history's lock made every reader wait SQLite's busy timeout
    (60 s): past Slurm's limit, before the state was written."""
    import subprocess
    import sys

    db = _history(tmp_path, *_steady(20))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         f"db = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
         "db.execute('BEGIN EXCLUSIVE')\nprint('held', flush=True)\ntime.sleep(120)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        ctx = context(node, deadline_s=5.0)
        ctx.history_db = db
        began = time.monotonic()
        results = {r.name: r for r in check.run_probes(ctx)}
        assert time.monotonic() - began < 8      # a bound, not a benchmark (docs)
    finally:
        holder.kill()
        holder.wait()
    assert results["history"].state == PASS, results["history"]
    assert results["drift"].state == PASS, results["drift"]


def test_a_write_in_flight_is_unknown_until_published(node: FakeNode, tmp_path: Path) -> None:
    db = _history(tmp_path, _record("gpu-1", "pass", 1000.0))
    intent = current.Intent(db, ["gpu-1", "gpu-2"], "sweep-2")
    with store.History(db) as history:
        history.add([_record("gpu-1", "fail", 2000.0, 80.0)])
        # committed, not yet published: the snapshot (a pass) is behind the history
        got, evidence = history_finding(node, db)
        assert got == UNKNOWN and "has not published gpu-1's snapshot yet" in evidence
        assert "session 'sweep-2'" in evidence, evidence
        intent.finish(history)
    assert history_finding(node, db)[0] == FAIL
    assert not list((current.directory(db) / "writing").iterdir())


def test_a_dead_writers_nodes_are_published_by_the_next_write(node: FakeNode,
                                                              tmp_path: Path) -> None:
    """A writer killed between its commit and its publishing: its nodes stay unknown
    (never the stale pass) until the next write publishes them with its own."""
    import subprocess
    import sys

    db = _history(tmp_path, _record("gpu-1", "pass", 1000.0))
    code = ("import os\nfrom pathlib import Path\n"
            "from ocibench.history import current, store\n"
            f"db = Path({str(db)!r})\n"
            "current.Intent(db, ['gpu-1'], 'sweep-killed')\n"
            "with store.History(db) as history:\n"
            "    history.add([store.Record('gpu-1', 'osu_bw', 'buffers=D-D nodes=2', 4194304,"
            " 'bandwidth', 80.0, 'GB/s', 'fail', 2000.0, 'sweep-killed', 100.0, 95.0)])\n"
            "os._exit(9)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 9, done.stderr
    got, evidence = history_finding(node, db)
    assert got == UNKNOWN and "session 'sweep-killed'" in evidence, evidence
    current.add(db, [_record("gpu-2", "pass", 3000.0)], "history add")   # another node's
    got, evidence = history_finding(node, db)
    assert got == FAIL and "80 GB/s" in evidence, evidence
    assert not list((current.directory(db) / "writing").iterdir())


@pytest.mark.parametrize("damage, says", [
    (lambda path: path.write_text("{"), "not JSON"),
    (lambda path: path.write_text(path.read_text().replace('"gpu-1"', '"gpu-2"')),
     "the snapshot of 'gpu-2', not gpu-1"),
    (lambda path: path.write_text(path.read_text().replace('"version": 1', '"version": 2')),
     "version 2; this ocibench reads 1"),
    (lambda path: path.unlink(), "no snapshot of gpu-1"),
])
def test_a_snapshot_that_cannot_be_trusted_is_unknown(node: FakeNode, tmp_path: Path,
                                                      damage, says: str) -> None:
    db = _history(tmp_path, _record("gpu-1", "fail", 2000.0, 80.0))
    damage(current.snapshot_path(db, "gpu-1"))
    for name in ("history", "drift"):
        ctx = context(node)
        ctx.history_db = db
        got = {r.name: r for r in check.run_probes(ctx)}[name]
        assert got.state == UNKNOWN and says in got.evidence, got


def test_a_snapshot_others_may_write_is_not_trusted(node: FakeNode, tmp_path: Path) -> None:
    """A failure in a snapshot drains the node: one that another user could have
    written (a directory or file writable by others, or someone else's) is unknown."""
    db = _history(tmp_path, _record("gpu-1", "fail", 2000.0, 80.0))
    where = current.directory(db)
    where.chmod(0o777)
    got, evidence = history_finding(node, db)
    assert got == UNKNOWN and "may be written by others (mode 777)" in evidence, evidence
    where.chmod(0o755)
    current.snapshot_path(db, "gpu-1").chmod(0o666)
    assert "may be written by others (mode 666)" in history_finding(node, db)[1]
    current.snapshot_path(db, "gpu-1").chmod(0o644)
    if os.geteuid() == 0:
        os.chown(current.snapshot_path(db, "gpu-1"), 54321, 54321)
        got, evidence = history_finding(node, db)
        assert got == UNKNOWN and "belongs to uid 54321" in evidence, evidence


# --------------------------------------------------------------------------- the deadline


def test_a_probe_still_working_at_the_deadline_is_unknown_and_the_run_ends(
        node: FakeNode, tmp_path: Path, monkeypatch) -> None:
    """A probe's Python work has no tool timeout (the history probe waited 60 s on
    SQLite): past the deadline it is unknown, and the run writes its state in time."""
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    stuck = ("history", lambda ctx: True, lambda ctx: time.sleep(60) or [])
    monkeypatch.setattr(probes, "PROBES", (*probes.PROBES, stuck))
    began = time.monotonic()
    outcome = check.check(_options(node, tmp_path, deadline_s=2.0))
    took = time.monotonic() - began
    assert took < 6, took       # the deadline and the state's write (a bound)
    got = {r.name: r for r in outcome.state.probes}["history"]
    assert got.state == UNKNOWN and "ran past the run's deadline" in got.evidence, got
    assert outcome.code == check.UNJUDGED
    written = state.read(tmp_path / "state.json")
    assert written is not None and written.probes == outcome.state.probes


def test_a_probe_that_raises_is_unknown_never_a_traceback(node: FakeNode,
                                                          monkeypatch) -> None:
    def broken(ctx):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(probes, "PROBES", (("history", lambda ctx: True, broken),))
    [got] = check.run_probes(context(node))
    assert got.state == UNKNOWN
    assert got.evidence == "the probe failed: ZeroDivisionError: division by zero"


def test_a_probe_cut_at_the_deadline_leaves_nothing_behind(node: FakeNode,
                                                           monkeypatch) -> None:
    """The RDMA counters it read, the kernel log's mark: only a probe that ended in
    time hands them on to the state file."""
    def late(ctx):
        ctx.counters["mlx5_4:1"] = 99
        time.sleep(3)
        return []
    ctx = context(node, deadline_s=1.0)
    monkeypatch.setattr(probes, "PROBES", (("rdma", lambda c: True, late),))
    [got] = check.run_probes(ctx)
    assert got.state == UNKNOWN and ctx.counters == {}
    time.sleep(2.5)             # the abandoned thread ends, writing into its own copy
    assert ctx.counters == {}


def test_every_tool_hanging_ends_within_the_deadline(node: FakeNode, tmp_path: Path,
                                                     monkeypatch) -> None:
    """nvidia-smi (a GPU off the bus hangs it in the driver) and systemctl both hang:
    the GPU listing costs its timeout once, systemctl what is left before the
    deadline; every probe that needed them is unknown, nothing drains."""
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    db = _history(tmp_path, _record("gpu-1", "pass", 1000.0))
    node.hang()
    (node.bin / "hang-systemctl").write_text("")
    began = time.monotonic()
    outcome = check.check(check.Options(shape=node.shape, root=node.root, node="gpu-1",
                                        state_path=tmp_path / "state.json", history_db=db,
                                        deadline_s=3.5, tool_timeout_s=2.0))
    took = time.monotonic() - began
    assert took < 3.5 + 2, took          # a bound (scripts/bench-healthcheck.py measures)
    found = {r.name: r for r in outcome.state.probes}
    for name in ("gpu_count", "row_remap", "pcie", "nvlink", "fabric_manager"):
        assert found[name].state == UNKNOWN, found[name]
    assert "]: systemctl ran past 1." in found["fabric_manager"].evidence, \
        found["fabric_manager"]
    # what was published is read first: the hung tools leave it judged
    assert found["history"].state == PASS, found["history"]
    assert outcome.code == check.UNJUDGED and outcome.state.action == state.NONE


# --------------------------------------------------------------------------- the kernel log
# /dev/kmsg gives every record still in the ring buffer to each new reader: `dmesg
# --clear` empties what dmesg shows, not what /dev/kmsg gives.  Records are judged by
# their sequence numbers (the state file's kernel_seq_passed, of a boot id).

XID_79 = "NVRM: Xid (PCI:0000:20:00): 79, pid=0, name=python, GPU has fallen off the bus."
XID_48 = "NVRM: Xid (PCI:0000:30:00): 48, pid=0, name=python, DBE (double-bit error)"


def xid_after(fake: FakeNode, tmp_path: Path, **kw) -> tuple[str, str, state.HealthState]:
    outcome = check.check(_options(fake, tmp_path, **kw))
    written = state.read(tmp_path / "state.json")
    assert written is not None
    got = {r.name: r for r in outcome.state.probes}["xid"]
    return got.state, got.evidence, written


def test_an_xid_fails_every_run_until_acknowledged(node: FakeNode, tmp_path: Path,
                                                   monkeypatch) -> None:
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    node.kernel_records((0, "Linux version 6.8.0"), (1, "nvidia: loading"))
    got, evidence, written = xid_after(node, tmp_path)
    assert got == PASS and written.kernel_seq_passed == 1
    node.kernel_records((0, "Linux version 6.8.0"), (1, "nvidia: loading"), (2, XID_79))
    for _ in range(3):   # what `dmesg --clear` would not change: still in /dev/kmsg
        got, evidence, written = xid_after(node, tmp_path)
        assert got == FAIL and "Xid 79" in evidence, evidence
        assert (written.kernel_seq_passed, written.kernel_seq_read) == (1, 2)
    # a dry run acknowledges nothing
    got, evidence, written = xid_after(node, tmp_path, dry_run=True, clear_kernel_log=True)
    assert got == PASS and written.kernel_seq_passed == 1
    # a person, the GPU reset: acknowledged, and the runs after pass on the same log
    got, evidence, written = xid_after(node, tmp_path, clear_kernel_log=True)
    assert got == PASS and "acknowledged (Xid 79 GPU has fallen off the bus" in evidence
    assert written.kernel_seq_passed == 2
    got, evidence, written = xid_after(node, tmp_path)
    assert got == PASS and "in 0 log lines (records up to 2 judged before)" in evidence
    # a new Xid fails, named alone
    node.kernel_records((1, "nvidia: loading"), (2, XID_79), (3, XID_48))
    got, evidence, written = xid_after(node, tmp_path)
    assert got == FAIL and "Xid 48" in evidence and "Xid 79" not in evidence, evidence
    assert written.kernel_seq_passed == 2


def test_a_new_boot_judges_its_records_afresh(node: FakeNode, tmp_path: Path,
                                              monkeypatch) -> None:
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    node.kernel_records(*[(n, f"line {n}") for n in range(400)])
    assert xid_after(node, tmp_path)[2].kernel_seq_passed == 399
    node.boot("0f0e0d0c-0b0a-4908-8706-050403020100")     # rebooted: numbers start over
    node.kernel_records((0, "Linux version 6.8.0"), (1, XID_79))
    got, evidence, written = xid_after(node, tmp_path)
    assert got == FAIL and "Xid 79" in evidence, evidence
    assert written.kernel_boot_id == "0f0e0d0c-0b0a-4908-8706-050403020100"
    assert (written.kernel_seq_passed, written.kernel_seq_read) == (-1, 1)


def test_without_a_boot_id_every_record_is_judged(node: FakeNode) -> None:
    (node.root / "proc/sys/kernel/random/boot_id").unlink()
    node.kernel_records((0, "Linux version 6.8.0"), (1, XID_79))
    previous = state.HealthState(node="gpu-1", time=0.0, duration_s=0.0, interval_s=None,
                                 action=state.NONE, reason="", kernel_boot_id="",
                                 kernel_seq_passed=5)
    ctx = context(node, previous=previous)
    ctx.kernel_since = ("", 5)
    assert {r.name: r.state for r in check.run_probes(ctx)}["xid"] == FAIL


def test_a_kernel_log_that_gives_no_record_is_unknown(node: FakeNode) -> None:
    """A reader that got nothing (a container's /dev/kmsg) read no log: not a pass."""
    (node.root / "dev" / "kmsg").write_text("")
    got, evidence = one(node, "xid")
    assert got == UNKNOWN and "gave no record" in evidence, evidence


def test_a_persons_resume_excuses_what_the_drain_was_judged_on(node: FakeNode,
                                                               tmp_path: Path) -> None:
    """The records the run before had read, and the history measured before the
    resume, no longer fail: judged again without them (check._rejudged; Slurm's side,
    the person's resume itself, is tests/test_healthcheck_cluster.py's)."""
    db = _history(tmp_path, _record("gpu-1", "fail", 2000.0, 80.0))
    node.kernel_records((0, "Linux version 6.8.0"), (1, XID_79))
    boot = (node.root / "proc/sys/kernel/random/boot_id").read_text().strip()
    previous = state.HealthState(
        node="gpu-1", time=2500.0, duration_s=0.5, interval_s=None, action=state.DRAIN,
        reason="ocibench: xid", drained_reason="ocibench: xid", drained_probes=("xid",),
        kernel_boot_id=boot, kernel_seq_passed=0, kernel_seq_read=1)
    ctx = context(node, previous=previous)
    ctx.history_db, ctx.kernel_since = db, (boot, 0)
    results = check.run_probes(ctx)
    assert {r.name: r.state for r in results if r.name in ("xid", "history")} == \
        {"xid": FAIL, "history": FAIL}
    again = {r.name: r for r in check._rejudged(ctx, results, previous, 3000.0)}
    assert again["xid"].state == PASS and again["history"].state == PASS, again
    assert again["gpu_count"] == {r.name: r for r in results}["gpu_count"]   # not re-run


# --------------------------------------------------------------------------- the run


def test_probes_past_the_deadline_are_unknown(node: FakeNode) -> None:
    node.hang()
    results = check.run_probes(context(node, deadline_s=1.1))
    # the listing took the whole second; nothing after it started a tool
    late = [r for r in results if "deadline passed" in r.evidence]
    assert late and all(r.state == UNKNOWN for r in late)
    # named as when they run (the vendor row's names): a drain for row_remap or nvlink
    # stays while they could not be judged
    assert {"row_remap", "nvlink", "fabric_manager"} <= {r.name for r in late}
    assert not [r for r in results if r.state == FAIL]


def test_the_drain_reason_is_one_short_line_naming_fault_code_probe_and_evidence() -> None:
    """Each failing probe with its fault code on the action ladder, the first one's
    first, kept when the reason is cut at Slurm's length.  Seen failing without the
    codes: 'ocibench: gpu_count (7x A100; ...' had none."""
    failed = [state.ProbeResult("gpu_count", FAIL, "7x A100; the shape: 8x A100 [nvidia-smi]",
                                0, 0),
              state.ProbeResult("rdma mlx5_6:1", FAIL, "port state\n1: DOWN [read x]", 0, 0)]
    assert check.drain_reason(failed) == (
        "ocibench: [HPCGPU-0001-0001] gpu_count (7x A100; the shape: 8x A100); "
        "[HPCGPU-0008-0001] rdma mlx5_6:1 (port state 1: DOWN)")
    long = [state.ProbeResult("xid", FAIL, "Xid 79 " * 100, 0, 0),
            state.ProbeResult("gpu_count", FAIL, "7x A100", 0, 0)]
    reason = check.drain_reason(long)
    assert len(reason) == 200 and reason.endswith("...") \
        and reason.startswith("ocibench: [HPCGPU-0016-0001] xid (Xid 79 "), reason
    # ours where OCI codes no such check; none for a failure of no ladder entry
    assert check.drain_reason([state.ProbeResult("ras", FAIL, "1 uncorrectable", 0, 0)]) \
        == "ocibench: [OCIBENCH-GPU-0001] ras (1 uncorrectable)"
    assert check.drain_reason([state.ProbeResult("no_such_probe", FAIL, "x", 0, 0)]) \
        == "ocibench: no_such_probe (x)"


def _options(fake: FakeNode, tmp_path: Path, **kw) -> check.Options:
    return check.Options(shape=fake.shape, root=fake.root, node="gpu-1",
                         state_path=tmp_path / "state.json", tool_timeout_s=1.0, **kw)


def test_a_clean_run_writes_its_state_and_asks_slurm_nothing(node: FakeNode, tmp_path: Path,
                                                             monkeypatch) -> None:
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    outcome = check.check(_options(node, tmp_path, interval_s=300))
    assert outcome.code == check.OK, outcome.lines
    written = state.read(tmp_path / "state.json")
    assert written is not None and written.action == state.NONE and written.interval_s == 300
    # each port's link_downed, and the RX discards of each cluster-network port
    assert written.link_downed == {**{p: 0 for p in node.exp.rdma_devices},
                                   **{f"{p} rx_discards": 0 for p in node.exp.rdma_devices
                                      if p != "mlx5_4:1"}}
    assert {p.name for p in written.probes} >= {"gpu_count", "xid", "rdma mlx5_4:1"}


def test_only_unknowns_exit_3_and_drain_nothing(node: FakeNode, tmp_path: Path,
                                                monkeypatch) -> None:
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    node.hang()
    outcome = check.check(_options(node, tmp_path))
    assert outcome.code == check.UNJUDGED and outcome.state.action == state.NONE
    assert check.exit_code(outcome, prolog=True) == check.OK


def test_a_failure_without_slurm_is_said_and_nothing_recorded_as_drained(
        node: FakeNode, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    node.gpus(7)
    outcome = check.check(_options(node, tmp_path))
    # a failure is 1, whether Slurm could be told or not (docs/healthcheck.md)
    assert outcome.code == check.FAILED
    assert any("cannot ask Slurm about gpu-1: sinfo not found" in line
               for line in outcome.lines), outcome.lines
    written = state.read(tmp_path / "state.json")
    assert written is not None and written.action == state.NONE
    assert written.drained_reason == ""
    # as a prolog, no answer is no drain: the job runs (an exit 1 would make Slurm
    # drain the node itself, "Prolog error", outside ocibench's drain budget)
    assert check.exit_code(outcome, prolog=True) == check.OK


def test_a_slurm_that_never_answers_costs_the_run_its_slurm_time_only(
        node: FakeNode, tmp_path: Path, monkeypatch) -> None:
    """A hung slurmctld (here a `sinfo` that never answers: the first call of the drain
    branch) is given what remains of the run's Slurm time, --deadline plus --slurm-time,
    not 10 s a call: Slurm kills the program at 60 s, before its state is written.  The
    state says why nothing was drained.  Seen failing without the fix: the run took
    10 s (a call's own timeout) and its state said nothing of Slurm."""
    path = no_slurm_path(node, tmp_path)
    hung = tmp_path / "hung"
    hung.mkdir()
    for tool in ("sinfo", "scontrol"):
        (hung / tool).write_text("#!/bin/sh\nexec sleep 60\n")
        (hung / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{hung}:{path}")
    node.gpus(7)
    began = time.monotonic()
    outcome = check.check(_options(node, tmp_path, deadline_s=1.0, slurm_window_s=1.5,
                                   started=began))
    took = time.monotonic() - began
    assert took < 1.0 + 1.5 + 1.0, (took, outcome.lines)     # a bound, not a benchmark
    assert outcome.code == check.FAILED and not outcome.held, outcome.lines
    written = state.read(tmp_path / "state.json")
    assert written is not None and written.action == state.NONE, written
    assert written.drained_reason == "", written
    assert written.slurm_error.startswith("cannot ask Slurm about gpu-1: sinfo "), written
    assert "Slurm did not answer within" in written.slurm_error, written


def test_a_bad_state_file_is_one_warning_and_the_run_goes_on(node: FakeNode,
                                                             tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    outcome = check.check(_options(node, tmp_path))
    assert outcome.code == check.OK
    assert outcome.lines[0].startswith(f"warning: {tmp_path / 'state.json'}: not JSON")
    assert state.read(tmp_path / "state.json") is not None   # replaced by this run's


def test_a_dry_run_keeps_the_counters_of_the_last_real_run(node: FakeNode,
                                                           tmp_path: Path) -> None:
    check.check(_options(node, tmp_path))
    node.port("mlx5_4:1", link_downed=4)
    check.check(_options(node, tmp_path, dry_run=True))   # fails: no Slurm; records
    written = state.read(tmp_path / "state.json")
    assert written is not None and written.link_downed["mlx5_4:1"] == 0


def test_one_run_at_a_time_on_a_node(node: FakeNode, tmp_path: Path) -> None:
    """The health check and the prolog may start together: the second waits for the
    first (up to state.LOCK_WAIT_S: tests/test_root_owns.py), so that neither writes the
    state over a drain the other recorded."""
    import threading

    assert state.LOCK_WAIT_S > 3
    with state.locked(tmp_path / "state.json"):     # another run holds the node's state
        done: list[check.Outcome] = []
        runner = threading.Thread(target=lambda: done.append(check.check(
            _options(node, tmp_path))))
        runner.start()
        runner.join(3)
        assert runner.is_alive() and not done
    runner.join(30)
    assert done and done[0].code == check.OK, done


def test_a_state_that_cannot_be_locked_drains_nothing(node: FakeNode, tmp_path: Path,
                                                      monkeypatch) -> None:
    monkeypatch.setenv("PATH", no_slurm_path(node, tmp_path))
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("OCIBENCH_RUN_DIR", str(tmp_path / "file" / "run"))   # root's lock
    node.gpus(7)
    outcome = check.check(check.Options(shape=node.shape, root=node.root, node="gpu-1",
                                        state_path=tmp_path / "file" / "state.json"))
    # one line: without the lock, nothing is judged, written or drained
    assert outcome.lines == [f"cannot lock {tmp_path / 'file' / 'state.json'}: "
                             f"{tmp_path / 'file'}: not a directory, on the way to "
                             f"{tmp_path / 'file' / 'run'}: this run judged nothing"], \
        outcome.lines
    assert outcome.state.action == state.NONE and outcome.code == check.UNJUDGED

# --------------------------------------------------------------------------- the command


def test_the_command_runs_on_a_fake_node(node: FakeNode, capsys) -> None:
    code = cli.main(["healthcheck", "--shape", "BM.GPU4.8", "--root", str(node.root),
                     "--node", "gpu-1"])
    out = capsys.readouterr().out
    # every probe passes but the history's: there is none here (unknown: exit 3)
    assert code == 3, out
    assert "healthcheck of gpu-1 against BM.GPU4.8" in out and "gpu_count: pass" in out
    assert "history: unknown: no history at" in out and "drift: unknown: no history" in out
    written = json.loads(Path(os.environ["OCIBENCH_HEALTH_STATE"]).read_text())
    assert written["node"] == "gpu-1"


@pytest.mark.parametrize("argv, says", [
    (["--root", "/nonexistent-root"], "--root /nonexistent-root: not a directory"),
    (["--shape", "BM.Nothing"], "BM.Nothing"),
])
def test_bad_input_is_one_line_and_exit_2(node: FakeNode, capsys, argv, says) -> None:
    code = cli.main(["healthcheck", *argv])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("how", ["--node", "SLURMD_NODENAME"])
def test_a_node_name_that_is_no_host_name_is_refused(node: FakeNode, capsys, monkeypatch,
                                                      how: str) -> None:
    """The name goes into a drain reason, the state file and the snapshot's file name:
    refused with one line, shown escaped (a terminal escape is never printed raw)."""
    bad = "gpu-1\x1b[2J\x1b]0;owned\x07"
    argv = ["healthcheck", "--shape", "BM.GPU4.8", "--root", str(node.root)]
    if how == "--node":
        argv += ["--node", bad]
    else:
        monkeypatch.setenv("SLURMD_NODENAME", bad)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == check.USAGE and out == "" and len(err.splitlines()) == 1, err
    assert f"{ascii(bad)} is not a host name" in err and "\x1b" not in err
    assert not Path(os.environ["OCIBENCH_HEALTH_STATE"]).exists()


def test_a_deadline_past_slurms_limit_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["healthcheck", "--deadline", "90"])
    assert exit_.value.code == 2
    assert "Slurm kills the program at 60 s" in capsys.readouterr().err


def test_every_shape_with_gpus_has_a_vendor_row() -> None:
    for name in shapes.known_shapes():
        shape = shapes.load(name)
        if shape.gpus:
            assert probes.vendor_of(shape) is not None, name


def test_the_probes_read_the_vendor_row_and_never_test_its_name() -> None:
    """A vendor is one row (ocibench.accelerators): the probes neither compare a
    vendor's name nor key a table of their own by it (what kept AMD nodes from the
    memory-error items: ``vendor == "nvidia"``, ``{"nvidia": ...}``)."""
    names = set(accelerators.VENDORS)
    tree = ast.parse(Path(probes.__file__).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            operands = [k for k in node.keys if k is not None]
        else:
            continue
        found += [f"line {node.lineno}: {o.value!r}" for o in operands
                  if isinstance(o, ast.Constant) and o.value in names]
    assert not found
    for row in accelerators.VENDORS.values():
        assert row.gpu_memory and row.kernel_log, row.vendor


def test_a_shape_without_gpus_has_no_vendors_links(tmp_path: Path) -> None:
    """No vendor is assumed: a CPU shape's device_link item is no vendor's (it was
    NVIDIA's "nvlink"), and is not probed."""
    ctx = probes.Context(root=tmp_path, shape=shapes.load("BM.Optimized3.36"), node="cpu-1",
                         deadline=time.monotonic() + 5)
    assert probes.link_of(ctx) is None
    assert probes.item_name("device_link", ctx) == "device_link"
    applies = {name: when(ctx) for name, when, _probe in probes.PROBES}
    assert applies["device_link"] is False
