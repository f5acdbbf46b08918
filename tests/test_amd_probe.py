"""The AMD row's probes: its readers of amd-smi, and preflight and the healthcheck on an
AMD Instinct shape.

No AMD GPU can be reached from here.  The readers are tested on what amd-smi printed on
machines of others, kept in tests/data/amd-smi/ with their sources (its README).  For
preflight and the healthcheck, ``amd-smi`` is a script on PATH that prints those
outputs: test data standing in for the part that is absent (the GPUs), as nvidia-smi's
script does in tests/test_preflight.py; the rest of the node is a sysfs tree under
tmp_path given as the root, as for every preflight test.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from ocibench import accelerators, shapes
from ocibench.accelerators import AMD, ProbedGpu, ProbeFormatError
from ocibench.health import check, probes
from ocibench.health.state import FAIL, PASS, UNKNOWN
from ocibench.metrics import Action
from ocibench.node import preflight
from ocibench.shapes import probe
from ocibench.sweep import actions
from rdma_fakes import FakePorts

DATA = Path(__file__).parent / "data" / "amd-smi"
#: The scripts' cat, found before a test leaves only the node's tools on PATH.
CAT = shutil.which("cat")
SHAPE = "BM.GPU.MI300X.8"
STRIX = ProbedGpu(0, "Strix Halo [Radeon Graphics / Radeon 8050S Graphics / Radeon 8060S "
                  "Graphics]", "gfx1151", "0000:c4:00.0")


def text(name: str) -> str:
    return (DATA / name).read_text()


def _amd_smi(where: Path, static: str, topology: str = "[]", bad_pages: str = "[]") -> None:
    """amd-smi as a script printing the given outputs (test data: no AMD GPU here)."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "static.json").write_text(static)
    (where / "topology.json").write_text(topology)
    (where / "bad-pages.json").write_text(bad_pages)
    script = where / "amd-smi"
    script.write_text(f'#!/bin/sh\ncase "$1" in\n static) exec {CAT} "{where}/static.json";;\n'
                      f' topology) exec {CAT} "{where}/topology.json";;\n'
                      f' bad-pages) exec {CAT} "{where}/bad-pages.json";;\nesac\nexit 2\n')
    script.chmod(0o755)


# --------------------------------------------------------------------------- the GPU listing


def test_the_reader_reads_a_published_listing_as_printed() -> None:
    """amd-smi of ROCm 6.3 prints a list of GPU records (Strix Halo, redhat-et/GKM)."""
    assert AMD.probe_parse(text("static.strix-halo.json")) == [STRIX]


def test_the_reader_reads_rocm_7s_gpu_data_wrapper() -> None:
    """amd-smi of ROCm 7 puts the same records under "gpu_data" (amdsmi_logger
    combine_arrays_to_json): the published records, wrapped as it wraps them."""
    records = json.loads(text("static.strix-halo.json"))
    assert AMD.probe_parse(json.dumps({"gpu_data": records}, indent=4)) == [STRIX]


def test_a_listing_without_the_architecture_is_one_line_naming_it() -> None:
    """amd-smi before ROCm 6.3 prints no target_graphics_version (a Navi 23, published):
    the GPUs cannot be told from the shape's, so the reader refuses, in one line."""
    with pytest.raises(ProbeFormatError) as err:
        AMD.probe_parse(text("static-asic-bus.navi23.json"))
    assert str(err.value) == "printed no asic.target_graphics_version for GPU 0 (None)"


@pytest.mark.parametrize("out, said", [
    # amd-smi's words where the driver is not loaded (amdsmi_commands.py, logging.error)
    ("ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status "
     "(sudo modprobe amdgpu)",
     "printed 'ERROR:root:Unable to detect any GPU devices, check amdgpu version and module "
     "sta', not the JSON of amd-smi static --asic --bus --json"),
    ("", "printed 'nothing', not the JSON of amd-smi static --asic --bus --json"),
    ('{"gpu_data": {"gpu": 0}}', "printed JSON that is no list of GPUs"),
    ('[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "target_graphics_version": '
     '"N/A"}, "bus": {"bdf": "0000:0c:00.0"}}]',
     "printed no asic.target_graphics_version for GPU 0 ('N/A')"),
    ('[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "target_graphics_version": '
     '"gfx942"}, "bus": {"bdf": "c:0.0"}}]', "printed bdf 'c:0.0' for GPU 0, not a PCI address"),
])
def test_output_it_cannot_read_is_one_line(out: str, said: str) -> None:
    with pytest.raises(ProbeFormatError) as err:
        AMD.probe_parse(out)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_the_local_shape_reads_amd_gpus(tmp_path, monkeypatch) -> None:
    """The `local` shape is described from the AMD row's probe like NVIDIA's."""
    _amd_smi(tmp_path, static=text("static.strix-halo.json"))
    monkeypatch.setenv("PATH", str(tmp_path))
    found = probe.gpus([{"id": 0, "socket": 0, "cores": [0, 7]}])
    assert found == {"vendor": "amd", "model": STRIX.model, "arch": "gfx1151",
                     "devices": [{"index": 0, "numa_node": 0}]}


def test_the_local_shape_is_unknown_not_absent_on_an_unreadable_listing(tmp_path,
                                                                         monkeypatch) -> None:
    _amd_smi(tmp_path, static=text("static-asic-bus.navi23.json"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(probe.ProbeError, match="target_graphics_version"):
        probe.gpus([{"id": 0, "socket": 0, "cores": [0, 7]}])


# --------------------------------------------------------------------------- the xGMI links


def mi300x_topology(text_table: str, swap: tuple[int, int] | None = None) -> str:
    """The MI300X node's `amd-smi topology -t --json`, written from its published
    link-type table (tests/data/amd-smi/README.md): per GPU its ``gpu``, ``bdf`` and
    ``links``, each link ``gpu``, ``bdf``, ``link_type``, as amdsmi_commands.py
    topology() writes them.  ``swap``: that pair of GPUs linked by PCIE instead."""
    lines = text_table.split("LINK TYPE TABLE:\n", 1)[1].splitlines()
    bdfs = lines[0].split()
    records = []
    for i, row in enumerate(lines[1:len(bdfs) + 1]):
        types = row.split()[1:]
        if swap and i in swap:
            types[swap[1] if i == swap[0] else swap[0]] = "PCIE"
        records.append({"gpu": i, "bdf": bdfs[i], "links": [
            {"gpu": j, "bdf": bdfs[j], "link_type": t} for j, t in enumerate(types)]})
    return json.dumps(records, indent=4)


def test_the_xgmi_reader_on_the_published_mi300x_topology() -> None:
    out = mi300x_topology(text("topology.mi300x.rocm-6.1.0.txt"))
    assert AMD.link_parse(out) == {i: (7, 7) for i in range(8)}


@pytest.mark.parametrize("name, links", [
    ("topology.navi23.json", {0: (0, 0)}),                     # one GPU: no peer
    ("topology-a-t.two-gpus.json", {0: (0, 0), 1: (0, 0)}),    # peers over PCIe
    ("topology.rocm-6.1.0-format.json", {0: (0, 0), 1: (0, 0)}),
])
def test_the_xgmi_reader_on_published_json(name: str, links) -> None:
    assert AMD.link_parse(text(name)) == links


def test_the_xgmi_reader_refuses_what_is_not_json_in_one_line() -> None:
    with pytest.raises(ProbeFormatError) as err:
        AMD.link_parse(text("topology.changelog-elided.txt"))
    assert str(err.value) == "printed '[', not the JSON of amd-smi topology -t --json"


def test_the_xgmi_reader_refuses_a_record_without_link_types() -> None:
    with pytest.raises(ProbeFormatError, match="each peer's link_type"):
        AMD.link_parse('[{"gpu": 0, "bdf": "0000:0c:00.0", "links": [{"gpu": 1}]}]')


# --------------------------------------------------------------------------- bad pages

#: What amd-smi prints for a GPU without bad pages of a kind (amdsmi_commands.py
#: bad_pages(): bad_pages_not_found), as OCI's oci-hpc healthcheck compares it
#: (check_gpu_setup.py, check_bad_pages: gpu.get("pending") != "No bad pages found.").
NONE = "No bad pages found."


def bad_pages(gpus: int, **pages: dict[int, object]) -> str:
    """`amd-smi bad-pages --json` of ``gpus`` GPUs, written in the layout bad_pages()
    stores it (no published output of the command was found: tests/data/amd-smi/
    README.md): per GPU its "gpu" index and its "retired", "pending" and "un_res"
    pages, "No bad pages found." where there are none, one page as a mapping, several
    as a list.  ``pages``: per key, the GPU index and what amd-smi prints there."""
    return json.dumps([{"gpu": i, **{k: pages.get(k, {}).get(i, NONE)
                                     for k in ("retired", "pending", "un_res")}}
                       for i in range(gpus)], indent=4)


def page(status: str, address: int = 0x5E2C_0000) -> dict[str, object]:
    """One bad page as bad_pages() writes it: page_address, page_size and its status
    (amdsmi_memory_page_status_t's name without AMDSMI_MEM_PAGE_STATUS_)."""
    return {"page_address": address, "page_size": 4096, "status": status}


def test_the_bad_pages_reader_on_gpus_without_bad_pages() -> None:
    got = AMD.gpu_memory.parse(bad_pages(2))
    assert [(g.gpu, g.broken, g.unread, g.note) for g in got] == [(0, (), "", ""),
                                                                   (1, (), "", "")]


def test_retired_pages_are_retired_as_designed_pending_and_unreservable_ones_break() -> None:
    got = AMD.gpu_memory.parse(bad_pages(
        3, retired={0: page("RESERVED"), 1: [page("RESERVED"), page("RESERVED", 0x1000)]},
        pending={1: page("PENDING", 0x2000)},
        un_res={2: [page("UNRESERVABLE", 0x3000), page("UNRESERVABLE", 0x4000)]}))
    assert [(g.gpu, g.broken, g.note) for g in got] == [
        (0, (), "1 pages retired"),
        (1, ("1 page pending retirement (first at 8192)",), "2 pages retired"),
        (2, ("2 pages unreservable (first at 12288)",), "")]


def test_the_bad_pages_reader_reads_rocm_7s_wrapper_and_empty_lists() -> None:
    records = json.loads(bad_pages(1, pending={0: []}))
    got = AMD.gpu_memory.parse(json.dumps({"gpu_data": records}))
    assert [(g.gpu, g.broken, g.unread) for g in got] == [(0, (), "")]


def test_pages_its_library_could_not_read_are_unread_not_none() -> None:
    """"N/A": amdsmi_get_gpu_bad_page_info failed (bad_pages(): AmdSmiLibraryException)."""
    got = AMD.gpu_memory.parse(bad_pages(1, retired={0: "N/A"}, pending={0: "N/A"},
                                         un_res={0: "N/A"}))
    assert [(g.gpu, g.broken, g.unread) for g in got] == [(0, (), "pending N/A, un_res N/A")]


@pytest.mark.parametrize("out, said", [
    ("ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status "
     "(sudo modprobe amdgpu)", "printed 'ERROR:root:Unable to detect any GPU devices, check "
     "amdgpu version and module sta', not the JSON of amd-smi bad-pages --json"),
    # amd-smi of ROCm 6.0 stored nothing for a GPU without bad pages
    ('[{"gpu": 0}]', "printed a GPU record without its index and its retired, pending and "
     "un_res pages"),
    ('[{"gpu": 0, "retired": "No bad pages found.", "pending": 3, "un_res": "No bad pages '
     'found."}]', "printed pending 3 for GPU 0, not its bad pages"),
])
def test_bad_pages_it_cannot_read_are_one_line(out: str, said: str) -> None:
    with pytest.raises(ProbeFormatError) as err:
        AMD.gpu_memory.parse(out)
    assert said in str(err.value) and "\n" not in str(err.value)


# --------------------------------------------------------------------------- the kernel log


def dmesg_texts(name: str) -> list[str]:
    """A published dmesg's lines without dmesg's time stamp ("[76914.152141] ",
    "[Sat Jan  7 14:25:56 2023] "): the text of each kernel record."""
    return [line.split("] ", 1)[1] for line in text(name).splitlines()]


def kernel_records(texts: list[str]) -> str:
    """/dev/kmsg's records of ``texts``: '<prio>,<seq>,<usec since boot>,-;<text>'."""
    return "".join(f"3,{n},{(n + 1) * 1_000_000},-;{t}\n" for n, t in enumerate(texts))


@pytest.mark.parametrize("name, bus", [
    ("dmesg.athub.mi300x.txt", "0000:dd:00.0"),           # RAS_EVENT_LOG: "{1}"
    ("dmesg.athub.mi50.txt", "0000:e3:00.0"),             # "amdgpu: " after the device
    ("dmesg.athub.mi50-rocm-4.0.txt", "0000:83:00.0"),    # dev_info of Linux 5.x
])
def test_the_kernel_log_reader_finds_amdgpus_fatal_error(name: str, bus: str) -> None:
    found = [f for f in map(AMD.kernel_log.read, dmesg_texts(name)) if f]
    assert found == [(bus, "uncorrectable hardware error (ERREVENT_ATHUB_INTERRUPT)")]


def test_correctable_errors_and_resets_are_not_fatal_errors() -> None:
    """The same MI300X node's correctable xGMI errors and the resets that followed the
    fatal error: none of them is one (the fatal error's own line is)."""
    assert not [t for t in dmesg_texts("dmesg.reset-correctable.mi300x.txt")
                if AMD.kernel_log.read(t)]
    assert not [t for t in dmesg_texts("dmesg.athub.mi300x.txt")[1:] if AMD.kernel_log.read(t)]


# --------------------------------------------------------------------------- preflight

#: The names amd-smi gives MI300X: "AMD Instinct MI300X" as AMD's outputs of 2025 name
#: their Instinct GPUs (rocm-systems pull 2987: "AMD Instinct MI350X"), "MI300X-O" in
#: AMD's blog of September 2024 (rocm-blogs amd-smi-overview).
MI300X, MI300X_O = "AMD Instinct MI300X", "MI300X-O"


class AmdNode:
    """A BM.GPU.MI300X.8 node: amd-smi printing the published MI300X node's GPUs and
    links, and a sysfs tree with each GPU's PCIe link (Gen5 x16, MI300X's OAM host
    interface) and NUMA node (the shape's), amdkfd's peer memory and the RDMA ports."""

    def __init__(self, base: Path, shape: str = SHAPE) -> None:
        self.bin, self.root = base / "bin", base / "root"
        self.shape = shapes.load(shape)
        self.exp = preflight.expectations(self.shape)
        table = text("topology.mi300x.rocm-6.1.0.txt")
        self.bdfs = table.split("LINK TYPE TABLE:\n", 1)[1].splitlines()[0].split()
        self.model = MI300X
        self.static: str | None = None      # a published output instead of the node's
        self.topology = mi300x_topology(table)
        self.rocminfo: str | None = text("rocminfo.system.rocm-7.2.txt")   # None: absent
        self.bad_pages = bad_pages(8)
        self.kernel_log: list[str] = ["Linux version 5.15.0-1051-oracle"]
        # Ubuntu 22.04's kernel, as OCI's MI300X image has it (Prerequisites.md)
        self.files = {"sys/kernel/mm/memory_peers/amdkfd/version": "1\n",
                      "proc/sys/kernel/osrelease": "5.15.0-1051-oracle\n"}
        for bdf, numa in zip(self.bdfs, self.exp.gpu_numa):
            base_dir = f"sys/bus/pci/devices/{bdf}"
            self.files.update({f"{base_dir}/numa_node": f"{numa}\n",
                               f"{base_dir}/current_link_speed": "32.0 GT/s PCIe\n",
                               f"{base_dir}/max_link_speed": "32.0 GT/s PCIe\n",
                               f"{base_dir}/current_link_width": "16\n",
                               f"{base_dir}/max_link_width": "16\n"})
        # every RDMA port of the shape, and ethtool printing their RX discards
        self.ports = FakePorts(self.shape)

    def listing(self) -> str:
        """`amd-smi static --asic --bus --json` of the node: its bus addresses from the
        published table, the name and target amd-smi gives MI300X (assembled, in the
        layout of the published listings)."""
        return json.dumps([{"gpu": i, "asic": {"market_name": self.model,
                                               "target_graphics_version": "gfx942"},
                            "bus": {"bdf": bdf}} for i, bdf in enumerate(self.bdfs)],
                          indent=4)

    def write(self) -> None:
        self.ports.write_ethtool(self.bin)
        for rel, body in {**self.ports.files(), **self.files}.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
        _amd_smi(self.bin, self.static or self.listing(), self.topology, self.bad_pages)
        kmsg = self.root / "dev" / "kmsg"
        kmsg.parent.mkdir(parents=True, exist_ok=True)
        kmsg.write_text(kernel_records(self.kernel_log))
        (self.bin / "rocminfo.txt").write_text(self.rocminfo or "")
        tool = self.bin / "rocminfo"
        tool.unlink(missing_ok=True)
        if self.rocminfo is not None:
            tool.write_text(f'#!/bin/sh\nexec {CAT} "{self.bin}/rocminfo.txt"\n')
            tool.chmod(0o755)

    def preflight(self) -> dict[str, preflight.Item]:
        self.write()
        return {i.name: i for i in preflight.preflight(self.shape, self.root).items}


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AmdNode:
    fake = AmdNode(tmp_path)
    monkeypatch.setenv("PATH", str(fake.bin))   # the node's amd-smi, and no other tool
    return fake


def test_preflight_lists_the_gpus_links_pcie_and_numa_of_an_mi300x_node(node) -> None:
    found = node.preflight()
    assert (found["gpus"].status, found["gpus"].detail) == ("present", f"8x {MI300X}")
    assert found["gpus"].required
    xgmi = found["xgmi"]
    assert (xgmi.status, xgmi.required) == ("present", True), xgmi
    assert xgmi.detail == "active/links " + ", ".join(f"GPU {i}: 7/7" for i in range(8))
    assert xgmi.evidence == "amd-smi topology -t --json"
    # amd-smi's bus addresses found in sysfs: Gen5 x16 and the shape's NUMA nodes
    assert (found["pcie"].status, found["pcie"].required) == ("present", True)
    assert "GPU 7: Gen5 x16 (max Gen5 x16)" in found["pcie"].detail
    assert found["gpu_numa"].status == "present", found["gpu_numa"]
    assert found["amd_peermem"].status == "present"
    assert "nvlink" not in found and "nvidia_peermem" not in found
    ports = [found[f"rdma {d}"] for d in node.exp.rdma_devices]
    assert len(ports) == 8 and {p.status for p in ports} == {"present"}, ports


def test_a_gpu_missing_an_xgmi_peer_fails_the_node(node) -> None:
    node.topology = mi300x_topology(text("topology.mi300x.rocm-6.1.0.txt"), swap=(3, 5))
    xgmi = node.preflight()["xgmi"]
    assert (xgmi.status, xgmi.missing) == ("unexpected", True)
    assert "GPU 3: 6/6" in xgmi.detail and xgmi.detail.endswith("the shape: 7 per GPU")


def test_a_gpu_on_a_gen4_link_fails_the_node(node) -> None:
    """The shape's PCIe Gen 5 x16 is read at amd-smi's bus address of each GPU."""
    node.files[f"sys/bus/pci/devices/{node.bdfs[2]}/max_link_speed"] = "16.0 GT/s PCIe\n"
    pcie = node.preflight()["pcie"]
    assert (pcie.status, pcie.missing) == ("unexpected", True)
    assert "GPU 2: Gen5 x16 (max Gen4 x16)" in pcie.detail and pcie.detail.endswith(
        "the shape: Gen5 x16")


def test_a_node_without_xgmi_is_absent(node) -> None:
    node.topology = text("topology-a-t.two-gpus.json")   # published: peers over PCIe
    xgmi = node.preflight()["xgmi"]
    assert (xgmi.status, xgmi.detail) == ("absent", "no active xGMI on any GPU")


def test_another_name_for_the_same_gpus_is_unknown_not_present_nor_failed(node) -> None:
    """amd-smi's name for MI300X changed across releases: 8 GPUs of the shape's
    architecture under another name cannot be told apart from the shape's."""
    node.model = MI300X_O
    gpus = node.preflight()["gpus"]
    assert (gpus.status, gpus.missing) == ("unknown", False)
    assert gpus.detail.startswith(f"8x {MI300X_O} (gfx942); the shape: 8x {MI300X}")


def test_another_gpu_fails_the_node(node) -> None:
    """A published listing of another machine (one Strix Halo, gfx1151)."""
    node.static = text("static.strix-halo.json")
    gpus = node.preflight()["gpus"]
    assert (gpus.status, gpus.missing) == ("unexpected", True)
    assert gpus.detail == f"1x {STRIX.model}; the shape: 8x {MI300X}"


def test_an_unreadable_listing_makes_every_gpu_item_unknown_never_absent(node) -> None:
    """The published Navi 23 listing (no architecture printed): the GPUs, their links,
    PCIe and NUMA are unknown, and preflight is unjudged, not failed."""
    node.static = text("static-asic-bus.navi23.json")
    node.write()
    result = preflight.preflight(node.shape, node.root)
    found = {i.name: i for i in result.items}
    for name in ("gpus", "xgmi", "pcie", "gpu_numa"):
        assert found[name].status == "unknown", found[name]
    assert "printed no asic.target_graphics_version for GPU 0" in found["gpus"].detail
    assert "gpus" not in result.to_dict()["missing"]
    assert "gpus" in result.to_dict()["unknown"]


def test_no_amd_smi_is_absent(node) -> None:
    node.write()
    (node.bin / "amd-smi").unlink()
    found = {i.name: i for i in preflight.preflight(node.shape, node.root).items}
    assert (found["gpus"].status, found["gpus"].detail) == (
        "absent", f"amd-smi not on PATH; the shape: 8x {MI300X}")


def test_dmabuf_is_the_rocm_runtimes_answer(node) -> None:
    """rocminfo prints the runtime's answer (published, ROCm 7.2): dma-buf present,
    kernel 5.12 or later; the GPUDirect group then needs no amd_peermem."""
    dmabuf = node.preflight()["dmabuf"]
    assert dmabuf.status == "present", dmabuf
    assert dmabuf.detail.startswith("kernel 5.15.0-1051-oracle (5.12 or later), rocminfo: "
                                    "DMAbuf Support YES")
    assert dmabuf.evidence.endswith("; ran `rocminfo`")


@pytest.mark.parametrize("rocminfo, status, said", [
    (lambda out: out.replace("DMAbuf Support:          YES", "DMAbuf Support:          NO"),
     "absent", "rocminfo: DMAbuf Support NO"),
    (lambda out: None, "absent", "rocminfo not on PATH"),
    # rocminfo's own words where amdgpu is not loaded (rocminfo.cc), then no system info
    (lambda out: "ROCk module is NOT loaded, possibly no GPU devices\n", "unknown",
     "rocminfo printed no dma-buf answer"),
])
def test_dmabuf_without_the_runtimes_yes(node, rocminfo, status, said) -> None:
    node.rocminfo = rocminfo(node.rocminfo)
    dmabuf = node.preflight()["dmabuf"]
    assert dmabuf.status == status and said in dmabuf.detail, dmabuf


def test_pollara_ports_are_rdma_ports_like_mlx5(tmp_path, monkeypatch) -> None:
    """BM.GPU.MI355X.8's Pollara NICs (network.rdma_nics: ionic_*) are read like
    ConnectX's mlx5_*, at the shape's GID index 1; their RX discards are not judged
    (OCI's threshold is for mlx5's rx_prio*_discards)."""
    node = AmdNode(tmp_path, "BM.GPU.MI355X.8")
    first = node.shape.hcas[0]
    assert first.startswith("ionic_") and node.shape.gid_index == 1
    monkeypatch.setenv("PATH", str(node.bin))
    item = node.preflight()[f"rdma {first}:1"]
    assert item.status == "present" and "GID 1 RoCE v2 192.168." in item.detail, item
    assert "400 Gb/s" in item.detail and "ethtool" not in item.evidence
    node.files[f"sys/class/infiniband/{first}/ports/1/state"] = "1: DOWN\n"
    assert node.preflight()[f"rdma {first}:1"].status == "unexpected"


# --------------------------------------------------------------------------- the healthcheck


def health(node: AmdNode) -> dict[str, str]:
    node.write()
    ctx = probes.Context(root=node.root, shape=node.shape, node="amd-1",
                         deadline=time.monotonic() + 20, tool_timeout=5.0)
    return {r.name: r.state for r in check.run_probes(ctx)}


def health_evidence(node: AmdNode) -> dict[str, tuple[str, str]]:
    node.write()
    ctx = probes.Context(root=node.root, shape=node.shape, node="amd-1",
                         deadline=time.monotonic() + 20, tool_timeout=5.0)
    return {r.name: (r.state, r.evidence) for r in check.run_probes(ctx)}


def test_the_healthcheck_lists_an_amd_nodes_gpus_and_links(node) -> None:
    found = health(node)
    assert found["gpu_count"] == PASS and found["xgmi"] == PASS and found["pcie"] == PASS
    assert [found[f"rdma {d}"] for d in node.exp.rdma_devices] == [PASS] * 8
    assert "nvlink" not in found and "xid" not in found and "row_remap" not in found
    # the AMD row's own items: amd-smi's bad pages, amdgpu's fatal error in the log
    assert found["bad_pages"] == PASS and found["ras"] == PASS
    assert set(found.values()) == {PASS}


def test_a_healthy_mi300x_node_passes_not_unjudged(node, tmp_path) -> None:
    node.write()
    outcome = check.check(check.Options(shape=node.shape, root=node.root, node="amd-1",
                                        state_path=tmp_path / "state.json",
                                        tool_timeout_s=5.0, deadline_s=20.0))
    assert outcome.code == check.OK, outcome.lines
    assert outcome.state.action == "none"


@pytest.mark.parametrize("key, status, says", [
    ("pending", "PENDING", "1 page pending retirement (first at 1579941888)"),
    ("un_res", "UNRESERVABLE", "1 page unreservable (first at 1579941888)"),
])
def test_a_gpu_with_a_bad_page_to_drain_fails_naming_its_bus_and_the_command(
        node, key: str, status: str, says: str) -> None:
    node.bad_pages = bad_pages(8, **{key: {3: page(status)}}, retired={3: page("RESERVED")})
    state, evidence = health_evidence(node)["bad_pages"]
    assert state == FAIL, evidence
    assert evidence == f"GPU 3 ({node.bdfs[3]}): {says} [`amd-smi bad-pages --json`]"


def test_retired_pages_alone_pass_and_are_said(node) -> None:
    node.bad_pages = bad_pages(8, retired={5: [page("RESERVED"), page("RESERVED", 0x1000)]})
    state, evidence = health_evidence(node)["bad_pages"]
    assert state == PASS
    assert evidence == (f"8 GPUs: no bad page pending or unreservable; GPU 5 "
                        f"({node.bdfs[5]}): 2 pages retired [`amd-smi bad-pages --json`]")


@pytest.mark.parametrize("out, said", [
    ("ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status "
     "(sudo modprobe amdgpu)\n", "printed 'ERROR:root:Unable to detect any GPU devices"),
    (bad_pages(8, pending={2: "N/A"}), "not read: GPU 2 ("),
    ("[]", "not read: no GPU listed"),
])
def test_bad_pages_amd_smi_cannot_give_are_unknown_naming_what_it_printed(
        node, out: str, said: str) -> None:
    node.bad_pages = out
    state, evidence = health_evidence(node)["bad_pages"]
    assert state == UNKNOWN and said in evidence, evidence
    assert evidence.startswith("`amd-smi bad-pages --json` printed") or \
        evidence.endswith("[`amd-smi bad-pages --json`]")


@pytest.mark.parametrize("name, bus", [("dmesg.athub.mi300x.txt", "0000:dd:00.0"),
                                       ("dmesg.athub.mi50.txt", "0000:e3:00.0")])
def test_amdgpus_fatal_error_in_the_kernel_log_fails_naming_the_gpu(node, name, bus) -> None:
    node.kernel_log += dmesg_texts(name)
    state, evidence = health_evidence(node)["ras"]
    assert state == FAIL, evidence
    assert evidence.startswith(f"uncorrectable hardware error (ERREVENT_ATHUB_INTERRUPT) on "
                               f"{bus} at ")
    assert evidence.endswith(f"s after boot [read {node.root / 'dev/kmsg'}]")


def test_a_kernel_log_with_resets_and_correctable_errors_passes(node) -> None:
    node.kernel_log += dmesg_texts("dmesg.reset-correctable.mi300x.txt")
    state, evidence = health_evidence(node)["ras"]
    assert state == PASS and "in 7 log lines" in evidence, evidence


def test_the_healthcheck_never_drains_on_an_unreadable_listing(node, tmp_path) -> None:
    node.static = text("static-asic-bus.navi23.json")
    found = health(node)
    assert found["gpu_count"] == UNKNOWN and found["xgmi"] == UNKNOWN
    assert FAIL not in found.values()
    outcome = check.check(check.Options(shape=node.shape, root=node.root, node="amd-1",
                                        state_path=tmp_path / "state.json",
                                        tool_timeout_s=5.0))
    assert outcome.code == check.UNJUDGED and outcome.state.drained_reason == ""


def test_every_vendor_names_its_links_capability() -> None:
    for row in accelerators.VENDORS.values():
        assert row.device_link in preflight.capabilities.CAPABILITIES
        assert row.link_command and callable(row.link_parse)


def test_a_node_missing_its_xgmi_links_is_drained_like_one_missing_nvlink() -> None:
    """The sweep's actions: the links between the GPUs are hardware, every vendor's."""
    reason = "BM.GPU.MI300X.8 requires what this node lacks: xgmi unexpected (GPU 3: 6/6)"
    assert actions.for_failure(reason) is Action.DRAIN
    assert "xgmi" in actions.HARDWARE_CAPABILITIES and "nvlink" in actions.HARDWARE_CAPABILITIES
