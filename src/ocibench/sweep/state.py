"""What this tool drained: the record ``--undrain`` trusts, not a prefix anyone can type.

Every drain reason the sweep writes starts with ``ocibench:`` (actions.REASON_PREFIX),
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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ocibench import atomic

VERSION = 1


class StateError(RuntimeError):
    """The record cannot be read or written; one line naming the file."""


class DrainRecord:
    """The file of nodes this tool drained: ``{"version": 1, "nodes": {node:
    {"reason": ..., "drained": <UTC time>, "sweep": <the sweep's directory>}}}``."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Every recorded node; none when the file does not exist yet."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as err:
            raise StateError(f"cannot read {self.path}: {err.strerror}") from None
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.path.with_name(self.path.name + ".lock"), "a")
        except OSError as err:
            raise StateError(f"cannot write {self.path}: {err.strerror}") from None
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
