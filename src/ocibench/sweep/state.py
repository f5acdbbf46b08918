"""What this tool drained: the record ``--undrain`` trusts, not a prefix anyone can type.

Every drain reason the sweep writes starts with ``ocibench:`` (cluster.reason.REASON_PREFIX),
so that ``sinfo -R`` shows who drained a node.  A person can type that prefix too, and
an admin's own drain whose reason merely starts with it must never be resumed by a
sweep.  So the sweep keeps a record of every drain it made (node, the exact reason),
and ``--undrain`` re-tests only a node that Slurm holds drained with exactly the reason
recorded for it.  A person who drains the node again, with any reason, replaces
Slurm's reason, and the node is no longer ours.

The record is written *before* ``scontrol`` drains the node: a sweep stopped between the
two leaves a record whose reason Slurm never got, which matches nothing, rather than a
node drained with no record, which --undrain would never recover.  It is one JSON file
(``--state``), replaced atomically, under an exclusive lock, so that two sweeps of one
cluster do not lose each other's entries.

The sweep runs as root (or Slurm's admin) and ``--undrain`` resumes what the record
names, so the record is trusted only as the healthcheck's state is (node/owned.py): in
a directory only root or the caller can change, a regular file of root's or the
caller's, never read or locked through a link.  Another user who could write the
record could otherwise have a person's drain resumed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ocibench import atomic
from ocibench.node import module_audit, owned

VERSION = 1
#: A record larger than this is not the sweep's (a node's entry is about 200 bytes:
#: 50,000 drained nodes).
MAX_BYTES = 10 * 2**20
#: What the owners guard, in the module audit's line about an owner.
GUARDED = "the sweep's record of drains"


class StateError(RuntimeError):
    """The record cannot be read or written; one line naming the file."""


class DrainRecord:
    """The file of nodes this tool drained: ``{"version": 1, "nodes": {node:
    {"reason": ..., "drained": <UTC time>, "sweep": <the sweep's directory>}}}``."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Every recorded node; none when the file does not exist yet."""
        problems = module_audit.audit_directory(self.path.parent, GUARDED)
        if problems:
            raise StateError(f"{problems[0]}: {self.path} not trusted")
        try:
            raw = owned.read(self.path, MAX_BYTES)
        except owned.Untrusted as err:
            raise StateError(f"{err}: not trusted") from None
        except OSError as err:
            raise StateError(f"cannot read {self.path}: {err.strerror}") from None
        if raw is None:
            return {}
        if len(raw) > MAX_BYTES:
            raise StateError(f"{self.path}: larger than {MAX_BYTES} bytes (not the sweep's "
                             "record of drains)")
        text = raw.decode("utf-8", errors="replace")
        try:
            data = json.loads(text)
        except ValueError as err:
            raise StateError(f"{self.path}: not the sweep's record of drains ({err})") from None
        if not isinstance(data, dict) or data.get("version") != VERSION:
            found = data.get("version") if isinstance(data, dict) else type(data).__name__
            raise StateError(f"{self.path}: not the sweep's record of drains (version "
                             f"{found!r}, expected {VERSION})")
        nodes = data.get("nodes")
        if not isinstance(nodes, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("reason"), str) for v in nodes.values()):
            raise StateError(f"{self.path}: field 'nodes' is not node -> {{reason: ...}}")
        return nodes

    def ours(self, node: str, reason: str) -> bool:
        """Slurm holds ``node`` drained with ``reason``: did this tool write it?"""
        entry = self.nodes().get(node)
        return entry is not None and entry["reason"] == reason

    def add(self, node: str, reason: str, sweep: str) -> None:
        with self._updating() as nodes:
            nodes[node] = {"reason": reason, "sweep": sweep,
                           "drained": datetime.now(timezone.utc).isoformat(timespec="seconds")}

    def remove(self, node: str) -> None:
        with self._updating() as nodes:
            nodes.pop(node, None)

    @contextlib.contextmanager
    def _updating(self) -> Iterator[dict[str, dict[str, Any]]]:
        problems = module_audit.own_directory(
            self.path.parent, 0o755, GUARDED) if not self.path.parent.is_dir() else \
            module_audit.audit_directory(self.path.parent, GUARDED)
        if problems:
            raise StateError(f"cannot write {self.path}: {problems[0]}")
        try:
            lock = os.fdopen(owned.open_lock(self.path.with_name(self.path.name + ".lock")))
        except owned.Untrusted as err:
            raise StateError(f"cannot lock {self.path}: {err}") from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            nodes = self.nodes()
            yield nodes
            self._write({"version": VERSION, "nodes": nodes})

    def _write(self, data: dict[str, Any]) -> None:
        # a reader sees the old record or the new one, never half of one
        try:
            atomic.replace(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        except OSError as err:
            raise StateError(f"cannot write {self.path}: {err.strerror}") from None
