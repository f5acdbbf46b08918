"""``ocibench ticket NODE`` (ocibench.health.ticket): the evidence archive for a support
ticket, built from a fake node (tests/health_fakes.py: its sysfs tree and kernel log) with
fake tools on PATH that print published output (tests/data/ticket/README.md).

Its contents, that it holds nothing secret, its size cap, that it is built the same twice,
and that an absent tool is recorded, never a traceback."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from health_fakes import FakeNode
from intel_row import INTEL, intel_shape
from ocibench import accelerators, cli, shapes
from ocibench.health import state, ticket
from ocibench.health.state import FAIL, PASS

DATA = Path(__file__).parent / "data" / "ticket"
SECRET = "zz-secret-value-42"
XID = "NVRM: Xid (PCI:0000:10:00): 79, pid=0, GPU has fallen off the bus."


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    fake = FakeNode(tmp_path / "node")
    fake.kernel_log("systemd[1]: Started Session 3 of user opc.", XID)
    (fake.root / "etc").mkdir()
    (fake.root / "etc" / "os-release").write_text('NAME="Oracle Linux Server"\n'
                                                  'PRETTY_NAME="Oracle Linux Server 8.10"\n')
    (fake.root / "etc" / "ssh").mkdir()
    (fake.root / "etc" / "ssh" / "ssh_host_ed25519_key").write_text(
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    (fake.root / "proc/sys/kernel/osrelease").write_text("5.15.0-302.167.6.el8uek.x86_64\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    # nvidia-smi -q prints the published output; the other queries go to the node's fake
    _script(tools / "nvidia-smi", f"""case "$*" in
  "-q") exec cat {DATA / 'nvidia-smi-q.h100.txt'} ;;
  "topo -m") echo "GPU0 X NV12" ;;
  "--query-gpu=index,driver_version,vbios_version --format=csv,noheader")
    echo "0, 565.57.01, 96.00.74.00.01" ;;
  *) exec {fake.bin / 'nvidia-smi'} "$@" ;;
esac""")
    # a tool that prints its environment: what it is given must hold nothing of ours
    _script(tools / "ibstat", "echo \"CA 'mlx5_0'\"\necho '\tFirmware version: 20.35.1012'\nenv")
    system = tmp_path / "system"
    system.mkdir()
    for name in ("sh", "cat", "env", "echo"):
        if os.path.exists(f"/usr/bin/{name}"):
            os.symlink(f"/usr/bin/{name}", system / name)
    monkeypatch.setenv("PATH", f"{tools}:{fake.bin}:{system}")
    monkeypatch.setenv("OCIBENCH_TICKET_SECRET", SECRET)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    health = tmp_path / "state" / "healthcheck.json"
    state.write(state.HealthState(
        node="node1", time=1790000000.0, duration_s=0.8, interval_s=300,
        action=state.DRAIN, reason="ocibench: xid (Xid 79)",
        probes=(state.ProbeResult("xid", FAIL, f"{XID} [/dev/kmsg]", 1790000000.0, 0.01),
                state.ProbeResult("gpu_count", PASS, "8x A100", 1790000000.0, 0.01)),
        drained_reason="ocibench: xid (Xid 79)", drained_probes=("xid",),
        offences={"xid": 1}), health)
    output = tmp_path / "nccl.out"
    output.write_text("# nccl-tests\nexport DB_PASSWORD=hunter2\n#  Avg bus bandwidth : 12.5\n")
    out = tmp_path / "out"
    out.mkdir()
    return {"root": fake.root, "state": health, "output": output, "out": out,
            "tools": tools, "tmp": tmp_path}


def build(node: dict[str, Path], *more: str) -> tuple[int, bytes]:
    code = cli.main(["ticket", "node1", "--shape", "BM.GPU4.8", "--root", str(node["root"]),
                     "--state", str(node["state"]), "--out", str(node["out"]),
                     "--output", f"nccl_all_reduce_perf={node['output']}", *more])
    path = node["out"] / "ocibench-ticket-node1.tar.gz"
    return code, path.read_bytes() if path.exists() else b""


def members(archive: bytes) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                for m in tar.getmembers()}


def test_the_archive_holds_what_ocis_support_asks_for(node, capsys) -> None:
    code, archive = build(node)
    assert code == 0, capsys.readouterr().err
    files = members(archive)
    assert list(files)[0] == "summary.txt"
    summary = files["summary.txt"]
    assert "node node1, shape BM.GPU4.8" in summary
    # a repeat offender (xid drained and put back once): reset-gpu moved up to reboot
    assert "next step: reboot HPCGPU-0016-0001 (repeat 1: was reset-gpu)" in summary
    codes = next(line for line in summary.splitlines() if line.startswith("fault codes for OCI:"))
    assert "HPCGPU-0016-0001" in codes
    assert "figure nccl_all_reduce_perf" in summary and "OCIBENCH-FIG-0003" in summary
    assert "dmesg -T | grep -i xid" in summary             # the commands that show it
    assert "Driver Version                            : 565.57.01" in files[
        "tools/nvidia-smi-q.txt"]
    assert XID in files["kernel-log.txt"] and "Session 3" not in files["kernel-log.txt"]
    assert "hca firmware (ibstat): 20.35.1012" in files["versions.txt"]
    assert "96.00.74.00.01" in files["versions.txt"] and "Oracle Linux Server 8.10" in \
        files["versions.txt"]
    assert "mlx5_0:1 counters/link_downed: 0" in files["rdma-counters.txt"]
    assert '"offences"' in files["healthcheck.json"] and '"items"' in files["preflight.json"]
    assert "Avg bus bandwidth" in files["outputs/nccl_all_reduce_perf-nccl.out"]
    assert summary.count("\n") < 80                       # one page
    assert "written:" in capsys.readouterr().out


def test_nothing_secret_is_in_the_archive(node) -> None:
    code, archive = build(node)
    assert code == 0
    text = "\n".join(members(archive).values())
    assert SECRET not in text and "OCIBENCH_TICKET_SECRET" not in text
    assert "hunter2" not in text and "PRIVATE KEY" not in text
    assert "[redacted]" in members(archive)["outputs/nccl_all_reduce_perf-nccl.out"]


def test_the_archive_is_size_capped(node) -> None:
    # 8 MiB of output that hardly compresses, under a 256 KiB cap
    node["output"].write_bytes(os.urandom(6 * 2**20).hex().encode()[:8 * 2**20])
    code, archive = build(node, "--max-bytes", str(256 * 1024))
    assert code == 0
    assert 0 < len(archive) <= 256 * 1024
    files = members(archive)
    assert "size cap" in files["outputs/nccl_all_reduce_perf-nccl.out"] or \
        "left out (size cap" in files["summary.txt"]


def test_built_twice_it_is_the_same_bytes(node) -> None:
    _code, first = build(node)
    (node["out"] / "ocibench-ticket-node1.tar.gz").unlink()
    _code, second = build(node)
    assert first and first == second
    assert first[4:8] == b"\0\0\0\0"                       # gzip -n: no time in its header
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        assert {m.mtime for m in tar.getmembers()} == {1790000000}   # the healthcheck's run
        assert {(m.uid, m.gid, m.mode) for m in tar.getmembers()} == {(0, 0, 0o644)}
    assert gzip.decompress(first)                          # and it is a gzip


def test_absent_tools_are_recorded_never_a_traceback(node, monkeypatch, capsys) -> None:
    for tool in ("nvidia-smi", "ibstat"):
        (node["tools"] / tool).unlink()
    (node["root"] / "dev" / "kmsg").unlink()
    monkeypatch.setenv("PATH", str(node["tmp"] / "system"))
    code, archive = build(node)
    captured = capsys.readouterr()
    assert code == 0 and "Traceback" not in captured.err
    files = members(archive)
    assert files["tools/ibstat.txt"].startswith("absent: ibstat not on PATH")
    assert files["tools/nvidia-smi-q.txt"].startswith("absent: nvidia-smi not on PATH")
    assert files["kernel-log.txt"].startswith("absent: the kernel log: no ")
    assert "not collected:" in files["summary.txt"]
    assert "tools/ibstat.txt: absent: ibstat not on PATH" in files["summary.txt"]


def test_a_new_vendors_row_brings_its_own_evidence(node, monkeypatch) -> None:
    # the Intel-like row of docs/adding-a-vendor.md: its ticket field and nothing else
    monkeypatch.setitem(accelerators.VENDORS, "intel", INTEL)
    _script(node["tools"] / "xpu-smi", 'echo "xpu-smi $*"')
    (node["root"] / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (node["root"] / "proc" / "driver" / "nvidia" / "version").write_text("NVRM version: 565\n")
    hang = "i915 0000:3a:00.0: [drm] GPU HANG: ecode 12:1:85dffffb"
    (node["root"] / "dev" / "kmsg").write_text(f"4,2,2000000,-;{XID}\n4,3,3000000,-;{hang}\n")
    collected = ticket.collect(ticket.Inputs(node="node1", shape=intel_shape(),
                                             root=node["root"]))
    files = {name: data.decode() for name, data in collected.members}
    assert files["tools/xpu-smi-discovery.txt"] == "xpu-smi discovery\n"
    assert not any("nvidia-smi" in name for name in files)     # NVIDIA's tools are NVIDIA's
    assert "gpu firmware (xpu-smi): xpu-smi discovery --dump 1,2,19" in files["versions.txt"]
    assert "nvidia driver: NVRM version: 565" in files["versions.txt"]   # a file says it
    assert hang in files["kernel-log.txt"] and XID in files["kernel-log.txt"]


def test_a_shape_without_gpus_runs_no_gpu_tool(node) -> None:
    collected = ticket.collect(ticket.Inputs(node="node1", shape=shapes.load(
        "BM.Standard.E5.192"), root=node["root"]))
    names = [name for name, _data in collected.members]
    assert names[4:] == ["tools/ibstat.txt", "tools/ofed_info.txt", "rdma-counters.txt",
                         "versions.txt"]
    assert "gpu firmware" not in dict(collected.members)["versions.txt"].decode()


@pytest.mark.parametrize("args, says", [
    (["--state", "{other}"], "the healthcheck state of node node2, not node1"),
    (["--output", "no_such_check=x"], "'no_such_check' is no check of the registry"),
    (["--output", "nonsense"], "is not CHECK=FILE"),
    (["--max-bytes", "10"], "less than 65536 holds no ticket"),
])
def test_a_bad_input_is_one_line(node, capsys, args, says) -> None:
    other = node["tmp"] / "other" / "healthcheck.json"
    state.write(state.HealthState(node="node2", time=1.0, duration_s=0.1, interval_s=None,
                                  action=state.NONE, reason=""), other)
    args = [a.replace("{other}", str(other)) for a in args]
    with pytest.raises(SystemExit) if "CHECK=FILE" in says else _nothing():
        code = cli.main(["ticket", "node1", "--shape", "BM.GPU4.8",
                         "--root", str(node["root"]), "--state", str(node["state"]),
                         "--out", str(node["out"]), *args])
        assert code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (node["out"] / "ocibench-ticket-node1.tar.gz").exists()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
