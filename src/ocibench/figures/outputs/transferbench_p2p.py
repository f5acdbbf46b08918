"""TransferBench p2p: copies between the GPUs of a node."""

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
    method_differs,
    number,
)

#: Its failure words: TransferBench's (src/client: printf("[ERROR] ...")).
FAILED = failure_words(r"^\[ERROR\]")

TRANSFERBENCH_KEYS = benchmarks.TRANSFERBENCH_KEYS
#: The title of each matrix (src/client/Presets/PeerToPeer.hpp of ROCm/TransferBench,
#: printf("%sdirectional copy peak bandwidth GB/s [...]", "Uni" or "Bi")) and the
#: averages line after it (printf("Averages (During %s):", "UniDir" or " BiDir")).
_TB_TITLE = re.compile(r"^(Uni|Bi)directional copy peak bandwidth GB/s\b")
_TB_AVERAGES = re.compile(r"^Averages \(During\s+(UniDir|BiDir)\):\s*(.*)$")
#: The labels of the averages, printed on the line before them (PeerToPeer.hpp).
_TB_AVERAGE_LABELS = ("CPU->CPU", "CPU->GPU", "GPU->CPU", "GPU->GPU")
#: A matrix row: printf("%5s %02d %3s", "CPU"|"GPU", index, " ->" | "<- " | "<->"),
#: then one value a column ("N/A" where a copy was not run).
_TB_ROW = re.compile(r"^(CPU|GPU)\s+(\d+)\s+(->|<-|<->)\s+(.*)$")
#: The columns: "SRC+EXE\DST  CPU 00 ... GPU 07" (a Markdown page may double the "\").
TB_COLUMNS = re.compile(r"^SRC\S*DST\s+(.*)$")


def parse(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    starts = [i for i, line in enumerate(lines) if _TB_TITLE.match(line)]
    if not starts:
        raise NotThisOutput(f"not TransferBench p2p output: no 'Unidirectional copy peak "
                       f"bandwidth' or 'Bidirectional ...' title (first line "
                       f"{first_line(lines)})")
    values: Values = {}
    for start, end in zip(starts, starts[1:] + [len(lines)]):
        section = lines[start:end]
        kind = _TB_TITLE.match(section[0]).group(1).lower()    # "uni" | "bi"
        if f"{kind}dir_avg" in values:
            raise Unjudged(f"{check}: two {kind}directional matrices in one output; give one run")
        values[f"{kind}dir_min"] = _tb_slowest_pair(check, kind, section)
        values[f"{kind}dir_avg"] = _tb_average(check, kind, section)
    return Measurement(check, "bandwidth", UNITS["bandwidth"],
                       {k: metrics.convert(values[k], "GB/s", UNITS["bandwidth"])
                        for k in TRANSFERBENCH_KEYS if k in values},
                       method=copy_size_method(check, lines))


#: The size of each copy, as the presets print it: p2p's "Bytes Per Direction 67108864"
#: (",67108864" with OUTPUT_TO_CSV), a2a's "- Copying 67108864 bytes between ..." and
#: "Summary: [67108864 bytes per Transfer]" (src/client/Presets/AllToAll.hpp).
_TB_BYTES = re.compile(r"^(?:Bytes Per Direction[ ,](\d+)|- Copying (\d+) bytes between"
                       r"|Summary: \[(\d+) bytes per Transfer\])")


def copy_size_method(check: str, lines: list[str]) -> str | None:
    """How the run's copy size differs from the figures' command (its default size),
    quoting the line; None where it agrees or where the output does not print it."""
    expected = benchmarks.CHECKS[check].method["bytes"]
    found = next((m for m in map(_TB_BYTES.match, lines) if m), None)
    if found is None:
        return None
    size = int(next(group for group in found.groups() if group))
    if size == expected:
        return None
    return method_differs(check, [f"copies of {size} bytes ({found.group(0)!r}), the "
                                   f"figures' {expected} (its default: run it without a "
                                   "size)"])


def _tb_slowest_pair(check: str, kind: str, section: list[str]) -> float:
    """The lowest GB/s of a copy (one direction) between two different GPUs."""
    if any(line.startswith("SRC") and "," in line for line in section):
        # OUTPUT_TO_CSV=1 (PeerToPeer.hpp): commas between the cells, and no averages
        raise Unjudged(f"{check}: the matrix is TransferBench's CSV (OUTPUT_TO_CSV=1), which "
                       "prints no averages; run it without OUTPUT_TO_CSV")
    header = next((m for m in map(TB_COLUMNS.match, section) if m), None)
    if header is None:
        raise SanityError(f"{check}: no 'SRC...DST CPU 00 ... GPU 00 ...' column line under "
                          f"the {kind}directional title")
    cells = header.group(1).split()
    columns = [(cells[i], int(cells[i + 1])) for i in range(0, len(cells) - 1, 2)
               if cells[i] in ("CPU", "GPU") and cells[i + 1].isdigit()]
    slowest: float | None = None
    for row in map(_TB_ROW.match, section):
        if not row or row.group(1) != "GPU" or row.group(3) == "<->":
            continue    # <->: both directions summed (bidirectional)
        cells = row.group(4).split()
        if len(cells) != len(columns):
            raise SanityError(f"{check}: the row 'GPU {row.group(2)} {row.group(3)}' has "
                              f"{len(cells)} values for {len(columns)} columns")
        source = int(row.group(2))
        for (kind_of, index), cell in zip(columns, cells):
            if kind_of != "GPU" or index == source:
                continue
            if cell == "N/A":
                raise SanityError(f"{check}: no copy (N/A) between GPU {source} and GPU {index}")
            value = number(cell, f"GPU {source} {row.group(3)} GPU {index}")
            slowest = value if slowest is None else min(slowest, value)
    if slowest is None:
        raise SanityError(f"{check}: no copy between two GPUs in the {kind}directional matrix")
    return slowest


def _tb_average(check: str, kind: str, section: list[str]) -> float:
    """The GPU->GPU column of the section's averages line."""
    found = [(i, m) for i, m in enumerate(map(_TB_AVERAGES.match, section)) if m]
    if not found:
        raise SanityError(f"output truncated: no 'Averages (During {kind.capitalize()}Dir)' "
                          f"line after the {kind}directional matrix")
    i, match = found[0]
    labels = section[i - 1].split() if i else []
    if tuple(labels) != _TB_AVERAGE_LABELS:
        raise Unjudged(f"{check}: the averages are labelled {section[i - 1] if i else ''!r}, "
                       f"not {' '.join(_TB_AVERAGE_LABELS)}")
    cells = match.group(2).split()
    if len(cells) != len(labels):
        raise SanityError(f"{check}: {section[i]!r} has {len(cells)} values for "
                          f"{len(labels)} labels")
    return number(cells[labels.index("GPU->GPU")], f"{kind}directional GPU->GPU average")

