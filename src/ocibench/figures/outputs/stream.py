"""STREAM (McCalpin's stream.c, and its MPI version): the four kernels' best rates."""

from __future__ import annotations

import re
from typing import Any

from ocibench import benchmarks
from ocibench.figures.outputs.common import (
    UNITS,
    Measurement,
    NotThisOutput,
    SanityError,
    Unjudged,
    Values,
    expect_count,
    first_line,
    number,
)

STREAM_KERNELS = benchmarks.STREAM_KERNELS
_STREAM_THREADS = re.compile(r"^Number of Threads counted\s*=\s*(\d+)")
#: 5.9 prints only the threads OpenMP was asked for.
_STREAM_REQUESTED = re.compile(r"^Number of Threads requested\s*=\s*(\d+)")
#: STREAM's MPI version (McCalpin's stream_mpi.c, "STREAM version $Revision: 1.8 $")
#: prints "Data is distributed across %d MPI ranks", then, built with OpenMP, "Number of
#: Threads counted for rank 0 = %i"; its rates are the sum over the ranks.
_STREAM_MPI_RANKS = re.compile(r"^Data is distributed across (\d+) MPI ranks")
_STREAM_MPI_THREADS = re.compile(r"^Number of Threads counted for rank 0\s*=\s*(\d+)")
#: The table header: "Function    Best Rate MB/s  Avg time ..." (5.10) or
#: "Function      Rate (MB/s)   Avg time ..." (5.9, and 5.8 before it); the rate is
#: the second column of each kernel's line in both.
_STREAM_HEADER = re.compile(r"^Function\s+(?:Best Rate MB/s|Rate \(MB/s\))")
_STREAM_VERSION = re.compile(r"^STREAM version \$Revision:\s*([\d.]+)")
#: The preamble's lines about the arrays, printed by every build before its thread
#: lines (stream.c: "Array size = %llu (elements), Offset = ...", 5.9 and older: "Array
#: size = ..."; "Each kernel will be executed %d times.").
_STREAM_PREAMBLE = re.compile(r"^(?:Array size =|Each kernel will be executed)")


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    headers = [i for i, line in enumerate(lines) if _STREAM_HEADER.match(line)]
    versions = [line for line in lines if _STREAM_VERSION.match(line)]
    if not headers and not versions:
        raise NotThisOutput(f"not STREAM output: no 'STREAM version' line and no 'Function ... "
                       f"Rate' header (first line {first_line(lines)})")
    runs = max(len(headers), len(versions))
    if runs > 1:
        raise Unjudged(f"stream: {runs} runs in one output; give one run")
    if not headers:
        raise SanityError("output truncated: missing STREAM's 'Function  Best Rate MB/s' "
                          "header")
    body = lines[headers[0] + 1:]
    values: Values = {}
    for kernel in STREAM_KERNELS:
        found = [line.split() for line in body if line.startswith(f"{kernel}:")]
        if not found or len(found[0]) < 2:
            raise SanityError(f"stream: no line for kernel {kernel}")
        values[kernel] = number(found[0][1], kernel)
    ranks = next((m for m in map(_STREAM_MPI_RANKS.match, lines) if m), None)
    method = None
    if ranks:
        # stream_mpi.c: every rank runs the kernels on its share of the arrays, so the
        # node ran ranks x threads-per-rank threads (1 each without OpenMP).
        per_rank = next((m for m in map(_STREAM_MPI_THREADS.match, lines) if m), None)
        count = int(ranks.group(1)) * (int(per_rank.group(1)) if per_rank else 1)
        # Its thread count is its own (ranks x threads a rank): recorded, never compared.
        method = (f"STREAM's MPI version ({ranks.group(0)!r}, "
                  f"{per_rank.group(0) if per_rank else 'no OpenMP'!r}): the rates are "
                  f"summed over the ranks, where the figures are one OpenMP process "
                  f"(stream.c); to compare, run stream.c with OMP_NUM_THREADS={count}")
    else:
        threads = next((m for m in map(_STREAM_THREADS.match, lines) if m), None) \
            or next((m for m in map(_STREAM_REQUESTED.match, lines) if m), None)
        if threads is None and not any(map(_STREAM_PREAMBLE.match, lines)):
            # the thread lines sit in the preamble, which this paste leaves out
            raise Unjudged("stream: the paste leaves out STREAM's preamble (no 'Array "
                           "size', no 'Number of Threads' lines): how many threads ran "
                           "is not in it; give the whole output")
        if threads is None:
            # stream.c prints its thread lines only when built with OpenMP (#ifdef
            # _OPENMP): a build without it ran one thread, a sane run of another method
            method = None if params["threads"] == 1 else (
                "STREAM built without OpenMP (no 'Number of Threads' line) ran one "
                f"thread, where threads={params['threads']}: build it with -fopenmp "
                "and run it with OMP_NUM_THREADS, or give --set threads=1")
        elif int(next((m for m in map(_STREAM_REQUESTED.match, lines) if m),
                      threads).group(1)) != params["threads"]:
            count = int(threads.group(1))
            # How many threads the run asked for is its method (OMP_NUM_THREADS), not the
            # node's fault: the figure of threads=N is another run.
            method = (f"STREAM ran {count} threads ({threads.group(0)!r}), where "
                      f"threads={params['threads']}: give --set threads={count} for the "
                      f"figure of its own thread count")
        else:
            # it asked for the figure's threads and fewer (or more) ran
            expect_count(check, "threads", params["threads"], int(threads.group(1)))
    if not any(line.startswith("Solution Validates") for line in lines):
        raise SanityError("STREAM did not print 'Solution Validates'")
    return Measurement(check, "bandwidth", UNITS["bandwidth"], values, method=method)

