"""The healthcheck's state file: what the last ``ocibench healthcheck`` on this node found.

One JSON file per node, replaced atomically by every run (a reader, such as the
Prometheus export, sees the previous run or this one, never half of one):

    {"node": "gpu-3", "time": 1790000000.0, "duration_s": 0.8, "interval_s": 300,
     "action": "none" | "drain" | "resume" | "would drain" | "would resume"
               | "would drain (budget spent)",
     "reason": "ocibench: ..." | "",
     "probes": [{"name": "gpu_count", "state": "pass" | "fail" | "unknown",
                 "evidence": "...", "time": 1790000000.0, "duration_s": 0.05}],
     "link_downed": {"mlx5_0:1": 3},
     "drained_reason": "ocibench: ..." | "", "drained_probes": ["gpu_count"],
     "history_since": 0.0,
     "kernel_boot_id": "0b5f...", "kernel_seq_passed": 358, "kernel_seq_read": 364,
     "slurm_error": "" | "sinfo ...: Slurm did not answer within 2.1 s (killed): ...",
     "offences": {"xid": 1}}

``link_downed`` keeps each RDMA port's link-down counter as last read, so that the
next run can tell a port that flapped in between (its counter rose) from one that
went down once, long ago.  ``drained_reason`` is the exact reason of the drain this
healthcheck wrote and Slurm still holds (``""``: none), with the probes that failed:
the record by which it resumes only its own drains (docs/healthcheck.md).  When a
person resumes such a drain, ``history_since`` becomes that time: the results history
measured before it is no longer held against the node (the person has seen it).

The kernel log (/dev/kmsg) keeps its records until the node reboots, whatever
``dmesg --clear`` does, so its probe judges only the records newer than
``kernel_seq_passed``, of the boot ``kernel_boot_id``
(/proc/sys/kernel/random/boot_id): the highest sequence number a run judged and found
clean, or that a person acknowledged (``ocibench healthcheck --clear-kernel-log``, or
resuming a drain of this healthcheck: up to ``kernel_seq_read``, the highest the run
before had read).  A record that fails keeps failing until then; a new boot starts over.

``offences`` counts, per probe, the drains of this healthcheck that ended (resumed by
it or by a person) while that probe had failed: a probe that fails again is a repeat
offender, and its step on the action ladder moves up once per offence (ocibench.ladder,
docs/ladder.md).

The file is the healthcheck's memory across runs, and the freshness its exporter
reports (last run, duration, expected interval), as OCI's node-problem detector
exports for each of its checks.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ocibench import atomic, hostnames, jsonfile, metrics, paths
from ocibench.node import module_audit, owned

#: A probe's three states (the project's verdicts, as a probe says them): it compared
#: and held; it found the node broken; it could not tell (a missing tool, a timeout,
#: output it does not understand).  Only FAIL ever drains.
PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
STATES = (PASS, FAIL, UNKNOWN)

#: What a run did to its node in Slurm (the "would" forms: ``--dry-run``; "would drain
#: (budget spent)": a failure it did not drain, ocibench's drain budget being spent,
#: ocibench.cluster.budget).
NONE, DRAIN, RESUME, WOULD_DRAIN, WOULD_RESUME = (
    "none", "drain", "resume", "would drain", "would resume")
BUDGET_SPENT = "would drain (budget spent)"
ACTIONS = (NONE, DRAIN, RESUME, WOULD_DRAIN, WOULD_RESUME, BUDGET_SPENT)

#: Where the state lives on a node that runs the healthcheck as root (slurmd does):
#: node-local, as NHC's /var/run/nhc, so that nodes sharing a filesystem never share it.
SYSTEM_PATH = Path("/var/lib/ocibench/healthcheck.json")

#: A state file is a few KB; anything far larger is not one.
MAX_BYTES = 1 << 20


class StateError(ValueError):
    """The state file cannot be read or written; one line naming the file."""


@dataclass(frozen=True)
class ProbeResult:
    name: str
    state: str          # PASS, FAIL or UNKNOWN
    evidence: str       # what was read or run, and what it said
    time: float         # epoch seconds the probe started
    duration_s: float


@dataclass(frozen=True)
class HealthState:
    node: str
    time: float                     # epoch seconds the run started
    duration_s: float
    interval_s: int | None          # Slurm's HealthCheckInterval, when known
    action: str                     # one of ACTIONS
    reason: str                     # the drain reason written (or that would be), or ""
    probes: tuple[ProbeResult, ...] = ()
    link_downed: dict[str, int] = field(default_factory=dict)
    drained_reason: str = ""
    drained_probes: tuple[str, ...] = ()
    history_since: float = 0.0
    kernel_boot_id: str = ""        # the boot the two sequence numbers are of
    kernel_seq_passed: int = -1     # records up to it judged clean or acknowledged
    kernel_seq_read: int = -1       # the highest record the run read
    #: why the run did not do in Slurm what it decided (Slurm did not answer within the
    #: run's deadline, refused, or knows no such node), one line; "" when it did
    slurm_error: str = ""
    #: probe -> drains of ours that ended after it failed (the ladder's repeat count)
    offences: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["probes"] = [asdict(p) for p in self.probes]
        data["drained_probes"] = list(self.drained_probes)
        return data


def default_path() -> Path:
    """$OCIBENCH_HEALTH_STATE, else :data:`SYSTEM_PATH` when root, else
    <cache>/healthcheck.json (ocibench.paths.cache_dir)."""
    if os.environ.get("OCIBENCH_HEALTH_STATE"):
        return Path(os.environ["OCIBENCH_HEALTH_STATE"])
    if os.geteuid() == 0:
        return SYSTEM_PATH
    return paths.cache_dir() / "healthcheck.json"


# --- Whose files these are ------------------------------------------------------------
# The healthcheck runs as root on every node, unattended: it reads, writes and locks
# only files that nobody but root (or the user running it) can change or hold.  The
# rule is the module audit's (ocibench.node.module_audit): the state's directory, and
# every directory on the way to it, owned by root or the caller and not writable by
# others; the files opened without following a link, created exclusively, their modes
# set on the descriptor; a file owned by anyone else is not this run's.

#: What the owners guard, in the module audit's line about an owner.
GUARDED = "the healthcheck's state"
#: Where root's locks live: a directory of root's that only root can open (0700), on
#: the runtime filesystem (emptied at boot).  $OCIBENCH_RUN_DIR moves it.
RUN_DIR = Path("/run/ocibench")
#: Seconds a run waits for another run of the node to let go of the lock.  The health
#: check and the prolog may start together; each ends within its deadline (3.5 s) and
#: its Slurm calls.  Past this the run gives up (one line, exit 3; the prolog lets the
#: job run), far within the 60 s after which Slurm kills the program.
LOCK_WAIT_S = 5.0


class LockBusy(StateError):
    """Another run holds the node's lock; the message names the lock (and its holder)."""


def run_dir() -> Path:
    """$OCIBENCH_RUN_DIR, else :data:`RUN_DIR`: root's lock directory."""
    return Path(os.environ.get("OCIBENCH_RUN_DIR") or RUN_DIR)


def lock_path(path: Path) -> Path:
    """The lock of the state file ``path``.  root: in :func:`run_dir`, named after the
    state file and a digest of its absolute path (one lock per state file: nodes that
    share a machine, as the loopback cluster's, keep theirs apart); anyone else:
    ``<file>.lock`` beside it, in their own directory."""
    path = Path(os.path.abspath(path))
    if os.geteuid() != 0:
        return path.with_name(path.name + ".lock")
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:12]
    return run_dir() / f"{path.name}.{digest}.lock"


def _refused(problems: list[str]) -> StateError:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return StateError(problems[0] + more)


def _directory(directory: Path, mode: int | None = None) -> None:
    """Refuse ``directory`` unless only root or the caller can change it (the module
    audit's rule); with ``mode``, make it the caller's with that mode where missing
    (module_audit.own_directory)."""
    if mode is None:
        problems = module_audit.audit_directory(directory, GUARDED)
    else:
        problems = module_audit.own_directory(directory, mode, GUARDED)
    if problems:
        raise _refused(problems)


def write(state: HealthState, path: Path) -> None:
    """Replace the state file atomically: a temporary file beside it, created exclusively
    (ocibench.atomic), synced, its mode set on its descriptor, renamed; only in a
    directory nobody else can change (made 0755 when missing)."""
    path = Path(path)
    text = json.dumps(state.to_dict(), indent=1, sort_keys=True) + "\n"
    try:
        _directory(path.parent, mode=None if path.parent.is_dir() else 0o755)
        # readable by the exporter, whoever runs it
        atomic.replace(path, text, mode=0o644)
    except StateError as err:
        raise StateError(f"cannot write {path}: {err}") from None
    except OSError as err:
        raise StateError(f"cannot write {path}: {err.strerror or err}") from None


@contextlib.contextmanager
def locked(path: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """One run at a time on a node: the health check and the prolog may start
    together, and each reads the state, probes, then writes it; without the lock the
    later writer would drop the drain the other recorded.  The lock is
    :func:`lock_path`, a file of the caller's, 0600, in a directory only root (or the
    caller) can change: nobody else can open it, so nobody else can hold it.  A lock
    another run holds is waited for ``wait_s`` seconds, then :class:`LockBusy`."""
    lock = lock_path(path)
    try:
        # root's: a directory of its own, 0700; anyone else's: the state's, as written
        _directory(lock.parent, 0o700 if os.geteuid() == 0
                   else None if lock.parent.is_dir() else 0o755)
        handle = owned.open_lock(lock)
    except (StateError, owned.Untrusted) as err:
        raise StateError(f"cannot lock {path}: {err}") from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _holder(handle)
                    held = f"held by pid {holder}; " if holder else ""
                    raise LockBusy(f"{lock}: another run holds this node's lock "
                                   f"({held}waited {wait_s:g} s)") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(handle)


def _holder(handle: int) -> str:
    """The pid that holds the flock on ``handle``'s file, from /proc/locks; "" when not
    found there (fs/locks.c: "FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode>")."""
    info = os.fstat(handle)
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            for line in locks:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == device:
                    return fields[4]
    except OSError:
        pass
    return ""


def read(path: Path) -> HealthState | None:
    """The state a run left; None when no run has written one yet.  A file that is not
    one is a :class:`StateError` naming the file and the field; so is one this run
    cannot trust: in a directory others can change, a link, not a regular file, or
    owned by another user than root and the caller (what another user wrote is not
    this node's memory: no drain of it is looked after)."""
    path = Path(path)
    problems = module_audit.audit_directory(path.parent, GUARDED)
    if problems:
        raise StateError(f"{_refused(problems)}: {path} not trusted")
    try:
        raw = owned.read(path, MAX_BYTES)
    except owned.Untrusted as err:
        raise StateError(f"{err}: not trusted") from None
    if raw is None:
        return None
    if len(raw) > MAX_BYTES:
        raise StateError(f"{path}: larger than {MAX_BYTES} bytes (not an ocibench "
                         "healthcheck state file)")
    try:
        data = jsonfile.parse(raw, str(path))
    except jsonfile.JsonFileError as err:
        raise StateError(f"{err} (not an ocibench healthcheck state file)") from None
    return from_dict(data, str(path))


def _field(data: dict[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    # bool is an int in Python; no field here is a bool
    if isinstance(value, bool) or not isinstance(value, kinds):
        names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise StateError(f"{where}: field {key!r} is {value!r:.60}, not {names} "
                         "(not an ocibench healthcheck state file)")
    return value


def from_dict(data: Any, where: str) -> HealthState:
    if not isinstance(data, dict):
        raise StateError(f"{where}: not a JSON object (not an ocibench healthcheck state file)")
    number = (int, float)
    action = _field(data, "action", (str,), where)
    if action not in ACTIONS:
        raise StateError(f"{where}: field 'action' is {action!r:.60}, not one of "
                         f"{', '.join(ACTIONS)}")
    probes = []
    for index, item in enumerate(_field(data, "probes", (list,), where)):
        at = f"{where}: probes[{index}]"
        if not isinstance(item, dict):
            raise StateError(f"{at}: not a JSON object")
        state = _field(item, "state", (str,), at)
        if state not in STATES:
            raise StateError(f"{at}: field 'state' is {state!r:.60}, not one of "
                             f"{', '.join(STATES)}")
        for key in ("time", "duration_s"):
            if not metrics.is_number(item.get(key)):
                raise StateError(f"{at}: field {key!r} is {item.get(key)!r:.60}, not a "
                                 "finite number")
        probes.append(ProbeResult(
            name=_field(item, "name", (str,), at), state=state,
            evidence=_field(item, "evidence", (str,), at),
            time=float(_field(item, "time", number, at)),
            duration_s=float(_field(item, "duration_s", number, at))))
    counters = data.get("link_downed", {})
    if not isinstance(counters, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in counters.values()):
        raise StateError(f"{where}: field 'link_downed' is not port -> counter")
    interval = _field(data, "interval_s", (int, type(None)), where)
    drained = data.get("drained_probes", [])
    if not isinstance(drained, list) or not all(isinstance(n, str) for n in drained):
        raise StateError(f"{where}: field 'drained_probes' is not a list of probe names")
    drained_reason = data.get("drained_reason", "")
    if not isinstance(drained_reason, str):
        raise StateError(f"{where}: field 'drained_reason' is {drained_reason!r:.60}, "
                         "not str")
    boot = data.get("kernel_boot_id", "")
    if not isinstance(boot, str) or len(boot) > 64:
        raise StateError(f"{where}: field 'kernel_boot_id' is {boot!r:.60}, not a boot id")
    seqs = {key: data.get(key, -1) for key in ("kernel_seq_passed", "kernel_seq_read")}
    for key, seq in seqs.items():
        if isinstance(seq, bool) or not isinstance(seq, int) or not -1 <= seq < 2**64:
            raise StateError(f"{where}: field {key!r} is {seq!r:.60}, not a kernel log "
                             "sequence number")
    slurm_error = data.get("slurm_error", "")
    if not isinstance(slurm_error, str):
        raise StateError(f"{where}: field 'slurm_error' is {slurm_error!r:.60}, not str")
    offences = data.get("offences", {})
    if not isinstance(offences, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31
            for v in offences.values()):
        raise StateError(f"{where}: field 'offences' is not probe -> count")
    node = _field(data, "node", (str,), where)
    if not hostnames.is_host(node):
        raise StateError(f"{where}: field 'node' is {hostnames.why_not(node)} "
                         "(not an ocibench healthcheck state file)")
    for key in ("time", "duration_s", "history_since"):
        if key in data and not metrics.is_number(data[key]):
            raise StateError(f"{where}: field {key!r} is {data[key]!r:.60}, not a finite "
                             "number (not an ocibench healthcheck state file)")
    return HealthState(
        node=node,
        time=float(_field(data, "time", number, where)),
        duration_s=float(_field(data, "duration_s", number, where)),
        interval_s=interval, action=action,
        reason=_field(data, "reason", (str,), where),
        probes=tuple(probes), link_downed=dict(counters),
        drained_reason=drained_reason, drained_probes=tuple(drained),
        history_since=float(_field(data, "history_since", number, where))
        if "history_since" in data else 0.0,
        kernel_boot_id=boot, kernel_seq_passed=seqs["kernel_seq_passed"],
        kernel_seq_read=seqs["kernel_seq_read"], slurm_error=slurm_error,
        offences=dict(offences))
