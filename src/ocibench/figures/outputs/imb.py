"""The Intel MPI Benchmarks (IMB-MPI1): one "# Benchmarking <name>" table a process count."""

from __future__ import annotations

import re
from typing import Any

from ocibench import benchmarks
from ocibench.figures.outputs.common import (
    ROW,
    UNITS,
    Measurement,
    NotThisOutput,
    SanityError,
    Unjudged,
    Values,
    elision_line,
    first_line,
    rdma_ports_method,
    size_table,
    with_markdown_hashes,
)

_IMB_PROCESSES = re.compile(r"^#\s*#processes\s*=\s*(\d+)")
_IMB_FINALIZE = "# All processes entering MPI_Finalize"
#: The banner every run prints first: "#    Intel(R) MPI Benchmarks 2021.3, MPI-1 part"
#: ("Intel (R) MPI Benchmarks 4.1" in the older ones).
_IMB_BANNER = re.compile(r"^#\s*Intel\s?\(R\) MPI Benchmarks\b")


#: IMB's own '# ' lines as they read where Markdown took the '#' (a paste outside a code
#: block; "#----" and "#bytes" keep theirs, as no heading starts so).
_IMB_HASHLESS = re.compile(r"^(?:Intel\s?\(R\) MPI Benchmarks\b|Benchmarking\s+\S+|#processes\s*="
                           r"|All processes entering MPI_Finalize|List of Benchmarks to run:"
                           r"|\( ?\d+ additional process)")
_IMB_HASHLESS_NEEDED = (re.compile(r"^Benchmarking\s+\S+"), re.compile(r"^#bytes\b"))


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    lines = with_markdown_hashes(lines, _IMB_HASHLESS, _IMB_HASHLESS_NEEDED)
    name = benchmarks.CHECKS[check].title   # "# Benchmarking <name>"
    banners = sum(1 for line in lines if _IMB_BANNER.match(line))
    finals = sum(1 for line in lines if line.startswith(_IMB_FINALIZE))
    tables = _imb_tables(check, lines, name)
    if not (banners or finals or tables):
        raise NotThisOutput(f"not {check} output: no 'Intel(R) MPI Benchmarks' banner and no "
                       f"'# Benchmarking {name}' (first line {first_line(lines)})")
    if not tables:
        _imb_other_benchmark(check, lines, name)
    if max(banners, finals) > 1:
        raise Unjudged(f"{check}: {max(banners, finals)} runs in one output; give one run")
    if banners and not finals:
        # A paste of the table alone has neither; a run that printed its banner and
        # stopped before MPI_Finalize did not complete.
        raise SanityError(f"output truncated: missing {_IMB_FINALIZE!r}")
    if not tables:
        raise SanityError(f"output truncated or not {check}: missing '# Benchmarking {name}'")
    # A benchmark of fixed ranks (PingPong: 2, others wait in MPI_Barrier) prints one
    # table; without -npmin, Allreduce prints one per process count: take the full run's.
    spec = benchmarks.CHECKS[check]
    expected = spec.ranks or params["nodes"] * params["ranks_per_node"]
    if expected not in tables:
        seen = ", ".join(str(n) for n in tables)
        raise SanityError(f"{check}: expected {expected} processes, saw {seen}")
    header, rows = tables[expected]
    sizes = benchmarks.expected_sizes(check, params)
    elided = elision_line(lines)
    latency = size_table(check, rows, _column(check, header, spec.columns[spec.metric]), sizes,
                         elided)
    extra: dict[str, Values] = {}
    for metric in spec.extra_metrics:   # a rate (Mbytes/sec): size 0 moves no bytes
        values = size_table(check, rows, _column(check, header, spec.columns[metric]), sizes,
                            elided)
        extra[metric] = {s: v for s, v in values.items() if s > 0}
    return Measurement(check, spec.metric, UNITS[spec.metric], latency, extra,
                       method=rdma_ports_method(check, lines),
                       handicap=_cold_start(check, sizes))


def _cold_start(check: str, sizes: list[int]) -> str | None:
    """The handicap of a run that began its sizes later than the figures'
    command (``-msglog 28:28`` against the seeds' ``-msglog 3:28``): IMB measures each
    size after the smaller ones, which warmed the MPI's buffers and its registration
    cache; a run that starts at the size it is judged at pays that first touch in its
    figure (OCI's 2025 Open MPI 5 run of Allreduce, 28:28: 422 ms where the seeds'
    sweep documents 344 ms; its Intel MPI and PingPong runs, 27:28 and 28:28, meet their
    figures).  A run that ends earlier (``3:20``) measured its sizes as the figures did.
    None where the run starts where the command does."""
    documented = benchmarks.command_option(check, "-msglog")
    if documented is None or len(sizes) < 2:
        return None
    first = int(documented.partition(":")[0])
    if sizes[1] <= 2**first:   # sizes: 0, then 2^MINLOG ..
        return None
    return (f"its sizes start at {sizes[1]} bytes (-msglog {sizes[1].bit_length() - 1}:...), "
            f"the figures' sweep at {2**first} (-msglog {documented}): measured cold, "
            "without the smaller sizes before it")


#: "# Benchmarking Uniband" (IMB_output.c), and the run's list: "# List of Benchmarks to
#: run:" with one "# <name>" line each.
_IMB_BENCHMARKING = re.compile(r"^#\s*Benchmarking\s+(\S+)")
_IMB_LIST = re.compile(r"^#\s*List of Benchmarks to run:")


def _imb_other_benchmark(check: str, lines: list[str], name: str) -> None:
    """An IMB output that has no table of ``name`` but is another benchmark's (its
    '# Benchmarking Uniband' tables, or a list of benchmarks to run without ``name``):
    NotThisOutput naming it; an IMB run of ``name`` cut short is left to the caller."""
    others = list(dict.fromkeys(m.group(1) for m in map(_IMB_BENCHMARKING.match, lines) if m))
    start = next((i for i, line in enumerate(lines) if _IMB_LIST.match(line)), None)
    listed = []
    for line in lines[start + 1:] if start is not None else []:
        found = re.fullmatch(r"#\s*(\w+)", line)
        if not found:
            break
        listed.append(found.group(1))
    if any(other.lower() == name.lower() for other in listed):
        return
    if others:
        shown = ", ".join(others[:4])
        raise NotThisOutput(f"{check}: the output is IMB's {shown} ('# Benchmarking "
                            f"{others[0]}'), not {name}")
    if listed:
        raise NotThisOutput(f"{check}: the output is IMB's {', '.join(listed[:4])} ('# List "
                            f"of Benchmarks to run: {listed[0]}'), not {name}")


def _imb_tables(check: str, lines: list[str],
                name: str) -> dict[int, tuple[list[str], list[list[str]]]]:
    """#processes -> (column header, rows) of every '# Benchmarking <name>' table; one
    run prints one table per process count, so a second is a second run."""
    tables: dict[int, tuple[list[str], list[list[str]]]] = {}
    starts = [i for i, line in enumerate(lines)
              if re.match(rf"#\s*Benchmarking\s+{name}\b", line, re.IGNORECASE)]
    for start in starts:
        processes = header = None
        rows: list[list[str]] = []
        for line in lines[start + 1:]:
            found = _IMB_PROCESSES.match(line)
            if found and processes is None:
                processes = int(found.group(1))
            elif line.startswith("#bytes"):
                header = line.split()
            elif header and line.startswith("#"):
                break  # the next section: the table is complete
            elif header and ROW.match(line) and len(line.split()) == len(header):
                rows.append(line.split())
        if processes is not None and header:
            if processes in tables:
                raise Unjudged(f"{check}: two '# Benchmarking {name}' tables for "
                               f"{processes} processes: two runs in one output; give one")
            tables[processes] = (header, rows)
    return tables


def _column(check: str, header: list[str], name: str) -> int:
    if name not in header:
        raise SanityError(f"{check}: no {name!r} column in {' '.join(header)!r}")
    return header.index(name)

