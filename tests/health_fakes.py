"""A GPU node as the healthcheck reads it, built in a directory: the tests' stand-in for
hardware this machine does not have (tests/test_healthcheck.py, and every node of the
loopback cluster in tests/test_healthcheck_cluster.py).

``<dir>/bin``: tests/data/healthcheck/nvidia-smi and the files it prints (the GPU list,
the row remapper's state, NVLink's status, MIG modes, the ECC counts of ``-q -d ECC``,
the driver's version); a file ``hang`` there makes it hang; and
tests/data/healthcheck/systemctl, which answers ``is-active`` from ``services/<unit>``.
``<dir>/root``: ``sys/bus/pci/devices/<bdf>/`` link speed and width of each GPU,
``sys/class/infiniband/<dev>/`` of each of the shape's RDMA ports (tests/rdma_fakes.py:
state, rate, counters, GID table, PCI address, network interface; and ``<dir>/bin/
ethtool`` printing their RX discards), ``dev/kmsg``, the kernel log, and
``proc/sys/kernel/random/boot_id``, as the files the kernel shows.  Everything is
derived from the shape file, as on a node of that shape.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ocibench import shapes
from ocibench.node import preflight
from rdma_fakes import FakePorts

FAKE_SMI = Path(__file__).parent / "data" / "healthcheck" / "nvidia-smi"
FAKE_SYSTEMCTL = Path(__file__).parent / "data" / "healthcheck" / "systemctl"
FAKE_LSPCI = Path(__file__).parent / "data" / "healthcheck" / "lspci"
#: A GPU shape with NVLink, PCIe and RDMA ports declared (capabilities).
SHAPE = "BM.GPU4.8"
#: sysfs's spelling of a PCIe generation's rate.
GTS = {3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}


def bus_id(index: int) -> str:
    """nvidia-smi's bus id of GPU ``index``: 00000000:10:00.0, 00000000:20:00.0, ..."""
    return f"00000000:{0x10 * (index + 1):02X}:00.0"


class FakeNode:
    """One node's fake GPUs, links, ports and kernel log; each setter rewrites a file."""

    def __init__(self, where: Path, shape_name: str = SHAPE):
        self.where = where
        self.shape = shapes.load(shape_name)
        self.exp = preflight.expectations(self.shape)
        self.bin = where / "bin"
        self.root = where / "root"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copy(FAKE_SMI, self.bin / "nvidia-smi")
        shutil.copy(FAKE_SYSTEMCTL, self.bin / "systemctl")
        shutil.copy(FAKE_LSPCI, self.bin / "lspci")
        self.healthy()

    # ---------------------------------------------------------------- the whole node
    def healthy(self) -> FakeNode:
        self.gpus(self.exp.gpu_count)
        self.remap()
        self.nvlink()
        self.mig()
        self.ecc()
        self.driver()
        self.modules()
        self.clocks()
        self.frontend()
        self.lspci()
        self.pcie()
        self.ports = FakePorts(self.shape)
        self.ports.write(self.root, self.bin)
        self.kernel_log()
        self.boot()
        self.service("nvidia-fabricmanager", "active")
        self.hang(False)
        return self

    # ---------------------------------------------------------------- its parts
    def gpus(self, count: int, model: str | None = None) -> None:
        name = model or self.exp.gpu_model
        arch = str(self.shape.gpus["arch"])  # "90" -> nvidia-smi's compute_cap "9.0"
        cap = f"{arch[:-1]}.{arch[-1]}"
        (self.bin / "gpus.csv").write_text(
            "".join(f"{i}, {name}, {cap}, {bus_id(i)}\n" for i in range(count)))

    def remap(self, pending: str = "No", failure: str = "No", gpu: int = 0) -> None:
        rows = []
        for i in range(self.exp.gpu_count):
            p, f = (pending, failure) if i == gpu else ("No", "No")
            rows.append(f"{bus_id(i)}, {p}, {f}\n")
        (self.bin / "remap.csv").write_text("".join(rows))

    def mig(self, enabled: tuple[int, ...] = (), pending: tuple[int, ...] = ()) -> None:
        """MIG modes (``--query-gpu=uuid,mig.mode.current,mig.mode.pending``): off, but
        on GPUs ``enabled`` now and on ``pending`` after their next reset."""
        def mode(on: bool) -> str:
            return "Enabled" if on else "Disabled"
        (self.bin / "mig.csv").write_text("".join(
            f"GPU-{i:08d}-0000-0000-0000-000000000000, {mode(i in enabled)}, "
            f"{mode(i in pending or i in enabled)}\n" for i in range(self.exp.gpu_count)))

    def ecc(self, uncorrectable: dict[int, int | str] | None = None,
            correctable: dict[int, int | str] | None = None) -> None:
        """``nvidia-smi -q -d ECC`` (R535's layout, as tests/data/node_doctor's published
        ``-q`` prints it): every count 0 but the aggregate SRAM ones given per GPU (the
        uncorrectable one as its Parity part)."""
        out = ["", "==============NVSMI LOG==============", "",
               "Driver Version                            : 550.90.12", "",
               f"Attached GPUs                             : {self.exp.gpu_count}"]
        for i in range(self.exp.gpu_count):
            u = (uncorrectable or {}).get(i, 0)
            c = (correctable or {}).get(i, 0)
            out += [f"GPU {bus_id(i)}", "    ECC Mode",
                    "        Current                           : Enabled",
                    "        Pending                           : Enabled",
                    "    ECC Errors", "        Volatile"]
            out += [f"            {k:<30}: 0" for k in (
                "SRAM Correctable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED",
                "DRAM Correctable", "DRAM Uncorrectable")]
            out += ["        Aggregate",
                    f"            {'SRAM Correctable':<30}: {c}",
                    f"            {'SRAM Uncorrectable Parity':<30}: {u}",
                    f"            {'SRAM Uncorrectable SEC-DED':<30}: 0",
                    f"            {'DRAM Correctable':<30}: 0",
                    f"            {'DRAM Uncorrectable':<30}: 0",
                    f"            {'SRAM Threshold Exceeded':<30}: No"]
        (self.bin / "ecc.txt").write_text("\n".join(out) + "\n")

    def modules(self, swap: tuple[int, int] | None = None) -> None:
        """``nvidia-smi -q``'s GPU sections with their Module Id (R580's layout, as
        tests/data/node_doctor/nvidia-smi-q.H200.r580.txt): each GPU at the shape's address in the
        shape's module (node_doctor.cdfp), or, without a map, GPU i in module i + 1; the
        modules of the GPUs ``swap`` names exchanged (two CDFP cables swapped)."""
        cdfp = (self.shape.data.get("node_doctor") or {}).get("cdfp") or {}
        # nvidia-smi's spelling of 0000:0f:00.0: 00000000:0F:00.0
        pairs = [(f"0000{pci[:4]}{pci[4:].upper()}", module)
                 for pci, module in (cdfp.get("modules") or {}).items()] or \
            [(bus_id(i), i + 1) for i in range(self.exp.gpu_count)]
        modules = [m for _, m in pairs]
        if swap:
            a, b = swap
            modules[a], modules[b] = modules[b], modules[a]
        (self.bin / "smi-q.txt").write_text("".join(
            f"GPU {pci}\n    Product Name : NVIDIA H100 80GB HBM3\n    Platform Info\n"
            f"        Module Id : {m}\n" for (pci, _), m in zip(pairs, modules)))

    def clocks(self, applications: dict[int, int | str] | None = None,
               current: int = 345) -> None:
        """``nvidia-smi -q -d CLOCK`` (the sections of tests/data/node_doctor's H200
        capture): every GPU idle (``current``), its applications clock 1980 MHz but the
        ones given per GPU ("N/A" too)."""
        out = []
        for i in range(self.exp.gpu_count):
            app = (applications or {}).get(i, 1980)
            app_shown = app if app == "N/A" else f"{app} MHz"
            out += [f"GPU {bus_id(i)}", "    Clocks",
                    f"        Graphics                          : {current} MHz",
                    "    Applications Clocks",
                    f"        Graphics                          : {app_shown}",
                    "        Memory                            : 3201 MHz",
                    "    Default Applications Clocks",
                    "        Graphics                          : 1980 MHz",
                    "    Max Clocks",
                    "        Graphics                          : 1980 MHz"]
        (self.bin / "clocks.txt").write_text("\n".join(out) + "\n")

    def frontend(self, name: str = "eth0", operstate: str | None = "up",
                 speed: str = "100000") -> None:
        """/sys/class/net: ``lo`` and the front-end interface ``name`` (as the kernel
        shows them: operstate, speed in Mb/s); no ``name`` where ``operstate`` is None."""
        net = self.root / "sys/class/net"
        shutil.rmtree(net, ignore_errors=True)
        for iface, state, mbs in (("lo", "unknown", None), (name, operstate, speed)):
            if state is None:
                continue
            (net / iface).mkdir(parents=True, exist_ok=True)
            (net / iface / "operstate").write_text(state + "\n")
            if mbs is not None:
                (net / iface / "speed").write_text(mbs + "\n")

    def lspci(self, text: str | None = None) -> None:
        """What ``lspci -D`` prints: ``text``, or each GPU (none missing)."""
        (self.bin / "lspci.txt").write_text(text if text is not None else "".join(
            f"{preflight._sysfs_bdf(bus_id(i))} 3D controller: NVIDIA Corporation "
            f"Device 2330 (rev a1)\n" for i in range(self.exp.gpu_count)))

    def driver(self, *versions: str) -> None:
        """``--query-gpu=driver_version``: one line per GPU (default 550.90.12, on the
        H100 shape's allowed list); as many versions as GPUs, or one for all."""
        given = list(versions) or ["550.90.12"]
        lines = given if len(given) > 1 else given * self.exp.gpu_count
        (self.bin / "driver.csv").write_text("".join(f"{v}\n" for v in lines))

    def nvlink(self, inactive: dict[int, int] | None = None) -> None:
        links = int(self.exp.capabilities.get("nvlink") or 0)
        out = []
        for i in range(self.exp.gpu_count):
            out.append(f"GPU {i}: {self.exp.gpu_model} (UUID: GPU-{i:08d})\n")
            down = (inactive or {}).get(i, 0)
            out += [f"\t Link {k}: {'<inactive>' if k < down else '25 GB/s'}\n"
                    for k in range(links)]
        (self.bin / "nvlink.txt").write_text("".join(out))

    def pcie(self, width: dict[int, int] | None = None) -> None:
        want = self.exp.capabilities.get("pcie") or {"gen": 4, "width": 16}
        for i in range(self.exp.gpu_count):
            bdf = preflight._sysfs_bdf(bus_id(i))
            base = self.root / "sys/bus/pci/devices" / bdf
            base.mkdir(parents=True, exist_ok=True)
            (base / "max_link_speed").write_text(GTS[want["gen"]] + "\n")
            (base / "current_link_speed").write_text(GTS[want["gen"]] + "\n")
            (base / "max_link_width").write_text(f"{want['width']}\n")
            (base / "current_link_width").write_text(f"{(width or {}).get(i, want['width'])}\n")

    def port(self, device: str, state: str = "4: ACTIVE", link_downed: int | None = 0,
             **more: object) -> None:
        """Set one port ("mlx5_6:1") as the kernel would show it (rdma_fakes.FakePort's
        fields: rate, discards, gids, types, present) and rewrite the node's ports."""
        fake = self.ports[device]
        fake.state, fake.link_downed = state, link_downed
        for name, value in more.items():
            assert hasattr(fake, name), name
            setattr(fake, name, value)
        self.ports.write(self.root, self.bin)

    def kernel_log(self, *lines: str) -> None:
        """/dev/kmsg's records: '<prio>,<seq>,<usec>,-;<text>'."""
        (self.root / "dev").mkdir(exist_ok=True)
        (self.root / "dev" / "kmsg").write_text(
            "6,1,1000000,-;Linux version 6.8.0\n"
            + "".join(f"4,{n + 2},{(n + 2) * 1000000},-;{text}\n"
                      for n, text in enumerate(lines)))

    def kernel_records(self, *records: tuple[int, str]) -> None:
        """/dev/kmsg holding exactly ``records`` (sequence number, text): what a fresh
        reader gets of a ring buffer whose older records were overwritten."""
        (self.root / "dev").mkdir(exist_ok=True)
        (self.root / "dev" / "kmsg").write_text(
            "".join(f"4,{seq},{seq * 1000000},-;{text}\n" for seq, text in records))

    def boot(self, boot_id: str = "4b1f2a3c-5d6e-4f70-8192-a3b4c5d6e7f8") -> None:
        """/proc/sys/kernel/random/boot_id: new at every boot."""
        path = self.root / "proc/sys/kernel/random/boot_id"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(boot_id + "\n")

    def service(self, unit: str, state: str | None) -> None:
        """What `systemctl is-active UNIT` says (None: a unit systemd does not know)."""
        services = self.bin / "services"
        services.mkdir(exist_ok=True)
        if state is None:
            (services / unit).unlink(missing_ok=True)
        else:
            (services / unit).write_text(state + "\n")

    def hang(self, on: bool = True) -> None:
        flag = self.bin / "hang"
        if on:
            flag.write_text("")
        else:
            flag.unlink(missing_ok=True)
