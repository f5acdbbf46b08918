"""The formats users paste, for every parser: launcher prefixes, CRLF, interleaved
warnings, every nccl-tests layout from 2.0 to 2.19 (captured on 2 x H200 where the
project's pinned version prints it), STREAM 5.9, concatenated runs, non-ASCII digits and
inputs that once took quadratic time.  tests/data/formats/README.md says where each
file comes from.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

import seed_outputs
from ocibench.figures import outputs
from ocibench.figures.evaluate import evaluate
from ocibench.metrics import RunVerdict

DATA = Path(__file__).parent / "data" / "formats"
NCCL = DATA / "nccl-tests"
#: The captures' run: 2 GPUs of one node, 8 B doubling to 1 GiB.
TWO_GPUS = {"nodes": 1, "gpus_per_node": 2, "begin": "8", "end": "1G", "factor": 2}
TO_128M = {**TWO_GPUS, "end": "128M"}


def _rows(path: Path, size: int) -> list[list[str]]:
    """Every results line of ``size`` in a capture, split on blanks, read here without
    the parser: the last token before each line's first digit is its launcher prefix."""
    found = []
    for line in path.read_text().splitlines():
        body = line.split("<stdout>:", 1)[-1].split()
        if body[:1] == [str(size)] and len(body) > 8:
            found.append(body)
    return found


# --- nccl-tests 2.19.6, captured --------------------------------------------------

@pytest.mark.parametrize("name, params", [
    ("iter_I1.txt", TWO_GPUS),        # -I 1: i_min i_max i_p99 i_cv% after each #wrong
    ("stamps_S.txt", TWO_GPUS),       # -S 1: "2026-11-26 04:58:52" after in-place
    ("tagged.txt", TO_128M),          # mpirun --tag-output
    ("timestamped.txt", TO_128M),     # mpirun --timestamp-output
])
def test_nccl_captures_give_the_busbw_they_print(name, params):
    last = 2**30 if params["end"] == "1G" else 2**27
    [row] = _rows(NCCL / name, last)
    header = next(line for line in (NCCL / name).read_text().splitlines()
                  if re.search(r"#\s+size\s+count", line)).split("<stdout>:")[-1]
    names = header.lstrip("#").split()
    busbw = [i for i, column in enumerate(names) if column == "busbw"]
    m = outputs.parse("nccl_all_reduce_perf", (NCCL / name).read_text(), params)
    assert m.values["out_of_place"] == float(row[busbw[0]])
    assert m.values["in_place"] == float(row[busbw[1]])
    assert m.method is None and m.samples == {}


def test_nccl_cycles_are_samples_and_the_median_is_judged():
    """-N 3 prints the size range three times: each cycle is a sample."""
    text = (NCCL / "cycles_N3.txt").read_text()
    rows = _rows(NCCL / "cycles_N3.txt", 2**30)
    assert len(rows) == 3
    m = outputs.parse("nccl_all_reduce_perf", text, TWO_GPUS)
    out_of_place = tuple(float(row[7]) for row in rows)
    assert m.samples["busbw"]["out_of_place"] == out_of_place
    assert m.values["out_of_place"] == statistics.median(out_of_place)
    assert m.samples["busbw"]["in_place"] == tuple(float(row[11]) for row in rows)
    # A cycle cut short is still a missing size, not a sample.
    lines = text.splitlines()
    del lines[max(i for i, line in enumerate(lines) if line.split()[:1] == ["65536"])]
    with pytest.raises(outputs.SanityError, match="no line for message size 65536"):
        outputs.parse("nccl_all_reduce_perf", "\n".join(lines), TWO_GPUS)


@pytest.mark.parametrize("name", ["onepro_g2.txt", "onepro_g2_nompi_t2.txt"])
def test_one_process_driving_two_gpus_is_sane_and_named(name):
    """nccl-tests' README's first example (-g 2), and -t 2: healthy, parsed, with the
    method named and the command line that would compare."""
    m = outputs.parse("nccl_all_reduce_perf", (NCCL / name).read_text(), TWO_GPUS)
    [row] = _rows(NCCL / name, 2**30)
    assert m.values["out_of_place"] == float(row[7])
    assert m.method.startswith("one process drove 2 GPUs")
    assert "mpirun -np 2 all_reduce_perf -b 8 -e 1G -f 2 -g 1" in m.method
    result = evaluate("nccl_all_reduce_perf", (NCCL / name).read_text(), "local", TWO_GPUS)
    assert result.verdict is RunVerdict.RECORDED, result.reason


def test_one_process_for_eight_gpus_is_unjudged_against_a_figure():
    """A documented 8-GPU figure, the run made by one process (-g 8): UNJUDGED with the
    method, never FAIL.  Source-derived: the seed's 8-GPU output with one Pid."""
    entry = next(e for e in seed_outputs.INDEX if e.check == "nccl_all_reduce_perf"
                 and e.params["nodes"] == 1)
    text = re.sub(r"(Rank\s+\d+\s+Group\s+\d+\s+Pid\s+)\d+", r"\g<1>4242",
                  seed_outputs.extract(entry))
    result = evaluate(entry.check, text, entry.shape, entry.params)
    assert result.verdict is RunVerdict.UNJUDGED, result.reason
    assert "one process drove 8 GPUs" in result.reason
    assert "mpirun -np 8 all_reduce_perf -b 10G -e 10G -f 1 -g 1" in result.reason


def test_nccl_json_file_is_an_input_of_its_own(tmp_path):
    """-J: the JSON nccl-tests writes, given to `ocibench evaluate` as the file."""
    doc = json.loads((NCCL / "json_J.json").read_text())
    last = next(r for r in doc["results"] if r["size"] == 2**30)
    m = outputs.parse("nccl_all_reduce_perf", (NCCL / "json_J.json").read_text(), TWO_GPUS)
    assert m.values["out_of_place"] == last["out_of_place"]["bus_bw"]
    assert m.values["in_place"] == last["in_place"]["bus_bw"]
    assert m.values["avg"] == doc["average_bus_bandwidth"]["bandwidth"]
    run = [sys.executable, "-m", "ocibench.cli", "evaluate", "nccl_all_reduce_perf",
           str(NCCL / "json_J.json"), "--shape", "local",
           *[f"--set={k}={v}" for k, v in TWO_GPUS.items()]]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # A damaged file (the run stopped mid-write) is a broken run; wrong values fail.
    cut = tmp_path / "cut.json"
    cut.write_text((NCCL / "json_J.json").read_text()[:5000])
    with pytest.raises(outputs.SanityError, match="truncated or damaged") as err:
        outputs.parse("nccl_all_reduce_perf", cut.read_text(), TWO_GPUS)
    assert not isinstance(err.value, outputs.Unjudged)
    last["in_place"]["nwrong"] = 3.0
    with pytest.raises(outputs.SanityError, match="#wrong is 3 at 1073741824"):
        outputs.parse("nccl_all_reduce_perf", json.dumps(doc), TWO_GPUS)
    with pytest.raises(outputs.Unjudged, match="not its -J output"):
        outputs.parse("nccl_all_reduce_perf", '{"results": 1}', TWO_GPUS)
    with pytest.raises(outputs.Unjudged, match="nested too deep"):
        outputs.parse("nccl_all_reduce_perf", '{"a":' + "[" * 10**5 + "]" * 10**5 + "}",
                      TWO_GPUS)


@pytest.mark.parametrize(("change", "words"), [
    # another binary's -J file: args[0] names it (util.cu writes argv as "args")
    (lambda doc: doc["args"].__setitem__(0, "/opt/nccl-tests/build/all_gather_perf"),
     "the output is all_gather_perf's"),
    # without args, the records: all_gather_perf reduces nothing, reduce_scatter_perf
    # counts one rank's share
    (lambda doc: [r.__setitem__("redop", "none") for r in doc["results"]] and doc.pop("args"),
     "redop none"),
    (lambda doc: [r.__setitem__("count", r["count"] // 2) for r in doc["results"]]
     and doc.pop("args"), "one rank's share"),
])
def test_nccl_json_of_another_collective_is_never_an_all_reduce(change, words):
    doc = json.loads((NCCL / "json_J.json").read_text())
    change(doc)
    with pytest.raises(outputs.Unjudged, match=re.escape(words)):
        outputs.parse("nccl_all_reduce_perf", json.dumps(doc), TWO_GPUS)


# --- nccl-tests before 2.13 (source-derived) --------------------------------------

OLD = {**TWO_GPUS, "end": "128M"}


def test_nccl_before_2_13_rank_lines_and_error_column():
    """'#   Rank  0 Pid ...' without Group, no root column, the 'error' column (a
    relative error: rounding makes it non-zero; faults are in 'Out of bounds')."""
    text = (NCCL / "v2.11-format.txt").read_text()
    [row] = _rows(NCCL / "v2.11-format.txt", 2**27)
    m = outputs.parse("nccl_all_reduce_perf", text, OLD)
    assert (m.values["out_of_place"], m.values["in_place"]) == (float(row[6]), float(row[10]))
    # -c 0: nccl-tests prints N/A in the check column
    unchecked = re.sub(r"\d+e[+-]\d\d", "N/A", text)
    assert "N/A" in unchecked
    assert outputs.parse("nccl_all_reduce_perf", unchecked, OLD).values == m.values
    fewer = text.replace("#   Rank  1 Pid   1727", "#   Rank  1 Pid   1726").replace(
        "device  1 [0x07]", "device  0 [0x07]")
    assert outputs.parse("nccl_all_reduce_perf", fewer, OLD).method  # one Pid, 2 GPUs
    damaged = text.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 4 FAILED")
    with pytest.raises(outputs.SanityError, match="out of bounds values: 4 FAILED"):
        outputs.parse("nccl_all_reduce_perf", damaged, OLD)


def test_a_results_line_the_header_does_not_describe_is_unjudged():
    text = (NCCL / "v2.11-format.txt").read_text()
    odd = text.replace("5e-07\n", "5e-07  extra\n", 1)
    with pytest.raises(outputs.Unjudged, match=r"does not fit the header"):
        outputs.parse("nccl_all_reduce_perf", odd, OLD)


# --- every parser: prefixes, CRLF, warnings ----------------------------------------

WARNINGS = (
    "[1732590000.123456] [node1:4242 :0]     ucp_context.c:1198 UCX  WARN  transport "
    "'cma' is not available",
    "node1:4242:4250 [0] NCCL INFO Channel 00/24 : 0 1",
    "node1:4242:4250 [1] NCCL WARN NET/IB : No device found.",
    "Lmod has detected the following error: These module(s) or extension(s) exist but "
    "cannot be loaded as requested: \"cuda\"",
    "[ 1234.567890] mlx5_core 0000:0c:00.0: mlx5_pcie_event: PCIe slot power capability "
    "was not advertised.",
    "   12  ",
)

PREFIXES = {
    "tag-output": lambda i, line: f"[1,{i % 2}]<stdout>:{line}",
    "timestamp-output": lambda i, line: f"Tue Nov 26 04:59:01 2026<stdout>:{line}",
    "both": lambda i, line: f"Tue Nov 26 04:59:01 2026[1,{i % 2}]<stdout>:{line}",
    "srun-label": lambda i, line: f"{i % 12:>2}: {line}",
    # log collectors: kubectl logs --timestamps (of an mpirun --tag-output launcher),
    # moreutils' ts with its default and a bracketed format, pdsh/clush on one host
    "kubectl-timestamps": lambda i, line:
        f"2026-11-26T04:59:{i % 60:02}.{i:09}Z [1,{i % 2}]<stdout>:{line}",
    "ts": lambda i, line: f"Nov 26 04:59:{i % 60:02} {line}",
    "ts-bracketed": lambda i, line: f"[2026-11-26 04:59:{i % 60:02}] {line}",
    "logger": lambda i, line: f"2026/11/26 04:59:{i % 60:02}.{i % 1000:03} {line}",
    "pdsh": lambda i, line: f"gpu-node-7: {line}",
    # a reply that quotes the output (e-mail, a Markdown block quote), nested once
    "quoted": lambda i, line: f"> > {line}",
    "crlf": lambda i, line: line + "\r",
}


@pytest.fixture(params=seed_outputs.INDEX, ids=[e.name for e in seed_outputs.INDEX])
def seed(request):
    return request.param, seed_outputs.extract(request.param)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_every_parser_reads_through_launcher_prefixes_and_warnings(seed, prefix):
    entry, text = seed
    plain = outputs.parse(entry.check, text, entry.params)
    lines = text.splitlines()
    noisy: list[str] = []
    for i, line in enumerate(lines):
        noisy.append(line)
        if i % 7 == 3:
            noisy.append(WARNINGS[i % len(WARNINGS)])
    wrapped = "\n".join(PREFIXES[prefix](i, line) for i, line in enumerate(noisy)) + "\n"
    assert outputs.parse(entry.check, wrapped, entry.params) == plain


def test_a_crash_behind_a_prefix_is_still_a_crash(seed):
    entry, text = seed
    crashed = text + "[1,1]<stderr>:Abort(1) on node 1 (rank 1 in comm 0): application " \
                     "called MPI_Abort\n"
    with pytest.raises(outputs.SanityError, match="benchmark crashed") as err:
        outputs.parse(entry.check, crashed, entry.params)
    assert not isinstance(err.value, outputs.Unjudged)


# --- STREAM 5.9 and concatenated runs ----------------------------------------------

def test_stream_5_9_is_read():
    text = (DATA / "stream" / "stream-5.9-scaling.txt").read_text()
    first = text[:text.index("Number of Threads requested = 2")]
    m = outputs.parse("stream", first, {"threads": 1})
    assert m.values == {"Copy": 9663.6238, "Scale": 9315.7724, "Add": 10429.7390,
                        "Triad": 10108.3413}
    with pytest.raises(outputs.Unjudged, match="3 runs in one output"):
        outputs.parse("stream", text, {"threads": 1})


@pytest.mark.parametrize("check", ["stream", "imb_pingpong", "imb_allreduce",
                                   "nccl_all_reduce_perf", "osu_latency"])
def test_two_runs_in_one_output_are_refused(check):
    """Issue 21: STREAM took the first table and IMB the last, so a good run followed
    by a bad one passed.  Every parser refuses two runs (UNJUDGED: which one?)."""
    entry = next(e for e in seed_outputs.INDEX if e.check == check)
    text = seed_outputs.extract(entry)
    broken = re.sub(r"(?m)^(Copy|Scale|Add|Triad):(\s+)\S+", r"\1:\g<2>100000.0", text)
    with pytest.raises(outputs.Unjudged, match="runs in one output"):
        outputs.parse(check, text + broken, entry.params)
    with pytest.raises(outputs.Unjudged, match="runs in one output"):
        outputs.parse(check, broken + text, entry.params)


# --- digits and bounded time -------------------------------------------------------

@pytest.mark.parametrize("digit", ["\uff18", "\u0668", "\u096e"])   # 8: full-width, Arabic-Indic, Devanagari
def test_non_ascii_digits_are_not_numbers(seed, digit):
    entry, text = seed
    last = max(i for i, line in enumerate(text.splitlines()) if re.search(r"\d\.\d", line))
    lines = text.splitlines()
    lines[last] = re.sub(r"(\d)\.(\d)", lambda m: f"{m.group(1)}.{digit}", lines[last], count=1)
    with pytest.raises(outputs.Unjudged, match=f"non-ASCII digit '{digit}'") as err:
        outputs.parse(entry.check, "\n".join(lines) + "\n", entry.params)
    assert lines[last].strip()[:40] in str(err.value)


@pytest.mark.parametrize("token, message", [
    ("1_000", "not a number"), ("nan", "not finite"), ("1e999", "not finite"),
    ("-inf", "not finite"), ("0x10", "not a number"),
])
def test_numbers_are_what_the_benchmarks_print(token, message):
    with pytest.raises(outputs.SanityError, match=message):
        outputs._number(token, 8)


def test_ten_million_blank_lines_take_linear_time():
    """Issue 21: '^\\s*Abort' with MULTILINE retried at every line start of a blank run
    took minutes on 10 MB.  Every marker, and the whole parse, must be linear: a
    quadratic pass over 10 M lines cannot finish in this bound on any machine."""
    blank = "\n" * 10_000_000
    start = time.monotonic()
    for marker in outputs.CRASH_MARKERS:
        assert marker.search(blank) is None
    with pytest.raises(outputs.Unjudged):
        outputs.parse("osu_latency", blank + "# OSU MPI Latency Tes\n", {})
    assert time.monotonic() - start < 30
    spaced = " \n" * 5_000_000 + "Abort(1) on node 0\n"
    start = time.monotonic()
    assert outputs.first_crash(spaced).group(0) == "Abort(1)"
    assert time.monotonic() - start < 30


def test_a_table_cut_with_an_elision_mark_is_unjudged_and_without_one_fails():
    """A paste that marks rows left out ('...', '[...]', '<snip>') is the author's cut:
    a missing size then cannot be judged; without the mark it is the run's (FAIL)."""
    path = DATA.parent / "corpus" / "osu" / "llnl-tioga-osu_bw-DD-rocm-5.9-local-cpus.txt"
    lines = path.read_text().splitlines()
    params = {"buffers": "D-D", "nodes": 1, "sizes": "131072:4194304"}
    for mark in ("...", "[...]", "<snip>"):
        with pytest.raises(outputs.Unjudged, match=r"leaves lines out"):
            outputs.parse("osu_bw", "\n".join(lines[:-2] + [mark]), params)
    with pytest.raises(outputs.SanityError, match="no line for message size 2097152") as cut:
        outputs.parse("osu_bw", "\n".join(lines[:-2]), params)
    assert not isinstance(cut.value, outputs.Unjudged)


def test_a_rank_list_cut_with_an_elision_mark_is_unjudged_and_without_one_fails():
    """Rank lines followed by '...' are the first of more (AMD's acceptance page lists
    ranks 0 and 1 of 8): not a count of the ranks that ran; without the mark they are."""
    lines = (NCCL / "iter_I1.txt").read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith("#  Rank"))
    first_only = lines[:last] + lines[last + 1:]
    with pytest.raises(outputs.Unjudged, match=r"ranks 0-0, then '\.\.\.'"):
        outputs.parse("nccl_all_reduce_perf",
                      "\n".join(first_only[:last] + ["..."] + first_only[last:]), TWO_GPUS)
    with pytest.raises(outputs.SanityError, match="expected 2 ranks, saw 1") as cut:
        outputs.parse("nccl_all_reduce_perf", "\n".join(first_only), TWO_GPUS)
    assert not isinstance(cut.value, outputs.Unjudged)


def test_a_run_infinitely_report_is_unjudged_and_a_run_cut_short_fails():
    """--run_infinitely prints one size again and again, never the closing line: a
    method other than the figures', not a run that stopped (a run that stopped after
    one line, or in the middle of an -a sweep, has no closing line either: FAIL)."""
    path = DATA.parent / "corpus" / "perftest" / "dgx-spark-ib_write_bw-roce-run-infinitely.txt"
    lines = path.read_text().splitlines()
    params = {"size": 65536, "qps": 1, "device": "rocep1s0f0"}
    with pytest.raises(outputs.Unjudged, match="5 results lines at size 65536 .*--run_inf"):
        outputs.parse("ib_write_bw", "\n".join(lines), params)
    for cut in (lines[:-4], lines[:-2] + [line.replace(" 65536", " 32768", 1)
                                        for line in lines[-2:-1]]):
        with pytest.raises(outputs.SanityError, match="no closing line") as err:
            outputs.parse("ib_write_bw", "\n".join(cut), params)
        assert not isinstance(err.value, outputs.Unjudged)
