"""Shape files are validated by site/shapes/schema.json and the rules across fields:
every shipped file passes, and every fault a careless admin or a hostile user makes
fails with one line naming the file, the figure and the field, never a traceback.
A broken file stops only what uses that shape."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ocibench import accelerators, benchmarks, capabilities, metrics, paths, shapes
from ocibench.node import preflight
from ocibench.shapes import rules as shape_rules

SITE_SHAPES = shapes.SHAPES_DIR
SHIPPED = sorted(p.name for p in SITE_SHAPES.glob("*.yaml"))


def needs_lscpu() -> None:
    if not shutil.which("lscpu"):
        pytest.skip("lscpu (util-linux) is not installed: the local shape cannot probe")


def ocibench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real command line, run from this checkout's sources."""
    environ = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
        filter(None, [str(paths.REPO_ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "ocibench.cli", *args], capture_output=True,
                          text=True, env=environ, timeout=60, check=False)


def broken_copy(tmp_path: Path, shape: str, old: str, new: str, count: int = 1) -> Path:
    """A copy of a shipped shape file in tmp_path with one edit; site/ is never touched."""
    text = (SITE_SHAPES / f"{shape}.yaml").read_text()
    edited = re.sub(old, new, text, count=count, flags=re.MULTILINE)
    assert edited != text, f"{old!r} not found in {shape}.yaml"
    path = tmp_path / f"{shape}.yaml"
    path.write_text(edited)
    return path


def load_error(path: Path) -> str:
    with pytest.raises(shapes.ShapeError) as err:
        shapes.load_file(path)
    message = str(err.value)
    assert "\n" not in message, message
    return message


# --------------------------------------------------------------------------- shipped files

def test_every_shipped_shape_file_passes_check() -> None:
    needs_lscpu()
    done = ocibench("shape", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"{name}: ok" for name in SHIPPED]
    assert done.stderr == ""


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = shape_rules.schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_schema_states_the_python_vocabulary() -> None:
    """The schema lists names for editors; Python holds each once: they must agree."""
    schema = shape_rules.schema()
    figure = schema["$defs"]["figure"]["properties"]
    # a set: the registry's order is its own (the schema's is for editors)
    checks = figure["check"]["enum"]
    assert len(checks) == len(set(checks)), "a check named twice in the schema"
    assert set(checks) == set(benchmarks.CHECKS)
    assert figure["metric"]["enum"] == list(metrics.METRICS)
    assert figure["unit"]["enum"] == list(metrics.UNITS)
    one, any_of = figure["requires"]["items"]["oneOf"]
    assert one["enum"] == list(capabilities.CAPABILITIES)
    assert any_of["properties"]["any_of"]["items"]["enum"] == list(capabilities.CAPABILITIES)
    assert schema["properties"]["scheduler"]["enum"] == list(shapes.SCHEDULERS)
    assert schema["properties"]["cpu"]["properties"]["nps_modes"]["items"]["enum"] == \
        list(shapes.NPS_SETTINGS)
    declared = schema["properties"]["capabilities"]["properties"]
    assert list(declared) == list(capabilities.CAPABILITIES)
    kind_type = {capabilities.FLAG: "boolean", capabilities.COUNT: "integer",
                 capabilities.PCIE: "object"}
    for name, cap in capabilities.CAPABILITIES.items():
        assert declared[name]["type"] == kind_type[cap.kind], name


def test_documented_gpu_figures_say_what_they_require() -> None:
    shape = shapes.load("BM.GPU4.8")
    by_id = {f["id"]: f for f in shape.figures}
    assert by_id["osu_latency_d_d"]["requires"] == ["gdrdrv"]
    assert {"any_of": ["nvidia_peermem", "dmabuf"]} in by_id["osu_bw_d_d_2nodes"]["requires"]
    assert by_id["osu_bw_h_d_same_numa"]["requires"] == ["xpmem"]
    assert by_id["osu_bw_d_d"]["requires"] == ["nvlink"]
    for figure in shape.figures:
        for requirement in capabilities.requirements(figure.get("requires")):
            # one of the names the shape's nodes have (any_of: one will do)
            assert any(capabilities.present(shape.data["capabilities"].get(name))
                       for name in requirement.names), (figure["id"], requirement)
            assert figure["why"].strip()


def test_every_two_node_gpu_figure_requires_gpudirect_one_way_or_the_other() -> None:
    """Issue 20 item 4: GPU buffers across nodes need GPUDirect RDMA, by nvidia_peermem
    or by dma-buf: each such figure requires one of the two, not peermem alone."""
    seen = 0
    for name in shapes.known_shapes():
        if name == shapes.LOCAL:
            continue
        shape = shapes.load(name)
        vendor = accelerators.of(shape.gpus)
        either = capabilities.Requirement(vendor.gpudirect) if vendor else None
        for figure in shape.figures:
            params = figure["params"]
            on_gpus = params.get("buffers") == "D-D" or figure["check"].startswith("nccl_")
            if on_gpus and params.get("nodes") == 2:
                seen += 1
                assert either in capabilities.requirements(figure.get("requires")), \
                    (name, figure["id"])
    assert seen >= 5


#: Every GPU shape with a cluster network, and how many RDMA ports OCI gives it:
#: preflight and the healthcheck check each port that network.rdma_nics lists.
GPU_RDMA_PORTS = {"BM.GPU4.8": 16, "BM.GPU.A100-v2.8": 16, "BM.GPU.H100.8": 16,
                  "BM.GPU.H200.8": 8, "BM.GPU.B200.8": 8, "BM.GPU.MI300X.8": 8,
                  "BM.GPU.MI355X.8": 8, "BM.GPU.MI355X-v1.8": 8}


def test_every_gpu_shape_with_a_cluster_network_lists_its_nics() -> None:
    """Issue 30 item 6: each GPU shape names every NIC of its cluster network, so that
    every port is watched (a shape whose list went missing fails here and in the rules)."""
    with_network = {}
    for name in shapes.known_shapes():
        shape = shapes.load(name)
        network = shape.data.get("network") or {}
        if shape.gpus and str(network.get("rdma", "none")).lower() != "none":
            with_network[name] = shape
    assert set(GPU_RDMA_PORTS) <= set(with_network), set(GPU_RDMA_PORTS) - set(with_network)
    for name, shape in with_network.items():
        nics = shape.rdma_nics
        assert len(nics) == shape.data["network"]["ports"] == GPU_RDMA_PORTS.get(name, len(nics))
        assert shape.data["capabilities"]["rdma"] == len(nics), name
        assert len({(n["device"], n.get("port", 1)) for n in nics}) == len(nics), name
        # the ports preflight and the healthcheck check: each NIC, and the UCX ports
        checked = preflight.expectations(shape).rdma_devices
        assert [f"{n['device']}:{n.get('port', 1)}" for n in nics] == checked[:len(nics)]
    # where OCI's node doctor describes the shape, each NIC's PCI address and GPU too
    for name in ("BM.GPU4.8", "BM.GPU.A100-v2.8", "BM.GPU.H100.8", "BM.GPU.H200.8",
                 "BM.GPU.B200.8", "BM.GPU.MI300X.8"):
        nics = with_network[name].rdma_nics
        assert all("pci" in n and "gpu" in n for n in nics), name
        assert sorted({n["gpu"] for n in nics}) == list(range(8)), name


# --------------------------------------------------------------------------- faults

# name -> (shape, regex, replacement, pieces the one-line message must hold)
FAULTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "parameter typo thread": (
        "BM.Standard.E5.192", r"threads: 96", "thread: 96",
        ("figure 'stream_nps1'", "params: unknown parameter 'thread' of stream",
         "known: nps, threads")),
    "check typo osu_bww": (
        "BM.GPU4.8", r"check: osu_bw$", "check: osu_bww",
        ("figure 'osu_bw_d_d'", "check: 'osu_bww' is not one of")),
    "parameter typo nodez": (
        "BM.GPU4.8", r"buffers: D-D, nodes: 2", "buffers: D-D, nodez: 2",
        ("figure 'osu_latency_d_d_2nodes'", "params: unknown parameter 'nodez' of osu_latency")),
    "value typo HH": (
        "BM.Optimized3.36", r"buffers: H-H", "buffers: HH",
        ("figure 'osu_latency_h_h_2nodes'", "params.buffers: 'HH' is not one of H-H")),
    "size key 268435465": (
        "BM.GPU4.8", r"values: \{268435456: 279573.25\}", "values: {268435465: 279573.25}",
        ("figure 'osu_bw_d_d'", "values: key 268435465 is not a message size osu_bw prints")),
    "cores: thirty-six": (
        "BM.Optimized3.36", r"^  cores: 36$", "  cores: thirty-six",
        ("cpu.cores: 'thirty-six' is not an integer",)),
    "numa cores: [0]": (
        "BM.Optimized3.36", r"cores: \[0, 17\]", "cores: [0]",
        ("cpu.numa_nodes[0].cores: [0] must have at least 2 items",)),
    "devices: eight": (
        "BM.GPU4.8", r"^  devices:\n(    - \{index.*\n)+", "  devices: eight\n",
        ("gpus.devices: 'eight' is not a list",)),
    "sockets: two": (
        "BM.Optimized3.36", r"^  sockets: 2$", "  sockets: two",
        ("cpu.sockets: 'two' is not an integer",)),
    "cluster: {nodes: four}": (
        "loopback-cluster", r"^cluster:$", "cluster:\n  nodes: four",
        ("cluster.nodes: 'four' is not an integer",)),
    "scheduler: pbs": (
        "BM.Optimized3.36", r"^scheduler: slurm$", "scheduler: pbs",
        ("scheduler: 'pbs' is not one of slurm, none",)),
    "rdma_port_gbs: fast": (
        "BM.Optimized3.36", r"rdma_port_gbs: 12.5", "rdma_port_gbs: fast",
        ("links.rdma_port_gbs: 'fast' is not a finite number",)),
    "unknown requires": (
        "BM.GPU4.8", r"requires: \[nvlink\]", "requires: [nvswitch]",
        ("figure 'osu_bw_d_d'", "requires[0]: 'nvswitch' is not one of gdrdrv")),
    "floor key not a size": (
        "BM.GPU4.8", r"^    limit: nvlink_gbs$",
        "    limit: nvlink_gbs\n    floor: {values: {268435457: 250000}, source: x}",
        ("figure 'osu_bw_d_d'", "floor.values: key 268435457 is not a message size")),
    # --- beyond issue 11's list ---
    "unknown top-level field": (
        "BM.Optimized3.36", r"^scheduler: slurm$", "sheduler: slurm",
        ("unknown field 'sheduler'",)),
    "key written twice": (
        "BM.GPU4.8", r"buffers: D-D, nodes: 2\}", "buffers: D-D, nodes: 2, nodes: 1}",
        ("not valid YAML at line", "key 'nodes' appears twice")),
    "STREAM kernel typo": (
        "BM.Standard.E5.192", r"Triad: 715650.4", "Traid: 715650.4",
        ("figure 'stream_nps1'", "values: key 'Traid' is not a STREAM kernel")),
    "nccl column typo": (
        "BM.GPU4.8", r"out_of_place: 232.20", "out_of_plce: 232.20",
        ("figure 'nccl_all_reduce_8gpus'",
         "values: key 'out_of_plce' is not a nccl_all_reduce_perf column")),
    "nps not a BIOS setting": (
        "BM.Standard.E5.192", r"nps: 4, threads", "nps: 3, threads",
        ("figure 'stream_nps4'", "params.nps: 3 is not one of 1, 2, 4")),
    "nodes not an integer": (
        "BM.GPU4.8", r"buffers: D-D, nodes: 1\}", "buffers: D-D, nodes: one}",
        ("figure 'osu_latency_d_d'", "params.nodes: 'one' is not an integer")),
    "placement without H-D": (
        "BM.GPU4.8", r"buffers: D-D, nodes: 1\}", "buffers: D-D, nodes: 1, placement: same-numa}",
        ("figure 'osu_latency_d_d'", "placement applies only to H-D and D-H")),
    "metric the check does not give": (
        "BM.GPU4.8", r"metric: latency", "metric: bandwidth",
        ("figure 'osu_latency_d_d'", "metric: osu_latency gives latency, not 'bandwidth'")),
    "limit on a latency": (
        "BM.GPU4.8", r"values: \{1: 2.46\}", "values: {1: 2.46}\n    limit: pcie_gbs",
        ("figure 'osu_latency_d_d'", "limit 'pcie_gbs': a latency in us has no GB/s limit")),
    "limit not a link": (
        "BM.GPU4.8", r"limit: nvlink_gbs", "limit: infiniband_gbs",
        ("figure 'osu_bw_d_d'", "limit 'infiniband_gbs' is not a key of links")),
    "value not finite": (
        "BM.GPU4.8", r"values: \{1: 2.46\}", "values: {1: .nan}",
        ("figure 'osu_latency_d_d'", "values.1: nan is not a finite number")),
    "value zero": (
        "BM.GPU4.8", r"values: \{1: 2.46\}", "values: {1: 0}",
        ("figure 'osu_latency_d_d'", "values.1: 0 must be > 0")),
    "requires without why": (
        "BM.GPU4.8", r"^    why: \*why_gdrcopy\n", "",
        ("figure 'osu_latency_h_d_same_numa'", "'requires' needs 'why'")),
    "GPU capability on a CPU shape": (
        "BM.Optimized3.36", r"^  xpmem: true$", "  xpmem: true\n  gdrdrv: true",
        ("capabilities.gdrdrv: a GPU capability, but the shape has no gpus",)),
    "rdma ports disagree": (
        "BM.GPU4.8", r"^  rdma: 16 ", "  rdma: 8 ",
        ("capabilities.rdma: 8 RDMA ports", "ports 16")),
    "core count a float": (
        "BM.GPU4.8", r"^  cores: 64$", "  cores: 64.0",
        ("cpu.cores: 64.0 is not an integer",)),
    "version unquoted": (
        "BM.GPU4.8", r'stream: "5.10"', "stream: 5.10",
        ("software.stack.stream: 5.1 is not a string", '"5.10"')),
    "GPUs of no vendor": (
        "BM.GPU4.8", r"^  vendor: nvidia\n", "", ("missing field 'gpus.vendor'",)),
    "vendor not in the table": (
        "BM.GPU4.8", r"^  vendor: nvidia$", "  vendor: intel",
        ("gpus.vendor: 'intel' is not a known vendor (nvidia, amd)",)),
    "the old cuda_arch field": (
        "BM.GPU4.8", r'^  arch: "80"$', "  cuda_arch: 80",
        ("gpus: unknown field 'cuda_arch' (known: arch, c2c, devices, model, nvlink_domain, vendor)",)),
    "arch a number": (
        "BM.GPU4.8", r'^  arch: "80"$', "  arch: 80",
        ("gpus.arch: 80 is not a string",)),
    "arch of another vendor": (
        "BM.GPU4.8", r'^  arch: "80"$', "  arch: gfx942",
        ("gpus.arch: 'gfx942' is not an architecture of nvidia GPUs", "compute capability")),
    "amd arch in CUDA's spelling": (
        "BM.GPU4.8", r"^  vendor: nvidia$", "  vendor: amd",
        ("gpus.arch: '80' is not an architecture of amd GPUs", "gfx942")),
    "GPU on no NUMA node": (
        "BM.GPU4.8", r"\{index: 2, numa_node: 1\}", "{index: 2, numa_node: 9}",
        ("gpus.devices[2].numa_node: GPU 2 is on NUMA node 9",)),
    "core in two NUMA nodes": (
        "BM.GPU4.8", r"cores: \[8, 15\]", "cores: [7, 15]",
        ("cpu.numa_nodes: core 7 is in NUMA node 0 and in NUMA node 1",)),
    "figure id twice": (
        "BM.GPU4.8", r"id: osu_bw_d_d$", "id: osu_latency_d_d",
        ("figure id 'osu_latency_d_d' appears twice",)),
    "not YAML": (
        "BM.GPU4.8", r"^shape: BM.GPU4.8$", "shape: [BM.GPU4.8",
        ("not valid YAML at line",)),
    # --- the cluster-network NICs (network.rdma_nics) ---
    "NICs not listed": (
        "BM.GPU.H100.8", r"^  rdma_nics:\n(    - \{.*\n)+", "",
        ("network.rdma_nics: missing: a RoCEv2 network of 16 ports lists its NICs",)),
    "a NIC fewer than the ports": (
        "BM.GPU.H200.8", r"^    - \{device: mlx5_11, .*\n", "",
        ("network.rdma_nics: 7 NICs, but network.ports is 8",)),
    "a NIC listed twice": (
        "BM.GPU.B200.8", r"device: mlx5_11, ", "device: mlx5_10, ",
        ("network.rdma_nics[7]: port mlx5_10:1 is listed twice (network.rdma_nics[6])",)),
    "a PCI address twice": (
        "BM.GPU4.8", r'pci: "0000:94:00.1"', 'pci: "0000:94:00.0"',
        ("network.rdma_nics[15].pci: 0000:94:00.0 is listed twice",)),
    "a PCI address unquoted": (
        "BM.GPU.MI300X.8", r'pci: "0000:41:00.0"', "pci: 0000:41:00.0",
        ("network.rdma_nics[2].pci:", "is not a string")),
    "a PCI address misspelt": (
        "BM.GPU.MI300X.8", r'pci: "0000:41:00.0"', 'pci: "41:00.0"',
        ("network.rdma_nics[2].pci: '41:00.0' does not match",)),
    "a NIC of a GPU the shape lacks": (
        "BM.GPU.H100.8", r'pci: "0000:d5:00.1", gpu: 7', 'pci: "0000:d5:00.1", gpu: 8',
        ("network.rdma_nics[15].gpu: GPU 8 is no GPU of the shape",)),
    "a NIC of a GPU on a CPU shape": (
        "BM.Optimized3.36", r'pci: "0000:98:00.0"', 'pci: "0000:98:00.0", gpu: 0',
        ("network.rdma_nics[0].gpu: GPU 0 is no GPU of the shape (the shape has no gpus)",)),
    "NICs but no rdma capability": (
        "BM.GPU.H200.8", r"^  rdma: 8 .*\n", "",
        ("capabilities.rdma: not declared, but network.rdma_nics lists 8 RDMA ports",)),
    "NCCL_IB_HCA not the NICs' order": (
        "BM.GPU.MI300X.8", r"^    - \{device: mlx5_2, pci: \"0000:2a:00.0\", gpu: 1\}\n"
        r"    - \{device: mlx5_3, pci: \"0000:41:00.0\", gpu: 2\}",
        '    - {device: mlx5_3, pci: "0000:41:00.0", gpu: 2}\n'
        '    - {device: mlx5_2, pci: "0000:2a:00.0", gpu: 1}',
        ("network.collective_env.NCCL_IB_HCA names mlx5_0,mlx5_2,mlx5_3",
         "but network.rdma_nics lists mlx5_0,mlx5_3,mlx5_2")),
    "GID index beyond OCI's 0-3": (
        "BM.GPU.MI355X-v1.8", r"^  gid_index: 3$", "  gid_index: 4",
        ("network.gid_index: 4 must be <= 3",)),
    "no MPI device on a TCP network": (
        "loopback-cluster", r"ucx_net_devices: \{mpi: ocbnet0\}", "ucx_net_devices: {}",
        ("network.ucx_net_devices.mpi: missing (it defaults to the first of "
         "network.rdma_nics",)),
    "alias that contains itself": (
        "BM.Optimized3.36", r"^summary: .*$", "summary: &s [*s]",
        ("summary[0]: a YAML alias refers to the mapping or list that contains it",)),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_is_one_line_naming_file_figure_and_field(fault: str, tmp_path: Path) -> None:
    shape, old, new, pieces = FAULTS[fault]
    message = load_error(broken_copy(tmp_path, shape, old, new))
    assert message.startswith(f"{shape}.yaml: "), message
    for piece in pieces:
        assert piece in message, message


@pytest.mark.parametrize("shape, algorithms", [
    ("BM.GPU.H100.8", ["nvls", "ring"]),
    ("BM.GPU.H200.8", ["nvls"]),
    ("BM.GPU.B200.8", ["nvls"]),
])
def test_single_node_all_reduce_names_the_best_published_figure_of_the_board(
        shape: str, algorithms: list[str]) -> None:
    """Issue 20 item 5: beside OCI's floor, the best published single-node busbw on the
    same board, marked as not OCI's, with the algorithm it needs (NVLS is off on our GPU
    machine) and its source."""
    figure = next(f for f in shapes.load(shape).figures if f["id"] == "nccl_all_reduce_8gpus")
    published = figure["published"]
    assert [p["algorithm"] for p in published] == algorithms
    for p in published:
        assert p["hardware"] == "same-type"
        assert p["source"].startswith("https://github.com/NVIDIA/")
    floor = figure["floor"]["values"]["avg"]
    # NVLS's figure is above OCI's floor; H100's ring figure (NVLS off) is below it, so a
    # run with NVLS off misses OCI's floor on a healthy node: the shape file says so.
    assert all(p["value"] > floor for p in published if p["algorithm"] == "nvls")
    assert all(p["value"] < floor for p in published if p["algorithm"] == "ring")


@pytest.mark.parametrize("old, new, piece", [
    ("hardware: same-type", "hardware: oci", "published[0].hardware: 'oci' is not one of same-type"),
    ("algorithm: nvls", "algorithm: tree", "published[0].algorithm: 'tree' is not one of nvls, ring"),
    ("value: 830", "value: '830+'", "published[0].value: '830+' is not a finite number"),
])
def test_a_published_figure_says_its_hardware_and_algorithm(old: str, new: str, piece: str,
                                                            tmp_path: Path) -> None:
    message = load_error(broken_copy(tmp_path, "BM.GPU.B200.8", old, new))
    assert message.startswith("BM.GPU.B200.8.yaml: figure 'nccl_all_reduce_8gpus'"), message
    assert piece in message, message


def test_a_figure_known_only_by_its_floor_is_valid(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "BM.GPU4.8", r"^    values: \{268435456: 11962.21\}$",
                       "    floor: {values: {268435456: 11000}, source: OCI's health check}")
    figure = next(f for f in shapes.load_file(path).figures if f["id"] == "osu_bw_d_d_2nodes")
    assert "values" not in figure and figure["floor"]["values"] == {268435456: 11000}


def test_a_figure_with_neither_values_nor_floor_is_refused(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "BM.GPU4.8", r"^    values: \{268435456: 11962.21\}\n", "")
    assert load_error(path) == \
        "BM.GPU4.8.yaml: figure 'osu_bw_d_d_2nodes': missing field 'values'"


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "BM.Empty.yaml"
    path.write_text("# nothing yet\n")
    assert load_error(path) == "BM.Empty.yaml: a shape file must be a mapping, not an empty file"


def test_the_file_name_must_be_the_shape(tmp_path: Path) -> None:
    path = tmp_path / "BM.Other.yaml"
    path.write_text((SITE_SHAPES / "BM.Optimized3.36.yaml").read_text())
    assert "BM.Other.yaml: 'shape' is 'BM.Optimized3.36', expected 'BM.Other'" in load_error(path)


def test_a_broken_local_file_is_named_before_probing(tmp_path: Path) -> None:
    path = broken_copy(tmp_path, "local", r"^scheduler: none$", "scheduler: pbs")
    assert load_error(path) == "local.yaml: scheduler: 'pbs' is not one of slurm, none"


# --------------------------------------------------------------------------- the command

def test_check_prints_one_line_per_file_and_exits_1(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(SITE_SHAPES / "BM.Optimized3.36.yaml", good)
    files = [broken_copy(tmp_path, *FAULTS["parameter typo thread"][:3]),
             broken_copy(tmp_path, *FAULTS["devices: eight"][:3]),
             broken_copy(tmp_path, *FAULTS["cluster: {nodes: four}"][:3]),
             good / "BM.Optimized3.36.yaml"]
    done = ocibench("shape", "--check", *map(str, files))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4, lines
    assert lines[0].startswith("BM.Standard.E5.192.yaml: figure 'stream_nps1': params: ")
    assert lines[1].startswith("BM.GPU4.8.yaml: gpus.devices: 'eight' is not a list")
    assert lines[2].startswith("loopback-cluster.yaml: cluster.nodes: 'four'")
    assert lines[3] == "BM.Optimized3.36.yaml: ok"


def test_check_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "BM.Nothing.yaml"
    done = ocibench("shape", "--check", str(missing))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == f"ocibench: shape --check: no such file: {missing}"


def shapes_copy(tmp_path: Path, broken: str, old: str, new: str) -> Path:
    """A copy of site/shapes with one file broken."""
    directory = tmp_path / "shapes"
    shutil.copytree(SITE_SHAPES, directory)
    fixed = broken_copy(tmp_path, broken, old, new)
    shutil.move(str(fixed), directory / fixed.name)
    return directory


def test_a_broken_file_in_the_shapes_dir_is_still_listed_and_checked(tmp_path: Path) -> None:
    needs_lscpu()
    directory = shapes_copy(tmp_path, *FAULTS["cores: thirty-six"][:3])
    env = {shapes.SHAPES_DIR_ENV: str(directory)}
    listed = ocibench("shape", "--list", env=env)
    assert listed.returncode == 0 and "BM.Optimized3.36" in listed.stdout.split()
    checked = ocibench("shape", "--check", env=env)
    assert checked.returncode == 1
    assert "BM.Optimized3.36.yaml: cpu.cores: 'thirty-six' is not an integer" in checked.stdout
    assert checked.stdout.count(": ok\n") == len(SHIPPED) - 1
    shown = ocibench("shape", "--show", "BM.Optimized3.36", env=env)
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    assert shown.stderr.startswith("ocibench: BM.Optimized3.36.yaml: cpu.cores:")


# --------------------------------------------------------------------------- ReFrame

@pytest.fixture
def broken_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    needs_lscpu()
    pytest.importorskip("reframe", reason="ReFrame is not installed (pip install -e '.[test]')")
    directory = shapes_copy(tmp_path, *FAULTS["cores: thirty-six"][:3])
    monkeypatch.setenv(shapes.SHAPES_DIR_ENV, str(directory))
    monkeypatch.setenv(shapes.SHAPE_ENV, shapes.LOCAL)
    return directory


def test_a_broken_shape_leaves_out_only_its_own_system(broken_site: Path, capsys) -> None:
    from ocibench.reframe import site as reframe_site

    config = reframe_site.build([])
    systems = [s["name"] for s in config["systems"]]
    assert "BM_Optimized3_36" not in systems
    assert set(systems) == {reframe_site.system_name(p.stem) for p in broken_site.glob("*.yaml")
                            if p.stem != "BM.Optimized3.36"}
    assert systems[0] == "local"
    assert ("ocibench: warning: system BM_Optimized3_36 left out: BM.Optimized3.36.yaml: "
            "cpu.cores: 'thirty-six' is not an integer") in capsys.readouterr().err


def test_asking_for_the_broken_system_names_its_fault(broken_site: Path) -> None:
    from reframe.core.exceptions import ConfigError

    from ocibench.reframe import site as reframe_site

    with pytest.raises(ConfigError, match=re.escape(
            "system BM_Optimized3_36 is left out: BM.Optimized3.36.yaml: cpu.cores:")):
        reframe_site.build(["--system", "BM_Optimized3_36"])


def test_a_broken_shape_of_this_machine_stops_autodetection_naming_its_fault(
        broken_site: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """ReFrame's autodetection (ocibench.reframe.site.detected_system) on a machine whose
    shape file is broken: it says why and fails; --system still names the others."""
    from ocibench.reframe import site as reframe_site

    monkeypatch.setenv(shapes.SHAPE_ENV, "BM.Optimized3.36")
    config = reframe_site.build([])
    assert "local" in [s["name"] for s in config["systems"]]
    capsys.readouterr()
    with pytest.raises(shapes.ShapeError):
        reframe_site.detected_system()
    err = capsys.readouterr().err
    assert err.startswith("ocibench: this machine's shape BM.Optimized3.36 cannot be used: "
                          "BM.Optimized3.36.yaml: cpu.cores: 'thirty-six' is not an integer")
    assert err.endswith(" (--system names another)\n") and err.count("\n") == 1


def test_reframe_lists_the_other_systems_checks(broken_site: Path, tmp_path: Path) -> None:
    exe = shutil.which("reframe")
    if not exe:
        pytest.skip("reframe is not on PATH (pip install -e '.[test]')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RFM_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.REPO_ROOT / "src"),
                                                     os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [exe, "-C", str(paths.SITE_DIR / "reframe_config.py"), "-c", str(paths.CHECKS_DIR),
         "--nocolor", "--prefix", str(tmp_path / "rfm"), "-l", "--system", "BM_GPU4_8"],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^Found \d+ check\(s\)$", done.stdout, re.MULTILINE), done.stdout
    assert "system BM_Optimized3_36 left out: BM.Optimized3.36.yaml: cpu.cores" in done.stderr

