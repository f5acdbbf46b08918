"""Bad input is refused early and by name, and outputs must show the run they claim.

* Size ranges are counted before any list is built (``msglog=3:1000000`` is refused
  under a 1 GiB memory limit), and empty, blank or non-ASCII values are named errors.
* ``--shape ""`` is an error, and an input file over outputs.MAX_OUTPUT_BYTES is
  refused without being read into memory.
* OMB's title must match the buffers; nccl-tests' device lines must show one MPI rank
  (one Pid) per GPU on each node; OMB's own size cap is named, with -M.

The outputs below are written here in the benchmarks' formats (OMB 7.4/7.5 and
nccl-tests print them so: c/util/osu_util_mpi.c, src/util.cu), with numbers of our own.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ocibench import benchmarks
from ocibench.figures import outputs

GIB = 2**30


def _cli(*args: str, memory: int | None = None, stdin: bytes | None = None):
    """A real `ocibench evaluate` process, its address space limited to ``memory``."""
    def limit():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return subprocess.run([sys.executable, "-m", "ocibench.cli", "evaluate", *args],
                          capture_output=True, timeout=60, preexec_fn=limit, input=stdin)


# --------------------------------------------------------------------------- bounds

def test_a_million_imb_sizes_are_refused_at_once_under_1_gib(tmp_path):
    """The size list used to be built before the guard: 22 GB in 10 minutes."""
    out = tmp_path / "pingpong.out"
    out.write_text("# All processes entering MPI_Finalize\n")
    start = time.monotonic()
    done = _cli("imb_pingpong", str(out), "--shape", "local", "--set", "msglog=3:1000000",
                memory=GIB)
    assert time.monotonic() - start < 30   # a process start; the refusal itself is instant
    assert done.returncode == 2, done.stderr.decode()[-2000:]
    assert done.stderr.decode() == ("ocibench evaluate: imb_pingpong: msglog: the range "
                                    "gives 999999 message sizes (at most 4096)\n")


@pytest.mark.parametrize("check, params, message", [
    ("imb_allreduce", {"msglog": "0:5000"}, "msglog: the range gives 5002 message sizes"),
    # 21 digits: more than any size has (2**64 has 20); int() of a long one is slow
    ("osu_bw", {"sizes": "1:" + "9" * 21}, "is not MIN:MAX"),
    ("nccl_all_reduce_perf", {"begin": "1", "end": "10G", "step": "1"},
     "begin/end/step: the range gives 10737418240 message sizes"),
    ("nccl_all_reduce_perf", {"begin": "1", "end": "1G", "step": "0"},
     "step 0 with factor 1 never advances"),
    ("nccl_all_reduce_perf", {"begin": "0", "end": "1G", "factor": "2"},
     "begin 0 never grows by factor 2"),
])
def test_size_ranges_are_counted_not_listed(check, params, message):
    start = time.monotonic()
    with pytest.raises(benchmarks.ParamError) as caught:
        benchmarks.expected_sizes(check, params)
    assert message in str(caught.value)
    assert time.monotonic() - start < 1


@pytest.mark.parametrize("check, params, message", [
    ("nccl_all_reduce_perf", {"begin": ""}, "nccl_all_reduce_perf: begin: empty value"),
    ("nccl_all_reduce_perf", {"end": "   "}, "nccl_all_reduce_perf: end: empty value"),
    ("osu_bw", {"buffers": ""}, "osu_bw: buffers: empty value"),
    ("osu_bw", {"nodes": "\u0661"}, "osu_bw: nodes: '\u0661' has non-ASCII characters"),
    ("stream", {"threads": "\uff19\uff16"}, "stream: threads: '\uff19\uff16' has non-ASCII"),
    ("imb_pingpong", {"msglog": "3:\u0662\u0668"},
     "imb_pingpong: msglog: '3:\u0662\u0668' has non-ASCII"),
    ("nccl_all_reduce_perf", {"begin": "\u0661G"},
     "nccl_all_reduce_perf: begin: '\u0661G' has non-ASCII"),
    ("osu_bw", {"nodes": "1_0"}, "osu_bw: nodes: '1_0' is not an integer"),
    ("osu_bw", {"nodes": "+2"}, "osu_bw: nodes: '+2' is not an integer"),
])
def test_empty_blank_and_non_ascii_values_are_named(check, params, message):
    with pytest.raises(benchmarks.ParamError) as caught:
        benchmarks.resolve(check, params)
    assert str(caught.value).startswith(message), caught.value


def test_cli_names_an_empty_value_and_an_empty_shape(tmp_path):
    out = tmp_path / "nccl.out"
    out.write_text("x\n")
    done = _cli("nccl_all_reduce_perf", str(out), "--shape", "local", "--set", "begin=")
    assert done.returncode == 2
    err = done.stderr.decode()
    assert err.count("\n") == 1 and "begin: empty value" in err, err
    done = _cli("osu_bw", str(out), "--shape", "", "--set", "nodes=1")
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "ocibench evaluate: --shape is empty: give a shape name (ocibench shape --list) "
        "or leave --shape out for this machine's\n")


def test_a_100_mb_file_is_refused_without_reading_it(tmp_path):
    big = tmp_path / "garbage.out"
    with open(big, "wb") as handle:
        handle.truncate(100 * 2**20)   # sparse: no disk, 100 MB to read
    done = _cli("osu_bw", str(big), "--shape", "local", memory=256 * 2**20)
    assert done.returncode == 2, done.stderr.decode()[-2000:]
    assert done.stderr.decode() == (
        f"ocibench evaluate: {big} is larger than 16 MiB: not a benchmark's output "
        "(those are a few KiB)\n")
    done = _cli("osu_bw", "-", "--shape", "local", stdin=b"\n" * (16 * 2**20 + 1))
    assert done.returncode == 2 and b"standard input is larger than 16 MiB" in done.stderr


# --------------------------------------------------------------------------- OMB titles

def _omb_bw(title: str, extra: str = "") -> str:
    return (f"[inst-a:101] SET UCX_NET_DEVICES=mlx5_6:1\n\n{title}\n{extra}"
            "# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n268435456          12245.67\n")


HOST_BW = _omb_bw("# OSU MPI Bandwidth Test v7.5")
CUDA_BW = _omb_bw("# OSU MPI-CUDA Bandwidth Test v7.5")
#: OMB built with ROCm and run with -d rocm (c/util/osu_util_mpi.c: "-ROCM").
ROCM_BW = _omb_bw("# OSU MPI-ROCM Bandwidth Test v7.5")


@pytest.mark.parametrize("buffers", ["D-D", "H-D", "D-H"])
def test_a_host_buffer_output_is_no_device_run(buffers):
    params = {"buffers": buffers, "nodes": 1}
    if buffers != "D-D":
        params["placement"] = "same-numa"
    with pytest.raises(outputs.SanityError) as caught:
        outputs.parse("osu_bw", HOST_BW, params)
    pair = buffers.replace('-', ' ')
    assert str(caught.value) == (
        "osu_bw: the title '# OSU MPI Bandwidth Test v7.5' is not a CUDA or ROCM run; "
        f"buffers={buffers} needs '# OSU MPI-CUDA Bandwidth Test' (OMB run with "
        f"-d cuda {pair}) or '# OSU MPI-ROCM Bandwidth Test' (OMB run with -d rocm {pair})")
    assert outputs.parse("osu_bw", CUDA_BW, params).values == {268435456: 12245.67}
    assert outputs.parse("osu_bw", ROCM_BW, params).values == {268435456: 12245.67}


def test_the_issues_mislabelled_run_fails_on_the_cli(tmp_path):
    """`ocibench evaluate osu_bw out.txt --shape BM.GPU4.8 --set buffers=D-D --set
    nodes=2` passed a one-node host-buffer run at 110 % of the RDMA port."""
    out = tmp_path / "out.txt"
    out.write_text(_omb_bw("# OSU MPI Bandwidth Test v7.5").replace("12245.67", "27500.00"))
    done = _cli("osu_bw", str(out), "--shape", "BM.GPU4.8", "--set", "buffers=D-D",
                "--set", "nodes=2")
    assert done.returncode == 1
    assert "is not a CUDA or ROCM run; buffers=D-D needs '# OSU MPI-CUDA Bandwidth Test'" \
        in done.stderr.decode()


def test_host_buffers_need_a_host_title():
    assert outputs.parse("osu_bw", HOST_BW, {"buffers": "H-H", "nodes": 2}).values
    with pytest.raises(outputs.SanityError, match=r"is a -d cuda run; host buffers \(H-H\) "
                       r"are OMB without -d: '# OSU MPI Bandwidth Test'"):
        outputs.parse("osu_bw", CUDA_BW, {"buffers": "H-H", "nodes": 2})
    # OMB 7.4 says where the buffers are: -d cuda H H is a host-buffer run.
    host_host = _omb_bw("# OSU MPI-CUDA Bandwidth Test v7.4",
                        "# Send Buffer on HOST (H) and Receive Buffer on HOST (H)\n")
    assert outputs.parse("osu_bw", host_host, {"buffers": "H-H", "nodes": 2}).values
    with pytest.raises(outputs.SanityError, match="the output says '# Send Buffer on HOST "
                       r"\(H\) and Receive Buffer on HOST \(H\)'; buffers=D-D is -d cuda D D"):
        outputs.parse("osu_bw", host_host, {"buffers": "D-D", "nodes": 2})


def test_collectives_are_host_runs_and_xccl_needs_nccl():
    alltoall = ("# OSU MPI-CUDA All-to-All Personalized Exchange Latency Test v7.5\n"
                "# Size       Avg Latency(us)\n1   1.00\n2   1.10\n")
    with pytest.raises(outputs.SanityError, match="is a -d cuda run"):
        outputs.parse("osu_alltoall", alltoall, {"sizes": "1:2", "ranks_per_node": 2})
    assert outputs.parse("osu_alltoall", alltoall.replace("MPI-CUDA", "MPI"),
                         {"sizes": "1:2", "ranks_per_node": 2}).values == {1: 1.0, 2: 1.1}
    xccl = ("#Using NCCL\n#Using NCCL\n\n# OSU NCCL-CUDA Allreduce Latency Test v7.5\n"
            "# Size       Avg Latency(us)\n1073741824           8955.18\n")
    params = {"nodes": 1, "gpus_per_node": 2}
    assert outputs.parse("osu_xccl_allreduce", xccl, params).values == {1073741824: 8955.18}
    # another OMB benchmark's output: not broken, not this check's (UNJUDGED)
    with pytest.raises(outputs.Unjudged, match="no '# OSU NCCL or RCCL Allreduce Latency Test' "
                       r"title \(its title is '# OSU MPI-CUDA Allreduce"):
        outputs.parse("osu_xccl_allreduce", xccl.replace("NCCL-CUDA", "MPI-CUDA"), params)
    with pytest.raises(outputs.SanityError, match="is not a CUDA or ROCM run; NCCL on GPUs "
                       "needs '# OSU NCCL-CUDA Allreduce Latency Test' \\(OMB run with -d cuda "
                       "D D\\) or '# OSU RCCL-ROCM Allreduce Latency Test' \\(OMB run with -d "
                       "rocm D D\\)"):
        outputs.parse("osu_xccl_allreduce", xccl.replace("NCCL-CUDA", "NCCL"), params)


def test_xccl_on_rccl_counts_its_own_using_lines():
    """OMB 7.4 built with --enable-rcclomb prints '#Using RCCL' once per rank and the
    title '# OSU RCCL-ROCM Allreduce Latency Test' (c/xccl/util/osu_util_xccl_interface.c
    omb_xccl_interface_inject; osu_util_xccl_interface.h OMB_XCCL_TYPE_STR "RCCL";
    c/util/osu_util_mpi.c "-ROCM").  No such output is published: the lines are written
    from those format strings."""
    rccl = ("#Using RCCL\n#Using RCCL\n\n# OSU RCCL-ROCM Allreduce Latency Test v7.4\n"
            "# Size       Avg Latency(us)\n1073741824           8955.18\n")
    params = {"nodes": 1, "gpus_per_node": 2}
    assert outputs.parse("osu_xccl_allreduce", rccl, params).values == {1073741824: 8955.18}
    # '#Using NCCL' lines are another build's: the RCCL run's ranks are not counted
    with pytest.raises(outputs.SanityError, match="ranks"):
        outputs.parse("osu_xccl_allreduce", rccl.replace("Using RCCL", "Using NCCL"), params)
    # an RCCL title on CUDA buffers is no build of OMB
    with pytest.raises(outputs.SanityError, match="names RCCL with -CUDA buffers"):
        outputs.parse("osu_xccl_allreduce", rccl.replace("RCCL-ROCM", "RCCL-CUDA"), params)
    # a -d rocm H H run (OMB 7.4 says so under the title) is a host-buffer run
    host = ROCM_BW.replace("v7.5\n", "v7.4\n# Send Buffer on HOST (H) and Receive Buffer on "
                           "HOST (H)\n")
    with pytest.raises(outputs.SanityError, match="buffers=D-D is -d rocm D D"):
        outputs.parse("osu_bw", host, {"buffers": "D-D", "nodes": 2})
    with pytest.raises(outputs.SanityError, match="is a -d rocm run; host buffers"):
        outputs.parse("osu_bw", ROCM_BW, {"buffers": "H-H", "nodes": 2})


# --------------------------------------------------------------------------- OMB's cap

def test_omb_size_cap_is_named_with_minus_m():
    """OMB 7.4 on 16 ranks caps alltoall at 512 MiB / 16 = 32 MiB, on stderr, without
    a newline (c/util/osu_util_mpi.c check_mem_limit)."""
    sizes = [2**k for k in range(26)]   # 1 .. 32 MiB
    text = ("Warning! Limiting max message size to: 33554432. Increase -M, --mem-limit "
            "for higher message sizes.\n# OSU MPI All-to-All Personalized Exchange Latency "
            "Test v7.4\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n"
            + "".join(f"{size}   {1 + size / 1e6:.2f}\n" for size in sizes))
    params = {"nodes": 1, "ranks_per_node": 16, "sizes": "1:67108864"}
    with pytest.raises(outputs.SanityError) as caught:
        outputs.parse("osu_alltoall", text, params)
    assert str(caught.value) == (
        "osu_alltoall: no line for message size 67108864: OMB capped the messages at "
        "33554432 bytes ('Limiting max message size to: 33554432'); run it with "
        "-M 1073741824 (--mem-limit) or more")
    assert outputs.parse("osu_alltoall", text, {**params, "sizes": "1:33554432"}).values
    xccl = ("Warning! Increase the Max Memory Limit to be able to run up to 1073741824 "
            "bytes.\nContinuing with max message size of 536870912 bytes\n#Using NCCL\n"
            "#Using NCCL\n\n# OSU NCCL-CUDA Allreduce Latency Test v7.4\n"
            "# Size       Avg Latency(us)\n")
    with pytest.raises(outputs.SanityError, match=r"OMB capped the messages at 536870912 "
                       r"bytes \('Continuing with max message size of 536870912 bytes'\); "
                       r"run it with -M 1073741824"):
        outputs.parse("osu_xccl_allreduce", xccl, {"nodes": 1, "gpus_per_node": 2})


# --------------------------------------------------------------------------- nccl-tests

def _nccl(devices: list[tuple[int, str]], gpus_per_process: int = 1) -> str:
    """all_reduce_perf -b 10G -e 10G output; one device line per (Pid, host)."""
    head = (f"# nThread 1 nGpus {gpus_per_process} minBytes 10737418240 maxBytes 10737418240 "
            "step: 1048576(bytes) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 "
            "graph: 0\n#\n# Using devices\n")
    lines = "".join(f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10s} device "
                    f"{rank % 8:2d} [0000:{16 + rank:02x}:00] NVIDIA H200\n"
                    for rank, (pid, host) in enumerate(devices))
    return head + lines + (
        "#\n#       size         count      type   redop    root     time   algbw   busbw "
        "#wrong     time   algbw   busbw #wrong\n"
        " 10737418240    2684354560     float     sum      -1    30000  357.91  357.91      0"
        "    30010  357.79  357.79      0\n# Out of bounds values : 0 OK\n"
        "# Avg bus bandwidth    : 357.85\n#\n# Collective test concluded: all_reduce_perf\n")


def test_one_process_driving_two_gpus_is_not_two_ranks():
    params = {"nodes": 1, "gpus_per_node": 2}
    two_ranks = _nccl([(4101, "gpu-a"), (4102, "gpu-a")])
    assert outputs.parse("nccl_all_reduce_perf", two_ranks, params).values["in_place"] == 357.79
    assert outputs.parse("nccl_all_reduce_perf", two_ranks, params).method is None
    one_process = _nccl([(4101, "gpu-a"), (4101, "gpu-a")], gpus_per_process=2)   # -g 2
    # healthy, and read; measured another way than the figures, which evaluate says
    measured = outputs.parse("nccl_all_reduce_perf", one_process, params)
    assert measured.values["in_place"] == 357.79
    assert measured.method == (
        "one process drove 2 GPUs (Pid 4101 on gpu-a: devices 0, 1; nccl-tests -g or -t "
        "above 1), where the figures are one MPI rank per GPU; to compare, run mpirun -np 2 "
        "all_reduce_perf -b 10G -e 10G -f 1 -g 1")


def test_ranks_must_sit_on_the_nodes_the_parameters_say():
    two_nodes = {"nodes": 2, "gpus_per_node": 1}
    assert outputs.parse("nccl_all_reduce_perf", _nccl([(7, "gpu-a"), (7, "gpu-b")]),
                         two_nodes).values
    with pytest.raises(outputs.SanityError, match=r"expected 1 ranks on each of 2 node\(s\), "
                       "saw 2 on gpu-a"):
        outputs.parse("nccl_all_reduce_perf", _nccl([(7, "gpu-a"), (8, "gpu-a")]), two_nodes)
    uneven = _nccl([(1, "a"), (2, "a"), (3, "a"), (4, "b")])
    with pytest.raises(outputs.SanityError, match=r"expected 2 ranks on each of 2 node\(s\), "
                       "saw 3 on a, 1 on b"):
        outputs.parse("nccl_all_reduce_perf", uneven, {"nodes": 2, "gpus_per_node": 2})


# --------------------------------------------------------------------------- crashes

STREAM_OUT = """-------------------------------------------------------------
Number of Threads counted = 1
-------------------------------------------------------------
Function    Best Rate MB/s  Avg time     Min time     Max time
Copy:           20000.1     0.008100     0.008000     0.008200
Scale:          19000.2     0.008500     0.008400     0.008600
Add:            21000.3     0.011500     0.011400     0.011600
Triad:          21000.4     0.011500     0.011400     0.011600
-------------------------------------------------------------
Solution Validates: avg error less than 1.000000e-13 on all three arrays
-------------------------------------------------------------
"""


@pytest.mark.parametrize("crash", [
    "Segmentation fault (core dumped)", "Illegal instruction (core dumped)",
    "Floating point exception", "Aborted", "Killed"])
def test_a_crashed_stream_is_reported_with_the_crash(crash):
    assert outputs.parse("stream", STREAM_OUT, {"threads": 1}).values["Triad"] == 21000.4
    with pytest.raises(outputs.SanityError) as caught:
        outputs.parse("stream", STREAM_OUT + f"bash: line 1: 4242 {crash} ./a.out\n",
                      {"threads": 1})
    assert str(caught.value).startswith("benchmark crashed: ")
    assert crash.split(" (")[0] in str(caught.value)


# --------------------------------------------------------------------------- JSON inputs
# Issue 21 items 9-10: the report's inputs and --preflight reports are read bounded:
# deep nesting, an endless device, the same run twice: one line naming the file, never
# a traceback, never a hang.

def _report_cli(*args: str, memory: int | None = None) -> subprocess.CompletedProcess:
    def limit():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return subprocess.run([sys.executable, "-m", "ocibench.cli", "report", *args],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)


def _one_line(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def _evaluation(value: float = 2.5) -> dict:
    return {"check": "osu_latency", "shape": "BM.GPU4.8",
            "params": {"buffers": "D-D", "nodes": 1}, "ok": True,
            "rows": [{"metric": "latency", "key": 1, "measured": value, "unit": "us",
                      "verdict": "pass"}]}


@pytest.mark.parametrize("depth", [100, 100_000])
def test_a_deeply_nested_report_input_is_one_line(tmp_path, depth):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * depth + "]" * depth)
    done = _report_cli(str(deep), "-o", str(tmp_path / "out"))
    _one_line(done, str(deep), "nested deeper than")


def test_dev_zero_as_a_report_input_is_refused_bounded(tmp_path):
    started = time.monotonic()
    done = _report_cli("/dev/zero", "-o", str(tmp_path / "out"), memory=2 * GIB)
    assert time.monotonic() - started < 60
    _one_line(done, "/dev/zero", "larger than")


def test_the_same_run_twice_is_refused(tmp_path):
    import json
    first = tmp_path / "a.json"
    first.write_text(json.dumps(_evaluation()))
    copy = tmp_path / "b.json"
    copy.write_text(first.read_text())
    for args, words in (((first, first), ("given twice",)),
                        ((first, copy), (str(copy), f"the same content as {first}"))):
        done = _report_cli(*map(str, args), "-o", str(tmp_path / "out"))
        _one_line(done, *words)
        assert not (tmp_path / "out").exists()   # nothing half-written


@pytest.mark.parametrize("depth", [100, 100_000])
def test_a_deeply_nested_preflight_report_is_one_line(tmp_path, depth):
    output = tmp_path / "lat.out"
    output.write_text("# OSU MPI-CUDA Latency Test v7.4\n# Send Buffer on DEVICE (D) and "
                      "Receive Buffer on DEVICE (D)\n# Size          Avg Latency(us)\n"
                      "1                      15.90\n")
    deep = tmp_path / "preflight.json"
    deep.write_text('{"items": ' + "[" * depth + "]" * depth + "}")
    done = _cli("osu_latency", str(output), "--shape", "BM.GPU4.8", "--set", "buffers=D-D",
                "--set", "nodes=1", "--preflight", str(deep))
    assert done.returncode == 2
    err = done.stderr.decode()
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"--preflight {deep}: nested deeper than" in err


# --------------------------------------------------------------------------- numbers, FIFOs
# Issue 30 item 8: a JSON integer of 5,000 digits is a ValueError in Python's reader
# (its int-parsing limit, 4,300 digits) and was a traceback in every reader; a float
# literal beyond a float's range reads as infinity; a FIFO in place of a file blocks an
# ordinary open forever.  Every JSON input goes through ocibench.jsonfile.

HUGE = "9" * 5000


def _cli_run(*args: str, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocibench.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _state_text(**fields: str) -> str:
    """A healthcheck state file's JSON, with ``fields`` written as given (raw JSON)."""
    base = {"node": '"gpu-1"', "time": "1790000000.0", "duration_s": "0.5",
            "interval_s": "300", "action": '"none"', "reason": '""', "probes": "[]"}
    base.update(fields)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in base.items()) + "}"


@pytest.mark.parametrize("value, says", [
    (HUGE, "an integer of 5000 digits (at most 24)"),
    ("1e999", "the number 1e999 is beyond a float's range"),
])
def test_a_number_no_input_has_is_one_line_in_every_reader(tmp_path, value, says):
    state = tmp_path / "healthcheck.json"
    state.write_text(_state_text(interval_s=value if value == HUGE else "300",
                                 time=value if value != HUGE else "1790000000.0"))
    _one_line(_cli_run("metrics", "--healthcheck", str(state)), str(state), says)
    evaluation = tmp_path / "evaluation.json"
    evaluation.write_text(json.dumps(_evaluation()).replace('"measured": 2.5',
                                                            f'"measured": {value}'))
    _one_line(_report_cli(str(evaluation), "-o", str(tmp_path / "out")), str(evaluation), says)
    report = tmp_path / "run.json"
    report.write_text('{"session_info": {"data_version": "4.2", "time_end_unix": '
                      f'{value}}}, "runs": []}}')
    _one_line(_cli_run("history", "add", "--db", str(tmp_path / "h.sqlite"), str(report)),
              str(report), says)
    assert not (tmp_path / "h.sqlite").exists()


def test_the_healthcheck_reads_on_past_a_state_with_a_huge_number(tmp_path):
    """The node's own state file, every run: a warning, the run goes on and replaces it."""
    state = tmp_path / "healthcheck.json"
    state.write_text(_state_text(interval_s=HUGE))
    done = _cli_run("healthcheck", "--shape", "BM.Standard.E5.192", "--node", "cpu-1",
                    "--root", str(tmp_path), "--history", str(tmp_path / "none.sqlite"),
                    env={"OCIBENCH_HEALTH_STATE": str(state)})
    assert "Traceback" not in done.stderr, done.stderr
    assert f"warning: {state}: an integer of 5000 digits" in done.stdout, done.stdout
    assert json.loads(state.read_text())["node"] == "cpu-1"


def test_a_fifo_in_place_of_the_state_file_never_hangs(tmp_path):
    """A FIFO nobody writes: an ordinary open waits for a writer forever (the
    healthcheck past Slurm's 60 s, the export until killed)."""
    state = tmp_path / "healthcheck.json"
    os.mkfifo(state)
    export = _cli_run("metrics", "--healthcheck", str(state), timeout=60)
    _one_line(export, f"{state}: not a regular file")
    done = _cli_run("healthcheck", "--shape", "BM.Standard.E5.192", "--node", "cpu-1",
                    "--root", str(tmp_path), "--history", str(tmp_path / "none.sqlite"),
                    env={"OCIBENCH_HEALTH_STATE": str(state)}, timeout=60)
    assert f"warning: {state}: not a regular file" in done.stdout, done.stdout + done.stderr
    assert state.is_file() and json.loads(state.read_text())["node"] == "cpu-1"


def test_a_fifo_as_a_report_input_is_refused(tmp_path):
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    _one_line(_report_cli(str(fifo), "-o", str(tmp_path / "out")), f"{fifo}: a FIFO")


def test_nccl_tests_json_claiming_ten_billion_gpus_is_refused_under_1_gib(tmp_path):
    """A 10 KB -J file claiming 10^10 GPUs per process: the list of them took 2.9 GB."""
    doc = json.loads((Path(__file__).parent / "data" / "formats" / "nccl-tests"
                      / "json_J.json").read_text())
    doc["config"]["nthreads"], doc["config"]["ngpus"] = 100_000, 100_000
    claim = tmp_path / "json_J.json"
    claim.write_text(json.dumps(doc))
    done = _cli("nccl_all_reduce_perf", str(claim), "--shape", "local", "--set", "nodes=1",
                "--set", "gpus_per_node=2", "--set", "begin=8", "--set", "end=1G",
                "--set", "factor=2", memory=GIB)
    err = done.stderr.decode()
    assert "Traceback" not in err and "MemoryError" not in err, err[-2000:]
    assert done.returncode == 3, err[-2000:]
    assert "nccl-tests' JSON claims 20000000000 GPUs" in err
