"""nccl-tests (and rccl-tests) all_reduce_perf: its text output and its -J JSON file."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ocibench import accelerators, benchmarks, metrics
from ocibench.figures.outputs.common import (
    UNITS,
    Measurement,
    NotThisOutput,
    SanityError,
    Unjudged,
    Values,
    elision_line,
    expect_count,
    failure_words,
    first_line,
    number,
    output_lines,
    size_table,
    with_markdown_hashes,
)

#: Its programs' failure words (read once the output is recognised as nccl-tests'):
#: CUDACHECK / NCCLCHECK (src/common.h: "Test CUDA failure", "Test NCCL failure";
#: rccl-tests words HIP's the same) and its "Test failure" exit.  A library's warning is
#: no failure of its own: RCCL's "NCCL WARN pfn_hsa_system_get_info failed" is printed
#: on every healthy ROCm 7 node that runs with NCCL_DEBUG=WARN or INFO (its DMA-BUF
#: probe, src/misc/rocm_wrap.cc), and a collective that really failed ends nccl-tests
#: with "Test NCCL failure" or leaves its table unfinished.
FAILED = failure_words(*sorted({f"(?i){re.escape(a.runtime_failure)}"
                                for a in accelerators.VENDORS.values()}),
                       r"(?i)nccl failure", r"Test failure")

#: One line per GPU: "#  Rank %2d Group %2d Pid %6d on %10s device %2d [...]" since
#: 2.13.13 (src/common.cu, then src/util.cu writeDeviceReport); "#   Rank %2d Pid %6d
#: on %10s device %2d [...]" before (v2.0.0 to v2.13.12).  "Rank" is the NCCL rank,
#: one per GPU; a process driving k GPUs (-g k or -t k) prints k lines with its one
#: Pid, so MPI ranks are the distinct (host, Pid) pairs.
NCCL_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)"
                        r"\s+device\s+(\d+)")
#: A results line: size count type redop [root] ... (writeBenchmarkLinePreamble:
#: "%12li  %12li  %8s  %6s  %6s"; no root column before 2.13).
_NCCL_ROW = re.compile(r"^\d+\s+\d+\s+[A-Za-z]\w*\s+[A-Za-z]\w*\s")
_NCCL_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\S+)\s+(\S+)")
#: The mean busbw over every size, out of place and in place (nccl-tests' common.cu);
#: oci-hpc's health checks judge this number.
_NCCL_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
#: Lines nccl-tests prints before its table, whatever its version.
_NCCL_PREAMBLE = re.compile(r"^#\s*(?:nThread\s+\d+|Using devices|Collective test starting)")
NCCL_COLUMNS = benchmarks.NCCL_COLUMNS
#: The binary that ran, as nccl-tests names it since 2.17 (util.cu writeDeviceReport:
#: "# Collective test starting: %s", the basename of argv[0]: all_reduce_perf, or
#: all_reduce_perf_mpi as NGC's containers build it).
_NCCL_TEST = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
#: Its last line since 2.17, after the averages: "# Collective test concluded: <name>".
_NCCL_CONCLUDED = re.compile(r"^#\s*Collective test concluded:")
#: Bytes per element of the types nccl-tests prints (common.cu test_typenames; "char"
#: and "int" before NCCL 2).
_NCCL_TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1,
                    "half": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "int": 4,
                    "float": 4, "int64": 8, "uint64": 8, "double": 8}
#: common.cu, when -e does not fit the GPU's memory: "# Reducing maxBytes to %ld due to
#: memory limitation"; the sizes stop below -e.
_NCCL_CAP = re.compile(r"^#\s*Reducing maxBytes to (\d+)")


@dataclass(frozen=True)
class _NcclRow:
    """One results line (or -J record): busbw and the check column, out of place and
    in place.  ``check`` is "#wrong" (a count of wrong elements, since 2.13), "error"
    (the largest relative error, before 2.13) or None (-c 0: "N/A", JSON null)."""

    size: int
    busbw: tuple[str, str]
    wrong: tuple[str | None, str | None]
    check: str | None
    where: str
    #: algbw, out of place and in place: the value of a one-rank run, whose busbw is 0
    algbw: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class _NcclGpu:
    rank: int
    pid: str
    host: str
    device: str


#: The lines nccl-tests starts with '#' (its preamble, rank lines, table header and
#: trailer), as they read where Markdown took the '#' for a heading: a paste outside a
#: code block on a web page or an issue shows "nThread 1 nGpus 1 ..." and "Avg bus
#: bandwidth : 12.3" without it.
_NCCL_HASHLESS = re.compile(
    r"^(?:nThread\s+\d+\s+nGpus|Using devices$|Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s"
    r"|size\s+count\s+type|\(B\)\s+\(elements\)|out-of-place\s+in-place"
    r"|Out of bounds values\s*:|Avg bus bandwidth\s*:|Collective test (?:starting|concluded):"
    r"|nccl-tests version\s|Errors with asterisks)")
#: Its preamble (or its table's header) and its trailer: both must be there to read
#: such a paste.
_NCCL_HASHLESS_NEEDED = (re.compile(r"^(?:nThread\s+\d+\s+nGpus|size\s+count\s+type\s+redop)"),
                         re.compile(r"^(?:Out of bounds values|Avg bus bandwidth)\s*:"))


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    lines = with_markdown_hashes(lines, _NCCL_HASHLESS, _NCCL_HASHLESS_NEEDED)
    headers = [i for i, line in enumerate(lines) if _nccl_header(line)]
    oobs = [m for m in map(_NCCL_OOB.match, lines) if m]
    known = headers or oobs or any(map(_NCCL_PREAMBLE.match, lines)) \
        or any(map(NCCL_RANK.match, lines))
    if not known:
        raise NotThisOutput(f"not an nccl-tests output: no '# Using devices', no '# size "
                            f"count type redop' header, no '# Out of bounds values' (first "
                            f"line {first_line(lines)})")
    # Which test ran, before anything is counted: another test's output is never failed
    # for its ranks or its end.
    banners = [(m.group(1), repr(m.group(0))) for m in map(_NCCL_TEST.match, lines) if m]
    test = banners[0] if banners else None
    names = list(dict.fromkeys(name for name, _ in banners))
    if len(names) > 1 and any(name.startswith("all_reduce_perf") for name in names):
        # a script that runs several tests one after another (all_reduce_perf, then
        # all_gather_perf ...): their tables are other collectives, not other types
        raise Unjudged(f"{check}: {len(banners)} runs in one output ({', '.join(names)}); "
                       "give the all_reduce_perf run alone")
    _nccl_all_reduce(check, test, [])
    columns = lines[headers[0]].lstrip("#").split() if headers else []
    if headers and "redop" not in columns:
        # every all_reduce_perf prints its reduction; before 2.13 the other tests
        # (all_gather_perf, broadcast_perf ...) printed no redop column at all
        raise NotThisOutput(f"{check}: the header {lines[headers[0]][:120]!r} has no redop "
                            "column: not all_reduce_perf's")
    row_lines = [line for line in lines[headers[0] + 1:] if _NCCL_ROW.match(line)] \
        if headers else []
    _nccl_all_reduce(check, test, [(f"line {line[:120]!r}", dict(zip(columns, line.split())))
                                   for line in row_lines])
    runs = max(len(headers), len(oobs), sum(1 for line in lines if line.startswith("# nThread")))
    gpus = [_NcclGpu(int(m.group(1)), m.group(2), m.group(3), m.group(4))
            for m in map(NCCL_RANK.match, lines) if m]
    if runs > 1:
        raise Unjudged(_nccl_alone(check, gpus, runs)
                       or f"{check}: {runs} runs in one output; give one run")
    if not oobs and not gpus and not any(map(_NCCL_PREAMBLE.match, lines)):
        # A run prints its preamble before its table: with neither its start nor its end,
        # the text is a paste cut at both ends, not a run that stopped.
        raise Unjudged(f"{check}: the results table alone (no '# nThread', no '# Using "
                       "devices', no '# Out of bounds values'): a piece of an output, cannot "
                       "tell whether the run ended")
    avg = next((m for m in map(_NCCL_AVG.match, lines) if m), None)
    # nccl-tests prints its header, its rows, then '# Out of bounds values' and '# Avg bus
    # bandwidth' as it ends: a later line without an earlier one is a paste with lines
    # left out (a run that stopped prints nothing after where it stopped), never a run
    # that died.
    if not oobs and avg is not None:
        raise Unjudged(f"{check}: {avg.group(0)!r} without the '# Out of bounds values' line "
                       "nccl-tests prints before it: lines were left out of this paste; give "
                       "the whole output")
    if not oobs:
        raise SanityError("output truncated: missing '# Out of bounds values'")
    if not headers:
        raise Unjudged(f"{check}: the end of a results table ({oobs[0].group(0)!r}) without "
                       "its '# size count type redop' header: the paste starts inside the "
                       "table; give the whole output")
    if avg is None:
        ended = next((line for line in lines[lines.index(oobs[0].string) + 1:]
                      if _NCCL_CONCLUDED.match(line)), None)
        if ended:
            raise Unjudged(f"{check}: {ended!r} without the '# Avg bus bandwidth' line "
                           "nccl-tests prints before it: lines were left out of this paste; "
                           "give the whole output")
        raise SanityError("output truncated: missing '# Avg bus bandwidth'")
    whole = any(line.startswith("# Using devices") for line in lines)
    # The device list ends where the table begins: a "..." there is the author's cut
    # (AMD's acceptance page lists ranks 0 and 1 of 8, then "...").
    listed = lines[:headers[0]] if headers else lines
    elided = elision_line(listed[max((i for i, line in enumerate(listed)
                                      if NCCL_RANK.match(line)), default=len(listed)):])
    method = _nccl_ranks(check, gpus, params, whole, elided)
    rows = [_nccl_row(check, columns, line) for line in row_lines]
    _nccl_cap(check, lines, rows, params)
    oob = oobs[0]
    measured = _nccl_measurement(check, rows, (oob.group(1), oob.group(2)), avg.group(1),
                                 params, method)
    return replace(measured, vendor=collective_vendor(lines))


def _nccl_alone(check: str, gpus: list[_NcclGpu], runs: int) -> str | None:
    """Why several runs are in one output when each process ran alone: nccl-tests built
    without MPI (no MPI=1) and started by mpirun -np N runs N worlds of one process, each
    printing 'Rank 0' and its own table.  None where the rank lines do not show it."""
    alone = list(dict.fromkeys((gpu.host, gpu.pid) for gpu in gpus if gpu.rank == 0))
    if len(alone) < 2:
        return None
    if any((gpu.host, gpu.pid) not in alone for gpu in gpus):
        # a process that printed only ranks above 0 was one of several in one world:
        # the tables are runs one after another (a loop of launches), each of many
        # processes, not processes that each ran alone
        return None
    shown = ", ".join(f"Pid {pid} on {host}" for host, pid in alone[:4])
    return (f"{check}: {len(alone)} processes each ran alone as rank 0 ({shown}), with "
            f"{runs} tables: an nccl-tests build without MPI, started by mpirun -np "
            f"{len(alone)}; build it with MPI=1 (make MPI=1 MPI_HOME=...) so that the "
            "processes make one run, or run one process driving the GPUs with -g N")


def collective_vendor(lines: list[str]) -> str | None:
    """The vendor whose collective tests printed ``lines``, by the tests' banner
    ("# nccl-tests version 2.18.2 ...", nccl-tests src/common.cu since 2.18; "rccl-tests:
    Version develop:a52452e", ROCm/rccl-tests src/common.cu), else by the library's
    ("NCCL version 2.9.9+cuda11.2" with NCCL_DEBUG=VERSION; "RCCL version : 2.22.3"):
    each vendor's collective_tests_package, then its collective.  The banner goes first
    because RCCL keeps NCCL's names in its own logs.  None where no line says, or where
    two vendors do."""
    for names in ((v.collective_tests_package for v in accelerators.VENDORS.values()),
                  (v.collective for v in accelerators.VENDORS.values())):
        patterns = {vendor: re.compile(rf"{re.escape(name.lower())}:? version\b")
                    for vendor, name in zip(accelerators.VENDORS, names)}
        seen = {vendor for line in lines for vendor, pattern in patterns.items()
                if pattern.match(line.lstrip("# ").lower())}
        if seen:
            return seen.pop() if len(seen) == 1 else None
    return None


def _nccl_all_reduce(check: str, test: tuple[str, str] | None,
                     rows: list[tuple[str, Mapping[str, str]]]) -> None:
    """The output must be all_reduce_perf's: every nccl-tests binary prints the same
    banner and table, so an all_gather_perf or sendrecv_perf output would otherwise be
    read as an all-reduce's busbw.  ``test``: (the binary, where the output names it:
    the banner or -J's args, since 2.17); before it, the rows (where, {column: value})
    tell most others apart: all_reduce_perf reduces (redop is not "none", which
    all_gather, alltoall and broadcast print), has no root (-1; reduce and broadcast
    print theirs) and its count is the whole size (all_reduce.cu
    AllReduceGetCollByteCount), where reduce_scatter and all_gather print one rank's
    share.  (sendrecv_perf without its banner looks like all_reduce_perf on 2 ranks.)"""
    if test and not test[0].startswith("all_reduce_perf"):
        raise NotThisOutput(f"{check}: the output is {test[0]}'s ({test[1]}), not "
                       "all_reduce_perf's")
    # -d all / -o all run the sizes once per type or reduction (common.cu run()): one
    # busbw per size would otherwise be a median over them, which no figure measured.
    kinds = list(dict.fromkeys(f"{cells.get('type')} {cells.get('redop')}" for _, cells in rows))
    if len(kinds) > 1:
        raise Unjudged(f"{check}: the run measured {len(kinds)} data types or reductions "
                       f"({', '.join(kinds[:4])}{', ...' if len(kinds) > 4 else ''}: -d all or "
                       "-o all); give the run of one (-d float -o sum, nccl-tests' defaults)")
    for where, cells in rows:
        redop, root = cells.get("redop"), str(cells.get("root", "-1")).strip()
        if redop == "none" or root != "-1":
            raise NotThisOutput(f"{check}: the {where} is not an all-reduce's (redop {redop}, "
                           f"root {root}: all_gather, alltoall, broadcast or reduce print so)")
        width = _NCCL_TYPE_BYTES.get(str(cells.get("type", "")))
        if not width:
            continue
        try:
            count, size = int(cells["count"]), int(cells["size"])
        except (KeyError, TypeError, ValueError):
            raise Unjudged(f"{check}: the {where} has no whole count and size") from None
        if count * width != size:
            raise NotThisOutput(f"{check}: the {where} counts {cells['count']} {cells['type']} "
                           f"elements, not {cells['size']} bytes: one rank's share, as "
                           "reduce_scatter_perf prints it, not all_reduce_perf's whole buffer")


def _nccl_cap(check: str, lines: list[str], rows: list[_NcclRow],
              params: dict[str, Any]) -> None:
    """Name nccl-tests' own cap on the sizes when it is why sizes are missing."""
    cap = next((m for m in map(_NCCL_CAP.match, lines) if m), None)
    if cap is None:
        return
    seen = {row.size for row in rows}
    missing = [size for size in benchmarks.expected_sizes(check, params) if size not in seen]
    if missing and missing[0] > int(cap.group(1)):
        raise Unjudged(f"{check}: no line for message size {missing[0]}: nccl-tests capped "
                       f"the sizes for the GPUs' memory ({cap.group(0)!r}); give --set "
                       f"end={cap.group(1)} to read the sizes it measured")


def _nccl_header(line: str) -> bool:
    """The column-name line of the results table, e.g. "#  size  count  type  redop
    root  time  algbw  busbw  #wrong ..." (writeResultHeader, util.cu)."""
    return (line.startswith("#") and line.lstrip("#").split()[:2] == ["size", "count"]
            and "busbw" in line)


def _nccl_row(check: str, columns: list[str], line: str) -> _NcclRow:
    """Read ``line`` by the header's column names: every version's layout (with or
    without root, "error" or "#wrong", -I's i_min i_max i_p99 i_cv%, -S's timestamp,
    which prints as two tokens under one name)."""
    tokens = line.split()
    expected = len(columns) + (1 if columns[-1] == "timestamp" else 0)
    busbw = [i for i, name in enumerate(columns) if name == "busbw"]
    checks = [i for i, name in enumerate(columns) if name in ("#wrong", "error")]
    if len(tokens) != expected or len(busbw) != 2 or len(checks) != 2:
        raise Unjudged(f"{check}: the line {line[:120]!r} does not fit the header "
                       f"{' '.join(columns)!r}")
    wrong = tuple(None if tokens[i] == "N/A" else tokens[i] for i in checks)
    kind = columns[checks[0]] if any(w is not None for w in wrong) else None
    algbw = [i for i, name in enumerate(columns) if name == "algbw"]
    return _NcclRow(int(tokens[0]), (tokens[busbw[0]], tokens[busbw[1]]), wrong, kind,
                    line[:120], tuple(tokens[i] for i in algbw) if len(algbw) == 2
                    else ("", ""))


def _nccl_measurement(check: str, rows: list[_NcclRow], oob: tuple[str, str], avg: Any,
                      params: dict[str, Any], method: str | None) -> Measurement:
    """The busbw columns at the last size, from the rows of one run: each -N cycle
    (the size range again) is a sample, and the values are the samples' medians."""
    for row in rows:
        for value in row.wrong:
            if value is None:
                continue
            if row.check == "error":
                # before 2.13: the largest relative error, which rounding makes
                # non-zero; nccl-tests counts the real faults in "Out of bounds"
                number(value, f"error at {row.size}")
            elif value != "0":
                raise SanityError(f"nccl-tests: #wrong is {value} at {row.size}")
    if oob != ("0", "OK"):
        raise SanityError(f"nccl-tests: out of bounds values: {oob[0]} {oob[1]}")
    sizes = benchmarks.expected_sizes(check, params)
    if params["nodes"] * params["gpus_per_node"] == 1:
        return _nccl_one_rank(check, rows, sizes)
    cycles: list[list[_NcclRow]] = []
    for row in rows:
        if not cycles or row.size <= cycles[-1][-1].size:
            cycles.append([])
        cycles[-1].append(row)
    last = sizes[-1]
    samples: dict[str, list[float]] = {name: [] for name in NCCL_COLUMNS}
    for cycle in cycles or [[]]:
        table = [[str(row.size), *row.busbw] for row in cycle]
        for column, name in enumerate(NCCL_COLUMNS, start=1):
            samples[name].append(size_table(check, table, column, sizes)[last])
    values: Values = {name: statistics.median(found) for name, found in samples.items()}
    if len(sizes) > 1:
        # Over one size the average only repeats the mean of the two columns above.
        values["avg"] = number(str(avg), "avg")
    spread = {"busbw": {name: tuple(found) for name, found in samples.items()}} \
        if len(cycles) > 1 else {}
    return Measurement(check, "busbw", UNITS["busbw"], values, size=last, method=method,
                       samples=spread)


#: Why a one-rank run is recorded and never compared with a busbw figure.
NCCL_ONE_RANK = ("one rank: nccl-tests' all-reduce busbw is algbw x 2(n-1)/n, 0 by "
                 "definition for n = 1 (no data crosses a link); its out-of-place algbw "
                 "(a copy within the GPU) is recorded as a bandwidth, and busbw figures "
                 "need 2 ranks or more")


def _nccl_one_rank(check: str, rows: list[_NcclRow], sizes: list[int]) -> Measurement:
    """A one-rank run: its out-of-place algbw at the last size (the median over -N
    cycles), recorded as a bandwidth in MB/s.  Its busbw, 0 by definition, is neither
    read nor judged; nor is its in-place algbw, of an all-reduce that moves nothing
    (0.10 us at any size: "1e+06" GB/s, seen in published runs on an RTX 5090)."""
    last = sizes[-1]
    samples: dict[str, list[float]] = {name: [] for name in NCCL_COLUMNS}
    cycles: list[list[_NcclRow]] = []
    for row in rows:
        if not cycles or row.size <= cycles[-1][-1].size:
            cycles.append([])
        cycles[-1].append(row)
    for cycle in cycles or [[]]:
        table = [[str(row.size), *row.algbw] for row in cycle]
        if any(not cell for cells in table for cell in cells):
            raise Unjudged(f"{check}: {NCCL_ONE_RANK}; but the rows have no algbw columns")
        for column, name in enumerate(NCCL_COLUMNS, start=1):
            samples[name].append(size_table(check, table, column, sizes)[last])
    algbw = {name: metrics.convert(statistics.median(found), "GB/s", UNITS["bandwidth"])
             for name, found in samples.items() if name == "out_of_place"}
    return Measurement(check, "busbw", UNITS["busbw"], {}, extra={"bandwidth": algbw},
                       size=last, method=NCCL_ONE_RANK)


def _nccl_ranks(check: str, gpus: list[_NcclGpu], params: dict[str, Any],
                whole: bool = True, elided: str | None = None) -> str | None:
    """The device lines must show nodes x gpus_per_node GPUs, gpus_per_node on each of
    ``nodes`` hosts.  The seeds run one MPI rank (one Pid) per GPU (-g 1 -t 1); a run
    where one process drove several is sane but measured another way: the sentence
    returned says how, and the command line that would compare.

    ``whole``: the list is there from its "# Using devices" line.  A paste that starts
    below it has lost the first lines; rank 0 prints them in rank order, so the last
    one still shows how many ranks ran (the highest rank + 1), but not where.
    ``elided``: the line after the last rank line that marks lines left out ("..."):
    the ranks listed are then the first of more, read as a list with gaps."""
    nodes, per_node = params["nodes"], params["gpus_per_node"]
    if not whole:
        if not gpus:
            raise Unjudged(f"{check}: no '#  Rank ... device' lines and no '# Using devices' "
                           f"(the paste leaves them out): cannot tell whether "
                           f"{nodes * per_node} ranks ran")
        expect_count(check, "ranks", nodes * per_node, max(gpu.rank for gpu in gpus) + 1)
        return None
    ranks = sorted({gpu.rank for gpu in gpus})
    if ranks and (len(ranks) != ranks[-1] + 1 or elided):
        return _nccl_elided_ranks(check, ranks, gpus, params, elided)
    expect_count(check, "ranks", nodes * per_node, len(ranks))
    hosts: dict[str, int] = {}
    for gpu in gpus:
        hosts[gpu.host] = hosts.get(gpu.host, 0) + 1
    if len(hosts) != nodes or set(hosts.values()) != {per_node}:
        shown = ", ".join(f"{n} on {h}" for h, n in hosts.items())
        raise SanityError(f"{check}: expected {per_node} ranks on each of {nodes} node(s), "
                          f"saw {shown}")
    processes: dict[tuple[str, str], list[str]] = {}
    for gpu in gpus:
        processes.setdefault((gpu.host, gpu.pid), []).append(gpu.device)
    if len(processes) == len(gpus):
        return None
    (host, pid), devices = max(processes.items(), key=lambda item: len(item[1]))
    total = nodes * per_node
    command = (f"mpirun -np {total}" + (f" -N {per_node}" if nodes > 1 else "")
               + f" all_reduce_perf -b {params['begin']} -e {params['end']}"
               + f" -f {params['factor']} -g 1")
    return (f"one process drove {len(devices)} GPUs (Pid {pid} on {host}: devices "
            f"{', '.join(devices)}; nccl-tests -g or -t above 1), where the figures are "
            f"one MPI rank per GPU; to compare, run {command}")


def _nccl_elided_ranks(check: str, ranks: list[int], gpus: list[_NcclGpu],
                       params: dict[str, Any], elided: str | None = None) -> str | None:
    """A rank list with gaps: a paste that left lines out (OCI's own published runs list
    ranks 0, 7, 8 and 15 of 16), since nccl-tests prints every rank's line in order.
    The highest rank still says how many ran: the claimed count is read; one above it
    is proof of more ranks; one below cannot tell (the last lines may be left out too)."""
    total = params["nodes"] * params["gpus_per_node"]
    if ranks[-1] + 1 > total:
        expect_count(check, "ranks", total, ranks[-1] + 1)
    gaps = sorted(set(range(ranks[-1] + 1)) - set(ranks))
    if ranks[-1] + 1 < total and not gaps:
        raise Unjudged(f"{check}: the paste lists the '#  Rank' lines of ranks 0-{ranks[-1]}, "
                       f"then {elided!r}: cannot tell whether {total} ranks ran")
    if ranks[-1] + 1 < total:
        raise Unjudged(f"{check}: the paste leaves out the '#  Rank' lines of ranks "
                       f"{_spans(sorted(set(range(ranks[-1] + 1)) - set(ranks)))} and lists "
                       f"none above rank {ranks[-1]}: cannot tell whether {total} ranks ran")
    hosts = {gpu.host for gpu in gpus}
    if len(hosts) > params["nodes"]:
        raise SanityError(f"{check}: expected {params['nodes']} node(s), the rank lines name "
                          f"{len(hosts)}: {', '.join(sorted(hosts))}")
    return None


def _spans(numbers: list[int]) -> str:
    """[1, 2, 3, 5, 9, 10] -> '1-3, 5, 9-10'."""
    spans: list[list[int]] = []
    for value in numbers:
        if spans and value == spans[-1][1] + 1:
            spans[-1][1] = value
        else:
            spans.append([value, value])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


#: The most GPUs an nccl-tests -J file may list (config.devices x nthreads x ngpus):
#: far above any run (1,000 nodes x 8 GPUs is 8,000), and a bound on the list built.
MAX_NCCL_GPUS = 1 << 17


def parse_json(check: str, text: str, params: dict[str, Any]) -> Measurement:
    """nccl-tests' -J file (since 2.17.3; src/util.cu): {"version", "config": {...,
    "nthreads", "ngpus", "devices": [one per process]}, "results": [{"size",
    "out_of_place" / "in_place": {"bus_bw", "nwrong"}, ...}], "out_of_bounds":
    {"count"}, "average_bus_bandwidth": {"bandwidth"}}."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise Unjudged(f"{check}: a JSON nested too deep to be nccl-tests' -J file") from None
    except ValueError as err:
        if '"nccl_version"' in text or '"results"' in text:
            raise SanityError(f"{check}: nccl-tests' JSON output is truncated or damaged "
                              f"({getattr(err, 'msg', err)} at line "
                              f"{getattr(err, 'lineno', '?')})") from None
        raise NotThisOutput(f"{check}: not nccl-tests output and not JSON "
                       f"(first line {first_line(output_lines(text[:4096]))})") from None
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict) or not isinstance(doc.get("results"), list):
        raise NotThisOutput(f"{check}: a JSON without nccl-tests' 'config' and 'results': "
                       "not its -J output")
    if "out_of_bounds" not in doc or "average_bus_bandwidth" not in doc:
        raise SanityError(f"{check}: nccl-tests' JSON output ends before its "
                          "'out_of_bounds' and 'average_bus_bandwidth' (the run stopped)")
    try:
        per_process = int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
        claimed = per_process * len(config["devices"])
        if per_process < 1 or claimed > MAX_NCCL_GPUS:
            # counted before any list is built: 10^10 claimed GPUs were 2.9 GB of them
            raise Unjudged(f"{check}: nccl-tests' JSON claims {claimed} GPUs (nthreads x "
                           f"ngpus {per_process} in each of {len(config['devices'])} "
                           f"processes); at most {MAX_NCCL_GPUS} are read: not a run's -J "
                           "output")
        gpus = [_NcclGpu(int(device["rank"]) + i, str(device["pid"]),
                         str(device["hostname"]), str(int(device["device"]) + i))
                for device in config["devices"] for i in range(per_process)]
        rows = [_nccl_json_row(check, record) for record in doc["results"]]
        records = [(f"result of size {record['size']}", record) for record in doc["results"]]
        oob = doc["out_of_bounds"]["count"]
        avg = doc["average_bus_bandwidth"]["bandwidth"]
    except SanityError:
        raise   # a record read and refused (_nccl_json_row): its own reason stands
    except (KeyError, TypeError, ValueError) as err:
        raise Unjudged(f"{check}: nccl-tests' JSON without the field {err} this parser "
                       "reads (config.devices, results, out_of_bounds)") from None
    args = doc.get("args")
    program = args[0] if isinstance(args, list) and args and isinstance(args[0], str) else None
    _nccl_all_reduce(check, (program.rsplit("/", 1)[-1], f"args {program!r}") if program
                     else None, records)
    method = _nccl_ranks(check, gpus, params)
    return _nccl_measurement(check, rows, (str(oob), "OK" if oob == 0 else "FAILED"),
                             avg, params, method)


def _nccl_json_row(check: str, record: dict[str, Any]) -> _NcclRow:
    where = f"result of size {record['size']}"
    halves = [record["out_of_place"], record["in_place"]]
    if any(half is None for half in halves):
        raise Unjudged(f"{check}: the {where} has no out-of-place figure (a trace replay)")
    wrong = tuple(None if half["nwrong"] is None else f"{half['nwrong']:g}"
                  for half in halves)
    return _NcclRow(int(record["size"]), tuple(str(half["bus_bw"]) for half in halves),
                    wrong, "#wrong" if any(w is not None for w in wrong) else None, where,
                    tuple(str(half.get("alg_bw", "")) for half in halves))

