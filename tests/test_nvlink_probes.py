"""The probes of a rack-scale NVLink domain (issue 33): the GPUs' NVLink fabric state
(``nvidia-smi -q``) and the IMEX service (``nvidia-imex-ctl -N``), in three states.

Published outputs (tests/data/nvlink_fabric/README.md) for what the tools print; fakes on
PATH for a healthy GB200 tray and the faults (a GPU in another clique, IMEX down).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from health_fakes import FakeNode
from ocibench.capabilities import PRESENT, UNEXPECTED, UNKNOWN
from ocibench.health import check, probes
from ocibench.health.state import FAIL, PASS
from ocibench.health.state import UNKNOWN as H_UNKNOWN
from ocibench.node import nvlink_fabric
from ocibench.shapes.probe import Ran

DATA = Path(__file__).parent / "data" / "nvlink_fabric"
GB200 = "BM.GPU.GB200.4"
UUID = "9c6f5af3-53bf-49b5-a436-b66766c413c3"


def _block(clique: str = "4026", uuid: str = UUID, state: str = "Completed",
           status: str = "Success", summary: str = "Healthy") -> str:
    """One GPU's Fabric block, as the published outputs print it."""
    return (f"    Fabric\n"
            f"        State                             : {state}\n"
            f"        Status                            : {status}\n"
            f"        CliqueId                          : {clique}\n"
            f"        ClusterUUID                       : {uuid}\n"
            f"        Health\n"
            f"            Summary                       : {summary}\n"
            f"            Bandwidth                     : Full\n")


def _smi_q(*blocks: str) -> str:
    """``nvidia-smi -q`` of a 4-GPU tray: the GPU headers, a section before and after
    each Fabric block."""
    buses = ("00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0")
    out = ["==============NVSMI LOG==============", "", "Attached GPUs : 4"]
    for bus, block in zip(buses, blocks):
        out += [f"GPU {bus}", "    Product Name                          : NVIDIA GB200",
                block.rstrip("\n"), "    Compute Mode                          : Default"]
    return "\n".join(out) + "\n"


def _tools(where: Path, smi: str | None = None, imex: str | None = None,
           imex_rc: int = 0, unit: str | None = None) -> Path:
    """A bin directory with fake nvidia-smi (answers -q), nvidia-imex-ctl (-N) and
    systemctl (is-active nvidia-imex), each printing the given text."""
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text, rc in (("nvidia-smi", smi, 0), ("nvidia-imex-ctl", imex, imex_rc),
                           ("systemctl", unit, 0 if unit == "active" else 3)):
        if text is None:
            continue
        (bin_dir / f"{name}.out").write_text(text if name != "systemctl" else text + "\n")
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\ncat "$(dirname "$0")/{name}.out"\nexit {rc}\n')
        script.chmod(0o755)
    tools = where / "tools"
    tools.mkdir(exist_ok=True)
    for tool in ("sh", "cat", "dirname"):
        if not (tools / tool).exists():
            (tools / tool).symlink_to(shutil.which(tool))
    return bin_dir


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch):
    def make(**kw) -> None:
        bin_dir = _tools(tmp_path, **kw)
        monkeypatch.setenv("PATH", f"{bin_dir}:{tmp_path / 'tools'}")
    return make


# --------------------------------------------------------------------------- fabric


def test_published_unhealthy_fabric_fails() -> None:
    gpus = nvlink_fabric.parse_fabric((DATA / "smi-q-fabric.unhealthy.dra-driver-626.txt")
                                      .read_text())
    assert [(g.state, g.status, g.clique, g.health) for g in gpus] == [
        ("Completed", "Success", "2", "Unhealthy")]
    assert gpus[0].cluster_uuid == "dc6e40c4-d722-4357-9ba6-5291dd461278"
    status, detail = nvlink_fabric.judge_fabric(gpus)
    assert status == UNEXPECTED and "fabric health Unhealthy" in detail


def test_published_insufficient_resources_fails() -> None:
    gpus = nvlink_fabric.parse_fabric(
        (DATA / "smi-q-fabric.insufficient-resources.azhpc-images-506.txt").read_text())
    status, detail = nvlink_fabric.judge_fabric(gpus)
    assert status == UNEXPECTED
    assert detail == "GPU 0: fabric registration completed with status Insufficient Resources"


def test_a_healthy_tray_passes(on_path) -> None:
    on_path(smi=_smi_q(*[_block()] * 4))
    item = nvlink_fabric.probe_fabric(2.0)
    assert item.status == PRESENT, item
    assert item.detail == f"4 GPU(s) registered (Completed, Success) in clique 4026 of cluster {UUID}"


def test_a_gpu_in_another_clique_fails(on_path) -> None:
    on_path(smi=_smi_q(_block(), _block(), _block(clique="4027"), _block()))
    item = nvlink_fabric.probe_fabric(2.0)
    assert item.status == UNEXPECTED
    assert "GPUs in different NVLink cliques: GPU 0 clique 4026" in item.detail
    assert "GPU 2 clique 4027" in item.detail


@pytest.mark.parametrize("state, expected", [("Not Started", UNEXPECTED),
                                             ("In Progress", UNKNOWN),
                                             ("Not Supported", UNKNOWN)])
def test_registration_states(on_path, state: str, expected: str) -> None:
    on_path(smi=_smi_q(_block(state=state), *[_block()] * 3))
    assert nvlink_fabric.probe_fabric(2.0).status == expected


def test_no_fabric_section_or_no_tool_is_unknown(on_path) -> None:
    on_path(smi="==============NVSMI LOG==============\n")
    item = nvlink_fabric.probe_fabric(2.0)
    assert item.status == UNKNOWN and "no Fabric section" in item.detail
    on_path()      # nvidia-smi not on PATH at all
    os.remove(Path(os.environ["PATH"].split(":")[0]) / "nvidia-smi")
    item = nvlink_fabric.probe_fabric(2.0)
    assert item.status == UNKNOWN and "nvidia-smi not on PATH" in item.detail


# --------------------------------------------------------------------------- IMEX


def test_published_nvl72_domain_up_passes() -> None:
    text = (DATA / "imex-ctl-N.nvl72-18-nodes.txt").read_text()
    domain = nvlink_fabric.parse_imex_nodes(text)
    assert len(domain.nodes) == 18 and domain.state == "UP" and not domain.broken_links
    assert domain.nodes[17] == ("172.31.56.47", "READY")
    status, detail = nvlink_fabric.judge_imex(Ran("systemctl is-active nvidia-imex",
                                                  out="active\n"),
                                              Ran("nvidia-imex-ctl -N", out=text))
    assert status == PRESENT and "18 node(s) READY and connected" in detail


def test_a_node_down_in_the_domain_fails(on_path) -> None:
    text = (DATA / "imex-ctl-N.nvl72-18-nodes.txt").read_text()
    broken = (text.replace("Node #3   - 172.31.49.228   - READY ",
                           "Node #3   - 172.31.49.228   - DOWN  ")
              .replace("       2        C   C   C   C ", "       2        C   C   C   I ")
              .replace("Domain State: UP", "Domain State: DEGRADED"))
    on_path(imex=broken, unit="active")
    item = nvlink_fabric.probe_imex(2.0)
    assert item.status == UNEXPECTED
    assert item.detail.startswith("IMEX domain DEGRADED: node #3 (172.31.49.228) DOWN; "
                                  "link 2 -> 3 I")


def test_imex_down_fails(on_path) -> None:
    """The service stopped: systemd says inactive, the control tool cannot reach it."""
    on_path(imex="Connection refused\n", imex_rc=1, unit="inactive")
    item = nvlink_fabric.probe_imex(2.0)
    assert item.status == UNEXPECTED and item.detail.startswith("nvidia-imex inactive")


def test_imex_tool_absent_or_silent_is_unknown(on_path) -> None:
    on_path(unit="inactive")                  # no nvidia-imex-ctl: not installed here
    item = nvlink_fabric.probe_imex(2.0)
    assert item.status == UNKNOWN and "nvidia-imex-ctl not on PATH" in item.detail
    on_path(imex="something else\n", unit="active")
    item = nvlink_fabric.probe_imex(2.0)
    assert item.status == UNKNOWN and "no domain state in its output" in item.detail


# --------------------------------------------------------------------------- healthcheck


def _context(fake: FakeNode) -> probes.Context:
    return probes.Context(root=fake.root, shape=fake.shape, node="gb200-1",
                          deadline=time.monotonic() + 20.0, tool_timeout=1.0)


def test_the_healthcheck_runs_both_on_gb200_only(tmp_path: Path, monkeypatch) -> None:
    fake = FakeNode(tmp_path / "node", GB200)
    # the shared stand-in answers the healthcheck's other queries; -q is answered here
    shutil.move(fake.bin / "nvidia-smi", fake.bin / "nvidia-smi.base")
    (fake.bin / "smi-q.txt").write_text(_smi_q(*[_block()] * 4))
    (fake.bin / "nvidia-smi").write_text(
        '#!/bin/sh\nhere=$(dirname "$0")\n[ "$*" = "-q" ] && exec cat "$here/smi-q.txt"\n'
        'exec "$here/nvidia-smi.base" "$@"\n')
    (fake.bin / "nvidia-smi").chmod(0o755)
    _tools(tmp_path / "node", imex=(DATA / "imex-ctl-N.nvl72-18-nodes.txt").read_text())
    fake.service("nvidia-imex", "active")
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    results = {r.name: r for r in check.run_probes(_context(fake))}
    assert results["nvlink_fabric"].state == PASS, results["nvlink_fabric"]
    assert results["imex"].state == PASS, results["imex"]
    fake.service("nvidia-imex", "failed")
    results = {r.name: r for r in check.run_probes(_context(fake))}
    assert results["imex"].state == FAIL and "nvidia-imex failed" in results["imex"].evidence
    (fake.bin / "nvidia-imex-ctl").unlink()
    results = {r.name: r for r in check.run_probes(_context(fake))}
    assert results["imex"].state == H_UNKNOWN
    for name in ("BM.GPU.B200.8", "BM.GPU.L40S.4"):
        other = FakeNode(tmp_path / name, name)
        ran = {r.name for r in check.run_probes(_context(other))}
        assert not ran & {"nvlink_fabric", "imex"}, name


# --------------------------------------------------------------------------- NVLink-C2C


def _c2c(*gpus: list[str]) -> str:
    """``nvidia-smi c2c -s`` of a tray: each GPU's header, then its links' values."""
    out = []
    for index, links in enumerate(gpus):
        out.append(f"GPU {index}: NVIDIA GB200 (UUID: GPU-{index:08d}-0000-0000-0000-000000000000)")
        out += [f"         C2C Link {n}: {value}" for n, value in enumerate(links)]
    return "\n".join(out) + "\n"


UP = ["44.712 GB/s"] * 10


def test_the_published_grace_hopper_links_pass() -> None:
    gpus = nvlink_fabric.parse_c2c((DATA / "smi-c2c-s.gh200.virtualclient.txt").read_text())
    assert gpus == {0: {n: "44.712 GB/s" for n in range(10)}}
    status, detail = nvlink_fabric.judge_c2c(gpus)
    assert (status, detail) == (PRESENT, "1 GPU(s), 10 C2C link(s) each up, 447.12 GB/s per GPU")


@pytest.mark.parametrize("links, expected, said", [
    ([UP, UP, UP, UP], PRESENT, "4 GPU(s), 10 C2C link(s) each up"),
    ([UP, UP, ["Inactive"] + UP[1:], UP], UNEXPECTED, "GPU 2: C2C link 0 Inactive, not up"),
    ([UP, ["0 GB/s"] + UP[1:], UP, UP], UNEXPECTED, "GPU 1: C2C link 0 0 GB/s, not up"),
    ([UP, UP, UP, UP[:9] + ["22.356 GB/s"]], UNEXPECTED,
     "GPU 3: C2C link 9 at 22.356 GB/s, its other links at 44.712 GB/s (1 slow link(s))"),
    ([UP, UP[:9], UP, UP], UNEXPECTED, "GPU 1: 9 C2C link(s), GPU 0 has 10"),
    ([UP, ["N/A"] * 10, UP, UP], UNKNOWN, "GPU 1: C2C link 0 N/A"),
])
def test_a_trays_links(on_path, links, expected, said) -> None:
    on_path(smi=_c2c(*links))
    item = nvlink_fabric.probe_c2c(2.0)
    assert item.status == expected, item
    assert said in item.detail
    assert item.evidence == "nvidia-smi c2c -s"


def test_no_link_or_no_tool_is_unknown(on_path, tmp_path: Path, monkeypatch) -> None:
    on_path(smi="No devices were found\n")
    item = nvlink_fabric.probe_c2c(2.0)
    assert item.status == UNKNOWN and "shows no C2C link" in item.detail
    monkeypatch.setenv("PATH", str(tmp_path / "tools"))
    assert nvlink_fabric.probe_c2c(2.0).status == UNKNOWN


def test_the_healthcheck_asks_c2c_on_grace_shapes_only(tmp_path: Path, monkeypatch) -> None:
    fake = FakeNode(tmp_path / "node", GB200)
    shutil.move(fake.bin / "nvidia-smi", fake.bin / "nvidia-smi.base")
    (fake.bin / "c2c.txt").write_text(_c2c(UP, UP, ["Inactive"] + UP[1:], UP))
    (fake.bin / "nvidia-smi").write_text(
        '#!/bin/sh\nhere=$(dirname "$0")\n[ "$*" = "c2c -s" ] && exec cat "$here/c2c.txt"\n'
        'exec "$here/nvidia-smi.base" "$@"\n')
    (fake.bin / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    results = {r.name: r for r in check.run_probes(_context(fake))}
    assert results["c2c"].state == FAIL
    assert "GPU 2: C2C link 0 Inactive, not up" in results["c2c"].evidence
    (fake.bin / "c2c.txt").write_text(_c2c(UP, UP, UP, UP))
    results = {r.name: r for r in check.run_probes(_context(fake))}
    assert results["c2c"].state == PASS, results["c2c"]
    for name in ("BM.GPU.H100.8", "BM.GPU.L40S.4"):
        other = FakeNode(tmp_path / name, name)
        assert "c2c" not in {r.name for r in check.run_probes(_context(other))}, name
