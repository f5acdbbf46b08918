"""NCCL's path on a rack-scale NVLink domain (issue 33): GB200 NVL72, where 18 hosts
share one NVLink domain and NCCL should join hosts of one rack over multi-node NVLink
(P2P/MNNVL, through IMEX), not over the RoCE network.

Published GB200 logs (tests/data/nccl_path/README.md) for the lines the reader knows;
2-host logs built in NCCL's format from those lines (no published 2-host GB200 log with
host prefixes and channel lines was found) for the faults.
"""

from __future__ import annotations

from pathlib import Path

from ocibench import shapes
from ocibench.figures import nccl_path

GB200 = "BM.GPU.GB200.4"

PATHS = Path(__file__).parent / "data" / "nccl_path"
#: The fabric the published GB200 tray reports (NVIDIA/nccl#1769), and a second rack's.
RACK1 = ("3143b15bc2cd192b.28cc9b5473fb5b93", "7ffe")
RACK2 = ("a44167d15423d758.7d6b24c07d32e7b3", "2786")
#: The GPUs' bus ids as NCCL prints them: OCI's 0008:01:00.0 .. 0019:01:00.0 ([dr]).
BUSES = ("801000", "901000", "1801000", "1901000")
TWO_HOSTS = {"nodes": 2, "gpus_per_node": 4}


def _gb200() -> dict:
    return shapes.load(GB200).data


def _two_hosts(between: str, fabrics: tuple = (RACK1, RACK1), mnnvl: int = 1,
               env: tuple[str, ...] = ()) -> str:
    """A 2-host, 8-rank log in NCCL's format, line for line as the published GB200 logs
    print them (tests/data/nccl_path/mnnvl.gb200-tray.*): each GPU's fabric line, the
    comm lines, channels within a host over P2P/MNNVL (P2P/CUMEM with MNNVL off) and
    the two ring hops between the hosts over ``between``.  No published 2-host GB200
    log with host prefixes and channel lines was found (README)."""
    lines = []
    hosts = ("gb200-rack1-1", "gb200-rack1-2")
    inside = "P2P/MNNVL" if mnnvl else "P2P/CUMEM"
    for h, (host, (uuid, clique)) in enumerate(zip(hosts, fabrics)):
        for dev, bus in enumerate(BUSES):
            rank, prefix = 4 * h + dev, f"{host}:{1000 + dev}:{1000 + dev} [{dev}] NCCL INFO"
            lines += [f"{prefix} {e}" for e in env]
            lines.append(f"{prefix} MNNVL busId 0x{bus} fabric UUID {uuid} cliqueId "
                         f"0x{clique} state 3 healthMask 0xaa")
            lines.append(f"{prefix} comm 0x9a3987{rank} rank {rank} nRanks 8 nNodes "
                         f"{1 if mnnvl else 2} localRanks 4 localRank {dev} MNNVL {mnnvl}")
            if dev < 3:
                lines.append(f"{prefix} Channel 00/0 : {rank}[{dev}] -> {rank + 1}[{dev + 1}]"
                             f" via {inside}")
            else:
                peer = (rank + 1) % 8
                lines.append(f"{prefix} Channel 00/0 : {rank}[{dev}] -> {peer}[0] via {between}")
    return "\n".join(lines) + "\n"


def test_published_tray_over_mnnvl_passes() -> None:
    """NVIDIA/nccl#2303 run A: one GB200 tray, NCCL_MNNVL_ENABLE=1, P2P/MNNVL."""
    path = nccl_path.parse((PATHS / "mnnvl.gb200-tray.nccl2303-run-a.txt").read_text())
    assert path.transports(local=True) == {"P2P/MNNVL": 1}
    assert path.mnnvl is True
    assert path.domain("watchtower-navy-cn13") == RACK2
    assert "multi-node NVLink (MNNVL) on" in path.describe()
    assert nccl_path.fault(path, _gb200(), {"nodes": 1}) is None


def test_published_tray_with_mnnvl_off_still_passes_inside_a_host() -> None:
    """NVIDIA/nccl#2303 run B: NCCL_MNNVL_ENABLE=0 on one tray: P2P/CUMEM over the
    tray's NVLink is healthy inside a host; the reader still names what kept MNNVL off."""
    path = nccl_path.parse((PATHS / "mnnvl.gb200-tray.nccl2303-run-b.txt").read_text())
    assert path.transports(local=True) == {"P2P/CUMEM": 1}
    assert path.mnnvl is False
    assert path.mnnvl_causes() == " (NCCL_MNNVL_ENABLE set by environment to 0)"
    assert nccl_path.fault(path, _gb200(), {"nodes": 1}) is None


def test_published_fabric_lines_name_the_trays_domain() -> None:
    """NVIDIA/nccl#1769: the 4 GPUs of gb200a-04 in one clique of one cluster UUID."""
    path = nccl_path.parse((PATHS / "mnnvl.gb200-tray.nccl1769.txt").read_text())
    assert not path.known
    assert path.fabric["gb200a-04"] == {(*RACK1, 3)}
    assert path.domain("gb200a-04") == RACK1
    assert nccl_path.fault(path, _gb200(), {"nodes": 1}) is None


def test_two_hosts_of_one_rack_over_mnnvl_pass() -> None:
    path = nccl_path.parse(_two_hosts("P2P/MNNVL"))
    assert path.transports(local=False) == {"P2P/MNNVL": 2}
    assert nccl_path.fault(path, _gb200(), TWO_HOSTS) is None


def test_two_hosts_of_one_rack_over_the_network_fail_naming_the_cause() -> None:
    text = _two_hosts("NET/IB/0/GDRDMA", mnnvl=0,
                      env=("NCCL_MNNVL_ENABLE set by environment to 0.",))
    why = nccl_path.fault(nccl_path.parse(text), _gb200(), TWO_HOSTS)
    assert why is not None
    assert f"one NVLink domain (cluster UUID {RACK1[0]}, clique 0x{RACK1[1]})" in why
    assert "over NET/IB/GDRDMA" in why and "not over multi-node NVLink (P2P/MNNVL)" in why
    assert "rank 3 on gb200-rack1-1 -> 4 on gb200-rack1-2" in why
    assert why.endswith("(NCCL_MNNVL_ENABLE set by environment to 0)")
    # cuMem off takes the fabric handles away: the same fault, that cause
    text = _two_hosts("NET/IB/0/GDRDMA", mnnvl=0,
                      env=("NCCL_CUMEM_ENABLE set by environment to 0.",))
    why = nccl_path.fault(nccl_path.parse(text), _gb200(), TWO_HOSTS)
    assert why and why.endswith("(NCCL_CUMEM_ENABLE set by environment to 0)")
    # nothing in the log says why: NCCL's own MNNVL 0
    why = nccl_path.fault(nccl_path.parse(_two_hosts("NET/Socket/0", mnnvl=0)),
                          _gb200(), TWO_HOSTS)
    assert why and "over NET/Socket" in why and why.endswith("(NCCL reports MNNVL 0)")


def test_a_clique_mismatch_in_one_rack_fails_naming_it() -> None:
    text = _two_hosts("NET/IB/0/GDRDMA", fabrics=(RACK1, (RACK1[0], "7ffd")))
    why = nccl_path.fault(nccl_path.parse(text), _gb200(), TWO_HOSTS)
    assert why is not None
    assert "different cliques (gb200-rack1-1 0x7ffe, gb200-rack1-2 0x7ffd)" in why
    assert "domain/clique mismatch" in why


def test_two_racks_talk_over_the_cluster_network() -> None:
    """Different cluster UUIDs: different NVL72 racks, whose path is RoCE with
    GPUDirect RDMA; without GDRDMA the cluster-network rule still fails it."""
    path = nccl_path.parse(_two_hosts("NET/IB/0/GDRDMA", fabrics=(RACK1, RACK2)))
    assert nccl_path.fault(path, _gb200(), TWO_HOSTS) is None
    path = nccl_path.parse(_two_hosts("NET/Socket/0", fabrics=(RACK1, RACK2)))
    why = nccl_path.fault(path, _gb200(), TWO_HOSTS)
    assert why and "not with GPUDirect RDMA (GDRDMA) over the RoCEv2 cluster network" in why


def test_imex_not_working_fails_with_nccls_warning() -> None:
    """NCCL stops at init when the fabric is there and IMEX does not work (the warning
    of src/mnnvl.cc): no channel to judge, the warning is the cause."""
    warning = ("MNNVL (cliqueSize 8) is available but not working on this system. Check "
               "the IMEX configuration (nvidia-imex-ctl -N). Set NCCL_MNNVL_ENABLE=0 to "
               "ignore this issue.")
    text = (f"gb200-rack1-1:1000:1000 [0] NCCL INFO MNNVL busId 0x801000 fabric UUID "
            f"{RACK1[0]} cliqueId 0x{RACK1[1]} state 3 healthMask 0xaa\n"
            f"gb200-rack1-1:1000:1000 [0] mnnvl.cc:87 NCCL WARN {warning}\n")
    path = nccl_path.parse(text)
    assert path.warnings == (warning,)
    assert nccl_path.fault(path, _gb200(), TWO_HOSTS) == (
        f"NCCL could not set up multi-node NVLink: {warning}")


def test_shapes_without_a_domain_get_no_domain_rule() -> None:
    """B200.8 (NVLink inside a host only) and L40S (no NVLink): a warning about MNNVL is
    no verdict of theirs, and hosts with one fabric UUID over GDRDMA are fine."""
    for name in ("BM.GPU.B200.8", "BM.GPU.L40S.4"):
        data = shapes.load(name).data
        text = _two_hosts("NET/IB/0/GDRDMA", mnnvl=0)
        assert nccl_path.fault(nccl_path.parse(text), data, {"nodes": 2}) is None, name
        warned = nccl_path.parse("h:1:1 [0] x.cc:1 NCCL WARN MNNVL is not working (IMEX)\n")
        assert nccl_path.fault(warned, data, {"nodes": 2}) is None, name


def test_an_h200_log_is_described_as_before() -> None:
    """NCCL 2.28 says "MNNVL 0" on every comm line and "fabric UUID 0.0" on an H200 VM
    (the project's capture): no fabric, described without multi-node NVLink, no domain."""
    path = nccl_path.parse((PATHS / "all_reduce_perf.p2p.initenv.h200x2.txt").read_text())
    assert path.mnnvl is False and path.fabric == {"vm": {("0.0", "0", 3)}}
    assert not path.in_fabric and path.domain("vm") is None
    assert "MNNVL" not in path.describe()
    assert "MNNVL" in nccl_path.parse(_two_hosts("P2P/MNNVL")).describe()
