"""The parsers, references and tolerance policy on the seeds' own outputs, and the
``ocibench evaluate`` command.

Every output block the seed documents show (transcribed in tests/data/seed_outputs,
indexed by seed_outputs.py) must pass against its own shape's figures; each one,
damaged the ways real runs go wrong, must fail and say where.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import seed_outputs
from ocibench import benchmarks, shapes
from ocibench.commands import evaluate as evaluate_command
from ocibench.figures import judge, outputs, policy, references, ucx_proto
from ocibench.figures.evaluate import CHECKS, Evaluation, evaluate
from seed_outputs import INDEX, SeedOutput

CRASHES = (
    "Segmentation fault (core dumped)\n",
    "--------------------------------------------------------------------------\n"
    "mpirun noticed that process rank 3 with PID 0 on node inst-0d12t-ao-ub24 exited on\n"
    "signal 11 (Segmentation fault).\n",
)

#: Where each check prints each metric: the column of the row (split on whitespace).
#: Written from the benchmarks' formats, independently of the parsers under test.
VALUE_COLUMNS = {
    ("imb_pingpong", "latency"): 2,
    ("imb_pingpong", "bandwidth"): 3,
    ("imb_allreduce", "latency"): 4,
    ("nccl_all_reduce_perf", "out_of_place"): 7,
    ("nccl_all_reduce_perf", "in_place"): 11,
}


@pytest.fixture(scope="session")
def shape_cache() -> dict[str, shapes.Shape]:
    return {}


def _shape(cache: dict[str, shapes.Shape], name: str) -> shapes.Shape:
    if name not in cache:
        cache[name] = shapes.load(name)
    return cache[name]


@pytest.fixture
def load(shape_cache):
    """SeedOutput -> (the entry, its output text, its shape)."""
    def seed_of(entry: SeedOutput) -> tuple[SeedOutput, str, shapes.Shape]:
        return entry, seed_outputs.extract(entry), _shape(shape_cache, entry.shape)
    return seed_of


@pytest.fixture(params=INDEX, ids=[entry.name for entry in INDEX])
def seed(request, load) -> tuple[SeedOutput, str, shapes.Shape]:
    return load(request.param)


def _evaluate(seed, text: str | None = None) -> Evaluation:
    entry, original, shape = seed
    return evaluate(entry.check, original if text is None else text, shape, entry.params)


def _row_line(text: str, check: str, key: int | str) -> int:
    """Index of the line that prints ``key`` (a size, a STREAM kernel, or an nccl
    column, which lives on the row of the last size)."""
    lines = text.splitlines()
    if check == "stream":
        return next(i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
    if check == "nccl_all_reduce_perf":
        return next(i for i, line in enumerate(lines) if re.match(r"\s*\d+\s+\d+\s+float", line))
    return next(i for i, line in enumerate(lines)
                if line.split()[:1] == [str(key)] and not line.lstrip().startswith("#"))


def _set_value(text: str, check: str, metric: str, key: int | str, value: str) -> str:
    lines = text.splitlines()
    index = _row_line(text, check, key)
    column = VALUE_COLUMNS.get((check, key if check.startswith("nccl") else metric), 1)
    tokens = lines[index].split()
    tokens[column] = value
    lines[index] = "  ".join(tokens)
    return "\n".join(lines) + "\n"


def _documented_rows(seed) -> list:
    return [row for row in _evaluate(seed).rows if row.reference is not None]


# --- (a) the documented outputs pass against their own shape ----------------------

def test_documented_output_passes_with_references(seed):
    result = _evaluate(seed)
    assert result.ok, result.reason
    assert result.rows, "no figures measured"
    unreferenced = [row.label for row in result.rows if row.reference is None]
    assert not unreferenced, f"no documented figure for {unreferenced}"
    assert {row.verdict for row in result.rows} == {"pass"}


def test_every_documented_figure_has_a_seed_output(shape_cache):
    """Each seed figure of each shape is exercised by some seed output (published pages
    and OCI's floors are checked in tests/test_new_shapes.py)."""
    covered = set()
    for entry in INDEX:
        params = benchmarks.resolve(entry.check, entry.params)
        for figure in references.matching(_shape(shape_cache, entry.shape), entry.check, params):
            covered.add((entry.shape, figure["id"]))
    missing = [(name, figure["id"]) for name in shapes.known_shapes() if name != shapes.LOCAL
               for figure in _shape(shape_cache, name).figures
               if "values" in figure and "://" not in figure["source"]["doc"]
               and (name, figure["id"]) not in covered]
    assert not missing


# --- (b) damaged outputs fail and say where ---------------------------------------

def test_a_figure_20_percent_worse_fails(seed):
    entry, text, _shape_obj = seed
    rows = _documented_rows(seed)
    # policy.LATENCY_SLACK_US lets sub-microsecond latencies (IMB 0-byte allreduce,
    # 0.03 us) move by print-resolution steps; every figure >= 1 us must fail at +20%.
    rows = [r for r in rows if r.metric != "latency" or r.reference >= 1.0]
    assert rows
    for row in rows:
        worse = row.measured * 1.2 if row.metric == "latency" else row.measured * 0.8
        result = _evaluate(seed, _set_value(text, entry.check, row.metric, row.key,
                                            f"{worse:.2f}"))
        assert not result.ok, f"{row.label} 20% worse passed"
        assert row.label in result.reason and row.metric in result.reason


def test_a_missing_size_line_fails(seed):
    entry, text, _shape_obj = seed
    keys = list(outputs.parse(entry.check, text, entry.params).values)
    if entry.check == "nccl_all_reduce_perf":
        keys = benchmarks.expected_sizes(entry.check, entry.params)
    for key in {keys[0], keys[-1]}:
        lines = text.splitlines()
        del lines[_row_line(text, entry.check, key)]
        result = _evaluate(seed, "\n".join(lines) + "\n")
        assert not result.ok
        assert re.search(rf"\b{key}\b", result.reason), result.reason


def test_truncated_output_fails(seed):
    """Cut after the benchmark's own header: FAIL (truncated).  Cut before it, nothing
    shows which benchmark ran: UNJUDGED, naming what is missing."""
    lines = seed[1].splitlines()
    result = _evaluate(seed, "\n".join(lines[: len(lines) // 2]) + "\n")
    assert not result.ok
    assert result.sanity or result.unjudged.startswith("not "), result.reason


@pytest.mark.parametrize("crash", CRASHES, ids=["segfault", "mpirun-signal"])
def test_crash_message_fails(seed, crash):
    result = _evaluate(seed, seed[1] + crash)
    assert not result.ok
    assert result.reason.startswith("benchmark crashed:")


def test_a_non_finite_value_fails(seed):
    entry, text, _shape_obj = seed
    row = _evaluate(seed).rows[0]
    result = _evaluate(seed, _set_value(text, entry.check, row.metric, row.key, "nan"))
    assert not result.ok
    assert "'nan'" in result.reason and "not finite" in result.reason


def test_noise_around_and_inside_the_output_is_tolerated(seed):
    noise = ["[inst-0d12t-ao-ub24:14174] SET UCX_NET_DEVICES=mlx5_6:1",
             "[inst-qurnl-ao-ub24:13044] Rank 0 bound to package[0][core:24]", "", "$"]
    lines = seed[1].splitlines()
    middle = len(lines) * 3 // 4   # inside the tables of the long outputs
    noisy = noise + lines[:middle] + noise[:2] + lines[middle:] + noise
    assert _evaluate(seed, "\n".join(noisy) + "\n").ok


def _entries(check: str) -> list[SeedOutput]:
    return [entry for entry in INDEX if entry.check == check]


@pytest.mark.parametrize("entry", _entries("nccl_all_reduce_perf"), ids=lambda e: e.name)
def test_nccl_wrong_values_fail(load, entry):
    seed = load(entry)
    lines = seed[1].splitlines()
    index = _row_line(seed[1], entry.check, "out_of_place")
    tokens = lines[index].split()
    tokens[12] = "3"   # in-place #wrong
    lines[index] = "  ".join(tokens)
    result = _evaluate(seed, "\n".join(lines) + "\n")
    assert result.reason == "nccl-tests: #wrong is 3 at 10737418240"
    bounds = seed[1].replace("Out of bounds values : 0 OK", "Out of bounds values : 2 FAILED")
    assert _evaluate(seed, bounds).reason == "nccl-tests: out of bounds values: 2 FAILED"


@pytest.mark.parametrize("entry", _entries("nccl_all_reduce_perf") + _entries("osu_xccl_allreduce"),
                         ids=lambda e: e.name)
def test_a_missing_rank_fails(load, entry):
    seed = load(entry)
    lines = seed[1].splitlines()
    rank_lines = [i for i, line in enumerate(lines) if re.match(r"#\s*(Rank|Using NCCL)", line)]
    del lines[rank_lines[-1]]
    result = _evaluate(seed, "\n".join(lines) + "\n")
    ranks = entry.params["nodes"] * entry.params["gpus_per_node"]
    assert result.reason.endswith(f"expected {ranks} ranks, saw {ranks - 1}")


@pytest.mark.parametrize("entry", _entries("imb_allreduce"), ids=lambda e: e.name)
def test_imb_process_count(load, entry):
    seed = load(entry)
    fewer = re.sub(r"#processes = 144", "#processes = 72", seed[1])
    assert _evaluate(seed, fewer).reason.endswith("expected 144 processes, saw 72")
    # Without -npmin IMB prints a table per process count: the full run's is judged.
    lines = seed[1].splitlines()
    start = next(i for i, line in enumerate(lines) if "Benchmarking Allreduce" in line)
    end = next(i for i, line in enumerate(lines) if "MPI_Finalize" in line)
    smaller = [line.replace("#processes = 144", "#processes = 72") for line in lines[start:end]]
    both = "\n".join(lines[:start] + smaller + lines[start:]) + "\n"
    assert _evaluate(seed, both).ok


@pytest.mark.parametrize("entry", _entries("stream"), ids=lambda e: e.name)
def test_stream_threads_and_validation(load, entry):
    seed = load(entry)
    fewer = seed[1].replace("Threads counted = 96", "Threads counted = 95")
    assert _evaluate(seed, fewer).reason == "stream: expected 96 threads, saw 95"
    failed = seed[1].replace("Solution Validates: avg error less than 1.000000e-13 on all "
                             "three arrays", "Failed Validation on array a[]")
    assert _evaluate(seed, failed).reason == "STREAM did not print 'Solution Validates'"


def test_a_size_range_that_does_not_match_the_output_fails(load):
    seed = load(_entries("osu_alltoall")[0])
    result = evaluate("osu_alltoall", seed[1], seed[2], {"sizes": "1:1024"})
    assert result.reason.startswith("osu_alltoall: unexpected message size 2048")
    one_run = seed[1] + seed[1]
    assert "2 runs in one output" in _evaluate(seed, one_run).reason


# --- parameters, references and the policy ----------------------------------------

@pytest.mark.parametrize("check, params, message", [
    ("osu_nope", {}, "unknown check 'osu_nope'"),
    ("osu_bw", {"colour": "red"}, "unknown parameter 'colour'"),
    ("osu_bw", {"buffers": "X-Y"}, "buffers must be one of H-H, D-D, H-D, D-H, not 'X-Y'"),
    ("osu_bw", {"buffers": "H-D", "nodes": "1"}, "H-D in one node needs placement"),
    ("osu_bw", {"placement": "same-numa"}, "placement applies only to H-D and D-H"),
    ("stream", {"threads": "many"}, "threads: 'many' is not an integer"),
    ("osu_bw", {"sizes": "8:4"}, "sizes: '8:4' is not MIN:MAX"),
    ("nccl_all_reduce_perf", {"begin": "2G", "end": "1G"}, "begin 2G is larger than end 1G"),
])
def test_bad_parameters_are_named(check, params, message):
    with pytest.raises(benchmarks.ParamError, match=re.escape(message)):
        benchmarks.resolve(check, params)


def test_expected_sizes_follow_the_command_lines():
    assert benchmarks.expected_sizes("osu_alltoall", {})[:3] == [1, 2, 4]
    assert benchmarks.expected_sizes("osu_alltoall", {})[-1] == 67108864
    assert len(benchmarks.expected_sizes("osu_allreduce", {})) == 27
    assert benchmarks.expected_sizes("imb_pingpong", {"msglog": "3:5"}) == [0, 8, 16, 32]
    assert benchmarks.expected_sizes("nccl_all_reduce_perf", {}) == [10 * 2**30]
    assert benchmarks.expected_sizes("nccl_all_reduce_perf",
                                    {"begin": "8", "end": "64", "factor": "2"}) == [8, 16, 32, 64]
    assert benchmarks.expected_sizes("stream", {}) == []


def test_policy_bounds_and_verdicts():
    assert policy.bounds("bandwidth", 1000.0) == (900.0, None)
    assert policy.bounds("busbw", 232.0)[0] == pytest.approx(208.8)
    assert policy.bounds("latency", 2.0) == (None, pytest.approx(2.3))
    assert policy.bounds("latency", 0.03) == (None, pytest.approx(0.13))   # the slack
    assert policy.verdict("latency", 2.0, 2.29) == "pass"
    assert policy.verdict("latency", 2.0, 2.31) == "fail"
    assert policy.verdict("latency", 2.0, 1.2) == "suspicious"
    assert policy.verdict("latency", 0.03, 0.04) == "pass"
    assert policy.verdict("latency", 0.03, 0.01) == "pass"
    assert policy.verdict("bandwidth", 1000.0, 899.0) == "fail"
    assert policy.verdict("bandwidth", 1000.0, 1600.0) == "suspicious"
    assert policy.verdict("bandwidth", None, 1600.0) == "no reference"
    with pytest.raises(ValueError, match="unknown metric 'speed'"):
        policy.bounds("speed", 1.0)


def test_reframe_reference(shape_cache):
    gpu = _shape(shape_cache, "BM.GPU4.8")
    d_d = benchmarks.resolve("osu_bw", {"buffers": "D-D", "nodes": 1})
    figure = references.matching(gpu, "osu_bw", d_d)[0]
    documented = figure["values"][268435456]
    # The upper bound is NVLink's 300 GB/s (x the stated margin): 1e12 MB/s fails live.
    cap = round(gpu.data["links"]["nvlink_gbs"] * 1000 * judge.LIMIT_MARGIN / documented - 1, 6)
    assert judge.reframe_reference(gpu, "osu_bw", d_d, ["gpu:default"]) == {
        "gpu:default": {"bandwidth_268435456": (documented, -0.1, cap, "MB/s")}}
    latency = judge.reframe_reference(
        gpu, "osu_latency", benchmarks.resolve("osu_latency", {"buffers": "D-D", "nodes": 1}),
        ["a:b", "c:d"])
    assert set(latency) == {"a:b", "c:d"}
    assert latency["a:b"]["latency_1"][1:] == (None, 0.15, "us")
    nccl = judge.reframe_reference(gpu, "nccl_all_reduce_perf",
                                        {"nodes": 1, "gpus_per_node": 8}, ["a:b"])
    assert set(nccl["a:b"]) == {"busbw_out_of_place", "busbw_in_place"}
    # A run at another size than the documented 10 GiB has no busbw reference.
    assert judge.reframe_reference(gpu, "nccl_all_reduce_perf",
                                        {"nodes": 1, "gpus_per_node": 8, "end": "1G",
                                         "begin": "1G"}, ["a:b"]) == {}
    assert judge.reframe_reference(_shape(shape_cache, "local"), "osu_bw", d_d,
                                        ["a:b"]) == {}
    with pytest.raises(ValueError, match="wildcard"):
        judge.reframe_reference(gpu, "osu_bw", d_d, ["*"])
    assert references.perf_var("bandwidth", "Triad") == "bandwidth_Triad"


def test_limit_fraction_is_in_the_links_unit(load):
    seed = load(_entries("osu_bw")[0])   # D-D in one node, limited by NVLink
    row = _evaluate(seed).rows[0]
    links = seed[2].data["links"]
    assert row.limit == "nvlink_gbs"
    assert row.limit_fraction == pytest.approx(row.measured / 1000 / links["nvlink_gbs"])


# --- (c, d) the command line ------------------------------------------------------
# A few runs go through a real `ocibench` process; the remaining cases call the
# sub-command's own register() and run() in-process, because a process start costs a
# second here.

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocibench.cli", "evaluate", *args],
                          capture_output=True, text=True, timeout=60)


def _main(capsys, *args: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="ocibench evaluate")
    evaluate_command.register(parser)
    code = evaluate_command.run(parser.parse_args(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def pingpong(load, tmp_path) -> tuple[SeedOutput, Path]:
    entry = _entries("imb_pingpong")[1]   # Intel MPI
    path = tmp_path / "pingpong.out"
    path.write_text(load(entry)[1])
    return entry, path


def test_cli_exit_codes(pingpong, tmp_path):
    entry, path = pingpong
    done = _cli("imb_pingpong", str(path), "--shape", entry.shape, "--set", "mpi=intel-mpi")
    assert done.returncode == 0, done.stderr
    assert "PASS" in done.stdout and "268435456" in done.stdout
    worse = tmp_path / "worse.out"
    worse.write_text(_set_value(path.read_text(), "imb_pingpong", "bandwidth", 268435456,
                                "9000.00"))
    done = _cli("imb_pingpong", str(worse), "--shape", entry.shape, "--set", "mpi=intel-mpi")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "bandwidth at size 268435456" in done.stderr
    assert done.stdout.startswith("next: reboot OCIBENCH-FIG-0001: imb_pingpong: "), done.stdout
    done = _cli("imb_pong", str(path), "--shape", entry.shape)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unknown check 'imb_pong'" in done.stderr


def test_cli_json_and_crash(pingpong, tmp_path, capsys):
    entry, path = pingpong
    code, out, _err = _main(capsys, "imb_pingpong", str(path), "--shape", entry.shape,
                            "--set", "mpi=intel-mpi", "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] and data["shape"] == entry.shape
    assert data["file"] == str(path)
    assert {row["metric"] for row in data["rows"]} == {"latency", "bandwidth"}
    crashed = tmp_path / "crashed.out"
    crashed.write_text(path.read_text() + CRASHES[1])
    code, _out, err = _main(capsys, "imb_pingpong", str(crashed), "--shape", entry.shape,
                            "--set", "mpi=intel-mpi")
    assert code == 1
    assert err == ("ocibench evaluate: FAIL: benchmark crashed: "
                   "'mpirun noticed that process' in output\n")


@pytest.mark.parametrize("args, message", [
    (["imb_pingpong", "FILE", "--set", "mpi=mpich"], "mpi must be one of openmpi, intel-mpi"),
    (["imb_pingpong", "FILE", "--set", "ranks=2"], "unknown parameter 'ranks'"),
    (["imb_pingpong", "FILE", "--set", "mpi"], "expected NAME=VALUE"),
    (["imb_pingpong", "FILE", "--shape", "BM.Nope"], "unknown shape 'BM.Nope'"),
    (["imb_pingpong", "MISSING"], "cannot read"),
    (["imb_pingpong"], "give CHECK and FILE"),
])
def test_cli_usage_errors_exit_2_with_one_line(pingpong, capsys, args, message):
    _entry, path = pingpong
    args = [str(path) if a == "FILE" else str(path.parent / "nothing") if a == "MISSING" else a
            for a in args]
    if "--shape" not in args:
        args += ["--shape", "BM.Optimized3.36"]
    code, _out, err = _main(capsys, *args)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err


def test_cli_list_names_every_check_and_parameter():
    done = _cli("--list")
    assert done.returncode == 0
    for name, spec in CHECKS.items():
        # each in the unit its figures are stated in (ib_write_bw: Gb/s, not MB/s)
        assert re.search(rf"^{name}: .*\[{spec.metric}, {re.escape(spec.figure_unit)}\]$",
                         done.stdout, re.MULTILINE), name
        for param in spec.params:
            assert f"    {param.name}=" in done.stdout


# --- UCX's protocol tables in the output (UCX_PROTO_INFO=y on the GPU checks) ----------

UCX_DATA = Path(__file__).resolve().parent / "data" / "ucx_proto"


def _ucx_lines() -> list[str]:
    """Every table line of the real captures: two processes' tables, as printed."""
    lines = []
    for path in sorted(UCX_DATA.glob("*.txt")):
        lines += [line for line in path.read_text().splitlines() if line.startswith("[")]
    return lines


def _interleave(text: str, table_lines: list[str]) -> str:
    """``text`` with UCX's lines between each of its lines, as mpirun merges the
    ranks' output: a benchmark line is never split, but any line may follow any."""
    out, rest = [], iter(table_lines)
    for line in text.splitlines():
        out += [next(rest, ""), line]
    return "\n".join(out + list(rest)) + "\n"


@pytest.mark.parametrize("entry", [e for e in INDEX if e.check in (
    "osu_latency", "osu_bw", "osu_xccl_allreduce", "nccl_all_reduce_perf")], ids=lambda e: e.name)
def test_parsers_read_the_figures_through_ucx_tables(load, entry):
    """The GPU checks' outputs hold UCX's tables: OMB's and nccl-tests' figures still
    parse, equal to those of the output without them."""
    entry, text, shape = load(entry)
    plain = outputs.parse(entry.check, text, entry.params)
    mixed = _interleave(text, _ucx_lines())
    assert mixed.count("\n") > 2 * len(text.splitlines())
    assert outputs.parse(entry.check, mixed, entry.params) == plain
    result = evaluate(entry.check, mixed, shape, entry.params)
    assert result.ok, result.reason
    # every table of the captures, none lost or merged by the interleaving
    assert len(result.facts.tables) == sum(len(ucx_proto.parse(p.read_text()))
                                           for p in sorted(UCX_DATA.glob("*.txt")))


@pytest.mark.parametrize("name, value", [("osu_latency.h-h.ucx-1.13.txt", 0.74),
                                         ("osu_bw.h-h.ucx-1.13.txt", 10504.02),
                                         ("osu_bw.h-h.no-cma.ucx-1.13.txt", 5131.03)])
def test_real_outputs_with_ucx_tables_parse(name, value):
    """As captured: in osu_bw's, the rendezvous tables sit between OMB's header and
    its row."""
    text = (UCX_DATA / name).read_text()
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("# Size"))
    assert lines[header + 1].startswith("[") == name.startswith("osu_bw")
    check = name.split(".")[0]
    measured = outputs.parse(check, text, {"buffers": "H-H", "nodes": 1})
    assert list(measured.values.values()) == [value]


def test_ucx_tables_of_two_processes_interleaved_line_by_line():
    """Line by line from two ranks: each process's tables are assembled apart."""
    from ocibench.figures import ucx_proto
    text = (UCX_DATA / "osu_bw.h-h.no-cma.ucx-1.13.txt").read_text()
    ranks: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("["):
            ranks.setdefault(line.split("]")[1], []).append(line)
    first, second = ranks.values()
    merged = [line for pair in itertools.zip_longest(first, second) for line in pair if line]
    assert merged[:2] == [first[0], second[0]]
    shuffled = "\n".join(merged)
    key = lambda t: (t.process, t.selection, repr(t.routes))   # noqa: E731
    assert sorted(map(key, ucx_proto.parse(shuffled))) == \
        sorted(map(key, ucx_proto.parse(text)))
    assert len(ucx_proto.parse(shuffled)) == 6


# --- nvbandwidth and the pageable copy: the node's copy ceilings -----------------------

NVB = (Path(__file__).resolve().parent / "data" / "nvbandwidth" / "h200x2.format.txt").read_text()


def test_nvbandwidth_reads_the_copies_omb_makes():
    """The GPUs of OMB's runs: H-D to GPU 1, D-H from GPU 0, D-D from GPU 0 to GPU 1
    (the read matrix reads row -> column, the write matrix column -> row); MB/s."""
    measured = outputs.parse("nvbandwidth", NVB, {"gpus_per_node": 2})
    assert measured.unit == "MB/s"
    assert measured.values == {
        "host_to_device": 55500.0, "device_to_host": 55310.0,
        "device_to_device_read": 395020.0, "device_to_device_write": 395000.0,
        "pageable_host_to_device": 8210.0, "pageable_device_to_host": 16400.0}
    # one GPU: no peer copies are expected (nvbandwidth waives them), H-D is GPU 0's
    one = outputs.parse("nvbandwidth", NVB.replace("GPU 1:", "GPU 0:"), {"gpus_per_node": 1})
    assert set(one.values) == {"host_to_device", "device_to_host", "pageable_host_to_device",
                               "pageable_device_to_host"}
    assert one.values["host_to_device"] == 55520.0


@pytest.mark.parametrize("damage, message", [
    (lambda t: t.replace("SUM device_to_host_memcpy_ce 110.61\n", ""),
     "output truncated: no 'SUM device_to_host_memcpy_ce'"),
    (lambda t: t.replace("Running device_to_device_memcpy_read_ce.", "Waived: "),
     "no 'Running device_to_device_memcpy_read_ce.' (not run, or waived"),
    (lambda t: t.replace("    395.02", "       N/A"),
     "device_to_device_memcpy_read_ce: N/A from 0 to 1"),
    (lambda t: t.replace("55.50\n\nSUM", "55.50\nError: cuMemcpyAsync failed\nSUM")
     .replace("SUM host_to_device_memcpy_ce", "XSUM"),
     "host_to_device_memcpy_ce: 'Error: cuMemcpyAsync failed'"),
    (lambda t: t.split("pageable host_to_device")[0]
     + "pageable_copy: no GPU driver (libcuda.so.1): cannot open\n",
     "nvbandwidth: pageable_copy: no GPU driver (libcuda.so.1)"),
    (lambda t: t.replace("pageable device_to_host GPU 0", "pageable device_to_host GPU 3"),
     "no 'pageable device_to_host GPU 0: ... GB/s' line"),
])
def test_nvbandwidth_sanity_names_what_is_wrong(damage, message):
    with pytest.raises(outputs.SanityError, match=re.escape(message)):
        outputs.parse("nvbandwidth", damage(NVB), {"gpus_per_node": 2})


def test_pageable_copy_without_a_driver_says_so_in_one_line(capsys):
    """On a machine without the CUDA driver (this one, CI): one line, exit 1."""
    import ctypes

    from ocibench.node import pageable_copy
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("this machine has a CUDA driver")
    except OSError:
        pass
    assert pageable_copy.main(["--copies", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pageable_copy: no GPU driver (libcuda.so.1)") and err.count("\n") == 1


def test_nvbandwidth_reads_a_real_capture_without_the_pageable_step():
    """A real nvbandwidth v0.8 run on 2x H200: the copy-engine figures OMB's runs are
    bounded by.  nvbandwidth's own output, without the check's pageable copy after it,
    still gives them (recorded); a pageable step that ran and failed is named."""
    text = (Path(__file__).resolve().parent / "data" / "nvbandwidth"
            / "h200x2.nvbandwidth-v0.8.txt").read_text()
    lines = text.splitlines()
    where = outputs.nvbandwidth_gpus(2)
    read = {key: outputs._nvb_testcase("nvbandwidth", lines, outputs.NVBANDWIDTH_CEILINGS[key],
                                       where[key])
            for key in ("host_to_device", "device_to_host", "device_to_device_read",
                        "device_to_device_write")}
    assert read == {"host_to_device": 55.55, "device_to_host": 55.38,
                    "device_to_device_read": 393.76, "device_to_device_write": 396.18}
    measured = outputs.parse("nvbandwidth", text, {"gpus_per_node": 2})
    assert measured.values == pytest.approx({k: v * 1000 for k, v in read.items()})  # MB/s
    with pytest.raises(outputs.SanityError, match="no 'pageable host_to_device GPU 1"):
        outputs.parse("nvbandwidth", text + "pageable device_to_host GPU 0: 16.4 GB/s\n",
                      {"gpus_per_node": 2})


def test_one_evaluate_looks_for_the_matching_figures_once(pingpong, capsys, monkeypatch):
    """`ocibench evaluate` scans the shape's figures for its variant once: the judge
    takes the figures evaluate found (judge.judge_run's ``figures``)."""
    entry, path = pingpong
    calls = []
    real = references.matching

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(references, "matching", counted)
    code, out, err = _main(capsys, "imb_pingpong", str(path), "--shape", entry.shape,
                           "--set", "mpi=intel-mpi")
    assert code == 0, err
    assert calls == ["imb_pingpong"], f"the figures were scanned {len(calls)} times"
