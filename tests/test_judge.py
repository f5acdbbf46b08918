"""One judgement: impossible values, NaN, OCI's floors, and a report that re-judges.

Every case is a fault that once passed (issue "One judgement that cannot be fooled"):
each assertion below fails when the rule it guards is taken out of ocibench.figures.judge,
ocibench.figures.policy or ocibench.results.load.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ocibench import benchmarks, paths, shapes
from ocibench.figures import judge, policy, references, ucx_proto
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import Verdict

OMB_BW = """# OSU MPI{cuda} Bandwidth Test v7.4
# Datatype: MPI_CHAR.
# Size      Bandwidth (MB/s)
268435456            {value}
"""


@pytest.fixture(scope="module")
def gpu() -> shapes.Shape:
    return shapes.load("BM.GPU4.8")


@pytest.fixture(scope="module")
def local() -> shapes.Shape:
    return shapes.load("local")


# --- plausibility ---------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1000000000000.00", "0.00"])
def test_impossible_bandwidth_fails_offline_on_a_documented_shape(gpu, value):
    result = evaluate("osu_bw", OMB_BW.format(cuda="-CUDA", value=value), gpu,
                      {"buffers": "D-D", "nodes": 1})
    assert not result.ok
    assert result.rows[0].verdict is Verdict.FAIL and result.rows[0].implausible
    assert ("physical limit 300 GB/s of nvlink_gbs" in result.reason if value != "0.00"
            else "a zero bandwidth is impossible" in result.reason)


@pytest.mark.parametrize("value", ["1000000000000.00", "0.00"])
def test_impossible_bandwidth_fails_on_local(local, value):
    """local documents nothing and knows no link: a value is still judged plausible."""
    result = evaluate("osu_bw", OMB_BW.format(cuda="", value=value), local,
                      {"buffers": "H-H", "nodes": 1})
    assert not result.ok and result.rows[0].verdict is Verdict.FAIL
    assert "impossible" in result.reason or "above what any node moves" in result.reason


def test_a_plausible_value_on_local_has_no_reference(local):
    result = evaluate("osu_bw", OMB_BW.format(cuda="", value="9000.00"), local,
                      {"buffers": "H-H", "nodes": 1})
    assert result.ok and result.rows[0].verdict is Verdict.NO_REFERENCE


def test_host_buffer_run_above_the_rdma_port_fails_as_two_node_d_d(gpu):
    """A one-node host-buffer run (13.75 GB/s, 110 % of a 100 Gbps port) judged as the
    2-node D-D figure: impossible for one RDMA port, whatever the title says."""
    port = gpu.data["links"]["rdma_port_gbs"]
    value = f"{port * 1.10 * 1000:.2f}"
    result = evaluate("osu_bw", OMB_BW.format(cuda="-CUDA", value=value), gpu,
                      {"buffers": "D-D", "nodes": 2})
    assert not result.ok
    assert f"physical limit {port:g} GB/s of rdma_port_gbs" in result.reason


def test_zero_latency_fails_except_imbs_empty_call():
    assert judge.implausible("latency", 1, 0.0, "us") == \
        "a zero latency is impossible (the run measured nothing)"
    assert judge.implausible("latency", 0, 0.0, "us") is None


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_never_pass(gpu, value):
    assert policy.verdict("bandwidth", 100.0, value) is Verdict.FAIL
    assert policy.verdict("latency", 2.0, value) is Verdict.FAIL
    figures = references.matching(gpu, "osu_bw", benchmarks.resolve(
        "osu_bw", {"buffers": "D-D", "nodes": 1}))
    assert judge.judge(gpu, figures, "bandwidth", 268435456, value, "MB/s").verdict \
        is Verdict.FAIL
    assert judge.judge(gpu, [], "bandwidth", 1, value, "MB/s").verdict is Verdict.FAIL


def test_every_documented_figure_is_within_its_physical_limit():
    """The limit rule cannot fail a documented figure itself."""
    for name in shapes.known_shapes():
        if name == shapes.LOCAL:
            continue
        shape = shapes.load(name)
        for figure in shape.figures:
            physical, _ = judge.physical_limit(shape, figure)   # both ways for osu_bibw
            for key, value in (figure.get("values") or {}).items():
                assert judge.implausible(figure["metric"], key, float(value), figure["unit"],
                                         figure.get("limit"), physical) is None, figure["id"]


# --- OCI's acceptance floor -----------------------------------------------------------

NCCL_OUT = """# nccl-tests all_reduce_perf
#  Rank  0 Group  0 Pid  1 on node1 device  0 [0x0f] NVIDIA A100-SXM4-40GB
{ranks}
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
 10737418240    2684354560     float     sum      -1    80000  134.22  {busbw}      0    80000  134.22  {busbw}      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : {busbw}
"""


def _nccl_output(busbw: float) -> str:
    ranks = "\n".join(f"#  Rank  {r} Group  0 Pid  {r + 1} on node1 device  {r} [0x0f] A100"
                      for r in range(1, 8))
    return NCCL_OUT.format(ranks=ranks, busbw=f"{busbw:.2f}")


@pytest.fixture
def gpu_with_floor(gpu) -> shapes.Shape:
    """BM.GPU4.8 whose 8-GPU nccl-tests figure carries a floor above its tolerance bound
    (a real shape file's data, with one field added)."""
    data = copy.deepcopy(gpu.data)
    figure = next(f for f in data["figures"] if f["check"] == "nccl_all_reduce_perf"
                  and f["params"]["nodes"] == 1)
    documented = figure["values"]["out_of_place"]
    figure["floor"] = {"values": {"out_of_place": documented * 0.95},
                       "source": "a test floor at 0.95 x documented"}
    return shapes.Shape(gpu.name, data, gpu.path)


def test_value_under_the_floor_fails_whatever_the_tolerance(gpu_with_floor):
    figure = next(f for f in gpu_with_floor.figures if f.get("floor"))
    documented = figure["values"]["out_of_place"]
    result = evaluate("nccl_all_reduce_perf", _nccl_output(documented * 0.93), gpu_with_floor,
                      {"nodes": 1, "gpus_per_node": 8})
    row = next(r for r in result.rows if r.key == "out_of_place")
    assert row.tolerance is Verdict.PASS and row.floor_verdict is Verdict.FAIL
    assert row.verdict is Verdict.FAIL and not result.ok
    assert "within tolerance" in result.reason
    assert "below the acceptance floor" in result.reason
    assert "a test floor at 0.95 x documented" in result.reason
    # in-place has no floor: the tolerance alone judges it.
    in_place = next(r for r in result.rows if r.key == "in_place")
    assert in_place.floor is None and in_place.verdict is Verdict.PASS


def test_value_over_the_floor_passes(gpu_with_floor):
    figure = next(f for f in gpu_with_floor.figures if f.get("floor"))
    result = evaluate("nccl_all_reduce_perf", _nccl_output(figure["values"]["out_of_place"]),
                      gpu_with_floor, {"nodes": 1, "gpus_per_node": 8})
    assert result.ok
    row = next(r for r in result.rows if r.key == "out_of_place")
    assert (row.tolerance, row.floor_verdict) == (Verdict.PASS, Verdict.PASS)


def test_a_figure_known_only_by_its_floor(gpu_with_floor):
    data = copy.deepcopy(gpu_with_floor.data)
    figure = next(f for f in data["figures"] if f.get("floor"))
    del figure["values"]
    shape = shapes.Shape("BM.GPU4.8", data, gpu_with_floor.path)
    floor = figure["floor"]["values"]["out_of_place"]
    result = evaluate("nccl_all_reduce_perf", _nccl_output(floor - 1), shape,
                      {"nodes": 1, "gpus_per_node": 8})
    row = next(r for r in result.rows if r.key == "out_of_place")
    assert row.reference is None and row.tolerance is None
    assert row.verdict is Verdict.FAIL and "below the acceptance floor" in result.reason


def test_reframe_reference_raises_its_lower_bound_to_the_floor(gpu_with_floor):
    figure = next(f for f in gpu_with_floor.figures if f.get("floor"))
    documented = figure["values"]["out_of_place"]
    reference = judge.reframe_reference(gpu_with_floor, "nccl_all_reduce_perf",
                                        {"nodes": 1, "gpus_per_node": 8}, ["s:p"])["s:p"]
    value, lower, upper, unit = reference["busbw_out_of_place"]
    assert (value, unit) == (documented, "GB/s")
    assert lower == pytest.approx(-0.05)          # the floor, not the tolerance's -0.10
    nvlink = gpu_with_floor.data["links"].get(figure.get("limit"))
    assert upper is None if not nvlink else upper > 0
    assert reference["busbw_in_place"][1] == -0.1


# --- the report re-judges ----------------------------------------------------------------

def _report(tmp_path: Path, *inputs: dict) -> tuple[subprocess.CompletedProcess, dict]:
    files = []
    for index, data in enumerate(inputs):
        path = tmp_path / f"in{index}.json"
        path.write_text(json.dumps(data))
        files.append(str(path))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "ocibench.cli", "report", *files, "-o",
                           str(out)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "src")})
    summary = json.loads((out / "report.json").read_text()) if done.returncode == 0 else {}
    return done, summary


def _forged(measured, verdict="pass") -> dict:
    """An `ocibench evaluate --json` output of BM.Optimized3.36's 2-node osu_bw, edited."""
    return {"check": "osu_bw", "shape": "BM.Optimized3.36",
            "params": {"buffers": "H-H", "nodes": 2, "sizes": "268435456:268435456"},
            "ok": True, "reason": None, "notes": [],
            "rows": [{"metric": "bandwidth", "key": 268435456, "measured": measured,
                      "unit": "MB/s", "verdict": verdict, "reference": 1.0, "lower": 0.5}]}


def test_report_rejudges_an_edited_evaluation(tmp_path):
    pytest.importorskip("matplotlib")
    done, summary = _report(tmp_path, _forged(1.0))
    assert done.returncode == 0, done.stderr
    result = summary["shapes"]["BM.Optimized3.36"]["results"][0]
    row = result["rows"][0]
    assert row["verdict"] == "fail" and row["reference"] == 12254.16   # not the forged 1.0
    assert result["ok"] is False
    assert any("the input says 'pass', re-judged 'fail'" in d for d in result["disagreements"])
    assert summary["verdicts"]["fail"] == 1 and summary["verdicts"]["pass"] == 0


@pytest.mark.parametrize("measured, message", [
    ("abc", "rows[0].measured: 'abc' is not a finite number"),
    (True, "rows[0].measured: True is not a finite number"),
])
def test_report_refuses_a_malformed_value(tmp_path, measured, message):
    pytest.importorskip("matplotlib")
    done, _ = _report(tmp_path, _forged(measured))
    assert done.returncode == 2 and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_report_never_passes_nan(tmp_path):
    """JSON allows NaN; a NaN measurement is a malformed input, never a pass."""
    pytest.importorskip("matplotlib")
    forged = _forged(1.0)
    text = json.dumps(forged).replace('"measured": 1.0', '"measured": NaN')
    path = tmp_path / "nan.json"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "ocibench.cli", "report", str(path), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "src")})
    assert done.returncode == 2
    assert "rows[0].measured: nan is not a finite number" in done.stderr
    assert not (tmp_path / "out").exists()


def test_report_refuses_a_unit_of_another_metric(tmp_path):
    pytest.importorskip("matplotlib")
    forged = _forged(12000.0)
    forged["rows"][0]["unit"] = "us"
    done, _ = _report(tmp_path, forged)
    assert done.returncode == 2 and "rows[0].unit: 'us' is no unit of bandwidth" in done.stderr


# --- named causes ----------------------------------------------------------------------

OMB_LAT = """# OSU MPI-CUDA Latency Test v7.4
# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)
# Size          Avg Latency(us)
1                      {value}
"""


def _d_d_latency(gpu, value: str, lacking=()):
    params = benchmarks.resolve("osu_latency", {"buffers": "D-D", "nodes": 1})
    figures = references.matching(gpu, "osu_latency", params)
    return judge.judge(gpu, figures, "latency", 1, float(value), "us", lacking)


def test_a_missed_figure_names_what_it_requires(gpu):
    row = _d_d_latency(gpu, "15.90")
    assert row.verdict is Verdict.FAIL and row.requires == ("gdrdrv",)
    reason = row.failure()
    assert reason.startswith("latency at size 1: 15.90 us > ceiling 2.83 us (documented 2.46 us")
    assert "the documented figure needs gdrdrv (The seed's 1-byte GPU latencies are " \
           "gdrcopy figures" in reason
    assert "`ocibench preflight` says which this node lacks" in reason


def test_a_missed_figure_names_what_this_node_lacks(gpu):
    reason = _d_d_latency(gpu, "15.90", lacking={
        "gdrdrv": "absent: no /dev/gdrdrv (kernel module not loaded)",
        "xpmem": "absent: no /dev/xpmem"}).failure()
    assert reason.endswith(": the documented 2.46 us needs gdrdrv (gdrdrv absent: no "
                           "/dev/gdrdrv (kernel module not loaded))")
    assert "xpmem" not in reason   # not required by this figure


def test_a_node_that_has_what_a_missed_figure_requires_names_no_cause(gpu):
    row = _d_d_latency(gpu, "15.90", lacking={"xpmem": "absent: no /dev/xpmem"})
    assert row.verdict is Verdict.FAIL and row.cause() == ""
    assert row.failure().endswith("sec 2-1)")


def test_a_passing_figure_is_never_given_a_cause(gpu):
    row = _d_d_latency(gpu, "2.50", lacking=("gdrdrv",))
    assert row.verdict is Verdict.PASS and row.failure() is None and row.cause() == ""


# Real outputs with UCX's protocol tables (tests/data/ucx_proto, index.yaml).
UCX_DATA = paths.REPO_ROOT / "tests" / "data" / "ucx_proto"
UCX_INDEX = yaml.safe_load((UCX_DATA / "index.yaml").read_text())["outputs"]


@pytest.mark.parametrize("entry", UCX_INDEX, ids=[e["file"] for e in UCX_INDEX])
def test_protocol_tables_say_what_the_messages_took(entry):
    tables = ucx_proto.parse((UCX_DATA / entry["file"]).read_text())
    nodes = entry["params"].get("nodes")
    for want in entry["routes"]:
        taken = ucx_proto.taken(tables, want["size"], [want["memory"]], nodes)
        role = want.get("role", "tagged send")
        assert [(t.route.protocol, list(t.route.lanes)) for t in taken if t.role == role] == \
            [(want["protocol"], want["lanes"])]


def _with_figure(shape: shapes.Shape, figure: dict | None, value: float | None,
                 params: dict) -> shapes.Shape:
    """``shape`` with ``figure`` added (or its own figure for the run), documented at
    ``value`` when given."""
    data = copy.deepcopy(shape.data)
    if figure is not None:
        data["figures"].append(copy.deepcopy(figure))
    if value is not None:
        run = benchmarks.resolve(figure["check"] if figure else "osu_latency", params)
        for own in data["figures"]:
            if own in references.matching(shapes.Shape(shape.name, data, shape.path),
                                          own["check"], run):
                own["values"] = {k: value for k in own["values"]}
    return shapes.Shape(shape.name, data, shape.path)


CAUSES = [(e, c) for e in UCX_INDEX for c in e.get("causes", ())]


@pytest.mark.parametrize("entry, case", CAUSES,
                         ids=[f"{e['file']}-{c['shape']}" for e, c in CAUSES])
def test_a_missed_figure_names_what_the_protocol_tables_show_missing(entry, case):
    text = (UCX_DATA / entry["file"]).read_text()
    shape = _with_figure(shapes.load(case["shape"]), case.get("figure"), None, entry["params"])
    result = evaluate(entry["check"], text, shape, entry["params"])
    assert not result.ok
    row = next(r for r in result.rows if r.verdict is Verdict.FAIL)
    if case["says"]:
        assert row.cause(), result.reason
        for words in case["says"]:
            assert words in result.reason, result.reason
        assert "\n" not in result.reason
    else:
        assert row.cause() == "" and row.checked, result.reason
    # The same output, its figure documented where the run meets it: no cause.
    passing = _with_figure(shapes.load(case["shape"]), case.get("figure"), case["passing"],
                           entry["params"])
    result = evaluate(entry["check"], text, passing, entry["params"])
    assert result.ok and all(row.cause() == "" for row in result.rows), result.reason


def test_protocol_tables_and_preflight_together_in_one_line(tmp_path):
    """A real output whose tables show no CMA lane, and a preflight that found CMA
    restricted: both are named, in one line, through the command line."""
    entry = next(e for e in UCX_INDEX if e["file"] == "osu_bw.h-h.no-cma.ucx-1.13.txt")
    figure = entry["causes"][0]["figure"]
    shape = _with_figure(shapes.load("BM.GPU4.8"), figure, None, entry["params"])
    result = evaluate("osu_bw", (UCX_DATA / entry["file"]).read_text(), shape,
                      entry["params"], {"cma": "absent: restricted: Yama ptrace_scope 3"})
    assert result.reason.endswith(
        "(UCX's tables name no cma lane; cma absent: restricted: Yama ptrace_scope 3)")
    # the report re-judges the evaluation from its JSON: the same reason
    data = result.to_dict()
    assert data["absent"] == {"cma": "absent: restricted: Yama ptrace_scope 3"}
    assert len(data["ucx_protocols"]) == 6


def test_evaluate_names_what_a_preflight_report_found_missing(tmp_path):
    """The same cause through the command line: --preflight FILE of the node."""
    output = tmp_path / "lat.out"
    output.write_text(OMB_LAT.format(value="15.90"))
    report = tmp_path / "preflight.json"
    report.write_text(json.dumps({"shape": "BM.GPU4.8", "items": [
        {"name": "gdrdrv", "status": "absent", "detail": "no /dev/gdrdrv"},
        {"name": "xpmem", "status": "absent", "detail": "no /dev/xpmem"}]}))
    args = [sys.executable, "-m", "ocibench.cli", "evaluate", "osu_latency", str(output),
            "--shape", "BM.GPU4.8", "--set", "buffers=D-D", "--set", "nodes=1"]
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "src")}
    done = subprocess.run(args + ["--preflight", str(report)], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 1
    assert "the documented 2.46 us needs gdrdrv (gdrdrv absent: no /dev/gdrdrv)" in done.stderr
    report.write_text("{}")
    done = subprocess.run(args + ["--preflight", str(report)], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 2 and "not an `ocibench preflight --json` report" in done.stderr


# --------------------------------------------------------------------------- causes and evidence
# Issue 21 item 7: preflight and the protocol tables are weighed together; a cause never
# contradicts them, and where they disagree the reason says so.

GDRDRV_PRESENT = {"gdrdrv": "present: /dev/gdrdrv exists; gdrcopy_sanity passed"}
GDRDRV_ABSENT = {"gdrdrv": "absent: no /dev/gdrdrv (kernel module not loaded)"}


def _d_d_tables(lane: str | None = None) -> tuple[ucx_proto.Table, ...]:
    """The real 2x H200 D-D latency run's tables (no gdrdrv: 1-byte cuda messages over
    sysv); with ``lane``, its cuda send rows as a node with gdrdrv prints them."""
    tables = ucx_proto.parse((UCX_DATA / "osu_latency.d-d.h200x2.ucx-1.19.txt").read_text())
    if lane is None:
        return tuple(tables)
    return tuple(dataclasses.replace(t, routes=tuple(
        dataclasses.replace(r, lanes=(lane,)) if t.memory == "cuda" and t.is_send else r
        for r in t.routes)) for t in tables)


def test_a_node_whose_preflight_found_gdrdrv_is_not_blamed_for_it(gpu):
    facts = judge.Facts(present=GDRDRV_PRESENT)
    row = _d_d_latency(gpu, "15.90", lacking=facts)
    assert row.verdict is Verdict.FAIL and row.lacking == ()
    reason = row.failure()
    assert "lacks" not in reason and "`ocibench preflight` says which" not in reason
    assert reason.endswith("needs gdrdrv, which this node has (gdrdrv present: /dev/gdrdrv "
                           "exists; gdrcopy_sanity passed): the miss has another cause")


def test_evaluate_with_a_preflight_that_found_everything_blames_nothing(tmp_path):
    """The reproduction: --preflight of a node with gdrdrv (sanity passed) and nothing
    absent; the D-D latency miss must not point at gdrdrv as missing."""
    output = tmp_path / "lat.out"
    output.write_text(OMB_LAT.format(value="15.90"))
    report = tmp_path / "preflight.json"
    report.write_text(json.dumps({"shape": "BM.GPU4.8", "items": [
        {"name": "gdrdrv", "status": "present",
         "detail": "/dev/gdrdrv exists; gdrcopy_sanity passed"}]}))
    done = subprocess.run(
        [sys.executable, "-m", "ocibench.cli", "evaluate", "osu_latency", str(output),
         "--shape", "BM.GPU4.8", "--set", "buffers=D-D", "--set", "nodes=1",
         "--preflight", str(report)], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "src")})
    assert done.returncode == 1
    assert "which this node has (gdrdrv present" in done.stderr
    assert "says which this node lacks" not in done.stderr


def test_tables_on_gdr_copy_and_preflight_without_gdrdrv_are_a_conflict(gpu):
    facts = judge.Facts(absent=GDRDRV_ABSENT, tables=_d_d_tables("gdr_copy/cuda"))
    row = _d_d_latency(gpu, "15.90", lacking=facts.for_run("osu_latency",
                                                          {"buffers": "D-D", "nodes": 1}))
    assert row.lacking == ()   # the run did use gdr_copy: gdrdrv is not what it lacked
    reason = row.failure()
    assert "the evidence conflicts: UCX's tables show these messages took gdr_copy, yet " \
           "preflight found gdrdrv absent: no /dev/gdrdrv" in reason
    assert "(was the preflight report taken on this node, at this time?)" in reason


def test_tables_silent_on_gdr_copy_never_blame_a_node_whose_preflight_found_gdrdrv(gpu):
    """Issue 31: the tables print no gdr_copy lane where it copies GPU memory into a host
    bounce buffer (UCX's memory-type endpoint, ucp_mem_type_pack): their silence is no
    evidence against preflight's /dev/gdrdrv and gdrcopy_sanity.  The miss is elsewhere."""
    facts = judge.Facts(present=GDRDRV_PRESENT, tables=_d_d_tables())
    row = _d_d_latency(gpu, "15.90", lacking=facts.for_run("osu_latency",
                                                          {"buffers": "D-D", "nodes": 1}))
    assert row.lacking == ()
    reason = row.failure()
    assert "UCX did not use it" not in reason
    assert reason.endswith("needs gdrdrv, which this node has (gdrdrv present: /dev/gdrdrv "
                           "exists; gdrcopy_sanity passed): the miss has another cause")


@pytest.mark.parametrize("absent, present, lacking", [
    ({"nvidia_peermem": "absent: module not loaded"}, {"dmabuf": "present: kernel 6.8"}, ()),
    ({"nvidia_peermem": "absent: module not loaded",
      "dmabuf": "absent: the NVIDIA kernel module is the proprietary one"}, {},
     ("nvidia_peermem", "dmabuf")),
])
def test_gpudirect_either_way_is_one_requirement(absent, present, lacking):
    facts = judge.Facts(absent=absent, present=present)
    found = facts.explain([{"any_of": ["nvidia_peermem", "dmabuf"]}, "rdma"], None)
    assert found.lacking == lacking
    shape = shapes.load("BM.GPU.H100.8")
    own = next(f for f in shape.figures if f["id"] == "nccl_all_reduce_2x8gpus")
    params = benchmarks.resolve("nccl_all_reduce_perf", own["params"])
    figures = references.matching(shape, "nccl_all_reduce_perf", params)
    row = judge.judge(shape, figures, "busbw", "avg", 1.0, "GB/s", facts)
    assert row.requires == ("nvidia_peermem or dmabuf",)
    assert row.lacking == lacking
