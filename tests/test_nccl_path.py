"""The path NCCL's traffic took (ocibench.figures.nccl_path) and the three verdict states.

Captures of our own on 2 x H200 (tests/data/nccl_path/README.md): NVLink P2P, SHM
(``NCCL_P2P_DISABLE=1``) and a TCP socket (``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``)
between two GPUs of one host.  Before this module the socket run, at 1 % of NVLink,
passed on ``local`` and on BM.GPU.H200.8 with no word of the path.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ocibench import cli, metrics, shapes
from ocibench.figures import nccl_path
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict

DATA = Path(__file__).parent / "data" / "nccl_path"
#: The captures' command line: two ranks of one host, 8 B .. 1 GiB (the socket run to 256 MiB).
PARAMS = {"nodes": 1, "gpus_per_node": 2, "begin": "8", "end": "1G", "factor": 2}


def _capture(name: str) -> str:
    return (DATA / f"all_reduce_perf.{name}.h200x2.txt").read_text()


def _params(name: str) -> dict:
    return {**PARAMS, "end": "256M"} if name == "socket" else PARAMS


@pytest.mark.parametrize("name, transport", [
    ("p2p_info", "P2P/CUMEM"), ("shm", "SHM/direct/direct"), ("socket", "NET/Socket")])
def test_the_log_names_each_channel_s_transport(name, transport):
    path = nccl_path.parse(_capture(name))
    assert set(path.hosts.values()) == {"vm"}
    # Over a socket NCCL counts the two ranks of one host as 2 nodes; the hosts decide.
    assert path.nodes == (2 if name == "socket" else 1)
    assert set(path.transports(local=True)) == {transport}
    assert path.transports(local=False) == {}
    assert transport in path.describe()


def test_a_run_without_nccl_s_log_says_the_path_is_not_shown():
    text = "\n".join(line for line in _capture("p2p_info").splitlines()
                     if "NCCL INFO" not in line)
    path = nccl_path.parse(text)
    assert not path.known
    assert "NCCL_DEBUG=INFO" in path.describe()
    assert nccl_path.fault(path, shapes.load("BM.GPU.H200.8").data, PARAMS) is None


@pytest.mark.parametrize("shape", ["local", "BM.GPU.H200.8"])
def test_a_socket_between_gpus_of_one_host_fails_on_every_shape(shape):
    result = evaluate("nccl_all_reduce_perf", _capture("socket"), shape, _params("socket"))
    assert result.verdict is RunVerdict.FAIL
    assert "over NET/Socket" in result.reason
    assert "NCCL_P2P_DISABLE set by environment to 1" in result.reason
    assert "NCCL_SHM_DISABLE set by environment to 1" in result.reason


def test_shm_fails_where_the_shape_says_its_gpus_are_nvlink_connected():
    result = evaluate("nccl_all_reduce_perf", _capture("shm"), "BM.GPU.H200.8", PARAMS)
    assert result.verdict is RunVerdict.FAIL
    assert "SHM/direct/direct" in result.reason and "NVLink" in result.reason
    assert "NCCL_P2P_DISABLE set by environment to 1" in result.reason


def test_shm_on_local_is_recorded_with_its_path():
    # local says nothing of NVLink: SHM may be all the machine has.
    result = evaluate("nccl_all_reduce_perf", _capture("shm"), "local", PARAMS)
    assert result.verdict is RunVerdict.RECORDED
    assert "SHM/direct/direct" in result.path


def test_nvlink_p2p_is_recorded_on_local_and_unjudged_where_no_figure_matches():
    local = evaluate("nccl_all_reduce_perf", _capture("p2p_info"), "local", PARAMS)
    assert local.verdict is RunVerdict.RECORDED and local.ok
    assert "P2P/CUMEM" in local.path
    # BM.GPU.H200.8 documents 8 GPUs over 1G..16G: nothing here is comparable.
    h200 = evaluate("nccl_all_reduce_perf", _capture("p2p_info"), "BM.GPU.H200.8", PARAMS)
    assert h200.verdict is RunVerdict.UNJUDGED and not h200.ok
    assert "documents nccl_all_reduce_perf only" in h200.reason

def _ocibench(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def _sets(params: dict) -> list[str]:
    return [arg for k, v in params.items() for arg in ("--set", f"{k}={v}")]


def test_exit_status_is_one_per_state(tmp_path):
    """0 recorded (and pass), 1 fail, 3 unjudged -- each with its word."""
    for name, shape, code, word in [("p2p_info", "local", 0, "RECORDED"),
                                    ("socket", "local", 1, "FAIL"),
                                    ("p2p_info", "BM.GPU.H200.8", 3, "UNJUDGED")]:
        out_file = tmp_path / f"{name}.txt"
        out_file.write_text(_capture(name))
        got, out, err = _ocibench("evaluate", "nccl_all_reduce_perf", str(out_file),
                                  "--shape", shape, *_sets(_params(name)))
        assert got == code, (name, shape, out, err)
        assert out.splitlines()[-1].startswith(word), out
        assert "path: " in out
        if code:
            assert err.startswith(f"ocibench evaluate: {word}: "), err
            assert len(err.strip().splitlines()) == 1
        if word == "FAIL":   # the path's entry of the action ladder, first
            assert out.startswith("next: fix-software OCIBENCH-SW-0020: NCCL connected GPUs "
                                  "of one host over the network"), out


OSU_BW_SMALL = """# OSU MPI Bandwidth Test v7.5
# Datatype: MPI_CHAR.
# Size      Bandwidth (MB/s)
1                       2.85
2                       5.69
4                      11.43
"""


def test_a_run_that_compared_nothing_on_a_documented_shape_is_unjudged():
    """BM.Optimized3.36 documents osu_bw at 256 MiB only: a 1..4-byte run compared
    nothing and must not say PASS (the values are those of seed 002's shape)."""
    result = evaluate("osu_bw", OSU_BW_SMALL, "BM.Optimized3.36",
                      {"buffers": "H-H", "nodes": 2, "sizes": "1:4"})
    assert all(str(row.verdict) == "no reference" for row in result.rows)
    assert result.verdict is RunVerdict.UNJUDGED
    assert "268435456" in result.reason
    assert evaluate("osu_bw", OSU_BW_SMALL, "local",
                    {"buffers": "H-H", "nodes": 2, "sizes": "1:4"}).verdict is RunVerdict.RECORDED



def test_the_report_shows_each_state_apart_and_never_counts_unjudged_as_pass(tmp_path):
    """evaluate --json of a fail (socket), an unjudged (P2P on H200.8, sizes not
    documented) and a recorded (P2P on local) run, read back by the report."""
    inputs = []
    for name, shape in [("socket", "BM.GPU.H200.8"), ("p2p_info", "BM.GPU.H200.8"),
                        ("p2p_info", "local")]:
        out_file = tmp_path / f"{name}.{shape}.txt"
        out_file.write_text(_capture(name))
        status, out, _err = _ocibench("evaluate", "nccl_all_reduce_perf", str(out_file),
                                      "--shape", shape, "--json", *_sets(_params(name)))
        data = json.loads(out)
        assert status == {"fail": 1, "unjudged": 3, "recorded": 0}[data["verdict"]]
        inputs.append(tmp_path / f"{name}.{shape}.json")
        inputs[-1].write_text(out)
    status, out, err = _ocibench("report", *map(str, inputs), "-o", str(tmp_path / "r"))
    assert status == 0, err
    assert "runs: 0 pass, 1 fail, 1 unjudged, 1 recorded, 0 skipped" in out
    summary = json.loads((tmp_path / "r" / "report.json").read_text())
    verdicts = sorted(r["verdict"] for s in summary["shapes"].values() for r in s["results"])
    assert verdicts == ["fail", "recorded", "unjudged"]
    page = (tmp_path / "r" / "report.html").read_text()
    assert "unjudged</b>, neither passed nor failed" in page
    # The stored verdict is re-derived, never trusted: an unjudged input claiming pass.
    forged = json.loads(inputs[1].read_text())
    forged["verdict"], forged["ok"] = "pass", True
    inputs[1].write_text(json.dumps(forged))
    status, out, _err = _ocibench("report", str(inputs[1]), "-o", str(tmp_path / "f"))
    assert "1 unjudged" in out
    forged_summary = json.loads((tmp_path / "f" / "report.json").read_text())
    [result] = forged_summary["shapes"]["BM.GPU.H200.8"]["results"]
    assert result["verdict"] == "unjudged"
    assert result["disagreements"] == ["the input says 'pass', re-judged 'unjudged'"]


@pytest.mark.parametrize("name, transport, verdict", [
    ("p2p.initenv", "P2P/CUMEM", RunVerdict.RECORDED),
    ("socket.initenv", "NET/Socket", RunVerdict.FAIL)])
def test_the_checks_debug_settings_keep_the_path(name, transport, verdict):
    """The live checks export nccl_path.DEBUG_ENV (INIT,ENV only, to keep the output
    small): captured with exactly those, the path is still read."""
    assert nccl_path.DEBUG_ENV == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV"}
    text = _capture(name)
    result = evaluate("nccl_all_reduce_perf", text, "local", {**PARAMS, "end": "256M"})
    assert transport in result.path
    assert result.verdict is verdict, result.reason


FORMATS = Path(__file__).parent / "data" / "formats" / "nccl-tests"


@pytest.mark.parametrize("name, end, local, h200", [
    # -I, -N, -S, prefixes and -J: the same healthy NVLink run in other forms.  On H200.8
    # no figure documents 2 GPUs over 8 B .. 1 GiB: unjudged, never a pass or a fail.
    ("iter_I1.txt", "1G", RunVerdict.RECORDED, RunVerdict.UNJUDGED),
    ("cycles_N3.txt", "1G", RunVerdict.RECORDED, RunVerdict.UNJUDGED),
    ("stamps_S.txt", "1G", RunVerdict.RECORDED, RunVerdict.UNJUDGED),
    ("tagged.txt", "128M", RunVerdict.RECORDED, RunVerdict.UNJUDGED),
    ("timestamped.txt", "128M", RunVerdict.RECORDED, RunVerdict.UNJUDGED),
    ("json_J.json", "1G", RunVerdict.RECORDED, RunVerdict.UNJUDGED),
    # One process driving both GPUs: healthy, and another method than the figures'.
    ("onepro_g2.txt", "1G", RunVerdict.RECORDED, RunVerdict.UNJUDGED),
])
def test_our_captures_in_every_form_are_judged_in_three_states(name, end, local, h200):
    """Issue: on 2 x H200 our pinned nccl-tests' -I 1, -N 3 and -g 2 outputs FAILed,
    and -J could not be read.  Each is now read, recorded on local, and unjudged (with
    its reason) on BM.GPU.H200.8, whose figures are 8 GPUs over 1G..16G."""
    text = (FORMATS / name).read_text()
    params = {**PARAMS, "end": end}
    on_local = evaluate("nccl_all_reduce_perf", text, "local", params)
    assert on_local.verdict is local, on_local.reason
    on_h200 = evaluate("nccl_all_reduce_perf", text, "BM.GPU.H200.8", params)
    assert on_h200.verdict is h200, on_h200.reason
    assert on_h200.reason
    if name.endswith(".txt") and "NCCL INFO" in text:
        # one process reaches both GPUs directly (P2P/direct), ranks through CUMEM
        assert "P2P/" in on_local.path and "NET" not in on_local.path


def test_a_live_check_that_could_not_judge_is_unjudged_in_the_report(tmp_path):
    """checks/base.py fails a run it could not judge with metrics.could_not_judge(...);
    ReFrame puts its own words before it.  The report reads that as UNJUDGED, not as a
    failure of the node, and a plain sanity failure stays FAIL."""
    why = metrics.could_not_judge("no documented figure was compared")
    where = {"system": "BM_Optimized3_36", "partition": "single"}
    cases = [{"name": f"osu_bw %buffers=H-H %nodes=2 #{n}", "result": "fail",
              "check_name": "osu_bw", "shape": "BM.Optimized3.36", "buffers": "H-H",
              "nodes": 2, **where, "fail_reason": reason}
             for n, reason in enumerate([f"sanity error: {why}",
                                         "sanity error: benchmark crashed: 'Bus error'"])]
    report = {"session_info": {"data_version": "4.2"}, "runs": [{"testcases": cases}]}
    (tmp_path / "run.json").write_text(json.dumps(report))
    status, out, err = _ocibench("report", str(tmp_path / "run.json"), "-o", str(tmp_path / "r"))
    assert status == 0, err
    assert "runs: 0 pass, 1 fail, 1 unjudged, 0 recorded, 0 skipped" in out
    summary = json.loads((tmp_path / "r" / "report.json").read_text())
    by_verdict = {r["verdict"]: r["reason"] for r in summary["shapes"]["BM.Optimized3.36"]["results"]}
    assert by_verdict["unjudged"] == why
    assert "Bus error" in by_verdict["fail"]


# --- transport names as NCCL prints them, for every net plugin --------------------------

#: "via NET/<plugin name>/<dev>[(proxy rank)][/GDRDMA][(PCI)][/Shared]" (NVIDIA/nccl
#: src/transport/net.cc sendSetup/recvSetup: "[send] via NET/%s/%d%s%s%s" with
#: comm->ncclNet->name, a name that may hold a blank: aws-ofi-nccl's "AWS Libfabric");
#: RCCL adds " comm 0x... nRanks N" after the transport (seen in ORNL's Frontier logs).
@pytest.mark.parametrize("tail, transport", [
    ("[send] via NET/AWS Libfabric/5/GDRDMA", "NET/AWS Libfabric/5/GDRDMA"),
    ("[receive] via NET/AWS Libfabric/2/GDRDMA comm 0x9bbf3b0 nRanks 4096",
     "NET/AWS Libfabric/2/GDRDMA"),
    ("[send] via NET/IBext_v8/7/GDRDMA", "NET/IBext_v8/7/GDRDMA"),
    ("[send] via NET/IB/0(1)/GDRDMA(PCI)/Shared", "NET/IB/0(1)/GDRDMA(PCI)/Shared"),
    ("via P2P/direct pointer", "P2P/direct pointer"),
    ("via P2P/IPC comm 0x9bbf3b0 nRanks 4096", "P2P/IPC"),
])
def test_transport_names_are_read_whole_blanks_and_all(tail, transport):
    line = f"node-1:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] {tail}\n"
    path = nccl_path.parse(line)
    assert [c.transport for c in path.channels] == [transport]


@pytest.mark.parametrize("name", ["keitaw-eks-p5-2n-tag-output-debug-2.20.3.txt",
                                  "aws-efa-eks-p4d-tag-output.txt"])
def test_a_plugin_network_with_gpudirect_rdma_is_the_path_between_hosts(name):
    # Published 2-node runs over EFA (aws-ofi-nccl, "NET/AWS Libfabric/N/GDRDMA"): the
    # path names the plugin with GDRDMA, and on a shape with an RDMA network it is the
    # path its figures need, not a fallback.
    text = (Path(__file__).parent / "data" / "corpus" / "nccl-tests" / name).read_text()
    path = nccl_path.parse(text)
    assert "between hosts NET/AWS Libfabric/GDRDMA" in path.describe()
    rdma = shapes.load("BM.GPU.H100.8").data
    assert nccl_path.fault(path, rdma, {"nodes": 2}) is None
    without = nccl_path.parse(text.replace("/GDRDMA", ""))
    assert "NET/AWS Libfabric without GPUDirect RDMA" in \
        nccl_path.fault(without, rdma, {"nodes": 2})


def test_a_socket_between_hosts_is_healthy_where_the_shape_has_no_rdma_network():
    """`network.rdma: none` (TCP only: the loopback cluster's veth pairs) is a string,
    and truthy: read as the name of a cluster network, a 2-host run over a socket was
    failed for missing GPUDirect RDMA "over the none cluster network"."""
    text = ((Path(__file__).parent / "data" / "corpus" / "nccl-tests"
             / "aws-efa-eks-p4d-tag-output.txt").read_text()
            .replace("/GDRDMA", "").replace("NET/AWS Libfabric", "NET/Socket"))
    path = nccl_path.parse(text)
    assert "between hosts NET/Socket" in path.describe()
    tcp = shapes.load("loopback-cluster").data
    assert tcp["network"]["rdma"] == "none" and shapes.rdma_network(tcp) is None
    assert nccl_path.fault(path, tcp, {"nodes": 2}) is None
    # the same run on a shape with a RoCE network is a fallback, named
    assert "NET/Socket" in nccl_path.fault(path, shapes.load("BM.GPU.H100.8").data,
                                           {"nodes": 2})
