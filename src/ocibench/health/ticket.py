"""The evidence for a support ticket: one bounded, reproducible archive per failing node.

What OCI's support asks for when a host goes back (docs/ladder.md): the shape, the fault
codes, the failing probes and figures with their evidence, the GPU vendor's tools
(its row's ``ticket``, ocibench.accelerators: ``nvidia-smi -q``, ``amd-smi static``), the
relevant kernel-log lines, ``ibstat`` and the RDMA ports' counters, the
image, driver and firmware versions, the preflight report and the failing benchmark
output; and a one-page ``summary.txt`` a person pastes into the ticket.  Each failure's
step and fault code is its entry of the action ladder (ocibench.ladder), moved up for a
repeat offender as the healthcheck's state counts it.

Three rules, each with its test (tests/test_ticket.py):

* **nothing secret**: no environment is collected, the tools run with an environment of
  PATH and LC_ALL only, and every line that looks like a credential (a private key, a
  password, a token) is replaced by ``[redacted]``;
* **bounded**: each part has its own cap (a log keeps its end), and the whole archive
  stays under ``max_bytes``; what did not fit is named in the summary;
* **reproducible**: the same inputs give the same bytes (members in a fixed order, one
  fixed mtime, owner 0, mode 0644, gzip without a name or a time, like ``gzip -n``).

A tool that is not installed, hangs or fails is recorded as such in its file and in the
summary, never a traceback.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocibench import accelerators, atomic, benchmarks, ladder, shapes
from ocibench.health import probes, state
from ocibench.node import preflight

#: The archive's default cap: a ticket attachment, far under any support portal's limit.
MAX_BYTES = 4 * 2**20
#: The most a single tool's output or benchmark output keeps (its end, for a log).
MAX_PART = 512 * 2**10
#: The most kernel-log lines kept (the newest).
MAX_KERNEL_LINES = 400
#: Seconds one tool may take (nvidia-smi -q of 8 GPUs answers in about a second).
TOOL_TIMEOUT_S = 20.0
#: tar's own bytes: a 512-byte header per member, padding to 512, two end blocks, and
#: the record size it rounds up to; kept free of the members' budget.
_TAR_RECORD = tarfile.RECORDSIZE

#: Kernel-log lines a ticket wants beside every GPU driver's (each vendor row's
#: ``ticket.kernel_words``): the NICs (mlx5, ionic), PCIe errors (AER, pcieport), and
#: the machine-check and EDAC reports.
HOST_KERNEL_WORDS = r"mlx5|ionic|AER|pcieport|PCIe Bus Error|\bmce\b|Machine check|EDAC"
#: Lines that may hold a credential: never in a ticket.
SECRET_PATTERN = re.compile(
    r"PRIVATE KEY|BEGIN CERTIFICATE|passw(or)?d|secret|token|api[_-]?key|"
    r"authorization:|bearer\s|aws_access|ssh-(rsa|ed25519)\s", re.IGNORECASE)

#: (file in the archive, the command) of each network tool; the GPU vendor's are its
#: row's (``ticket.tools``); absent tools are recorded.
_NET_TOOLS = (("tools/ibstat.txt", ["ibstat"]),
              ("tools/ofed_info.txt", ["ofed_info", "-s"]))


class TicketError(ValueError):
    """A bad input (a file that is not what it should be); one line naming it."""


@dataclass
class Inputs:
    node: str
    shape: shapes.Shape | None
    root: Path = Path("/")
    state_path: Path | None = None
    preflight_path: Path | None = None           # None: preflight runs now
    outputs: list[tuple[str, Path]] = field(default_factory=list)   # (check, file)
    max_bytes: int = MAX_BYTES
    tool_timeout: float = TOOL_TIMEOUT_S


@dataclass
class Ticket:
    members: list[tuple[str, bytes]]   # in the archive's order, summary.txt first
    decisions: list[tuple[str, ladder.Decision | None]]
    left_out: list[str]


# --------------------------------------------------------------------------- reading

def redact(text: str) -> str:
    """Every line that looks like a credential replaced by ``[redacted]``."""
    return "".join("[redacted]\n" if SECRET_PATTERN.search(line) else line
                   for line in text.splitlines(keepends=True))


def tail(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` bytes of UTF-8, saying what was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    keep = max(0, limit - 80)
    kept = data[len(data) - keep:].decode(errors="ignore")
    return f"[first {len(data) - len(kept.encode())} bytes left out: size cap]\n{kept}"


def run_tool(args: list[str], timeout: float) -> str:
    """A tool's output, or one line saying why there is none (absent, hung, failed).
    The tool gets no environment but PATH and LC_ALL: nothing of the caller's leaks."""
    command = " ".join(args)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    try:
        done = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, env=env, check=False)
    except FileNotFoundError:
        return f"absent: {args[0]} not on PATH (`{command}`)\n"
    except subprocess.TimeoutExpired:
        return f"absent: `{command}` ran past {timeout:g} s (killed)\n"
    except OSError as err:
        return f"absent: `{command}` cannot run: {err.strerror}\n"
    out = done.stdout.decode(errors="replace")
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return f"failed: `{command}` exit {done.returncode}: {err[0][:200]}\n{out}"
    return out


def _read_text(path: Path, limit: int = MAX_PART) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    text = data.decode(errors="replace")
    return text if len(data) <= limit else tail(text, limit)


def kernel_pattern() -> re.Pattern[str]:
    """The kernel-log lines a ticket wants: every GPU driver's (whatever GPUs the shape
    says: its lines are evidence of what the node holds) and the host's."""
    words = [row.ticket.kernel_words for row in accelerators.VENDORS.values()
             if row.ticket.kernel_words]
    return re.compile("|".join([*words, HOST_KERNEL_WORDS]), re.IGNORECASE)


def kernel_lines(root: Path) -> str:
    """The kernel log's lines a ticket wants (:func:`kernel_pattern`), the newest
    :data:`MAX_KERNEL_LINES`; or why they could not be read."""
    lines, why = probes.read_kernel_log(root / "dev" / "kmsg", time.monotonic() + 5.0)
    if lines is None:
        return f"absent: the kernel log: {why}\n"
    pattern = kernel_pattern()
    wanted = [text for _seq, text in probes.kernel_records(lines) if pattern.search(text)]
    cut = f"[{len(wanted) - MAX_KERNEL_LINES} older lines left out]\n" \
        if len(wanted) > MAX_KERNEL_LINES else ""
    return cut + "".join(f"{text}\n" for text in wanted[-MAX_KERNEL_LINES:]) or \
        "no GPU, NIC, PCIe or machine-check line in the kernel log\n"


def rdma_counters(root: Path) -> str:
    """Each RDMA port's state, rate and error counters, as sysfs shows them."""
    base = root / "sys" / "class" / "infiniband"
    if not base.is_dir():
        return f"absent: no /{base.relative_to(root)}\n"
    lines = []
    for port in sorted(base.glob("*/ports/*")):
        where = f"{port.parent.parent.name}:{port.name}"
        for name in ("state", "rate", "phys_state"):
            value = _read_text(port / name, 256)
            if value is not None:
                lines.append(f"{where} {name}: {value.strip()}")
        for counter in sorted((port / "counters").glob("*")):
            value = _read_text(counter, 64)
            if value is not None:
                lines.append(f"{where} counters/{counter.name}: {value.strip()}")
    return "\n".join(lines[:4000]) + "\n" if lines else "no RDMA port in sysfs\n"


def versions(root: Path, tool_timeout: float, row: accelerators.Accelerator | None) -> str:
    """The image, kernel, GPU driver and firmware versions: each vendor's driver file
    that is there, and the firmware query of the vendor of the shape's GPUs (``row``)."""
    parts = []
    os_release = _read_text(root / "etc" / "os-release", 8192)
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]*)', os_release or "", re.MULTILINE)
    parts.append(f"image: {pretty.group(1) if pretty else 'absent (no /etc/os-release)'}")
    kernel = _read_text(root / "proc" / "sys" / "kernel" / "osrelease", 256)
    parts.append(f"kernel: {kernel.strip() if kernel else 'absent'}")
    for vendor in accelerators.VENDORS.values():
        file = vendor.ticket.driver_file
        driver = _read_text(root / file, 4096) if file else None
        if driver:
            parts.append(f"{vendor.vendor} driver: {driver.splitlines()[0].strip()}")
    firmware = row.ticket.firmware if row else None
    if firmware:
        parts.append(f"gpu firmware ({firmware[0]}): " + run_tool(
            list(firmware), tool_timeout).strip().replace("\n", "; "))
    return "\n".join(parts) + "\n"


def _firmware_of_hcas(ibstat: str) -> list[str]:
    return sorted({line.split(":", 1)[1].strip() for line in ibstat.splitlines()
                   if line.strip().startswith("Firmware version:")})


# --------------------------------------------------------------------------- judging

def _health(path: Path | None, node: str) -> state.HealthState | None:
    if path is None:
        return None
    try:
        found = state.read(path)
    except state.StateError as err:
        raise TicketError(str(err)) from None
    if found is not None and found.node != node:
        raise TicketError(f"{path}: the healthcheck state of node {found.node}, not {node}")
    return found


def health_time(path: Path | None) -> int:
    """The healthcheck's last run (whole seconds), the archive's default mtime; 0 when
    there is none to read."""
    try:
        found = state.read(path) if path is not None else None
    except state.StateError:
        return 0
    return int(found.time) if found is not None else 0


def _preflight(inputs: Inputs) -> dict[str, Any] | None:
    if inputs.preflight_path is not None:
        try:
            return preflight.read_report(inputs.preflight_path)
        except (OSError, ValueError) as err:
            raise TicketError(f"{inputs.preflight_path}: {err}") from None
    if inputs.shape is None:
        return None
    return preflight.preflight(inputs.shape, inputs.root).to_dict()


def decisions_of(health: state.HealthState | None, report: dict[str, Any] | None,
                 outputs: Iterable[tuple[str, Path]]) -> list[tuple[str, ladder.Decision | None]]:
    """Each failure and its ladder decision: the healthcheck's failing probes (moved up
    by the state's offences), preflight's missing items, the failing figures given."""
    found: list[tuple[str, ladder.Decision | None]] = []
    if health is not None:
        for result in health.probes:
            if result.state == state.FAIL:
                repeats = health.offences.get(ladder.base_name(result.name), 0)
                found.append((f"healthcheck {result.name}: {result.evidence}",
                              ladder.decide(ladder.PROBE, result.name, repeats,
                                           result.evidence)))
    for item in (report or {}).get("items", []):
        if isinstance(item, dict) and item.get("missing"):
            name = str(item.get("name"))
            found.append((f"preflight {name}: {item.get('status')}: {item.get('detail')}",
                          ladder.decide(ladder.PREFLIGHT, name,
                                        evidence=str(item.get('detail') or ''))))
    for check, path in outputs:
        found.append((f"figure {check}: failing output {path.name}",
                      ladder.decide(ladder.FIGURE, check)))
    return found


# --------------------------------------------------------------------------- building

def summary(inputs: Inputs, decisions: list[tuple[str, ladder.Decision | None]],
            facts: list[str], absent: list[str], contents: list[str]) -> str:
    """The one page a person pastes into the ticket."""
    shape = inputs.shape.name if inputs.shape else "unknown (no shape given or detected)"
    known = [d for _what, d in decisions if d is not None]
    worst = ladder.worst(known)
    lines = [f"ocibench ticket for node {inputs.node}, shape {shape}",
             f"next step: {worst.line() if worst else 'none: no failure found'}", ""]
    codes = sorted({d.fault for d in known if d.step is ladder.Step.RETURN_TO_OCI
                    or d.rung.oci_codes})
    if codes:
        lines.append("fault codes for OCI: " + ", ".join(codes))
        lines.append(f"  (OCI's codes: {ladder.OCI_SOURCE}; OCIBENCH-*: ocibench's own, "
                     "docs/ladder.md)")
        lines.append("")
    lines.append(f"failures ({len(decisions)}):")
    for what, decision in decisions[:20]:
        lines.append(f"- {' '.join(what.split())[:300]}")
        if decision is None:
            lines.append("    no ladder entry (ocibench.ladder): report it to ocibench")
            continue
        lines.append(f"    {decision.line()}")
        lines.append(f"    do: {decision.rung.fix}")
        lines.append(f"    evidence: {'; '.join(decision.rung.evidence)}")
    if len(decisions) > 20:
        lines.append(f"- and {len(decisions) - 20} more (ladder.json)")
    lines += ["", "versions:", *(f"  {f}" for f in facts)]
    if absent:
        lines += ["", "not collected:", *(f"  {a}" for a in absent)]
    lines += ["", "archive contents:", *(f"  {c}" for c in contents)]
    return tail("\n".join(lines) + "\n", 16 * 2**10)


def collect(inputs: Inputs) -> Ticket:
    """Everything the archive holds, read now; raises TicketError on a bad input."""
    health = _health(inputs.state_path, inputs.node)
    report = _preflight(inputs)
    for check, path in inputs.outputs:
        if check not in benchmarks.CHECKS:
            raise TicketError(f"--output {check}={path}: {check!r} is no check of the "
                              f"registry; known: {', '.join(benchmarks.CHECKS)}")
    row = accelerators.of(inputs.shape.gpus) if inputs.shape else None
    decisions = decisions_of(health, report, inputs.outputs)

    parts: list[tuple[str, str]] = []
    parts.append(("ladder.json", json.dumps(
        {"node": inputs.node, "shape": inputs.shape.name if inputs.shape else None,
         "oci_source": ladder.OCI_SOURCE,
         "failures": [{"what": what, **(d.to_dict() if d else {"step": None})}
                      for what, d in decisions]}, indent=2, sort_keys=True) + "\n"))
    if health is not None:
        parts.append(("healthcheck.json",
                      json.dumps(health.to_dict(), indent=2, sort_keys=True) + "\n"))
    if report is not None:
        parts.append(("preflight.json", json.dumps(report, indent=2, sort_keys=True) + "\n"))
    parts.append(("kernel-log.txt", kernel_lines(inputs.root)))
    gpu_tools = [(f"tools/{name}", list(args)) for name, args in row.ticket.tools] if row \
        else []
    tools = gpu_tools + list(_NET_TOOLS)
    ran = {name: run_tool(args, inputs.tool_timeout) for name, args in tools}
    parts += [(name, text) for name, text in ran.items()]
    parts.append(("rdma-counters.txt", rdma_counters(inputs.root)))
    facts = versions(inputs.root, inputs.tool_timeout, row).splitlines()
    hca = _firmware_of_hcas(ran.get("tools/ibstat.txt", ""))
    facts.append(f"hca firmware (ibstat): {', '.join(hca) if hca else 'absent'}")
    parts.append(("versions.txt", "\n".join(facts) + "\n"))
    for check, path in inputs.outputs:
        text = _read_text(path, 16 * MAX_PART)
        parts.append((f"outputs/{check}-{path.name}"[:99],
                      f"absent: {path} cannot be read\n" if text is None else text))
    absent = sorted(f"{name}: {text.splitlines()[0]}" for name, text in parts
                    if text.startswith("absent:"))

    # the cap: the summary's room first, then each part in order, each within its own
    # cap and what is left; a part that does not fit is named in the summary
    budget = int(inputs.max_bytes * 0.9) - _TAR_RECORD - 512 * 2 * (len(parts) + 1) - 20_000
    members: list[tuple[str, bytes]] = []
    left_out: list[str] = []
    for name, text in parts:
        data = tail(redact(text), min(MAX_PART, max(0, budget))).encode()
        if budget < 256:
            left_out.append(f"{name}: left out (size cap {inputs.max_bytes} bytes)")
            continue
        members.append((name, data))
        budget -= len(data)
    contents = [f"{name} ({len(data)} bytes)" for name, data in members] + left_out
    page = summary(inputs, decisions, facts, absent + left_out, contents)
    return Ticket([("summary.txt", redact(page).encode()), *members], decisions, left_out)


def archive(ticket: Ticket, node: str, mtime: int) -> bytes:
    """The members as a gzip'd tar, the same bytes for the same members: fixed order,
    mtime, owner and mode; gzip with no name and no time (``gzip -n``)."""
    raw = io.BytesIO()
    top = f"ocibench-ticket-{node}"
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in ticket.members:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


def write(path: Path, data: bytes) -> None:
    """``data`` to ``path`` whole (ocibench.atomic): never half of an archive."""
    atomic.replace(path, data, 0o644)
