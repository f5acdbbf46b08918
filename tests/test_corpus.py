"""Outputs that others published (tests/data/corpus, listed in its index.yaml) are read to
the figures they print, or are refused or left unjudged for the reason the index names.

Every entry is judged on ``local``, which documents no figure: a sane output there is
RECORDED, so what is tested is the reading of the output, not OCI's figures.
tests/data/corpus/README.md says how an entry's expectation is written.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ocibench import benchmarks
from ocibench.figures import outputs
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict

CORPUS = Path(__file__).parent / "data" / "corpus"
INDEX = yaml.safe_load((CORPUS / "index.yaml").read_text())["entries"]

#: GB/s per unit, for a figure the output prints in another unit than the parser's rows.
#: perftest's "MB/sec" is 2^20 bytes a second (perftest_parameters.h: #define MEGA 1048576),
#: which the index writes as MiB/s.
GBS_PER_UNIT = {"MB/s": 1e-3, "MiB/s": 2**20 / 1e9, "GB/s": 1.0, "Gb/s": 0.125}


def _convert(value: float, unit: str, to: str) -> float:
    if unit == to:
        return value
    return value * GBS_PER_UNIT[unit] / GBS_PER_UNIT[to]


def _text(entry: dict[str, Any]) -> str:
    # bytes as published: CRLF and trailing blanks stay what they were
    return (CORPUS / entry["file"]).read_bytes().decode()


def test_index_lists_every_file_once_with_its_source() -> None:
    files = [entry["file"] for entry in INDEX]
    assert len(files) == len(set(files)), "a file is listed twice"
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.txt")}
    assert set(files) == on_disk, "index.yaml and the files differ"
    for entry in INDEX:
        assert entry.get("source"), f"{entry['file']}: no source"
        assert entry["check"] in benchmarks.CHECKS, f"{entry['file']}: unknown check"
        expect = entry["expect"]
        assert len(set(expect) & {"figures", "unjudged", "refused"}) == 1, entry["file"]
        assert set(expect) <= {"figures", "unjudged", "refused", "unit", "metric", "path"}, \
            f"{entry['file']}: unknown expectation"


def test_corpus_spans_the_benchmarks() -> None:
    assert len(INDEX) >= 90
    kinds = [entry["file"].split("/")[0] for entry in INDEX]
    # every parser tried on outputs of several sources, versions and launchers
    for kind in ("nccl-tests", "osu", "imb", "stream", "perftest", "nvbandwidth"):
        assert kinds.count(kind) >= 6, f"{kind}: {kinds.count(kind)} published outputs"


@pytest.mark.parametrize("entry", INDEX, ids=[entry["file"] for entry in INDEX])
def test_published_output(entry: dict[str, Any]) -> None:
    name, check, expect = entry["file"], entry["check"], entry["expect"]
    ev = evaluate(check, _text(entry), "local", entry.get("params") or {})
    if "path" in expect:
        assert expect["path"] in (ev.path or ""), f"{name}: path {ev.path!r}"
    if "figures" in expect:
        assert ev.verdict is RunVerdict.RECORDED, f"{name}: {ev.verdict}: {ev.reason}"
        metric = expect.get("metric", benchmarks.CHECKS[check].metric)
        rows = {row.key: row for row in ev.rows if row.metric == metric}
        for key, value in expect["figures"].items():
            assert key in rows, f"{name}: no {metric} row for {key!r}; rows: {sorted(rows, key=str)}"
            row = rows[key]
            want = _convert(value, expect.get("unit", row.unit), row.unit)
            assert row.measured is not None and math.isclose(row.measured, want, rel_tol=1e-6), \
                f"{name}: {key!r} read as {row.measured} {row.unit}, printed {value}"
        return
    state, words = next((s, expect[s]) for s in ("unjudged", "refused") if s in expect)
    # "unjudged" and "refused" say what the index expects; either state holds, as long
    # as the output is never passed or recorded as sane and the reason names the cause.
    assert ev.verdict in (RunVerdict.UNJUDGED, RunVerdict.FAIL), \
        f"{name}: {ev.verdict} ({state} expected: {words!r})"
    assert words in (ev.reason or ""), f"{name}: reason {ev.reason!r} lacks {words!r}"


def test_stream_mpi_is_read_but_never_compared_with_stream_c() -> None:
    # stream_mpi.c sums its rates over the ranks: sane, recorded on `local` (above), but
    # measured another way than the shapes' stream.c figures, which it must never meet.
    entry = next(e for e in INDEX if e["file"] == "stream/llnl-pascal-stream-mpi-1.8-2x18.txt")
    measured = outputs.parse("stream", _text(entry), entry["params"])
    assert measured.method and "Data is distributed across 2 MPI ranks" in measured.method
    assert "OMP_NUM_THREADS=36" in measured.method


@pytest.mark.parametrize(("name", "words"), [
    ("nccl-tests/xxrjun-h100-1n4-all_gather-2.17.8.txt", "is not an all-reduce's (redop none"),
    ("nccl-tests/xxrjun-h100-1n4-reduce_scatter-2.17.8.txt", "one rank's share"),
])
def test_nccl_rows_tell_other_collectives_without_their_banner(name: str, words: str) -> None:
    # nccl-tests before 2.17 prints no '# Collective test starting' line: the published
    # output without it is what an older binary prints, and the rows must still tell.
    entry = next(e for e in INDEX if e["file"] == name)
    text = "".join(line for line in _text(entry).splitlines(keepends=True)
                   if "Collective test" not in line)
    ev = evaluate(entry["check"], text, "local", entry["params"])
    assert ev.verdict is RunVerdict.UNJUDGED, f"{name}: {ev.verdict}: {ev.reason}"
    assert words in (ev.reason or ""), ev.reason


def test_omb_validation_fail_is_a_broken_run() -> None:
    # OMB --validation prints "Fail" where the data arrived wrong (osu_util_mpi.h
    # VALIDATION_STATUS); the published run passed everywhere, so one row is turned.
    entry = next(e for e in INDEX if e["file"] == "osu/cscs-osu_bw-validation-2n-ompi-7.5.txt")
    lines = _text(entry).splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("65536 "))
    lines[at] = lines[at].replace("Pass", "Fail")
    ev = evaluate(entry["check"], "".join(lines), "local", entry["params"])
    assert ev.verdict is RunVerdict.FAIL, f"{ev.verdict}: {ev.reason}"
    assert "validation failed at message size 65536" in (ev.reason or "")


def test_perftest_gpu_buffers_are_never_compared_with_host_figures() -> None:
    # --use_cuda moves the data NIC <-> GPU (GPUDirect RDMA): BM.GPU.A100-v2.8's floor is
    # for host memory (oci-hpc's 'ib_write_bw -F -q 2 -x 3 --report_gbits'), which this
    # sane 181 Gb/s run would otherwise pass.
    name = "perftest/schmaustech-ib_write_bw-cuda-q16-D60-client.txt"
    entry = next(e for e in INDEX if e["file"] == name)
    ev = evaluate(entry["check"], _text(entry), "BM.GPU.A100-v2.8",
                  {"qps": 16, "size": 65536})
    assert ev.verdict is RunVerdict.UNJUDGED, f"{ev.verdict}: {ev.reason}"
    assert "GPU memory ('initializing CUDA': perftest --use_cuda)" in (ev.reason or "")
    # the same run with ROCm's buffers: the line of perftest's src/rocm_memory.c
    # (rocm_memory_init) in the place of CUDA's, on an AMD shape
    rocm = _text(entry).replace(
        "initializing CUDA",
        "Using ROCm Device with ID: 0, Name: AMD Instinct MI300X, PCI Bus ID: 0x11, "
        "GCN Arch: gfx942:sramecc+:xnack-")
    assert rocm != _text(entry)
    ev = evaluate(entry["check"], rocm, "BM.GPU.MI300X.8", {"qps": 16, "size": 65536})
    assert ev.verdict is RunVerdict.UNJUDGED, f"{ev.verdict}: {ev.reason}"
    assert "perftest --use_rocm)" in (ev.reason or "")


def test_nccl_all_types_or_ops_are_never_one_median() -> None:
    # all_reduce_perf -d all (or -o all) prints the size range once per type (or
    # reduction); as repeated cycles they would be a median of float and int32 busbw.
    entry = next(e for e in INDEX if e["file"] == "nccl-tests/gcp-a3mega-2n-tcp-2.x.txt")
    lines = _text(entry).splitlines(keepends=True)
    rows = [line for line in lines if "     float     sum " in line]
    at = lines.index(rows[-1]) + 1
    text = "".join(lines[:at] + [row.replace(" float ", " int32 ") for row in rows]
                   + lines[at:])
    ev = evaluate(entry["check"], text, "local", entry["params"])
    assert ev.verdict is RunVerdict.UNJUDGED, f"{ev.verdict}: {ev.reason}"
    assert "2 data types or reductions (float sum, int32 sum" in (ev.reason or "")



#: A CommonMark ATX heading: up to 3 blanks, 1 to 6 '#', then a blank or the line's end;
#: a closing run of '#' after a blank goes too.
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+|$)")
_CLOSING = re.compile(r"[ \t]+#+[ \t]*$")


def _as_markdown_shows(text: str) -> str:
    """``text`` as a page shows it when pasted outside a code block: each heading line
    without its '#' (and no line that is not a heading touched: '#----', '#bytes')."""
    return "".join(_CLOSING.sub("", _HEADING.sub("", line.rstrip("\n"))) + "\n"
                   if _HEADING.match(line) else line
                   for line in text.splitlines(keepends=True))


#: The lines a whole run of each family has (its start and its table), with their '#'.
_WHOLE_RUN = {"nccl-tests": ("#", "# Avg bus bandwidth"),
              "rccl-tests": ("#", "# Avg bus bandwidth"),
              "osu": ("# OSU ", "# Size"), "imb": ("# Benchmarking ", "#bytes")}
_MARKDOWN = [entry for entry in INDEX if "figures" in entry["expect"]
             and entry["file"].split("/")[0] in _WHOLE_RUN
             and all(f"\n{start}" in "\n" + _text(entry)
                     for start in _WHOLE_RUN[entry["file"].split("/")[0]])]


@pytest.mark.parametrize("entry", _MARKDOWN, ids=[entry["file"] for entry in _MARKDOWN])
def test_output_whose_hashes_markdown_took_is_read(entry: dict[str, Any]) -> None:
    # pasted outside a code block, Markdown takes each '# ' line for a heading: the page
    # shows "nThread 1 nGpus 1 ...", "OSU MPI Bandwidth Test v7.5", "Benchmarking
    # PingPong" without '#' (NVIDIA/nccl-tests issue 249 was posted so): the same run.
    text = _as_markdown_shows(_text(entry))
    assert text != _text(entry)
    ev = evaluate(entry["check"], text, "local", entry.get("params") or {})
    assert ev.verdict is RunVerdict.RECORDED, f"{ev.verdict}: {ev.reason}"
    metric = entry["expect"].get("metric", benchmarks.CHECKS[entry["check"]].metric)
    plain = evaluate(entry["check"], _text(entry), "local", entry.get("params") or {})
    assert [(r.key, r.measured) for r in ev.rows if r.metric == metric] == \
        [(r.key, r.measured) for r in plain.rows if r.metric == metric]


def test_stream_built_without_openmp_ran_one_thread() -> None:
    # stream.c prints its 'Number of Threads' lines only when built with OpenMP (#ifdef
    # _OPENMP): the published run without them is what a plain 'gcc stream.c' prints,
    # one thread, sane; never a FAIL, and never compared with the figure of 96 threads.
    entry = next(e for e in INDEX if e["file"] == "stream/revyos-lpi4a-5.10.txt")
    text = "".join(line for line in _text(entry).splitlines(keepends=True)
                   if not line.startswith("Number of Threads"))
    assert text != _text(entry)
    ev = evaluate("stream", text, "local", {"threads": 1})
    assert ev.verdict is RunVerdict.RECORDED, f"{ev.verdict}: {ev.reason}"
    assert {r.key: r.measured for r in ev.rows}["Triad"] == entry["expect"]["figures"]["Triad"]
    ev = evaluate("stream", text, "BM.Standard.E5.192", {"nps": 1, "threads": 96})
    assert ev.verdict is RunVerdict.UNJUDGED, f"{ev.verdict}: {ev.reason}"
    assert "built without OpenMP" in (ev.reason or "")
