"""nvbandwidth's copy-engine testcases and the pageable copy: a node's copy ceilings."""

from __future__ import annotations

import re
from typing import Any

from ocibench import benchmarks, metrics
from ocibench.figures.outputs.common import (
    UNITS,
    Measurement,
    NotThisOutput,
    SanityError,
    Unjudged,
    Values,
    failure_words,
    first_line,
    number,
)

#: Its failure words: a copy's data checked wrong (kernels.cu "Invalid value when
#: checking the pattern"), then its ASSERT macro exits (error_handling.h "ASSERT in
#: expression").
FAILED = failure_words(r"Invalid value when checking the pattern", r"ASSERT in expression")

#: The key of each ceiling -> (nvbandwidth's testcase, the copy it reads): the
#: testcases are NVIDIA/nvbandwidth's (v0.8 testcase.h); "pageable" is
#: ocibench.node.pageable_copy, since nvbandwidth copies from pinned memory only.
NVBANDWIDTH_CEILINGS = {
    "host_to_device": "host_to_device_memcpy_ce",
    "device_to_host": "device_to_host_memcpy_ce",
    "device_to_device_read": "device_to_device_memcpy_read_ce",
    "device_to_device_write": "device_to_device_memcpy_write_ce",
    "pageable_host_to_device": "pageable host_to_device",
    "pageable_device_to_host": "pageable device_to_host",
}
NVBANDWIDTH_KEYS = benchmarks.NVBANDWIDTH_KEYS
assert tuple(NVBANDWIDTH_CEILINGS) == NVBANDWIDTH_KEYS
#: The testcases a node with one GPU cannot run (nvbandwidth waives them).
_PEER_KEYS = ("device_to_device_read", "device_to_device_write")
#: "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)" (testcases_ce.cpp): the copy
#: goes from the row's device to the column's with "->", the other way with "<-".
_NVB_DESCRIPTION = re.compile(r"\b(CPU|GPU)\(row\) (->|<-) (CPU|GPU)\(column\).*\(GB/s\)")
_NVB_ERROR = re.compile(r"^(?:Error|ERROR|Waived): ?(.*)$")
_PAGEABLE = re.compile(r"^pageable (host_to_device|device_to_host) GPU (\d+): (\S+) GB/s\b")


def nvbandwidth_gpus(gpus_per_node: int) -> dict[str, tuple[int, int]]:
    """(source, destination) of each ceiling, as OMB's runs use the GPUs: H-D's device
    rank is rank 1 (GPU 1 % GPUs), D-H's rank 0 (GPU 0); D-D copies GPU 0 to GPU 1
    (checks/base.py host_device_cores).  -1 is the host."""
    h2d = 1 % gpus_per_node
    return {"host_to_device": (-1, h2d), "device_to_host": (0, -1),
            "device_to_device_read": (0, 1), "device_to_device_write": (0, 1),
            "pageable_host_to_device": (-1, h2d), "pageable_device_to_host": (0, -1)}


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    gpus = params["gpus_per_node"]
    keys = [k for k in NVBANDWIDTH_KEYS if gpus > 1 or k not in _PEER_KEYS]
    where = nvbandwidth_gpus(gpus)
    if not any(line.startswith("Running ") for line in lines) \
            and not any(line.startswith(("nvbandwidth Version", "pageable ")) for line in lines):
        raise NotThisOutput(f"not nvbandwidth output: no 'Running <testcase>.' line "
                       f"(first line {first_line(lines)})")
    # The check's output (nvbandwidth, then the pageable copy) must hold every ceiling.
    # nvbandwidth's own output, run by hand with the testcases its user chose (-t),
    # has no pageable step: the copy-engine figures it holds are recorded.
    pageable = any(line.startswith(("pageable ", "pageable_copy: ")) for line in lines)
    if not pageable:
        keys = [k for k in keys if not k.startswith("pageable_")
                and _nvb_ran(lines, NVBANDWIDTH_CEILINGS[k])]
        if not keys:
            raise Unjudged(f"{check}: none of the copy-engine testcases "
                           f"{', '.join(NVBANDWIDTH_CEILINGS[k] for k in NVBANDWIDTH_KEYS[:4])} "
                           "in this nvbandwidth output")
    values: Values = {}
    for key in keys:
        testcase = NVBANDWIDTH_CEILINGS[key]
        if key.startswith("pageable_"):
            values[key] = _pageable(check, lines, testcase, where[key])
        else:
            values[key] = _nvb_testcase(check, lines, testcase, where[key])
    return Measurement(check, "bandwidth", UNITS["bandwidth"],
                       {k: metrics.convert(v, "GB/s", UNITS["bandwidth"])
                        for k, v in values.items()})


def _nvb_ran(lines: list[str], testcase: str) -> bool:
    """Whether ``lines`` hold ``testcase``: its 'Running <testcase>.' line, or, where a
    paste left that out, its 'SUM <testcase> <total>' line."""
    return f"Running {testcase}." in lines \
        or any(line.startswith(f"SUM {testcase} ") for line in lines)


def _nvb_testcase(check: str, lines: list[str], testcase: str,
                  copy: tuple[int, int]) -> float:
    """GB/s of the copy from device copy[0] to copy[1] (-1: the host) in nvbandwidth's
    matrix of ``testcase`` (inline_common.h: a header of column indices, one row per
    source or target, then 'SUM <testcase> <total>')."""
    running = f"Running {testcase}."
    body: list[str] | None = None
    if running in lines:
        body = lines[lines.index(running) + 1:]
    elif _nvb_ran(lines, testcase):
        # A paste that left the 'Running' line out ("..."): the testcase's matrix is the
        # one above its 'SUM <testcase>' line, unless a waiver stands in its place.
        total = next(i for i, line in enumerate(lines) if line.startswith(f"SUM {testcase} "))
        start = max((i + 1 for i, line in enumerate(lines[:total])
                     if line.startswith(("Running ", "SUM "))), default=0)
        if not any(_NVB_ERROR.match(line) for line in lines[start:total]):
            body = lines[start:]
    if body is None:
        raise SanityError(f"{check}: no {running!r} (not run, or waived: nvbandwidth "
                          "waives a peer copy where the GPUs have no peer access)")
    end = next((i for i, line in enumerate(body) if line.startswith(("Running ", "SUM "))),
               len(body))
    failed = next((m.group(0) for m in map(_NVB_ERROR.match, body[:end]) if m), None)
    if failed:
        raise SanityError(f"{check}: {testcase}: {failed!r}")
    if end < len(body) and not body[end].startswith(f"SUM {testcase} "):
        raise SanityError(f"output truncated: no 'SUM {testcase}' after {running!r}")
    # At the end of the output the SUM line may be left out of a paste (nvbandwidth's
    # README shows its matrices so): the matrix is read if the row is whole.
    found = next((m for m in map(_NVB_DESCRIPTION.search, body[:end]) if m), None)
    if found is None:
        raise SanityError(f"{check}: {testcase}: no 'memcpy CE ... (GB/s)' description")
    source, target = copy if found.group(2) == "->" else copy[::-1]
    row_index, column = max(source, 0), max(target, 0)
    table = [line.split() for line in body[:end] if line]
    header = next((cells for cells in table if cells and all(c.isdigit() for c in cells)), None)
    if header is None or str(column) not in header:
        raise SanityError(f"{check}: {testcase}: no column for device {column}")
    row = next((cells for cells in table if len(cells) == len(header) + 1
                and cells[0] == str(row_index)), None)
    if row is None:
        raise SanityError(f"{check}: {testcase}: no row for device {row_index}")
    value = row[1 + header.index(str(column))]
    if value == "N/A":
        raise SanityError(f"{check}: {testcase}: N/A from {source} to {target}")
    return number(value, f"{testcase} {source}->{target}")


def _pageable(check: str, lines: list[str], testcase: str, copy: tuple[int, int]) -> float:
    gpu = str(max(copy))
    direction = testcase.split()[1]
    for found in map(_PAGEABLE.match, lines):
        if found and found.group(1) == direction and found.group(2) == gpu:
            return number(found.group(3), testcase)
    failed = next((line for line in lines if line.startswith("pageable_copy: ")), None)
    raise SanityError(f"{check}: {failed}" if failed else
                      f"{check}: no '{testcase} GPU {gpu}: ... GB/s' line "
                      "(python3 -m ocibench.node.pageable_copy)")

