"""The healthcheck's probes: cheap, passive, each bounded in time; pass, fail or unknown.

Slurm kills a HealthCheckProgram that runs past 60 s (slurm.conf(5)), and LBNL NHC
keeps its checks to a few seconds for the same reason: the health check runs on every
node at once, between jobs.  So a probe only reads what the node already knows (sysfs,
the kernel log, a query of the GPU driver), never runs a benchmark, and every tool it
starts has a timeout taken from the run's deadline.

Three states, as OCI's node-problem detector for OKE puts it: a missing command, a
timeout or output that cannot be parsed is *unknown*, never *fail*; only a node found
broken fails, and only a failure drains.  Where the node preflight already reads an
item (GPUs, NVLink or xGMI, PCIe, RDMA ports: ocibench.node.preflight), the probe is that
item's reading, judged here: one implementation per concept.

Every path is under ``root`` (``/`` on a node, a fake tree in the tests), as for
preflight.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocibench import accelerators, capabilities, metrics, shapes
from ocibench.capabilities import ABSENT, PRESENT, UNEXPECTED
from ocibench.health.state import FAIL, PASS, UNKNOWN, HealthState
from ocibench.history import drift, store
from ocibench.node import preflight, rdma
from ocibench.shapes.probe import Ran

#: Seconds one tool may take (nvidia-smi answers in well under a second with
#: persistence mode on; a GPU fallen off the bus hangs it in the driver).
TOOL_TIMEOUT_S = 2.0
#: The least time worth giving a tool: below it, a probe says the deadline passed.
MIN_TOOL_S = 0.2

#: /dev/kmsg's record: "<prio>,<seq>,<usec since boot>,<flags>;<text>"
#: (Documentation/ABI/testing/dev-kmsg).
_KMSG = re.compile(r"^\d+,\d+,(\d+),[^;]*;(.*)$")
#: The kernel's ring buffer is at most a few MB (CONFIG_LOG_BUF_SHIFT, log_buf_len).
MAX_KERNEL_LOG = 32 * 2**20

@dataclass(frozen=True)
class Finding:
    name: str
    state: str          # PASS, FAIL or UNKNOWN
    evidence: str


@dataclass
class Context:
    """What every probe of one run reads: the node's root, its shape, the run's deadline,
    the previous run's state; and what they leave for the next run (``counters``)."""

    root: Path
    shape: shapes.Shape
    node: str
    deadline: float                   # time.monotonic() by which the probes are done
    tool_timeout: float = TOOL_TIMEOUT_S
    previous: HealthState | None = None
    history_db: Path | None = None
    #: Results measured up to then are not held against the node: a person resumed it
    #: after this healthcheck drained it for them (HealthState.history_since).
    history_since: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)
    _listing: tuple[list[preflight.Gpu], Ran] | None = None

    def __post_init__(self) -> None:
        self.exp = preflight.expectations(self.shape)
        self.vendor = vendor_of(self.shape)

    def timeout(self) -> float:
        """A tool's time: its own limit, or what is left of the run's, if less."""
        return max(0.0, min(self.tool_timeout, self.deadline - time.monotonic()))

    def listing(self) -> tuple[list[preflight.Gpu], Ran]:
        """The GPUs the vendor's tool lists, asked once per run."""
        if self._listing is None:
            self._listing = preflight.list_gpus(self.vendor, timeout=self.timeout())
        return self._listing

    def gpu_tool_silent(self) -> Finding | None:
        """Why the GPU tool gave no list (not installed, hung, failed), as an unknown
        finding for a probe that needs it; None when it answered."""
        _found, ran = self.listing()
        return None if not ran.why else Finding("", UNKNOWN, f"`{ran.command}`: {ran.why}")


def vendor_of(shape: shapes.Shape) -> accelerators.Accelerator | None:
    """The shape's row of the vendor table; None on a CPU shape."""
    return accelerators.of(shape.gpus)


def _state_of(item: preflight.Item, absent: str = FAIL) -> str:
    """A preflight item judged: present passes, not as the shape says fails; absent
    is ``absent`` (fail where the thing should be there, unknown where absence only
    means the tool did not answer)."""
    if item.status == PRESENT:
        return PASS
    if item.status == UNEXPECTED:
        return FAIL
    return absent if item.status == ABSENT else UNKNOWN


def _evidence(item: preflight.Item) -> str:
    return f"{item.detail} [{item.evidence}]"


def _named(name: str, finding: Finding) -> list[Finding]:
    return [Finding(name, finding.state, finding.evidence)]


# --------------------------------------------------------------------------- probes


def probe_gpus(ctx: Context) -> list[Finding]:
    """GPU count and model against the shape (preflight's gpus item)."""
    silent = ctx.gpu_tool_silent()
    if silent:
        return _named("gpu_count", silent)
    item = preflight.probe_gpus(ctx.root, ctx.exp, ctx.listing())
    return [Finding("gpu_count", _state_of(item), _evidence(item))]


def read_kernel_log(path: Path, deadline: float) -> tuple[list[str] | None, str]:
    """The kernel's log lines from ``path`` (/dev/kmsg: every record still in the ring
    buffer, read without blocking; a regular file in the tests), or None and why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, f"no {path}"
    except OSError as err:
        return None, f"cannot read {path}: {err.strerror}"
    chunks: list[bytes] = []
    size = 0
    try:
        device = stat.S_ISCHR(os.fstat(fd).st_mode)
        while size <= MAX_KERNEL_LOG and time.monotonic() < deadline:
            try:
                # /dev/kmsg gives one record per read (at most about 8 KB)
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break                       # the newest record was read
            except OSError as err:
                if err.errno == errno.EPIPE:
                    continue                # a record overwritten while reading: skip it
                return None, f"cannot read {path}: {err.strerror}"
            if not chunk:
                break
            chunks.append(chunk if not device or chunk.endswith(b"\n") else chunk + b"\n")
            size += len(chunk)
        else:
            why = (f"{path} holds more than {MAX_KERNEL_LOG} bytes" if size > MAX_KERNEL_LOG
                   else f"the run's deadline passed while reading {path}")
            return None, why
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace").splitlines(), ""


def probe_kernel_log(ctx: Context) -> list[Finding]:
    """The GPU driver's fatal errors in the kernel log since boot (the vendor row's
    ``kernel_log``: NVIDIA's Xid 48, 79, 94, 95; amdgpu's uncorrectable hardware
    error): each takes the GPU out of service until it is reset or the node rebooted
    (which clears the log)."""
    scan = ctx.vendor.kernel_log if ctx.vendor else None
    assert scan is not None         # PROBES runs it only where the row has one
    path = ctx.root / "dev/kmsg"
    lines, why = read_kernel_log(path, ctx.deadline)
    if lines is None:
        return [Finding(scan.name, UNKNOWN, why)]
    seen: dict[tuple[str, str], str] = {}
    for line in lines:
        found = scan.read(line)
        if found is None:
            continue
        when = ""
        if k := _KMSG.match(line):
            when = f" at {int(k.group(1)) / 1e6:.0f} s after boot"
        bus, what = found
        seen.setdefault((what, bus), when)
    if seen:
        listed = "; ".join(f"{what} on {bus}{when}"
                           for (what, bus), when in sorted(seen.items()))
        return [Finding(scan.name, FAIL, f"{listed} [read {path}]")]
    return [Finding(scan.name, PASS, f"no {scan.looks_for} in {len(lines)} log lines "
                    f"[read {path}]")]


def probe_gpu_memory(ctx: Context) -> list[Finding]:
    """The GPUs' memory errors as the vendor's driver keeps them (the vendor row's
    ``gpu_memory``: NVIDIA's row remapper, AMD's bad pages): a GPU the query says must
    be reset or replaced fails; one whose state it cannot read is unknown."""
    query = ctx.vendor.gpu_memory if ctx.vendor else None
    assert query is not None        # PROBES runs it only where the row has one
    silent = ctx.gpu_tool_silent()
    if silent:
        return _named(query.name, silent)
    ran = preflight.run(list(query.command), ctx.timeout())
    command = f"`{ran.command}`"
    if ran.why:
        return [Finding(query.name, UNKNOWN, f"{command}: {ran.why}")]
    try:
        gpus = query.parse(ran.out)
    except accelerators.ProbeFormatError as err:
        return [Finding(query.name, UNKNOWN, f"{command} {err}")]
    # the tool's GPU index, where it names GPUs by index, is the listing's
    bus = {g.index: g.bdf for g in ctx.listing()[0]}

    def named(gpu: int | str) -> str:
        return f"GPU {gpu} ({bus[gpu]})" if isinstance(gpu, int) and gpu in bus \
            else str(gpu)

    bad = [f"{named(g.gpu)}: {' and '.join(g.broken)}" for g in gpus if g.broken]
    if bad:
        return [Finding(query.name, FAIL, f"{'; '.join(bad)} [{command}]")]
    unread = [f"{named(g.gpu)}: {g.unread}" for g in gpus if g.unread]
    if unread or not gpus:
        shown = "; ".join(unread) or "no GPU listed"
        return [Finding(query.name, UNKNOWN, f"not read: {shown} [{command}]")]
    notes = "".join(f"; {named(g.gpu)}: {g.note}" for g in gpus if g.note)
    return [Finding(query.name, PASS, f"{len(gpus)} GPUs: {query.healthy}{notes} "
                    f"[{command}]")]


def probe_pcie(ctx: Context) -> list[Finding]:
    """Each GPU's PCIe link narrower than its maximum, or a slot of an older generation
    than the shape's (preflight's pcie item: the current *speed* of an idle GPU drops
    to save power, so the generation is judged by the link's maximum)."""
    silent = ctx.gpu_tool_silent()
    if silent:
        return _named("pcie", silent)
    item = preflight.probe_pcie(ctx.root, ctx.exp, ctx.listing())
    # absent: no GPU listed, which the gpus probe fails; the links themselves are unknown
    return [Finding("pcie", _state_of(item, absent=UNKNOWN), _evidence(item))]


def probe_device_link(ctx: Context) -> list[Finding]:
    """The links between the GPUs down (preflight's item of the vendor's
    ``device_link``, NVLink or xGMI: fewer active links than the shape's per GPU)."""
    name = link_of(ctx)
    silent = ctx.gpu_tool_silent()
    if silent:
        return _named(name, silent)
    item = preflight.probe_device_link(ctx.root, ctx.exp, ctx.listing(),
                                       timeout=ctx.timeout())
    return [Finding(item.name, _state_of(item), _evidence(item))]


def link_of(ctx: Context) -> str:
    """The capability of the links between the shape's GPUs (accelerators: the row's
    ``device_link``); NVIDIA's where the shape names no vendor, as preflight does."""
    return (ctx.vendor or accelerators.VENDORS["nvidia"]).device_link


def probe_rdma(ctx: Context) -> list[Finding]:
    """Each RDMA port of the shape, as ocibench.node.rdma reads it for preflight too: the
    NIC at its PCI address, ACTIVE, at the shape's rate, the RoCE GID the jobs use, and
    its counters against the previous run's: link_downed rising (the link went down in
    between: flapping) and RX discards added past OCI's threshold.  The counters read
    are kept for the next run (``ctx.counters``: the state file's ``link_downed``)."""
    before = dict(ctx.previous.link_downed) if ctx.previous else {}
    findings = []
    for reading in rdma.read_ports(ctx.root, ctx.exp.rdma_ports, since=before,
                                   timeout=ctx.timeout):
        ctx.counters.update(reading.counters)
        item = reading.item(required=True)
        findings.append(Finding(item.name, _state_of(item), _evidence(item)))
    return findings


def probe_fabric_manager(ctx: Context) -> list[Finding]:
    """The vendor's fabric manager on a board whose GPUs meet in switches (the row's
    ``fabric_manager_service``; NVIDIA's: not running, CUDA does not initialise on the
    node, NVIDIA Fabric Manager User Guide).  Asked of systemd, which says the unit's
    state on stdout (systemctl(1) is-active)."""
    service = ctx.vendor.fabric_manager_service
    ran = preflight.run(["systemctl", "is-active", service], ctx.timeout())
    said = (ran.out.strip().splitlines() or [""])[0]
    evidence = f"{service} {said or 'gave no state'} [`{ran.command}`]"
    if said == "active" and not ran.why:
        return [Finding("fabric_manager", PASS, evidence)]
    if said in ("inactive", "failed") and not ran.timed_out and not ran.missing:
        # an unknown unit is "inactive" too: on this shape, not installed is as broken
        return [Finding("fabric_manager", FAIL, evidence)]
    # not installed systemctl, a hang, "activating" (starting: asked again next run)
    return [Finding("fabric_manager", UNKNOWN, f"{evidence}: {ran.why or 'not a final state'}")]


def _figure(record: store.Record) -> str:
    size = f" {record.size} B" if record.size is not None else ""
    variant = f" {record.variant}" if record.variant else ""
    floor = f" (floor {record.floor:g})" if record.floor is not None else ""
    return (f"{record.check}{variant}{size} {record.figure} {record.value:g} "
            f"{record.unit}{floor}")


def probe_history(ctx: Context) -> list[Finding]:
    """This node's latest verdict on each figure in the results history (every sweep
    and ReFrame run is kept there: ocibench.history.store): a figure that failed there
    fails here.  No history, or none of this node, is unknown: nothing was measured."""
    path = ctx.history_db
    if path is None or not path.is_file():
        return [Finding("history", UNKNOWN, f"no history at {path} (no run recorded yet; "
                        "--history names it)")]
    try:
        with store.History(path, readonly=True) as history:
            records = history.latest(ctx.node)
    except store.HistoryError as err:
        return [Finding("history", UNKNOWN, str(err))]
    if not records:
        return [Finding("history", UNKNOWN, f"no result of {ctx.node} in {path}")]
    failed = [r for r in records if r.verdict == metrics.Verdict.FAIL.value]
    held = [r for r in failed if r.time > ctx.history_since]
    newest = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(max(r.time for r in records)))
    if held:
        shown = "; ".join(_figure(r) for r in held[:3])
        more = f"; and {len(held) - 3} more" if len(held) > 3 else ""
        return [Finding("history", FAIL, f"failed in its latest run: {shown}{more} "
                        f"[{path}, session {held[0].session}]")]
    excused = (f"; {len(failed)} failed before a person resumed the node "
               f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(ctx.history_since))}, "
               "not held against it" if failed else "")
    return [Finding("history", PASS, f"{len(records)} figures, none failed in its latest "
                    f"runs (newest {newest}){excused} [{path}]")]


def probe_drift(ctx: Context) -> list[Finding]:
    """This node's figures drifting below its own past (ocibench.history.drift: the
    median of its last sweeps below its baseline, and below the cluster's median).
    The sweep's action on drift is "rerun, then drain if it persists"; the healthcheck
    follows it: a drift the sweep flagged at the node's previous sweep too fails here,
    a first flag is unknown (the next sweep re-measures it)."""
    path = ctx.history_db
    if path is None or not path.is_file():
        return [Finding("drift", UNKNOWN, f"no history at {path}")]
    try:
        with store.History(path, readonly=True) as history:
            found = drift.drifting(history, ctx.node)
            events = history.events(ctx.node)
            measured = {r.key: r.time for r in history.latest(ctx.node)} if found else {}
    except store.HistoryError as err:
        return [Finding("drift", UNKNOWN, str(err))]
    if not found:
        return [Finding("drift", PASS, f"no figure of {ctx.node} drifting [{path}]")]
    persisting, first = [], []
    for d in found:
        latest = measured.get((d.check, d.variant, d.size, d.figure), 0.0)
        # what the sweep knew when it measured the newest value: its own flag of that
        # sweep comes after the value's time and does not count
        before = [e for e in events if e[0] < latest]
        if latest > ctx.history_since and drift.flagged_since(before, d.previous):
            persisting.append(d)
        else:
            first.append(d)
    if persisting:
        more = f"; and {len(persisting) - 1} more" if len(persisting) > 1 else ""
        return [Finding("drift", FAIL, f"{persisting[0].reason} (flagged at its previous "
                        f"sweep too){more} [{path}]")]
    more = f"; and {len(first) - 1} more" if len(first) > 1 else ""
    return [Finding("drift", UNKNOWN, f"{first[0].reason}{more}: flagged once; the next "
                    f"sweep re-measures it (rerun, then drain if it persists) [{path}]")]


def item_name(name: str, ctx: Context) -> str:
    """The name the findings of the PROBES entry ``name`` carry (a probe not run for
    the deadline is named so, and a drain for it stays until it passes): the vendor
    row's own for the items a row names."""
    row = ctx.vendor
    if name == "device_link":
        return link_of(ctx)
    if name == "kernel_log" and row and row.kernel_log:
        return row.kernel_log.name
    if name == "gpu_memory" and row and row.gpu_memory:
        return row.gpu_memory.name
    return name


#: (name, applies to the shape, probe), in the order they run: the GPU listing first,
#: so that a hung GPU tool costs its timeout once (every later GPU probe reads the
#: listing's outcome and says unknown at once).
PROBES: tuple[tuple[str, Callable[[Context], bool], Callable[[Context], list[Finding]]],
              ...] = (
    ("gpu_count", lambda c: c.exp.gpu_count > 0, probe_gpus),
    # the vendor row's items: a row without one leaves it out (accelerators)
    ("kernel_log", lambda c: c.exp.gpu_count > 0 and bool(c.vendor and c.vendor.kernel_log),
     probe_kernel_log),
    ("gpu_memory", lambda c: c.exp.gpu_count > 0 and bool(c.vendor and c.vendor.gpu_memory),
     probe_gpu_memory),
    ("pcie", lambda c: c.exp.gpu_count > 0, probe_pcie),
    ("device_link", lambda c: int(c.exp.capabilities.get(link_of(c)) or 0) > 0,
     probe_device_link),
    ("rdma", lambda c: bool(c.exp.rdma_devices), probe_rdma),
    # a shape declares it only for a vendor that has the service (ocibench.shapes.rules)
    ("fabric_manager", lambda c: capabilities.present(
        c.exp.capabilities.get("fabric_manager")) and bool(c.vendor), probe_fabric_manager),
    ("history", lambda c: c.history_db is not None, probe_history),
    ("drift", lambda c: c.history_db is not None, probe_drift),
)
