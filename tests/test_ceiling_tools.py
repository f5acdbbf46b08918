"""AMD's ceiling tools, BabelStream and TransferBench (p2p, a2a), judged against
BM.GPU.MI300X.8's figures: AMD's acceptance floors (ROCm/system-acceptance-docs,
docs/gpus/mi300x.md).

The outputs are AMD's own published MI300X runs (tests/data/corpus, their sources in
its index.yaml): at the figure they pass; moved to 0.9 x the floor they fail, and the
reason names the floor and its source; without the line a figure compares they are
UNJUDGED, naming it.  The other formats a user may paste (BabelStream's units, its
--csv, its single precision, a truncated run) are written from the same outputs here,
each change named where it is made.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from ocibench import accelerators, cli, shapes
from ocibench.figures import outputs
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict
from ocibench.spack import scopes

CORPUS = Path(__file__).parent / "data" / "corpus"
MI300X = "BM.GPU.MI300X.8"
#: AMD's MI300X hip-stream run (2 of its 8 tables, as its page shows them).
AMD_BABELSTREAM = (CORPUS / "babelstream" / "sad-mi300x-8gpu-5.0-elided.txt").read_text()
#: AMD's MI300X TransferBench p2p.
AMD_P2P = (CORPUS / "transferbench" / "sad-mi300x-p2p-collapsed.txt").read_text()
#: AMD's MI300X TransferBench a2a summary.
AMD_A2A = (CORPUS / "transferbench" / "sad-mi300x-a2a-collapsed.txt").read_text()
SOURCE = "ROCm/system-acceptance-docs, docs/gpus/mi300x.md@23e73127964d71bde4dca3f8390c78eea2943851"

_KERNEL_ROW = re.compile(r"^(Copy|Mul|Add|Triad|Dot)(\s+)(\S+)", re.MULTILINE)


def floors(check: str) -> dict[str, float]:
    figure = next(f for f in shapes.load(MI300X).figures if f["check"] == check)
    return figure["floor"]["values"]


def with_kernels(text: str, value: dict[str, float]) -> str:
    """``text`` with each kernel's MB/s replaced, in every table."""
    return _KERNEL_ROW.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{value.get(m.group(1), m.group(3))}", text)


# --------------------------------------------------------------------------- BabelStream

def test_amds_babelstream_run_passes_amds_floors():
    ev = evaluate("babelstream", AMD_BABELSTREAM, MI300X, {})
    assert ev.verdict is RunVerdict.PASS, ev.reason
    assert {row.key for row in ev.rows} == {"Copy", "Mul", "Add", "Triad", "Dot"}
    # the slower of the two GPUs shown, each kernel
    assert {row.key: row.measured for row in ev.rows}["Triad"] == 3947212.603


def test_babelstream_at_the_floor_passes_and_below_it_fails_naming_it():
    at = with_kernels(AMD_BABELSTREAM, floors("babelstream"))
    assert evaluate("babelstream", at, MI300X, {}).verdict is RunVerdict.PASS
    low = with_kernels(AMD_BABELSTREAM, {"Triad": round(0.9 * floors("babelstream")["Triad"], 3)})
    ev = evaluate("babelstream", low, MI300X, {})
    assert ev.verdict is RunVerdict.FAIL
    assert ev.reason.startswith("bandwidth at Triad: 3496770.90 MB/s below ")
    assert "acceptance floor 3885301.00 MB/s" in ev.reason and SOURCE in ev.reason


def test_one_slow_gpu_fails_the_node():
    """AMD's floor holds for every GPU: the second table's Triad alone is low."""
    first, second = AMD_BABELSTREAM.split("Function MBytes/sec", 1)[1].split("Function MBytes/sec")
    slow = AMD_BABELSTREAM.replace(second, second.replace("Triad 3947212.603", "Triad 3000000.0"))
    assert slow != AMD_BABELSTREAM
    ev = evaluate("babelstream", slow, MI300X, {})
    assert ev.verdict is RunVerdict.FAIL and "Triad: 3000000.00 MB/s" in ev.reason


def test_babelstream_without_the_compared_line_is_unjudged():
    no_triad = "\n".join(line for line in AMD_BABELSTREAM.splitlines()
                         if not line.startswith("Triad "))
    ev = evaluate("babelstream", no_triad, MI300X, {})
    assert ev.verdict is RunVerdict.UNJUDGED
    assert ev.reason.startswith("the output has no Triad (BabelStream kernel), which "
                                "BM.GPU.MI300X.8 documents")
    # BabelStream before 3.0 prints no Dot: its other kernels are shown, never passed
    old = (CORPUS / "babelstream" / "uob-fury-nano-hip-2.0.txt").read_text()
    good = with_kernels(old, {k: 5e6 for k in ("Copy", "Mul", "Add", "Triad")})
    ev = evaluate("babelstream", good, MI300X, {})
    assert ev.verdict is RunVerdict.UNJUDGED and "no Dot (BabelStream kernel)" in ev.reason


def test_babelstream_of_another_vendor_is_unjudged_on_mi300x():
    cuda = (CORPUS / "babelstream" / "uob-titanxp-cuda-3.3.txt").read_text()
    ev = evaluate("babelstream", cuda, MI300X, {})
    assert ev.verdict is RunVerdict.UNJUDGED
    assert "the output names nvidia's GPU software" in ev.reason


@pytest.mark.parametrize("header,factor", [
    ("Function    MiBytes/sec  Min (sec)   Max         Average", 2**20 / 1e6),  # --mibibytes
    ("Function    GB/s        Min (sec)   Max         Average", 1e3),  # after 5.0, --gigabytes
    ("Function    MB/s        Min (sec)   Max         Average", 1.0),  # after 5.0, default
])
def test_babelstream_reads_the_unit_it_printed(header, factor):
    text = AMD_BABELSTREAM.replace("Function MBytes/sec Min (sec) Max Average", header)
    measured = outputs.parse("babelstream", text, {})
    assert measured.unit == "MB/s"
    assert measured.values["Triad"] == pytest.approx(3947212.603 * factor)


def test_babelstream_csv():
    """--csv (src/main.cpp, v4.0 on): one header line, then a line a kernel."""
    rows = [f"{m.group(1)},50,268435456,8,{m.group(3)},0.001,0.002,0.0015"
            for m in _KERNEL_ROW.finditer(AMD_BABELSTREAM)]
    text = "\n".join(["function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,"
                      "max_runtime,avg_runtime", *rows[:5],
                      "function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,"
                      "max_runtime,avg_runtime", *rows[5:]])
    measured = outputs.parse("babelstream", text, {"gpus": 2})
    assert measured.values == outputs.parse("babelstream", AMD_BABELSTREAM, {}).values


@pytest.mark.parametrize("change,params,verdict,words", [
    # a run of 8 GPUs whose output holds 2 tables
    (lambda t: t, {"gpus": 8}, RunVerdict.FAIL, "expected 8 result tables"),
    # a table cut after Add
    (lambda t: t.rsplit("Triad ", 1)[0], {}, RunVerdict.FAIL, "1 'Triad' lines for 2"),
    # the kernels computed wrong values (check_solution, on stderr)
    (lambda t: t + "Validation failed on a[]. Average error 1.5\n", {}, RunVerdict.FAIL,
     "Validation failed on a[]"),
    # single precision cannot be compared with AMD's double-precision floors
    (lambda t: t.replace("Precision: **double**", "Precision: float"), {},
     RunVerdict.UNJUDGED, "single precision"),
    # a unit the parser does not know
    (lambda t: t.replace("MBytes/sec", "KBytes/sec"), {}, RunVerdict.UNJUDGED,
     "in KBytes/s, a unit this parser does not know"),
    # a --triad-only run cut before its one bandwidth line
    (lambda t: "BabelStream\nVersion: 5.0\nRunning triad 50 times\n", {},
     RunVerdict.FAIL, "--triad-only run ('Running triad ... times') with 0 'Bandwidth"),
    (lambda t: "BabelStream\nVersion: 5.0\nImplementation: HIP\n", {}, RunVerdict.FAIL,
     "output truncated: BabelStream printed no 'Function MBytes/sec' table"),
    (lambda t: "Triad: 1.0\n", {}, RunVerdict.UNJUDGED, "not BabelStream output"),
])
def test_babelstream_refusals_name_the_line(change, params, verdict, words):
    ev = evaluate("babelstream", change(AMD_BABELSTREAM), MI300X, params)
    assert ev.verdict is verdict, ev.reason
    assert words in ev.reason


# --------------------------------------------------------------------------- TransferBench

def test_amds_p2p_run_passes_amds_floors():
    ev = evaluate("transferbench_p2p", AMD_P2P, MI300X, {})
    assert ev.verdict is RunVerdict.PASS, ev.reason
    values = {row.key: row.measured for row in ev.rows}
    # GB/s as printed, read as MB/s: the GPU->GPU averages and the slowest GPU pair
    assert values == {"unidir_avg": 48440.0, "bidir_avg": 46240.0,
                      "unidir_min": 47470.0, "bidir_min": 45940.0}


def test_p2p_below_the_floor_fails_naming_it():
    floor = floors("transferbench_p2p")["unidir_avg"] / 1000     # GB/s, as printed
    low = AMD_P2P.replace("Averages (During UniDir): 35.85 41.98 55.24 48.44",
                          f"Averages (During UniDir): 35.85 41.98 55.24 {0.9 * floor:.2f}")
    assert low != AMD_P2P
    ev = evaluate("transferbench_p2p", low, MI300X, {})
    assert ev.verdict is RunVerdict.FAIL
    assert ev.reason.startswith("bandwidth at unidir_avg: 30510.00 MB/s below ")
    assert "acceptance floor 33900.00 MB/s" in ev.reason and SOURCE in ev.reason
    at = AMD_P2P.replace("Averages (During BiDir): 30.72 43.84 43.75 46.24",
                         "Averages (During BiDir): 30.72 43.84 43.75 43.90")
    assert evaluate("transferbench_p2p", at, MI300X, {}).verdict is RunVerdict.PASS


def test_p2p_without_its_bidirectional_run_is_unjudged():
    """P2P_MODE=1 runs the unidirectional copies only (PeerToPeer.hpp)."""
    uni = AMD_P2P.split("Bidirectional copy")[0]
    ev = evaluate("transferbench_p2p", uni, MI300X, {})
    assert ev.verdict is RunVerdict.UNJUDGED
    assert "the output has no bidir_avg (TransferBench p2p value)" in ev.reason


@pytest.mark.parametrize("change,verdict,words", [
    (lambda t: t.replace("Averages (During UniDir): 35.85 41.98 55.24 48.44\n", ""),
     RunVerdict.FAIL, "no 'Averages (During UniDir)' line"),
    (lambda t: t.replace("GPU 03 -> 55.22 55.25 48.81 48.79 48.78 1675.13 48.72 48.66 48.32 47.93",
                         "GPU 03 -> 55.22 55.25 48.81 48.79 48.78 1675.13 N/A 48.66 48.32 47.93"),
     RunVerdict.FAIL, "no copy (N/A) between GPU 3 and GPU 4"),
    (lambda t: t.replace("GPU 05 <- 39.82 42.12 46.00", "GPU 05 <- 39.82 42.12"),
     RunVerdict.FAIL, "the row 'GPU 05 <-' has 9 values for 10 columns"),
    (lambda t: t + t, RunVerdict.UNJUDGED, "two unidirectional matrices"),
    # OUTPUT_TO_CSV=1 puts commas between the cells and prints no averages
    (lambda t: t.replace("SRC+EXE\\\\DST CPU 00 CPU 01", "SRC+EXE\\\\DST,CPU 00,CPU 01,"),
     RunVerdict.UNJUDGED, "TransferBench's CSV (OUTPUT_TO_CSV=1)"),
    (lambda t: "Summary:\nRTotal 1 2\n", RunVerdict.UNJUDGED, "not TransferBench p2p output"),
])
def test_p2p_refusals_name_the_line(change, verdict, words):
    text = change(AMD_P2P)
    assert text != AMD_P2P
    ev = evaluate("transferbench_p2p", text, MI300X, {})
    assert ev.verdict is verdict, ev.reason
    assert words in ev.reason


def test_a_slow_pair_is_kept_beside_the_average():
    """One slow link hides in the average of 56 pairs; the slowest pair shows it."""
    slow = AMD_P2P.replace("GPU 06 -> 55.22 55.24 47.71", "GPU 06 -> 55.22 55.24 20.00")
    values = outputs.parse("transferbench_p2p", slow, {}).values
    assert values["unidir_min"] == 20000.0 and values["unidir_avg"] == 48440.0


def test_amds_a2a_run_passes_and_below_the_floor_fails_naming_it():
    ev = evaluate("transferbench_a2a", AMD_A2A, MI300X, {})
    assert ev.verdict is RunVerdict.PASS, ev.reason
    # the average AMD's floor judges, and the slowest pair (GPU 3 -> GPU 1)
    assert {row.key: row.measured for row in ev.rows} == pytest.approx(
        {"avg": 35776.0, "min": 28583.0})
    floor = floors("transferbench_a2a")["avg"] / 1000     # GB/s, as printed
    low = AMD_A2A.replace("(GPU Timed): 35.776 GB/s", f"(GPU Timed): {0.9 * floor:.3f} GB/s")
    assert low != AMD_A2A
    ev = evaluate("transferbench_a2a", low, MI300X, {})
    assert ev.verdict is RunVerdict.FAIL
    assert ev.reason.startswith("bandwidth at avg: 29610.00 MB/s below ")
    assert "acceptance floor 32900.00 MB/s" in ev.reason and SOURCE in ev.reason


@pytest.mark.parametrize("change,verdict,words", [
    (lambda t: t.replace("Average bandwidth (GPU Timed): 35.776 GB/s\n", ""),
     RunVerdict.FAIL, "no 'Average bandwidth (GPU Timed)' line"),
    (lambda t: t.replace("GPU 02 31.420 34.604 N/A", "GPU 02 31.420 N/A N/A"),
     RunVerdict.FAIL, "no copy (N/A) from GPU 2 to GPU 1"),
    (lambda t: AMD_P2P, RunVerdict.UNJUDGED, "not TransferBench a2a output: no 'Summary:'"),
    (lambda t: t + t, RunVerdict.UNJUDGED, "2 a2a summaries in one output"),
])
def test_a2a_refusals_name_the_line(change, verdict, words):
    text = change(AMD_A2A)
    assert text != AMD_A2A
    ev = evaluate("transferbench_a2a", text, MI300X, {})
    assert ev.verdict is verdict, ev.reason
    assert words in ev.reason


def test_an_a2a_summary_is_never_read_as_p2p():
    ev = evaluate("transferbench_p2p", AMD_A2A, MI300X, {})
    assert ev.verdict is RunVerdict.UNJUDGED and "not TransferBench p2p output" in ev.reason


# --------------------------------------------------------------------------- Spack

def test_babelstream_is_built_for_each_vendors_gpus():
    """spack-packages' babelstream: +cuda cuda_arch=...; HIP's model is +hip, and only
    ROCmPackage's +rocm carries amdgpu_target (its cmake_args pass it to hipcc)."""
    def rule(name):
        scope = scopes.derive(shapes.load(name))
        specs = scope["definitions"][0][scopes.SPECS_DEFINITION]
        return scope["packages"].get("babelstream", {}).get("require"), specs

    require, specs = rule(MI300X)
    assert require == ["@5.0 +hip +rocm amdgpu_target=gfx942 target=x86_64_v3"]
    assert any(s.startswith("babelstream ") for s in specs)
    assert any(s.startswith("transferbench ") for s in specs)
    require, specs = rule("BM.GPU.H100.8")
    assert require and require[0].startswith("@5.0 +cuda cuda_arch=90 ")
    assert not any(s.startswith("transferbench") for s in specs)
    require, specs = rule("BM.Optimized3.36")     # no GPU: nothing to measure
    assert require is None and not any(s.startswith("babelstream") for s in specs)


def test_the_executable_is_the_vendors_model():
    assert [a.babelstream_executable for a in accelerators.VENDORS.values()] == \
        ["cuda-stream", "hip-stream"]


# --------------------------------------------------------------------------- the command

def _ocibench(*argv: str) -> tuple[int, str]:
    """Run the ocibench command in this process: (exit status, its output)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = cli.main(list(argv))
    return status, out.getvalue()


def test_ocibench_evaluate_exits_by_the_verdict(tmp_path):
    """`ocibench evaluate babelstream FILE --shape BM.GPU.MI300X.8`: 0 at AMD's figure, 1
    below its floor (the line names it), 3 without the compared line."""
    runs = {"published.txt": AMD_BABELSTREAM,
            "low.txt": with_kernels(AMD_BABELSTREAM, {"Triad": 3496770.9}),
            "no-triad.txt": "\n".join(line for line in AMD_BABELSTREAM.splitlines()
                                      if not line.startswith("Triad "))}
    for name, text in runs.items():
        (tmp_path / name).write_text(text)
    status, out = _ocibench("evaluate", "babelstream", str(tmp_path / "published.txt"),
                            "--shape", MI300X)
    assert status == 0, out
    status, out = _ocibench("evaluate", "babelstream", str(tmp_path / "low.txt"),
                            "--shape", MI300X)
    assert status == 1 and "acceptance floor 3885301.00 MB/s" in out and SOURCE in out
    status, out = _ocibench("evaluate", "babelstream", str(tmp_path / "no-triad.txt"),
                            "--shape", MI300X)
    assert status == 3 and "no Triad (BabelStream kernel)" in out
    (tmp_path / "p2p.txt").write_text(AMD_P2P)
    status, out = _ocibench("evaluate", "transferbench_p2p", str(tmp_path / "p2p.txt"),
                            "--shape", MI300X)
    assert status == 0, out
