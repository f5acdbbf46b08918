"""Each RDMA port of a shape, read from sysfs and ethtool and judged against the shape.

One implementation for ``ocibench preflight`` (one reading: is the port as the shape
says?) and ``ocibench healthcheck`` (a reading every few minutes, compared with the
last run's counters).  A port of the shape's cluster network (``network.rdma_nics``)
is checked for:

* **nic**: its RDMA device is there, at the PCI address the shape gives
  (``device/uevent``'s ``PCI_SLOT_NAME``).  The kernel names mlx5 devices in probe
  order: a NIC missing from the bus shifts the names of those after it, so a name
  alone can point at another NIC;
* **state**: ``ports/<n>/state`` is ``4: ACTIVE`` (include/rdma/ib_verbs.h's port
  states, printed by drivers/infiniband/core/sysfs.c ``state_show``);
* **rate**: ``ports/<n>/rate`` (``"200 Gb/sec (4X HDR)"``, ``rate_show``) at least the
  shape's ``network.port_gbps``: a port that trained at a lower speed passes traffic
  at a fraction of what the figures assume;
* **gid**: the shape's ``network.gid_index`` holds a RoCE v2 GID of an IPv4 address
  (``gids/<i>`` an IPv4-mapped ``0000:...:ffff:a.b.c.d``, ``gid_attrs/types/<i>``
  ``RoCE v2``: Documentation/ABI/stable/sysfs-class-infiniband), which is what NCCL's
  ``NCCL_IB_GID_INDEX`` and perftest's ``-x`` name; and no GID beyond OCI's indexes
  0-3 (OCI's node doctor fails a node with one, fault HPCGPU-0005-0001: a GID added
  in front moves the one the jobs name);
* **link_downed**: ``counters/link_downed`` (the times the link went down) rose since
  the last run: a flapping port.  One reading cannot tell a flap: preflight shows it;
* **rx_discards**: the sum of ``rx_prio<p>_discards`` that ``ethtool -S`` prints for
  the port's network interface (mlx5: "packets discarded by device due to lack of
  receive buffers", Documentation/networking/device_drivers/ethernet/mellanox/mlx5/
  counters.rst), against OCI's threshold of 100 (oci-dr-hpc-v2 test_limits.json
  ``rx_discards_check``, fault HPCGPU-0004-0001).  One reading judges the count since
  the counters were reset, as OCI's doctor does; the healthcheck judges what was added
  since its last run, so that discards long past do not hold a node drained until a
  reboot.  mlx5 ports only: other drivers name their counters otherwise.

* **mtu**, **qos**: where the shape's ``node_doctor.rdma_settings`` gives them, the
  settings OCI's images apply to every cluster-network port (oci-dr-hpc-v2
  internal/shapes/shapes.json "rdma-settings"): the interface's MTU
  (``/sys/class/net/<if>/mtu``, read through ``device/net/<if>/``), and, from
  ``mlnx_qos -i <if>`` (MLNX_OFED's QoS tool), the priority trust state and the
  priorities with PFC enabled.  A wrong one fails naming the setting, its value and the
  shape's.  mlx5 ports only: mlnx_qos is ConnectX's tool;
* **auth**: where the shape's ``node_doctor.rdma_auth`` lists it, the port's 802.1X
  authentication, which OCI's cluster network requires before it carries the port's
  traffic (oci-cn-auth runs a wpa_supplicant per interface): ``wpa_cli -i <if> status``
  says ``Supplicant PAE state=AUTHENTICATED`` (OCI's auth_check, HPCGPU-0008-0001);
* **mlxconfig**: where the settings name firmware parameters (``MAX_ACC_OUT_READ``,
  ``ADVANCED_PCI_SETTINGS``: OCI's max_acc_check, fault HPCGPU-0017-0001), each card's
  values (``mlxconfig -d <pci> query``, on the port at function 0 of its PCI address)
  against those the shape allows.  One reading only (preflight): a firmware setting
  changes only with a firmware reset, and mlxconfig takes seconds per card, which the
  healthcheck's deadline has not to spare.

Other ports the shape names (``network.ucx_net_devices``: the VCN NIC that carries
MPI's bootstrap) are checked for nic, state and link_downed only.

Each check is *present* (held), *unexpected* (not as the shape says), *absent* (the
device or port is not there) or *unknown* (a file that cannot be read, a value that is
not the kernel's, a tool that did not answer): unknown never passes a port and never
fails one.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ocibench.capabilities import ABSENT, PRESENT, UNEXPECTED, UNKNOWN
from ocibench.node.preflight import Expectations, Item, Read, _read, _shown, _strerror, run
from ocibench.shapes.probe import Ran

#: OCI's RX-discard threshold: more than this fails (ai2-compute-gpu/oci-dr-hpc-v2,
#: internal/test_limits/test_limits.json@1b62d6d3716307c8631ab3fe2962c78f280348e7
#: line 12, rx_discards_check "threshold": 100; internal/level1_tests/
#: rx_discards_check.go compares each ``rx_prio*_discards`` with ``>``).
RX_DISCARDS_THRESHOLD = 100
#: The GID indexes OCI's images give a RoCE port (the same file, line 7,
#: gid_index_check "threshold": [0, 1, 2, 3]): link-local v1 and v2, IPv4 v1 and v2.
OCI_GID_INDEXES = (0, 1, 2, 3)
#: Where the healthcheck keeps a port's RX discards for its next run (the state file's
#: ``link_downed`` mapping, beside the port's link-down count under its bare name,
#: ``mlx5_0:1``, as state files before this one kept it).
RX_DISCARDS_KEY = "{port} rx_discards"

#: The checks OCI's node doctor codes on their own (configs/recommendations.json:
#: gid_index_check, rx_discards_check, auth_check, max_acc_check), where the port's
#: other checks are its link_check's HPCGPU-0008-0001.  A reading whose first failing
#: check is one of them, its own code said, leads its detail with the check's name
#: ("gid: GIDs beyond ..."): the action ladder's finer entry (``rdma:gid``) is read
#: from it (ocibench.ladder.entry).
FAULTS = {"gid": "HPCGPU-0005-0001", "rx_discards": "HPCGPU-0004-0001",
          "auth": "HPCGPU-0008-0001", "mlxconfig": "HPCGPU-0017-0001"}
#: Of those, the checks one reading makes alone (preflight's), never the healthcheck.
ONE_READING_ONLY = ("mlxconfig",)

ROCE_V2 = "RoCE v2"
#: An IPv4-mapped IPv6 address as sysfs prints a GID ("%pI6": 8 groups of 4 digits).
_IPV4_GID = re.compile(r"0000:0000:0000:0000:0000:ffff:([0-9a-f]{4}):([0-9a-f]{4})")
_GID = re.compile(r"(?:[0-9a-f]{4}:){7}[0-9a-f]{4}")
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
#: show_gids leaves out this one too: a link-local GID with no interface id.
_EMPTY_LINK_LOCAL = "fe80:0000:0000:0000:0000:0000:0000:0000"
#: rate_show: "%d%s Gb/sec (%dX%s)" ("200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)").
_RATE = re.compile(r"([0-9]{1,5}(?:\.5)?) Gb/sec \([0-9]{1,2}X ?[A-Z0-9]*\)")
#: ethtool -S: "NIC statistics:" then "     <name>: <value>" per counter (ethtool.c
#: do_gstats); mlx5's per-priority discards are rx_prio0_discards .. rx_prio7_discards.
_PRIO_DISCARDS = re.compile(r"^\s*rx_prio([0-7])_discards:\s*(\S+)\s*$", re.MULTILINE)
#: A network interface name as the kernel allows it (IFNAMSIZ 16, no '/'); never an
#: option to ethtool.
_IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}")
#: Entries read from a sysfs directory at most (a GID table has 256 on mlx5).
_MAX_ENTRIES = 4096
#: Below this many seconds left, ethtool is not started: the run's deadline passed.
_LEAST_S = 0.05


@dataclass(frozen=True)
class Settings:
    """What OCI's images set on a cluster-network port (the shape's
    ``node_doctor.rdma_settings``); None: that setting is not judged."""

    mtu: int | None = None
    trust: str | None = None                # mlnx_qos's priority trust state: dscp
    pfc: tuple[int, ...] | None = None      # PFC enabled (1) or not, priorities 0-7
    #: Firmware parameters and the values allowed each, as mlxconfig prints them.
    mlxconfig: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> Settings | None:
        if not section:
            return None
        pfc = section.get("pfc")
        firmware = tuple((str(k), tuple(str(v) for v in vs))
                         for k, vs in (section.get("mlxconfig") or {}).items())
        return cls(mtu=section.get("mtu"), trust=section.get("trust"),
                   pfc=tuple(int(v) for v in pfc) if pfc is not None else None,
                   mlxconfig=firmware)

    @property
    def asks_qos(self) -> bool:
        return self.trust is not None or self.pfc is not None


@dataclass(frozen=True)
class Port:
    """One RDMA port as the shape says it (``network.rdma_nics``, or a UCX device)."""

    device: str
    port: int = 1
    gbps: float | None = None       # the rate it runs at; None: not judged
    gid_index: int | None = None    # the GID the jobs use; None: not judged
    pci: str | None = None          # "0000:0c:00.0"; None: not given
    gpu: int | None = None          # the GPU it serves
    cluster: bool = True            # a cluster-network port (every check), or not
    #: The shape's node_doctor.rdma_settings (mtu, trust, pfc); None: not judged.
    settings: Settings | None = None
    #: Whether the port's 802.1X authentication is judged (node_doctor.rdma_auth).
    auth: bool = False

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    def where(self) -> str:
        """"the shape's NIC at 0000:0c:00.0, GPU 0's": how an admin finds the card."""
        parts = [f"at {self.pci}"] if self.pci else []
        parts += [f"GPU {self.gpu}'s"] if self.gpu is not None else []
        return f"the shape's NIC {', '.join(parts)}" if parts else "the shape's NIC"


def ports_of(shape_data: dict[str, Any], ucx_devices: dict[str, str],
             gid_index: int) -> list[Port]:
    """The shape's RDMA ports: each of ``network.rdma_nics`` (in its order), then the
    ports of ``ucx_net_devices`` that are not among them ("mlx5_4:1"; "eth0" is no
    RDMA port)."""
    network = shape_data.get("network") or {}
    gbps = network.get("port_gbps")
    doctor = shape_data.get("node_doctor") or {}
    settings = Settings.of(doctor.get("rdma_settings"))
    ports = [Port(device=str(nic["device"]), port=int(nic.get("port", 1)),
                  gbps=float(gbps) if gbps else None, gid_index=gid_index,
                  pci=nic.get("pci"), gpu=nic.get("gpu"), settings=settings,
                  auth=bool(doctor.get("rdma_auth")))
             for nic in network.get("rdma_nics") or []]
    listed = {p.name for p in ports}
    for device in sorted(set(ucx_devices.values())):
        m = re.fullmatch(r"([\w-]+):(\d+)", str(device))
        if m and device not in listed:
            ports.append(Port(device=m.group(1), port=int(m.group(2)), cluster=False))
    return ports


@dataclass
class Check:
    name: str          # nic, state, rate, gid, link_downed, rx_discards, mtu, qos, auth
    status: str        # PRESENT, UNEXPECTED, ABSENT or UNKNOWN
    detail: str


@dataclass
class Reading:
    """What one port showed: each check, what was read, and the counters to keep."""

    port: Port
    root: Path = Path("/")
    checks: list[Check] = field(default_factory=list)
    read: list[str] = field(default_factory=list)      # files under the device's directory
    ran: list[str] = field(default_factory=list)       # commands
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """Absent (the device or port is not there), else unexpected where a check
        failed, else unknown where one could not tell, else present."""
        states = {c.status for c in self.checks}
        for status in (ABSENT, UNEXPECTED, UNKNOWN):
            if status in states:
                return status
        return PRESENT

    @property
    def detail(self) -> str:
        """The checks that did not hold first (what the drain reason keeps), then those
        that could not tell, then the others; each says what it read.  Led by the first
        failing check's name where OCI codes that check on its own (:data:`FAULTS`)."""
        rank = {ABSENT: 0, UNEXPECTED: 0, UNKNOWN: 1}
        ordered = sorted(self.checks, key=lambda c: rank.get(c.status, 2))
        said = "; ".join(c.detail for c in ordered)
        first = ordered[0] if ordered else None
        if first and rank.get(first.status) == 0 and FAULTS.get(first.name, "~") in first.detail:
            return f"{first.name}: {said}"
        return said

    @property
    def evidence(self) -> str:
        """"read /sys/class/infiniband/mlx5_0/{device/uevent, ports/1/state, ...},
        `ethtool -S rdma0`": what was read, once each."""
        base = self.root / "sys/class/infiniband" / self.port.device
        files = f"read {base}/{{{', '.join(dict.fromkeys(self.read))}}}" if self.read else ""
        return ", ".join(filter(None, [files, *(f"`{c}`" for c in self.ran)]))

    def item(self, required: bool) -> Item:
        return Item(f"rdma {self.port.name}", self.status, self.detail, self.evidence,
                    required)


def read_ports(root: Path, ports: list[Port], since: dict[str, int] | None = None,
               timeout: Callable[[], float] | None = None) -> list[Reading]:
    """Read and judge every port (:func:`read_port`), their ``ethtool -S`` runs side by
    side: one at a time, 16 ports cost 16 process starts in a row, which the
    healthcheck pays on every run (scripts/bench-rdma-probe.py, docs/healthcheck.md)."""
    wanted = {p.name: _netdev(root, f"sys/class/infiniband/{p.device}") for p in ports
              if _counts_discards(p) and _is_dir(root, f"sys/class/infiniband/{p.device}")
              is True}
    names = {port: read.text for port, read in wanted.items() if read.text}
    qos = {p.name for p in ports if _asks_qos(p)}
    auth = {p.name for p in ports if p.auth and p.cluster}
    seconds = timeout() if timeout else None
    ran: dict[str, Ran] = {}
    shown: dict[str, Ran] = {}
    said: dict[str, Ran] = {}
    if names and (seconds is None or seconds > _LEAST_S):
        with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
            runs = {port: pool.submit(run, ["ethtool", "-S", name], seconds)
                    for port, name in names.items()}
            qos_runs = {port: pool.submit(run, ["mlnx_qos", "-i", name], seconds)
                        for port, name in names.items() if port in qos}
            auth_runs = {port: pool.submit(run, ["wpa_cli", "-i", name, "status"], seconds)
                         for port, name in names.items() if port in auth}
            ran = {port: future.result() for port, future in runs.items()}
            shown = {port: future.result() for port, future in qos_runs.items()}
            said = {port: future.result() for port, future in auth_runs.items()}
    return [read_port(root, p, since, timeout, ethtool=ran.get(p.name),
                      qos=shown.get(p.name), wpa=said.get(p.name)) for p in ports]


def read_port(root: Path, port: Port, since: dict[str, int] | None = None,
              timeout: Callable[[], float] | None = None,
              ethtool: Ran | None = None, qos: Ran | None = None,
              wpa: Ran | None = None) -> Reading:
    """Read and judge one port under ``root`` (``/`` on a node, a fake tree in tests).

    ``since``: None for one reading (preflight: link_downed is shown, RX discards are
    judged since the counters were reset); the last run's counters for the
    healthcheck (``{}`` on its first run): link_downed and RX discards are judged by
    what they added since.  ``timeout``: the seconds ethtool may take now (the
    healthcheck's deadline); default preflight's limit.  ``ethtool``: its run for this
    port's interface, where :func:`read_ports` ran it already; ``qos``: its
    ``mlnx_qos -i`` and ``wpa``, its ``wpa_cli -i <if> status``, likewise."""
    reading = Reading(port, root)
    base = f"sys/class/infiniband/{port.device}"
    if not _nic(root, port, base, reading):
        return reading
    active = _state(root, port, base, reading)
    if active is None:
        return reading
    if port.cluster and port.gbps and active:
        _rate(root, port, base, reading)
    if port.cluster and port.gid_index is not None:
        _gid(root, port, base, reading, whole_table=since is None)
    _link_downed(root, port, base, reading, since)
    if _counts_discards(port):
        _rx_discards(root, port, base, reading, since, timeout, ethtool)
    if port.cluster and port.settings and port.settings.mtu is not None:
        _mtu(root, port, base, reading)
    if _asks_qos(port):
        _qos(root, port, base, reading, timeout, qos)
    if port.cluster and port.auth:
        _auth(root, port, base, reading, timeout, wpa)
    if since is None and port.cluster and port.settings and port.settings.mlxconfig and \
            (port.pci or "").endswith(".0"):
        _mlxconfig(port, reading, timeout)
    return reading


def _asks_qos(port: Port) -> bool:
    """The trust state and PFC are judged on mlx5's cluster-network ports whose shape
    gives them: mlnx_qos is ConnectX's tool."""
    return _counts_discards(port) and bool(port.settings and port.settings.asks_qos)


def _counts_discards(port: Port) -> bool:
    """RX discards are judged on mlx5's cluster-network ports: OCI's threshold is for
    its rx_prio*_discards, which other drivers do not print."""
    return port.cluster and port.device.startswith("mlx5_")


# --------------------------------------------------------------------------- the checks


def _nic(root: Path, port: Port, base: str, reading: Reading) -> bool:
    """The device is there, at the shape's PCI address; False when it is not there."""
    uevent = f"{base}/device/uevent"
    reading.read.append("device/uevent")
    there = _is_dir(root, base)
    if there is not True:
        if isinstance(there, str):
            reading.checks.append(Check("nic", UNKNOWN, there))
            return False
        now = _named_at(root, port.pci) if port.pci else None
        moved = f"; the NIC at {port.pci} is {now} now (names shifted: a NIC missing " \
            "from the bus?)" if now else ""
        reading.checks.append(Check("nic", ABSENT, f"no RDMA device {port.device} "
                                    f"({port.where()}){moved}"))
        return False
    if not port.pci:
        return True
    read = _read(root, uevent)
    slot = _uevent_value(read, "PCI_SLOT_NAME")
    if slot is None:
        reading.checks.append(Check("nic", UNKNOWN, f"PCI address of {port.device} not "
                                    f"read: {_shown(read)}"))
    elif slot.lower() != port.pci:
        now = _named_at(root, port.pci)
        there_now = f"; the shape's is {now} now" if now else \
            "; no RDMA device is at the shape's address"
        reading.checks.append(Check("nic", UNEXPECTED, f"{port.device} is the NIC at "
                                    f"{slot}, the shape's is at {port.pci}{there_now} "
                                    "(names shifted: a NIC missing from the bus?)"))
    else:
        gpu = f", GPU {port.gpu}'s" if port.gpu is not None else ""
        reading.checks.append(Check("nic", PRESENT, f"at {slot}{gpu}"))
    return True


def _state(root: Path, port: Port, base: str, reading: Reading) -> bool | None:
    """Whether the port is ACTIVE; None when the port is not there at all."""
    rel = f"{base}/ports/{port.port}/state"
    reading.read.append(f"ports/{port.port}/state")
    read = _read(root, rel)
    if read.why:
        reading.checks.append(Check("state", UNKNOWN, read.why))
        return False
    if read.text is None:
        reading.checks.append(Check("state", ABSENT, f"no port {port.port} of {port.device}"))
        return None
    state = read.text.strip()
    # sysfs: "4: ACTIVE" (ib_verbs's port states, include/rdma/ib_verbs.h)
    if not re.fullmatch(r"[0-9]: [A-Z_]+", state):
        reading.checks.append(Check("state", UNKNOWN, f"port state reads {state[:40]!r}"))
        return False
    if state != "4: ACTIVE":
        reading.checks.append(Check("state", UNEXPECTED, f"port state {state}"))
        return False
    reading.checks.append(Check("state", PRESENT, state))
    return True


def _rate(root: Path, port: Port, base: str, reading: Reading) -> None:
    rel = f"{base}/ports/{port.port}/rate"
    reading.read.append(f"ports/{port.port}/rate")
    read = _read(root, rel)
    text = (read.text or "").strip()
    m = _RATE.fullmatch(text)
    if not m:
        reading.checks.append(Check("rate", UNKNOWN, f"rate not read: {_shown(read)}"))
        return
    gbps = float(m.group(1))
    want = port.gbps or 0.0
    if gbps < want:
        reading.checks.append(Check("rate", UNEXPECTED, f"rate {gbps:g} Gb/s, the shape's "
                                    f"{want:g} Gb/s ({text})"))
    else:
        reading.checks.append(Check("rate", PRESENT, f"{gbps:g} Gb/s"))


def _gid(root: Path, port: Port, base: str, reading: Reading, whole_table: bool) -> None:
    """The shape's GID index is a RoCE v2 IPv4 GID, and no GID lies beyond OCI's 0-3
    (``whole_table``: every entry is read, else up to the first empty one)."""
    index = port.gid_index
    gids = f"{base}/ports/{port.port}/gids"
    types = f"{base}/ports/{port.port}/gid_attrs/types"
    reading.read += [f"ports/{port.port}/gids/*", f"ports/{port.port}/gid_attrs/types/{index}"]
    gid = _read(root, f"{gids}/{index}")
    value = (gid.text or "").strip().lower()
    if gid.why or (gid.text is not None and not _GID.fullmatch(value)):
        reading.checks.append(Check("gid", UNKNOWN, f"GID {index} not read: {_shown(gid)}"))
        return
    problems: list[str] = []
    said = ""
    if gid.text is None:
        problems.append(f"no GID index {index} (the one NCCL_IB_GID_INDEX and perftest "
                        "-x use)")
    elif value == _ZERO_GID:
        problems.append(f"GID index {index} is empty (no IPv4 address on the port's "
                        "interface?)")
    else:
        kind = _read(root, f"{types}/{index}")
        if kind.why or kind.text is None:
            reading.checks.append(Check("gid", UNKNOWN, f"the type of GID {index} not "
                                        f"read: {_shown(kind)}"))
            return
        said = kind.text.strip()
        ipv4 = _IPV4_GID.fullmatch(value)
        if said != ROCE_V2:
            problems.append(f"GID index {index} is {said[:20]!r}, not {ROCE_V2!r}")
        elif not ipv4:
            problems.append(f"GID index {index} is RoCE v2 but no IPv4 address ({value})")
        else:
            a, b = ipv4.group(1), ipv4.group(2)
            said = (f"GID {index} {ROCE_V2} {int(a[:2], 16)}.{int(a[2:], 16)}."
                    f"{int(b[:2], 16)}.{int(b[2:], 16)}")
    extra = _gids_beyond(root, gids, whole_table)
    if isinstance(extra, str):
        if problems:
            reading.checks.append(Check("gid", UNEXPECTED, "; ".join(problems)))
        else:
            reading.checks.append(Check("gid", UNKNOWN, f"{said}; {extra}"))
        return
    if extra:
        shown = ", ".join(f"{i} ({v})" for i, v in extra[:3])
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        problems.append(f"GIDs beyond OCI's indexes 0-3: {shown}{more} (an address added "
                        f"to the interface; OCI's fault {FAULTS['gid']})")
    if problems:
        reading.checks.append(Check("gid", UNEXPECTED, "; ".join(problems)))
    else:
        reading.checks.append(Check("gid", PRESENT, said))


def _gids_beyond(root: Path, gids: str, whole_table: bool) -> list[tuple[int, str]] | str:
    """The GIDs set at indexes beyond OCI's 0-3 (show_gids leaves out the empty ones),
    or why the table could not be read.

    The kernel gives a new GID the first free index (drivers/infiniband/core/cache.c:
    find_gid returns the first free entry it passes, ``pempty``), so an address added
    to the interface lands at 4 first: the healthcheck reads up to the first empty entry
    (one file on a port as OCI sets it up), preflight the whole table (255 files on a
    ConnectX port; scripts/bench-rdma-probe.py times both), which also finds a GID
    behind a hole that an address removed later left."""
    try:
        with os.scandir(root / gids) as entries:
            names = [e.name for _, e in zip(range(_MAX_ENTRIES + 1), entries)]
    except OSError as err:
        return f"GID table not read: cannot list {root / gids}: {_strerror(err)}"
    if len(names) > _MAX_ENTRIES:
        return f"GID table not read: {root / gids} holds more than {_MAX_ENTRIES} entries"
    found = []
    for index in sorted(int(n) for n in names if n.isdigit() and len(n) <= 5):
        if index in OCI_GID_INDEXES:
            continue
        read = _read(root, f"{gids}/{index}")
        value = (read.text or "").strip().lower()
        if read.why or (read.text is not None and not _GID.fullmatch(value)):
            return f"GID {index} not read: {_shown(read)}"
        if value and value not in (_ZERO_GID, _EMPTY_LINK_LOCAL):
            found.append((index, value))
        elif not whole_table:
            break
    return found


def _link_downed(root: Path, port: Port, base: str, reading: Reading,
                 since: dict[str, int] | None) -> None:
    rel = f"{base}/ports/{port.port}/counters/link_downed"
    reading.read.append(f"ports/{port.port}/counters/link_downed")
    read = _read(root, rel)
    text = (read.text or "").strip()
    if not re.fullmatch(r"[0-9]{1,19}", text):
        shown = read.why or ("missing" if read.missing else f"reads {text[:40]!r}")
        # one reading judges nothing by it; the healthcheck cannot tell a flap
        status = PRESENT if since is None else UNKNOWN
        reading.checks.append(Check("link_downed", status, f"link_downed not read: {shown}"))
        return
    count = int(text)
    reading.counters[port.name] = count
    last = since.get(port.name) if since is not None else None
    if since is None:
        detail, status = f"link_downed {count}", PRESENT
    elif last is not None and count > last:
        detail, status = (f"link_downed rose from {last} to {count} since the last run "
                          "(the link went down in between: flapping)"), UNEXPECTED
    elif last is None:
        detail, status = f"link_downed {count} (first reading)", PRESENT
    else:
        # fell: the counters were reset (driver reload, reboot); the new value counts
        detail, status = f"link_downed {count} (was {last})", PRESENT
    reading.checks.append(Check("link_downed", status, detail))


def _rx_discards(root: Path, port: Port, base: str, reading: Reading,
                 since: dict[str, int] | None, timeout: Callable[[], float] | None,
                 ran: Ran | None) -> None:
    netdev = _netdev(root, base)
    if netdev.why:
        reading.checks.append(Check("rx_discards", UNKNOWN, f"RX discards not read: "
                                    f"{netdev.why}"))
        return
    name = netdev.text or ""
    if ran is None:
        seconds = timeout() if timeout else None
        if seconds is not None and seconds <= _LEAST_S:
            reading.checks.append(Check("rx_discards", UNKNOWN, "RX discards not read: "
                                        "the run's deadline passed"))
            return
        ran = run(["ethtool", "-S", name], seconds)
    reading.ran.append(ran.command)
    if ran.why:
        reading.checks.append(Check("rx_discards", UNKNOWN, f"RX discards not read: "
                                    f"{ran.why}"))
        return
    counters = _PRIO_DISCARDS.findall(ran.out)
    if not counters or not all(re.fullmatch(r"[0-9]{1,19}", v) for _, v in counters):
        shown = next((f"{p}: {v[:20]!r}" for p, v in counters
                      if not re.fullmatch(r"[0-9]{1,19}", v)), None)
        why = f"rx_prio{shown} is no count" if shown else "no rx_prio*_discards counter"
        reading.checks.append(Check("rx_discards", UNKNOWN, f"RX discards not read: "
                                    f"ethtool -S {name} printed {why}"))
        return
    count = sum(int(v) for _, v in counters)
    key = RX_DISCARDS_KEY.format(port=port.name)
    reading.counters[key] = count
    limit = RX_DISCARDS_THRESHOLD
    what = f"rx_prio*_discards of {name}"
    if since is None:
        if count > limit:
            reading.checks.append(Check("rx_discards", UNEXPECTED, f"{what} {count} since "
                                        f"the counters were reset, over OCI's {limit} "
                                        f"({FAULTS['rx_discards']})"))
        else:
            reading.checks.append(Check("rx_discards", PRESENT, f"{what} {count}"))
        return
    last = since.get(key)
    if last is None:
        if count > limit:
            reading.checks.append(Check("rx_discards", UNKNOWN, f"{what} {count} since the "
                                        f"counters were reset, over OCI's {limit}: whether "
                                        "they still rise, the next run tells (first "
                                        "reading)"))
        else:
            reading.checks.append(Check("rx_discards", PRESENT, f"{what} {count} (first "
                                        "reading)"))
        return
    # fell: the counters were reset since the last run, so all of them are new
    added = count - last if count >= last else count
    if added > limit:
        reading.checks.append(Check("rx_discards", UNEXPECTED, f"{what} rose by {added} "
                                    f"since the last run ({last} to {count}), over OCI's "
                                    f"{limit} ({FAULTS['rx_discards']})"))
    else:
        reading.checks.append(Check("rx_discards", PRESENT, f"{what} {count} (+{added})"))


def _mtu(root: Path, port: Port, base: str, reading: Reading) -> None:
    """The port's interface MTU against the shape's (OCI's images set 4220 on the
    cluster network, RoCE's 4096-byte MTU and its headers)."""
    want = port.settings.mtu if port.settings else None
    netdev = _netdev(root, base)
    if netdev.why:
        reading.checks.append(Check("mtu", UNKNOWN, f"MTU not read: {netdev.why}"))
        return
    rel = f"device/net/{netdev.text}/mtu"
    reading.read.append(rel)
    read = _read(root, f"{base}/{rel}")
    text = (read.text or "").strip()
    if not re.fullmatch(r"[0-9]{1,6}", text):
        reading.checks.append(Check("mtu", UNKNOWN, f"MTU of {netdev.text} not read: "
                                    f"{_shown(read)}"))
    elif int(text) != want:
        reading.checks.append(Check("mtu", UNEXPECTED, f"MTU {text} on {netdev.text}, the "
                                    f"shape's {want}"))
    else:
        reading.checks.append(Check("mtu", PRESENT, f"MTU {text}"))


#: mlnx_qos -i <if> (MLNX_OFED): "Priority trust state: dscp", and under "PFC
#: configuration:" the rows "priority    0   1 ...   7" and "enabled     0   0 ...".
_TRUST = re.compile(r"^Priority trust state: (\S+)\s*$", re.MULTILINE)
_PFC_ENABLED = re.compile(r"^\s*enabled\s+((?:[01]\s+){7}[01])\s*$", re.MULTILINE)


def _run_on_port(root: Path, base: str, reading: Reading, check: str, what: str,
                 timeout: Callable[[], float] | None, ran: Ran | None,
                 command: Callable[[str], list[str]]) -> tuple[str, Ran] | None:
    """The port's interface and a tool's run on it (``command(interface)``; ``ran``: a
    run made already), or None once the check ``check`` is recorded unknown with why
    ("<what> not read: ..."): no interface, the run's deadline passed, the tool failed."""
    netdev = _netdev(root, base)
    if netdev.why:
        reading.checks.append(Check(check, UNKNOWN, f"{what} not read: {netdev.why}"))
        return None
    if ran is None:
        seconds = timeout() if timeout else None
        if seconds is not None and seconds <= _LEAST_S:
            reading.checks.append(Check(check, UNKNOWN, f"{what} not read: the run's "
                                        "deadline passed"))
            return None
        ran = run(command(netdev.text or ""), seconds)
    reading.ran.append(ran.command)
    if ran.why:
        reading.checks.append(Check(check, UNKNOWN, f"{what} not read: {ran.why}"))
        return None
    return netdev.text or "", ran


def _qos(root: Path, port: Port, base: str, reading: Reading,
         timeout: Callable[[], float] | None, ran: Ran | None) -> None:
    """The trust state and the priorities with PFC enabled against the shape's."""
    want = port.settings or Settings()
    got = _run_on_port(root, base, reading, "qos", "QoS", timeout, ran,
                       lambda netdev: ["mlnx_qos", "-i", netdev])
    if got is None:
        return
    netdev, ran = got
    trust = _TRUST.search(ran.out)
    pfc = _PFC_ENABLED.search(ran.out)
    if (want.trust is not None and not trust) or (want.pfc is not None and not pfc):
        missing = "no 'Priority trust state' line" if want.trust is not None and not trust \
            else "no PFC 'enabled' row"
        reading.checks.append(Check("qos", UNKNOWN, f"QoS not read: mlnx_qos -i "
                                    f"{netdev} printed {missing}"))
        return
    wrong, said = [], []
    if want.trust is not None and trust:
        said.append(f"trust {trust.group(1)}")
        if trust.group(1) != want.trust:
            wrong.append(f"priority trust state {trust.group(1)}, the shape's {want.trust}")
    if want.pfc is not None and pfc:
        have = tuple(int(v) for v in pfc.group(1).split())
        on = ", ".join(str(p) for p, v in enumerate(have) if v) or "none"
        said.append(f"PFC on priorities {on}")
        if have != want.pfc:
            expected = ", ".join(str(p) for p, v in enumerate(want.pfc) if v) or "none"
            wrong.append(f"PFC enabled on priorities {on}, the shape's {expected}")
    if wrong:
        reading.checks.append(Check("qos", UNEXPECTED, f"{netdev}: {'; '.join(wrong)}"))
    else:
        reading.checks.append(Check("qos", PRESENT, ", ".join(said)))


#: wpa_cli status: "key=value" lines; the supplicant's 802.1X state machine's (IEEE
#: 802.1X-2004 8.4.6) "Supplicant PAE state=AUTHENTICATED" once the port is admitted.
_PAE = re.compile(r"^Supplicant PAE state=(\S+)\s*$", re.MULTILINE)


def _auth(root: Path, port: Port, base: str, reading: Reading,
          timeout: Callable[[], float] | None, ran: Ran | None) -> None:
    got = _run_on_port(root, base, reading, "auth", "authentication", timeout, ran,
                       lambda netdev: ["wpa_cli", "-i", netdev, "status"])
    if got is None:
        return
    netdev, ran = got
    m = _PAE.search(ran.out)
    if not m:
        first = next((line.strip() for line in ran.out.splitlines() if line.strip()),
                     "nothing")
        reading.checks.append(Check("auth", UNKNOWN, f"authentication not read: wpa_cli "
                                    f"printed {first[:60]!r}, no 'Supplicant PAE state'"))
    elif m.group(1) != "AUTHENTICATED":
        reading.checks.append(Check("auth", UNEXPECTED, f"{netdev} not authenticated "
                                    f"to the cluster network: Supplicant PAE state "
                                    f"{m.group(1)[:30]} (OCI's {FAULTS['auth']}: rerun; if "
                                    "it persists, restart oracle-cloud-agent)"))
    else:
        reading.checks.append(Check("auth", PRESENT, "802.1X AUTHENTICATED"))


#: mlxconfig's query: "Configurations:" (then its columns' titles), then a line per
#: parameter, "        MAX_ACC_OUT_READ                            128" ("*" before a
#: parameter changed from its default).
_MLXCONFIG_LINE = re.compile(r"^\s*\*?\s*([A-Z][A-Z0-9_]+)\s+(\S+)\s*$")


def _mlxconfig(port: Port, reading: Reading, timeout: Callable[[], float] | None) -> None:
    want = dict(port.settings.mlxconfig) if port.settings else {}
    seconds = timeout() if timeout else None
    ran = run(["mlxconfig", "-d", port.pci or "", "query", *want], seconds)
    reading.ran.append(ran.command)
    if ran.why:
        reading.checks.append(Check("mlxconfig", UNKNOWN, f"firmware settings not read: "
                                    f"{ran.why}"))
        return
    lines = ran.out.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Configurations:")),
                 None)
    found: dict[str, str] = {}
    for line in lines[start + 1:] if start is not None else []:
        if m := _MLXCONFIG_LINE.match(line):
            found.setdefault(m.group(1), m.group(2))
    missing = [name for name in want if name not in found]
    if missing:
        reading.checks.append(Check("mlxconfig", UNKNOWN, f"mlxconfig -d {port.pci} printed "
                                    f"no {', '.join(missing)}"))
        return
    wrong = [f"{name} {found[name]}, the shape's {' or '.join(allowed)}"
             for name, allowed in want.items() if found[name] not in allowed]
    if wrong:
        reading.checks.append(Check("mlxconfig", UNEXPECTED, f"card at {port.pci}: "
                                    f"{'; '.join(wrong)} (OCI's {FAULTS['mlxconfig']})"))
    else:
        reading.checks.append(Check("mlxconfig", PRESENT, ", ".join(
            f"{name} {found[name]}" for name in want)))


# --------------------------------------------------------------------------- helpers


def _is_dir(root: Path, rel: str) -> bool | str:
    try:
        return (root / rel).is_dir()
    except OSError as err:
        return f"cannot look at {root / rel}: {_strerror(err)}"


def _uevent_value(read: Read, key: str) -> str | None:
    m = re.search(rf"^{key}=(\S+)$", read.text or "", re.MULTILINE)
    return m.group(1) if m else None


def _named_at(root: Path, pci: str | None) -> str | None:
    """The RDMA device now at PCI address ``pci``: the one whose ``device/uevent``
    names it (how ``ibdev2netdev`` and rdma-core map them); None when none is."""
    if not pci:
        return None
    try:
        with os.scandir(root / "sys/class/infiniband") as entries:
            names = sorted(e.name for _, e in zip(range(_MAX_ENTRIES), entries))
    except OSError:
        return None
    for name in names:
        read = _read(root, f"sys/class/infiniband/{name}/device/uevent")
        slot = _uevent_value(read, "PCI_SLOT_NAME")
        if slot and slot.lower() == pci:
            return name
    return None


def _netdev(root: Path, base: str) -> Read:
    """The network interface of an RDMA device (``device/net/<name>``, as
    ``ibdev2netdev`` finds it): its name, or why not."""
    path = root / base / "device/net"
    try:
        with os.scandir(path) as entries:
            names = sorted(e.name for _, e in zip(range(17), entries))
    except FileNotFoundError:
        return Read(why=f"no network interface of the device ({path} missing)")
    except OSError as err:
        return Read(why=f"cannot list {path}: {_strerror(err)}")
    if len(names) != 1:
        return Read(why=f"{path} lists {len(names)} interfaces, not one")
    if not _IFNAME.fullmatch(names[0]):
        return Read(why=f"{path} lists {names[0][:20]!r}, not an interface name")
    return Read(text=names[0])


# --------------------------------------------------------------------------- preflight


def port_probe(port: Port) -> Callable[..., Item]:
    """Preflight's item of one port (ocibench.node.preflight.PROBES' signature)."""
    def probe(root: Path, exp: Expectations, gpus: Any) -> Item:
        return read_port(root, port).item(exp.binding)
    return probe
