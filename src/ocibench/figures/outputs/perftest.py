"""perftest (ib_write_bw, ib_write_lat, ...): the best of a run's attempts at one size."""

from __future__ import annotations

import re
from typing import Any

from ocibench import accelerators, benchmarks, metrics
from ocibench.figures.outputs.common import (
    Measurement,
    NotThisOutput,
    SanityError,
    Unjudged,
    expect_count,
    first_line,
    number,
    table_rows,
)

#: Each check's title (benchmarks.CheckSpec.title) is the line ctx_print_test_info
#: prints (perftest src/perftest_parameters.c): "RDMA_Write BW Test".
#: The results header (RESULT_FMT, RESULT_FMT_G, RESULT_FMT_LAT, RESULT_FMT_LAT_DUR in
#: src/perftest_parameters.h): "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]
#: MsgRate[Mpps]" (with --report_gbits), the same in MB/sec (4.x) or MiB/sec (since
#: perftest commit 1d202bb "Display proper unit for MiB/sec results"); "#bytes
#: #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] ..." and, with -D,
#: "#bytes #iterations t_avg[usec] tps average".
_PERFTEST_HEADER = re.compile(r"^#bytes\s+#iterations\s+(BW peak\[(\w+)/sec\]|t_\w+\[usec\])")
#: Gb/s per unit of each BW header: perftest divides bytes/s by 125000000 for Gb/sec
#: and by 0x100000 for MB/sec and MiB/sec alike (print_report_bw, format_factor), so
#: its MB is 2^20 bytes and the conversion is exact.
_PERFTEST_GBITS = {"Gb": 1.0, "MB": 2**20 * 8 / 1e9, "MiB": 2**20 * 8 / 1e9}
_PERFTEST_PEAK, _PERFTEST_AVERAGE = 2, 3   # columns of a BW row
#: perftest's own failure messages (stderr), as its sources print them.
_PERFTEST_ERRORS = re.compile(
    r"^(Did not detect devices|Unable to find the Infiniband/RoCE device|"
    r"Couldn't .*|Failed to .*|Unable to .*|Error: .*|.* aborting \.\.\.)$")
_PERFTEST_RULE = re.compile(r"^-{20,}$")
#: Any perftest title ("RDMA_Write Bidirectional BW Test", "Send Latency Test", ...).
_PERFTEST_OTHER_TITLE = re.compile(r"^[\w ]+ (?:BW|Latency) Test$")
_PERFTEST_DEVICE = re.compile(r"Device\s*:\s*(\S+)")
_PERFTEST_QPS = re.compile(r"^Number of qps\s*:\s*(\d+)")
#: What perftest prints when its buffers are a GPU's memory (--use_<buffer flag>), by
#: vendor: the row's ``perftest_gpu_banner``.
_PERFTEST_GPU_BUFFERS = {a.vendor: re.compile(f"^(?:{a.perftest_gpu_banner})$")
                         for a in accelerators.VENDORS.values() if a.perftest_gpu_banner}


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    error = next((line for line in lines if _PERFTEST_ERRORS.match(line)), None)
    if error:
        raise SanityError(f"{check} failed: {error!r}")
    title = benchmarks.CHECKS[check].title
    starts = [i for i, line in enumerate(lines) if line == title]
    if not starts:
        other = next((line for line in lines if _PERFTEST_OTHER_TITLE.match(line)), None)
        mode = _perftest_mode(title, other)
        if mode:
            raise Unjudged(f"{check}: the title {other!r} is {check} run {mode}; the "
                           f"figures are its plain run ({title!r})")
        raise NotThisOutput(f"not {check} output: no {title!r} title "
                       + (f"(its title is {other!r})" if other else
                          f"(first line {first_line(lines)})"))
    expect_count(check, "runs (attempts)", params["attempts"], len(starts))
    runs = [lines[start:end] for start, end in zip(starts, starts[1:] + [len(lines)])]
    best = [_perftest_run(check, run, params) for run in runs]
    spec = benchmarks.CHECKS[check]
    # the best of the attempts, as OCI retries
    pick = max if metrics.metric(spec.metric).higher_is_better else min
    size = params["size"]
    # GPUDirect RDMA moves the data between the NIC and a GPU: sane, but another path
    # than the host-memory runs the figures document.
    gpu = next(((line, vendor) for line in lines
                for vendor, banner in _PERFTEST_GPU_BUFFERS.items() if banner.match(line)),
               None)
    method = (f"the buffers were GPU memory ({gpu[0]!r}: perftest "
              f"--use_{accelerators.VENDORS[gpu[1]].buffer_flag}), where the figures are "
              f"host memory: to compare, run {check} without it" if gpu else None)
    return Measurement(check, spec.metric, spec.figure_unit, {size: pick(best)},
                       method=method)


#: The words ctx_print_test_info (src/perftest_parameters.c) adds to a test's title for
#: a mode, and the option that asks for it (its usage text in the same file).
_PERFTEST_MODES = {"Bidirectional": "-b (--bidirectional)", "Post List": "-l (--post_list)",
                   "forwarding": "-v (--mac_fwd)", "Multicast": "-g (--mcg)"}


def _perftest_mode(title: str, other: str | None) -> str | None:
    """How ``other`` is ``title``'s test in another mode ("with -b (--bidirectional)"),
    or None where it is another test (another verb, BW against Latency)."""
    if other is None or other.split()[0] != title.split()[0] \
            or title.split()[1] not in other.split():
        return None
    modes = [flag for word, flag in _PERFTEST_MODES.items() if word in other]
    return "with " + ", ".join(modes) if modes else "in another mode"


def _perftest_run(check: str, lines: list[str], params: dict[str, Any]) -> float:
    """The judged value of one complete run, in the unit of its figures: a bandwidth
    test's BW peak, or a latency test's column its registry entry names (t_avg), at the
    size the figure documents (one row of a run with -s, or of an -a sweep)."""
    spec = benchmarks.CHECKS[check]
    bandwidth = spec.metric == "bandwidth"
    device = next((m.group(1) for m in map(_PERFTEST_DEVICE.search, lines) if m), None)
    if params.get("device") and device != params["device"]:
        raise SanityError(f"{check}: ran on device {device}, not {params['device']}")
    if "qps" in params:
        qps = next((m for m in map(_PERFTEST_QPS.match, lines) if m), None)
        expect_count(check, "queue pairs", params["qps"], int(qps.group(1)) if qps else 0)
    header = next((i for i, line in enumerate(lines) if _PERFTEST_HEADER.match(line)), None)
    if header is None:
        raise SanityError(f"output truncated: missing the '#bytes #iterations' header of {check}")
    match = _PERFTEST_HEADER.match(lines[header])
    end = next((i for i, line in enumerate(lines) if i > header and _PERFTEST_RULE.match(line)),
               None)
    closed = end is not None
    rows = table_rows(lines[header + 1:end])
    if not closed and len(rows) > 1 and len({row[0] for row in rows}) == 1:
        # --run_infinitely reports the same size every few seconds until it is stopped:
        # it never prints the closing line, and its peak is not measured (noPeak).
        raise Unjudged(f"{check}: {len(rows)} results lines at size {rows[0][0]} and no "
                       "closing line: a --run_infinitely run, which reports until it is "
                       "stopped; the figures are a run that ends (without --run_infinitely)")
    if not closed:
        raise SanityError(f"output truncated: no closing line after the {check} results")
    if bandwidth:
        if not match.group(2):
            raise Unjudged(f"{check}: the header {lines[header]!r} is not a bandwidth's")
        factor = _PERFTEST_GBITS.get(match.group(2))
        if factor is None:
            raise Unjudged(f"{check}: the header {lines[header]!r} is in {match.group(2)}/sec, "
                           "a unit this parser does not know")
        column, unit = _PERFTEST_PEAK, "Gb/s"
    else:
        names, judged = lines[header].split(), spec.columns[spec.metric]
        if judged not in names:
            raise Unjudged(f"{check}: the header {lines[header]!r} has no {judged}, "
                           "the column OCI's floor judges")
        factor, column, unit = 1.0, names.index(judged), "us"   # t_*[usec]
    needed = max(column, _PERFTEST_AVERAGE) if bandwidth else column
    if any(len(row) <= needed for row in rows):
        raise SanityError(f"{check}: a results line has fewer than {needed + 1} columns")
    size = params["size"]
    seen = [int(row[0]) for row in rows]
    if len(set(seen)) != len(seen):
        raise SanityError(f"{check}: a message size appears twice in one run's results")
    if size not in seen:
        shown = ", ".join(map(str, seen[:8])) + (", ..." if len(seen) > 8 else "")
        raise Unjudged(f"{check}: no results line for size {size} (the run measured "
                       f"{shown or 'no size'}); the figures are at -s {size}: give "
                       f"--set size=N for the size the run measured")
    row = rows[seen.index(size)]
    value = number(row[column], size)
    if bandwidth and value == 0:
        # -D (duration) and --noPeak print "BW peak 0.00" (print_report_bw: peak_up is
        # !noPeak * ...) and the measured bandwidth as the average.
        value = number(row[_PERFTEST_AVERAGE], size)
    return metrics.convert(value * factor, unit, spec.figure_unit)

