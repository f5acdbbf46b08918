"""What every node probe is made of: an item and its evidence, a file read bounded and
never blocking, a tool run bounded in time, a GPU's address as sysfs names it, and what
a shape says its nodes have.

The probes of this package (preflight, OCI's node-doctor checks, the RDMA ports, the
NVLink fabric) all stand on these, and preflight, which gathers them into one report,
stands on all of them: the vocabulary sits one floor below so that no probe module has
to import the report that imports it.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibench import accelerators, capabilities
from ocibench.capabilities import ABSENT, UNEXPECTED, UNKNOWN
from ocibench.shapes import probe
from ocibench.shapes.probe import Ran

#: The most a probed file may hold: every file read here is a line or a short table
#: (/proc/self/status is about 1.5 KB).  A larger one is not what the probe expects.
MAX_READ = 1 << 16

#: Seconds a probed command may run (gdrcopy's sanity runs a few seconds per GPU).
TIMEOUT_S = 30


@dataclass
class Item:
    """One probed item: its state on this node against the shape."""

    name: str
    status: str        # PRESENT, ABSENT, UNEXPECTED or UNKNOWN
    detail: str        # what was found, or why not
    evidence: str      # the file read or the command run
    required: bool = False

    @property
    def missing(self) -> bool:
        """Required and known not to be as the shape says (absent or unexpected)."""
        return self.required and self.status in (ABSENT, UNEXPECTED)

    @property
    def undecided(self) -> bool:
        """Required, and the probe could not tell: neither present nor missing."""
        return self.required and self.status == UNKNOWN

    def line(self) -> str:
        need = "required" if self.required else "not required"
        return f"{self.name}: {self.status} ({need}): {self.detail} [{self.evidence}]"


@dataclass
class Expectations:
    """What a shape says its nodes have."""

    shape: str
    binding: bool                  # False: nothing is required (machine-described shape)
    gpu_model: str | None
    gpu_numa: list[int]            # NUMA node of GPU i
    capabilities: dict[str, Any]   # ocibench.capabilities names -> declared value
    #: Every RDMA port to check (ocibench.node.rdma.Port): network.rdma_nics, then the
    #: RDMA ports of network.ucx_net_devices not among them.
    rdma_ports: list[Any]
    vendor: accelerators.Accelerator | None = None   # the GPUs' row, from gpus.vendor
    gpu_arch: str | None = None    # gpus.arch: "80", "gfx942"
    #: The shape's node_doctor section: OCI's node-doctor checks that apply to it
    #: (ocibench.node.doctor).
    doctor: dict[str, Any] = field(default_factory=dict)

    @property
    def gpu_count(self) -> int:
        return len(self.gpu_numa)

    @property
    def rdma_devices(self) -> list[str]:
        """The ports' names, "mlx5_6:1": the items ``rdma <name>``."""
        return [p.name for p in self.rdma_ports]

    def requires(self, capability: str) -> bool:
        return self.binding and capabilities.present(self.capabilities.get(capability))


def run(args: list[str], timeout: float | None = None) -> Ran:
    """A probed tool's outcome, bounded in time (default :data:`TIMEOUT_S`) and output
    (ocibench.shapes.probe.run_tool)."""
    return probe.run_tool(args, TIMEOUT_S if timeout is None else timeout)


def tool_item(name: str, ran: Ran, required: bool) -> Item:
    """The item of a tool that gave no answer: absent when it is not installed (what it
    belongs to is not on this node), unknown when it failed, hung or could not start."""
    return Item(name, ABSENT if ran.missing else UNKNOWN, ran.why, ran.command, required)


@dataclass
class Read:
    """A probed file: its text; or ``why`` it could not be read (unknown); neither
    when it does not exist."""

    text: str | None = None
    why: str | None = None

    @property
    def missing(self) -> bool:
        return self.text is None and self.why is None


def read_file(root: Path, rel: str, limit: int = MAX_READ) -> Read:
    """A small file under the probed root, read bounded and never blocking.

    Not there (no such file, a parent that is no directory): missing.  There but
    unreadable (no permission, a directory, a link loop or a link to nothing, a
    device or FIFO, larger than :data:`MAX_READ`): ``why``.  Opened non-blocking
    and checked to be a regular file (as /proc and /sys files are), so that a FIFO
    or /dev/zero in its place neither blocks nor fills memory."""
    path = root / rel
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if os.path.lexists(path):
            return Read(why=f"{path} is a link to nothing")
        return Read()
    except NotADirectoryError:
        return Read()
    except OSError as err:
        return Read(why=f"cannot read {path}: {strerror(err)}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Read(why=f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(limit + 1)
    except OSError as err:
        return Read(why=f"cannot read {path}: {strerror(err)}")
    finally:
        os.close(fd)
    if len(raw) > limit:
        return Read(why=f"{path} is larger than {limit} bytes: not the file expected")
    return Read(text=raw.decode("utf-8", errors="replace"))


def described(read: Read) -> str:
    """What a read gave, for a detail: why not, 'missing', or its first characters."""
    if read.why:
        return read.why
    return "missing" if read.missing else repr((read.text or "").strip()[:40])


def strerror(err: OSError) -> str:
    return err.strerror or errno.errorcode.get(err.errno or 0, str(err))


def path_exists(root: Path, rel: str) -> bool | str:
    """Whether ``rel`` exists under the root (a link is followed); the reason as text
    where that cannot be told (no permission to look, a link loop)."""
    try:
        os.stat(root / rel)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as err:
        return f"cannot look at {root / rel}: {strerror(err)}"
    return True


def sysfs_bdf(bus_id: str) -> str:
    """A probe's PCI address as sysfs names it: nvidia-smi's 00000000:0F:00.0 and
    amd-smi's 0000:0c:00.0 are 0000:0f:00.0 and 0000:0c:00.0 (each vendor's reader
    matched it: hex digits only, so the path stays in sys/bus/pci/devices)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:]}:{rest}"


@dataclass
class Gpu:
    index: int
    name: str
    bdf: str
    arch: str = ""
