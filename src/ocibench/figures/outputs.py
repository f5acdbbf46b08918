"""Parse a benchmark's output and decide whether the run is sane: one parser per family.

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

import json
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, Union

from ocibench import accelerators, benchmarks, metrics

# Union, not "|": a module-level alias is evaluated at import, and Python 3.9 has no "|".
Values = dict[Union[int, str], float]


class SanityError(ValueError):
    """The output is not that of a complete, correct run; the message is one line."""


class Unjudged(SanityError):
    """The output could not be read to a verdict, and nothing shows the run broken: a
    format the parser does not know (the message names the line), or a method that
    cannot be compared with the documented one.  ``ocibench evaluate`` calls it
    UNJUDGED (exit 3), never FAIL; a live check, which runs our own command line,
    fails with "could not judge".  A subclass of SanityError so that any caller that
    does not tell the two apart still refuses the output rather than passing it."""


class NotThisOutput(Unjudged):
    """The output is not this check's: another benchmark's (the message names it, and
    the line that says so), or a format this parser does not know.  One rule in every
    parser: UNJUDGED, never FAIL, and only the launcher's and the shell's crash words
    (:data:`PROCESS_ENDED`) are read in it, never the words of the check's own
    programs, which another program's output may hold for reasons of its own."""


#: The largest output read.  A benchmark prints a few KiB (IMB's whole -msglog 3:28
#: table with one Allreduce table per process count stays under 100 KiB); 16 MiB is
#: more than a hundred times any of them with mpirun's noise, and small enough that a
#: wrong file (a core dump, a tarball) is refused at once, never read into memory.
MAX_OUTPUT_BYTES = 16 * 2**20


class OutputTooLarge(ValueError):
    """A file is larger than MAX_OUTPUT_BYTES: not a benchmark's output."""


def read_output(stream: BinaryIO, name: str) -> str:
    """At most MAX_OUTPUT_BYTES of ``stream`` as text; reading stops there, so a
    100 MB file costs 16 MiB, not 100 MB."""
    data = stream.read(MAX_OUTPUT_BYTES + 1)
    if len(data) > MAX_OUTPUT_BYTES:
        raise OutputTooLarge(f"{name} is larger than {MAX_OUTPUT_BYTES // 2**20} MiB: "
                             "not a benchmark's output (those are a few KiB)")
    return data.decode(errors="replace")


@dataclass(frozen=True)
class Measurement:
    """What one run measured: ``values`` for the check's primary metric, ``extra`` for
    any other metric the same output carries (IMB PingPong's Mbytes/sec column)."""

    check: str
    metric: str                      # latency | bandwidth | busbw
    unit: str                        # us | MB/s | GB/s
    values: Values                   # message size (or kernel, or nccl column) -> value
    extra: dict[str, Values] = field(default_factory=dict)   # metric -> values
    #: For values keyed by name (nccl-tests' busbw columns): the message size they are at.
    size: int | None = None
    #: How the run's method differs from the seeds' where that makes its values
    #: incomparable with a documented figure ("one process drove 2 GPUs (-g 2); the
    #: figures are one rank per GPU: mpirun -np 2 ... -g 1"); None when it does not.
    method: str | None = None
    #: The GPU vendor whose software printed the output, where it says so (OMB's title
    #: tag, the collective tests' or library's version banner); None where it does not.
    vendor: str | None = None
    #: metric -> key -> every sample of a run that repeated itself (nccl-tests -N):
    #: ``values`` then holds each key's median, and these show the spread.
    samples: dict[str, dict[int | str, tuple[float, ...]]] = field(default_factory=dict)
    #: The GPU the output says it ran on, and the line that says so ("Using HIP device
    #: AMD Instinct MI300X"): compared with the shape's GPU (ocibench.figures.evaluate).
    device: str | None = None
    device_line: str | None = None

    def series(self) -> dict[str, Values]:
        """metric -> values, the primary metric first."""
        return {self.metric: self.values, **self.extra}

    def units(self) -> dict[str, str]:
        """metric -> the unit its values are in (``extra`` metrics in their usual one)."""
        return {**{m: metrics.default_unit(m) for m in self.extra}, self.metric: self.unit}


#: metric -> the unit OMB, IMB, STREAM and nccl-tests print it in.
UNITS = {name: metrics.default_unit(name) for name in metrics.METRICS}

#: Printed only when a process of the run ended abnormally, by the shell, the launcher
#: (mpirun, prterun, srun, Slurm) or MPI, whatever the program: read in any output, since
#: a run may die before it printed anything of its own.  Case matters except where (?i)
#: says otherwise: "Killed" is the shell's word for a killed job, not the verb in a log
#: sentence.
PROCESS_ENDED = tuple(re.compile(p, re.MULTILINE) for p in (
    r"Segmentation fault",
    r"core dumped",
    r"Bus error",
    # the shell's words for the other signals that end a program (bash's siglist)
    r"Illegal instruction",
    r"Floating point exception",
    r"\bAborted\b",
    r"\bKilled\b",
    r"exited on signal \d+",
    r"(?:mpirun|prterun) noticed that process",
    r"prterun has exited",
    r"MPI_ABORT",
    r"BAD TERMINATION",
    # [ \t], not \s: \s crosses newlines, and "^\s*" retried at every line start of
    # a run of blank lines is quadratic (10 M blank lines took minutes)
    r"^[ \t]*Abort\(\d+\)",
    r"returned\s+a\s+non-zero\s+exit\s+code",
    r"srun: error:",
    r"DUE TO TIME LIMIT",
    r"oom-kill",
))

#: The words each parser family's programs print when they failed: read only in an
#: output recognised as that family's, after its parser has read it.  A library's
#: warning is no failure of its own: RCCL's "NCCL WARN pfn_hsa_system_get_info failed"
#: is printed on every healthy ROCm 7 node that runs with NCCL_DEBUG=WARN or INFO (its
#: DMA-BUF probe, src/misc/rocm_wrap.cc), and a collective that really failed ends
#: nccl-tests with "Test NCCL failure" or leaves its table unfinished.
FAILED_BY_FAMILY = {family: tuple(re.compile(p, re.MULTILINE) for p in patterns)
                    for family, patterns in {
    # nccl-tests' CUDACHECK / NCCLCHECK (src/common.h: "Test CUDA failure", "Test NCCL
    # failure"; rccl-tests words HIP's the same) and its "Test failure" exit
    "nccl-tests": (*sorted({f"(?i){re.escape(a.runtime_failure)}"
                            for a in accelerators.VENDORS.values()}),
                   r"(?i)nccl failure", r"Test failure"),
    # OMB's xccl benchmarks, NCCL_CHECK (c/xccl/util/osu_util_xccl_interface.h:
    # "Failed: NCCL Error <file>: <line> '<why>'", RCCL's the same)
    "omb": (r"^Failed: [A-Z]+ Error ",),
    # nvbandwidth: a copy's data checked wrong (kernels.cu "Invalid value when checking
    # the pattern"), then its ASSERT macro exits (error_handling.h "ASSERT in expression")
    "nvbandwidth": (r"Invalid value when checking the pattern", r"ASSERT in expression"),
    # TransferBench's failures (src/client: printf("[ERROR] ..."))
    "transferbench-p2p": (r"^\[ERROR\]",),
    "transferbench-a2a": (r"^\[ERROR\]",),
}.items()}

#: Every crash and failure word (a failed job's reason, ocibench.figures.joblog).
CRASH_MARKERS = PROCESS_ENDED + tuple(marker for markers in FAILED_BY_FAMILY.values()
                                      for marker in markers)


#: What launchers put before every line of a rank's output, removed in one place
#: before any parser looks at a line:
#: * ``srun --label``: the task id and ": ", padded to the width of the largest id;
#: * ``mpirun --tag-output`` "[1,0]<stdout>:", ``--timestamp-output``
#:   "Mon Jan  6 10:00:00 2025<stdout>:", or both "<ctime>[1,0]<stdout>:" (Open MPI
#:   4's orte/mca/iof/base/iof_base_output.c and PRRTE's prte_iof_base_setup_output:
#:   snprintf(starttag, ..., "%s[%s,%s]<%s>:", ctime, jobid, rank, "stdout")).
#: Bounded repetitions only, so that the pattern stays linear on any input.
_LAUNCHER_PREFIX = re.compile(
    r"^[ \t]*(?:\d{1,7}: )?(?:[^<\n]{0,120}?<std(?:out|err|diag)>:[ \t]?)?", re.MULTILINE)
#: mpirun --tag-output tags every chunk it forwards, not every line: a line the program
#: wrote in pieces carries the tag again where each piece starts (nccl-tests writes a
#: results line as its size, then each half: "... sum -1[1,0]<stdout>:    85.14 ...").
#: The tag alone is removed there; the pieces joined are what the program printed.
_TAG_INSIDE_LINE = re.compile(r"\[\d{1,9},\d{1,9}\]<std(?:out|err|diag)>:")
#: Runs of blank (or whitespace-only) lines, collapsed to one newline: linear, since
#: [ \t\r\f\v] cannot match the newline that ends each repetition.
_BLANK_LINES = re.compile(r"(?:[ \t\r\f\v]*\n)+")
#: A digit that is not ASCII (full-width "１", Arabic-Indic "١", ...): Python's int()
#: and float() and re's \d would read them as numbers; no benchmark prints them.
_FOREIGN_DIGIT = re.compile(r"(?![0-9])\d")


def without_launcher_prefixes(text: str) -> str:
    """``text`` with the launchers' prefixes (:data:`_LAUNCHER_PREFIX`) removed from
    every line: what each process printed, as it printed it."""
    return _TAG_INSIDE_LINE.sub("", _LAUNCHER_PREFIX.sub("", text))


def output_lines(text: str) -> list[str]:
    """The non-blank lines of ``text`` as the benchmark printed them: launcher prefixes
    (srun --label, mpirun --tag-output / --timestamp-output) and surrounding blanks
    removed, CRLF read as LF.  Raises Unjudged for a digit that is not ASCII."""
    text = without_launcher_prefixes(_BLANK_LINES.sub("\n", text))
    if not text.isascii():
        foreign = _FOREIGN_DIGIT.search(text)
        if foreign:
            start = text.rfind("\n", 0, foreign.start()) + 1
            end = text.find("\n", foreign.start())
            line = text[start:end if end >= 0 else len(text)].strip()
            raise Unjudged(f"the line {line[:120]!r} has the non-ASCII digit "
                           f"{foreign.group(0)!r}: benchmarks print ASCII digits")
    return [line for line in (raw.strip() for raw in text.splitlines()) if line]


def parse(check: str, text: str, params: Mapping[str, Any]) -> Measurement:
    """Parse ``text``, the output of one run of ``check`` with ``params``.

    ``params`` are the run's parameters (see :mod:`ocibench.benchmarks`); unset ones take
    the seeds' defaults.  Raises SanityError for a bad output (its subclass Unjudged
    for one that could not be read to a verdict) and benchmarks.ParamError for bad
    parameters.
    """
    params = benchmarks.resolve(check, params)
    family = benchmarks.CHECKS[check].parser
    if family == "nccl-tests" and text.lstrip().startswith("{"):
        return _nccl_json(check, text, params)
    lines = output_lines(text)
    joined = "\n".join(lines)
    # The format first: a family's failure words are read only in its own output.
    try:
        measured = _PARSERS[family](check, lines, params)
    except NotThisOutput:
        _no_crash(joined, PROCESS_ENDED)
        raise
    except SanityError:
        _no_crash(joined, PROCESS_ENDED + FAILED_BY_FAMILY.get(family, ()))
        raise
    _no_crash(joined, PROCESS_ENDED + FAILED_BY_FAMILY.get(family, ()))
    return measured


def first_crash(text: str, markers: tuple[re.Pattern, ...] = CRASH_MARKERS
                ) -> re.Match | None:
    """The first of ``markers`` in ``text`` (what went wrong first), or None."""
    found = [m for m in (marker.search(text) for marker in markers) if m]
    return min(found, key=lambda m: m.start()) if found else None


def _no_crash(text: str, markers: tuple[re.Pattern, ...]) -> None:
    first = first_crash(text, markers)
    if first:
        raise SanityError(f"benchmark crashed: {first.group(0).strip()[:80]!r} in output")


def _first_line(lines: list[str]) -> str:
    return repr(lines[0][:120]) if lines else "an empty output"


#: A number as the benchmarks print it (printf %d, %f, %g, %e).  float() alone would
#: also take "1_000", " inf" spelled many ways, and non-ASCII digits.
_NUMERIC = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _number(token: str, key: int | str) -> float:
    label = f"size {key}" if isinstance(key, int) else key
    if not _NUMERIC.fullmatch(token):
        if token.lower().lstrip("+-") in ("nan", "inf", "infinity", "-nan"):
            raise SanityError(f"value {token!r} for {label} is not finite")
        raise SanityError(f"value {token!r} for {label} is not a number")
    value = float(token)
    if not math.isfinite(value):   # 1e999
        raise SanityError(f"value {token!r} for {label} is not finite")
    if value < 0:
        raise SanityError(f"value {token!r} for {label} is negative")
    return value


def _size_table(check: str, rows: list[list[str]], column: int, sizes: list[int]) -> Values:
    """size -> the value in ``column`` of each row; every size in ``sizes`` exactly once."""
    values: Values = {}
    for row in rows:
        size = int(row[0])
        if size not in sizes:
            raise SanityError(f"{check}: unexpected message size {size} "
                              f"(the size range gives {sizes[0]}..{sizes[-1]})")
        if size in values:
            raise SanityError(f"{check}: message size {size} appears twice")
        values[size] = _number(row[column], size)
    for size in sizes:
        if size not in values:
            raise SanityError(f"{check}: no line for message size {size}")
    return values


def _method_differs(check: str, fields: list[str]) -> str | None:
    """The sentence that a run's method fields (``fields``: one clause each, quoting
    the line it printed) differ from the figures' command, or None when none do."""
    if not fields:
        return None
    command = " ".join(benchmarks.CHECKS[check].command)
    return (f"{check} was run another way than the figures' command ({command}): "
            f"{'; '.join(fields)}")


def _expect_count(check: str, what: str, expected: int, seen: int) -> None:
    if seen != expected:
        raise SanityError(f"{check}: expected {expected} {what}, saw {seen}")


# --- OSU Micro-Benchmarks ---------------------------------------------------------

#: OMB's title line: "# OSU <API><ACCEL> <name> v7.5".  The registry gives it without
#: <ACCEL> ("# OSU MPI Latency Test", benchmarks.CheckSpec.title).  <ACCEL> is what -d
#: asked for: each vendor's ``omb_title_tag`` ("-CUDA" with -d cuda, "-ROCM" with -d
#: rocm), nothing without -d (c/util/osu_util_mpi.c, print_preamble /
#: print_version_message: printf(benchmark_header, "-CUDA") / "-ROCM" / "").  <API> of
#: the xccl benchmarks is the collective library they were built with, whichever
#: vendor's (c/xccl/util/osu_util_xccl_interface.h OMB_XCCL_TYPE_STR, "NCCL" or "RCCL",
#: OMB 7.4): the registry's title names one, any vendor's is read.
_OMB_TITLE = re.compile(r"^# OSU (\w+) (.+)$")


def _omb_api_name(check: str) -> tuple[str | None, str]:
    """(API, name) of a check's OMB title: ("MPI", "Latency Test"); API None for an
    xccl benchmark (any vendor's collective library)."""
    spec = benchmarks.CHECKS[check]
    found = _OMB_TITLE.match(spec.title)
    if not found:   # the registry's entry is wrong: a defect of ours, said as one
        raise ValueError(f"{check}: the registry's title is not '# OSU <API> <name>'")
    return (None if spec.collective else found.group(1)), found.group(2)

_ROW = re.compile(r"^\d+\s+\S+")
#: The words of a column that is not a number: OMB's --validation (Pass / Fail).
_WORD_COLUMNS = ("Pass", "Fail")


def table_rows(lines: list[str]) -> list[list[str]]:
    """The rows of the table that starts with ``lines``: the lines that fit its columns,
    split.  Its first row (a size, then its values) gives the columns: as many, with
    --validation's Pass/Fail column where it has one.  A line of numbers that does not
    fit (a job script's sysctl echo "4096 16384 4194304" after the table) is no row,
    however it begins; other noise (warnings, prompts) never starts with a size."""
    candidates = [line.split() for line in lines if _ROW.match(line)]
    if not candidates:
        return []

    def shape(cells: list[str]) -> tuple[bool, ...]:
        return tuple(cell in _WORD_COLUMNS for cell in cells)

    columns = shape(candidates[0])
    return [cells for cells in candidates if shape(cells) == columns]
#: OMB 7.4 and older print the buffers of a -d run under the title (7.5 does not):
#: "# Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)".
_OMB_BUFFERS = re.compile(r"^# Send Buffer on .*\((\w+)\) and Receive Buffer on .*\((\w+)\)")
#: OMB's own cap on the message size (its -M, --mem-limit; c/util/osu_util_mpi.c
#: check_mem_limit, c/xccl/collective/osu_xccl_*.c).  The first is printed without a
#: newline, so it may run into the next line.
_OMB_CAPS = (re.compile(r"Limiting max message size to: (\d+)"),
             re.compile(r"Continuing with max message size of (\d+) bytes"))


def _omb_apis(check: str) -> list[str]:
    api = _omb_api_name(check)[0]
    return [api] if api else [vendor.collective for vendor in accelerators.VENDORS.values()]


def _omb_title(check: str, lines: list[str]) -> str:
    """OMB's title line of the one run in ``lines``, whatever its accelerator."""
    apis, name = _omb_apis(check), _omb_api_name(check)[1]
    title = re.compile(rf"# OSU (?:{'|'.join(apis)})(?:-[A-Z]+(?: MANAGED)?)? "
                       rf"{re.escape(name)}\b")
    found = [line for line in lines if title.match(line)]
    if not found:
        other = next((line for line in lines if line.startswith("# OSU ")), None)
        raise NotThisOutput(f"not {check} output: no '# OSU {' or '.join(apis)} {name}' title "
                       f"({'its title is ' + repr(other) if other else 'first line '}"
                       f"{'' if other else _first_line(lines)})")
    if len(found) > 1:
        raise Unjudged(f"{check}: {len(found)} runs in one output; give one run")
    return found[0]


def omb_vendor(title: str) -> accelerators.Accelerator | None:
    """The vendor whose device buffers OMB's ``title`` names (its ``omb_title_tag``), or
    None for a run without -d."""
    head = title.split(" ")[2] if title.count(" ") >= 2 else ""
    return next((vendor for vendor in accelerators.VENDORS.values()
                 if head.endswith(vendor.omb_title_tag)), None)


def _omb_buffers(check: str, title: str, lines: list[str], params: dict[str, Any]) -> str:
    """The title (and OMB 7.4's buffer line) must show the buffers the run claims: a
    vendor's tag (-CUDA, -ROCM) for D-D, H-D, D-H and the xccl benchmarks; none for host
    buffers.  A host-buffer output judged as a D-D figure would otherwise pass as a
    device measurement.  Returns the title's API (MPI, or the collective library)."""
    api = title.split(" ")[2].split("-")[0]
    expected_api, name = _omb_api_name(check)
    xccl = expected_api is None
    buffers = params.get("buffers", "D-D" if xccl else "H-H")
    vendor = omb_vendor(title)
    tags = " or ".join(v.omb_title_tag.lstrip("-") for v in accelerators.VENDORS.values())
    shown = next((m for m in map(_OMB_BUFFERS.match, lines) if m), None)
    if shown and "-".join(shown.groups()) != buffers:
        flag = vendor.buffer_flag if vendor else \
            "|".join(v.buffer_flag for v in accelerators.VENDORS.values())
        raise SanityError(f"{check}: the output says {shown.string!r}; "
                          f"buffers={buffers} is -d {flag} {buffers.replace('-', ' ')}")
    if buffers == "H-H" and vendor and shown is None and "buffers" not in params:
        # A host collective (osu_allreduce, osu_alltoall) has no buffers to claim: its
        # -d run is sane and measured another way, never a failure of the node.
        raise Unjudged(f"{check}: the title {title!r} is a -d {vendor.buffer_flag} run "
                       f"(device buffers); the figures are host buffers: OMB without -d "
                       f"('# OSU {api} {name}')")
    if buffers == "H-H" and vendor and shown is None:
        raise SanityError(f"{check}: the title {title!r} is a -d {vendor.buffer_flag} run; "
                          f"host buffers (H-H) are OMB without -d: '# OSU {api} {name}'")
    if buffers != "H-H" and not vendor:
        what = f"buffers={buffers}" if "buffers" in params else f"{api} on GPUs"
        needs = " or ".join(
            f"'# OSU {v.collective if xccl else api}{v.omb_title_tag} {name}' (OMB run "
            f"with -d {v.buffer_flag} {buffers.replace('-', ' ')})"
            for v in accelerators.VENDORS.values())
        raise SanityError(f"{check}: the title {title!r} is not a {tags} run; {what} "
                          f"needs {needs}")
    if xccl and vendor and api != vendor.collective:
        raise SanityError(f"{check}: the title {title!r} names {api} with "
                          f"{vendor.omb_title_tag} buffers: OMB's {vendor.collective} build "
                          f"prints '# OSU {vendor.collective}{vendor.omb_title_tag} {name}'")
    return api


def _omb_cap(check: str, text_lines: list[str], rows: list[list[str]],
             sizes: list[int], params: dict[str, Any]) -> None:
    """Name OMB's own size cap when it is why sizes are missing."""
    seen = {int(row[0]) for row in rows}
    missing = [size for size in sizes if size not in seen]
    for line in text_lines:
        for cap in _OMB_CAPS:
            found = cap.search(line)
            if found and missing and missing[0] > int(found.group(1)):
                largest = sizes[-1]
                # alltoall's buffers hold a message per rank (check_mem_limit)
                ranks = params.get("nodes", 1) * params.get("ranks_per_node", 1)
                needed = largest * ranks if check == "osu_alltoall" else largest
                raise SanityError(
                    f"{check}: no line for message size {missing[0]}: OMB capped the "
                    f"messages at {found.group(1)} bytes ({found.group(0)!r}); "
                    f"run it with -M {needed} (--mem-limit) or more")


def _omb(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    title = _omb_title(check, lines)
    api = _omb_buffers(check, title, lines, params)
    body = lines[lines.index(title) + 1:]
    # A pasted session may run another benchmark after this one (EESSI's posts print
    # osu_bibw, then osu_latency): this run's table ends at the next OMB title.
    body = body[:next((i for i, line in enumerate(body) if line.startswith("# OSU ")),
                      len(body))]
    header = next((i for i, line in enumerate(body) if line.startswith("# Size")), None)
    if header is None:
        raise SanityError(f"output truncated: missing the '# Size' header of {check}")
    if benchmarks.CHECKS[check].collective:
        # OMB's xccl benchmarks print "#Using NCCL" (RCCL) once per rank, before the
        # title (c/xccl/util/osu_util_xccl_interface.c omb_xccl_interface_inject).
        ranks = sum(1 for line in lines if line == f"#Using {api}")
        _expect_count(check, "ranks", params["nodes"] * params["gpus_per_node"], ranks)
    rows = table_rows(body[header + 1:])
    # --validation (-c) adds a column of "Pass" or "Fail" (c/util/osu_util_mpi.h
    # VALIDATION_STATUS): a "Fail" is data the MPI delivered wrong, a broken run.
    failed = next((row for row in rows if "Fail" in row[1:]), None)
    if failed:
        raise SanityError(f"{check}: OMB's validation failed at message size {failed[0]} "
                          f"({' '.join(failed)!r})")
    sizes = benchmarks.expected_sizes(check, params)
    _omb_cap(check, lines, rows, sizes, params)
    values = _size_table(check, rows, 1, sizes)
    metric = benchmarks.CHECKS[check].metric
    found = omb_vendor(title)
    return Measurement(check, metric, UNITS[metric], values,
                       vendor=found.vendor if found else None)


# --- nccl-tests -------------------------------------------------------------------

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


def _nccl(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    headers = [i for i, line in enumerate(lines) if _nccl_header(line)]
    oobs = [m for m in map(_NCCL_OOB.match, lines) if m]
    known = headers or oobs or any(map(_NCCL_PREAMBLE.match, lines)) \
        or any(map(NCCL_RANK.match, lines))
    if not known:
        raise NotThisOutput(f"not an nccl-tests output: no '# Using devices', no '# size "
                            f"count type redop' header, no '# Out of bounds values' (first "
                            f"line {_first_line(lines)})")
    # Which test ran, before anything is counted: another test's output is never failed
    # for its ranks or its end.
    test = next(((m.group(1), repr(m.group(0))) for m in map(_NCCL_TEST.match, lines) if m),
                None)
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
    if not oobs:
        raise SanityError("output truncated: missing '# Out of bounds values'")
    avg = next((m for m in map(_NCCL_AVG.match, lines) if m), None)
    if avg is None:
        raise SanityError("output truncated: missing '# Avg bus bandwidth'")
    if not headers:
        raise SanityError("output truncated: missing the '# size count type redop' header")
    whole = any(line.startswith("# Using devices") for line in lines)
    method = _nccl_ranks(check, gpus, params, whole)
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
                _number(value, f"error at {row.size}")
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
            samples[name].append(_size_table(check, table, column, sizes)[last])
    values: Values = {name: statistics.median(found) for name, found in samples.items()}
    if len(sizes) > 1:
        # Over one size the average only repeats the mean of the two columns above.
        values["avg"] = _number(str(avg), "avg")
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
            samples[name].append(_size_table(check, table, column, sizes)[last])
    algbw = {name: metrics.convert(statistics.median(found), "GB/s", UNITS["bandwidth"])
             for name, found in samples.items() if name == "out_of_place"}
    return Measurement(check, "busbw", UNITS["busbw"], {}, extra={"bandwidth": algbw},
                       size=last, method=NCCL_ONE_RANK)


def _nccl_ranks(check: str, gpus: list[_NcclGpu], params: dict[str, Any],
                whole: bool = True) -> str | None:
    """The device lines must show nodes x gpus_per_node GPUs, gpus_per_node on each of
    ``nodes`` hosts.  The seeds run one MPI rank (one Pid) per GPU (-g 1 -t 1); a run
    where one process drove several is sane but measured another way: the sentence
    returned says how, and the command line that would compare.

    ``whole``: the list is there from its "# Using devices" line.  A paste that starts
    below it has lost the first lines; rank 0 prints them in rank order, so the last
    one still shows how many ranks ran (the highest rank + 1), but not where."""
    nodes, per_node = params["nodes"], params["gpus_per_node"]
    if not whole:
        if not gpus:
            raise Unjudged(f"{check}: no '#  Rank ... device' lines and no '# Using devices' "
                           f"(the paste leaves them out): cannot tell whether "
                           f"{nodes * per_node} ranks ran")
        _expect_count(check, "ranks", nodes * per_node, max(gpu.rank for gpu in gpus) + 1)
        return None
    ranks = sorted({gpu.rank for gpu in gpus})
    if ranks and len(ranks) != ranks[-1] + 1:
        return _nccl_elided_ranks(check, ranks, gpus, params)
    _expect_count(check, "ranks", nodes * per_node, len(ranks))
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
                       params: dict[str, Any]) -> str | None:
    """A rank list with gaps: a paste that left lines out (OCI's own published runs list
    ranks 0, 7, 8 and 15 of 16), since nccl-tests prints every rank's line in order.
    The highest rank still says how many ran: the claimed count is read; one above it
    is proof of more ranks; one below cannot tell (the last lines may be left out too)."""
    total = params["nodes"] * params["gpus_per_node"]
    if ranks[-1] + 1 > total:
        _expect_count(check, "ranks", total, ranks[-1] + 1)
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
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def _nccl_json(check: str, text: str, params: dict[str, Any]) -> Measurement:
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
                       f"(first line {_first_line(output_lines(text[:4096]))})") from None
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict) or not isinstance(doc.get("results"), list):
        raise NotThisOutput(f"{check}: a JSON without nccl-tests' 'config' and 'results': "
                       "not its -J output")
    if "out_of_bounds" not in doc or "average_bus_bandwidth" not in doc:
        raise SanityError(f"{check}: nccl-tests' JSON output ends before its "
                          "'out_of_bounds' and 'average_bus_bandwidth' (the run stopped)")
    try:
        per_process = int(config.get("nthreads", 1)) * int(config.get("ngpus", 1))
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


# --- Intel MPI Benchmarks ---------------------------------------------------------

_IMB_PROCESSES = re.compile(r"^#\s*#processes\s*=\s*(\d+)")
_IMB_FINALIZE = "# All processes entering MPI_Finalize"
#: The banner every run prints first: "#    Intel(R) MPI Benchmarks 2021.3, MPI-1 part"
#: ("Intel (R) MPI Benchmarks 4.1" in the older ones).
_IMB_BANNER = re.compile(r"^#\s*Intel\s?\(R\) MPI Benchmarks\b")


def _imb(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    name = benchmarks.CHECKS[check].title   # "# Benchmarking <name>"
    banners = sum(1 for line in lines if _IMB_BANNER.match(line))
    finals = sum(1 for line in lines if line.startswith(_IMB_FINALIZE))
    tables = _imb_tables(check, lines, name)
    if not (banners or finals or tables):
        raise NotThisOutput(f"not {check} output: no 'Intel(R) MPI Benchmarks' banner and no "
                       f"'# Benchmarking {name}' (first line {_first_line(lines)})")
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
    # PingPong always runs on 2 processes (others wait in MPI_Barrier); without
    # -npmin, Allreduce prints one table per process count: take the full run's.
    expected = 2 if check == "imb_pingpong" else params["nodes"] * params["ranks_per_node"]
    if expected not in tables:
        seen = ", ".join(str(n) for n in tables)
        raise SanityError(f"{check}: expected {expected} processes, saw {seen}")
    header, rows = tables[expected]
    sizes = benchmarks.expected_sizes(check, params)
    time_column = "t[usec]" if check == "imb_pingpong" else "t_avg[usec]"
    latency = _size_table(check, rows, _column(check, header, time_column), sizes)
    extra: dict[str, Values] = {}
    if check == "imb_pingpong":
        bandwidth = _size_table(check, rows, _column(check, header, "Mbytes/sec"), sizes)
        extra["bandwidth"] = {s: v for s, v in bandwidth.items() if s > 0}
    return Measurement(check, "latency", UNITS["latency"], latency, extra)


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
            elif header and _ROW.match(line) and len(line.split()) == len(header):
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


# --- STREAM -----------------------------------------------------------------------

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


def _stream(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    headers = [i for i, line in enumerate(lines) if _STREAM_HEADER.match(line)]
    versions = [line for line in lines if _STREAM_VERSION.match(line)]
    if not headers and not versions:
        raise NotThisOutput(f"not STREAM output: no 'STREAM version' line and no 'Function ... "
                       f"Rate' header (first line {_first_line(lines)})")
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
        values[kernel] = _number(found[0][1], kernel)
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
        if threads is None:
            raise SanityError("stream: no 'Number of Threads counted' line "
                              "(not an OpenMP build, or output truncated)")
        count = int(threads.group(1))
        requested = next((m for m in map(_STREAM_REQUESTED.match, lines) if m), threads)
        if int(requested.group(1)) != params["threads"]:
            # How many threads the run asked for is its method (OMP_NUM_THREADS), not the
            # node's fault: the figure of threads=N is another run.
            method = (f"STREAM ran {count} threads ({threads.group(0)!r}), where "
                      f"threads={params['threads']}: give --set threads={count} for the "
                      f"figure of its own thread count")
        else:
            # it asked for the figure's threads and fewer (or more) ran
            _expect_count(check, "threads", params["threads"], count)
    if not any(line.startswith("Solution Validates") for line in lines):
        raise SanityError("STREAM did not print 'Solution Validates'")
    return Measurement(check, "bandwidth", UNITS["bandwidth"], values, method=method)


# --- perftest (ib_write_bw, ib_write_lat) ------------------------------------------

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


def _perftest(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
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
                          f"(first line {_first_line(lines)})"))
    _expect_count(check, "runs (attempts)", params["attempts"], len(starts))
    runs = [lines[start:end] for start, end in zip(starts, starts[1:] + [len(lines)])]
    best = [_perftest_run(check, run, params) for run in runs]
    pick = max if check == "ib_write_bw" else min   # best of the attempts, as OCI retries
    size = params["size"]
    # GPUDirect RDMA moves the data between the NIC and a GPU: sane, but another path
    # than the host-memory runs the figures document.
    gpu = next(((line, vendor) for line in lines
                for vendor, banner in _PERFTEST_GPU_BUFFERS.items() if banner.match(line)),
               None)
    method = (f"the buffers were GPU memory ({gpu[0]!r}: perftest "
              f"--use_{accelerators.VENDORS[gpu[1]].buffer_flag}), where the figures are "
              f"host memory: to compare, run {check} without it" if gpu else None)
    return Measurement(check, benchmarks.CHECKS[check].metric,
                       "Gb/s" if check == "ib_write_bw" else "us", {size: pick(best)},
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
    """The judged value of one complete run: BW peak in Gb/s, or t_avg in us, at the
    size the figure documents (one row of a run with -s, or of an -a sweep)."""
    device = next((m.group(1) for m in map(_PERFTEST_DEVICE.search, lines) if m), None)
    if params.get("device") and device != params["device"]:
        raise SanityError(f"{check}: ran on device {device}, not {params['device']}")
    if check == "ib_write_bw":
        qps = next((m for m in map(_PERFTEST_QPS.match, lines) if m), None)
        _expect_count(check, "queue pairs", params["qps"], int(qps.group(1)) if qps else 0)
    header = next((i for i, line in enumerate(lines) if _PERFTEST_HEADER.match(line)), None)
    if header is None:
        raise SanityError(f"output truncated: missing the '#bytes #iterations' header of {check}")
    match = _PERFTEST_HEADER.match(lines[header])
    end = next((i for i, line in enumerate(lines) if i > header and _PERFTEST_RULE.match(line)),
               None)
    closed = end is not None
    rows = table_rows(lines[header + 1:end])
    if not closed:
        raise SanityError(f"output truncated: no closing line after the {check} results")
    if check == "ib_write_bw":
        if not match.group(2):
            raise Unjudged(f"{check}: the header {lines[header]!r} is not a bandwidth's")
        factor = _PERFTEST_GBITS.get(match.group(2))
        if factor is None:
            raise Unjudged(f"{check}: the header {lines[header]!r} is in {match.group(2)}/sec, "
                           "a unit this parser does not know")
        column = _PERFTEST_PEAK
    else:
        names = lines[header].split()
        if "t_avg[usec]" not in names:
            raise Unjudged(f"{check}: the header {lines[header]!r} has no t_avg[usec], "
                           "the column OCI's floor judges")
        factor, column = 1.0, names.index("t_avg[usec]")
    needed = max(column, _PERFTEST_AVERAGE) if check == "ib_write_bw" else column
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
    value = _number(row[column], size)
    if check == "ib_write_bw" and value == 0:
        # -D (duration) and --noPeak print "BW peak 0.00" (print_report_bw: peak_up is
        # !noPeak * ...) and the measured bandwidth as the average.
        value = _number(row[_PERFTEST_AVERAGE], size)
    return value * factor


# --- nvbandwidth and the pageable copy: this node's copy ceilings ------------------

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


def _nvbandwidth(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    gpus = params["gpus_per_node"]
    keys = [k for k in NVBANDWIDTH_KEYS if gpus > 1 or k not in _PEER_KEYS]
    where = nvbandwidth_gpus(gpus)
    if not any(line.startswith("Running ") for line in lines) \
            and not any(line.startswith(("nvbandwidth Version", "pageable ")) for line in lines):
        raise NotThisOutput(f"not nvbandwidth output: no 'Running <testcase>.' line "
                       f"(first line {_first_line(lines)})")
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
    return _number(value, f"{testcase} {source}->{target}")


def _pageable(check: str, lines: list[str], testcase: str, copy: tuple[int, int]) -> float:
    gpu = str(max(copy))
    direction = testcase.split()[1]
    for found in map(_PAGEABLE.match, lines):
        if found and found.group(1) == direction and found.group(2) == gpu:
            return _number(found.group(3), testcase)
    failed = next((line for line in lines if line.startswith("pageable_copy: ")), None)
    raise SanityError(f"{check}: {failed}" if failed else
                      f"{check}: no '{testcase} GPU {gpu}: ... GB/s' line "
                      "(python3 -m ocibench.node.pageable_copy)")


# --- BabelStream: the GPUs' memory bandwidth ----------------------------------------

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
    for number, line in enumerate(lines):
        found = _BABEL_TRIAD_BANDWIDTH.match(line)
        if found:
            printed.append((found.group(1), found.group(2)))
        csv = _BABEL_TRIAD_CSV.match(line)
        row = _BABEL_TRIAD_CSV_ROW.match(lines[number + 1]) if csv and number + 1 < len(lines) \
            else None
        if row:
            printed.append(("GB" if csv.group(1) == "gbytes" else "GiB", row.group(1)))
    if len(printed) != 1:
        raise SanityError(f"babelstream: a --triad-only run ('Running triad ... times') with "
                          f"{len(printed)} 'Bandwidth (GB/s):' lines, not one (an output cut "
                          "short, or two runs)")
    unit, value = printed[0]
    mbs = _number(value, "Triad") * _BABEL_MBS[unit.lower()]
    return Measurement(check, "bandwidth", UNITS["bandwidth"], {"Triad": mbs},
                       method=("a --triad-only run: its bandwidth is the mean of its runs "
                               "(total bytes over total time), the figures' the best run's "
                               "('Function MBytes/sec' table); run it without --triad-only"))


def _babelstream(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    if any(_BABEL_TRIAD_ONLY.match(line) for line in lines):
        return _babelstream_triad_only(check, lines)
    headers = [_BABEL_HEADER.match(line) or _BABEL_CSV_HEADER.match(line) for line in lines]
    headers = [found for found in headers if found]
    if not headers:
        if not any(_BABEL_BANNER.match(line) for line in lines):
            raise NotThisOutput(f"not BabelStream output: no 'BabelStream' banner and no "
                           f"'Function MBytes/sec' table (first line {_first_line(lines)})")
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
        _expect_count(check, "result tables (one per GPU: gpus)", params["gpus"], tables)
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
        values[kernel] = min(_number(value, kernel) for value in printed) * factor
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
    return _method_differs(check, fields)


# --- TransferBench p2p: copies between the GPUs of a node ---------------------------

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
_TB_COLUMNS = re.compile(r"^SRC\S*DST\s+(.*)$")


def _transferbench(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    starts = [i for i, line in enumerate(lines) if _TB_TITLE.match(line)]
    if not starts:
        raise NotThisOutput(f"not TransferBench p2p output: no 'Unidirectional copy peak "
                       f"bandwidth' or 'Bidirectional ...' title (first line "
                       f"{_first_line(lines)})")
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
                       method=_transferbench_method(check, lines))


#: The size of each copy, as the presets print it: p2p's "Bytes Per Direction 67108864"
#: (",67108864" with OUTPUT_TO_CSV), a2a's "- Copying 67108864 bytes between ..." and
#: "Summary: [67108864 bytes per Transfer]" (src/client/Presets/AllToAll.hpp).
_TB_BYTES = re.compile(r"^(?:Bytes Per Direction[ ,](\d+)|- Copying (\d+) bytes between"
                       r"|Summary: \[(\d+) bytes per Transfer\])")


def _transferbench_method(check: str, lines: list[str]) -> str | None:
    """How the run's copy size differs from the figures' command (its default size),
    quoting the line; None where it agrees or where the output does not print it."""
    expected = benchmarks.CHECKS[check].method["bytes"]
    found = next((m for m in map(_TB_BYTES.match, lines) if m), None)
    if found is None:
        return None
    size = int(next(group for group in found.groups() if group))
    if size == expected:
        return None
    return _method_differs(check, [f"copies of {size} bytes ({found.group(0)!r}), the "
                                   f"figures' {expected} (its default: run it without a "
                                   "size)"])


def _tb_slowest_pair(check: str, kind: str, section: list[str]) -> float:
    """The lowest GB/s of a copy (one direction) between two different GPUs."""
    if any(line.startswith("SRC") and "," in line for line in section):
        # OUTPUT_TO_CSV=1 (PeerToPeer.hpp): commas between the cells, and no averages
        raise Unjudged(f"{check}: the matrix is TransferBench's CSV (OUTPUT_TO_CSV=1), which "
                       "prints no averages; run it without OUTPUT_TO_CSV")
    header = next((m for m in map(_TB_COLUMNS.match, section) if m), None)
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
            value = _number(cell, f"GPU {source} {row.group(3)} GPU {index}")
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
    return _number(cells[labels.index("GPU->GPU")], f"{kind}directional GPU->GPU average")


# --- TransferBench a2a: every GPU copying to every other at once --------------------

TRANSFERBENCH_A2A_KEYS = benchmarks.TRANSFERBENCH_A2A_KEYS
#: The a2a preset's summary (ROCm/TransferBench: src/TransferBench.cpp RunAllToAll in
#: v1.52, src/client/Presets/AllToAll.hpp later): "Summary:" (later with the transfer
#: size after it), a SRC\DST matrix of GPUs with STotal and Actual columns, the RTotal
#: line, then printf("Average   bandwidth (GPU Timed): %8.3f GB/s").
_A2A_SUMMARY = re.compile(r"^Summary:")
_A2A_AVERAGE = re.compile(r"^Average\s+bandwidth \(GPU Timed\):\s*(\S+)\s+GB/s")
_A2A_ROW = re.compile(r"^GPU\s+(\d+)\s+(.*)$")


def _transferbench_a2a(check: str, lines: list[str], params: dict[str, Any]) -> Measurement:
    starts = [i for i, line in enumerate(lines) if _A2A_SUMMARY.match(line)]
    if not starts:
        raise NotThisOutput(f"not TransferBench a2a output: no 'Summary:' line (first line "
                       f"{_first_line(lines)})")
    if len(starts) > 1:
        raise Unjudged(f"{check}: {len(starts)} a2a summaries in one output; give one run")
    summary = lines[starts[0]:]
    header = next((m for m in map(_TB_COLUMNS.match, summary) if m), None)
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
            value = _number(cell, f"GPU {source} -> GPU {target}")
            slowest = value if slowest is None else min(slowest, value)
    average = next((m for m in map(_A2A_AVERAGE.match, summary) if m), None)
    if average is None:
        raise SanityError("output truncated: no 'Average bandwidth (GPU Timed)' line after "
                          "the a2a summary")
    if slowest is None:
        raise SanityError(f"{check}: no copy between two GPUs in the a2a matrix")
    values = {"avg": _number(average.group(1), "a2a average"), "min": slowest}
    return Measurement(check, "bandwidth", UNITS["bandwidth"],
                       {k: metrics.convert(v, "GB/s", UNITS["bandwidth"])
                        for k, v in values.items()},
                       method=_transferbench_method(check, lines))


#: The parser of each family (benchmarks.PARSERS); a check's entry names its family.
_PARSERS = {
    "omb": _omb,
    "nccl-tests": _nccl,
    "imb": _imb,
    "stream": _stream,
    "perftest": _perftest,
    "nvbandwidth": _nvbandwidth,
    "babelstream": _babelstream,
    "transferbench-p2p": _transferbench,
    "transferbench-a2a": _transferbench_a2a,
}
assert tuple(_PARSERS) == benchmarks.PARSERS
