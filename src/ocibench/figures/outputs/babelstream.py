"""BabelStream: the GPUs' memory bandwidth, the slowest GPU's value of each kernel."""

from __future__ import annotations

import re
from typing import Any

from ocibench import accelerators, benchmarks
from ocibench.figures.outputs.common import (
    UNITS,
    Measurement,
    NotThisOutput,
    SanityError,
    Unjudged,
    Values,
    expect_count,
    first_line,
    method_differs,
    number,
)

BABELSTREAM_KERNELS = benchmarks.BABELSTREAM_KERNELS
#: The banner of each version (src/main.cpp: "BabelStream" since v3.0, "GPU-STREAM"
#: before).
_BABEL_BANNER = re.compile(r"^(?:BabelStream|GPU-STREAM)$")
#: The table header, in the unit the run printed: "Function    MBytes/sec  Min (sec)
#: Max  Average" (v1.0 to v5.0; "MiBytes/sec" with --mibibytes, v4.0 on), "Function
#: MB/s  Min (sec) ..." (after v5.0: MB, MiB, GB, GiB, TB, TiB from src/Unit.h).
_BABEL_HEADER = re.compile(r"^Function\s+(\S+?)/s(?:ec)?\s+Min \(sec\)")
#: --csv (v4.0 on): "function,num_times,n_elements,sizeof,max_mbytes_per_sec,..."
#: ("max_MB_per_sec" after v5.0).
_BABEL_CSV_HEADER = re.compile(r"^function,num_times,n_elements,sizeof,max_(\w+?)_per_sec,")
#: MB/s (10^6 bytes a second, the unit of AMD's floors) per unit of each header.
_BABEL_MBS = {"mbytes": 1.0, "mb": 1.0, "mibytes": 2**20 / 1e6, "mib": 2**20 / 1e6,
              "gb": 1e3, "gib": 2**30 / 1e6, "tb": 1e6, "tib": 2**40 / 1e6}
_BABEL_ROW = re.compile(r"^(" + "|".join(BABELSTREAM_KERNELS) + r")\s+(\S+)\s+\S+\s+\S+\s+\S+$")
_BABEL_CSV_ROW = re.compile(r"^(" + "|".join(BABELSTREAM_KERNELS) + r"),\d+,\d+,\d+,([^,]+),")
#: The model: "Implementation: HIP" in the banner, and "Using HIP device <name>" (the
#: model's constructor, src/hip/HIPStream.cpp, src/cuda/CUDAStream.cu), which --csv,
#: printing no banner, still prints.
_BABEL_IMPLEMENTATION = re.compile(r"^(?:Implementation:\s*(\S+)|Using (\S+) device )")
#: check_solution's messages (src/main.cpp), on stderr: the kernels computed wrong values.
_BABEL_INVALID = re.compile(r"^Validation failed on .*")
#: --triad-only (v4.0 to v5.0, src/main.cpp run_triad): "Running triad <n> times", then
#: no kernel rows under the table's header but "Bandwidth (GB/s):  2932.373" ("GiB/s"
#: with --mibibytes), or with --csv a row "Triad,<n>,<elements>,<sizeof>,<GB/s>,<s>"
#: under "function,num_times,n_elements,sizeof,gbytes_per_sec,runtime".  That bandwidth
#: is the <n> runs' total bytes over their total time: their mean, where the table's
#: MBytes/sec (what a figure documents) is the best run's.
_BABEL_TRIAD_ONLY = re.compile(r"^Running triad \d+ times")
_BABEL_TRIAD_BANDWIDTH = re.compile(r"^Bandwidth \((GB|GiB)/s\):\s+(\S+)$")
_BABEL_TRIAD_CSV = re.compile(r"^function,num_times,n_elements,sizeof,(gbytes|gibytes)_per_sec,"
                              r"runtime$")
_BABEL_TRIAD_CSV_ROW = re.compile(r"^Triad,\d+,\d+,\d+,([^,]+),[^,]+$")


def _babelstream_triad_only(check: str, lines: list[str]) -> Measurement:
    """A --triad-only run: its mean Triad bandwidth, shown and never compared."""
    printed = []
    for index, line in enumerate(lines):
        found = _BABEL_TRIAD_BANDWIDTH.match(line)
        if found:
            printed.append((found.group(1), found.group(2)))
        csv = _BABEL_TRIAD_CSV.match(line)
        row = _BABEL_TRIAD_CSV_ROW.match(lines[index + 1]) if csv and index + 1 < len(lines) \
            else None
        if row:
            printed.append(("GB" if csv.group(1) == "gbytes" else "GiB", row.group(1)))
    if len(printed) != 1:
        raise SanityError(f"babelstream: a --triad-only run ('Running triad ... times') with "
                          f"{len(printed)} 'Bandwidth (GB/s):' lines, not one (an output cut "
                          "short, or two runs)")
    unit, value = printed[0]
    mbs = number(value, "Triad") * _BABEL_MBS[unit.lower()]
    return Measurement(check, "bandwidth", UNITS["bandwidth"], {"Triad": mbs},
                       method=("a --triad-only run: its bandwidth is the mean of its runs "
                               "(total bytes over total time), the figures' the best run's "
                               "('Function MBytes/sec' table); run it without --triad-only"))


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    if any(_BABEL_TRIAD_ONLY.match(line) for line in lines):
        return _babelstream_triad_only(check, lines)
    headers = [_BABEL_HEADER.match(line) or _BABEL_CSV_HEADER.match(line) for line in lines]
    headers = [found for found in headers if found]
    if not headers:
        if not any(_BABEL_BANNER.match(line) for line in lines):
            raise NotThisOutput(f"not BabelStream output: no 'BabelStream' banner and no "
                           f"'Function MBytes/sec' table (first line {first_line(lines)})")
        raise SanityError("output truncated: BabelStream printed no 'Function MBytes/sec' "
                          "table")
    invalid = next((line for line in lines if _BABEL_INVALID.match(line)), None)
    if invalid:
        raise SanityError(f"babelstream: {invalid!r} (its kernels computed wrong values)")
    units = {found.group(1) for found in headers}
    if len(units) > 1:
        raise Unjudged(f"babelstream: the tables are in different units "
                       f"({', '.join(sorted(units))})")
    unit = units.pop()
    factor = _BABEL_MBS.get(unit.lower())
    if factor is None:
        raise Unjudged(f"babelstream: the header {headers[0].group(0)!r} is in {unit}/s, "
                       "a unit this parser does not know")
    tables = len(headers)
    if "gpus" in params:
        expect_count(check, "result tables (one per GPU: gpus)", params["gpus"], tables)
    found: dict[str, list[str]] = {}
    for line in lines:
        row = _BABEL_ROW.match(line) or _BABEL_CSV_ROW.match(line)
        if row:
            found.setdefault(row.group(1), []).append(row.group(2))
    if not found:
        raise SanityError("output truncated: no kernel line (Copy, Mul, Add, Triad, Dot) "
                          "after BabelStream's 'Function' header")
    values: Values = {}
    for kernel, printed in found.items():
        if len(printed) != tables:
            raise SanityError(f"babelstream: {len(printed)} '{kernel}' lines for {tables} "
                              "result tables (an output cut short, or two runs)")
        # AMD's floor holds for every GPU: the slowest one's is the node's value
        values[kernel] = min(number(value, kernel) for value in printed) * factor
    implementation = {(m.group(1) or m.group(2)).lower()
                      for m in map(_BABEL_IMPLEMENTATION.match, lines) if m}
    vendor = next((a.vendor for a in accelerators.VENDORS.values()
                   if {a.babelstream_model} == implementation), None)
    method = None
    single = "Precision: float" in lines
    if single:
        method = ("BabelStream ran in single precision ('Precision: float', --float); the "
                  "figures are double precision, its default")
    devices = [m for m in map(_BABEL_DEVICE.match, lines) if m]
    device = devices[0] if len({m.group(1) for m in devices}) == 1 else None
    return Measurement(check, "bandwidth", UNITS["bandwidth"], values, vendor=vendor,
                       method=method or _babelstream_method(check, lines, 4 if single else 8),
                       device=device.group(1) if device else None,
                       device_line=device.group(0) if device else None)


_BABEL_VERSION = re.compile(r"^Version:\s*(\d+)(?:\.\S*)?$")
#: "Array size: 2147.5 MB (=2.1 GB)": the bytes of one array, one decimal, in the unit
#: of the run (MB, or MiB with --mibibytes; src/Unit.h after 5.0 adds GB, TB ...); 6.0
#: also prints "Number of elements: N".  --csv prints n_elements in every row.
_BABEL_ARRAY = re.compile(r"^Array size:\s*([0-9.]+)\s*(KB|KiB|MB|MiB|GB|GiB|TB|TiB)\b")
_BABEL_ELEMENTS = re.compile(r"^Number of elements:\s*(\d+)$")
_BABEL_CSV_ELEMENTS = re.compile(r"^(?:" + "|".join(BABELSTREAM_KERNELS) + r"),\d+,(\d+),")
_BYTES_PER_UNIT = {"KB": 1e3, "KiB": 2**10, "MB": 1e6, "MiB": 2**20, "GB": 1e9,
                   "GiB": 2**30, "TB": 1e12, "TiB": 2**40}
#: "Using HIP device AMD Instinct MI300X" (each model's constructor).
_BABEL_DEVICE = re.compile(r"^Using \S+ device (.+?)\s*$")


def _babelstream_method(check: str, lines: list[str], width: int) -> str | None:
    """How the run's array size and version differ from the figures' command (-s, and
    the registry's version), each quoting its line; None where they agree or where
    the output does not print them."""
    elements = int(benchmarks.command_option(check, "-s") or 0)
    version = benchmarks.CHECKS[check].method["version"]
    fields = []
    counted = next((m for m in map(_BABEL_ELEMENTS.match, lines) if m), None) \
        or next((m for m in map(_BABEL_CSV_ELEMENTS.match, lines) if m), None)
    array = next((m for m in map(_BABEL_ARRAY.match, lines) if m), None)
    if counted and int(counted.group(1)) != elements:
        fields.append(f"arrays of {counted.group(1)} elements ({counted.group(0)!r}), the "
                      f"figures' -s {elements}")
    elif array and not counted:
        expected = elements * width / _BYTES_PER_UNIT[array.group(2)]
        # printed with one decimal: within half of its last digit
        if abs(float(array.group(1)) - expected) > 0.05 + 1e-9:
            fields.append(f"arrays of {array.group(1)} {array.group(2)} ({array.group(0)!r}), "
                          f"the figures' -s {elements} is {expected:.1f} {array.group(2)}")
    found = next((m for m in map(_BABEL_VERSION.match, lines) if m), None)
    if found and found.group(1) != version:
        fields.append(f"version {found.group(0)[len('Version:'):].strip()} "
                      f"({found.group(0)!r}), the figures' BabelStream {version}")
    return method_differs(check, fields)

