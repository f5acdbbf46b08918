"""The AMD row's probes: its readers of amd-smi.

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
from pathlib import Path

import pytest

from ocibench.accelerators import AMD, ProbedGpu, ProbeFormatError
from ocibench.shapes import probe

DATA = Path(__file__).parent / "data" / "amd-smi"
#: The scripts' cat, found before a test leaves only the node's tools on PATH.
CAT = shutil.which("cat")
STRIX = ProbedGpu(0, "Strix Halo [Radeon Graphics / Radeon 8050S Graphics / Radeon 8060S "
                  "Graphics]", "gfx1151", "0000:c4:00.0")


def text(name: str) -> str:
    return (DATA / name).read_text()


def _amd_smi(where: Path, static: str, topology: str = "[]") -> None:
    """amd-smi as a script printing the given outputs (test data: no AMD GPU here)."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "static.json").write_text(static)
    (where / "topology.json").write_text(topology)
    script = where / "amd-smi"
    script.write_text(f'#!/bin/sh\ncase "$1" in\n static) exec {CAT} "{where}/static.json";;\n'
                      f' topology) exec {CAT} "{where}/topology.json";;\nesac\nexit 2\n')
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
