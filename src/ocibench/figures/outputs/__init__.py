"""Parse a benchmark's output and decide whether the run is sane: one parser per family.

One module per parser family (the registry's entries name each, :data:`ocibench.benchmarks.PARSERS`
gathers them: the family "nccl-tests" is :mod:`.nccl_tests`), each with its
``parse(check, lines, params)`` (and ``parse_json`` where the benchmark writes JSON); what
they share is :mod:`.common`.  What differs between the checks of a family (which
column, how many ranks, the unit of the figure) is the check's registry entry
(:class:`ocibench.benchmarks.CheckSpec`), never a test of its name.

Used by the live ReFrame checks (sanity and performance) and by ``ocibench evaluate``
(hand-run outputs), so both judge an output the same way.  ``parse`` raises
:class:`SanityError` with a one-line message naming the fault when

* a crash marker appears anywhere: the launcher's and the shell's words that a process
  died (a segfault, a signal, MPI_ABORT...) in any output, and the benchmark's own
  failure words (a CUDA or NCCL failure...) once its format is recognised,
* the output is truncated (a header or trailer line the benchmark always prints is
  missing),
* fewer or more ranks, GPUs or threads took part than the parameters say (where the
  output shows them),
* a message-size line the size range asks for is missing, repeated or unexpected,
* a number is not finite or negative, or nccl-tests found wrong values.

The benchmark's exit code is not seen here: the live check gets it from ReFrame (a
non-zero exit fails the job before sanity runs); offline, a failed run is recognised
by the crash markers that mpirun, the shell or the benchmark print.

Noise around the output (mpirun's ``SET UCX_NET_DEVICES=...`` and --report-bindings
lines, ``$`` prompt lines, blank lines, indentation) is ignored: the parsers look only
for the lines each benchmark prints.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from ocibench import benchmarks

# What callers use of the package, from the module that defines it.
from ocibench.figures.outputs.babelstream import BABELSTREAM_KERNELS
from ocibench.figures.outputs.common import (
    MAX_OUTPUT_BYTES,
    PROCESS_ENDED,
    UNITS,
    Measurement,
    NotThisOutput,
    OutputTooLarge,
    SanityError,
    Unjudged,
    Values,
    no_crash,
    output_lines,
    read_output,
    table_rows,
    without_launcher_prefixes,
)
from ocibench.figures.outputs.common import first_crash as _first_crash
from ocibench.figures.outputs.common import number as _number
from ocibench.figures.outputs.nccl_tests import (
    NCCL_COLUMNS,
    NCCL_ONE_RANK,
    NCCL_RANK,
    collective_vendor,
)
from ocibench.figures.outputs.nvbandwidth import (
    NVBANDWIDTH_CEILINGS,
    NVBANDWIDTH_KEYS,
    _nvb_testcase,
    nvbandwidth_gpus,
)
from ocibench.figures.outputs.omb import omb_vendor
from ocibench.figures.outputs.stream import STREAM_KERNELS
from ocibench.figures.outputs.transferbench_a2a import TRANSFERBENCH_A2A_KEYS
from ocibench.figures.outputs.transferbench_p2p import TRANSFERBENCH_KEYS

__all__ = [
    "BABELSTREAM_KERNELS", "CRASH_MARKERS", "FAILED_BY_FAMILY", "MAX_OUTPUT_BYTES",
    "NCCL_COLUMNS", "NCCL_ONE_RANK", "NCCL_RANK", "NVBANDWIDTH_CEILINGS", "NVBANDWIDTH_KEYS",
    "PROCESS_ENDED", "STREAM_KERNELS", "TRANSFERBENCH_A2A_KEYS", "TRANSFERBENCH_KEYS",
    "UNITS", "Measurement", "NotThisOutput", "OutputTooLarge", "SanityError", "Unjudged",
    "Values", "collective_vendor", "first_crash", "nvbandwidth_gpus", "omb_vendor",
    "output_lines", "parse", "read_output", "table_rows", "without_launcher_prefixes",
    # read by tests of one parser's pieces
    "_number", "_nvb_testcase",
]

#: A family's parser: (check, the output's lines, the resolved parameters) -> Measurement.
Parser = Callable[[str, list[str], dict[str, Any]], Measurement]


def _family_module(family: str) -> ModuleType:
    """The module of ``family``, named after it ("nccl-tests" is nccl_tests.py), so
    that the registry's entries are the one list of families."""
    module = f"{__name__}.{family.replace('-', '_')}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        named = ", ".join(n for n, s in benchmarks.CHECKS.items() if s.parser == family)
        raise ValueError(f"parser {family!r} (ocibench.benchmarks: {named or 'no entry'}) "
                         f"has no module {module}") from None


#: The module of each family (benchmarks.PARSERS); a check's entry names its family.
_MODULES: dict[str, ModuleType] = {family: _family_module(family)
                                   for family in benchmarks.PARSERS}
#: The parser of each family: its module's ``parse(check, lines, params)``.
_PARSERS: dict[str, Parser] = {family: module.parse for family, module in _MODULES.items()}
#: The words each family's programs print when they failed (its module's ``FAILED``,
#: :func:`.common.failure_words`), read only in an output recognised as the family's.
FAILED_BY_FAMILY: dict[str, tuple[re.Pattern, ...]] = {
    family: module.FAILED for family, module in _MODULES.items() if getattr(module, "FAILED", ())}
#: Every crash and failure word (a failed job's reason, ocibench.figures.joblog).
CRASH_MARKERS = PROCESS_ENDED + tuple(marker for markers in FAILED_BY_FAMILY.values()
                                      for marker in markers)


def first_crash(text: str, markers: tuple[re.Pattern, ...] = CRASH_MARKERS
                ) -> re.Match | None:
    """The first of ``markers`` (every family's crash and failure words) in ``text``:
    what went wrong first, or None."""
    return _first_crash(text, markers)


def parse(check: str, text: str, params: Mapping[str, Any]) -> Measurement:
    """Parse ``text``, the output of one run of ``check`` with ``params``.

    ``params`` are the run's parameters (see :mod:`ocibench.benchmarks`); unset ones take
    the seeds' defaults.  Raises SanityError for a bad output (its subclass Unjudged
    for one that could not be read to a verdict) and benchmarks.ParamError for bad
    parameters.
    """
    params = benchmarks.resolve(check, params)
    family = benchmarks.CHECKS[check].parser
    # a family whose benchmark also writes a JSON file reads it whole (nccl-tests' -J)
    read_json = getattr(_MODULES[family], "parse_json", None)
    if read_json is not None and text.lstrip().startswith("{"):
        return read_json(check, text, params)
    lines = output_lines(text)
    joined = "\n".join(lines)
    # The format first: a family's failure words are read only in its own output.
    try:
        measured = _PARSERS[family](check, lines, params)
    except NotThisOutput:
        no_crash(joined, PROCESS_ENDED)
        raise
    except SanityError:
        no_crash(joined, PROCESS_ENDED + FAILED_BY_FAMILY.get(family, ()))
        raise
    no_crash(joined, PROCESS_ENDED + FAILED_BY_FAMILY.get(family, ()))
    return measured
