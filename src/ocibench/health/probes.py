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

import copy
import errno
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocibench import accelerators, capabilities, shapes
from ocibench.capabilities import ABSENT, PRESENT, UNEXPECTED
from ocibench.health.state import FAIL, PASS, UNKNOWN, HealthState
from ocibench.history import current
from ocibench.node import doctor, nvlink_fabric, preflight, rdma
from ocibench.shapes.probe import Ran

#: Seconds one tool may take (nvidia-smi answers in well under a second with
#: persistence mode on; a GPU fallen off the bus hangs it in the driver).
TOOL_TIMEOUT_S = 2.0
#: The least time worth giving a tool: below it, a probe says the deadline passed.
MIN_TOOL_S = 0.2
#: A tool's time ends this long before the run's deadline: a probe whose tool was
#: killed then still says so (rather than being cut off by the deadline itself).
TOOL_MARGIN_S = 0.1

#: /dev/kmsg's record: "<prio>,<seq>,<usec since boot>,<flags>;<text>", then its
#: dictionary's lines, each starting with a space (Documentation/ABI/testing/dev-kmsg).
_KMSG = re.compile(r"^\d+,(\d{1,20}),(\d+),[^;]*;(.*)$")
#: This boot's id (random, new at every boot: proc(5)), under the probed root.
BOOT_ID = "proc/sys/kernel/random/boot_id"
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
    #: (boot id, sequence number): the kernel log's records of that boot up to that
    #: number were judged clean by an earlier run, or acknowledged by a person, and
    #: are not judged again (HealthState.kernel_seq_passed)
    kernel_since: tuple[str, int] = ("", -1)
    #: ``ocibench healthcheck --clear-kernel-log``: every record read now is acknowledged
    acknowledge_kernel_log: bool = False
    counters: dict[str, int] = field(default_factory=dict)
    #: (boot id, highest sequence number) the kernel log probe read, for the state file
    kernel_read: tuple[str, int] | None = None
    _listing: tuple[list[preflight.Gpu], Ran] | None = None

    def __post_init__(self) -> None:
        self.exp = preflight.expectations(self.shape)
        self.vendor = vendor_of(self.shape)

    def timeout(self) -> float:
        """A tool's time: its own limit, or what is left of the run's, if less (less a
        margin, so that the probe still reports the tool's own outcome in time)."""
        return max(0.0, min(self.tool_timeout,
                            self.deadline - TOOL_MARGIN_S - time.monotonic()))

    def fork(self) -> Context:
        """A copy for one probe to run on: what it leaves (counters, the kernel log's
        reading, the GPU listing) reaches this context only through :meth:`merge`, once
        it ended within the deadline; a probe abandoned past it changes nothing."""
        mine = copy.copy(self)
        mine.counters, mine.kernel_read = {}, None
        return mine

    def merge(self, done: Context) -> None:
        self.counters.update(done.counters)
        if done.kernel_read is not None:
            self.kernel_read = done.kernel_read
        if done._listing is not None:
            self._listing = done._listing

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


#: A probe: what it found on the node, one finding per item (an RDMA port each).
Probe = Callable[[Context], "list[Finding]"]


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


def kernel_records(lines: list[str]) -> list[tuple[int | None, str]]:
    """(sequence number, line) of each line of /dev/kmsg: a record's own, its
    dictionary lines (" KEY=value") the record's; a line of no record (a log that is
    not /dev/kmsg's) None."""
    found: list[tuple[int | None, str]] = []
    seq: int | None = None
    for line in lines:
        if k := _KMSG.match(line):
            seq = int(k.group(1))
        elif not line.startswith(" "):
            seq = None
        found.append((seq, line))
    return found


def kernel_scans(ctx: Context) -> list[accelerators.KernelLogScan]:
    """What the kernel-log probe looks for: the vendor row's GPU errors, then PCIe AER
    errors where the shape's node_doctor section lists them (ocibench.node.doctor)."""
    scans = [ctx.vendor.kernel_log] if ctx.vendor and ctx.vendor.kernel_log else []
    if doctor.declared(ctx.exp, "pcie_errors") is not None:
        scans.append(doctor.PCIE_ERRORS)
    if doctor.declared(ctx.exp, "hca_errors") is not None:
        scans.append(doctor.HCA_ERRORS)
    return scans


def kernel_items(ctx: Context) -> tuple[str, ...]:
    """The names of the kernel-log probe's findings (``xid``, ``pcie_errors``)."""
    return tuple(scan.name for scan in kernel_scans(ctx))


def probe_kernel_log(ctx: Context) -> list[Finding]:
    """The GPU driver's fatal errors in the kernel log (the vendor row's
    ``kernel_log``: NVIDIA's Xid 48, 79, 94, 95; amdgpu's uncorrectable hardware
    error): each takes the GPU out of service until it is reset or the node rebooted;
    and, where the shape lists them, PCIe AER errors (OCI's node doctor): one finding
    each, from one reading of the log.

    /dev/kmsg gives every record still in the ring buffer to each new reader, whatever
    ``dmesg --clear`` did, so a record is judged by its sequence number: only those
    newer than what an earlier run of this boot judged clean, or a person acknowledged
    (Context.kernel_since; ``--clear-kernel-log``).  A fatal error fails every run
    until it is acknowledged, or the node reboots (a new boot id starts over)."""
    scans = kernel_scans(ctx)
    assert scans                    # PROBES runs it only where the row has one
    path = ctx.root / "dev/kmsg"
    lines, why = read_kernel_log(path, ctx.deadline)
    if lines is None:
        return [Finding(scan.name, UNKNOWN, why) for scan in scans]
    records = kernel_records(lines)
    if not records:
        # a running kernel's log is never empty (its boot banner): a reader that gets
        # nothing (a container's /dev/kmsg, a namespace) has read no log
        return [Finding(scan.name, UNKNOWN, f"{path} gave no record [read {path}]")
                for scan in scans]
    boot = (preflight._read(ctx.root, BOOT_ID).text or "").strip()[:64]
    numbers = [seq for seq, _line in records if seq is not None]
    highest = max(numbers, default=-1)
    ctx.kernel_read = (boot, highest)
    since_boot, since = ctx.kernel_since
    excused = since if boot and since_boot == boot else -1
    if ctx.acknowledge_kernel_log:
        excused = highest
    judged = [line for seq, line in records if seq is None or seq > excused]
    note = ""
    if excused >= 0:
        note = f" (records up to {excused} judged before)"
        oldest = min(numbers, default=excused + 1)
        if oldest > excused + 1:
            note += (f"; records {excused + 1} to {oldest - 1} were overwritten before "
                     "they were read")
    elif not boot:
        note = f" (no boot id at {ctx.root / BOOT_ID}: every record judged)"
    return [_scanned(ctx, scan, records, excused, highest, boot, f"no {scan.looks_for} "
                     f"in {len(judged)} log lines{note} [read {path}]") for scan in scans]


def _scanned(ctx: Context, scan: accelerators.KernelLogScan,
             records: list[tuple[int | None, str]], excused: int, highest: int, boot: str,
             clean: str) -> Finding:
    """One scan's finding of the kernel log's records; ``clean``: its evidence when
    no record after ``excused`` holds what it looks for."""
    path = ctx.root / "dev/kmsg"
    seen: dict[tuple[str, str], str] = {}
    acknowledged: dict[tuple[str, str], str] = {}
    for seq, line in records:
        found = scan.read(line)
        if found is None:
            continue
        when = ""
        if k := _KMSG.match(line):
            when = f" at {int(k.group(2)) / 1e6:.0f} s after boot"
        bus, what = found
        into = seen if seq is None or seq > excused else acknowledged
        into.setdefault((what, bus), when)

    def listed(found: dict[tuple[str, str], str]) -> str:
        return "; ".join(f"{what} on {bus}{when}" for (what, bus), when in sorted(found.items()))

    if seen:
        fault = f" ({scan.fault})" if scan.fault else ""
        return Finding(scan.name, FAIL, f"{listed(seen)}{fault} [read {path}]")
    if ctx.acknowledge_kernel_log:
        shown = f" ({listed(acknowledged)} among them)" if acknowledged else ""
        return Finding(scan.name, PASS, f"{len(records)} log lines acknowledged{shown}, "
                       f"up to record {highest} of boot {boot or '(no boot id)'} "
                       f"[read {path}; --clear-kernel-log]")
    return Finding(scan.name, PASS, clean)


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


def link_of(ctx: Context) -> str | None:
    """The capability of the links between the shape's GPUs (accelerators: the row's
    ``device_link``); None where the shape names no vendor (no GPUs: nothing to link)."""
    return ctx.vendor.device_link if ctx.vendor else None


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


def spans_hosts(ctx: Context) -> bool:
    """Whether the shape's NVLink domain spans hosts (gpus.nvlink_domain: GB200 NVL72)."""
    return bool((ctx.shape.gpus or {}).get("nvlink_domain"))


def probe_nvlink_fabric(ctx: Context) -> list[Finding]:
    """The GPUs' registration in the rack's NVLink fabric (ocibench.node.nvlink_fabric)."""
    item = nvlink_fabric.probe_fabric(ctx.timeout())
    return [Finding(item.name, _state_of(item, absent=UNKNOWN), _evidence(item))]


def probe_imex(ctx: Context) -> list[Finding]:
    """The IMEX service and its domain (ocibench.node.nvlink_fabric)."""
    item = nvlink_fabric.probe_imex(ctx.timeout())
    return [Finding(item.name, _state_of(item, absent=UNKNOWN), _evidence(item))]


def has_c2c(ctx: Context) -> bool:
    """Whether the shape's GPUs reach their CPU over NVLink-C2C (gpus.c2c: Grace)."""
    return bool((ctx.shape.gpus or {}).get("c2c"))


def probe_c2c(ctx: Context) -> list[Finding]:
    """The GPUs' NVLink-C2C links to their Grace (ocibench.node.nvlink_fabric)."""
    item = nvlink_fabric.probe_c2c(ctx.timeout())
    return [Finding(item.name, _state_of(item, absent=UNKNOWN), _evidence(item))]


def _doctor(key: str) -> Probe:
    """The healthcheck's probe of one of OCI's node-doctor checks (ocibench.node.doctor,
    preflight's item judged here): not run where the GPU tool already gave no list."""
    check = dict(doctor.PROBES)[key]

    def probe(ctx: Context) -> list[Finding]:
        silent = ctx.gpu_tool_silent()
        if silent:
            return _named(doctor.NAMES[key], silent)
        item = check(ctx.root, ctx.exp, ctx.listing(), ctx.timeout())
        return [Finding(item.name, _state_of(item, absent=UNKNOWN), _evidence(item))]
    probe.__doc__ = check.__doc__
    return probe


def _node_doctor(key: str) -> Probe:
    """The healthcheck's probe of one of OCI's checks of the node (not its GPUs)."""
    check = dict(doctor.NODE_PROBES)[key]

    def probe(ctx: Context) -> list[Finding]:
        item = check(ctx.root, ctx.exp, ctx.timeout())
        return [Finding(item.name, _state_of(item, absent=UNKNOWN), _evidence(item))]
    probe.__doc__ = check.__doc__
    return probe


def _declares(key: str) -> Callable[[Context], bool]:
    """Whether the shape's node_doctor section lists the check ``key`` (on its GPUs)."""
    return lambda c: c.exp.gpu_count > 0 and doctor.declared(c.exp, key) is not None


def _snapshot(ctx: Context, name: str) -> current.Snapshot | Finding:
    """The node's snapshot beside the history (ocibench.history.current: what the
    sweep and ``ocibench history add`` published of it), or the unknown finding that
    says why there is none to trust.  The history itself is never opened: it may be
    800 MB on shared storage, and held by a writer."""
    path = ctx.history_db
    if path is None:
        return Finding(name, UNKNOWN, "no history named (--history names it)")
    try:
        return current.read(path, ctx.node)
    except current.NotPublished as err:
        return Finding(name, UNKNOWN, str(err))


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def probe_history(ctx: Context) -> list[Finding]:
    """This node's latest verdict on each figure in the results history (every sweep
    and ReFrame run is kept there: ocibench.history.store), as its snapshot says: a
    figure that failed there fails here.  No history, or none of this node, is
    unknown: nothing was measured."""
    snap = _snapshot(ctx, "history")
    if isinstance(snap, Finding):
        return [snap]
    if not snap.figures:
        return [Finding("history", UNKNOWN, f"no result of {ctx.node} [{snap.path}]")]
    held = [f for f in snap.failed if f.time > ctx.history_since]
    if held:
        shown = "; ".join(f.figure for f in held[:3])
        more = f"; and {len(held) - 3} more" if len(held) > 3 else ""
        return [Finding("history", FAIL, f"failed in its latest run: {shown}{more} "
                        f"[{snap.path}, session {held[0].session}]")]
    excused = (f"; {len(snap.failed)} failed before a person resumed the node "
               f"{_when(ctx.history_since)}, not held against it" if snap.failed else "")
    return [Finding("history", PASS, f"{snap.figures} figures, none failed in its latest "
                    f"runs (newest {_when(snap.newest)}){excused} [{snap.path}]")]


def probe_drift(ctx: Context) -> list[Finding]:
    """This node's figures drifting against its peers (ocibench.history.drift), as its
    snapshot says.  The sweep's action on drift is "rerun, then drain if it persists"
    (low in two separate sweeps); the healthcheck follows it: a drift that persists
    fails here, a first flag is unknown (the next sweep re-measures it), and so is a
    node none of whose figures drift could judge; what was measured before a person
    resumed the node is not held against it."""
    snap = _snapshot(ctx, "drift")
    if isinstance(snap, Finding):
        return [snap]
    held = [d for d in snap.drifting if d.time > ctx.history_since]
    persisting = [d for d in held if d.persists]
    if persisting:
        more = f"; and {len(persisting) - 1} more" if len(persisting) > 1 else ""
        return [Finding("drift", FAIL, f"{persisting[0].reason}{more} [{snap.path}]")]
    if held:
        more = f"; and {len(held) - 1} more" if len(held) > 1 else ""
        return [Finding("drift", UNKNOWN, f"{held[0].reason}{more}: flagged, not yet "
                        "persisting; the next sweep re-measures it (rerun, then drain if "
                        f"it persists) [{snap.path}]")]
    if snap.drifting:
        return [Finding("drift", UNKNOWN, f"{snap.drifting[0].reason}: measured before a "
                        f"person resumed the node {_when(ctx.history_since)}, not held "
                        f"against it; the next sweep re-measures it [{snap.path}]")]
    if not snap.drift_judged:
        return [Finding("drift", UNKNOWN, f"none of the {snap.drift_figures} figures of "
                        f"{ctx.node} has the {snap.drift_needed} sweeps drift needs to "
                        f"judge it [{snap.path}]")]
    short = snap.drift_figures - snap.drift_judged
    unjudged = f" ({short} without the sweeps drift needs, not judged)" if short > 0 else ""
    return [Finding("drift", PASS, f"no figure of {ctx.node} drifting: {snap.drift_judged} "
                    f"judged{unjudged} [{snap.path}]")]


def item_name(name: str, ctx: Context) -> str:
    """The name the findings of the PROBES entry ``name`` carry (a probe not run for
    the deadline is named so, and a drain for it stays until it passes): the vendor
    row's own for the items a row names."""
    row = ctx.vendor
    if name == "device_link":
        return link_of(ctx) or name
    if name == "kernel_log" and row and row.kernel_log:
        return row.kernel_log.name
    if name == "gpu_memory" and row and row.gpu_memory:
        return row.gpu_memory.name
    return name


#: (name, applies to the shape, probe), in the order they run: the GPU listing before
#: the other GPU probes, so that a hung GPU tool costs its timeout once (every later GPU
#: probe reads the listing's outcome and says unknown at once).
PROBES: tuple[tuple[str, Callable[[Context], bool], Probe], ...] = (
    # first, what the history's writers published: a file read each, no tool, so that
    # hung tools, which spend the run's deadline, never leave them unjudged
    ("history", lambda c: c.history_db is not None, probe_history),
    ("drift", lambda c: c.history_db is not None, probe_drift),
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
    # a rack-scale NVLink domain (GB200 NVL72): the fabric and IMEX, which MNNVL needs
    ("nvlink_fabric", spans_hosts, probe_nvlink_fabric),
    ("imex", spans_hosts, probe_imex),
    ("c2c", has_c2c, probe_c2c),
    # OCI's node-doctor checks the shape's node_doctor section lists (ocibench.node.doctor)
    *((doctor.NAMES[key], _declares(key), _doctor(key)) for key, _ in doctor.PROBES),
    *((doctor.NAMES[key], lambda c, key=key: doctor.declared(c.exp, key) is not None,
       _node_doctor(key)) for key, _ in doctor.NODE_PROBES),
)
