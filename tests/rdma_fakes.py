"""A node's RDMA ports as the kernel shows them, for the fake nodes of the preflight and
healthcheck tests (tests/test_preflight.py, tests/health_fakes.py, tests/test_amd_probe.py).

Every port of a shape (ocibench.node.rdma.ports_of: its ``network.rdma_nics``, then the
UCX ports not among them) gets the files an mlx5 port has under
``sys/class/infiniband/<dev>/``, in the formats the kernel writes them:

* ``ports/<n>/state`` "4: ACTIVE" and ``ports/<n>/rate`` "200 Gb/sec (4X HDR)"
  (drivers/infiniband/core/sysfs.c, state_show and rate_show: "%d%s Gb/sec (%dX%s)");
* ``ports/<n>/counters/link_downed``, a count (Documentation/ABI/stable/
  sysfs-class-infiniband);
* ``ports/<n>/gids/<i>`` and ``ports/<n>/gid_attrs/types/<i>``: the GID table of a RoCE
  port with one IPv4 address, as NVIDIA's MLNX_OFED documentation describes it ("RDMA
  over Converged Ethernet (RoCE)": the link-local GIDs first, then the IPv4-mapped
  address, each as "IB/RoCE v1" and "RoCE v2"; the sysfs ABI file names the two type
  strings).  The real table has 255 entries on a ConnectX port, the unused ones zero;
  here 16;
* ``device/uevent`` with the NIC's ``PCI_SLOT_NAME`` (the PCI device's uevent) and
  ``device/net/<interface>/``, the port's network interface (what ibdev2netdev reads).

``device/net/<interface>/mtu`` holds the interface's MTU; ``mlnx_qos -i <interface>``
is a script on the node's PATH printing its trust state and PFC priorities in the
layout of a published output (att/netarbiter nvmf/OUTPUTSAMPLE.setup-nic-lossless-
layer3.sh.md); where the shape gives ``node_doctor.rdma_settings``, a healthy port has
them.  ``mlxconfig -d <pci> query`` likewise prints each card's firmware parameters
(MAX_ACC_OUT_READ, ADVANCED_PCI_SETTINGS), as OCI's images set them.

``ethtool -S <interface>`` is a script on the node's PATH printing the interface's
counters as ethtool prints them ("NIC statistics:", then "     <name>: <value>"), with
mlx5's ``rx_prio<p>_discards`` (Documentation/networking/device_drivers/ethernet/
mellanox/mlx5/counters.rst).  It uses only the shell's builtins: the preflight tests
give the node's PATH alone.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ocibench import shapes
from ocibench.node import preflight

#: rate_show's text for each line rate of the shipped shapes.
RATE_TEXT = {50: "50 Gb/sec (1X HDR)", 100: "100 Gb/sec (4X EDR)",
             200: "200 Gb/sec (4X HDR)", 400: "400 Gb/sec (4X NDR)"}
GID_TABLE = 16
ROCE_V1, ROCE_V2 = "IB/RoCE v1", "RoCE v2"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

ETHTOOL = """\
#!/bin/sh
[ "$1" = -S ] || { echo "ethtool (fake): only -S" >&2; exit 64; }
f="${0%/*}/ethtool.d/$2"
[ -f "$f" ] || { echo "netlink error: no device matches name (offset 24)" >&2; exit 1; }
while IFS= read -r line; do printf '%s\\n' "$line"; done < "$f"
"""


MLNX_QOS = """\
#!/bin/sh
[ "$1" = -i ] || { echo "mlnx_qos (fake): only -i" >&2; exit 64; }
f="${0%/*}/mlnx_qos.d/$2"
[ -f "$f" ] || { echo "Netlink error: no such interface $2" >&2; exit 1; }
while IFS= read -r line; do printf '%s\\n' "$line"; done < "$f"
"""


WPA_CLI = """\
#!/bin/sh
[ "$1" = -i ] && [ "$3" = status ] || { echo "wpa_cli (fake): only -i IF status" >&2; exit 64; }
f="${0%/*}/wpa_cli.d/$2"
[ -f "$f" ] || { echo "Failed to connect to non-global ctrl_ifname: $2  error: No such file or directory"; exit 255; }
while IFS= read -r line; do printf '%s\\n' "$line"; done < "$f"
"""


def wpa_cli_status(state: str) -> str:
    """``wpa_cli -i <if> status`` of a wired 802.1X port, its state lines as OCI's
    tutorial shows them (oracle-japan/ocitutorials, tutorials/_hpc/tech-knowhow/
    howto-create-cnenabled-osimage.md: wpa_state, Supplicant PAE state, EAP state)."""
    done = state == "AUTHENTICATED"
    return (f"wpa_state={'COMPLETED' if done else 'ASSOCIATED'}\n"
            f"Supplicant PAE state={state}\nEAP state={'SUCCESS' if done else 'IDLE'}\n")


MLXCONFIG = """\
#!/bin/sh
[ "$1" = -d ] && [ "$3" = query ] || { echo "mlxconfig (fake): only -d PCI query" >&2; exit 64; }
f="${0%/*}/mlxconfig.d/$2"
[ -f "$f" ] || { echo "-E- Failed to open device: $2. No such file or directory" >&2; exit 1; }
while IFS= read -r line; do printf '%s\\n' "$line"; done < "$f"
"""


def mlxconfig_output(pci: str, firmware: dict[str, str]) -> str:
    """What ``mlxconfig -d <pci> query`` prints, in the layout of a published output
    (TerrenceMiao/blog, source/_posts/Configure-and-setup-Mellanox-network-adapter.md
    @625b3aef: "Device #1:", the device's lines, "Configurations:", a line per
    parameter)."""
    lines = ["", "Device #1:", "----------", "", "Device type:        ConnectX7",
             "Name:               MCX755106AS-HEA_Ax", f"Device:             {pci}", "",
             "Configurations:                                          Next Boot"]
    lines += [f"        {name:<44}{value}" for name, value in firmware.items()]
    return "\n".join(lines) + "\n"


def mlnx_qos_output(trust: str, pfc: list[int]) -> str:
    """What ``mlnx_qos -i`` prints, in the published output's layout (its dscp2prio and
    tc rows as published)."""
    lines = ["DCBX mode: OS controlled", f"Priority trust state: {trust}", "dscp2prio mapping:"]
    lines += [f"        prio:{p} dscp:" + "".join(f"{8 * p + 7 - k:02d}," for k in range(8))
              for p in range(8)]
    lines += ["Cable len: 7", "PFC configuration:",
              "        priority    " + "   ".join(str(p) for p in range(8)),
              "        enabled     " + "   ".join(str(v) for v in pfc) + "   "]
    for tc in range(8):
        lines += [f"tc: {tc} ratelimit: unlimited, tsa: vendor",
                  f"         priority:  {tc}"]
    return "\n".join(lines) + "\n"


def ipv4_gid(a: int, b: int, c: int, d: int) -> str:
    """The IPv4-mapped GID of a.b.c.d as sysfs prints it."""
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


@dataclass
class FakePort:
    """One port's values; every field is what a healthy port shows."""

    device: str
    port: int
    pci: str
    driver: str
    netdev: str
    state: str = "4: ACTIVE"
    rate: str = "200 Gb/sec (4X HDR)"
    link_downed: int | None = 0
    discards: list[int] = field(default_factory=lambda: [0] * 8)   # rx_prio0..7
    gids: dict[int, str] = field(default_factory=dict)
    types: dict[int, str] = field(default_factory=dict)
    present: bool = True       # False: the device is gone from the node
    mtu: int = 4220
    trust: str = "dscp"
    pfc: list[int] = field(default_factory=lambda: [0] * 8)
    pae: str = "AUTHENTICATED"     # the 802.1X supplicant's state (wpa_cli status)
    #: The card's firmware parameters (mlxconfig), as OCI's images set them.
    firmware: dict[str, str] = field(default_factory=lambda: {
        "MAX_ACC_OUT_READ": "128", "ADVANCED_PCI_SETTINGS": "True(1)"})


class FakePorts:
    """Every RDMA port of ``shape`` on one fake node."""

    def __init__(self, shape: shapes.Shape, host: int = 1) -> None:
        self.shape = shape
        self.ports: dict[str, FakePort] = {}
        exp = preflight.expectations(shape)
        for i, port in enumerate(exp.rdma_ports):
            pci = port.pci or f"0000:{0xe0 + i:02x}:00.0"
            bus, fn = int(pci[5:7], 16), int(pci[-1])
            driver = "ionic" if port.device.startswith("ionic_") else "mlx5_core"
            fake = FakePort(port.device, port.port, pci, driver, f"enp{bus}s0f{fn}np0")
            fake.rate = RATE_TEXT.get(int(port.gbps or 100), fake.rate)
            if port.settings:
                fake.mtu = port.settings.mtu or fake.mtu
                fake.trust = port.settings.trust or fake.trust
                fake.pfc = list(port.settings.pfc or fake.pfc)
            link_local = f"fe80:0000:0000:0000:0a00:{i:02x}ff:fe00:{host:04x}"
            ipv4 = ipv4_gid(192, 168, i, host)
            if driver == "ionic":
                # Assumption: Pollara speaks RoCE v2 only, so each address has one GID,
                # and OCI's NCCL_IB_GID_INDEX=1 for BM.GPU.MI355X.8 is its IPv4 one
                fake.gids = {0: link_local, 1: ipv4}
                fake.types = {0: ROCE_V2, 1: ROCE_V2}
            else:
                fake.gids = {0: link_local, 1: link_local, 2: ipv4, 3: ipv4}
                fake.types = {0: ROCE_V1, 1: ROCE_V2, 2: ROCE_V1, 3: ROCE_V2}
            fake.gids.update({k: ZERO_GID for k in range(len(fake.gids), GID_TABLE)})
            self.ports[port.name] = fake

    def __getitem__(self, name: str) -> FakePort:
        return self.ports[name]

    def files(self) -> dict[str, str]:
        """The sysfs files of every port present, relative to the node's root."""
        out: dict[str, str] = {}
        for p in self.ports.values():
            if not p.present:
                continue
            base = f"sys/class/infiniband/{p.device}"
            port = f"{base}/ports/{p.port}"
            out[f"{base}/device/uevent"] = (
                f"DRIVER={p.driver}\nPCI_CLASS=20000\nPCI_SLOT_NAME={p.pci}\n")
            out[f"{base}/device/net/{p.netdev}/operstate"] = "up\n"
            out[f"{base}/device/net/{p.netdev}/mtu"] = f"{p.mtu}\n"
            if p.state is not None:
                out[f"{port}/state"] = p.state + "\n"
            out[f"{port}/rate"] = p.rate + "\n"
            if p.link_downed is not None:
                out[f"{port}/counters/link_downed"] = f"{p.link_downed}\n"
            out.update({f"{port}/gids/{i}": g + "\n" for i, g in p.gids.items()})
            out.update({f"{port}/gid_attrs/types/{i}": t + "\n" for i, t in p.types.items()})
        return out

    def write_ethtool(self, bin_dir: Path, script: bool = True) -> None:
        """The ethtool, mlnx_qos, mlxconfig and wpa_cli scripts in ``bin_dir`` (ethtool's
        unless ``script`` is False: the test has its own there) and what each prints per
        interface or card."""
        mlx5 = [p for p in self.ports.values() if p.present and p.driver == "mlx5_core"]
        _tool(bin_dir, "ethtool", ETHTOOL if script else None,
              {p.netdev: _ethtool_statistics(p) for p in mlx5})
        _tool(bin_dir, "mlnx_qos", MLNX_QOS,
              {p.netdev: mlnx_qos_output(p.trust, p.pfc) for p in mlx5})
        _tool(bin_dir, "mlxconfig", MLXCONFIG,
              {p.pci: mlxconfig_output(p.pci, p.firmware) for p in mlx5})
        _tool(bin_dir, "wpa_cli", WPA_CLI,
              {p.netdev: wpa_cli_status(p.pae) for p in self.ports.values() if p.present})

    def write(self, root: Path, bin_dir: Path) -> None:
        """Replace the node's RDMA sysfs under ``root`` and its ethtool."""
        shutil.rmtree(root / "sys/class/infiniband", ignore_errors=True)
        for rel, text in self.files().items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.write_ethtool(bin_dir)


def _ethtool_statistics(p: FakePort) -> str:
    lines = ["NIC statistics:", "     rx_packets: 1048576", "     tx_packets: 1048576"]
    for prio, count in enumerate(p.discards):
        lines += [f"     rx_prio{prio}_bytes: 0", f"     rx_prio{prio}_packets: 0",
                  f"     rx_prio{prio}_discards: {count}"]
    return "\n".join(lines) + "\n"


def _tool(bin_dir: Path, name: str, script: str | None, outputs: dict[str, str]) -> None:
    """A fake tool: ``script`` as ``bin_dir/name`` (None: left as it is) and what it
    prints for each interface or card, one file each in ``bin_dir/name.d``, replacing
    those of before."""
    kept = bin_dir / f"{name}.d"
    kept.mkdir(parents=True, exist_ok=True)
    for old in kept.iterdir():
        old.unlink()
    for key, text in outputs.items():
        (kept / key).write_text(text)
    if script is not None:
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
