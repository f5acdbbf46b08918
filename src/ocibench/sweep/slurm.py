"""What the sweep asks of Slurm and tells it: hostlists, node states, drain, resume.

Every call is a Slurm command (``scontrol``, ``sinfo``) with a timeout; a command that
fails is a :class:`SlurmError` with one line naming the command and Slurm's message.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from ocibench.sweep.actions import REASON_PREFIX

#: Seconds a sweep's job may pend before its nodes count as unreachable: the groups
#: of a wave are disjoint and idle, so a job starts at once on nodes that work.
START_TIMEOUT_S = 300

#: Seconds a Slurm client command may take.
TIMEOUT_S = 30

#: A host name as Slurm's hostlist expands it (RFC 1123 letters, digits, '-', '.').
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

#: ``sinfo %t`` states in which a node takes a new job at once.  A suffix marks a
#: node that is not responding (*), powering (~ # !), rebooting (@), ...: not idle.
SWEEPABLE = ("idle",)
#: ``sinfo %t`` of a drained node (drng: draining, still running jobs).
DRAINED = ("drain",)


class SlurmError(RuntimeError):
    """A Slurm command failed; one line."""


class UsageError(ValueError):
    """A bad hostlist, partition or node; one line."""


def _call(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} not found: ocibench sweep runs where Slurm's "
                         "client commands are (a login or head node)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(argv)}: no answer in {TIMEOUT_S} s") from None


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _run(argv: list[str]) -> str:
    done = _call(argv)
    if done.returncode != 0:
        why = _last_line(done.stderr) or f"exit status {done.returncode}"
        raise SlurmError(f"{' '.join(argv)}: {why}")
    return done.stdout


def expand_hostlist(text: str) -> list[str]:
    """``node[1-3],gpu7`` as Slurm expands it (``scontrol show hostnames``), in order."""
    if not text or not text.strip():
        raise UsageError("--nodes: empty hostlist")
    done = _call(["scontrol", "show", "hostnames", text])
    # scontrol exits 0 on a bad range and says "Invalid hostlist: ..." instead
    said = next((line for line in (done.stdout + done.stderr).splitlines()
                 if "Invalid hostlist" in line or "error" in line.lower()), None)
    if done.returncode != 0 or said:
        why = said or _last_line(done.stderr) or f"exit status {done.returncode}"
        raise UsageError(f"--nodes {text!r}: bad hostlist: {why.strip()}")
    names = done.stdout.split()
    bad = next((n for n in names if not _HOST.fullmatch(n)), None)
    if bad is not None or not names:
        raise UsageError(f"--nodes {text!r}: bad hostlist (Slurm expands it to {bad!r}); "
                         "write it as node[1-8],gpu-[001-120]")
    return list(dict.fromkeys(names))


def partitions() -> tuple[list[str], str | None]:
    """Slurm's partitions and the default one (marked '*' by sinfo)."""
    names, default = [], None
    for line in _run(["sinfo", "-h", "-o", "%P"]).split():
        if line.endswith("*"):
            line = default = line[:-1]
        names.append(line)
    return names, default


@dataclass(frozen=True)
class NodeState:
    state: str      # sinfo %t: idle, alloc, mix, drain, down*, ...
    reason: str     # sinfo %E; "" when none

    @property
    def sweepable(self) -> bool:
        return self.state in SWEEPABLE

    @property
    def drained_by_us(self) -> bool:
        return self.state in DRAINED and self.reason.startswith(REASON_PREFIX)

    def why_not(self) -> str:
        """Slurm's word on a node that will not take the sweep's job at once."""
        what = {"alloc": "running other jobs", "mix": "running other jobs",
                "comp": "completing a job"}.get(self.state.rstrip("*~#!%@^-"), "")
        text = f"Slurm state {self.state}"
        if self.state.endswith("*"):
            text += " (not responding)"
        if what:
            text += f" ({what})"
        return f"{text}: {self.reason}" if self.reason else text


def node_states(partition: str | None) -> dict[str, NodeState]:
    """Every node of the partition (or of the cluster) with its state and reason."""
    argv = ["sinfo", "-N", "-h", "-o", "%N|%t|%E"] + (["-p", partition] if partition else [])
    return parse_sinfo(_run(argv))


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """``sinfo -N -h -o '%N|%t|%E'``: a node per line (once per partition it is in)."""
    found: dict[str, NodeState] = {}
    for line in text.splitlines():
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        reason = "" if reason.strip() == "none" else reason.strip()
        if name.strip():
            found[name.strip()] = NodeState(state.strip(), reason)
    return found


def drain(node: str, reason: str) -> None:
    _run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])


def resume(node: str) -> None:
    _run(["scontrol", "update", f"NodeName={node}", "State=RESUME"])


def create_reservation(name: str, nodes: list[str], user: str) -> None:
    """Keep ``nodes`` for ``user``'s jobs only while the sweep resumes and re-tests
    the nodes it drained (IGNORE_JOBS: nodes that still finish a job are taken too)."""
    _run(["scontrol", "create", "reservation", f"ReservationName={name}",
          f"Nodes={','.join(nodes)}", "StartTime=now", "Duration=UNLIMITED",
          f"Users={user}", "Flags=IGNORE_JOBS"])


def delete_reservation(name: str) -> None:
    _run(["scontrol", "delete", f"ReservationName={name}"])
