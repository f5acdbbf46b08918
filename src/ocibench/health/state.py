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
     "history_since": 0.0}

``link_downed`` keeps each RDMA port's link-down counter as last read, so that the
next run can tell a port that flapped in between (its counter rose) from one that
went down once, long ago.  ``drained_reason`` is the exact reason of the drain this
healthcheck wrote and Slurm still holds (``""``: none), with the probes that failed:
the record by which it resumes only its own drains (docs/healthcheck.md).  When a
person resumes such a drain, ``history_since`` becomes that time: the results history
measured before it is no longer held against the node (the person has seen it).

The file is the healthcheck's memory across runs, and the freshness its exporter
reports (last run, duration, expected interval), as OCI's node-problem detector
exports for each of its checks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ocibench import atomic, jsonfile, paths

#: A probe's three states (the project's verdicts, as a probe says them): it compared
#: and held; it found the node broken; it could not tell (a missing tool, a timeout,
#: output it does not understand).  Only FAIL ever drains.
PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
STATES = (PASS, FAIL, UNKNOWN)

#: What a run did to its node in Slurm (the "would" forms: ``--dry-run``; "would drain
#: (budget spent)": a failure it did not drain, ocibench's drain budget being spent,
#: ocibench.sweep.budget).
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


def write(state: HealthState, path: Path) -> None:
    """Replace the state file atomically: a temporary file beside it, synced, renamed."""
    path = Path(path)
    text = json.dumps(state.to_dict(), indent=1, sort_keys=True) + "\n"
    try:
        # readable by the exporter, whoever runs it
        atomic.replace(path, text, mode=0o644, parents=True)
    except OSError as err:
        raise StateError(f"cannot write {path}: {err.strerror or err}") from None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One run at a time on a node: the health check and the prolog may start
    together, and each reads the state, probes, then writes it; without the lock the
    later writer would drop the drain the other recorded.  ``<file>.lock`` beside it,
    held for the run (each run ends within its deadline and Slurm's timeouts)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(path.name + ".lock"), "a")
    except OSError as err:
        raise StateError(f"cannot lock {path}: {err.strerror or err}") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def read(path: Path) -> HealthState | None:
    """The state a run left; None when no run has written one yet.  A file that is not
    one is a :class:`StateError` naming the file and the field."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = jsonfile.load(path, limit=MAX_BYTES)
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
    return HealthState(
        node=_field(data, "node", (str,), where),
        time=float(_field(data, "time", number, where)),
        duration_s=float(_field(data, "duration_s", number, where)),
        interval_s=interval, action=action,
        reason=_field(data, "reason", (str,), where),
        probes=tuple(probes), link_downed=dict(counters),
        drained_reason=drained_reason, drained_probes=tuple(drained),
        history_since=float(_field(data, "history_since", number, where))
        if "history_since" in data else 0.0)
