"""`ocibench preflight` on fake nodes, and once on this machine.

A fake node is data: a filesystem tree (sys/, proc/, dev/) under tmp_path, given as
--root, and the node's tools (nvidia-smi, ucx_info, ompi_info, gdrcopy_sanity) as
scripts that print what the real ones print, alone on PATH.  The healthy node is a
BM.GPU4.8 as OCI's tech tip "gpu-with-ubuntu" sets it up; each case breaks one thing
and expects the item that names it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import pytest

from ocibench import capabilities, cli, shapes
from ocibench.node import preflight
from rdma_fakes import FakePorts

SHAPE = "BM.GPU4.8"
#: BM.GPU4.8's PCI bus ids (seed 003 sec 3-1) and NUMA nodes (the shape file).
BUSES = ["0f", "15", "51", "54", "8d", "92", "d6", "da"]
NUMA = [3, 3, 1, 1, 7, 7, 5, 5]
MODEL = "NVIDIA A100-SXM4-40GB"

# The formats of the real tools' output: nvidia-smi's --query-gpu CSV and `nvlink
# --status` (an inactive link reads "<inactive>"); `ucx_info -b` prints UCX's config.h
# (the *_MODULES lines are what configure built: Debian's ucx-utils 1.13.1 prints
# uct_MODULES ":ib:rdmacm:cma"; a --with-cuda --with-gdrcopy --with-xpmem build adds
# cuda, xpmem and uct_cuda_MODULES ":gdrcopy"); `ucx_info -d` lists "#      Transport:"
# lines; ompi_info --parsable prints mca:<framework>:<component>:param:<name>:value:<v>.
UCX_B = """\
#define UCX_CONFIG_H
#define HAVE_IB                   1
#define uct_MODULES               "{uct}"
#define uct_cuda_MODULES          "{uct_cuda}"
#define uct_ib_MODULES            ""
"""
OMPI_ALL = """\
ompi:version:full:5.0.8
mca:mpi:base:param:mpi_built_with_cuda_support:value:{cuda}
mca:mpi:base:param:mpi_built_with_cuda_support:source:default
"""
OMPI_PML = """\
mca:pml:cm:version:"component:5.0.8"
mca:pml:ob1:version:"component:5.0.8"
mca:pml:ucx:version:"component:5.0.8"
mca:pml:base:param:pml:value:{pml}
mca:pml:ob1:param:pml_ob1_priority:value:20
mca:pml:cm:param:pml_cm_priority:value:10
mca:pml:ucx:param:pml_ucx_priority:value:51
mca:pml:ucx:param:pml_ucx_devices:value:any
"""


#: /proc/driver/nvidia/version of NVIDIA's proprietary kernel module (no dma-buf).
PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
               "01:15:15 UTC 2023\n")


class Node:
    """A fake node: root tree + tools; every field is what a healthy one has."""

    def __init__(self, base: Path) -> None:
        self.root = base / "root"
        self.path = ""  # PATH before the fixture replaced it
        self.bin = base / "bin"
        self.gpus = [(i, MODEL, f"00000000:{b.upper()}:00.0") for i, b in enumerate(BUSES)]
        self.links = {i: ["25.781 GB/s"] * 12 for i in range(8)}
        self.uct, self.uct_cuda = ":cuda:ib:rdmacm:cma:xpmem", ":gdrcopy"
        self.transports = "self tcp sysv posix cma xpmem cuda_copy cuda_ipc gdr_copy rc_mlx5 rc_verbs"
        self.ompi_cuda, self.pml = "true", ""
        self.sanity_rc: int | None = 0    # None: no gdrcopy_sanity on PATH
        self.tools = {"nvidia-smi", "ucx_info", "ompi_info", "ethtool"}
        self.files: dict[str, str] = {
            "dev/gdrdrv": "", "dev/xpmem": "",
            "proc/modules": "nvidia_peermem 16384 0 - Live 0x0\nnvidia 1 1 nvidia_peermem, Live 0x0\n",
            "proc/sys/kernel/yama/ptrace_scope": "1\n",   # Ubuntu's default
            # Ubuntu 22.04's kernel and the NVIDIA open kernel module (the first line
            # of its /proc/driver/nvidia/version): GPUDirect RDMA through dma-buf
            "proc/sys/kernel/osrelease": "5.15.0-1051-oracle\n",
            "proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for "
                                          "x86_64  570.124.06  Release Build  "
                                          "(dvs-builder@U16-I3-B03-4-3)  Wed Feb 26 2025\n",
            "proc/self/status": "Name:\tpython3\nCapEff:\t000001ffffffffff\n",  # root
            "proc/self/limits": "Limit  Soft Limit  Hard Limit  Units\n"
                                "Max locked memory         unlimited            unlimited            bytes\n",
        }
        # every RDMA port of the shape (its 16 NICs and the UCX port mlx5_4:1), with
        # ethtool on PATH printing their RX discards (tests/rdma_fakes.py)
        self.ports = FakePorts(shapes.load(SHAPE))
        for bus, node in zip(BUSES, NUMA):
            dev = f"sys/bus/pci/devices/0000:{bus}:00.0"
            # an idle GPU runs its link at 2.5 GT/s; the slot is Gen4 x16
            self.files.update({f"{dev}/numa_node": f"{node}\n",
                               f"{dev}/current_link_speed": "2.5 GT/s PCIe\n",
                               f"{dev}/max_link_speed": "16.0 GT/s PCIe\n",
                               f"{dev}/current_link_width": "16\n",
                               f"{dev}/max_link_width": "16\n"})

    def write(self) -> None:
        ports = self.ports.files()
        for rel, text in {**ports, **self.files}.items():
            path = self.root / rel
            if rel in ports and rel not in self.files and (path.is_symlink() or path.is_dir()):
                continue   # a case put a link or a directory in the port file's place
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.bin.mkdir(exist_ok=True)
        self.ports.write_ethtool(self.bin, script="ethtool" in self.tools)
        query = "".join(f"{i}, {name}, 8.0, {bus}\n" for i, name, bus in self.gpus)
        nvlink = "".join(f"GPU {g}: {MODEL} (UUID: GPU-{g})\n"
                         + "".join(f"\t Link {n}: {s}\n" for n, s in enumerate(links))
                         for g, links in self.links.items())
        scripts = {
            "nvidia-smi": f'case "$1" in\n nvlink) printf %s "{nvlink}";;\n'
                          f' *) printf %s "{query}";;\nesac',
            "ucx_info": f'case "$1" in\n -b) printf %s \'{UCX_B.format(uct=self.uct, uct_cuda=self.uct_cuda)}\';;\n'
                        f' -d) for t in {self.transports}; do printf "# Memory domain: %s\\n'
                        f'#      Transport: %s\\n" $t $t; done;;\nesac',
            "ompi_info": f'case "$*" in\n *--all*) printf %s \'{OMPI_ALL.format(cuda=self.ompi_cuda)}\';;\n'
                         f' *) printf %s \'{OMPI_PML.format(pml=self.pml)}\';;\nesac',
        }
        for tool in self.tools - {"ethtool"}:   # ethtool: the ports' own (above)
            _script(self.bin / tool, scripts[tool])
        if self.sanity_rc is not None:
            _script(self.bin / "gdrcopy_sanity",
                    f'echo "Test: basic ... OK"; exit {self.sanity_rc}')

    def run(self, shape: str = SHAPE) -> preflight.Preflight:
        self.write()
        return preflight.preflight(shapes.load(shape), self.root)


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Node:
    fake = Node(tmp_path)
    fake.path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(fake.bin))  # the node's tools, and nothing else
    return fake


def items(result: preflight.Preflight) -> dict[str, preflight.Item]:
    return {i.name: i for i in result.items}


# --------------------------------------------------------------------------- healthy


def test_healthy_node_has_everything_the_shape_requires(node: Node, capsys) -> None:
    node.write()
    code = cli.main(["preflight", "--shape", SHAPE, "--root", str(node.root)])
    out = capsys.readouterr().out
    assert code == 0, out
    found = items(node.run())
    assert {n: i.status for n, i in found.items() if i.status != "present"} == {}
    # cma and dmabuf are not declared by BM.GPU4.8: informational
    assert all(i.required for n, i in found.items() if n not in ("cma", "dmabuf")), found
    assert "NVIDIA open kernel module 570.124" in found["dmabuf"].detail
    assert "GPU 0: Gen1 x16 (max Gen4 x16)" in found["pcie"].detail
    assert "active/links GPU 0: 12/12" in found["nvlink"].detail
    assert "gdrcopy_sanity passed" in found["gdrdrv"].detail
    assert "with CAP_SYS_PTRACE" in found["cma"].detail
    assert found["openmpi pml"].detail.endswith("by priority: ucx")
    assert set(found) >= {"rdma mlx5_6:1", "rdma mlx5_4:1"}
    # every line names its evidence
    assert all(line.endswith("]") for line in out.splitlines()[1:])


# --------------------------------------------------------------------------- one broken thing

Break = Callable[[Node], None]


def _drop(rel: str) -> Break:
    return lambda n: n.files.pop(rel)


def _set(rel: str, text: str) -> Break:
    return lambda n: n.files.__setitem__(rel, text)


def _port(name: str, **fields) -> Break:
    """Set fields of one RDMA port (rdma_fakes.FakePort); a dict updates a GID table."""
    def breaks(n: Node) -> None:
        port = n.ports[name]
        for field, value in fields.items():
            if isinstance(value, dict):
                getattr(port, field).update(value)
            else:
                setattr(port, field, value)
    return breaks


GPU0 = "sys/bus/pci/devices/0000:0f:00.0"

BROKEN: dict[str, tuple[Break, str, str, str]] = {
    # case: (break, item, status, a piece of its detail)
    "no nvidia-smi": (lambda n: n.tools.discard("nvidia-smi"), "gpus", "absent",
                      "nvidia-smi not on PATH"),
    "a GPU fewer": (lambda n: n.gpus.pop(), "gpus", "unexpected", "7x"),
    "another GPU model": (lambda n: n.gpus.__setitem__(0, (0, "NVIDIA H100", "00000000:0F:00.0")),
                          "gpus", "unexpected", "NVIDIA H100"),
    "an inactive NVLink": (lambda n: n.links[3].__setitem__(5, "<inactive>"), "nvlink",
                           "unexpected", "GPU 3: 11/12"),
    "no NVLink": (lambda n: n.links.update({g: ["<inactive>"] * 12 for g in n.links}), "nvlink",
                  "absent", "no active NVLink"),
    "a Gen3 slot": (_set(f"{GPU0}/max_link_speed", "8.0 GT/s PCIe\n"), "pcie", "unexpected",
                    "max Gen3 x16"),
    "a x8 link": (_set(f"{GPU0}/current_link_width", "8\n"), "pcie", "unexpected", "Gen1 x8"),
    "a GPU on another NUMA node": (_set(f"{GPU0}/numa_node", "0\n"), "gpu_numa", "unexpected",
                                   "GPU 0: 0, GPU 1: 3"),
    "no gdrdrv": (_drop("dev/gdrdrv"), "gdrdrv", "absent", "no /dev/gdrdrv"),
    "gdrcopy sanity fails": (lambda n: setattr(n, "sanity_rc", 1), "gdrdrv", "unexpected",
                             "gdrcopy_sanity failed: exit 1"),
    "no xpmem": (_drop("dev/xpmem"), "xpmem", "absent", "no /dev/xpmem"),
    # GPUDirect RDMA neither way: no peermem, and the proprietary kernel module
    "no nvidia_peermem": (lambda n: (_set("proc/modules", "nvidia 1 0 - Live 0x0\n")(n),
                                     _set("proc/driver/nvidia/version", PROPRIETARY)(n)),
                          "nvidia_peermem", "absent", "not loaded"),
    "memlock limited": (_set("proc/self/limits", "Max locked memory  65536  65536  bytes\n"),
                        "memlock", "unexpected", "65536 bytes"),
    "an RDMA port down": (_port("mlx5_6:1", state="1: DOWN"),
                          "rdma mlx5_6:1", "unexpected", "1: DOWN"),
    "no such RDMA port": (_port("mlx5_4:1", state=None),
                          "rdma mlx5_4:1", "absent", "no port 1 of mlx5_4"),
    "a NIC gone": (_port("mlx5_13:1", present=False), "rdma mlx5_13:1", "absent",
                   "no RDMA device mlx5_13 (the shape's NIC at 0000:d1:00.1, GPU 7's)"),
    "a NIC at another PCI address": (_port("mlx5_2:1", pci="0000:4d:00.0"), "rdma mlx5_2:1",
                                     "unexpected", "mlx5_2 is the NIC at 0000:4d:00.0"),
    "a port at half its rate": (_port("mlx5_10:1", rate="50 Gb/sec (1X HDR)"),
                                "rdma mlx5_10:1", "unexpected",
                                "rate 50 Gb/s, the shape's 100 Gb/s"),
    # one reading: the count since the counters were reset, as OCI's node doctor judges
    "RX discards over OCI's 100": (_port("mlx5_1:1", discards=[0, 0, 0, 101, 0, 0, 0, 0]),
                                   "rdma mlx5_1:1", "unexpected",
                                   "101 since the counters were reset, over OCI's 100"),
    "the GID index not RoCE v2": (_port("mlx5_7:1", types={3: "IB/RoCE v1"}), "rdma mlx5_7:1",
                                  "unexpected", "GID index 3 is 'IB/RoCE v1', not 'RoCE v2'"),
    "UCX without gdrcopy": (lambda n: setattr(n, "uct_cuda", ""), "ucx built", "unexpected",
                            "lacks gdrcopy"),
    "no ucx_info": (lambda n: n.tools.discard("ucx_info"), "ucx built", "absent",
                    "ucx_info not on PATH"),
    "no gdr_copy transport": (lambda n: setattr(n, "transports", "self sysv cma xpmem cuda_copy rc_mlx5"),
                              "ucx transports", "unexpected", "lacks gdr_copy"),
    "Open MPI without CUDA": (lambda n: setattr(n, "ompi_cuda", "false"), "openmpi cuda",
                              "absent", "mpi_built_with_cuda_support false"),
    "UCX PML excluded": (lambda n: setattr(n, "pml", "^ucx"), "openmpi pml", "unexpected",
                         "by priority: ob1"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_broken_item_is_named_and_fails_the_node(node: Node, case: str, capsys) -> None:
    breaks, name, status, detail = BROKEN[case]
    breaks(node)
    found = items(node.run())
    assert found[name].status == status, found[name]
    assert detail in found[name].detail, found[name].detail
    assert found[name].missing
    code = cli.main(["preflight", "--shape", SHAPE, "--root", str(node.root)])
    err = capsys.readouterr().err
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and f"{name} ({status})" in err


# --------------------------------------------------------------------------- CMA and Yama


@pytest.mark.parametrize("scope, capeff, status", [
    (None, "0", "present"),                # no Yama: classic ptrace rules
    ("0\n", "0", "present"),
    ("1\n", "0000000000000000", "absent"),  # Ubuntu's default, a user without the cap
    ("1\n", "0000000000080000", "present"),  # bit 19 alone: CAP_SYS_PTRACE
    ("1\n", "0000000000040000", "absent"),   # bit 18 (CAP_SYS_BOOT) is not it
    ("3\n", "000001ffffffffff", "absent"),   # 3: no ptrace at all
])
def test_cma_follows_yama_and_cap_sys_ptrace(node: Node, scope, capeff, status) -> None:
    if scope is None:
        node.files.pop("proc/sys/kernel/yama/ptrace_scope")
    else:
        node.files["proc/sys/kernel/yama/ptrace_scope"] = scope
    node.files["proc/self/status"] = f"CapEff:\t{capeff}\n"
    assert items(node.run())["cma"].status == status


def test_peermem_seen_in_sys_module_too(node: Node) -> None:
    node.files["proc/modules"] = ""
    node.files["sys/module/nvidia_peermem/refcnt"] = "0\n"
    assert items(node.run())["nvidia_peermem"].status == "present"


def test_gdrdrv_without_sanity_on_path_is_present_and_says_so(node: Node) -> None:
    node.sanity_rc = None
    item = items(node.run())["gdrdrv"]
    assert item.status == "present" and "sanity not on PATH" in item.detail


# --------------------------------------------------------------------------- what the shape requires


def test_cpu_shape_requires_no_gpu_item_and_flags_a_gpu_as_unexpected(node: Node) -> None:
    found = items(node.run("BM.Optimized3.36"))
    assert found["gpus"].status == "unexpected" and not found["gpus"].required
    assert not any(found[n].required for n in ("nvlink", "pcie", "gpu_numa", "gdrdrv",
                                               "nvidia_peermem", "openmpi cuda"))
    assert found["xpmem"].required and found["memlock"].required
    assert "rdma mlx5_2:1" in found  # its MPI port (network.ucx_net_devices)


def test_cpu_shape_without_gpu_tools_says_not_required(node: Node, capsys) -> None:
    node.tools.discard("nvidia-smi")
    node.write()
    cli.main(["preflight", "--shape", "BM.Optimized3.36", "--root", str(node.root)])
    assert "gpus: absent (not required): nvidia-smi not on PATH" in capsys.readouterr().out


def test_cpu_shape_without_gpus_probes_no_vendors_stack(node: Node) -> None:
    """No vendor is assumed: on a CPU shape whose node lists no GPU, no vendor's links,
    peer memory, dma-buf or GPU-aware MPI is asked (NVLink, nvidia_peermem and
    "openmpi cuda" were, as if the node were NVIDIA's)."""
    node.gpus, node.links = [], {}
    found = items(node.run("BM.Optimized3.36"))
    assert found["gpus"].status == "absent" and not found["gpus"].required
    gpu_items = {"nvlink", "xgmi", "nvidia_peermem", "amd_peermem", "dmabuf",
                 "openmpi cuda", "openmpi rocm"}
    assert not gpu_items & set(found), sorted(found)


def test_cpu_shape_asks_every_vendors_gpu_tool(node: Node) -> None:
    """A GPU on a CPU shape's node is seen whoever made it: amd-smi is asked too, and the
    GPU items are then AMD's, for information."""
    node.tools.discard("nvidia-smi")
    node.write()
    static = Path(__file__).parent / "data" / "amd-smi" / "static.strix-halo.json"
    _script(node.bin / "amd-smi", f"[ \"$1\" = static ] && printf %s '{static.read_text()}' || exit 1")
    found = items(preflight.preflight(shapes.load("BM.Optimized3.36"), node.root))
    assert found["gpus"].status == "unexpected" and "Strix Halo" in found["gpus"].detail
    assert {"xgmi", "amd_peermem", "openmpi rocm"} <= set(found)
    assert not {"nvlink", "nvidia_peermem", "openmpi cuda"} & set(found)
    assert not any(found[n].required for n in ("gpus", "xgmi", "amd_peermem", "openmpi rocm"))


def test_local_requires_nothing(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", node.path)  # local is completed from this machine (lscpu)
    local = shapes.load("local")
    monkeypatch.setenv("PATH", str(node.bin))
    node.tools.clear()
    node.files.clear()
    node.sanity_rc = None
    node.root.mkdir()
    data = preflight.preflight(local, node.root).to_dict()
    assert data["ok"] and data["missing"] == []
    assert not any(i["required"] for i in data["items"])
    gpus = next(i for i in data["items"] if i["name"] == "gpus")
    assert gpus["status"] == "absent" and "nvidia-smi not on PATH" in gpus["detail"]


def test_the_shape_files_capabilities_are_what_is_required() -> None:
    data = shapes.load(SHAPE).data
    declared = {**data, "capabilities": {"xpmem": True, "nvlink": 18}}
    exp = preflight.expectations(shapes.Shape(SHAPE, declared, Path(SHAPE)))
    assert exp.requires("nvlink") and not exp.requires("gdrdrv")
    undeclared = {k: v for k, v in data.items() if k != "capabilities"}
    exp = preflight.expectations(shapes.Shape(SHAPE, undeclared, Path(SHAPE)))
    assert not any(exp.requires(name) for name in ("gdrdrv", "xpmem", "nvlink"))


def test_lacking_reads_the_capabilities_a_report_found_absent() -> None:
    report = {"items": [{"name": "gdrdrv", "status": "absent"},
                        {"name": "xpmem", "status": "present"},
                        {"name": "nvlink", "status": "unexpected"},
                        {"name": "memlock", "status": "absent"}]}
    assert capabilities.lacking(report) == {"gdrdrv", "nvlink"}


# --------------------------------------------------------------------------- usage and this machine


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    for args in (["--shape", "BM.Nope"], ["--root", str(tmp_path / "nowhere")]):
        done = subprocess.run([sys.executable, "-m", "ocibench.cli", "preflight", *args],
                              capture_output=True, text=True,
                              env={**os.environ, "OCIBENCH_SHAPE": "local"})
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_real_run_on_this_machine_as_local() -> None:
    done = subprocess.run([sys.executable, "-m", "ocibench.cli", "preflight", "--json"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OCIBENCH_SHAPE": "local"})
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    found = {i["name"]: i for i in data["items"]}
    assert data["shape"] == "local" and data["ok"]
    if not shutil.which("nvidia-smi"):
        assert found["gpus"]["status"] == "absent" and not found["gpus"]["required"]
        assert "nvidia-smi not on PATH" in found["gpus"]["detail"]
    assert found["cma"]["status"] in ("present", "absent")


# --------------------------------------------------------------------------- cannot read: unknown
# Issue 21 items 5, 8, 9: a probe that cannot read says unknown, with why, never present
# and never a traceback or a hang.  Each case breaks one input of one probe the way a
# node (or a hostile file) can; unknown is neither present nor missing: exit 3 where
# the item is required, and the line names it.

def _link_loop(rel: str) -> Break:
    def breaks(n: Node) -> None:
        n.files.pop(rel, None)
        path = n.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(path.name, path)   # a link to itself: ELOOP
    return breaks


def _directory(rel: str) -> Break:
    def breaks(n: Node) -> None:
        n.files.pop(rel, None)
        (n.root / rel).mkdir(parents=True)
    return breaks


def _huge(rel: str) -> Break:
    def breaks(n: Node) -> None:
        n.files.pop(rel, None)
        path = n.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:   # 100 MB, sparse: costs no disk
            handle.truncate(100 * 2**20)
    return breaks


def _tool(name: str, body: str) -> Break:
    """Replace one of the node's tools by a script (its input to the probe)."""
    def breaks(n: Node) -> None:
        n.tools.discard(name)
        n.bin.mkdir(exist_ok=True)
        _script(n.bin / name, body)
    return breaks


YAMA = "proc/sys/kernel/yama/ptrace_scope"
UNREADABLE: dict[str, tuple[Break, str, str]] = {
    # case: (break, item, a piece of its detail)
    "Yama a link loop": (_link_loop(YAMA), "cma", "Too many levels of symbolic links"),
    "Yama a directory": (_directory(YAMA), "cma", "not a regular file"),
    "Yama 100 MB": (_huge(YAMA), "cma", "larger than 65536 bytes"),
    "Yama garbage": (_set(YAMA, "banana\n"), "cma", "'banana', not 0 to 3"),
    "Yama 1, status unreadable": (_directory("proc/self/status"), "cma",
                                  "capabilities are unknown"),
    "gdrdrv a link loop": (_link_loop("dev/gdrdrv"), "gdrdrv", "Too many levels"),
    "modules unreadable": (lambda n: (_directory("proc/modules")(n),
                                      _set("proc/driver/nvidia/version", PROPRIETARY)(n)),
                           "nvidia_peermem", "not a regular file"),
    "limits a directory": (_directory("proc/self/limits"), "memlock", "not a regular file"),
    "link speed 1.2.3": (_set(f"{GPU0}/max_link_speed", "1.2.3 GT/s PCIe\n"), "pcie",
                         "no readable link speed"),
    "link width x16": (_set(f"{GPU0}/current_link_width", "x16\n"), "pcie",
                       "no readable link speed"),
    "link speed missing": (_drop(f"{GPU0}/max_link_speed"), "pcie", "max_link_speed missing"),
    "NUMA node garbage": (_set(f"{GPU0}/numa_node", "zero\n"), "gpu_numa", "'zero'"),
    "nvidia-smi other output": (_tool("nvidia-smi", 'echo "NVIDIA-SMI has failed because it '
                                      'could not communicate with the NVIDIA driver."'),
                                "gpus", "not the CSV asked for"),
    "nvidia-smi fails": (_tool("nvidia-smi", "echo 'driver gone' >&2; exit 9"), "gpus",
                         "exit 9: driver gone"),
    "ompi_info priority not a number": (
        _tool("ompi_info", "case \"$*\" in\n *--all*) printf %s '" + OMPI_ALL.format(cuda="true")
              + "';;\n *) printf %s '" + OMPI_PML.format(pml="").replace("value:51", "value:high")
              + "';;\nesac"),
        "openmpi pml", "pml_ucx_priority 'high'"),
    "ucx_info garbage": (_tool("ucx_info", "echo hello"), "ucx built", "no uct_MODULES line"),
    "port state garbage": (_set("sys/class/infiniband/mlx5_6/ports/1/state", "\x00\x01\n"),
                           "rdma mlx5_6:1", "port state reads"),
    "port rate a directory": (_directory("sys/class/infiniband/mlx5_8/ports/1/rate"),
                              "rdma mlx5_8:1", "rate not read"),
    "GID index a link loop": (_link_loop("sys/class/infiniband/mlx5_9/ports/1/gids/3"),
                              "rdma mlx5_9:1", "GID 3 not read"),
    "PCI address unreadable": (_directory("sys/class/infiniband/mlx5_11/device/uevent"),
                               "rdma mlx5_11:1", "PCI address of mlx5_11 not read"),
    "RX discards garbage": (_tool("ethtool", "echo '     rx_prio0_discards: many'"),
                            "rdma mlx5_0:1", "rx_prio0: 'many' is no count"),
}


@pytest.fixture
def cma_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shape files, BM.GPU4.8 declaring cma (as a site whose nodes allow it would):
    its preflight then requires what the Yama cases break."""
    copy = tmp_path / "shapes"
    shutil.copytree(shapes.SHAPES_DIR, copy)
    path = copy / f"{SHAPE}.yaml"
    path.write_text(path.read_text().replace("  nvidia_peermem: true\n",
                                             "  nvidia_peermem: true\n  cma: true\n", 1))
    monkeypatch.setenv(shapes.SHAPES_DIR_ENV, str(copy))


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_what_a_probe_cannot_read_is_unknown_and_exits_3(node: Node, case: str, capsys,
                                                         cma_required: None) -> None:
    breaks, name, detail = UNREADABLE[case]
    breaks(node)
    found = items(node.run())
    assert found[name].status == "unknown", found[name]
    assert detail in found[name].detail, found[name].detail
    assert not found[name].missing and found[name].undecided
    code = cli.main(["preflight", "--shape", SHAPE, "--root", str(node.root)])
    out, err = capsys.readouterr()
    assert f"{name}: unknown (required)" in out
    assert code == 3, err
    assert len(err.strip().splitlines()) == 1 and f"{name} unknown" in err
    assert "UNJUDGED" in err and "Traceback" not in err


def test_a_yama_file_nobody_may_read_is_unknown_for_that_user() -> None:
    """Mode 000 for a user that is not root: the probe, run as `nobody` (a child that
    drops root's uid with the modules already loaded), says unknown."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the probe as nobody")
    base = Path(tempfile.mkdtemp(prefix="ocibench-yama-"))
    try:
        base.chmod(0o755)   # nobody may reach the fake root
        fake = Node(base)
        fake.write()
        for directory in (fake.root, *[p for p in (fake.root / YAMA).parents
                                       if fake.root in p.parents]):
            directory.chmod(0o755)
        (fake.root / YAMA).chmod(0o000)
        exp = preflight.expectations(shapes.load(SHAPE))
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: nobody, then the probe, then its line on the pipe
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                line = preflight.probe_cma(fake.root, exp, ([], None)).line()
                os.write(writer, line.encode())
            finally:
                os._exit(0)
        os.close(writer)
        with os.fdopen(reader) as pipe:
            line = pipe.read()
        os.waitpid(pid, 0)
    finally:
        shutil.rmtree(base)
    assert line.startswith("cma: unknown"), line
    assert "Permission denied" in line


def test_a_hanging_nvidia_smi_is_unknown_in_bounded_time(node: Node,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrapper whose child keeps stdout open: killing the tool alone would still wait."""
    monkeypatch.setattr(preflight, "TIMEOUT_S", 2)
    _tool("nvidia-smi", "/bin/sleep 600 &\nwait")(node)
    started = time.monotonic()
    found = items(node.run())
    assert time.monotonic() - started < 20
    assert found["gpus"].status == "unknown" and "ran past 2 s" in found["gpus"].detail
    assert found["nvlink"].status == "unknown"   # not waited for a second time
    assert found["pcie"].status == found["gpu_numa"].status == "unknown"


def test_the_local_shape_loads_past_a_hanging_or_garbled_nvidia_smi(
        node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    from ocibench.shapes import probe
    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 2)
    monkeypatch.setenv("PATH", f"{node.bin}{os.pathsep}{node.path}")   # lscpu: the real one
    for body, why in (("/bin/sleep 600 &\nwait", "ran past 2 s"),
                      ("echo 'No devices were found, or so'", "not the CSV asked for")):
        _tool("nvidia-smi", body)(node)
        shapes.forget()   # another machine: what this process kept of the last is dropped
        started = time.monotonic()
        local = shapes.load("local")
        assert time.monotonic() - started < 20
        assert local.gpus is None
        assert len(local.unknown) == 1 and why in local.unknown[0], local.unknown


def test_a_tool_that_writes_without_end_is_stopped(node: Node) -> None:
    from ocibench.shapes import probe
    _tool("ucx_info", "exec /usr/bin/yes")(node)
    ran = probe.run_tool(["ucx_info", "-b"], timeout=60)
    assert "killed by SIGXFSZ (wrote more than it may)" in ran.why
    assert len(ran.out) <= probe.TOOL_OUTPUT_LIMIT


# --------------------------------------------------------------------------- dma-buf

DMABUF_CASES = {
    # case: (osrelease, /proc/driver/nvidia/version or None, boot config or None, status, detail)
    "open module, 5.15": ("5.15.0-1051-oracle\n", None, None, "present",
                          "NVIDIA open kernel module 570.124"),
    "open module, config says y": ("6.8.0-1013-oracle\n", None,
                                   "CONFIG_DMA_SHARED_BUFFER=y\n", "present",
                                   "CONFIG_DMA_SHARED_BUFFER=y"),
    "config without dma-buf": ("6.8.0-1013-oracle\n", None, "# CONFIG_DMA_SHARED_BUFFER is not set\n",
                               "absent", "without CONFIG_DMA_SHARED_BUFFER"),
    "proprietary module": ("6.8.0-1013-oracle\n", PROPRIETARY, None, "absent", "proprietary"),
    "old kernel": ("5.4.0-1100-oracle\n", None, None, "absent", "older than 5.12"),
    "no driver": ("6.8.0\n", "", None, "absent", "no NVIDIA driver"),
    "driver file garbage": ("6.8.0\n", "hello\n", None, "unknown", "not an NVRM version line"),
    "kernel release garbage": ("banana\n", None, None, "unknown", "'banana'"),
}


@pytest.mark.parametrize("case", list(DMABUF_CASES))
def test_dmabuf_reads_kernel_and_open_module(node: Node, case: str) -> None:
    release, version, config, status, detail = DMABUF_CASES[case]
    node.files["proc/sys/kernel/osrelease"] = release
    if version == "":
        node.files.pop("proc/driver/nvidia/version")
    elif version is not None:
        node.files["proc/driver/nvidia/version"] = version
    if config is not None:
        node.files[f"boot/config-{release.strip()}"] = config
    item = items(node.run())["dmabuf"]
    assert item.status == status, item
    assert detail in item.detail, item.detail


def test_gpudirect_one_way_or_the_other_on_a_shape_declaring_both(node: Node) -> None:
    """BM.GPU.H100.8 declares nvidia_peermem and dmabuf (OCI's image has both); a node
    with either has GPUDirect RDMA, a node with neither lacks it."""
    node.files["proc/modules"] = "nvidia 1 0 - Live 0x0\n"        # no peermem
    found = items(node.run("BM.GPU.H100.8"))
    assert found["dmabuf"].status == "present" and found["dmabuf"].required
    assert not found["nvidia_peermem"].required and not found["nvidia_peermem"].missing
    assert "dmabuf is present" in found["nvidia_peermem"].detail
    node.files["proc/driver/nvidia/version"] = PROPRIETARY        # and no dma-buf
    found = items(node.run("BM.GPU.H100.8"))
    assert found["dmabuf"].missing and found["nvidia_peermem"].missing


def test_a_missing_item_says_its_next_step_from_the_ladder(node: Node) -> None:
    """Each missing item carries its entry of the action ladder (ocibench.ladder) in the
    JSON report: step, fault code (OCI's for nvidia_peermem), fix and evidence."""
    node.files["proc/modules"] = "nvidia 1 0 - Live 0x0\n"        # no peermem
    node.files["proc/driver/nvidia/version"] = PROPRIETARY        # and no dma-buf
    data = node.run("BM.GPU.H100.8").to_dict()
    steps = {s["item"]: s for s in data["next"]}
    assert set(steps) == set(data["missing"]) and "nvidia_peermem" in steps
    peermem = steps["nvidia_peermem"]
    assert peermem["step"] == "fix-software" and peermem["fault"] == "HPCGPU-0008-0001"
    assert "modprobe nvidia_peermem" in peermem["fix"] and "lsmod" in peermem["evidence"]
