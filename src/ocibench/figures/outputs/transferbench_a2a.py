"""TransferBench a2a: every GPU copying to every other at once."""

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
    failure_words,
    first_line,
    number,
)
from ocibench.figures.outputs.transferbench_p2p import TB_COLUMNS, copy_size_method

#: Its failure words: TransferBench's (src/client: printf("[ERROR] ...")).
FAILED = failure_words(r"^\[ERROR\]")

TRANSFERBENCH_A2A_KEYS = benchmarks.TRANSFERBENCH_A2A_KEYS
#: The a2a preset's summary (ROCm/TransferBench: src/TransferBench.cpp RunAllToAll in
#: v1.52, src/client/Presets/AllToAll.hpp later): "Summary:" (later with the transfer
#: size after it), a SRC\DST matrix of GPUs with STotal and Actual columns, the RTotal
#: line, then printf("Average   bandwidth (GPU Timed): %8.3f GB/s").
_A2A_SUMMARY = re.compile(r"^Summary:")
_A2A_AVERAGE = re.compile(r"^Average\s+bandwidth \(GPU Timed\):\s*(\S+)\s+GB/s")
_A2A_ROW = re.compile(r"^GPU\s+(\d+)\s+(.*)$")


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    starts = [i for i, line in enumerate(lines) if _A2A_SUMMARY.match(line)]
    if not starts:
        raise NotThisOutput(f"not TransferBench a2a output: no 'Summary:' line (first line "
                       f"{first_line(lines)})")
    if len(starts) > 1:
        raise Unjudged(f"{check}: {len(starts)} a2a summaries in one output; give one run")
    summary = lines[starts[0]:]
    header = next((m for m in map(TB_COLUMNS.match, summary) if m), None)
    if header is None:
        raise SanityError(f"{check}: no 'SRC\\DST GPU 00 ...' column line after 'Summary:'")
    cells = header.group(1).split()
    gpus = [int(cells[i + 1]) for i in range(0, len(cells) - 1, 2)
            if cells[i] == "GPU" and cells[i + 1].isdigit()]
    slowest: float | None = None
    for row in map(_A2A_ROW.match, summary):
        if not row:
            continue
        source, cells = int(row.group(1)), row.group(2).split()
        if len(cells) < len(gpus):
            raise SanityError(f"{check}: the row 'GPU {row.group(1)}' has {len(cells)} values "
                              f"for {len(gpus)} GPUs")
        for target, cell in zip(gpus, cells):     # then STotal and Actual
            if target == source:
                continue
            if cell == "N/A":
                raise SanityError(f"{check}: no copy (N/A) from GPU {source} to GPU {target}")
            value = number(cell, f"GPU {source} -> GPU {target}")
            slowest = value if slowest is None else min(slowest, value)
    average = next((m for m in map(_A2A_AVERAGE.match, summary) if m), None)
    if average is None:
        raise SanityError("output truncated: no 'Average bandwidth (GPU Timed)' line after "
                          "the a2a summary")
    if slowest is None:
        raise SanityError(f"{check}: no copy between two GPUs in the a2a matrix")
    values = {"avg": number(average.group(1), "a2a average"), "min": slowest}
    return Measurement(check, "bandwidth", UNITS["bandwidth"],
                       {k: metrics.convert(v, "GB/s", UNITS["bandwidth"])
                        for k, v in values.items()},
                       method=copy_size_method(check, lines))

