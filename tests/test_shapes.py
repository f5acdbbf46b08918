"""The shape files: each loads, carries what its readers need, and every documented
figure is exactly what its seed document printed, in the section it cites, for the
command line that ran that variant."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import archspec.cpu
import pytest
import yaml

import seed_outputs
from ocibench import shapes

DOCUMENTED = ("BM.GPU4.8", "BM.GPU.A100-v2.8", "BM.Optimized3.36", "BM.Standard.E5.192")

# (figures, values) per shape, counted in the seeds by hand:
#   BM.GPU4.8: seed 000 has 7 latencies and 7 bandwidths in a node, 1 + 1 across two
#     nodes and 2 osu_xccl_allreduce runs (one value each); seed 003 has 2 runs with an
#     out-of-place and an in-place busbw.  20 figures, 18 + 4 values.
#   BM.Optimized3.36: seed 002 has alltoall (27 sizes), latency (1), bandwidth (1) and
#     allreduce (27); seed 004 has, for each of 2 MPIs, PingPong latency (27 sizes
#     from 0 B), PingPong bandwidth (26 sizes from 8 B) and Allreduce (27).  10 figures,
#     56 + 2 x 80 values.
#   BM.Standard.E5.192: seed 001 has STREAM under NPS1 and NPS4, 4 kernels each.
EXPECTED_COUNTS = {
    "BM.GPU4.8": (20, 22),
    "BM.GPU.A100-v2.8": (0, 0),
    "BM.Optimized3.36": (10, 216),
    "BM.Standard.E5.192": (2, 8),
}

# The shared figure naming: check -> (metrics, required params, optional params).
NAMING: dict[str, tuple[set[str], set[str], set[str]]] = {
    "osu_latency": ({"latency"}, {"buffers", "nodes"}, {"placement"}),
    "osu_bw": ({"bandwidth"}, {"buffers", "nodes"}, {"placement"}),
    "osu_alltoall": ({"latency"}, {"nodes", "ranks_per_node"}, set()),
    "osu_allreduce": ({"latency"}, {"nodes", "ranks_per_node"}, set()),
    "osu_xccl_allreduce": ({"latency"}, {"nodes", "gpus_per_node"}, set()),
    "nccl_all_reduce_perf": ({"busbw"}, {"nodes", "gpus_per_node"}, set()),
    "imb_pingpong": ({"latency", "bandwidth"}, {"mpi", "nodes"}, set()),
    "imb_allreduce": ({"latency"}, {"mpi", "nodes", "ranks_per_node"}, set()),
    "stream": ({"bandwidth"}, {"nps", "threads"}, set()),
}
PARAM_VALUES: dict[str, set[Any]] = {
    "buffers": {"H-H", "D-D", "H-D", "D-H"},
    "placement": {"same-numa", "same-socket", "other-socket"},
    "mpi": {"openmpi", "intel-mpi"},
}
# Checks whose node count or message sizes the naming fixes.
FIXED_NODES = {"osu_alltoall": 1, "osu_allreduce": 4, "imb_pingpong": 2, "imb_allreduce": 4}
NCCL_SIZE = 10 * 2**30
FIXED_KEYS: dict[str, set[Any]] = {
    "osu_latency": {1},
    "osu_bw": {268435456},
    "osu_xccl_allreduce": {1073741824},
    "nccl_all_reduce_perf": {"out_of_place", "in_place"},
    "stream": {"Copy", "Scale", "Add", "Triad"},
}
GBS_PER_UNIT = {"MB/s": 1e-3, "GB/s": 1.0}

# Where each benchmark prints a value: the row starts with the message size (or the
# STREAM kernel), the value is in this whitespace-separated column.
VALUE_COLUMN = {
    ("osu_latency", "latency"): 1,
    ("osu_bw", "bandwidth"): 1,
    ("osu_alltoall", "latency"): 1,
    ("osu_allreduce", "latency"): 1,
    ("osu_xccl_allreduce", "latency"): 1,
    ("imb_pingpong", "latency"): 2,     # #bytes #repetitions t[usec] Mbytes/sec
    ("imb_pingpong", "bandwidth"): 3,
    ("imb_allreduce", "latency"): 4,    # #bytes #repetitions t_min t_max t_avg
    ("stream", "bandwidth"): 1,         # Function  Best Rate MB/s ...
}
# size count type redop root | time algbw busbw #wrong (out-of-place) | same (in-place)
NCCL_BUSBW_COLUMN = {"out_of_place": 7, "in_place": 11}

# The program each check runs, as it appears on the seed's command line.
PROGRAM = {
    "osu_latency": r"\bosu_latency\b",
    "osu_bw": r"\bosu_bw\b",
    "osu_alltoall": r"\bosu_alltoall\b",
    "osu_allreduce": r"\bosu_allreduce\b",
    "osu_xccl_allreduce": r"\bosu_xccl_allreduce\b",
    "nccl_all_reduce_perf": r"/all_reduce_perf\b",
    "imb_pingpong": r"IMB-MPI1\b.*\bPingPong\b",
    "imb_allreduce": r"IMB-MPI1\b.*\ballreduce\b",
    "stream": r"\./a\.out\b",
}


# --- loading and the fields the readers use ---------------------------------------

def test_known_shapes_include_the_documented_ones_and_local() -> None:
    assert set(DOCUMENTED) | {shapes.LOCAL} <= set(shapes.known_shapes())


@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_shape_loads(name: str) -> None:
    shape = shapes.load(name)
    assert shape.name == name == shape.data["shape"]
    assert shape.path.name == f"{name}.yaml"


def test_every_shape_file_loads() -> None:
    """Every file in site/shapes, whoever wrote it; local probes this machine."""
    if not shutil.which("lscpu"):
        pytest.skip("lscpu (util-linux) is not installed: the local shape cannot probe")
    for name in shapes.known_shapes():
        shape = shapes.load(name)
        assert shape.cores == sum(len(c) for c in shape.numa_cores.values()), name


def test_local_shape_describes_this_machine() -> None:
    if not shutil.which("lscpu"):
        pytest.skip("lscpu (util-linux) is not installed: the local shape cannot probe")
    shape = shapes.load(shapes.LOCAL)
    assert shape.is_local and shape.cores >= 1
    assert shape.figures == []


@pytest.mark.parametrize("name", DOCUMENTED)
def test_cpu_and_memory_facts(name: str) -> None:
    shape = shapes.load(name)
    cpu = shape.cpu
    assert cpu["spack_target"] in archspec.cpu.TARGETS, cpu["spack_target"]
    assert cpu["cores"] % cpu["sockets"] == 0
    assert {n["socket"] for n in cpu["numa_nodes"]} == set(range(cpu["sockets"]))
    per_socket = cpu["cores"] // cpu["sockets"]
    for node in cpu["numa_nodes"]:
        first, last = node["cores"]
        assert first // per_socket == last // per_socket == node["socket"], node
    assert shape.data["memory"]["size_gib"] > 0
    assert shape.data["memory"]["bandwidth_gbs"] > 0


@pytest.mark.parametrize("name", ["BM.GPU4.8", "BM.GPU.A100-v2.8"])
def test_gpu_facts(name: str) -> None:
    shape = shapes.load(name)
    assert shape.gpu_count == 8
    assert shape.gpus["vendor"] == "nvidia" and shape.gpus["arch"] == "80"
    assert [d["index"] for d in shape.gpus["devices"]] == list(range(8))
    # Seed 000 sec 2-1: GPUs 0 and 1 hang off NUMA node 3, cores 24-31 on BM.GPU4.8.
    assert shape.gpus["devices"][0]["numa_node"] == shape.gpus["devices"][1]["numa_node"] == 3
    for key in ("nvlink_gbs", "pcie_gbs", "rdma_port_gbs", "rdma_node_gbs"):
        assert shape.data["links"][key] > 0, key


def test_gpu4_numa_node_3_holds_cores_24_to_31() -> None:
    assert shapes.load("BM.GPU4.8").numa_cores[3] == list(range(24, 32))


@pytest.mark.parametrize("name", DOCUMENTED)
def test_network_facts(name: str) -> None:
    shape = shapes.load(name)
    network = shape.data.get("network")
    if network is None:
        assert shape.data["scheduler"] == "none", "a shape without a network is single-node"
        return
    links = shape.data["links"]
    assert links["rdma_port_gbs"] == network["port_gbps"] / 8
    if "rdma_node_gbs" in links:
        assert links["rdma_node_gbs"] == network["ports"] * network["port_gbps"] / 8
    for device in shape.ucx_net_devices.values():
        assert re.fullmatch(r"mlx5_\d+:\d+", device), device
    assert "mpi" in shape.ucx_net_devices


@pytest.mark.parametrize("name", DOCUMENTED)
def test_software_facts(name: str) -> None:
    software = shapes.load(name).data["software"]
    assert software["compilers"], "a documented shape names its compilers"
    for compiler in software["compilers"]:
        assert re.fullmatch(r"[a-z][\w-]*@\d[\w.]*", compiler["spec"]), compiler
        assert compiler["prefix"].startswith("/")
    for package, external in software["externals"].items():
        assert external["spec"].split("@")[0] == package, external
        assert external["prefix"].startswith("/")
    assert {"openmpi", "osu-micro-benchmarks", "stream"} <= set(software["stack"])
    for package, version in software["stack"].items():
        # Unquoted, YAML reads 5.10 as the float 5.1.
        assert isinstance(version, str), f"stack.{package}: quote the version"


# --- the figures ----------------------------------------------------------------------

def documented(shape: shapes.Shape) -> list[dict[str, Any]]:
    """The figures a seed documents: those with values.  A figure with only OCI's
    acceptance floor (oci-hpc's health checks) has no seed; tests/test_new_shapes.py
    checks floors against their source."""
    return [fig for fig in shape.figures if "values" in fig]


@pytest.mark.parametrize("name", DOCUMENTED)
def test_figure_counts(name: str) -> None:
    figures = documented(shapes.load(name))
    assert (len(figures), sum(len(f["values"]) for f in figures)) == EXPECTED_COUNTS[name]


@pytest.mark.parametrize("name", DOCUMENTED)
def test_figures_follow_the_naming(name: str) -> None:
    shape = shapes.load(name)
    variants: set[str] = set()
    for fig in documented(shape):
        label = fig["id"]
        metrics, required, optional = NAMING[fig["check"]]
        params = fig["params"]
        assert fig["metric"] in metrics, label
        assert required <= set(params) <= required | optional, label
        for key, allowed in PARAM_VALUES.items():
            assert key not in params or params[key] in allowed, label
        if "placement" in params:
            assert params["buffers"] in ("H-D", "D-H") and params["nodes"] == 1, label
        assert params.get("nodes") == FIXED_NODES.get(fig["check"], params.get("nodes")), label
        if fig["check"] in FIXED_KEYS:
            assert set(fig["values"]) == FIXED_KEYS[fig["check"]], label
        assert params.get("gpus_per_node", 0) <= shape.gpu_count, label
        assert params.get("ranks_per_node", 1) <= shape.cores, label
        assert params.get("threads", 1) <= shape.cores, label
        if "nps" in params:
            assert params["nps"] in shape.cpu["nps_modes"], label
        # imb_pingpong's latency and bandwidth come from one run: the metric is part
        # of what makes a figure unique.
        variant = repr((fig["check"], sorted(params.items()), fig["metric"]))
        assert variant not in variants, f"{label}: a second figure for {variant}"
        variants.add(variant)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_bandwidths_lie_under_their_physical_limit(name: str) -> None:
    """Every bandwidth names its limit, and no documented value exceeds it."""
    shape = shapes.load(name)
    for fig in documented(shape):
        if fig["metric"] == "latency":
            assert "limit" not in fig, f"{fig['id']}: a latency has no GB/s limit"
            continue
        limit = fig.get("limit")
        assert limit, f"{fig['id']}: a bandwidth names its limit"
        limit_gbs = (shape.data["memory"]["bandwidth_gbs"] if limit == "memory"
                     else shape.data["links"][limit])
        best = max(fig["values"].values()) * GBS_PER_UNIT[fig["unit"]]
        assert best <= limit_gbs, f"{fig['id']}: {best} GB/s above {limit} {limit_gbs}"


@pytest.mark.parametrize("name", DOCUMENTED)
def test_figure_sources_are_seed_documents_for_this_shape(name: str) -> None:
    for fig in documented(shapes.load(name)):
        doc = fig["source"]["doc"]
        assert doc in seed_outputs.DOCUMENTS, f"{fig['id']}: no seed {doc}"
        assert name in seed_outputs.DOCUMENTS[doc], \
            f"{fig['id']}: the seeds' README does not list {doc} for {name}"


@pytest.mark.parametrize("name", DOCUMENTED)
def test_every_value_is_printed_in_its_seed(name: str) -> None:
    """Each figure: exactly one command of the cited section ran its variant, and that
    command's output holds every value, in the right row and column, and no row the
    figure leaves out."""
    shape = shapes.load(name)
    problems: list[str] = []
    for fig in documented(shape):
        doc, section = fig["source"]["doc"], str(fig["source"]["section"])
        runs = [run for run in section_runs(doc, section) if fits(run, fig, shape)]
        where = f"{fig['id']} ({doc} sec {section})"
        if len(runs) != 1:
            problems.append(f"{where}: {len(runs)} commands run this variant, not 1")
            continue
        problems.extend(f"{where}: {p}" for p in transcription_errors(runs[0], fig))
    assert not problems, "\n".join(problems)


# --- bad input ------------------------------------------------------------------------

def test_unknown_shape_lists_the_known_ones() -> None:
    with pytest.raises(shapes.ShapeError) as err:
        shapes.load("BM.NoSuchShape.1")
    assert "BM.NoSuchShape.1" in str(err.value)
    for name in shapes.known_shapes():
        assert name in str(err.value)


def test_detect_rejects_an_unknown_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shapes.SHAPE_ENV, "BM.NoSuchShape.1")
    with pytest.raises(shapes.ShapeError, match="known shapes: .*BM.Optimized3.36"):
        shapes.detect()


def test_detect_honours_a_known_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shapes.SHAPE_ENV, "BM.Optimized3.36")
    assert shapes.detect() == "BM.Optimized3.36"


def _figure(data: dict[str, Any], figure_id: str) -> dict[str, Any]:
    return next(f for f in data["figures"] if f["id"] == figure_id)


BREAKAGES: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "missing memory": (lambda d: d.pop("memory"), "missing field 'memory'"),
    "missing cpu.spack_target": (lambda d: d["cpu"].pop("spack_target"), "cpu.spack_target"),
    "missing software.stack": (lambda d: d["software"].pop("stack"), "software.stack"),
    "numa misses cores": (lambda d: d["cpu"]["numa_nodes"].pop(), "cpu.numa_nodes"),
    "numa overlaps": (lambda d: d["cpu"]["numa_nodes"][1].update(cores=[7, 15]),
                      "cpu.numa_nodes"),
    "latency in GB/s": (lambda d: _figure(d, "osu_latency_d_d").update(unit="GB/s"),
                        "unit 'GB/s'"),
    "figure without values": (lambda d: _figure(d, "osu_bw_d_d").pop("values"),
                              "missing field 'values'"),
    "figure without section": (lambda d: _figure(d, "osu_bw_d_d")["source"].pop("section"),
                               "missing field 'source.section'"),
    "unknown limit": (lambda d: _figure(d, "osu_bw_d_d").update(limit="infiniband_gbs"),
                      "limit 'infiniband_gbs'"),
    "duplicate id": (lambda d: _figure(d, "osu_bw_d_d").update(id="osu_latency_d_d"),
                     "appears twice"),
    "gpu on no numa node": (lambda d: d["gpus"]["devices"][2].update(numa_node=8),
                            "GPU 2"),
    "bad nps mode": (lambda d: d["cpu"].update(nps_modes=[3]), "cpu.nps_modes"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_malformed_shape_is_rejected_naming_the_field(breakage: str) -> None:
    data = yaml.safe_load(shapes.shape_path("BM.GPU4.8").read_text())
    shapes.validate(data, "BM.GPU4.8.yaml")  # intact, it passes
    damage, message = BREAKAGES[breakage]
    damage(data)
    with pytest.raises(shapes.ShapeError, match=re.escape(message)):
        shapes.validate(data, "BM.GPU4.8.yaml")


# --- reading the seed documents' transcribed outputs ---------------------------------

@dataclass
class Run:
    """One "$ command" of a seed, the line before it and the rows it printed."""

    lead: str
    command: str
    rows: list[list[str]] = field(default_factory=list)


def section_runs(doc: str, section: str) -> list[Run]:
    """The benchmark runs of one numbered section of a seed, its sub-sections included
    (every benchmark command line of the seeds is transcribed, so none is missed)."""
    runs = []
    for entry in seed_outputs.INDEX:
        if entry.doc != doc or not (entry.section + "-").startswith(section + "-"):
            continue
        command, *output = seed_outputs.extract(entry).splitlines()
        runs.append(Run(lead=entry.lead, command=command.strip()[2:],
                        rows=[line.split() for line in output if line.strip()]))
    return runs


def test_every_transcribed_output_is_indexed() -> None:
    """index.yaml and the files beside it agree, and each output names a seed document."""
    files = {path.name for path in seed_outputs.DATA_DIR.glob("*.txt")}
    indexed = [entry.file for entry in seed_outputs.INDEX]
    assert sorted(indexed) == sorted(files)
    for entry in seed_outputs.INDEX:
        assert entry.doc in seed_outputs.DOCUMENTS, entry.file
        assert seed_outputs.extract(entry).lstrip().startswith("$ "), entry.file


def fits(run: Run, fig: dict[str, Any], shape: shapes.Shape) -> bool:
    """Whether this command line ran the figure's variant."""
    params, command = fig["params"], run.command
    if not re.search(PROGRAM[fig["check"]], command):
        return False
    if fig["check"] == "stream":
        # Both NPS runs use the same command; the line above it names the setting.
        return (f"OMP_NUM_THREADS={params['threads']}" in command
                and f"NPS{params['nps']}" in run.lead)
    nodes = params["nodes"]
    per_node = params.get("ranks_per_node") or params.get("gpus_per_node") or 2 // nodes
    if not re.search(rf"-n {nodes * per_node}\s", command):
        return False
    per_node_option = "-ppn" if params.get("mpi") == "intel-mpi" else "-N"
    if (nodes > 1) != bool(re.search(rf"\s{per_node_option} {per_node}\s", command)):
        return False
    buffers = params.get("buffers")
    if buffers == "H-H" and "-d cuda" in command:
        return False
    if buffers not in (None, "H-H") and not command.endswith(
            "-d cuda " + buffers.replace("-", " ")):
        return False
    return params.get("placement") == placement(command, buffers, shape)


def placement(command: str, buffers: str | None, shape: shapes.Shape) -> str | None:
    """Where the host-memory rank was bound, relative to the other rank's GPU.

    The seed binds rank i to the i-th core of --map-by pe-list; OMB gives local rank i
    GPU i (seed 000 sec 2-1).
    """
    cores = re.search(r"pe-list=([\d,]+)", command)
    if not cores or not buffers or "H" not in buffers or "D" not in buffers:
        return None
    host_rank = buffers.split("-").index("H")
    host_core = int(cores.group(1).split(",")[host_rank])
    host_numa = next(n for n, c in shape.numa_cores.items() if host_core in c)
    gpu_numa = shape.gpus["devices"][1 - host_rank]["numa_node"]
    if host_numa == gpu_numa:
        return "same-numa"
    if shape.numa_socket(host_numa) == shape.numa_socket(gpu_numa):
        return "same-socket"
    return "other-socket"


def transcription_errors(run: Run, fig: dict[str, Any]) -> list[str]:
    """How the figure's values differ from what the run printed ([] when they agree)."""
    table = {row[0]: row for row in run.rows}
    errors = []
    for key, value in fig["values"].items():
        first, column = _cell(fig, key)
        row = table.get(first, [])
        printed = row[column] if column < len(row) else None
        if printed is None or float(printed) != value:
            errors.append(f"{key}: file has {value}, seed printed {printed}")
    missing = _printed_keys(run, fig) - set(fig["values"])
    if missing:
        errors.append(f"the seed printed more rows: {sorted(missing, key=str)}")
    return errors


def _cell(fig: dict[str, Any], key: Any) -> tuple[str, int]:
    """The first cell of the row holding a value, and the value's column."""
    if fig["check"] == "nccl_all_reduce_perf":
        return str(NCCL_SIZE), NCCL_BUSBW_COLUMN[key]
    if fig["check"] == "stream":
        return f"{key}:", VALUE_COLUMN[("stream", "bandwidth")]
    return str(key), VALUE_COLUMN[(fig["check"], fig["metric"])]


def _printed_keys(run: Run, fig: dict[str, Any]) -> set[Any]:
    """Every key the run printed a value for (a 0-byte message has no bandwidth)."""
    if fig["check"] in ("nccl_all_reduce_perf", "stream"):
        return {key for key in FIXED_KEYS[fig["check"]]
                if _cell(fig, key)[0] in {row[0] for row in run.rows}}
    column = VALUE_COLUMN[(fig["check"], fig["metric"])]
    sizes = {int(row[0]) for row in run.rows if row[0].isdigit() and len(row) > column}
    return sizes - {0} if fig["metric"] == "bandwidth" else sizes


# --------------------------------------------------------------------------- bounded loading
# Issue 21 items 8-10: a shape file or name that would blow up, recurse or escape the
# shapes directory is refused in one line naming it, quickly, without a traceback.

def _alias_bomb(levels: int = 10, width: int = 10) -> str:
    """The "billion laughs" in YAML: each level lists the previous one `width` times."""
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


BOMBS: dict[str, tuple[str, str]] = {
    # case: (file text, a piece of the one line)
    "alias bomb": (_alias_bomb(), "more than 200000 values once its YAML aliases"),
    "nesting 600 deep (block)": ("".join(f"{' ' * i}k{i}:\n" for i in range(600)) + " " * 600
                                 + "x: 1\n", "nested deeper than 32 levels"),
    "nesting 600 deep (flow)": ("x: " + "[" * 600 + "]" * 600 + "\n",
                                "nested deeper than 32 levels"),
    "size written twice": (None, "key '1' appears twice (once as text, once as a number)"),
}


@pytest.mark.parametrize("case", list(BOMBS))
def test_a_shape_file_that_would_blow_up_is_refused_quickly(case: str, tmp_path) -> None:
    text, expected = BOMBS[case]
    if text is None:   # a documented figure with {1: 1.67, "1": 100.0}
        source = (shapes.SHAPES_DIR / "BM.GPU4.8.yaml").read_text()
        text = source.replace("values: {1: 1.67}", "values: {1: 1.67, \"1\": 100.0}", 1)
        assert text != source
    path = tmp_path / "BM.Bomb.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(shapes.ShapeError) as err:
        shapes.load_file(path)
    assert time.monotonic() - started < 10
    line = str(err.value)
    assert line.startswith("BM.Bomb.yaml: ") and expected in line, line
    assert "\n" not in line


@pytest.mark.parametrize("name", ["../etc/passwd", "a/b", "..", "BM..GPU", ".hidden",
                                  "x" * 5000, ""])
def test_a_name_that_is_no_shape_name_is_refused(name: str) -> None:
    with pytest.raises(shapes.ShapeError, match="is not a shape name"):
        shapes.load(name)


def test_shapes_directory_unreadable_or_empty_says_so(tmp_path, monkeypatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(shapes.SHAPES_DIR_ENV, str(empty))
    with pytest.raises(shapes.ShapeError, match="holds no shape file"):
        shapes.load("BM.GPU4.8")
    monkeypatch.setenv(shapes.SHAPES_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(shapes.ShapeError, match="cannot list the shapes directory"):
        shapes.known_shapes()
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv(shapes.SHAPES_DIR_ENV, str(not_a_dir))
    with pytest.raises(shapes.ShapeError, match="cannot list the shapes directory"):
        shapes.load("BM.GPU4.8")


def test_the_cli_says_one_line_for_a_bad_shape_name_or_directory(tmp_path) -> None:
    import os
    import subprocess
    import sys
    for env, shape in (({}, "../../etc/passwd"), ({}, "x" * 300),
                       ({shapes.SHAPES_DIR_ENV: str(tmp_path / "none")}, "BM.GPU4.8")):
        done = subprocess.run([sys.executable, "-m", "ocibench.cli", "preflight", "--shape",
                               shape], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **env})
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
